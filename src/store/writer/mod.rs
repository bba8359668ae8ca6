//! The group-commit writer: one thread owns the write connection and commits every write queued at
//! the moment it starts a batch (up to [`MAX_BATCH`]) in one transaction, then answers each
//! caller. Durability is not weakened: every answer follows a durable commit; the flush is simply
//! shared. Used on both backends: on PostgreSQL it also avoids holding a recipient's row lock
//! across one fsync per post.
//!
//! A failing write must roll back alone, so the writes of a batch are separated by savepoints.
//! A write that runs once (most) gets a savepoint of its own: the batch's, or the one the write
//! before it ended with (`RELEASE job; SAVEPOINT job`, one call). On SQLite the batch's first
//! write has none: it is undone by rolling the transaction back and beginning it again, which
//! spares SQLite the copy of every page it changes ([`batch::Mark`]). A *repeatable* write (a post,
//! the hot path: [`BatchWriter::post`]) can run again from its inputs, so a run of them (at most
//! [`batch::SHARED_RUN`]) shares one savepoint: when one fails, the run is rolled back to that savepoint
//! and the others are replayed one savepoint each, and only the failing one fails. On PostgreSQL
//! every call is a round trip, so a post costs about one call in the writer instead of two.
//!
//! On PostgreSQL, a run of queued posts that each open a thread (a task intake, a new question)
//! is written by one statement ([`crate::store::tx::post_group`]), with a savepoint of its own: a statement per
//! post cost PostgreSQL about 230 µs of CPU each, mostly in starting and finishing the statement,
//! and the writer waited one round trip per post. When the group's statement fails, the group is
//! undone and each post written alone, so that only a failing post fails.
//!
//! **Deadlines** ([`super::Deadlines`]). A caller waits for its answer at most a statement deadline
//! plus a connect deadline, then is answered an error (the service's `unavailable`); a write whose
//! caller stopped waiting before its batch started is not written. On PostgreSQL a batch from its
//! `BEGIN` to its `COMMIT` must finish within the statement deadline: a batch that does not (the
//! server stopped answering, or a lock held elsewhere) has its connection dropped, its writes
//! answered an error and the writer counted failing, and the next batch opens a new connection
//! (within the connect deadline). A write answered so may still have been committed, as with any
//! commit whose answer is lost. On SQLite the calls cannot be interrupted; a lock another process
//! holds is waited for at most the statement deadline (the busy timeout). On both, a batch under
//! way longer than `/readyz`'s own deadline makes the server not ready ([`Health`]).
//!
//! **Writes behind** ([`behind`]): a write whose caller does not wait for its commit (a receipt's
//! "read") is kept until the next batch starts, and written first in it.
//!
//! Its files: [`job`] (what is queued), [`batch`] (one batch's jobs between their savepoints),
//! [`behind`] (the writes nobody waits for) and this one (the writer's thread, its deadlines and health). It runs what it is given and knows no
//! operation: of the store's files it depends only on `db`, `error`, `deadlines` and the post's
//! building blocks (`tx::post`, `tx::post_group`).

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use sqlx::any::AnyConnectOptions;
use sqlx::{AnyConnection, Connection};
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument as _;

mod batch;
mod behind;
mod job;

use super::db::{BoxFut, Conn};
use super::deadlines::{Deadlines, timed_out};
use super::error::{Result, StoreError};
use super::tx::post::{Posted, QueuedPost};
#[cfg(test)]
use batch::SHARED_RUN;
pub(super) use batch::SQLITE_BEGIN;
use batch::{Mark, bookkeeping, run_jobs};
pub(crate) use behind::Then;
use behind::{Behind, FLUSH_AFTER, Kept, Later, Wake};
#[cfg(test)]
use job::Again;
use job::{Job, Once, Op, PostJob, Queued, Traced};

/// Most jobs committed together; bounds the latency a batch adds to its last job.
const MAX_BATCH: usize = 256;

pub(super) struct BatchWriter {
    /// Jobs for the writer thread; `None` once closed.
    jobs: std::sync::Mutex<Option<mpsc::Sender<Box<dyn Job>>>>,
    /// The longest a caller waits for its answer ([`Deadlines::write_wait`]).
    wait: std::time::Duration,
    /// Resolves when the writer thread has finished its last batch and closed its connection.
    done: tokio::sync::Mutex<Option<oneshot::Receiver<()>>>,
    /// Whether the writer's transactions are failing now, for readiness.
    health: Arc<Health>,
    /// The writes nobody waits for, until the next batch takes them.
    behind: Arc<Behind>,
}

