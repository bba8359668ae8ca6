//! PostgreSQL: a pool for reads and the group-commit writer on its own connection. Several replicas
//! each have a writer; row locks (`FOR UPDATE`, the recipients' counters) and advisory locks keep
//! their transactions safe against each other. Every wait on the server has a deadline
//! ([`Deadlines`]), migrations' statements excepted. It depends only on `db`, `readers`, `writer`,
//! `migrations` and `error`, never on an operation or a building block.

use std::time::Duration;

use sqlx::any::AnyConnectOptions;
use sqlx::{AnyConnection, ConnectOptions, Connection};

use super::db::Pool;
use super::deadlines::{Deadlines, timed_out};
use super::error::{Result, StoreError};
use super::migrations::migrator;
use super::readers::{Readers, ReadersConfig};
use super::writer::{BatchWriter, connect_pg};

const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "channel core",
        include_str!("migrations/postgres/0001_channel_core.sql"),
    ),
    (
        2,
        "tasks",
        include_str!("migrations/postgres/0002_tasks.sql"),
    ),
    (
        3,
        "signing keys",
        include_str!("migrations/postgres/0003_signing_keys.sql"),
    ),
    (
        4,
        "approvals",
        include_str!("migrations/postgres/0004_approvals.sql"),
    ),
    (
        5,
        "console",
        include_str!("migrations/postgres/0005_console.sql"),
    ),
    (
        6,
        "outbox",
        include_str!("migrations/postgres/0006_outbox.sql"),
    ),
    (
        7,
        "remotes",
        include_str!("migrations/postgres/0007_remotes.sql"),
    ),
    (
        8,
        "remote tasks",
        include_str!("migrations/postgres/0008_remote_tasks.sql"),
    ),
    (
        9,
        "channel removal",
        include_str!("migrations/postgres/0009_channel_removal.sql"),
    ),
    (
        10,
        "claim candidates",
        include_str!("migrations/postgres/0010_claim_candidates.sql"),
    ),
    (
        11,
        "workspace",
        include_str!("migrations/postgres/0011_workspace.sql"),
    ),
    (
        12,
        "progress notes",
        include_str!("migrations/postgres/0012_progress.sql"),
    ),
    (
        13,
        "admin audit",
        include_str!("migrations/postgres/0013_admin_audit.sql"),
    ),
    (
        14,
        "webhook rotation",
        include_str!("migrations/postgres/0014_webhook_rotation.sql"),
    ),
    (
        15,
        "remote tasks by remote",
        include_str!("migrations/postgres/0015_remote_tasks_by_remote.sql"),
    ),
    (
        16,
        "claim fencing",
        include_str!("migrations/postgres/0016_claim_fencing.sql"),
    ),
    (
        17,
        "retention",
        include_str!("migrations/postgres/0017_retention.sql"),
    ),
    (
        18,
        "trace context",
        include_str!("migrations/postgres/0018_trace_context.sql"),
    ),
    (
        19,
        "connections",
        include_str!("migrations/postgres/0019_connections.sql"),
    ),
    (
        20,
        "personal sessions",
        include_str!("migrations/postgres/0020_personal_sessions.sql"),
    ),
    (
        21,
        "withdrawn approvals",
        include_str!("migrations/postgres/0021_withdrawn_approvals.sql"),
    ),
    (
        22,
        "tool confirmations",
        include_str!("migrations/postgres/0022_tool_confirmations.sql"),
    ),
    (
        23,
        "oauth",
        include_str!("migrations/postgres/0023_oauth.sql"),
    ),
    (
        25,
        "tool rules and confirmation links",
        include_str!("migrations/postgres/0025_tool_rules_and_links.sql"),
    ),
    (
        26,
        "claim function",
        include_str!("migrations/postgres/0026_claim_function.sql"),
    ),
    (
        28,
        "indexes the debug builds' plan check asked for",
        include_str!("migrations/postgres/0028_approvals_decided.sql"),
    ),
];

pub(super) async fn open(url: &str, deadlines: Deadlines) -> Result<(Pool, BatchWriter)> {
    let options: AnyConnectOptions = url
        .parse()
        .map_err(|e: sqlx::Error| StoreError::Database(e.to_string()))?;
    let pool = Readers::open(ReadersConfig {
        options: options.clone().disable_statement_logging(),
        max: 32,
        acquire_timeout: deadlines.acquire,
        connect_timeout: deadlines.connect,
        statement_timeout: deadlines.statement,
        // The server, a proxy or a firewall may close an idle connection.
        ping_after: Some(Duration::from_secs(10)),
    })
    .await?;
    // The migrator takes an advisory lock, so replicas starting together apply each migration once.
    // Migrations may take long: only opening their connection has a deadline.
    let mut migrating =
        tokio::time::timeout(deadlines.connect, AnyConnection::connect_with(&options))
            .await
            .map_err(|_| timed_out("to a new connection", deadlines.connect))??;
    migrator(MIGRATIONS)
        .run(&mut migrating)
        .await
        .map_err(|e| StoreError::Database(e.to_string()))?;
    migrating.close().await?;
    // The writer opens its own connection, on its own thread's runtime (see `BatchWriter::start`).
    let connect = connect_pg(options.clone(), deadlines);
    let writer =
        BatchWriter::start(connect, "BEGIN; SAVEPOINT job", Some(options), deadlines).await?;
    Ok((Pool::Pg(pool), writer))
}
