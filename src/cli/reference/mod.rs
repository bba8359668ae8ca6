//! The reference pages of `docs/reference/`, rendered from the code itself: the configuration
//! (the embedded defaults, the configuration types and the comments of
//! `config/liaison.example.toml`), the command line (clap's command tree), the MCP tools (the
//! server's tool router), the A2A errors (the error table) and the metrics (a fresh registry).
//!
//! It lives on the top floor because it reads every floor below: `tests/api/reference.rs`
//! compares each page with the checked-in file and rewrites them with `LIAISON_REGENERATE_DOCS=1`.
//! It renders; it changes nothing and serves nothing.

mod config;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

use clap::CommandFactory as _;

use self::config::config_page;
use super::Cli;
use crate::metrics::{Live, Metrics, RequestLabels};
use crate::wire::errors::{ErrorKind, SpecVersion};

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

fn append(into: &mut String, text: &str) {
    if !into.is_empty() {
        into.push(' ');
    }
    into.push_str(text.trim());
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
    fn headings_slug_as_github_does() {
        assert_eq!(slug("`liaison token issue`"), "liaison-token-issue");
        assert_eq!(
            slug("Approvals: a human says yes"),
            "approvals-a-human-says-yes"
        );
    }
}
