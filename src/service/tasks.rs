//! A2A tasks, transport-neutral: an external party's message opens a thread routed by skill (or
//! answers the task's question), and the party reads, lists, cancels and follows its own tasks.
//! A party sees only the threads it opened; any other id is "not found".

use serde::Serialize;

use super::task_keys::{A2A_KEY_PREFIX, MAX_MESSAGE_ID_USES, ReuseKeys, within_bound};
use super::{Caller, ErrorCode, PostRequest, Result, Service, ServiceError, input};
use crate::bus::{Subscription, Topic};
use crate::domain::{Attachment, Impact, Kind, Outcome, TaskState, ThreadId};
use crate::store::{MessageRecord, NewTask, TaskEventRecord, TaskFilter, ThreadRecord};

/// A message from an external party (an A2A `ROLE_USER` message), already converted from the wire.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TaskMessage {
    /// The client's message id: a retry with the same id returns the first result.
    pub message_id: String,
    /// Continue this task (answer its question); none opens a new task.
    pub task_id: Option<ThreadId>,
    pub context_id: Option<String>,
    pub skill: Option<String>,
    pub body: String,
    pub attachments: Vec<Attachment>,
    pub reference_task_ids: Vec<ThreadId>,
    /// What another liaison says of the message (the envelope extension): honoured only within
    /// the party's skills, and only to strengthen the route's own envelope.
    pub envelope: Option<crate::domain::Envelope>,
}

/// A task as a party sees it: its thread (with the task state) and messages.
#[derive(Debug, Clone, Serialize)]
pub struct TaskView {
    pub thread: ThreadRecord,
    /// The last messages of the thread, oldest first (`history_length` of them when asked).
    pub history: Vec<MessageRecord>,
    /// Replies by the team: their bodies and attachments are the task's artifacts.
    pub artifacts: Vec<MessageRecord>,
    /// Where the human approval of the task's newest request stands, when it needs one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<TaskApproval>,
}

/// The approval of a task's request, as the party is told of it.
#[derive(Debug, Clone, Serialize)]
pub struct TaskApproval {
    pub id: crate::domain::ApprovalId,
    pub state: crate::domain::ApprovalState,
    /// Display names of who may decide.
    pub approvers: Vec<String>,
    /// Display name of who decided, once someone did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
}

impl TaskApproval {
    /// The status text of a submitted task while its approval is pending or once it is allowed:
    /// "Awaiting approval by …" (SPEC §8 mapping) or "Approved by …".
    pub fn status_text(&self) -> Option<String> {
        use crate::domain::ApprovalState as S;
        match self.state {
            S::Pending => Some(format!(
                "Awaiting approval by {}",
                self.approvers.join(" or ")
            )),
            S::Approved | S::Consumed => self
                .decided_by
                .as_ref()
                .map(|by| format!("Approved by {by}; waiting for an agent of the team to start")),
            S::Rejected | S::Expired | S::Withdrawn => None,
        }
    }
}

impl TaskView {
    pub fn state(&self) -> TaskState {
        state_of(&self.thread)
    }
}

/// A task thread's state (`SUBMITTED` until its first event says otherwise).
fn state_of(thread: &ThreadRecord) -> TaskState {
    thread
        .task
        .as_ref()
        .map_or(TaskState::Submitted, |t| t.state)
}

/// One page of a party's tasks.
#[derive(Debug, Clone, Serialize)]
pub struct TaskListing {
    pub tasks: Vec<TaskView>,
    pub total: i64,
    /// Pass back to get the next page; none on the last page.
    pub next_page_token: Option<String>,
    pub page_size: i64,
}

const MAX_CONTEXT_ID: usize = 200;
/// How often a send looks again when a concurrent send took the key of the next use.
const REUSE_ATTEMPTS: usize = 4;

/// What sending under one idempotency key came to.
enum Sent {
    /// A new task or message, or a retry's task as it stands.
    Task(Box<TaskView>),
    /// The key stands for another message, or for this one already answered: try the next.
    Reused(&'static str),
}

/// A new task posted, or a repeat of the message that opened one (the key is taken).
enum Opened {
    New(Box<TaskView>),
    Replayed,
}

/// Most messages a thread holds that a task view loads.
const MAX_TASK_MESSAGES: i64 = 1000;

impl Service {
    /// Handles a party's message: a new task routed by skill, or the next message of a task.
    pub async fn send_task_message(&self, caller: &Caller, msg: TaskMessage) -> Result<TaskView> {
        self.traced(
            "service.send_task_message",
            None,
            self.send_task_untraced(caller, msg),
        )
        .await
    }

