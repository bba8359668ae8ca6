//! The bridge's moving parts: the **sender** that turns a `remote.send` / `remote.cancel`
//! delivery into an A2A call, and the **follower** that watches each delegated task until it
//! ends, turning what it sees into [`RemoteUpdate`]s the service posts in the thread.
//!
//! - Sending: `SendMessage` with `returnImmediately` (the task is followed, not waited for), the
//!   message id = liaison's message id (so a retried send is the same message to the remote), the
//!   thread's `contextId`, the task id when answering an interrupted task, `referenceTaskIds` for
//!   a new round, the skill in `metadata.skill`, and, when liaison follows by push, a push config
//!   pointing at its own receiver with a token it keeps sealed.
//! - Following, by the mode chosen at the thread's first send (`domain::FollowMode`):
//!   **stream**: `SubscribeToTask`, held open with a lease, resumed after a disconnect or a
//!   restart; **push**: each push only makes the task due, and the follower reads it with
//!   `GetTask` (a push body is never trusted as the task's content; a lost push is caught by a
//!   look every [`PUSH_SAFETY`]); **poll**: `GetTask` with a backoff from [`POLL_MIN`] doubling to
//!   [`POLL_MAX`], back to the minimum after any change.
//! - A task is followed by one follower at a time (a lease on its row, renewed while a stream is
//!   open), on any replica. Every update posts with an idempotency key made of the task, the
//!   state and the event, so seeing a state again posts nothing twice.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::{A2aClient, CallError, RemoteTarget};
use crate::a2a::pb;
use crate::bus::{Topic, WakeBus};
use crate::domain::delivery::{SendFailure, SendResult};
use crate::domain::{FollowMode, RemoteState, ThreadId, Timestamp};
use crate::service::{OutboundSend, RemoteUpdate, Service};
use crate::store::{DeliveryRecord, REMOTE_CANCEL, RemoteTaskRecord};

/// The first and longest wait between two polls of a task that does not change.
pub const POLL_MIN: Duration = Duration::from_secs(1);
pub const POLL_MAX: Duration = Duration::from_secs(30);
/// How often a task followed by push is read anyway (a push may be lost).
pub const PUSH_SAFETY: Duration = Duration::from_secs(60);
/// How long a follower owns a task before it must renew.
const LEASE: Duration = Duration::from_secs(15);
/// Tasks followed at once per process (streams held open, or reads in flight).
const MAX_FOLLOWED: usize = 256;
/// The longest a follower sleeps without looking for due tasks.
const SWEEP: Duration = Duration::from_secs(15);
/// The path of liaison's receiver for the remote agents' push notifications.
pub const PUSH_PATH: &str = "/remote/v1/push";

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A task state from the wire; `None` for an unspecified (or unknown) state.
fn state_of(s: i32) -> Option<RemoteState> {
    Some(match pb::TaskState::try_from(s).ok()? {
        pb::TaskState::Submitted => RemoteState::Submitted,
        pb::TaskState::Working => RemoteState::Working,
        pb::TaskState::InputRequired => RemoteState::InputRequired,
        pb::TaskState::AuthRequired => RemoteState::AuthRequired,
        pb::TaskState::Completed => RemoteState::Completed,
        pb::TaskState::Failed => RemoteState::Failed,
        pb::TaskState::Rejected => RemoteState::Rejected,
        pb::TaskState::Canceled => RemoteState::Canceled,
        pb::TaskState::Unspecified => return None,
    })
}

