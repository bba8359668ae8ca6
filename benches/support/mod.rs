//! What both benchmarks share: a throw-away PostgreSQL database when `LIAISON_BENCH_PG_URL` names
//! a server. Included with `#[path]` (a directory without `main.rs` is not a bench target).

use std::future::Future;

/// Runs `bench` with the URL of a fresh database on the server of `LIAISON_BENCH_PG_URL`, then
/// drops the database; does nothing when the variable is unset.
pub async fn with_postgres<F, Fut>(bench: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()>,
{
    let Ok(admin) = std::env::var("LIAISON_BENCH_PG_URL") else {
        return;
    };
    let name = format!("liaison_bench_{}", uuid::Uuid::now_v7().simple());
    sqlx::any::install_default_drivers();
    let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&admin)
        .await
        .expect("connect to LIAISON_BENCH_PG_URL");
    sqlx::Executor::execute(
        &mut conn,
        sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")),
    )
    .await
    .expect("create the bench database");
    let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b);
    bench(format!("{base}/{name}")).await;
    let _ = sqlx::Executor::execute(
        &mut conn,
        sqlx::AssertSqlSafe(format!("DROP DATABASE {name} WITH (FORCE)")),
    )
    .await;
}
