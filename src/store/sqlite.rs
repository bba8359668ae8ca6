//! SQLite: the database file in WAL mode with `synchronous = FULL`, a pool of readers, and the
//! group-commit writer on its own connection.

use std::time::Duration;

use sqlx::any::AnyConnectOptions;
use sqlx::{AnyConnection, ConnectOptions, Connection, Executor};

use super::readers::{Readers, ReadersConfig};
use super::writer::BatchWriter;
use super::{Result, StoreError};

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
];

pub(super) async fn open(url: &str) -> Result<(Readers, BatchWriter)> {
    let url = if url.contains('?') {
        url.to_owned()
    } else {
        format!("{url}?mode=rwc")
    };
    let options: AnyConnectOptions = url
        .parse()
        .map_err(|e: sqlx::Error| StoreError::Database(e.to_string()))?;
    let options = options.disable_statement_logging();

    let mut writer = AnyConnection::connect_with(&options).await?;
    for pragma in [
        "PRAGMA journal_mode = WAL",
        "PRAGMA synchronous = FULL",
        "PRAGMA foreign_keys = ON",
        "PRAGMA busy_timeout = 10000",
    ] {
        writer.execute(pragma).await?;
    }
    super::migrator(MIGRATIONS)
        .run(&mut writer)
        .await
        .map_err(|e| StoreError::Database(e.to_string()))?;

    // A local file does not hang up: its readers are never pinged.
    let pool = Readers::open(ReadersConfig {
        options,
        max: 4,
        acquire_timeout: Duration::from_secs(30),
        setup: &["PRAGMA busy_timeout = 10000"],
        ping_after: None,
    })
    .await?;

    Ok((
        pool,
        BatchWriter::start(writer, "BEGIN IMMEDIATE; SAVEPOINT job", true, None),
    ))
}
