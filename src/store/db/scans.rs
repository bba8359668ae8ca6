//! The class behind three defects of issue 49 — a statement filtering a table that grows with the
//! server's history by something its indexes do not lead with, so that every call reads the whole
//! table — closed where every SQLite statement passes: in debug builds (every test, and the binary
//! the interop suite runs), a statement is checked when its plan is first made on a thread, and
//! one whose plan reads a whole [`GROWING`] table fails with an error naming the statement and the
//! plan line (`EXPLAIN QUERY PLAN`'s `SCAN` of the table, or of one of its indexes but a partial
//! one: a partial index holds only the live rows, such as `threads_open`), and so does one that
//! searches such a table by its owner alone (`person_id = ?`, `channel = ?`: everything a person
//! ever received), constrained by none of the [`BOUNDING`] columns.
//!
//! A statement whose scan is bounded some other way (it reads from one end and stops at a page or
//! a batch, or counts a table that retention keeps short) says so in its text, with a comment
//! starting [`SCAN`] and giving the reason; the check then lets it be. Release builds check nothing.
//!
//! Why only SQLite: SQLite's planner decides from the schema alone (the store runs no `ANALYZE`),
//! so the plan a test sees is the plan every database of that schema gets. PostgreSQL's planner
//! chooses a sequential scan of a small table on purpose. Both backends have the same indexes
//! (the migrations of each are written side by side), so a statement that searches on SQLite has
//! an index to search on PostgreSQL.

use super::super::error::{Result, StoreError};

/// Tables with a row per message, task event, receipt or entry of a log: they grow with the
/// server's history, never with its directory. A full read of one is a cost that grows for ever.
pub(super) const GROWING: &[&str] = &[
    "approvals",
    "audit_log",
    "deliveries",
    "delivery_attempts",
    "inbox_entries",
    "messages",
    "progress_notes",
    "receipts",
    "remote_tasks",
    "session_commands",
    "task_events",
    "thread_traces",
    "threads",
    "tool_confirmations",
];

/// How the comment starts that a statement carries when its scan is bounded otherwise
/// (`/* scan: why */`).
pub(super) const SCAN: &str = "/* scan: ";

/// Fails when `statement`'s plan reads a whole [`GROWING`] table (see the module's docs).
pub(super) fn check(conn: &rusqlite::Connection, statement: &str) -> Result<()> {
    if statement.contains(SCAN) {
        return Ok(());
    }
    let aliases = aliases(statement);
    if aliases.is_empty() {
        return Ok(());
    }
    let mut explain = conn.prepare(&format!("EXPLAIN QUERY PLAN {statement}"))?;
    // Unbound parameters are NULL: the plan does not depend on them (the store sets QPSG).
    let mut rows = explain.raw_query();
    while let Some(row) = rows.next()? {
        let detail: String = row.get(3)?;
        if let Some(search) = detail.strip_prefix("SEARCH ") {
            let name = search.split(' ').next().unwrap_or(search);
            if let Some((_, table)) = aliases.iter().find(|(alias, _)| alias == name)
                && !bounded(search)
            {
                return Err(StoreError::Database(format!(
                    "this statement reads all of {table} that one owner (a person, a channel, an \
                     author) ever had, which grows with the server's history (plan: {detail}); \
                     filter it by a thread, a message, a sequence or a time as well, or say why \
                     its read is bounded in a comment {SCAN}…*/: {statement}"
                )));
            }
            continue;
        }
        let Some(scan) = detail.strip_prefix("SCAN ") else {
            continue;
        };
        let (name, rest) = scan.split_once(' ').unwrap_or((scan, ""));
        let Some((_, table)) = aliases.iter().find(|(alias, _)| alias == name) else {
            continue;
        };
        if let Some(index) = rest
            .strip_prefix("USING INDEX ")
            .or_else(|| rest.strip_prefix("USING COVERING INDEX "))
            && partial(conn, index.split(' ').next().unwrap_or(index))?
        {
            continue;
        }
        return Err(StoreError::Database(format!(
            "this statement reads the whole of {table}, a table that grows with the server's \
             history (plan: {detail}); filter it by the leading column of one of its indexes, or \
             say why its scan is bounded in a comment {SCAN}…*/: {statement}"
        )));
    }
    Ok(())
}

