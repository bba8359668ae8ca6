//! The group-commit writer: one thread owns the write connection and commits every write queued at
//! the moment it starts a batch (up to [`MAX_BATCH`]) in one transaction, each inside its own
//! savepoint (a failing write rolls back alone), then answers each caller. Durability is not
//! weakened: every answer follows a durable commit; the flush is simply shared. Used on both
//! backends: on PostgreSQL it also avoids holding a recipient's row lock across one fsync per post.

use std::future::Future;

use sqlx::any::AnyConnectOptions;
use sqlx::{AnyConnection, Connection, Executor};
use tokio::sync::{mpsc, oneshot};

use super::db::Conn;
use super::{BoxFut, Result, StoreError};

/// Most jobs committed together; bounds the latency a batch adds to its last job.
const MAX_BATCH: usize = 256;

/// Reports a job's outcome after the batch's commit (or its failure).
type Completion = Box<dyn FnOnce(Result<()>) + Send>;

/// One queued write, with its result type erased so that one channel carries every kind.
trait Job: Send {
    /// Runs in the open transaction; says whether it succeeded and how to answer after the commit.
    fn run<'c>(self: Box<Self>, conn: &'c mut Conn) -> BoxFut<'c, (bool, Completion)>;
    /// Answers the caller without running (the batch could not start).
    fn fail(self: Box<Self>, e: StoreError);
}

struct TypedJob<T, F> {
    op: F,
    reply: oneshot::Sender<Result<T>>,
}

impl<T, F> Job for TypedJob<T, F>
where
    T: Send + 'static,
    F: for<'c> FnOnce(&'c mut Conn) -> BoxFut<'c, Result<T>> + Send + 'static,
{
    fn run<'c>(self: Box<Self>, conn: &'c mut Conn) -> BoxFut<'c, (bool, Completion)> {
        let TypedJob { op, reply } = *self;
        Box::pin(async move {
            match op(conn).await {
                Ok(value) => {
                    let done: Completion = Box::new(move |commit| {
                        let _ = reply.send(commit.map(|()| value));
                    });
                    (true, done)
                }
                Err(e) => {
                    let done: Completion = Box::new(move |_| {
                        let _ = reply.send(Err(e));
                    });
                    (false, done)
                }
            }
        })
    }

    fn fail(self: Box<Self>, e: StoreError) {
        let _ = self.reply.send(Err(e));
    }
}

pub(super) struct BatchWriter {
    /// Jobs for the writer thread; `None` once closed.
    jobs: std::sync::Mutex<Option<mpsc::Sender<Box<dyn Job>>>>,
    /// Resolves when the writer thread has finished its last batch and closed its connection.
    done: tokio::sync::Mutex<Option<oneshot::Receiver<()>>>,
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
        let writer = async move {
            match connect.await {
                Ok(conn) => {
                    let _ = open_tx.send(Ok(()));
                    run_writer(conn, begin, reconnect, rx).await;
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
        })
    }

    pub(super) async fn run<T, F>(&self, op: F) -> Result<T>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut Conn) -> BoxFut<'c, Result<T>> + Send + 'static,
    {
        let (reply, rx) = oneshot::channel::<Result<T>>();
        let job: Box<dyn Job> = Box::new(TypedJob { op, reply });
        let sender = self.jobs.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let sender = sender.ok_or_else(|| StoreError::Database("the store is closed".into()))?;
        sender
            .send(job)
            .await
            .map_err(|_| StoreError::Database("the store writer stopped".into()))?;
        rx.await
            .map_err(|_| StoreError::Database("the store writer stopped".into()))?
    }

    /// Stops taking jobs and waits for the writer to finish those already queued.
    pub(super) async fn close(&self) {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(done) = self.done.lock().await.take() {
            let _ = done.await;
        }
    }
}

async fn run_writer(
    mut conn: Conn,
    begin: &'static str,
    reconnect: Option<AnyConnectOptions>,
    mut rx: mpsc::Receiver<Box<dyn Job>>,
) {
    // Each statement sent to PostgreSQL is a round trip, so the savepoint bookkeeping rides along
    // with its neighbours: the batch opens with the first job's savepoint, each job's end opens
    // the next one's, and COMMIT releases the last.
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let mut completions = Vec::with_capacity(batch.len());
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
            // A failed multi-statement start may have left a transaction open.
            let _ = bookkeeping(&mut conn, "ROLLBACK").await;
            for job in batch.drain(..) {
                job.fail(e.clone());
            }
            continue;
        }
        let jobs = batch.len();
        for (i, job) in batch.drain(..).enumerate() {
            let last = i + 1 == jobs;
            let step = async {
                let (ok, done) = job.run(&mut conn).await;
                let next = match (ok, last) {
                    (true, true) => None,
                    (true, false) => Some("RELEASE job; SAVEPOINT job"),
                    (false, true) => Some("ROLLBACK TO job"),
                    (false, false) => Some("ROLLBACK TO job; RELEASE job; SAVEPOINT job"),
                };
                if let Some(sql) = next {
                    bookkeeping(&mut conn, sql).await?;
                }
                Ok::<_, StoreError>((ok, done))
            };
            match step.await {
                Ok(pair) => completions.push(pair),
                Err(e) => {
                    // The savepoint machinery itself failed: give up the whole batch.
                    tracing::error!(error = %e, "A write savepoint failed; rolling back the batch.");
                    let _ = bookkeeping(&mut conn, "ROLLBACK").await;
                    for (_, done) in completions.drain(..) {
                        done(Err(e.clone()));
                    }
                    // Jobs not yet run are dropped: their callers see the writer's answer channel
                    // close, as before.
                    break;
                }
            }
        }
        batch.clear();
        if completions.is_empty() {
            continue;
        }
        let started = std::time::Instant::now();
        let commit = bookkeeping(&mut conn, "COMMIT").await;
        crate::metrics::get().group_commit(completions.len(), started.elapsed(), commit.is_ok());
        if let Err(e) = &commit {
            tracing::error!(error = %e, "A group commit failed.");
            let _ = bookkeeping(&mut conn, "ROLLBACK").await;
        }
        for (ok, done) in completions {
            // A failed job carries its own error; a successful one learns how the commit went.
            done(if ok { commit.clone() } else { Ok(()) });
        }
    }
    if let Conn::Pg(conn) = conn {
        let _ = conn.close().await;
    }
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
