//! The group-commit writer: one thread owns the write connection and commits every write queued at
//! the moment it starts a batch (up to [`MAX_BATCH`]) in one transaction, then answers each
//! caller. Durability is not weakened: every answer follows a durable commit; the flush is simply
//! shared. Used on both backends: on PostgreSQL it also avoids holding a recipient's row lock
//! across one fsync per post.
//!
//! A failing write must roll back alone, so the writes of a batch are separated by savepoints.
//! A write that runs once (most) gets a savepoint of its own: the batch's, or the one the write
//! before it ended with (`RELEASE job; SAVEPOINT job`, one call). A *repeatable* write (a post,
//! the hot path: [`BatchWriter::post`]) can run again from its inputs, so a run of them (at most
//! [`SHARED_RUN`]) shares one savepoint: when one fails, the run is rolled back to that savepoint
//! and the others are replayed one savepoint each, and only the failing one fails. On PostgreSQL
//! every call is a round trip, so a post costs about one call in the writer instead of two.
//!
//! On PostgreSQL, a run of queued posts that each open a thread (a task intake, a new question)
//! is written by one statement ([`post_group`]), with a savepoint of its own: a statement per
//! post cost PostgreSQL about 230 µs of CPU each, mostly in starting and finishing the statement,
//! and the writer waited one round trip per post. When the group's statement fails, the group is
//! undone and each post written alone, so that only a failing post fails.
//!
//! It runs what it is given and knows no operation: of the store's files it depends only on `db`,
//! `error` and the post's building blocks (`tx::post`, `tx::post_group`).

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use sqlx::any::AnyConnectOptions;
use sqlx::{AnyConnection, Connection, Executor};
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument as _;

use super::db::{BoxFut, Conn};
use super::error::{Result, StoreError};
use super::tx::post::{Posted, QueuedPost};
use super::tx::post_group::post_group;

/// Most jobs committed together; bounds the latency a batch adds to its last job.
const MAX_BATCH: usize = 256;

/// Most repeatable jobs that share a savepoint. A failing one makes the others of its run run
/// again, so this bounds what one failing write (a post into a closed thread, say) costs the
/// writer: at most this many jobs' work, while saving all but one savepoint call in this many.
const SHARED_RUN: usize = 8;

/// Most posts written together by [`post_group`]: bounds one statement's size.
const MAX_GROUP: usize = 64;

/// One queued write, with its result type erased so that one channel carries every kind.
trait Job: Send {
    /// Runs in the open transaction, keeping the outcome for the answer; says whether it
    /// succeeded.
    fn run<'c>(&'c mut self, conn: &'c mut Conn) -> BoxFut<'c, bool>;
    /// Whether it may run again once its effects were rolled back.
    fn repeatable(&self) -> bool;
    /// Answers the caller: its own error, or its value once `commit` says the batch is durable.
    fn answer(self: Box<Self>, commit: Result<()>);
    /// Answers the caller without running (the batch could not start, or was given up).
    fn fail(self: Box<Self>, e: StoreError);
    /// The post it writes, when the writer may write it with its neighbours in one call
    /// ([`QueuedPost::groupable`]).
    fn groupable(&self) -> Option<&QueuedPost> {
        None
    }
    /// Keeps the outcome of its post, written with its neighbours by [`post_group`].
    fn written(&mut self, _posted: Posted) {}
    /// What its run came to, for the writer's health: `Some(true)` when it succeeded,
    /// `Some(false)` when the database itself failed it (not a conflict or a refused rule), `None`
    /// when it has not run or failed for its own reasons.
    fn storage(&self) -> Option<bool>;
    /// Notes on the caller's span, while tracing is on, how many writes its commit carried and how
    /// long the COMMIT took.
    fn traced(&self, jobs: usize, commit_ms: f64);
}

/// [`Job::storage`] of a job's outcome.
fn storage<T>(outcome: &Option<Result<T>>) -> Option<bool> {
    match outcome {
        Some(Ok(_)) => Some(true),
        Some(Err(StoreError::Database(_))) => Some(false),
        _ => None,
    }
}

/// What a queued write runs: once ([`Once`]) or as often as the writer needs ([`Again`]).
trait Op<T>: Send {
    const REPEATABLE: bool;
    fn call<'c>(&mut self, conn: &'c mut Conn) -> BoxFut<'c, Result<T>>;
}

