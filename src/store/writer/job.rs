//! The writer's jobs: one queued write with its caller's answer channel, its result type erased
//! ([`Job`]) so that one channel carries every kind; a write run once ([`Once`]) or, in tests, as
//! often as the writer needs (`Again`), and a post ([`PostJob`]), which may run again from its
//! inputs. It depends only on `db`, `error` and the post's building block (`tx::post`).

use tokio::sync::oneshot;

use crate::store::db::{BoxFut, Conn};
use crate::store::error::{Result, StoreError};
use crate::store::tx::post::{Posted, QueuedPost};

/// One queued write, with its result type erased so that one channel carries every kind.
pub(super) trait Job: Send {
    /// Runs in the open transaction, keeping the outcome for the answer; says whether it
    /// succeeded.
    fn run<'c>(&'c mut self, conn: &'c mut Conn) -> BoxFut<'c, bool>;
    /// Whether it may run again once its effects were rolled back.
    fn repeatable(&self) -> bool;
    /// Answers the caller: its own error, or its value once `commit` says the batch is durable.
    fn answer(self: Box<Self>, commit: Result<()>);
    /// Answers the caller without running (the batch could not start, or was given up).
    fn fail(self: Box<Self>, e: StoreError);
    /// Whether its caller stopped waiting for the answer (its deadline passed): then it is not
    /// run, since the caller was told it failed.
    fn abandoned(&self) -> bool;
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

/// What a queued write runs: once ([`Once`]) or as often as the writer needs (`Again`).
pub(super) trait Op<T>: Send {
    const REPEATABLE: bool;
    fn call<'c>(&mut self, conn: &'c mut Conn) -> BoxFut<'c, Result<T>>;
}

pub(super) struct Once<F>(pub(super) Option<F>);

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
pub(super) struct Again<F>(pub(super) F);

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
pub(super) struct Queued<T, O> {
    pub(super) op: O,
    pub(super) outcome: Option<Result<T>>,
    pub(super) reply: oneshot::Sender<Result<T>>,
    pub(super) trace: Traced,
}

impl<T: Send + 'static, O: Op<T>> Job for Queued<T, O> {
    fn run<'c>(&'c mut self, conn: &'c mut Conn) -> BoxFut<'c, bool> {
        let run = self.op.call(conn);
        let outcome = &mut self.outcome;
        let context = self.trace.context.clone();
        Box::pin(crate::store::trace::within(context, async move {
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

    fn abandoned(&self) -> bool {
        self.reply.is_closed()
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
pub(super) struct Traced {
    pub(super) context: Option<crate::telemetry::TraceContext>,
    pub(super) span: tracing::Span,
}

impl Traced {
    /// The caller's, taken before it waits.
    pub(super) fn here() -> Traced {
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
pub(super) struct PostJob {
    pub(super) post: QueuedPost,
    pub(super) outcome: Option<Result<Posted>>,
    pub(super) reply: oneshot::Sender<Result<Posted>>,
    pub(super) trace: Traced,
}

impl Job for PostJob {
    fn run<'c>(&'c mut self, conn: &'c mut Conn) -> BoxFut<'c, bool> {
        Box::pin(async move {
            let context = self.post.trace.clone();
            let result = crate::store::trace::within(context, self.post.run(conn)).await;
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

    fn abandoned(&self) -> bool {
        self.reply.is_closed()
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