/// Whether the writer's writes fail: set when a transaction cannot begin, its savepoints or its
/// COMMIT fail, or the database itself fails a write (a full disk, a lost database: any error that
/// is not a conflict, invalid data or a rule of the store); cleared by the next COMMIT that
/// makes a write durable. A job refused for its own reasons changes nothing.
///
/// It also knows since when the batch under way has run: a batch that waits on the database
/// (a hung server, a lock held elsewhere) shows there before its deadline fails it.
#[derive(Debug, Default)]
pub(super) struct Health {
    /// Unix milliseconds of the first failure of the current run of failures; 0 when healthy.
    failing_since_ms: AtomicI64,
    /// Unix milliseconds at which the batch under way began; 0 between batches.
    batch_since_ms: AtomicI64,
}

/// Unix milliseconds now (at least 1, so that 0 can mean "none").
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| {
            i64::try_from(d.as_millis()).unwrap_or(i64::MAX).max(1)
        })
}

impl Health {
    fn failed(&self) {
        let _ = self.failing_since_ms.compare_exchange(
            0,
            now_ms(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    fn batch_began(&self) {
        self.batch_since_ms.store(now_ms(), Ordering::Relaxed);
    }

    fn batch_ended(&self) {
        self.batch_since_ms.store(0, Ordering::Relaxed);
    }

    /// Since when (Unix milliseconds) the batch under way has run, if longer than `longer_than`.
    pub(super) fn stuck_since_ms(&self, longer_than: std::time::Duration) -> Option<i64> {
        let since = self.batch_since_ms.load(Ordering::Relaxed);
        let longer = i64::try_from(longer_than.as_millis()).unwrap_or(i64::MAX);
        (since != 0 && now_ms().saturating_sub(since) > longer).then_some(since)
    }

    fn committed(&self) {
        self.failing_since_ms.store(0, Ordering::Relaxed);
    }

    /// Since when (Unix milliseconds) every write transaction has failed, if they do now.
    pub(super) fn failing_since_ms(&self) -> Option<i64> {
        Some(self.failing_since_ms.load(Ordering::Relaxed)).filter(|&ms| ms != 0)
    }
}

impl BatchWriter {
    /// Starts the writer on the connection `connect` opens, on a thread of its own named
    /// `liaison-writer`, and returns once it is open (or with why it could not be). `begin` opens
    /// a write transaction (`BEGIN IMMEDIATE` on SQLite, `BEGIN` on PostgreSQL) and in it the
    /// savepoint `job` of the batch's first job; `reconnect` says how to replace a broken
    /// connection (PostgreSQL: then every batch has the statement deadline of `deadlines`, and a
    /// new connection the connect deadline).
    ///
    /// Why a thread on both backends: on SQLite the writer's calls are synchronous (rusqlite) and
    /// the commit's fsync must not hold a runtime thread. On PostgreSQL its calls are round trips
    /// made one after another, so the writer's throughput is how soon it runs again when an
    /// answer arrives; as a task of the server's runtime it waited behind the request tasks
    /// ready at that moment (measured: 1.0–1.4k intakes/s at 64 in flight, the writer's
    /// connection busy in PostgreSQL 16% of the time), while a thread of its own, which sleeps
    /// between answers, is woken at once by the kernel. Its runtime is a single-threaded one
    /// that serves only the writer's connection. Jobs queued while a batch runs make the next
    /// batch, so handing jobs over costs at most one wake-up of the thread per batch.
    pub(super) async fn start<C>(
        connect: C,
        begin: &'static str,
        reconnect: Option<AnyConnectOptions>,
        deadlines: Deadlines,
    ) -> Result<BatchWriter>
    where
        C: Future<Output = Result<Conn>> + Send + 'static,
    {
        let (tx, rx) = mpsc::channel(4096);
        let (done_tx, done_rx) = oneshot::channel();
        let (open_tx, open_rx) = oneshot::channel();
        let network = reconnect.is_some();
        let health = Arc::new(Health::default());
        let writer_health = health.clone();
        let behind = Arc::new(Behind::default());
        let writer_behind = behind.clone();
        let writer = async move {
            match connect.await {
                Ok(conn) => {
                    let _ = open_tx.send(Ok(()));
                    let network = reconnect.map(|options| Network { options, deadlines });
                    run_writer(conn, begin, network, rx, &writer_health, &writer_behind).await;
                }
                Err(e) => {
                    let _ = open_tx.send(Err(e));
                }
            }
            let _ = done_tx.send(());
        };
        let thread = std::thread::Builder::new().name("liaison-writer".into());
        let spawned = if network {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| StoreError::Database(format!("could not start the writer: {e}")))?;
            thread.spawn(move || runtime.block_on(writer))
        } else {
            // The jobs' futures never wait on anything but the (synchronous) connection, so a
            // plain executor drives them.
            thread.spawn(move || futures::executor::block_on(writer))
        };
        spawned.map_err(|e| StoreError::Database(format!("could not start the writer: {e}")))?;
        open_rx
            .await
            .map_err(|_| StoreError::Database("the store writer stopped".into()))??;
        Ok(BatchWriter {
            jobs: std::sync::Mutex::new(Some(tx)),
            wait: deadlines.write_wait(),
            done: tokio::sync::Mutex::new(Some(done_rx)),
            health,
            behind,
        })
    }

    /// Since when (Unix milliseconds) the writer's transactions have failed, while they do.
    pub(super) fn failing_since_ms(&self) -> Option<i64> {
        self.health.failing_since_ms()
    }

    /// Since when (Unix milliseconds) the batch under way has run, if longer than `longer_than`.
    pub(super) fn stuck_since_ms(&self, longer_than: std::time::Duration) -> Option<i64> {
        self.health.stuck_since_ms(longer_than)
    }

    /// Runs `op` once in a batch's transaction; answers once the batch is durably committed.
    pub(super) async fn run<T, F>(&self, op: F) -> Result<T>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut Conn) -> BoxFut<'c, Result<T>> + Send + 'static,
    {
        self.submit(Once(Some(op))).await
    }

    /// [`BatchWriter::run`] for a write that may run again from its inputs, when an other write
    /// of its run fails (see the module's doc): everything it does must live in the
    /// transaction, and a second run must do what the first would have.
    #[cfg(test)]
    pub(super) async fn run_repeatable<T, F>(&self, op: F) -> Result<T>
    where
        T: Send + 'static,
        F: for<'c> Fn(&'c mut Conn) -> BoxFut<'c, Result<T>> + Send + 'static,
    {
        self.submit(Again(op)).await
    }

