//! The reference pages of `docs/reference/`, rendered from the code itself: the configuration
//! (the embedded defaults, the configuration types and the comments of
//! `config/liaison.example.toml`), the command line (clap's command tree), the MCP tools (the
//! server's tool router), the A2A errors (the error table) and the metrics (a fresh registry).
//!
//! It lives on the top floor because it reads every floor below: `tests/api/reference.rs`
//! compares each page with the checked-in file and rewrites them with `LIAISON_REGENERATE_DOCS=1`.
//! It renders; it changes nothing and serves nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

use clap::CommandFactory as _;

use super::Cli;
use crate::metrics::{Live, Metrics, RequestLabels};
use crate::wire::errors::{ErrorKind, SpecVersion};

/// The documented example configuration, the source of every field's description.
const EXAMPLE: &str = include_str!("../../config/liaison.example.toml");

/// The first line of every generated page.
const GENERATED: &str = "<!-- Generated from the code by `LIAISON_REGENERATE_DOCS=1 cargo test --test api reference`; do not edit. -->";

/// One generated page: its path under `docs/reference/` and its text.
pub struct Page {
    pub file: &'static str,
    pub text: String,
}

/// Every reference page, or what keeps the configuration page from being complete (a field the
/// types know that the example does not document, or the reverse).
pub fn pages() -> Result<Vec<Page>, Vec<String>> {
    Ok(vec![
        Page {
            file: "config.md",
            text: config_page()?,
        },
        Page {
            file: "cli.md",
            text: cli_page(),
        },
        Page {
            file: "mcp-tools.md",
            text: mcp_page(),
        },
        Page {
            file: "a2a-errors.md",
            text: a2a_errors_page(),
        },
        Page {
            file: "metrics.md",
            text: metrics_page(),
        },
    ])
}

// ---------------------------------------------------------------------------------------------
// Configuration

/// One field as `config/liaison.example.toml` documents it.
#[derive(Debug)]
struct DocField {
    /// Dotted path: `listen`, `inbox.max_wait_s`, `a2a.jwt.issuer`.
    path: String,
    /// The value the example shows, as TOML text.
    value: String,
    /// Shown commented out: an optional field without a default.
    optional: bool,
    description: String,
}

/// The example file, read as documentation: sections, their descriptions, and fields.
#[derive(Debug, Default)]
struct DocExample {
    /// Section path → its description (from the comment above or right after its header).
    sections: BTreeMap<String, String>,
    fields: Vec<DocField>,
}

/// What one line of the example is, once up to two `# ` comment marks are peeled off.
enum Line<'a> {
    Blank,
    Header(&'a str),
    Field(&'a str, &'a str),
    Comment(&'a str),
}

fn classify(line: &str) -> (Line<'_>, bool) {
    let mut text = line.trim();
    if text.is_empty() {
        return (Line::Blank, false);
    }
    let mut commented = false;
    loop {
        if let Some(name) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']'))
            && is_key_path(name)
        {
            return (Line::Header(name), commented);
        }
        if let Some((key, value)) = text.split_once(" = ")
            && is_key_path(key)
        {
            return (Line::Field(key, value.trim()), commented);
        }
        match text.strip_prefix('#') {
            Some(rest) => {
                text = rest.trim_start();
                commented = true;
            }
            None => return (Line::Comment(text), commented),
        }
    }
}

fn is_key_path(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
}

impl DocExample {
    /// Reads the example: a comment block right above a field describes it; one right above a
    /// header, or between a header and a blank line, describes the section. The file's own
    /// opening block (before the first blank line) describes the file, not a field. A section
    /// shown commented out (`# [tls]`) ends at the next blank line: what follows belongs to the
    /// section before it again.
    fn parse(text: &str) -> DocExample {
        let mut doc = DocExample::default();
        let mut section = String::new();
        let mut open_section = String::new();
        let mut pending: Vec<&str> = Vec::new();
        let mut fields_in_section = 0;
        for raw in text.lines() {
            let (line, commented) = classify(raw);
            match line {
                Line::Blank => {
                    if fields_in_section == 0 && !pending.is_empty() && !section.is_empty() {
                        let entry = doc.sections.entry(section.clone()).or_default();
                        append(entry, &pending.join(" "));
                    }
                    if section != open_section {
                        section = open_section.clone();
                        fields_in_section = 1;
                    }
                    pending.clear();
                }
                Line::Comment(c) => pending.push(c),
                Line::Header(name) => {
                    section = name.to_owned();
                    if !commented {
                        open_section = section.clone();
                    }
                    fields_in_section = 0;
                    doc.sections
                        .insert(section.clone(), pending.join(" ").trim().to_owned());
                    pending.clear();
                }
                Line::Field(key, value) => {
                    let optional = commented;
                    let path = if section.is_empty() {
                        key.to_owned()
                    } else {
                        format!("{section}.{key}")
                    };
                    doc.fields.push(DocField {
                        path,
                        value: value.to_owned(),
                        optional,
                        description: pending.join(" ").trim().to_owned(),
                    });
                    fields_in_section += 1;
                    pending.clear();
                }
            }
        }
        doc
    }

