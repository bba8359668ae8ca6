//! The configuration page of `docs/reference/`: every field of the configuration types with its
//! default, its environment variable and its description, read from the comments of
//! `config/liaison.example.toml`. A field the types know that the example does not document, or
//! the reverse, keeps the page from being made.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::{GENERATED, append, cell};

/// The documented example configuration, the source of every field's description.
const EXAMPLE: &str = include_str!("../../../config/liaison.example.toml");

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
/// The configuration page, or the fields the types and the example disagree on.
pub(super) fn config_page() -> Result<String, Vec<String>> {
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
}