struct Once<F>(Option<F>);

impl<T, F> Op<T> for Once<F>
where
    T: Send + 'static,
    F: for<'c> FnOnce(&'c mut Conn) -> BoxFut<'c, Result<T>> + Send,
{
    const REPEATABLE: bool = false;

    fn call<'c>(&mut self, conn: &'c mut Conn) -> BoxFut<'c, Result<T>> {
        match self.0.take() {
            Some(op) => op(conn),
            None => Box::pin(async { Err(StoreError::Database("a write ran twice".into())) }),
        }
    }
}

/// (Tests only: in the server, the repeatable writes are posts, queued as [`PostJob`]s.)
#[cfg(test)]
struct Again<F>(F);

#[cfg(test)]
impl<T, F> Op<T> for Again<F>
where
    F: for<'c> Fn(&'c mut Conn) -> BoxFut<'c, Result<T>> + Send,
{
    const REPEATABLE: bool = true;

    fn call<'c>(&mut self, conn: &'c mut Conn) -> BoxFut<'c, Result<T>> {
        (self.0)(conn)
    }
}

/// A queued write with the caller's answer channel and, once it has run, its outcome.
struct Queued<T, O> {
    op: O,
    outcome: Option<Result<T>>,
    reply: oneshot::Sender<Result<T>>,
    trace: Traced,
}

impl<T: Send + 'static, O: Op<T>> Job for Queued<T, O> {
    fn run<'c>(&'c mut self, conn: &'c mut Conn) -> BoxFut<'c, bool> {
        let run = self.op.call(conn);
        let outcome = &mut self.outcome;
        let context = self.trace.context.clone();
        Box::pin(super::trace::within(context, async move {
            let result = run.await;
            let ok = result.is_ok();
            *outcome = Some(result);
            ok
        }))
    }

    fn repeatable(&self) -> bool {
        O::REPEATABLE
    }

    fn answer(self: Box<Self>, commit: Result<()>) {
        let _ = self.reply.send(answer(self.outcome, commit));
    }

    fn fail(self: Box<Self>, e: StoreError) {
        let _ = self.reply.send(Err(e));
    }

    fn storage(&self) -> Option<bool> {
        storage(&self.outcome)
    }

    fn traced(&self, jobs: usize, commit_ms: f64) {
        self.trace.note(jobs, commit_ms);
    }
}

/// What a job keeps of its caller's trace (nothing while tracing is off): the context its rows
/// record (a delivery's, a new thread's) and the span of its wait for the commit.
struct Traced {
    context: Option<crate::telemetry::TraceContext>,
    span: tracing::Span,
}

impl Traced {
    /// The caller's, taken before it waits.
    fn here() -> Traced {
        if !crate::telemetry::on() {
            return Traced {
                context: None,
                span: tracing::Span::none(),
            };
        }
        let context = crate::telemetry::TraceContext::current();
        let span = crate::telemetry::span!("store.commit", otel.kind = "client");
        crate::telemetry::attribute(&span, "db.system.name", "liaison-store");
        Traced { context, span }
    }

    fn note(&self, jobs: usize, commit_ms: f64) {
        crate::telemetry::attribute(&self.span, "liaison.group_size", jobs as i64);
        crate::telemetry::attribute(&self.span, "liaison.commit_ms", commit_ms);
    }
}

/// A job's answer once its batch ended: its value if the commit succeeded, its own error if it
/// failed (whatever the commit did).
fn answer<T>(outcome: Option<Result<T>>, commit: Result<()>) -> Result<T> {
    match outcome {
        Some(Ok(value)) => commit.map(|()| value),
        Some(Err(e)) => Err(e),
        None => Err(StoreError::Database("a write was not run".into())),
    }
}

/// A queued post (see [`QueuedPost`]).
struct PostJob {
    post: QueuedPost,
    outcome: Option<Result<Posted>>,
    reply: oneshot::Sender<Result<Posted>>,
    trace: Traced,
}

impl Job for PostJob {
    fn run<'c>(&'c mut self, conn: &'c mut Conn) -> BoxFut<'c, bool> {
        Box::pin(async move {
            let context = self.post.trace.clone();
            let result = super::trace::within(context, self.post.run(conn)).await;
            let ok = result.is_ok();
            self.outcome = Some(result);
            ok
        })
    }