    /// Runs `op` once in the writer's next batch, without waiting for it: see [`behind`]. `then`
    /// hears of its commit. Waits only when the writer's queue is full.
    pub(super) async fn run_behind<F>(&self, op: F, then: Then) -> Result<()>
    where
        F: for<'c> FnOnce(&'c mut Conn) -> BoxFut<'c, Result<()>> + Send + 'static,
    {
        let sender = self.jobs.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let sender = sender.ok_or_else(|| StoreError::Database("the store is closed".into()))?;
        let job = Box::new(Later {
            op: Some(op),
            outcome: None,
            then: Some(then),
        });
        match self.behind.keep(job) {
            Kept::More => Ok(()),
            Kept::First => {
                // The timer holds a sender: closing the store waits for it (at most FLUSH_AFTER).
                let behind = self.behind.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(FLUSH_AFTER).await;
                    if !behind.is_empty() {
                        let _ = sender.send(Box::new(Wake)).await;
                    }
                });
                Ok(())
            }
            Kept::Full(job) => sender.send(job).await.map_err(|_| stopped()),
        }
    }

    /// Queues a post: run alone, or on PostgreSQL written with the posts that open a thread
    /// queued next to it ([`crate::store::tx::post_group`]).
    pub(super) async fn post(&self, mut post: QueuedPost) -> Result<Posted> {
        let (reply, rx) = oneshot::channel();
        let trace = Traced::here();
        post.trace = trace.context.clone();
        let span = trace.span.clone();
        let job = Box::new(PostJob {
            post,
            outcome: None,
            reply,
            trace,
        });
        self.queue(job, rx).instrument(span).await
    }

    async fn submit<T, O>(&self, op: O) -> Result<T>
    where
        T: Send + 'static,
        O: Op<T> + 'static,
    {
        let (reply, rx) = oneshot::channel::<Result<T>>();
        let trace = Traced::here();
        let span = trace.span.clone();
        let job = Box::new(Queued {
            op,
            outcome: None,
            reply,
            trace,
        });
        self.queue(job, rx).instrument(span).await
    }

    /// Hands `job` to the writer and waits for the answer it sends on `rx`, at most the write
    /// deadline: then the caller is answered an error, and the job, if it has not run yet, never
    /// runs ([`Job::abandoned`]).
    async fn queue<T>(&self, job: Box<dyn Job>, rx: oneshot::Receiver<Result<T>>) -> Result<T> {
        let answer = async {
            self.send(job).await?;
            rx.await.map_err(|_| stopped())?
        };
        match tokio::time::timeout(self.wait, answer).await {
            Ok(answer) => answer,
            Err(_) => Err(timed_out("a write", self.wait)),
        }
    }

    async fn send(&self, job: Box<dyn Job>) -> Result<()> {
        let sender = self.jobs.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let sender = sender.ok_or_else(|| StoreError::Database("the store is closed".into()))?;
        sender.send(job).await.map_err(|_| stopped())
    }

    /// Stops taking jobs and waits for the writer to finish those already queued.
    pub(super) async fn close(&self) {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(done) = self.done.lock().await.take() {
            let _ = done.await;
        }
    }
}

