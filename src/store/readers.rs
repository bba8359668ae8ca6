//! PostgreSQL's read connections: a small pool of our own rather than sqlx's, because sqlx's pool
//! pings a connection every time it is given back, and again before lending it: one more round
//! trip to PostgreSQL for every read. Reads are most of the calls a request makes, so those pings
//! were a large share of them. (SQLite's readers are rusqlite connections, see [`super::db`].)
//!
//! Here a connection goes back without a ping when the call it was lent for finished: with rows,
//! or with an error the database reported (a constraint, a decode error), which leaves it usable.
//! A connection whose call was cancelled half-way, or failed below the database (I/O, protocol,
//! TLS), is closed instead, and a later read opens a new one. A connection left idle longer than
//! the `ping_after` it was opened with is pinged before it is lent (the server, a proxy or a
//! firewall may have closed it meanwhile); a busy pool never pings.
//!
//! Every wait on the server has a deadline, so that a server that keeps its connections open but
//! stops answering costs a read its deadline, not the length of the hang: opening a connection
//! (`connect_timeout`), waiting for a free one (`acquire_timeout`), and the call itself, a ping
//! included (`statement_timeout`; the server is also told it, so that a statement waiting on a lock
//! stops there too). A call past its deadline is dropped half-way, so its connection is closed.
//!
//! [`Readers`] implements sqlx's [`Executor`] for `&Readers`, so sqlx runs a read on it as on a
//! pool. It knows no SQL of its own beyond what opening a connection needs, and must not depend
//! on any other file of the store.

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use sqlx::any::{AnyConnectOptions, AnyQueryResult, AnyRow, AnyStatement, AnyTypeInfo};
use sqlx::{Any, AnyConnection, Connection, Either, Execute, Executor, SqlStr};
use tokio::sync::{Semaphore, SemaphorePermit};

/// How a pool of read connections is opened and bounded.
pub(super) struct ReadersConfig {
    pub options: AnyConnectOptions,
    /// Most connections open at once; a read waits for one to be free.
    pub max: u32,
    /// How long a read waits for a connection before it fails.
    pub acquire_timeout: Duration,
    /// How long opening a connection may take.
    pub connect_timeout: Duration,
    /// How long one call (or a ping) may take.
    pub statement_timeout: Duration,
    /// Ping a connection idle for longer than this before lending it (`None`: never).
    pub ping_after: Option<Duration>,
}

pub(super) struct Readers {
    config: ReadersConfig,
    /// One per connection that may be open; a lease holds one.
    permits: Semaphore,
    /// Connections not lent, with when they were given back; the last given back is lent first.
    idle: Mutex<Vec<(AnyConnection, Instant)>>,
    /// Connections open (idle or lent).
    open: AtomicU32,
}

impl std::fmt::Debug for Readers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readers")
            .field("max", &self.config.max)
            .field("open", &self.open.load(Ordering::Relaxed))
            .finish()
    }
}

impl Readers {
    /// Opens one connection at once, so a wrong URL or an unreachable server fails at start-up.
    pub(super) async fn open(config: ReadersConfig) -> Result<Readers, sqlx::Error> {
        let readers = Readers {
            permits: Semaphore::new(config.max as usize),
            config,
            idle: Mutex::new(Vec::new()),
            open: AtomicU32::new(0),
        };
        let first = readers.connect().await?;
        readers.idle().push((first, Instant::now()));
        Ok(readers)
    }

    /// Connections open, and idle among them (for `/metrics`).
    pub(super) fn usage(&self) -> (u32, usize) {
        (self.open.load(Ordering::Relaxed), self.idle().len())
    }