    fn repeatable(&self) -> bool {
        true
    }

    fn answer(self: Box<Self>, commit: Result<()>) {
        let _ = self.reply.send(answer(self.outcome, commit));
    }

    fn fail(self: Box<Self>, e: StoreError) {
        let _ = self.reply.send(Err(e));
    }

    fn groupable(&self) -> Option<&QueuedPost> {
        self.post.groupable().then_some(&self.post)
    }

    fn written(&mut self, posted: Posted) {
        self.outcome = Some(Ok(posted));
    }

    fn storage(&self) -> Option<bool> {
        storage(&self.outcome)
    }

    fn traced(&self, jobs: usize, commit_ms: f64) {
        self.trace.note(jobs, commit_ms);
    }
}

pub(super) struct BatchWriter {
    /// Jobs for the writer thread; `None` once closed.
    jobs: std::sync::Mutex<Option<mpsc::Sender<Box<dyn Job>>>>,
    /// Resolves when the writer thread has finished its last batch and closed its connection.
    done: tokio::sync::Mutex<Option<oneshot::Receiver<()>>>,
    /// Whether the writer's transactions are failing now, for readiness.
    health: Arc<Health>,
}

/// Whether the writer's writes fail: set when a transaction cannot begin, its savepoints or its
/// COMMIT fail, or the database itself fails a write (a full disk, a lost database: any error that
/// is not a conflict, invalid data or a rule of the store); cleared by the next COMMIT that
/// makes a write durable. A job refused for its own reasons changes nothing.
#[derive(Debug, Default)]
pub(super) struct Health {
    /// Unix milliseconds of the first failure of the current run of failures; 0 when healthy.
    failing_since_ms: AtomicI64,
}

impl Health {
    fn failed(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| {
                i64::try_from(d.as_millis()).unwrap_or(i64::MAX).max(1)
            });
        let _ =
            self.failing_since_ms
                .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
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
    /// connection (PostgreSQL).
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
        let writer = async move {
            match connect.await {
                Ok(conn) => {
                    let _ = open_tx.send(Ok(()));
                    run_writer(conn, begin, reconnect, rx, &writer_health).await;
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
            done: tokio::sync::Mutex::new(Some(done_rx)),
            health,
        })
    }