fn stopped() -> StoreError {
    StoreError::Database("the store writer stopped".into())
}

/// A writer's connection to PostgreSQL: opened within the connect deadline of `deadlines`, and
/// told its statement deadline.
pub(super) async fn connect_pg(options: AnyConnectOptions, deadlines: Deadlines) -> Result<Conn> {
    Network { options, deadlines }.connect().await
}

/// How the writer reaches PostgreSQL again, and the deadlines of its calls there.
struct Network {
    options: AnyConnectOptions,
    deadlines: Deadlines,
}

impl Network {
    /// A new connection, within the connect deadline, told the statement deadline.
    async fn connect(&self) -> Result<Conn> {
        let deadline = self.deadlines.connect;
        let opening = async {
            let mut conn = AnyConnection::connect_with(&self.options).await?;
            let ms = self.deadlines.statement.as_millis();
            sqlx::query(sqlx::AssertSqlSafe(format!("SET statement_timeout = {ms}")))
                .execute(&mut conn)
                .await?;
            Ok(Conn::Pg(conn))
        };
        match tokio::time::timeout(deadline, opening).await {
            Ok(conn) => conn,
            Err(_) => Err(timed_out("to a new connection", deadline)),
        }
    }
}

async fn run_writer(
    conn: Conn,
    begin: &'static str,
    network: Option<Network>,
    mut rx: mpsc::Receiver<Box<dyn Job>>,
    health: &Health,
    behind: &Behind,
) {
    // `None` once a batch overran its deadline: its connection is in an unknown state.
    let mut conn = Some(conn);
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        let received = rx.recv_many(&mut batch, MAX_BATCH).await;
        // The writes behind go first: each was kept before any write it may precede (a read's
        // receipt before the acknowledgement that follows its answer).
        let later = behind.take();
        if received == 0 && later.is_empty() {
            // Closed, and nothing left behind.
            break;
        }
        // A caller that stopped waiting was told its write failed: it is not written.
        batch.retain(|job| !job.abandoned());
        if batch.is_empty() && later.is_empty() {
            continue;
        }
        health.batch_began();
        let mut pending: VecDeque<_> = later.into_iter().chain(batch.drain(..)).collect();
        let mut ran = Vec::with_capacity(pending.len());
        match &network {
            None => {
                let conn = conn.as_mut().expect("SQLite's connection is never dropped");
                write_batch(conn, begin, None, &mut pending, &mut ran, health).await;
            }
            Some(network) => {
                if conn.is_none() {
                    match network.connect().await {
                        Ok(fresh) => conn = Some(fresh),
                        Err(e) => {
                            tracing::error!(error = %e, "Could not connect the writer.");
                            health.failed();
                            for job in pending.drain(..) {
                                job.fail(e.clone());
                            }
                            health.batch_ended();
                            continue;
                        }
                    }
                }
                let open = conn.as_mut().expect("connected above");
                let deadline = network.deadlines.statement;
                let writing =
                    write_batch(open, begin, Some(network), &mut pending, &mut ran, health);
                if tokio::time::timeout(deadline, writing).await.is_err() {
                    // The server stopped answering (or a lock is held elsewhere). Dropping the
                    // connection closes it; the server rolls the transaction back. The job that
                    // was running, dropped with the call, answers its caller an error too.
                    let e = timed_out("a group commit", deadline);
                    tracing::error!(
                        error = %e,
                        jobs = ran.len() + pending.len(),
                        "A group commit overran its deadline; its connection was dropped."
                    );
                    health.failed();
                    conn = None;
                    for job in ran.drain(..).chain(pending.drain(..)) {
                        job.fail(e.clone());
                    }
                }
            }
        }
        health.batch_ended();
    }
    if let Some(Conn::Pg(conn)) = conn {
        let _ = conn.close().await;
    }
}