    async fn send_task_untraced(&self, caller: &Caller, msg: TaskMessage) -> Result<TaskView> {
        caller.require_party()?;
        input::storable("message", &msg)?;
        if msg.message_id.is_empty() || msg.message_id.len() > 200 {
            return Err(ServiceError::invalid("messageId must be 1-200 characters"));
        }
        if let Some(c) = &msg.context_id
            && (c.is_empty() || c.len() > MAX_CONTEXT_ID || c.chars().any(char::is_control))
        {
            return Err(ServiceError::invalid(format!(
                "contextId must be 1-{MAX_CONTEXT_ID} printable characters"
            )));
        }
        let first = format!("{A2A_KEY_PREFIX}{}", msg.message_id);
        let why = match self.send_under(caller, &msg, first).await? {
            Sent::Task(view) => return Ok(*view),
            Sent::Reused(why) => why,
        };
        // A later use: the newest use of this content, found with one read whatever their number,
        // is either what this message retries or the use before a new one.
        let keys = ReuseKeys::of(&msg.message_id, &msg);
        for _ in 0..REUSE_ATTEMPTS {
            let newest = self
                .inner
                .store
                .last_message_by_key_in(caller.id(), &keys.key(1), &keys.key(MAX_MESSAGE_ID_USES))
                .await?
                .and_then(|m| Some((keys.use_of(m.idempotency_key.as_deref()?)?, m)));
            let next = match newest {
                None => 1,
                Some((n, earlier)) => match self.repeated(caller, &msg, earlier).await? {
                    Sent::Task(view) => return Ok(*view),
                    Sent::Reused(_) => n + 1,
                },
            };
            let next = within_bound(&msg.message_id, next)?;
            tracing::info!(
                party = %caller.id(), message_id = %msg.message_id, r#use = next, why,
                "A messageId was used again for a new message."
            );
            match self.send_under(caller, &msg, keys.key(next)).await? {
                Sent::Task(view) => return Ok(*view),
                // A concurrent send took that key: look again.
                Sent::Reused(_) => {}
            }
        }
        Err(ServiceError::new(
            ErrorCode::IdempotencyConflict,
            format!(
                "messageId {:?} is being used by concurrent sends; give each message a new messageId",
                msg.message_id
            ),
        ))
    }

    /// The message under idempotency key `key`: a new task or follow-up, a retry's task, or
    /// `Reused` when the key stands for another message.
    async fn send_under(&self, caller: &Caller, msg: &TaskMessage, key: String) -> Result<Sent> {
        match msg.task_id.clone() {
            None => self.open_or_replay(caller, msg, key).await,
            Some(id) => self.follow_up(caller, &id, msg, key).await,
        }
    }

    /// A new task under idempotency key `key`, or the task a true repeat of the message (the same
    /// request under the same key) opened.
    async fn open_or_replay(
        &self,
        caller: &Caller,
        msg: &TaskMessage,
        key: String,
    ) -> Result<Sent> {
        // A new task is posted at once: the post itself recognises a repeat (the same key with
        // the same request answers the earlier message), so an intake reads nothing first.
        let refused = match self.open_task(caller, msg.clone(), key.clone()).await {
            Ok(Opened::New(view)) => return Ok(Sent::Task(view)),
            Ok(Opened::Replayed) => None,
            Err(e) if e.code == ErrorCode::IdempotencyConflict => {
                return Ok(Sent::Reused("another message used it"));
            }
            Err(e) => Some(e),
        };
        // A repeat, or refused on the way (a route changed since): against the earlier use of
        // the key, so a retry still gets the task as it stands.
        match self.inner.store.message_by_key(caller.id(), &key).await? {
            Some(earlier) => self.repeated(caller, msg, earlier).await,
            None => Err(refused.unwrap_or_else(|| {
                ServiceError::new(ErrorCode::Internal, "a replayed message was not found")
            })),
        }
    }

