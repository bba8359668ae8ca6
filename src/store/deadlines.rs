//! How long the store waits on its database ([`Deadlines`]), and the error a wait past its deadline
//! is ([`timed_out`]). It depends only on [`super::error`].

use std::time::Duration;

use super::error::StoreError;

/// How long the store waits on its database before it gives up and answers an error (which the
/// service turns into `unavailable`, retryable): a database that keeps its connections open but
/// stops answering must not hold every request for as long as it hangs. `[database]` in the
/// configuration; docs/operators.md says what a client sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// Opening a PostgreSQL connection: TCP, TLS and signing in.
    pub connect: Duration,
    /// A read waiting for a free connection of the read pool (PostgreSQL).
    pub acquire: Duration,
    /// One read's statement, one group commit from its `BEGIN` to its `COMMIT`, and SQLite's wait
    /// for a lock another process holds (its busy timeout).
    pub statement: Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            connect: Duration::from_secs(5),
            acquire: Duration::from_secs(5),
            statement: Duration::from_secs(10),
        }
    }
}

impl Deadlines {
    /// The longest a write's caller waits for its answer: a batch ahead of it may hold the writer
    /// for a statement deadline, and its own batch may have to connect first.
    pub(super) fn write_wait(&self) -> Duration {
        self.statement + self.connect
    }
}

/// A wait on the database that passed its deadline ([`Deadlines`]): an outage like any
/// other, which the service answers `unavailable`.
pub(super) fn timed_out(what: &str, after: Duration) -> StoreError {
    StoreError::Database(format!(
        "the database did not answer {what} within {} ms",
        after.as_millis()
    ))
}
