//! SQLite: the database file in WAL mode with `synchronous = FULL`, a pool of readers, and the
//! group-commit writer on its own connection and thread. It depends only on `db`, `writer`,
//! `migrations`, `deadlines` and `error`, never on an operation or a building block.

use std::path::PathBuf;

use sqlx::any::AnyConnectOptions;
use sqlx::{AnyConnection, ConnectOptions, Connection, Executor};

use super::db::{self, Conn, LitePool, Pool};
use super::deadlines::Deadlines;
use super::error::{Result, StoreError};
use super::migrations::migrator;
use super::writer::{BatchWriter, SQLITE_BEGIN};

const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "channel core",
        include_str!("migrations/sqlite/0001_channel_core.sql"),
    ),
    (2, "tasks", include_str!("migrations/sqlite/0002_tasks.sql")),
    (
        3,
        "signing keys",
        include_str!("migrations/sqlite/0003_signing_keys.sql"),
    ),
    (
        4,
        "approvals",
        include_str!("migrations/sqlite/0004_approvals.sql"),
    ),
    (
        5,
        "console",
        include_str!("migrations/sqlite/0005_console.sql"),
    ),
    (
        6,
        "outbox",
        include_str!("migrations/sqlite/0006_outbox.sql"),
    ),
    (
        7,
        "remotes",
        include_str!("migrations/sqlite/0007_remotes.sql"),
    ),
    (
        8,
        "remote tasks",
        include_str!("migrations/sqlite/0008_remote_tasks.sql"),
    ),
    (
        9,
        "channel removal",
        include_str!("migrations/sqlite/0009_channel_removal.sql"),
    ),
    (
        10,
        "claim candidates",
        include_str!("migrations/sqlite/0010_claim_candidates.sql"),
    ),
    (
        11,
        "workspace",
        include_str!("migrations/sqlite/0011_workspace.sql"),
    ),
    (
        12,
        "progress notes",
        include_str!("migrations/sqlite/0012_progress.sql"),
    ),
    (
        13,
        "admin audit",
        include_str!("migrations/sqlite/0013_admin_audit.sql"),
    ),
    (
        14,
        "webhook rotation",
        include_str!("migrations/sqlite/0014_webhook_rotation.sql"),
    ),
    (
        15,
        "remote tasks by remote",
        include_str!("migrations/sqlite/0015_remote_tasks_by_remote.sql"),
    ),
    (
        16,
        "claim fencing",
        include_str!("migrations/sqlite/0016_claim_fencing.sql"),
    ),
    (
        17,
        "retention",
        include_str!("migrations/sqlite/0017_retention.sql"),
    ),
    (
        18,
        "trace context",
        include_str!("migrations/sqlite/0018_trace_context.sql"),
    ),
    (
        19,
        "connections",
        include_str!("migrations/sqlite/0019_connections.sql"),
    ),
    (
        20,
        "personal sessions",
        include_str!("migrations/sqlite/0020_personal_sessions.sql"),
    ),
    (
        21,
        "withdrawn approvals",
        include_str!("migrations/sqlite/0021_withdrawn_approvals.sql"),
    ),
    (
        22,
        "tool confirmations",
        include_str!("migrations/sqlite/0022_tool_confirmations.sql"),
    ),
    (
        23,
        "oauth",
        include_str!("migrations/sqlite/0023_oauth.sql"),
    ),
    (
        25,
        "tool rules and confirmation links",
        include_str!("migrations/sqlite/0025_tool_rules_and_links.sql"),
    ),
    (
        28,
        "indexes the debug builds' plan check asked for",
        include_str!("migrations/sqlite/0028_approvals_decided.sql"),
    ),
];

pub(super) async fn open(url: &str, deadlines: Deadlines) -> Result<(Pool, BatchWriter)> {
    let path = file_path(url)?;
    let url = if url.contains('?') {
        url.to_owned()
    } else {
        format!("{url}?mode=rwc")
    };
    let options: AnyConnectOptions = url
        .parse()
        .map_err(|e: sqlx::Error| StoreError::Database(e.to_string()))?;
    let options = options.disable_statement_logging();

    // The migrations run through sqlx's migrator (the record of applied migrations stays the one
    // existing databases have); the store's own connections are rusqlite's (see `db`).
    let mut migrating = AnyConnection::connect_with(&options).await?;
    let busy = deadlines.statement.as_millis();
    for pragma in [
        "PRAGMA journal_mode = WAL".to_owned(),
        format!("PRAGMA busy_timeout = {busy}"),
    ] {
        migrating.execute(sqlx::AssertSqlSafe(pragma)).await?;
    }
    migrator(MIGRATIONS)
        .run(&mut migrating)
        .await
        .map_err(|e| StoreError::Database(e.to_string()))?;
    migrating.close().await?;

    // A lock another process holds (a backup, a shell) is waited for at most the statement
    // deadline, by the writer and the readers alike.
    let writer = db::connect(&path, false, deadlines.statement)?;
    // `temp_store = MEMORY`: a statement that changes several rows inside a savepoint keeps its
    // undo (the statement journal) in memory rather than in a temporary file created, written and
    // deleted in every batch; it is never needed after a crash (the WAL is what recovers).
    writer.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; \
         PRAGMA temp_store = MEMORY;",
    )?;
    let pool = LitePool::open(path, deadlines.statement)?;
    let connect = async move { Ok(Conn::Lite(writer)) };
    let writer = BatchWriter::start(connect, SQLITE_BEGIN, None, deadlines).await?;
    Ok((Pool::Lite(pool), writer))
}

/// The file of a `sqlite://PATH` (or `sqlite:PATH`) URL, without its `?options`.
pub(super) fn file_path(url: &str) -> Result<PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    let path = rest.split('?').next().unwrap_or_default();
    if path.is_empty() || path == ":memory:" {
        return Err(StoreError::Database(format!(
            "unsupported database URL {url:?}: SQLite needs a file, sqlite://PATH"
        )));
    }
    Ok(PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::file_path;

    #[test]
    fn a_sqlite_url_names_a_file() {
        assert_eq!(
            file_path("sqlite:///var/lib/liaison/liaison.db?mode=rwc").unwrap(),
            std::path::PathBuf::from("/var/lib/liaison/liaison.db")
        );
        assert_eq!(
            file_path("sqlite:data/l.db").unwrap(),
            std::path::PathBuf::from("data/l.db")
        );
        for url in ["sqlite::memory:", "sqlite://", "sqlite://?mode=rwc"] {
            assert!(file_path(url).is_err(), "{url}");
        }
    }
}