    /// The next message of task `id` under idempotency key `key`, or what a repeat gets.
    async fn follow_up(
        &self,
        caller: &Caller,
        id: &ThreadId,
        msg: &TaskMessage,
        key: String,
    ) -> Result<Sent> {
        // A follow-up checks its key first: a retry gets the task even once it has ended.
        if let Some(earlier) = self.inner.store.message_by_key(caller.id(), &key).await? {
            return self.repeated(caller, msg, earlier).await;
        }
        let task = self.own_task(caller, id).await?;
        let info = task.task.as_ref().expect("own_task returns tasks");
        if info.state.is_terminal() {
            return Err(ServiceError::new(
                ErrorCode::TaskTerminal,
                format!(
                    "task {id} is {}; send a new task in the same context with referenceTaskIds",
                    info.state
                ),
            ));
        }
        if msg
            .context_id
            .as_ref()
            .is_some_and(|c| c != &info.context_id)
        {
            return Err(ServiceError::invalid(format!(
                "task {id} belongs to context {}",
                info.context_id
            )));
        }
        let kind = if info.state.is_interrupted() {
            Kind::Reply
        } else {
            Kind::Announce
        };
        let req = PostRequest {
            kind: Some(kind),
            thread: Some(id.clone()),
            body: msg.body.clone(),
            attachments: msg.attachments.clone(),
            idempotency_key: Some(key),
            ..Default::default()
        };
        match self.post_as(caller, req, None).await {
            Ok(posted) => Ok(Sent::Task(Box::new(
                self.task(caller, &posted.thread, None).await?,
            ))),
            // The same key taken meanwhile by another message (a concurrent send).
            Err(e) if e.code == ErrorCode::IdempotencyConflict => {
                Ok(Sent::Reused("another message used it"))
            }
            Err(e) => Err(e),
        }
    }

    /// Opens a new task from a party's message: routed by its skill, in the route's channel.
    async fn open_task(&self, caller: &Caller, msg: TaskMessage, key: String) -> Result<Opened> {
        let route = match (&msg.skill, &msg.envelope) {
            (None, Some(envelope)) => match self.route_of_envelope(caller, envelope).await? {
                Some(route) => route,
                None => self.route_for(caller.id(), None).await?,
            },
            _ => self.route_for(caller.id(), msg.skill.as_deref()).await?,
        };
        // Another liaison's envelope may only make the route's own stronger (SPEC §4): a request
        // with an effect stays one here and meets this side's approval.
        let (kind, impact) = match &msg.envelope {
            Some(envelope) => envelope.strengthen(route.kind, route.impact),
            None => (route.kind, route.impact),
        };
        if (kind, impact) != (route.kind, route.impact) {
            tracing::info!(
                party = %caller.id(),
                skill = %route.id,
                kind = %kind,
                impact = ?impact,
                "The sender's envelope asks for more than the skill's route: the task opens as a request with that effect."
            );
        }
        if !self.may_use(caller, &route).await? {
            return Err(ServiceError::forbidden(format!(
                "skill {:?} is not open to you (you are not in its channel); \
                 your extended agent card lists the skills you may use",
                route.id
            )));
        }
        for r in &msg.reference_task_ids {
            self.own_task(caller, r).await?;
        }
        let req = PostRequest {
            kind: Some(kind),
            channel: Some(route.channel.clone()),
            impact: if kind == Kind::Request {
                Some(impact.unwrap_or(Impact::None))
            } else {
                None
            },
            body: msg.body,
            attachments: msg.attachments,
            idempotency_key: Some(key),
            ..Default::default()
        };
        let task = NewTask {
            context_id: msg
                .context_id
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            skill: route.id.clone(),
            reference_task_ids: msg.reference_task_ids,
        };
        let (receipt, posted) = self.post_recorded(caller, req, Some(task)).await?;
        if receipt.replayed {
            return Ok(Opened::Replayed);
        }
        if receipt.approval.is_some() {
            return Ok(Opened::New(Box::new(
                self.task(caller, &receipt.thread, None).await?,
            )));
        }
        // The task as the commit left it: its first message, no artifact and no approval.
        // Reading it back would cost three reads on every intake; an agent that has answered
        // since shows in the task's events, which blocking and streaming sends read from this
        // view's last event on.
        Ok(Opened::New(Box::new(TaskView {
            thread: posted.thread,
            history: vec![posted.message],
            artifacts: Vec::new(),
            approval: None,
        })))
    }

