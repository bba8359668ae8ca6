//! The follower: watches each delegated task until it ends, turning what it sees into
//! [`RemoteUpdate`](crate::domain::RemoteUpdate)s the service posts in the thread.
//!
//! By the mode chosen at the thread's first send (`domain::FollowMode`): **stream**:
//! `SubscribeToTask`, held open with a lease, resumed after a disconnect or a restart; **push**:
//! each push only makes the task due, and the follower reads it with `GetTask` (a push body is
//! never trusted as the task's content; a lost push is caught by a look every
//! [`PUSH_SAFETY`]); **poll**: `GetTask` with a backoff from [`POLL_MIN`] doubling to
//! [`POLL_MAX`], back to the minimum after any change.
//!
//! A task is followed by one follower at a time (a lease on its row, renewed while a stream is
//! open), on any replica, claimed by the shared lease loop ([`super::super::lease`]). Every update
//! posts with an idempotency key made of the task, the state and the event, so seeing a state
//! again posts nothing twice.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use tokio_util::sync::CancellationToken;

use crate::bus::{Topic, WakeBus};
use crate::domain::{FollowMode, RemoteState, Timestamp};
use crate::remote::observe::{
    POLL_MAX, POLL_MIN, PUSH_SAFETY, ms, state_of, status_update, task_update,
};
use crate::remote::{A2aClient, CallError, RemoteTarget};
use crate::service::{Service, ServiceError};
use crate::store::RemoteTaskRecord;
use crate::wire::pb;
use crate::workers::lease::{self, Leased};

/// How long a follower owns a task before it must renew.
const LEASE: Duration = Duration::from_secs(15);
/// Tasks followed at once per process (streams held open, or reads in flight).
const MAX_FOLLOWED: usize = 256;
/// The longest a follower sleeps without looking for due tasks.
const SWEEP: Duration = Duration::from_secs(15);
/// Why one turn of following a task stopped early.
#[derive(Debug, thiserror::Error)]
enum FollowError {
    #[error(transparent)]
    Call(#[from] CallError),
    /// The answer makes no sense as a task (permanent).
    #[error("the remote agent's task could not be read: {0}")]
    Invalid(String),
    /// Recording it here failed (the database; retried).
    #[error("{0}")]
    Local(String),
}

impl FollowError {
    fn retryable(&self) -> bool {
        match self {
            FollowError::Call(e) => e.retryable(),
            FollowError::Invalid(_) => false,
            FollowError::Local(_) => true,
        }
    }
}

/// Follows delegated tasks until they end. Several per database are safe.
pub struct Follower {
    service: Service,
    client: A2aClient,
    id: String,
}

impl Follower {
    pub fn new(service: Service, client: A2aClient) -> Follower {
        Follower {
            service,
            client,
            id: format!("follower-{}", uuid::Uuid::now_v7().simple()),
        }
    }

    /// Follows until `shutdown`: claims due tasks (up to `MAX_FOLLOWED` at once), sleeps until
    /// woken by the bus (a send, a push), the next due task or the sweep. Streams held open are
    /// dropped at shutdown; their leases expire and a follower resumes them.
    pub async fn run(self: Arc<Self>, bus: Arc<dyn WakeBus>, shutdown: CancellationToken) {
        let shape = lease::Shape {
            what: "remote tasks",
            topic: Topic::remote(),
            slots: MAX_FOLLOWED,
            sweep: SWEEP,
            min_pause: Duration::from_millis(10),
            overdue_pause: Duration::from_millis(10),
            at_stop: lease::AtStop::Abort,
        };
        lease::run(self, bus, shape, shutdown).await;
    }

    /// Claims one due task and gives it one turn (tests drive the follower with this); `false`
    /// when none was due.
    pub async fn follow_next(self: &Arc<Self>) -> Result<bool, ServiceError> {
        lease::step(self, CancellationToken::new()).await
    }

    /// One turn with a claimed task: read it (poll, push) or hold its stream open until it ends
    /// or breaks; then give the lease back.
    async fn follow(&self, task: RemoteTaskRecord, shutdown: CancellationToken) {
        use tracing::Instrument as _;
        // The turn continues the trace of the thread's first message (the internal agent's
        // request), so the remote's answers land in it.
        let span = crate::telemetry::span!("remote.follow", trace_id = tracing::field::Empty);
        if !span.is_none() {
            let at = self.service.thread_trace(&task.thread).await;
            crate::telemetry::adopt(&span, at.as_ref());
            crate::telemetry::record_trace_id(&span);
        }
        self.follow_turn(task, shutdown).instrument(span).await;
    }

    async fn follow_turn(&self, task: RemoteTaskRecord, shutdown: CancellationToken) {
        let thread = task.thread.clone();
        let Some(task_id) = task.task_id.clone() else {
            return;
        };
        let target = match self.service.remote_target(&task.remote).await {
            Ok(Some(t)) => t,
            Ok(None) => {
                let _ = self
                    .service
                    .remote_abandon(&thread, "the remote agent is no longer registered")
                    .await;
                return;
            }
            Err(e) => {
                self.trouble(&task, e.message).await;
                return;
            }
        };
        let outcome = match task.follow {
            FollowMode::Stream => self.stream(&task, &task_id, &target, shutdown).await,
            FollowMode::Push | FollowMode::Poll => self.look(&task, &task_id, &target).await,
        };
        if let Err(e) = outcome {
            if e.retryable() {
                self.trouble(&task, e.to_string()).await;
            } else {
                let _ = self.service.remote_abandon(&thread, &e.to_string()).await;
            }
        }
        let _ = self.service.renew_remote_task(&thread, &self.id, 0).await;
    }

