//! PostgreSQL: a connection pool; each write is its own transaction (row locks and advisory locks
//! where two writers could race), and PostgreSQL itself groups the WAL flushes of concurrent commits.

use std::time::Duration;

use sqlx::AnyPool;
use sqlx::ConnectOptions;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};

use super::{Result, StoreError};

const MIGRATIONS: &[(i64, &str, &str)] = &[(
    1,
    "channel core",
    include_str!("migrations/postgres/0001_channel_core.sql"),
)];

pub(super) async fn open(url: &str) -> Result<AnyPool> {
    let options: AnyConnectOptions = url
        .parse()
        .map_err(|e: sqlx::Error| StoreError::Database(e.to_string()))?;
    let pool = AnyPoolOptions::new()
        .max_connections(32)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(options.disable_statement_logging())
        .await?;
    // The migrator takes an advisory lock, so replicas starting together apply each migration once.
    super::migrator(MIGRATIONS)
        .run(&pool)
        .await
        .map_err(|e| StoreError::Database(e.to_string()))?;
    Ok(pool)
}