    /// A message under an idempotency key the party used before for `earlier`. The same message
    /// (same task, or again a new task; same content) is a retry and gets the task as it stands
    /// now, whatever happened since, unless that task has ended **and** the party posted in it
    /// after this message (a follow-up, a cancel): then the party had the answer and the task is
    /// over, so nothing is left to retry, and this is a new message. A different message under
    /// the id is a new one too. Scoped to the party: another party's ids are never looked at.
    async fn repeated(
        &self,
        caller: &Caller,
        msg: &TaskMessage,
        earlier: MessageRecord,
    ) -> Result<Sent> {
        let same_target = match &msg.task_id {
            Some(id) => id == &earlier.thread && earlier.position > 1,
            None => earlier.position == 1,
        };
        if !same_target || msg.body != earlier.body || msg.attachments != earlier.attachments {
            return Ok(Sent::Reused("another message used it"));
        }
        let view = self.task(caller, &earlier.thread, None).await?;
        let answered = view
            .history
            .iter()
            .any(|m| &m.author == caller.id() && m.position > earlier.position);
        if answered && view.state().is_terminal() {
            return Ok(Sent::Reused("its task ended after the party posted in it"));
        }
        Ok(Sent::Task(Box::new(view)))
    }

    /// Whether a task of this skill may be answered with a bare message (a conversational skill).
    pub fn answers_directly(&self, view: &TaskView) -> bool {
        let Some(task) = &view.thread.task else {
            return false;
        };
        self.inner
            .settings
            .skills
            .iter()
            .any(|s| s.id == task.skill && s.direct_answers)
    }