/// Writes one batch (`pending`) in one transaction and answers each of its jobs: begins (on
/// PostgreSQL, once more on a fresh connection when that fails), runs the jobs, commits. A job
/// moves from `pending` to `ran` once it has run; both are empty when it returns.
async fn write_batch(
    conn: &mut Conn,
    begin: &'static str,
    network: Option<&Network>,
    pending: &mut VecDeque<Box<dyn Job>>,
    ran: &mut Vec<Box<dyn Job>>,
    health: &Health,
) {
    // Each statement sent to PostgreSQL is a round trip, so the savepoint bookkeeping rides along
    // with its neighbours: the batch opens with the first job's savepoint, each job's end opens
    // the next one's, and COMMIT releases the last.
    let mut began = bookkeeping(conn, begin).await;
    if began.is_err()
        && let Some(network) = network
    {
        // The server may have restarted: one fresh connection before failing the batch.
        match network.connect().await {
            Ok(fresh) => {
                *conn = fresh;
                began = bookkeeping(conn, begin).await;
            }
            Err(e) => tracing::warn!(error = %e, "Could not reconnect the writer."),
        }
    }
    if let Err(e) = began {
        tracing::error!(error = %e, "Could not begin a write transaction.");
        health.failed();
        // A failed multi-statement start may have left a transaction open.
        let _ = bookkeeping(conn, "ROLLBACK").await;
        for job in pending.drain(..) {
            job.fail(e.clone());
        }
        return;
    }
    if let Err(e) = run_jobs(conn, Mark::after(begin), pending, ran).await {
        // The savepoint machinery itself failed: give up the whole batch.
        tracing::error!(error = %e, "A write savepoint failed; rolling back the batch.");
        health.failed();
        let _ = bookkeeping(conn, "ROLLBACK").await;
        for job in ran.drain(..).chain(pending.drain(..)) {
            job.fail(e.clone());
        }
        return;
    }
    let started = std::time::Instant::now();
    let commit = bookkeeping(conn, "COMMIT").await;
    let took = started.elapsed();
    crate::metrics::get().group_commit(ran.len(), took, commit.is_ok());
    if crate::telemetry::on() {
        for job in ran.iter() {
            job.traced(ran.len(), took.as_secs_f64() * 1000.0);
        }
    }
    match &commit {
        Ok(()) => {
            let outcomes = ran.iter().filter_map(|job| job.storage());
            let (mut wrote, mut failed) = (false, false);
            for ok in outcomes {
                wrote |= ok;
                failed |= !ok;
            }
            if wrote {
                health.committed();
            } else if failed {
                health.failed();
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "A group commit failed.");
            health.failed();
            let _ = bookkeeping(conn, "ROLLBACK").await;
        }
    }
    for job in ran.drain(..) {
        job.answer(commit.clone());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::store::db::query;

    /// The test tables: `t`, and `child` whose rows must name a `parent` by the end of the
    /// transaction (a dangling child makes the COMMIT itself fail, on both backends).
    const SETUP: &str = "CREATE TABLE t (id TEXT PRIMARY KEY); \
        CREATE TABLE parent (id TEXT PRIMARY KEY); \
        CREATE TABLE child (parent TEXT REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)";

    /// A writer over a table `t` in `db`, on the backend the suite runs on (as the store opens it).
    pub(super) async fn writer(db: &crate::store::test_db::TestDb) -> BatchWriter {
        writer_with(db, Deadlines::default()).await
    }

    /// [`writer`] with the deadlines given.
    async fn writer_with(db: &crate::store::test_db::TestDb, deadlines: Deadlines) -> BatchWriter {
        let Some(path) = db.sqlite_path() else {
            let options: sqlx::any::AnyConnectOptions = db.url.parse().unwrap();
            let mut setup = <sqlx::AnyConnection as sqlx::Connection>::connect_with(&options)
                .await
                .unwrap();
            sqlx::Executor::execute(&mut setup, SETUP).await.unwrap();
            let connect = connect_pg(options.clone(), deadlines);
            return BatchWriter::start(connect, "BEGIN; SAVEPOINT job", Some(options), deadlines)
                .await
                .unwrap();
        };
        let conn = crate::store::db::connect(&path, true, deadlines.statement).unwrap();
        conn.execute_batch(&format!("PRAGMA foreign_keys = ON; {SETUP}"))
            .unwrap();
        BatchWriter::start(
            async move { Ok(Conn::Lite(conn)) },
            SQLITE_BEGIN,
            None,
            deadlines,
        )
        .await
        .unwrap()
    }

    /// The ids kept in `t`, in order.
    pub(super) async fn rows(db: &crate::store::test_db::TestDb) -> Vec<String> {
        let Some(path) = db.sqlite_path() else {
            let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&db.url)
                .await
                .unwrap();
            let rows = sqlx::query_scalar::<_, String>("SELECT id FROM t ORDER BY id")
                .fetch_all(&mut conn)
                .await
                .unwrap();
            return rows;
        };
        rusqlite::Connection::open(path)
            .unwrap()
            .prepare("SELECT id FROM t ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get::<_, String>(0))
            .unwrap()
            .collect::<rusqlite::Result<Vec<_>>>()
            .unwrap()
    }

    #[tokio::test]
    async fn the_writer_is_failing_from_a_failed_commit_until_one_succeeds() {
        let db = crate::store::test_db::TestDb::new().await;
        let w = writer(&db).await;
        assert_eq!(w.failing_since_ms(), None, "a new writer is healthy");
        let dangling = w
            .run(|conn| {
                Box::pin(async move {
                    query("INSERT INTO child (parent) VALUES ($1)")
                        .bind("nobody".to_owned())
                        .execute(&mut *conn)
                        .await?;
                    Ok(())
                })
            })
            .await;
        assert!(dangling.is_err(), "the COMMIT refuses the dangling row");
        let since = w.failing_since_ms().expect("failing after a failed commit");
        // A job's own error is the caller's: it does not make the writer healthy or failing.
        let own = w
            .run(|_| Box::pin(async { Err::<(), _>(StoreError::NotFound("thing")) }))
            .await;
        assert!(own.is_err());
        assert_eq!(
            w.failing_since_ms(),
            Some(since),
            "still failing since the first failure"
        );
        w.run(|conn| insert(conn, "a".into(), Act::Insert))
            .await
            .unwrap();
        assert_eq!(w.failing_since_ms(), None, "healthy once a commit succeeds");
        assert_eq!(rows(&db).await, ["a"]);
    }

    /// A caller waits at most its deadline; a write whose caller stopped waiting before it ran is
    /// never written; on PostgreSQL a batch that overruns the statement deadline is given up (the
    /// writer is failing) and the next batch writes on a new connection.
    ///
    /// The held job is let go by the test once both callers have stopped waiting, not after a
    /// fixed time, so the connect deadline can be generous: the write after the overrun opens a
    /// new connection within it, and a loaded machine (CI, a parallel test creating databases)
    /// once took most of a one-second deadline to do so.
    #[tokio::test]
    async fn a_write_whose_caller_stopped_waiting_is_not_written_and_the_writer_goes_on() {
        let db = crate::store::test_db::TestDb::new().await;
        let ms = std::time::Duration::from_millis;
        let deadlines = Deadlines {
            connect: ms(5_000),
            acquire: ms(1_000),
            statement: ms(100),
        };
        let w = Arc::new(writer_with(&db, deadlines).await);
        let network = db.sqlite_path().is_none();
        // The writer runs this job, which holds it past every deadline (until the test lets it
        // go), while the next queues.
        let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let released = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (let_go, held_until) = std::sync::mpsc::channel::<()>();
        let hold = tokio::spawn({
            let (w, started, released) = (w.clone(), started.clone(), released.clone());
            async move {
                w.run(move |conn| {
                    Box::pin(async move {
                        started.store(true, Ordering::Relaxed);
                        // Blocks the writer's thread, as a stuck call would.
                        let _ = held_until.recv_timeout(std::time::Duration::from_secs(60));
                        released.store(true, Ordering::Relaxed);
                        // One turn of the timer before writing. On PostgreSQL the batch's
                        // deadline, long past, has fired by then, so the batch is given up
                        // before its INSERT is answered. (Without it, a loaded machine could
                        // answer the INSERT and send the COMMIT before the timer fired: a
                        // COMMIT already sent may commit though the connection is dropped,
                        // and its callers, told it failed, see it written.)
                        // (SQLite's writer is a thread of its own, with no timer to wait on.)
                        if network {
                            tokio::time::sleep(ms(1)).await;
                        }
                        insert(conn, "held".into(), Act::Insert).await
                    })
                })
                .await
            }
        });
        while !started.load(Ordering::Relaxed) {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        let late = w.run(|conn| insert(conn, "late".into(), Act::Insert)).await;
        let e = late.expect_err("its caller stops waiting while the writer is held");
        assert!(e.to_string().contains("did not answer"), "{e}");
        let held = hold.await.unwrap();
        assert!(held.is_err(), "its caller stopped waiting too");
        let_go.send(()).unwrap();
        while !released.load(Ordering::Relaxed) {
            tokio::time::sleep(ms(1)).await;
        }
        if db.sqlite_path().is_none() {
            // The batch overran its deadline: given up, its connection dropped. The writer says
            // so once it has finished with the batch, which may be just after the job returned.
            let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
            while w.failing_since_ms().is_none() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(ms(5)).await;
            }
            assert!(w.failing_since_ms().is_some(), "failing after an overrun");
        }
        w.run(|conn| insert(conn, "after".into(), Act::Insert))
            .await
            .unwrap();
        assert_eq!(w.failing_since_ms(), None, "healthy once a commit succeeds");
        let mut expected = vec!["after"];
        if db.sqlite_path().is_some() {
            // SQLite's calls cannot be interrupted: the held job's batch committed.
            expected.push("held");
        }
        assert_eq!(rows(&db).await, expected);
    }

    /// What a test job does: insert its row, then fail or not.
    #[derive(Clone, Copy)]
    pub(super) enum Act {
        Insert,
        InsertThenFail,
    }

    pub(super) fn insert<'c>(conn: &'c mut Conn, id: String, act: Act) -> BoxFut<'c, Result<()>> {
        Box::pin(async move {
            query("INSERT INTO t (id) VALUES ($1)")
                .bind(id)
                .execute(&mut *conn)
                .await?;
            match act {
                Act::Insert => Ok(()),
                Act::InsertThenFail => Err(StoreError::NotFound("thing")),
            }
        })
    }

    /// Runs `jobs` (id, repeatable, act) as one batch, behind a job that holds the writer until
    /// they are all queued; returns each job's answer, how often each ran, and the rows kept.
    async fn batch(jobs: &[(&str, bool, Act)]) -> (Vec<Result<()>>, Vec<usize>, Vec<String>) {
        let db = crate::store::test_db::TestDb::new().await;
        let w = Arc::new(writer(&db).await);
        // The writer runs this job alone while the others queue behind it: they make one batch.
        let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let hold = tokio::spawn({
            let (w, started) = (w.clone(), started.clone());
            async move {
                w.run(move |_| {
                    Box::pin(async move {
                        started.store(true, Ordering::Relaxed);
                        std::thread::sleep(std::time::Duration::from_millis(200));
                        Ok(())
                    })
                })
                .await
            }
        });
        while !started.load(Ordering::Relaxed) {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        let runs: Vec<Arc<AtomicUsize>> = jobs.iter().map(|_| Arc::default()).collect();
        let mut answers = Vec::new();
        for (&(id, repeatable, act), runs) in jobs.iter().zip(&runs) {
            let (id, runs, w) = (id.to_owned(), runs.clone(), w.clone());
            answers.push(async move {
                if repeatable {
                    w.run_repeatable(move |tx| {
                        runs.fetch_add(1, Ordering::Relaxed);
                        insert(tx, id.clone(), act)
                    })
                    .await
                } else {
                    w.run(move |tx| {
                        runs.fetch_add(1, Ordering::Relaxed);
                        insert(tx, id, act)
                    })
                    .await
                }
            });
        }
        let answers = futures::future::join_all(answers).await;
        hold.await.unwrap().unwrap();
        let rows = rows(&db).await;
        let runs = runs.iter().map(|r| r.load(Ordering::Relaxed)).collect();
        (answers, runs, rows)
    }

    #[tokio::test]
    async fn a_failing_repeatable_job_fails_alone_and_its_run_is_replayed() {
        use Act::*;
        let (answers, runs, rows) = batch(&[
            ("a", true, Insert),
            ("b", true, Insert),
            ("c", true, InsertThenFail),
            ("d", true, Insert),
            ("e", false, Insert),
            ("f", true, InsertThenFail),
            ("g", false, InsertThenFail),
            ("h", true, Insert),
        ])
        .await;
        let failed: Vec<bool> = answers.iter().map(Result::is_err).collect();
        assert_eq!(
            failed,
            [false, false, true, false, false, true, true, false]
        );
        assert_eq!(rows, ["a", "b", "d", "e", "h"]);
        // a and b ran again after c failed; c's failure stands without a second run; f failed
        // right after a savepoint, so nothing was replayed for it.
        assert_eq!(runs, [2, 2, 1, 1, 1, 1, 1, 1]);
    }

    /// On SQLite a batch begins without a savepoint ([`batch::Mark`]): a job that fails before
    /// any was kept is undone by beginning the transaction again, and what follows is kept.
    #[tokio::test]
    async fn a_job_that_fails_first_in_its_batch_fails_alone() {
        use Act::*;
        let cases: [&[(&str, bool, Act)]; 4] = [
            &[
                ("a", false, InsertThenFail),
                ("b", true, Insert),
                ("c", false, Insert),
            ],
            &[
                ("a", true, InsertThenFail),
                ("b", true, Insert),
                ("c", false, Insert),
            ],
            &[("a", false, InsertThenFail)],
            &[("a", true, InsertThenFail)],
        ];
        for jobs in cases {
            let (answers, runs, rows) = batch(jobs).await;
            let failed: Vec<bool> = answers.iter().map(Result::is_err).collect();
            let mut expected = vec![false; jobs.len()];
            expected[0] = true;
            assert_eq!(failed, expected);
            assert_eq!(rows, ["b", "c"][..jobs.len() - 1]);
            assert!(runs.iter().all(|&r| r == 1));
        }
        // A write alone in its batch that fails leaves the writer as it was.
        let db = crate::store::test_db::TestDb::new().await;
        let w = writer(&db).await;
        let failed = w.run(|conn| insert(conn, "x".into(), InsertThenFail)).await;
        assert!(failed.is_err());
        w.run(|conn| insert(conn, "y".into(), Insert))
            .await
            .unwrap();
        assert_eq!(rows(&db).await, ["y"]);
    }

    #[tokio::test]
    async fn a_run_of_repeatable_jobs_is_at_most_shared_run_long() {
        use Act::*;
        let mut jobs: Vec<(String, bool, Act)> = (0..SHARED_RUN + 2)
            .map(|i| (format!("r{i:02}"), true, Insert))
            .collect();
        jobs.push(("x".into(), true, InsertThenFail));
        jobs.push(("y".into(), true, Insert));
        let jobs: Vec<(&str, bool, Act)> = jobs
            .iter()
            .map(|(id, r, a)| (id.as_str(), *r, *a))
            .collect();
        let (answers, runs, rows) = batch(&jobs).await;
        assert!(answers[SHARED_RUN + 2].is_err());
        assert_eq!(answers.iter().filter(|a| a.is_err()).count(), 1);
        assert_eq!(rows.len(), SHARED_RUN + 3);
        assert!(!rows.contains(&"x".to_owned()));
        // The first SHARED_RUN were settled before the failure: only the two after ran again.
        let mut expected = vec![1; SHARED_RUN];
        expected.extend([2, 2, 1, 1]);
        assert_eq!(runs, expected);
    }

    #[tokio::test]
    async fn a_batch_of_repeatable_jobs_commits_each_once() {
        let jobs: Vec<String> = (0..40).map(|i| format!("p{i:02}")).collect();
        let jobs: Vec<(&str, bool, Act)> = jobs
            .iter()
            .map(|id| (id.as_str(), true, Act::Insert))
            .collect();
        let (answers, runs, rows) = batch(&jobs).await;
        assert!(answers.iter().all(Result::is_ok));
        assert!(runs.iter().all(|&r| r == 1));
        assert_eq!(rows.len(), 40);
    }
}