fn text_of(m: Option<&pb::Message>) -> String {
    m.map(|m| {
        m.parts
            .iter()
            .filter_map(|p| match &p.content {
                Some(pb::part::Content::Text(t)) => Some(t.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    })
    .unwrap_or_default()
}

/// What a status says, keyed by its message id, else its timestamp, else its text.
fn status_update(task_id: &str, status: &pb::TaskStatus) -> Result<RemoteUpdate, String> {
    let state = state_of(status.state)
        .ok_or_else(|| format!("the remote sent task {task_id} without a known state"))?;
    let text = text_of(status.message.as_ref());
    let event_key = match (&status.message, &status.timestamp) {
        (Some(m), _) if !m.message_id.is_empty() => format!("message:{}", m.message_id),
        (_, Some(t)) => format!("at:{}", serde_json::to_string(t).unwrap_or_default()),
        _ => format!("text:{text}"),
    };
    Ok(RemoteUpdate {
        task_id: task_id.to_owned(),
        state,
        text,
        event_key,
        attachments: Vec::new(),
    })
}

/// A whole task as an update: its status, and when completed its artifacts (text parts join the
/// body after the status text; the other parts become attachments).
pub fn task_update(task: &pb::Task) -> Result<RemoteUpdate, String> {
    if task.id.is_empty() {
        return Err("the remote sent a task without an id".into());
    }
    let status = task
        .status
        .as_ref()
        .ok_or_else(|| format!("the remote sent task {} without a status", task.id))?;
    let mut update = status_update(&task.id, status)?;
    if update.state == RemoteState::Completed {
        let parts: Vec<pb::Part> = task
            .artifacts
            .iter()
            .flat_map(|a| a.parts.iter().cloned())
            .collect();
        let (text, attachments) =
            crate::a2a::convert::parts_in(parts).map_err(|e| format!("an artifact: {e}"))?;
        if !text.is_empty() {
            if !update.text.is_empty() {
                update.text.push_str("\n\n");
            }
            update.text.push_str(&text);
        }
        update.attachments = attachments;
    }
    Ok(update)
}

/// A direct message answer (no task): a completed exchange.
fn message_update(m: &pb::Message) -> Result<RemoteUpdate, String> {
    let (text, attachments) = crate::a2a::convert::parts_in(m.parts.clone())
        .map_err(|e| format!("the remote's answer: {e}"))?;
    Ok(RemoteUpdate {
        task_id: format!("message:{}", m.message_id),
        state: RemoteState::Completed,
        text,
        event_key: format!("message:{}", m.message_id),
        attachments,
    })
}

/// A failed call as an attempt's result (for the outbox's retry rules).
fn send_result(e: &CallError) -> SendResult {
    match e {
        CallError::Transport(f) => SendResult::Failed(f.clone()),
        CallError::Status { code, retry_after } => SendResult::Status {
            code: *code,
            retry_after: *retry_after,
        },
        other if other.retryable() => SendResult::Failed(SendFailure::Request(other.to_string())),
        other => SendResult::Failed(SendFailure::Refused(other.to_string())),
    }
}

/// The remote says the task is unknown or cannot be canceled any more.
fn task_gone(e: &CallError) -> bool {
    match e {
        CallError::Remote(r) => {
            matches!(
                r.reason.as_deref(),
                Some("TASK_NOT_FOUND" | "TASK_NOT_CANCELABLE")
            ) || matches!(r.code, -32001 | -32002)
        }
        _ => false,
    }
}

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

const DELIVERED: SendResult = SendResult::Status {
    code: 200,
    retry_after: None,
};

/// Sends the outbox's remote deliveries.
#[derive(Clone)]
pub struct Sender {
    service: Service,
    client: A2aClient,
    /// liaison's public URL: the base of the push receiver.
    public_url: String,
}

impl Sender {
    pub fn new(service: Service, client: A2aClient, public_url: String) -> Sender {
        Sender {
            service,
            client,
            public_url,
        }
    }

    /// One attempt of a `remote.send` or `remote.cancel` delivery.
    pub async fn deliver(&self, d: &DeliveryRecord) -> SendResult {
        let send = match self.service.outbound_send(d).await {
            Ok(s) => s,
            Err(f) => return SendResult::Failed(f),
        };
        let thread = send.task.thread.clone();
        if d.event_type == REMOTE_CANCEL {
            return self.cancel(&send).await;
        }
        let request = self.request(&send);
        let answer = match self.client.send_message(&send.target, request).await {
            Ok(a) => a,
            Err(e) => return send_result(&e),
        };
        let update = match &answer.payload {
            Some(pb::send_message_response::Payload::Task(t)) => task_update(t),
            Some(pb::send_message_response::Payload::Message(m)) => message_update(m),
            None => Err("the remote answered SendMessage with neither a task nor a message".into()),
        };
        let update = match update {
            Ok(u) => u,
            Err(why) => return SendResult::Failed(SendFailure::Refused(why)),
        };
        let now = self.service.clock_now();
        let (next, backoff) = first_check(send.task.follow, now);
        match self
            .service
            .remote_started(&thread, update, next, backoff)
            .await
        {
            Ok(()) => DELIVERED,
            // The remote has the message; recording it failed. A retry sends the same message id.
            Err(e) => SendResult::Failed(SendFailure::Request(e.message)),
        }
    }

    async fn cancel(&self, send: &OutboundSend) -> SendResult {
        let Some(task_id) = &send.continue_task else {
            return DELIVERED;
        };
        match self.client.cancel_task(&send.target, task_id).await {
            Ok(task) => {
                if let Ok(update) = task_update(&task) {
                    let now = self.service.clock_now();
                    let _ = self
                        .service
                        .remote_observed(&send.task.thread, update, now, 0)
                        .await;
                }
                DELIVERED
            }
            // The task ended by itself meanwhile, or the remote forgot it: nothing left to cancel.
            Err(e) if task_gone(&e) => DELIVERED,
            Err(e) => send_result(&e),
        }
    }

    /// The `SendMessage` request for a send.
    fn request(&self, send: &OutboundSend) -> pb::SendMessageRequest {
        let m = &send.message;
        let mut metadata = pbjson_types::Struct::default();
        if let Some(skill) = &send.task.skill {
            metadata.fields.insert(
                "skill".into(),
                pbjson_types::Value {
                    kind: Some(pbjson_types::value::Kind::StringValue(skill.clone())),
                },
            );
        }
        let reference_task_ids = if send.continue_task.is_none() {
            send.task
                .task_id
                .iter()
                .chain(send.task.earlier_tasks.iter())
                .filter(|id| !id.starts_with("message:"))
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        let message = pb::Message {
            message_id: m.id.to_string(),
            context_id: send.task.context_id.clone(),
            task_id: send.continue_task.clone().unwrap_or_default(),
            role: pb::Role::User as i32,
            parts: crate::a2a::convert::parts_out(m),
            metadata: (!metadata.fields.is_empty()).then_some(metadata),
            extensions: Vec::new(),
            reference_task_ids,
        };
        let push = send
            .push_token
            .as_ref()
            .map(|token| pb::TaskPushNotificationConfig {
                url: format!(
                    "{}{PUSH_PATH}/{}",
                    self.public_url.trim_end_matches('/'),
                    send.task.thread
                ),
                token: token.clone(),
                ..Default::default()
            });
        pb::SendMessageRequest {
            tenant: send.target.tenant.clone().unwrap_or_default(),
            message: Some(message),
            configuration: Some(pb::SendMessageConfiguration {
                accepted_output_modes: Vec::new(),
                task_push_notification_config: push,
                history_length: Some(0),
                return_immediately: true,
            }),
            metadata: None,
        }
    }
}

/// When the follower first looks at a task a send just recorded.
fn first_check(follow: FollowMode, now: Timestamp) -> (Timestamp, i64) {
    match follow {
        FollowMode::Stream => (now, 0),
        FollowMode::Poll => (Timestamp(now.0 + ms(POLL_MIN)), ms(POLL_MIN)),
        FollowMode::Push => (Timestamp(now.0 + ms(PUSH_SAFETY)), 0),
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
    /// woken by the bus (a send, a push), the next due task or the sweep.
    pub async fn run(self: Arc<Self>, bus: Arc<dyn WakeBus>, shutdown: CancellationToken) {
        let mut wake = bus.subscribe(&Topic::remote());
        let slots = Arc::new(Semaphore::new(MAX_FOLLOWED));
        let mut tasks = tokio::task::JoinSet::new();
        loop {
            while tasks.try_join_next().is_some() {}
            let free = slots.available_permits();
            let claimed = if free == 0 {
                Vec::new()
            } else {
                self.service
                    .claim_remote_tasks(&self.id, ms(LEASE), free as i64)
                    .await
                    .unwrap_or_else(|e| {
                        tracing::warn!(error = %e, "Could not claim remote tasks; will retry.");
                        Vec::new()
                    })
            };
            let full = free > 0 && claimed.len() == free;
            for task in claimed {
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    break;
                };
                let me = self.clone();
                let stop = shutdown.clone();
                tasks.spawn(async move {
                    me.follow(task, stop).await;
                    drop(permit);
                });
            }
            if full {
                continue;
            }
            let pause = match self.service.next_remote_check().await {
                Ok(Some(due)) => {
                    let wait = due.0 - self.service.clock_now().0;
                    Duration::from_millis(u64::try_from(wait).unwrap_or(0).max(10)).min(SWEEP)
                }
                Ok(None) => SWEEP,
                Err(_) => Duration::from_secs(1),
            };
            tokio::select! {
                () = wake.woken() => {}
                () = tokio::time::sleep(pause) => {}
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                () = shutdown.cancelled() => break,
            }
        }
        tasks.shutdown().await;
    }

    /// One turn with a claimed task: read it (poll, push) or hold its stream open until it ends
    /// or breaks; then give the lease back.
    async fn follow(&self, task: RemoteTaskRecord, shutdown: CancellationToken) {
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

/// What the push receiver does with a push: checks that the thread is delegated and the token is
/// the one liaison gave (unknown threads and wrong tokens look the same: `false`), then posts a
/// progress note the push carries (a WORKING status with text, of the thread's current task) and
/// makes the task due, so the follower reads the whole task with `GetTask`. Nothing but a progress
/// note is taken from the body.
pub async fn accept_push(
    service: &Service,
    thread: &str,
    token: Option<&str>,
    body: &[u8],
) -> bool {
    let (Ok(thread), Some(token)) = (ThreadId::parse(thread), token) else {
        return false;
    };
    if !matches!(service.remote_push_token_ok(&thread, token).await, Ok(true)) {
        return false;
    }
    if let Ok(event) = serde_json::from_slice::<pb::StreamResponse>(body)
        && let Some(pb::stream_response::Payload::StatusUpdate(u)) = event.payload
        && let Some(status) = &u.status
        && state_of(status.state) == Some(RemoteState::Working)
        && let Ok(update) = status_update(&u.task_id, status)
        && !update.text.trim().is_empty()
    {
        let next = Timestamp(service.clock_now().0 + ms(PUSH_SAFETY));
        // A note about another task than the thread's current one changes nothing.
        let _ = service.remote_observed(&thread, update, next, 0).await;
    }
    service.remote_nudge(&thread).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> pb::Part {
        pb::Part {
            content: Some(pb::part::Content::Text(t.into())),
            ..Default::default()
        }
    }

    fn status(state: pb::TaskState, note: Option<(&str, &str)>) -> pb::TaskStatus {
        pb::TaskStatus {
            state: state as i32,
            message: note.map(|(id, t)| pb::Message {
                message_id: id.into(),
                role: pb::Role::Agent as i32,
                parts: vec![text(t)],
                ..Default::default()
            }),
            timestamp: None,
        }
    }

    #[test]
    fn every_wire_state_but_unspecified_is_known() {
        for (wire, ours) in [
            (pb::TaskState::Submitted, RemoteState::Submitted),
            (pb::TaskState::Working, RemoteState::Working),
            (pb::TaskState::InputRequired, RemoteState::InputRequired),
            (pb::TaskState::AuthRequired, RemoteState::AuthRequired),
            (pb::TaskState::Completed, RemoteState::Completed),
            (pb::TaskState::Failed, RemoteState::Failed),
            (pb::TaskState::Rejected, RemoteState::Rejected),
            (pb::TaskState::Canceled, RemoteState::Canceled),
        ] {
            assert_eq!(state_of(wire as i32), Some(ours));
        }
        assert_eq!(state_of(pb::TaskState::Unspecified as i32), None);
        assert_eq!(state_of(99), None);
    }

    #[test]
    fn a_completed_task_brings_its_artifacts_text_in_the_body_the_rest_attached() {
        let task = pb::Task {
            id: "t1".into(),
            status: Some(status(pb::TaskState::Completed, Some(("m9", "Done.")))),
            artifacts: vec![pb::Artifact {
                artifact_id: "a1".into(),
                parts: vec![
                    text("the answer"),
                    pb::Part {
                        content: Some(pb::part::Content::Raw(b"bytes".to_vec())),
                        filename: "r.txt".into(),
                        media_type: "text/plain".into(),
                        ..Default::default()
                    },
                    pb::Part {
                        content: Some(pb::part::Content::Url("https://x.example/f".into())),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        let u = task_update(&task).unwrap();
        assert_eq!(u.state, RemoteState::Completed);
        assert_eq!(u.text, "Done.\n\nthe answer");
        assert_eq!(u.event_key, "message:m9");
        assert_eq!(u.attachments.len(), 2);
    }

    #[test]
    fn an_interrupted_task_brings_no_artifacts_and_a_task_without_id_or_state_is_refused() {
        let mut task = pb::Task {
            id: "t1".into(),
            status: Some(status(
                pb::TaskState::InputRequired,
                Some(("m1", "Which one?")),
            )),
            artifacts: vec![pb::Artifact {
                parts: vec![text("draft")],
                ..Default::default()
            }],
            ..Default::default()
        };
        let u = task_update(&task).unwrap();
        assert_eq!(
            (u.state, u.text.as_str()),
            (RemoteState::InputRequired, "Which one?")
        );
        assert!(u.attachments.is_empty());
        task.status = Some(status(pb::TaskState::Unspecified, None));
        assert!(task_update(&task).is_err());
        task.status = None;
        assert!(task_update(&task).is_err());
        task.id.clear();
        assert!(task_update(&task).is_err());
    }

    #[test]
    fn an_event_is_keyed_by_its_message_id_else_its_time_else_its_text() {
        let with_id =
            status_update("t", &status(pb::TaskState::Working, Some(("m1", "a")))).unwrap();
        let no_id = status_update("t", &status(pb::TaskState::Working, Some(("", "a")))).unwrap();
        let other = status_update("t", &status(pb::TaskState::Working, Some(("", "b")))).unwrap();
        assert_eq!(with_id.event_key, "message:m1");
        assert_ne!(no_id.event_key, other.event_key);
    }

    #[test]
    fn a_failed_call_keeps_its_status_and_retryability_for_the_outbox() {
        let status = CallError::Status {
            code: 503,
            retry_after: Some(Duration::from_secs(7)),
        };
        assert_eq!(
            send_result(&status),
            SendResult::Status {
                code: 503,
                retry_after: Some(Duration::from_secs(7))
            }
        );
        let refused = CallError::Undecodable("garbage".into());
        assert!(matches!(
            send_result(&refused),
            SendResult::Failed(SendFailure::Refused(_))
        ));
    }
}