    /// The team's answer to a party's message as a direct answer (SPEC §8 "Direct answers"): on a
    /// conversational skill, the task went from the party's message straight to COMPLETED by one
    /// `reply` and nothing else. A claim, a note, a question or an approval between logs events
    /// the party could follow, so such a task stays a task. `view` must hold the whole history.
    pub fn direct_answer<'a>(&self, view: &'a TaskView) -> Option<&'a MessageRecord> {
        let task = view.thread.task.as_ref()?;
        // Event 1 is the task's submission; event 2 its completion by the reply.
        if !self.answers_directly(view)
            || task.state != TaskState::Completed
            || task.last_event != 2
        {
            return None;
        }
        match view.history.as_slice() {
            [opener, reply] if opener.position == 1 && reply.kind == Kind::Reply => Some(reply),
            _ => None,
        }
    }

    /// One of the caller's tasks, with at most `history_length` messages of history (all when none).
    pub async fn task(
        &self,
        caller: &Caller,
        id: &ThreadId,
        history_length: Option<usize>,
    ) -> Result<TaskView> {
        caller.require_party()?;
        let thread = self.own_task(caller, id).await?;
        self.task_view(thread, history_length).await
    }

    /// One of the caller's tasks, whole, if its state satisfies `wanted`; `None` (after reading
    /// only its thread) if not: what a waiting blocking send checks at each wake-up.
    pub async fn task_when(
        &self,
        caller: &Caller,
        id: &ThreadId,
        wanted: fn(TaskState) -> bool,
    ) -> Result<Option<TaskView>> {
        caller.require_party()?;
        let thread = self.own_task(caller, id).await?;
        if !wanted(state_of(&thread)) {
            return Ok(None);
        }
        Ok(Some(self.task_view(thread, None).await?))
    }

    /// [`Service::task_when`], subscribed first to the task's changes: the view when the task is
    /// in a `wanted` state now, and what wakes its waiter on every later change (one read; a
    /// change between the subscription and the read is in the read).
    pub async fn task_when_subscribed(
        &self,
        caller: &Caller,
        id: &ThreadId,
        wanted: fn(TaskState) -> bool,
    ) -> Result<(Option<TaskView>, Subscription)> {
        let sub = self.inner.bus.subscribe(&Topic::task(id.as_str()));
        let view = self.task_when(caller, id, wanted).await?;
        Ok((view, sub))
    }

    /// The caller's tasks, newest update first.
    pub async fn list_tasks(
        &self,
        caller: &Caller,
        mut filter: TaskFilter,
        page_token: Option<&str>,
        history_length: Option<usize>,
    ) -> Result<TaskListing> {
        caller.require_party()?;
        input::storable("filter", &filter)?;
        if let Some(token) = page_token {
            input::storable_str("pageToken", token)?;
        }
        if !(1..=100).contains(&filter.limit) {
            return Err(ServiceError::invalid(format!(
                "pageSize {} is out of range: use 1-100",
                filter.limit
            )));
        }
        filter.offset = match page_token {
            None | Some("") => 0,
            Some(t) => t
                .parse::<i64>()
                .ok()
                .filter(|o| *o >= 0)
                .ok_or_else(|| ServiceError::invalid("invalid pageToken"))?,
        };
        let (threads, total) = self.inner.store.tasks(caller.id(), &filter).await?;
        let mut tasks = Vec::with_capacity(threads.len());
        for t in threads {
            tasks.push(self.task_view(t, history_length).await?);
        }
        let end = filter.offset + tasks.len() as i64;
        let next_page_token = (end < total).then(|| end.to_string());
        Ok(TaskListing {
            tasks,
            total,
            next_page_token,
            page_size: filter.limit,
        })
    }

    /// Cancels one of the caller's tasks: a `close` with outcome `canceled`. Canceling a canceled
    /// task returns it again; any other ended task is not cancelable.
    pub async fn cancel_task(&self, caller: &Caller, id: &ThreadId) -> Result<TaskView> {
        caller.require_party()?;
        let thread = self.own_task(caller, id).await?;
        let state = state_of(&thread);
        if state == TaskState::Canceled {
            return self.task_view(thread, None).await;
        }
        if state.is_terminal() {
            return Err(ServiceError::new(
                ErrorCode::TaskNotCancelable,
                format!("task {id} is {state} and cannot be canceled"),
            ));
        }
        let req = PostRequest {
            kind: Some(Kind::Close),
            thread: Some(id.clone()),
            outcome: Some(Outcome::Canceled),
            body: "Canceled by the requester.".into(),
            ..Default::default()
        };
        match self.post_as(caller, req, None).await {
            Ok(_) => {}
            // Ended between the read and the close: report it as it is now.
            Err(e) if e.code == ErrorCode::TaskTerminal || e.code == ErrorCode::ThreadClosed => {
                let now = self.own_task(caller, id).await?;
                if now
                    .task
                    .as_ref()
                    .is_some_and(|t| t.state == TaskState::Canceled)
                {
                    return self.task_view(now, None).await;
                }
                return Err(ServiceError::new(
                    ErrorCode::TaskNotCancelable,
                    format!("task {id} has ended and cannot be canceled"),
                ));
            }
            Err(e) => return Err(e),
        }
        self.task(caller, id, None).await
    }

    /// The task's events after `after`, and (when `subscribe`) a subscription made before reading,
    /// so that no event is missed between the read and the wait.
    pub async fn task_events(
        &self,
        caller: &Caller,
        id: &ThreadId,
        after: i64,
        subscribe: bool,
    ) -> Result<(Vec<TaskEventRecord>, Option<Subscription>)> {
        caller.require_party()?;
        self.own_task(caller, id).await?;
        let sub = subscribe.then(|| self.inner.bus.subscribe(&Topic::task(id.as_str())));
        Ok((self.inner.store.task_events(id, after).await?, sub))
    }

    /// A message of one of the caller's tasks (for rendering events).
    pub async fn task_message(
        &self,
        caller: &Caller,
        id: &crate::domain::MessageId,
    ) -> Result<MessageRecord> {
        caller.require_party()?;
        let m = self
            .inner
            .store
            .message(id)
            .await?
            .ok_or_else(|| ServiceError::not_found("message", id))?;
        self.own_task(caller, &m.thread)
            .await
            .map_err(|_| ServiceError::not_found("message", id))?;
        Ok(m)
    }

    /// A thread the caller opened as a task; anything else is "not found".
    pub(super) async fn own_task(&self, caller: &Caller, id: &ThreadId) -> Result<ThreadRecord> {
        match self.inner.store.thread(id).await? {
            Some(t) if &t.opened_by == caller.id() && t.task.is_some() => Ok(t),
            _ => Err(ServiceError::new(
                ErrorCode::NotFound,
                format!("no task {id} (unknown, or not yours)"),
            )),
        }
    }

    pub(super) async fn task_view(
        &self,
        thread: ThreadRecord,
        history_length: Option<usize>,
    ) -> Result<TaskView> {
        let messages = self
            .inner
            .store
            .thread_messages(&thread.id, 0, MAX_TASK_MESSAGES)
            .await?;
        let artifacts: Vec<MessageRecord> = messages
            .iter()
            .filter(|m| m.kind == Kind::Reply && m.author != thread.opened_by)
            .cloned()
            .collect();
        let skip = history_length.map_or(0, |n| messages.len().saturating_sub(n));
        let history = messages.into_iter().skip(skip).collect();
        let approval = match self.thread_approvals(&thread.id).await?.pop() {
            None => None,
            Some(a) => Some(TaskApproval {
                approvers: self.names(&a.approvers).await?,
                decided_by: match &a.decided_by {
                    Some(by) => self.names(std::slice::from_ref(by)).await?.pop(),
                    None => None,
                },
                id: a.id,
                state: a.state,
            }),
        };
        Ok(TaskView {
            thread,
            history,
            artifacts,
            approval,
        })
    }
}