/// Columns that bound what a search of a growing table reads: a key, a thread, a message, a
/// position in a sequence, a time. A search constrained by none of them (by `person_id` or
/// `channel` alone) reads everything its owner ever had.
///
/// A `state` counts: the store searches by it for the live rows (`pending`, `open`), which
/// settle and leave. A personal session's commands (`session_id`) end with the session.
const BOUNDING: &[&str] = &[
    "rowid",
    "state",
    "session_id",
    "pickup_by",
    "next_check_at",
    "id",
    "thread_id",
    "message_id",
    "delivery_id",
    "approval_id",
    "seq",
    "position",
    "event_seq",
    "idempotency_key",
    "fingerprint",
    "created_at",
    "updated_at",
    "decided_at",
    "expires_at",
    "finished_at",
    "next_attempt_at",
    "at",
];

/// Whether a plan's `SEARCH` line (after `SEARCH `) constrains a [`BOUNDING`] column.
fn bounded(search: &str) -> bool {
    // `t USING INDEX i (a=? AND b>?)`, perhaps followed by `LEFT-JOIN`.
    let Some(constraints) = search
        .split_once(" (")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(inside, _)| inside)
    else {
        // No constraint list: an automatic index or a subquery; nothing to judge.
        return true;
    };
    // A row value (`(created_at,id)>(?,?)`, a keyset page) is bounded by its first column.
    constraints.split(" AND ").any(|c| {
        let c = c.trim_start_matches('(');
        let column = c.split(['=', '<', '>', ' ', ',']).next().unwrap_or(c);
        BOUNDING.contains(&column)
    })
}

/// Whether `index` is a partial index (`CREATE INDEX … WHERE …`).
fn partial(conn: &rusqlite::Connection, index: &str) -> Result<bool> {
    let sql: Option<String> = conn
        .query_row(
            "SELECT sql FROM sqlite_schema WHERE type = 'index' AND name = ?1",
            [index],
            |row| row.get(0),
        )
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })?;
    Ok(sql.is_some_and(|sql| sql.to_ascii_uppercase().contains(" WHERE ")))
}

/// The names the plan may give each [`GROWING`] table `statement` reads: the table's own, and
/// the alias it is given (`FROM inbox_entries e`, `JOIN messages AS m`).
fn aliases(statement: &str) -> Vec<(String, &'static str)> {
    let tokens = tokens(statement);
    let mut found = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let Some(table) = GROWING.iter().find(|t| t.eq_ignore_ascii_case(token)) else {
            continue;
        };
        // `x.threads` is a column, not the table.
        if i > 0 && tokens[i - 1] == "." {
            continue;
        }
        found.push(((*table).to_owned(), *table));
        let alias = match tokens.get(i + 1).map(String::as_str) {
            Some(a) if a.eq_ignore_ascii_case("as") => tokens.get(i + 2),
            Some(a) if identifier(a) && !keyword(a) => tokens.get(i + 1),
            _ => None,
        };
        if let Some(alias) = alias {
            found.push((alias.clone(), *table));
        }
    }
    found
}

/// The statement's words and punctuation, its string literals and comments left out.
fn tokens(statement: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = statement.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            c if c.is_ascii_alphanumeric() || c == '_' => {
                let mut word = String::from(c);
                while let Some(&c) = chars.peek() {
                    if !(c.is_ascii_alphanumeric() || c == '_') {
                        break;
                    }
                    word.push(c);
                    chars.next();
                }
                out.push(word);
            }
            c if c.is_whitespace() => {}
            c => out.push(c.to_string()),
        }
    }
    out
}

fn identifier(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
}