    /// Since when (Unix milliseconds) the writer's transactions have failed, while they do.
    pub(super) fn failing_since_ms(&self) -> Option<i64> {
        self.health.failing_since_ms()
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

    /// Queues a post: run alone, or on PostgreSQL written with the posts that open a thread
    /// queued next to it ([`post_group`]).
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

    /// Hands `job` to the writer and waits for the answer it sends on `rx`.
    async fn queue<T>(&self, job: Box<dyn Job>, rx: oneshot::Receiver<Result<T>>) -> Result<T> {
        self.send(job).await?;
        rx.await.map_err(|_| stopped())?
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

async fn run_writer(
    mut conn: Conn,
    begin: &'static str,
    reconnect: Option<AnyConnectOptions>,
    mut rx: mpsc::Receiver<Box<dyn Job>>,
    health: &Health,
) {
    // Each statement sent to PostgreSQL is a round trip, so the savepoint bookkeeping rides along
    // with its neighbours: the batch opens with the first job's savepoint, each job's end opens
    // the next one's, and COMMIT releases the last.
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let mut began = bookkeeping(&mut conn, begin).await;
        if began.is_err()
            && let Some(options) = &reconnect
        {
            // The server may have restarted: one fresh connection before failing the batch.
            match AnyConnection::connect_with(options).await {
                Ok(fresh) => {
                    conn = Conn::Pg(fresh);
                    began = bookkeeping(&mut conn, begin).await;
                }
                Err(e) => tracing::warn!(error = %e, "Could not reconnect the writer."),
            }
        }
        if let Err(e) = began {
            tracing::error!(error = %e, "Could not begin a write transaction.");
            health.failed();
            // A failed multi-statement start may have left a transaction open.
            let _ = bookkeeping(&mut conn, "ROLLBACK").await;
            for job in batch.drain(..) {
                job.fail(e.clone());
            }
            continue;
        }
        let mut ran = Vec::with_capacity(batch.len());
        if let Err(e) = run_batch(&mut conn, &mut batch, &mut ran).await {
            // The savepoint machinery itself failed: give up the whole batch.
            tracing::error!(error = %e, "A write savepoint failed; rolling back the batch.");
            health.failed();
            let _ = bookkeeping(&mut conn, "ROLLBACK").await;
            for job in ran.drain(..).chain(batch.drain(..)) {
                job.fail(e.clone());
            }
            continue;
        }
        let started = std::time::Instant::now();
        let commit = bookkeeping(&mut conn, "COMMIT").await;
        let took = started.elapsed();
        crate::metrics::get().group_commit(ran.len(), took, commit.is_ok());
        if crate::telemetry::on() {
            for job in &ran {
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
                let _ = bookkeeping(&mut conn, "ROLLBACK").await;
            }
        }
        for job in ran {
            job.answer(commit.clone());
        }
    }
    if let Conn::Pg(conn) = conn {
        let _ = conn.close().await;
    }
}

/// Runs the jobs of `batch` in the open transaction, moving each to `ran` once it has run (with
/// its outcome). The savepoint `job` is open when this starts. An error is the bookkeeping's own;
/// the jobs not yet run are then left in `batch`.
async fn run_batch(
    conn: &mut Conn,
    batch: &mut Vec<Box<dyn Job>>,
    ran: &mut Vec<Box<dyn Job>>,
) -> Result<()> {
    let mut pending: VecDeque<_> = std::mem::take(batch).into();
    let outcome = run_jobs(conn, &mut pending, ran).await;
    batch.extend(pending);
    outcome
}

async fn run_jobs(
    conn: &mut Conn,
    pending: &mut VecDeque<Box<dyn Job>>,
    ran: &mut Vec<Box<dyn Job>>,
) -> Result<()> {
    // The last `shared` jobs of `ran` are repeatable ones that ran since the savepoint was set.
    let mut shared = 0;
    while let Some(mut job) = pending.pop_front() {
        if job.groupable().is_some()
            && pending
                .front()
                .is_some_and(|next| next.groupable().is_some())
        {
            let mut group = vec![job];
            while group.len() < MAX_GROUP
                && let Some(next) = pending.pop_front()
            {
                if next.groupable().is_none() {
                    pending.push_front(next);
                    break;
                }
                group.push(next);
            }
            if shared > 0 {
                // The group gets a savepoint of its own.
                if let Err(e) = settle(conn, true).await {
                    pending.extend(group);
                    return Err(e);
                }
                shared = 0;
            }
            run_group(conn, group, pending, ran).await?;
            continue;
        }
        let last = pending.is_empty();
        if job.repeatable() {
            let ok = job.run(conn).await;
            ran.push(job);
            if ok {
                shared += 1;
                if shared == SHARED_RUN && !last {
                    settle(conn, true).await?;
                    shared = 0;
                }
                continue;
            }
            if shared == 0 {
                // It ran right after the savepoint: it is undone alone, like a job run once.
                if last {
                    bookkeeping(conn, "ROLLBACK TO job").await?;
                } else {
                    settle(conn, false).await?;
                }
                continue;
            }
            // Undo the run since the savepoint (this job's included) and replay the others one
            // savepoint per job. The failure stands without a second run: the replay rebuilds
            // what the failing job ran on.
            bookkeeping(conn, "ROLLBACK TO job").await?;
            let failed = ran.pop().expect("the failing job was just kept");
            let mut replay: VecDeque<_> = ran.drain(ran.len() - shared..).collect();
            shared = 0;
            let mut replayed = Ok(());
            while let Some(mut job) = replay.pop_front() {
                let ok = job.run(conn).await;
                ran.push(job);
                replayed = settle(conn, ok).await;
                if replayed.is_err() {
                    ran.extend(replay.drain(..));
                    break;
                }
            }
            ran.push(failed);
            replayed?;
            continue;
        }
        if shared > 0 {
            // A job that runs once gets a savepoint of its own.
            if let Err(e) = bookkeeping(conn, "RELEASE job; SAVEPOINT job").await {
                pending.push_front(job);
                return Err(e);
            }
            shared = 0;
        }
        let ok = job.run(conn).await;
        ran.push(job);
        match (ok, last) {
            // COMMIT releases the last savepoint.
            (true, true) => {}
            (false, true) => bookkeeping(conn, "ROLLBACK TO job").await?,
            (ok, false) => settle(conn, ok).await?,
        }
    }
    Ok(())
}

/// Writes `group` (posts that open a thread, at least two, right after a savepoint) in one call;
/// when that fails, undoes it and runs each post alone with a savepoint of its own, so that only
/// a failing post fails. A savepoint is open after it when jobs are left in `pending`.
async fn run_group(
    conn: &mut Conn,
    group: Vec<Box<dyn Job>>,
    pending: &mut VecDeque<Box<dyn Job>>,
    ran: &mut Vec<Box<dyn Job>>,
) -> Result<()> {
    let posts: Vec<&QueuedPost> = group.iter().filter_map(|job| job.groupable()).collect();
    let written = post_group(conn, &posts).await;
    drop(posts);
    match written {
        Ok(posted) => {
            for (mut job, posted) in group.into_iter().zip(posted) {
                job.written(posted);
                ran.push(job);
            }
            if !pending.is_empty() {
                settle(conn, true).await?;
            }
            Ok(())
        }
        Err(e) => {
            tracing::debug!(error = %e, "A group of posts failed; writing each alone.");
            let mut group: VecDeque<_> = group.into();
            let mut outcome = bookkeeping(conn, "ROLLBACK TO job").await;
            while outcome.is_ok()
                && let Some(mut job) = group.pop_front()
            {
                let ok = job.run(conn).await;
                ran.push(job);
                outcome = settle(conn, ok).await;
            }
            // What did not run goes back, to be failed with the batch.
            while let Some(job) = group.pop_back() {
                pending.push_front(job);
            }
            outcome
        }
    }
}

/// After a job that has a savepoint of its own: keeps (`ok`) or undoes its effects, and sets the
/// savepoint of the next.
async fn settle(conn: &mut Conn, ok: bool) -> Result<()> {
    let sql = if ok {
        "RELEASE job; SAVEPOINT job"
    } else {
        "ROLLBACK TO job; RELEASE job; SAVEPOINT job"
    };
    bookkeeping(conn, sql).await
}

/// Runs one of the writer's own statements (they take no parameters). On SQLite they are
/// prepared once and kept; on PostgreSQL, where a prepared call holds one statement, they go as
/// text.
async fn bookkeeping(conn: &mut Conn, sql: &'static str) -> Result<()> {
    match conn {
        Conn::Lite(_) => {
            super::db::query(sql).execute(&mut *conn).await?;
        }
        Conn::Pg(conn) => {
            conn.execute(sql).await?;
        }
    }
    Ok(())
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
    async fn writer(db: &crate::store::test_db::TestDb) -> BatchWriter {
        let Some(path) = db.sqlite_path() else {
            let options: sqlx::any::AnyConnectOptions = db.url.parse().unwrap();
            let mut setup = <sqlx::AnyConnection as sqlx::Connection>::connect_with(&options)
                .await
                .unwrap();
            sqlx::Executor::execute(&mut setup, SETUP).await.unwrap();
            let connect = {
                let options = options.clone();
                async move {
                    Ok(Conn::Pg(
                        <sqlx::AnyConnection as sqlx::Connection>::connect_with(&options).await?,
                    ))
                }
            };
            return BatchWriter::start(connect, "BEGIN; SAVEPOINT job", Some(options))
                .await
                .unwrap();
        };
        let conn = crate::store::db::connect(&path, true).unwrap();
        conn.execute_batch(&format!("PRAGMA foreign_keys = ON; {SETUP}"))
            .unwrap();
        BatchWriter::start(
            async move { Ok(Conn::Lite(conn)) },
            "BEGIN IMMEDIATE; SAVEPOINT job",
            None,
        )
        .await
        .unwrap()
    }

    /// The ids kept in `t`, in order.
    async fn rows(db: &crate::store::test_db::TestDb) -> Vec<String> {
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

    /// What a test job does: insert its row, then fail or not.
    #[derive(Clone, Copy)]
    enum Act {
        Insert,
        InsertThenFail,
    }

    fn insert<'c>(conn: &'c mut Conn, id: String, act: Act) -> BoxFut<'c, Result<()>> {
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