    fn field(&self, path: &str) -> Option<&DocField> {
        self.fields.iter().find(|f| f.path == path)
    }
}

fn append(into: &mut String, text: &str) {
    if !into.is_empty() {
        into.push(' ');
    }
    into.push_str(text.trim());
}

fn lookup<'a>(table: &'a toml::Table, path: &str) -> Option<&'a toml::Value> {
    let mut parts = path.split('.');
    let mut value = table.get(parts.next()?)?;
    for part in parts {
        value = value.as_table()?.get(part)?;
    }
    Some(value)
}

fn insert(table: &mut toml::Table, path: &str, value: toml::Value) {
    let parts: Vec<&str> = path.split('.').collect();
    let mut at = table;
    for part in &parts[..parts.len() - 1] {
        at = at
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()
            .expect("documented sections are tables");
    }
    at.insert(parts[parts.len() - 1].to_owned(), value);
}

/// A TOML value written as the example writes it (`key = value`'s right side).
fn parse_value(text: &str) -> Result<toml::Value, String> {
    let table: toml::Table = format!("v = {text}")
        .parse()
        .map_err(|e| format!("{text:?} is not a TOML value: {e}"))?;
    Ok(table["v"].clone())
}

/// The fields the configuration types know under `section` (the root when empty): serde names
/// them when the section is given one it does not know.
fn known_fields(base: &toml::Table, section: &str) -> Result<Vec<String>, String> {
    let mut probe = base.clone();
    let key = if section.is_empty() {
        "zz_not_a_field".to_owned()
    } else {
        format!("{section}.zz_not_a_field")
    };
    insert(&mut probe, &key, toml::Value::Integer(0));
    let Err(error) = crate::config::check_raw(probe) else {
        return Err(format!(
            "[{section}] accepts an unknown field: the reference cannot list its fields"
        ));
    };
    let Some((_, list)) = error.split_once("expected ") else {
        return Err(format!("[{section}]: unexpected refusal {error:?}"));
    };
    let list = list.lines().next().unwrap_or_default();
    Ok(list
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect())
}

/// The field's kind, from its value, and asked of the types where the value cannot tell: an
/// integer the types also take as "2m" is a duration.
fn kind_of(base: &toml::Table, path: &str, value: &toml::Value) -> String {
    match value {
        toml::Value::String(_) => "string".into(),
        toml::Value::Integer(_) => {
            let mut probe = base.clone();
            insert(&mut probe, path, toml::Value::String("2m".into()));
            if crate::config::check_raw(probe).is_ok() {
                "duration".into()
            } else {
                "integer".into()
            }
        }
        toml::Value::Float(_) => "float".into(),
        toml::Value::Boolean(_) => "boolean".into(),
        toml::Value::Array(items) => match items.first() {
            Some(first) => format!("list of {}", kind_of(base, path, first)),
            None => "list of strings".into(),
        },
        toml::Value::Table(t) => format!(
            "table {{ {} }}",
            t.keys().cloned().collect::<Vec<_>>().join(", ")
        ),
        toml::Value::Datetime(_) => "datetime".into(),
    }
}

fn variables(path: &str, value: &toml::Value) -> String {
    let var = format!("LIAISON_{}", path.replace('.', "__").to_uppercase());
    match value {
        toml::Value::Table(t) => t
            .keys()
            .map(|k| format!("`{var}__{}`", k.to_uppercase()))
            .collect::<Vec<_>>()
            .join(", "),
        _ => format!("`{var}`"),
    }
}