/// Words that may follow a table's name and are not an alias.
fn keyword(token: &str) -> bool {
    const KEYWORDS: &[&str] = &[
        "where",
        "join",
        "inner",
        "left",
        "cross",
        "natural",
        "on",
        "using",
        "set",
        "order",
        "group",
        "limit",
        "values",
        "default",
        "select",
        "union",
        "except",
        "intersect",
        "returning",
        "indexed",
        "not",
        "window",
        "having",
        "do",
        "as",
    ];
    KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> rusqlite::Connection {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE threads (id TEXT PRIMARY KEY, state TEXT, created_at INTEGER);
             CREATE INDEX threads_open ON threads (created_at, id) WHERE state = 'open';
             CREATE TABLE inbox_entries (person_id TEXT, thread_id TEXT, message_id TEXT,
                 seq INTEGER, PRIMARY KEY (person_id, seq));
             CREATE INDEX inbox_entries_thread ON inbox_entries (thread_id, person_id);
             CREATE TABLE persons (id TEXT PRIMARY KEY, name TEXT);
             CREATE TABLE receipts (person_id TEXT, consumer TEXT, seq INTEGER,
                 PRIMARY KEY (person_id, consumer, seq));",
        )
        .unwrap();
        conn
    }

    #[test]
    fn a_read_of_a_whole_growing_table_fails_and_names_it() {
        let conn = db();
        for whole in [
            // By message alone: no index leads with it (issue 49's `message_readers`).
            "SELECT person_id FROM inbox_entries WHERE message_id = $1",
            "SELECT e.person_id FROM inbox_entries e WHERE e.message_id = $1",
            "SELECT COUNT(*) FROM inbox_entries AS e",
            "SELECT t.id FROM threads t WHERE EXISTS (SELECT 1 FROM inbox_entries e \
             WHERE e.thread_id = t.id AND e.person_id = $1)",
            "UPDATE inbox_entries SET seq = 0 WHERE message_id = $1",
            // A person's whole inbox (issue 49's `addressed_to`, by person and message).
            "SELECT 1 FROM inbox_entries WHERE person_id = $1 AND message_id = $2",
            // Every receipt of the person for each entry, the key's middle column unmatched.
            "SELECT r.seq FROM inbox_entries e LEFT JOIN receipts r ON r.person_id = e.person_id \
             AND r.seq = e.seq WHERE e.thread_id = $1",
        ] {
            let e = check(&conn, whole).unwrap_err().to_string();
            assert!(
                e.contains("reads the whole of") || e.contains("ever had"),
                "{whole}: {e}"
            );
        }
    }

    #[test]
    fn searches_partial_indexes_small_tables_and_marked_reads_pass() {
        let conn = db();
        for fine in [
            "SELECT seq FROM inbox_entries WHERE person_id = $1 AND seq > $2 ORDER BY seq LIMIT 5",
            "SELECT e.person_id FROM inbox_entries e WHERE e.thread_id = $1 AND e.message_id = $2",
            // The open threads only: bounded by what is open, not by history.
            "SELECT id FROM threads WHERE state = 'open' ORDER BY created_at, id LIMIT 20",
            // A keyset page of them: a row value bounded by its first column.
            "SELECT id FROM threads WHERE state = 'open' AND (created_at, id) > ($1, $2) \
             ORDER BY created_at, id LIMIT 20",
            "SELECT t.id FROM threads t WHERE t.state = 'open' AND EXISTS (SELECT 1 FROM \
             inbox_entries e WHERE e.thread_id = t.id AND e.person_id = $1)",
            // The directory is paged elsewhere; it does not grow with traffic.
            "SELECT id FROM persons WHERE name = $1",
            "SELECT COUNT(*) FROM inbox_entries /* scan: a test */",
            "INSERT INTO inbox_entries (person_id, thread_id, message_id, seq) VALUES ($1, $2, $3, $4)",
        ] {
            check(&conn, fine).unwrap_or_else(|e| panic!("{fine}: {e}"));
        }
    }

    #[test]
    fn aliases_are_found_and_columns_are_not_tables() {
        let found = aliases(
            "SELECT m.threads FROM messages m JOIN threads AS t ON t.id = m.thread_id, \
             inbox_entries WHERE 'threads x' = $1",
        );
        let names: Vec<&str> = found.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(names, ["messages", "m", "threads", "t", "inbox_entries"]);
    }
}
