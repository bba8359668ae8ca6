//! How list commands print: a table for people by default, the API's JSON with `--json` for
//! scripts. Every list command takes the same `--json` flag ([`Format`]) and describes its columns
//! once ([`Column`]); a cell is a field of the API's JSON, so the table and `--json` never disagree.

use clap::Args;
use serde_json::Value;

/// `--json`: print the API's JSON instead of a table.
#[derive(Debug, Clone, Copy, Args)]
pub struct Format {
    /// Print the API's JSON (for scripts) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A column: its header and how to read its cell from one row of the API's JSON.
pub(super) struct Column {
    pub header: &'static str,
    pub cell: fn(&Value) -> String,
}

/// A column showing the field `key` of each row (see [`cell`]).
macro_rules! col {
    ($header:literal, $key:literal) => {
        $crate::cli::table::Column {
            header: $header,
            cell: |row| $crate::cli::table::cell(&row[$key]),
        }
    };
    ($header:literal, $cell:expr) => {
        $crate::cli::table::Column {
            header: $header,
            cell: $cell,
        }
    };
}
pub(crate) use col;

/// Prints `answer` as JSON (`--json`), or the array under `key` as a table of `columns` (and
/// `(none)` when empty); `next` names a paging field whose value, when present, is printed after
/// the table so the next page can be asked for.
pub(super) fn print(
    format: Format,
    answer: &Value,
    key: &str,
    columns: &[Column],
    next: Option<(&str, &str)>,
) -> anyhow::Result<()> {
    if format.json {
        println!("{}", serde_json::to_string_pretty(answer)?);
        return Ok(());
    }
    let rows = answer[key].as_array().map(Vec::as_slice).unwrap_or(&[]);
    println!("{}", render(rows, columns));
    if let Some((field, flag)) = next
        && let Some(n) = answer.get(field).filter(|v| !v.is_null())
    {
        println!("(more: {flag} {})", cell(n));
    }
    Ok(())
}

/// The rows as a table: a header line, then one line per row, columns padded to their widest
/// cell, two spaces apart; trailing spaces trimmed.
pub(super) fn render(rows: &[Value], columns: &[Column]) -> String {
    if rows.is_empty() {
        return "(none)".to_owned();
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| columns.iter().map(|c| (c.cell)(row)).collect())
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .chain([c.header.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |values: Vec<&str>| -> String {
        let mut out = String::new();
        for (i, v) in values.iter().enumerate() {
            out.push_str(v);
            if i + 1 < values.len() {
                let pad = widths[i] - v.chars().count() + 2;
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.trim_end().to_owned()
    };
    let mut lines = vec![line(columns.iter().map(|c| c.header).collect())];
    lines.extend(
        cells
            .iter()
            .map(|r| line(r.iter().map(String::as_str).collect())),
    );
    lines.join("\n")
}

/// One JSON value as a cell: strings on one line (line breaks as spaces, invisible characters
/// as `\u{…}`, so a value cannot break the table's lines), arrays comma-joined, absent or null as
/// `-`, anything else as its JSON.
pub(super) fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".to_owned(),
        Value::String(s) if s.is_empty() => "-".to_owned(),
        Value::String(s) => crate::domain::text::one_line(s),
        Value::Array(items) if items.is_empty() => "-".to_owned(),
        Value::Array(items) => items.iter().map(cell).collect::<Vec<_>>().join(","),
        Value::Bool(b) => if *b { "yes" } else { "no" }.to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rows_line_up_under_their_headers() {
        let rows = [
            json!({"id": "alice", "name": "Alice", "tags": ["a", "b"]}),
            json!({"id": "bo", "name": null, "tags": []}),
        ];
        let columns = [col!("ID", "id"), col!("NAME", "name"), col!("TAGS", "tags")];
        assert_eq!(
            render(&rows, &columns),
            "ID     NAME   TAGS\nalice  Alice  a,b\nbo     -      -"
        );
        assert_eq!(render(&[], &columns), "(none)");
    }

    #[test]
    fn a_cell_cannot_break_the_line() {
        let c = cell(&json!("two\nlines\u{202e}"));
        assert!(!c.contains('\n') && !c.contains('\u{202e}'), "{c}");
    }
}