    /// Refuses new reads, and closes the idle connections (lent ones close when given back).
    pub(super) async fn close(&self) {
        self.permits.close();
        let idle: Vec<_> = self.idle().drain(..).collect();
        for (conn, _) in idle {
            self.open.fetch_sub(1, Ordering::Relaxed);
            let _ = conn.close().await;
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<(AnyConnection, Instant)>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens a connection. Over a Unix socket the kernel refuses a connection at once (`EAGAIN`)
    /// while the server's queue of connections it has not yet accepted is full, as in a burst
    /// of opens (PostgreSQL forks a process for each); over TCP the kernel retries by itself. So
    /// such a refusal is retried, with a growing pause, until the acquire timeout.
    async fn connect(&self) -> Result<AnyConnection, sqlx::Error> {
        let deadline = Instant::now() + self.config.acquire_timeout;
        let mut pause = Duration::from_millis(1);
        loop {
            match self.connect_once().await {
                Ok(conn) => {
                    self.open.fetch_add(1, Ordering::Relaxed);
                    return Ok(conn);
                }
                Err(sqlx::Error::Io(e))
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        && Instant::now() + pause < deadline =>
                {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One connection, opened and told the statement deadline within the connect deadline.
    async fn connect_once(&self) -> Result<AnyConnection, sqlx::Error> {
        let opening = async {
            let mut conn = AnyConnection::connect_with(&self.config.options).await?;
            let ms = self.config.statement_timeout.as_millis();
            sqlx::query(sqlx::AssertSqlSafe(format!("SET statement_timeout = {ms}")))
                .execute(&mut conn)
                .await?;
            Ok(conn)
        };
        within(self.config.connect_timeout, "to a new connection", opening).await
    }

    async fn lease(&self) -> Result<Lease<'_>, sqlx::Error> {
        let permit = tokio::time::timeout(self.config.acquire_timeout, self.permits.acquire())
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)?
            .map_err(|_| sqlx::Error::PoolClosed)?;
        let reused = self.idle().pop();
        let mut lease = Lease {
            readers: self,
            conn: None,
            clean: false,
            _permit: permit,
        };
        if let Some((mut conn, since)) = reused {
            let stale = self
                .config
                .ping_after
                .is_some_and(|after| since.elapsed() > after);
            let statement = self.config.statement_timeout;
            if !stale || within(statement, "a ping", conn.ping()).await.is_ok() {
                lease.conn = Some(conn);
                return Ok(lease);
            }
            self.open.fetch_sub(1, Ordering::Relaxed);
        }
        lease.conn = Some(self.connect().await?);
        Ok(lease)
    }
}

/// A connection lent for one call. Given back on drop if [`Lease::settle`] found the call clean;
/// closed otherwise (a cancelled call never settles).
struct Lease<'a> {
    readers: &'a Readers,
    conn: Option<AnyConnection>,
    clean: bool,
    _permit: SemaphorePermit<'a>,
}

impl Lease<'_> {
    fn conn(&mut self) -> &mut AnyConnection {
        self.conn
            .as_mut()
            .expect("a lease holds its connection until dropped")
    }

    fn settle<T>(&mut self, outcome: &Result<T, sqlx::Error>) {
        self.clean = match outcome {
            Ok(_) => true,
            Err(e) => reported_by_database(e),
        };
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        if self.clean && !self.readers.permits.is_closed() {
            self.readers.idle().push((conn, Instant::now()));
        } else {
            // Dropping the connection closes it without a goodbye: its call may be half-way.
            self.readers.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// `call`, or a timeout error once `deadline` has passed (the call is then dropped half-way).
async fn within<T>(
    deadline: Duration,
    what: &str,
    call: impl Future<Output = Result<T, sqlx::Error>>,
) -> Result<T, sqlx::Error> {
    match tokio::time::timeout(deadline, call).await {
        Ok(done) => done,
        Err(_) => Err(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "the database did not answer {what} within {} ms",
                deadline.as_millis()
            ),
        ))),
    }
}

/// Errors after which the connection is still in a known state: the statement ran, or was
/// refused by the database, or its result did not decode.
fn reported_by_database(e: &sqlx::Error) -> bool {
    matches!(
        e,
        sqlx::Error::Database(_)
            | sqlx::Error::RowNotFound
            | sqlx::Error::TypeNotFound { .. }
            | sqlx::Error::ColumnIndexOutOfBounds { .. }
            | sqlx::Error::ColumnNotFound(_)
            | sqlx::Error::ColumnDecode { .. }
            | sqlx::Error::Decode(_)
            | sqlx::Error::Encode(_)
    )
}

impl<'c> Executor<'c> for &'c Readers {
    type Database = Any;

    /// Runs the query to its end on one lent connection, then streams what it returned (reads
    /// here are bounded by their `LIMIT`s, and the callers collect them anyway).
    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Any>,
    {
        let all = async move {
            let mut lease = self.lease().await?;
            let deadline = self.config.statement_timeout;
            let call = lease.conn().fetch_many(query).try_collect();
            let outcome: Result<Vec<_>, _> = within(deadline, "a read", call).await;
            lease.settle(&outcome);
            outcome
        };
        Box::pin(
            futures::stream::once(all)
                .map_ok(|items| futures::stream::iter(items.into_iter().map(Ok)))
                .try_flatten(),
        )
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<AnyRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Any>,
    {
        Box::pin(async move {
            let mut lease = self.lease().await?;
            let deadline = self.config.statement_timeout;
            let outcome = within(deadline, "a read", lease.conn().fetch_optional(query)).await;
            lease.settle(&outcome);
            outcome
        })
    }

    fn prepare_with<'e>(
        self,
        sql: SqlStr,
        parameters: &'e [AnyTypeInfo],
    ) -> BoxFuture<'e, Result<AnyStatement, sqlx::Error>>
    where
        'c: 'e,
    {
        Box::pin(async move {
            let mut lease = self.lease().await?;
            let deadline = self.config.statement_timeout;
            let call = lease.conn().prepare_with(sql, parameters);
            let outcome = within(deadline, "a read", call).await;
            lease.settle(&outcome);
            outcome
        })
    }
}