/// Checks the example against the types and the defaults, then renders the page.
fn config_page() -> Result<String, Vec<String>> {
    let doc = DocExample::parse(EXAMPLE);
    let defaults: toml::Table = crate::config::defaults()
        .parse()
        .expect("the embedded defaults parse");
    let mut problems = Vec::new();
    // Every documented value, on top of the defaults: a whole configuration, every section there.
    let mut base = defaults.clone();
    let mut values = BTreeMap::new();
    for field in &doc.fields {
        match parse_value(&field.value) {
            Ok(v) => {
                insert(&mut base, &field.path, v.clone());
                values.insert(field.path.clone(), v);
            }
            Err(e) => problems.push(format!("config/liaison.example.toml: {}: {e}", field.path)),
        }
        if field.description.is_empty() {
            problems.push(format!(
                "config/liaison.example.toml: {} has no comment describing it",
                field.path
            ));
        }
        match (lookup(&defaults, &field.path), field.optional) {
            (Some(default), false) if values.get(&field.path) != Some(default) => {
                problems.push(format!(
                    "config/liaison.example.toml shows {} = {} but the default is {default}",
                    field.path, field.value
                ))
            }
            (Some(_), true) => problems.push(format!(
                "config/liaison.example.toml shows {} commented out, but it has a default: show it",
                field.path
            )),
            _ => {}
        }
    }
    if let Err(e) = crate::config::check_raw(base.clone()) {
        problems.push(format!(
            "config/liaison.example.toml documents what the configuration types refuse: {e}"
        ));
    }
    // Walk the types: every field they know is documented, as a field or as a section.
    let mut known = BTreeSet::new();
    let mut sections = vec![String::new()];
    while let Some(section) = sections.pop() {
        match known_fields(&base, &section) {
            Ok(fields) => {
                for name in fields {
                    let path = if section.is_empty() {
                        name
                    } else {
                        format!("{section}.{name}")
                    };
                    if doc.field(&path).is_some() {
                        known.insert(path);
                    } else if doc.sections.contains_key(&path) {
                        sections.push(path);
                    } else {
                        problems.push(format!(
                            "the configuration types have `{path}`, but config/liaison.example.toml does not document it"
                        ));
                    }
                }
            }
            Err(e) => problems.push(e),
        }
    }
    for field in &doc.fields {
        if !known.contains(&field.path) {
            problems.push(format!(
                "config/liaison.example.toml documents `{}`, which the configuration types do not have",
                field.path
            ));
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }

    let mut out = String::new();
    let _ = writeln!(out, "{GENERATED}\n");
    out.push_str(
        "# Configuration reference\n\n\
         Every field liaison's configuration knows. Layers, lowest first: the embedded defaults, the \
         TOML file (`--config FILE` or `LIAISON_CONFIG`), the environment (`LIAISON_<FIELD>`, \
         `LIAISON_<SECTION>__<FIELD>`), then the command-line flags of `liaison serve`. A duration \
         is seconds, or a string with one unit: `\"30s\"`, `\"10m\"`, `\"24h\"`, `\"7d\"`. A list \
         given in the environment is comma-separated. The same text with every value, ready to \
         copy: [config/liaison.example.toml](../../config/liaison.example.toml); how to run it: \
         [operators.md](../operators.md).\n",
    );
    // Grouped by section, in the order sections first appear (the top level first).
    let section_of = |f: &DocField| {
        f.path
            .rsplit_once('.')
            .map(|(s, _)| s.to_owned())
            .unwrap_or_default()
    };
    let mut order: Vec<String> = vec![String::new()];
    for field in &doc.fields {
        let section = section_of(field);
        if !order.contains(&section) {
            order.push(section);
        }
    }
    let mut fields: Vec<&DocField> = doc.fields.iter().collect();
    fields.sort_by_key(|f| order.iter().position(|s| *s == section_of(f)));
    let mut current: Option<String> = None;
    for field in fields {
        let section = section_of(field);
        if current.as_ref() != Some(&section) {
            if section.is_empty() {
                out.push_str("\n## Top level\n\n");
            } else {
                let _ = writeln!(out, "\n## `[{section}]`\n");
            }
            if let Some(text) = doc.sections.get(&section).filter(|t| !t.is_empty()) {
                let _ = writeln!(out, "{text}\n");
            }
            out.push_str("| field | type | default | environment | description |\n");
            out.push_str("|---|---|---|---|---|\n");
            current = Some(section);
        }
        let value = &values[&field.path];
        let default = if field.optional {
            format!("unset (e.g. `{}`)", field.value)
        } else {
            format!("`{}`", field.value)
        };
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} |",
            field.path,
            kind_of(&base, &field.path, value),
            cell(&default),
            variables(&field.path, value),
            cell(&field.description),
        );
    }
    Ok(out)
}

/// Text fit for one Markdown table cell: no pipe ends the cell, no `<name>` reads as HTML.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('\n', " ")
}

// ---------------------------------------------------------------------------------------------
// Command line

fn cli_page() -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{GENERATED}\n");
    out.push_str(
        "# Command-line reference\n\n\
         Every command and flag of `liaison`, as `liaison help COMMAND` prints them. Flags that \
         name an environment variable take their value from it when not given.\n",
    );
    let root = Cli::command();
    command(&mut out, &root, "liaison");
    out
}