    /// Reads the task once and records it, scheduling the next look.
    async fn look(
        &self,
        task: &RemoteTaskRecord,
        task_id: &str,
        target: &RemoteTarget,
    ) -> Result<(), FollowError> {
        let current = self.client.get_task(target, task_id).await?;
        self.record(task, &current).await
    }

    /// Records a whole task and schedules the next look by the follow mode.
    async fn record(&self, task: &RemoteTaskRecord, current: &pb::Task) -> Result<(), FollowError> {
        self.record_as(task, current, task.follow).await
    }

    /// [`Self::record`], scheduling the next look as `follow` would.
    async fn record_as(
        &self,
        task: &RemoteTaskRecord,
        current: &pb::Task,
        follow: FollowMode,
    ) -> Result<(), FollowError> {
        let update = task_update(current).map_err(FollowError::Invalid)?;
        let now = self.service.clock_now();
        let changed = Some(update.state) != task.state;
        let (next, backoff) = match follow {
            FollowMode::Stream => (now, 0),
            FollowMode::Push => (Timestamp(now.0 + ms(PUSH_SAFETY)), 0),
            FollowMode::Poll => {
                let backoff = if changed {
                    ms(POLL_MIN)
                } else {
                    (task.backoff_ms.max(ms(POLL_MIN)) * 2).min(ms(POLL_MAX))
                };
                (Timestamp(now.0 + backoff), backoff)
            }
        };
        self.service
            .remote_observed(&task.thread, update, next, backoff)
            .await
            .map_err(|e| FollowError::Local(e.message))?;
        Ok(())
    }

    /// Holds the task's stream open: the first event is the task itself; a status that
    /// interrupts or ends it is followed by a read of the whole task (for its artifacts).
    async fn stream(
        &self,
        task: &RemoteTaskRecord,
        task_id: &str,
        target: &RemoteTarget,
        shutdown: CancellationToken,
    ) -> Result<(), FollowError> {
        let mut events = match self.client.subscribe_to_task(target, task_id).await {
            Ok(events) => events,
            Err(refused) => {
                // A task that ended meanwhile cannot be subscribed to (UnsupportedOperation), and
                // a remote may refuse resubscribing: read the task instead, and until the stream
                // can be opened again, look at it as polling would.
                let current = match self.client.get_task(target, task_id).await {
                    Ok(t) => t,
                    Err(_) => return Err(refused.into()),
                };
                return self.record_as(task, &current, FollowMode::Poll).await;
            }
        };
        let mut renew = tokio::time::interval(LEASE / 3);
        renew.tick().await;
        let mut last = task.state;
        loop {
            let event = tokio::select! {
                e = events.next() => e,
                _ = renew.tick() => {
                    match self.service.renew_remote_task(&task.thread, &self.id, ms(LEASE)).await {
                        Ok(true) => continue,
                        // The lease passed to another follower (this one was too slow): it follows now.
                        _ => return Ok(()),
                    }
                }
                () = shutdown.cancelled() => return Ok(()),
            };
            let Some(event) = event else {
                // The remote closed the stream: done if the task ended, else resumed later.
                if last.is_some_and(RemoteState::is_terminal) {
                    return Ok(());
                }
                let current = self.client.get_task(target, task_id).await?;
                return self.record(task, &current).await;
            };
            let payload = event?.payload;
            let status = match payload {
                Some(pb::stream_response::Payload::Task(t)) => {
                    last = t.status.as_ref().and_then(|s| state_of(s.state));
                    let complete = last.is_some_and(|s| s.is_terminal() || s.is_interrupted());
                    let t = if complete
                        && t.artifacts.is_empty()
                        && last == Some(RemoteState::Completed)
                    {
                        self.client.get_task(target, task_id).await?
                    } else {
                        t
                    };
                    self.record(task, &t).await?;
                    continue;
                }
                Some(pb::stream_response::Payload::StatusUpdate(u)) if u.task_id == task_id => {
                    u.status
                }
                // Artifacts are read with the whole task when it completes; other tasks' events
                // and bare messages are not this task's.
                _ => continue,
            };
            let Some(status) = status else { continue };
            let state = state_of(status.state);
            last = state;
            if state == Some(RemoteState::Completed) {
                let current = self.client.get_task(target, task_id).await?;
                self.record(task, &current).await?;
            } else {
                let update = status_update(task_id, &status).map_err(FollowError::Invalid)?;
                let now = self.service.clock_now();
                self.service
                    .remote_observed(&task.thread, update, now, 0)
                    .await
                    .map_err(|e| FollowError::Local(e.message))?;
            }
            if state.is_some_and(RemoteState::is_terminal) {
                return Ok(());
            }
        }
    }

    /// Following failed for now: retry after a growing backoff.
    async fn trouble(&self, task: &RemoteTaskRecord, error: String) {
        let backoff = (task.backoff_ms.max(ms(POLL_MIN)) * 2).min(ms(POLL_MAX));
        tracing::info!(thread = %task.thread, error = %error, "Following a remote task failed; will retry.");
        let _ = self
            .service
            .remote_follow_trouble(&task.thread, error, backoff)
            .await;
    }
}

impl Leased for Follower {
    type Item = RemoteTaskRecord;

    async fn claim(&self, n: usize) -> Result<Vec<RemoteTaskRecord>, ServiceError> {
        self.service
            .claim_remote_tasks(&self.id, ms(LEASE), n as i64)
            .await
    }

    async fn next_due(&self) -> Result<Option<Timestamp>, ServiceError> {
        self.service.next_remote_check().await
    }

    async fn work(self: Arc<Self>, task: RemoteTaskRecord, shutdown: CancellationToken) {
        self.follow(task, shutdown).await;
    }

    fn now(&self) -> Timestamp {
        self.service.clock_now()
    }
}
