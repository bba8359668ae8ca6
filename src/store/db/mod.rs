//! One way to write a statement for both backends, and two ways to run it.
//!
//! The store's SQL is written once (`$1` placeholders work on both backends) and run through
//! [`query`]: `query(sql).bind(v)….fetch_optional(executor)`, where the executor is the writer's
//! transaction ([`Conn`]) or the read pool ([`Pool`]).
//!
//! - **PostgreSQL** runs it through sqlx (`Any` driver), as before.
//! - **SQLite** runs it through rusqlite, synchronously, on the calling thread: the writer's
//!   thread for a write, the caller's for a read. sqlx's SQLite driver gives every connection a
//!   thread of its own and hands each call to it and its rows back over channels (two context
//!   switches a call); at a few calls per request those hand-offs were the largest cost of an
//!   intake (`perf`: `finish_task_switch` around flume's channels, 31% of the server's samples
//!   at 64 in flight). A read here is a few microseconds of SQLite on a runtime thread; the reads
//!   on the request paths are single-row lookups and `LIMIT`ed pages over indexes, and SQLite in
//!   WAL mode never makes a reader wait for the writer.
//!
//! A call may hold several statements separated by `;` on SQLite (their numbered parameters are
//! shared, and the rows they change are counted together); PostgreSQL takes one per call.
//! Statements are prepared once per connection and kept (rusqlite's statement cache).
//!
//! This file holds the executors ([`Conn`], [`Pool`]) and the PostgreSQL way to run a statement;
//! `query.rs` builds the statement, `row.rs` decodes the rows, `lite.rs` is SQLite's way to run
//! it. The layer knows SQL only as text to run: it must not depend on any file of the store but
//! [`crate::store::readers`] (PostgreSQL's read connections) and [`crate::store::error`].

mod lite;
mod query;
mod row;
#[cfg(debug_assertions)]
mod scans;

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use sqlx::AnyConnection;

pub(crate) use lite::{LitePool, connect};
use query::{Done, Output, Value, Want};
pub(crate) use query::{Query, query};
pub(crate) use row::Row;

use super::error::{Result, StoreError};
use super::readers::Readers;

/// A future borrowing the transaction's connection.
pub(crate) type BoxFut<'c, T> = Pin<Box<dyn Future<Output = T> + Send + 'c>>;

impl Query {
    pub(crate) async fn execute<'c, E: Executor<'c>>(self, executor: E) -> Result<Done> {
        match executor.run(self, Want::Nothing).await? {
            Output::Done(done) => Ok(done),
            Output::Rows(_) => unreachable!("executors answer `Want::Nothing` with `Done`"),
        }
    }

    pub(crate) async fn fetch_all<'c, E: Executor<'c>>(self, executor: E) -> Result<Vec<Row>> {
        match executor.run(self, Want::All).await? {
            Output::Rows(rows) => Ok(rows),
            Output::Done(_) => Ok(Vec::new()),
        }
    }

    pub(crate) async fn fetch_optional<'c, E: Executor<'c>>(
        self,
        executor: E,
    ) -> Result<Option<Row>> {
        match executor.run(self, Want::First).await? {
            Output::Rows(rows) => Ok(rows.into_iter().next()),
            Output::Done(_) => Ok(None),
        }
    }

    pub(crate) async fn fetch_one<'c, E: Executor<'c>>(self, executor: E) -> Result<Row> {
        self.fetch_optional(executor).await?.ok_or_else(|| {
            StoreError::Database("no rows returned by a query that expected one".into())
        })
    }

    /// The same statement for sqlx (PostgreSQL).
    fn into_sqlx(self) -> sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments> {
        let mut q = match self.sql {
            Cow::Borrowed(sql) => sqlx::query(sql),
            Cow::Owned(sql) => sqlx::query(sqlx::AssertSqlSafe(sql)),
        };
        for arg in self.args {
            q = match arg {
                Value::Int(v) => q.bind(v),
                Value::Text(v) => q.bind(v.map(Cow::into_owned)),
            };
        }
        q
    }

    async fn run_sqlx<'c, E>(self, executor: E, want: Want) -> Result<Output>
    where
        E: sqlx::Executor<'c, Database = sqlx::Any>,
    {
        let q = self.into_sqlx();
        Ok(match want {
            Want::Nothing => Output::Done(Done {
                rows_affected: q.execute(executor).await?.rows_affected(),
            }),
            Want::First => Output::Rows(
                q.fetch_optional(executor)
                    .await?
                    .map(Row::Pg)
                    .into_iter()
                    .collect(),
            ),
            Want::All => Output::Rows(
                q.fetch_all(executor)
                    .await?
                    .into_iter()
                    .map(Row::Pg)
                    .collect(),
            ),
        })
    }
}

/// Where a statement runs: the writer's transaction or the read pool.
pub(crate) trait Executor<'c>: Send + 'c {
    #[doc(hidden)]
    fn run(self, q: Query, want: Want) -> BoxFut<'c, Result<Output>>;
}

/// The writer's connection (a job runs in its open transaction).
pub(crate) enum Conn {
    Pg(AnyConnection),
    Lite(rusqlite::Connection),
}

impl<'c> Executor<'c> for &'c mut Conn {
    fn run(self, q: Query, want: Want) -> BoxFut<'c, Result<Output>> {
        Box::pin(async move {
            match self {
                Conn::Pg(conn) => q.run_sqlx(&mut *conn, want).await,
                Conn::Lite(conn) => q.run_lite(conn, want),
            }
        })
    }
}

/// The read connections.
pub(crate) enum Pool {
    Pg(Readers),
    Lite(LitePool),
}

impl<'c> Executor<'c> for &'c Pool {
    fn run(self, q: Query, want: Want) -> BoxFut<'c, Result<Output>> {
        Box::pin(async move {
            match self {
                Pool::Pg(readers) => q.run_sqlx(readers, want).await,
                Pool::Lite(pool) => pool.with(|conn| q.run_lite(conn, want)),
            }
        })
    }
}

impl Pool {
    /// Connections open, and idle among them (for `/metrics`).
    pub(crate) fn usage(&self) -> (u32, usize) {
        match self {
            Pool::Pg(readers) => readers.usage(),
            Pool::Lite(pool) => pool.usage(),
        }
    }

    pub(crate) async fn close(&self) {
        match self {
            Pool::Pg(readers) => readers.close().await,
            Pool::Lite(pool) => pool.close(),
        }
    }
}