fn command(out: &mut String, cmd: &clap::Command, path: &str) {
    if cmd.is_hide_set() {
        return;
    }
    let _ = writeln!(out, "\n## `{path}`\n");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{}\n", about.to_string().trim());
    }
    let args: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
        .collect();
    if !args.is_empty() {
        out.push_str("| argument | description |\n|---|---|\n");
        for arg in args {
            let _ = writeln!(out, "| {} | {} |", arg_name(arg), cell(&arg_help(arg)));
        }
    }
    let subs: Vec<&clap::Command> = cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help")
        .collect();
    if !subs.is_empty() {
        if !out.ends_with("\n\n") {
            out.push('\n');
        }
        out.push_str("Commands: ");
        let names: Vec<String> = subs
            .iter()
            .filter(|s| !s.is_hide_set())
            .map(|s| {
                let full = format!("{path} {}", s.get_name());
                format!("[`{}`](#{})", s.get_name(), slug(&format!("`{full}`")))
            })
            .collect();
        let _ = writeln!(out, "{}.", names.join(", "));
        for sub in subs {
            command(out, sub, &format!("{path} {}", sub.get_name()));
        }
    }
}

fn arg_name(arg: &clap::Arg) -> String {
    let value = arg
        .get_value_names()
        .map(|names| {
            names
                .iter()
                .map(|n| format!("<{n}>"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| format!("<{}>", arg.get_id().as_str().to_uppercase()));
    let takes_value = arg.get_action().takes_values();
    if arg.is_positional() {
        return format!("`{value}`");
    }
    let mut forms = Vec::new();
    if let Some(short) = arg.get_short() {
        forms.push(format!("-{short}"));
    }
    if let Some(long) = arg.get_long() {
        forms.push(format!("--{long}"));
    }
    let flag = forms.join(", ");
    if takes_value {
        format!("`{flag} {value}`")
    } else {
        format!("`{flag}`")
    }
}

fn arg_help(arg: &clap::Arg) -> String {
    let mut text = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string().trim().to_owned())
        .unwrap_or_default();
    let mut notes = Vec::new();
    if arg.is_required_set() {
        notes.push("required".to_owned());
    }
    let possible: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    if !possible.is_empty() && arg.get_action().takes_values() {
        notes.push(format!("one of {}", possible.join(", ")));
    }
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| format!("`{}`", v.to_string_lossy()))
        .collect();
    if !defaults.is_empty() {
        notes.push(format!("default {}", defaults.join(", ")));
    }
    if let Some(env) = arg.get_env() {
        notes.push(format!("env `{}`", env.to_string_lossy()));
    }
    if !notes.is_empty() {
        append(&mut text, &format!("({})", notes.join("; ")));
    }
    text.replace("\n\n", "<br><br>").replace('\n', " ")
}

/// GitHub's anchor for a heading: lower case, spaces to hyphens, punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// MCP tools

fn mcp_page() -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{GENERATED}\n");
    out.push_str(
        "# MCP tools reference\n\n\
         Every tool `/mcp` (and `liaison mcp --stdio`) lists, with its description, its \
         annotations and the JSON Schema of its arguments, as the server's tool router declares \
         them. How to connect: [members.md](../members.md); the MCP front's decisions: \
         [src/mcp/README.md](../../src/mcp/README.md).\n",
    );
    for tool in crate::mcp::tools::Tools::router().list_all() {
        let _ = writeln!(out, "\n## `{}`\n", tool.name);
        if let Some(description) = &tool.description {
            let _ = writeln!(out, "{}\n", description.trim());
        }
        if let Some(annotations) = &tool.annotations
            && let Ok(serde_json::Value::Object(map)) = serde_json::to_value(annotations)
            && !map.is_empty()
        {
            let list: Vec<String> = map.iter().map(|(k, v)| format!("`{k}`: `{v}`")).collect();
            let _ = writeln!(out, "Annotations: {}.\n", list.join(", "));
        }
        let schema =
            serde_json::to_string_pretty(&*tool.input_schema).expect("a JSON object serializes");
        let _ = writeln!(out, "Input schema:\n\n```json\n{schema}\n```");
    }
    out
}

// ---------------------------------------------------------------------------------------------
// A2A errors

fn a2a_errors_page() -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{GENERATED}\n");
    out.push_str(
        "# A2A errors reference\n\n\
         Every error an A2A binding answers with, from the one error table of the code: its \
         JSON-RPC code, its HTTP status (HTTP+JSON) and gRPC status code, and the \
         `google.rpc.ErrorInfo` reason (domain `a2a-protocol.org`) every binding carries. The \
         statuses follow A2A v1.0.1 unless `[a2a] spec_version = \"1.0.0\"`, whose statuses are in \
         the last two columns. More: [a2a-clients.md](../a2a-clients.md).\n\n\
         | error | reason | JSON-RPC | HTTP | gRPC | HTTP (1.0.0) | gRPC (1.0.0) | message |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for kind in ErrorKind::ALL {
        let now = kind.wire(SpecVersion::V1_0_1);
        let old = kind.wire(SpecVersion::V1_0_0);
        let _ = writeln!(
            out,
            "| `{kind:?}` | `{}` | `{}` | {} | `{}` | {} | `{}` | {} |",
            now.reason,
            now.jsonrpc_code,
            now.http_status.as_u16(),
            grpc_name(now.grpc_code),
            old.http_status.as_u16(),
            grpc_name(old.grpc_code),
            cell(kind.default_message()),
        );
    }
    out
}

/// `FailedPrecondition` → `FAILED_PRECONDITION (9)`, as gRPC's documentation names codes.
fn grpc_name(code: tonic::Code) -> String {
    let mut name = String::new();
    for (i, c) in format!("{code:?}").chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    format!("{name} ({})", code as i32)
}

// ---------------------------------------------------------------------------------------------
// Metrics

fn metrics_page() -> String {
    // A registry of its own, with one sample in every family whose label sets appear only when
    // something happens, so each family shows its labels.
    let metrics = Metrics::new();
    metrics.request(
        RequestLabels {
            front: "a2a",
            method: "POST".into(),
            route: "/a2a/jsonrpc".into(),
            outcome: "ok",
        },
        Duration::from_millis(1),
    );
    metrics.retention_purged("threads", 0);
    let text = metrics.render(&Live::default());
    let mut families: BTreeMap<String, (String, String, BTreeSet<String>)> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            families.entry(name.to_owned()).or_default().0 = help.to_owned();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            families.entry(name.to_owned()).or_default().1 = kind.to_owned();
        } else if !line.starts_with('#') && !line.is_empty() {
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            let Some(family) = families
                .keys()
                .filter(|f| name.starts_with(f.as_str()))
                .max_by_key(|f| f.len())
                .cloned()
            else {
                continue;
            };
            if let Some((labels, _)) = line.split_once('{').and_then(|(_, r)| r.split_once('}')) {
                for pair in labels.split("\",") {
                    if let Some((key, _)) = pair.split_once('=')
                        && key != "le"
                    {
                        families
                            .entry(family.clone())
                            .or_default()
                            .2
                            .insert(key.into());
                    }
                }
            }
        }
    }
    let mut out = String::new();
    let _ = writeln!(out, "{GENERATED}\n");
    out.push_str(
        "# Metrics reference\n\n\
         Every metric `GET /metrics` serves (OpenMetrics text), from the process's registry: its \
         name, type, help and labels. A counter's samples carry the suffix `_total`, a \
         histogram's `_bucket`, `_sum` and `_count`. Scraping, dashboards and alerts: \
         [operators.md](../operators.md).\n\n\
         | metric | type | labels | help |\n|---|---|---|---|\n",
    );
    for (name, (help, kind, labels)) in &families {
        let labels = if labels.is_empty() {
            "—".to_owned()
        } else {
            labels
                .iter()
                .map(|l| format!("`{l}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(out, "| `{name}` | {kind} | {labels} | {} |", cell(help));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_reads_as_sections_and_fields_with_their_comments() {
        let doc = DocExample::parse(
            "# The file.\n\n# Where.\ndata_dir = \"x\"\n\n[inbox]\n# Longest.\nmax_wait_s = 50\n\n\
             # The issuer.\n# [a2a.jwt]\n# Who.\n# issuer = \"i\"\n# # Other.\n# # jwks_file = \"f\"\n",
        );
        let paths: Vec<_> = doc
            .fields
            .iter()
            .map(|f| (f.path.as_str(), f.optional, f.description.as_str()))
            .collect();
        assert_eq!(
            paths,
            [
                ("data_dir", false, "Where."),
                ("inbox.max_wait_s", false, "Longest."),
                ("a2a.jwt.issuer", true, "Who."),
                ("a2a.jwt.jwks_file", true, "Other."),
            ]
        );
        assert_eq!(doc.sections["a2a.jwt"], "The issuer.");
    }

    #[test]
    fn headings_slug_as_github_does() {
        assert_eq!(slug("`liaison token issue`"), "liaison-token-issue");
        assert_eq!(
            slug("Approvals: a human says yes"),
            "approvals-a-human-says-yes"
        );
    }
}
