//! What the store is given: the inputs of its operations, as the service built and validated them
//! (a message to post with what it sets in motion, a settlement, an attempt's outcome, a filter,
//! a link to store …), and the rows that its in-transaction building blocks hand one another (an
//! audit entry, a logged task event, a delivery). Plain data: it must not depend on any file of
//! the store but the records (the kinds and states some inputs name).

use super::records::links::LinkKind;
use super::records::outbox::DeliveryState;
use crate::domain::{
    AgentIdentity, ApprovalEvent, ApprovalId, ApprovalKind, Attachment, ChannelName, Decision,
    DecisionPath, FollowMode, Impact, Kind, MessageId, Outcome, PersonId, RemoteState, ReplyResult,
    TaskState, ThreadId, Timestamp, WrittenBy,
};

/// A message the service has validated and is ready to store.
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub id: MessageId,
    pub thread: ThreadId,
    /// True when this message opens `thread`.
    pub opens_thread: bool,
    pub channel: ChannelName,
    pub kind: Kind,
    pub author: PersonId,
    pub agent: Option<AgentIdentity>,
    pub recipients: Vec<PersonId>,
    pub subject: Option<String>,
    pub body: String,
    pub attachments: Vec<Attachment>,
    pub impact: Option<Impact>,
    pub outcome: Option<Outcome>,
    pub refers_to: Option<MessageId>,
    pub idempotency_key: Option<String>,
    /// Hash of what the client asked for; a retry with the same key must match it.
    pub request_hash: String,
    pub created_at: Timestamp,
    /// When this message opens a thread for an external party: the task's settings.
    pub task: Option<NewTask>,
    /// When this request needs a human's approval: the approval, stored with it.
    pub approval: Option<NewApproval>,
    /// When this message goes to a remote agent: what it sets in motion (SPEC §8b).
    pub remote: Option<RemoteHop>,
    /// An agent for its person, or the person herself.
    pub written_by: WrittenBy,
    /// A reply's structured result.
    pub result: Option<ReplyResult>,
    /// For a remote agent's message (the follower's post): the remote task's state it reports,
    /// recorded in the post's own transaction, so the thread never shows the message with the
    /// state before it (or the state without its message).
    pub observed: Option<RemoteObservation>,
    /// The claim's fencing token the author's session posts under (in an existing thread, with
    /// `agent`): checked in the post's transaction, which refuses a stale one and writes nothing.
    pub fencing_token: Option<i64>,
    /// Which of the recipients' readers the message is for (SPEC §4b).
    pub addressing: Addressing,
    /// When this message opens a command of a personal session (SPEC §4b): its session and
    /// pickup deadline, recorded in the post's transaction.
    pub command: Option<crate::store::model::records::personal::NewCommand>,
}

/// Which readers of the recipients' inboxes a message is for (SPEC §4b): by default every reader
/// of every recipient; these narrow it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Addressing {
    /// The connection (token id) that wrote the message, when one did.
    pub connection: Option<String>,
    /// Entries for one reader only, as (person, reader key): the connections addressed as
    /// `person/connection`. Their persons get no entry for all their readers.
    pub narrow: Vec<(PersonId, String)>,
    /// The reader (key) the author's own entry is not for: the author herself, when a post of
    /// hers reaches her other connections.
    pub skip: Option<String>,
}

impl Addressing {
    /// Whether `person` gets only narrowed entries (no entry for all her readers).
    pub fn narrowed(&self, person: &PersonId) -> bool {
        self.narrow.iter().any(|(p, _)| p == person)
    }
}

impl NewMessage {
    /// Whether the message carries what only a post's own UPDATE writes (who wrote it when a
    /// human did, a reply's result, its addressing of connections): the batched statements leave those columns NULL.
    pub(in crate::store) fn has_extras(&self) -> bool {
        self.written_by != WrittenBy::Agent
            || self.result.is_some()
            || self.addressing != Addressing::default()
            || self.command.is_some()
    }
}

/// The A2A settings of a task opened by a message.
#[derive(Debug, Clone)]
pub struct NewTask {
    pub context_id: String,
    pub skill: String,
    pub reference_task_ids: Vec<ThreadId>,
}

/// An approval the service decided a request needs; stored with the request.
#[derive(Debug, Clone)]
pub struct NewApproval {
    pub id: ApprovalId,
    pub kind: ApprovalKind,
    pub impact: Impact,
    pub fingerprint: String,
    pub approvers: Vec<PersonId>,
    pub expires_at: Timestamp,
}

/// What a message to a remote agent sets in motion, stored with it.
#[derive(Debug, Clone)]
pub struct RemoteHop {
    pub remote: PersonId,
    /// The remote's interface URL (shown with the delivery).
    pub url: String,
    /// `REMOTE_SEND` or `REMOTE_CANCEL`.
    pub event_type: &'static str,
    /// An outbound approval holds the send until a human allows it.
    pub held: bool,
    /// The thread's row, when this is the thread's first message to the remote.
    pub start: Option<NewRemoteTask>,
}

/// A thread's remote task row, as its first message creates it.
#[derive(Debug, Clone)]
pub struct NewRemoteTask {
    pub context_id: String,
    pub skill: Option<String>,
    pub follow: FollowMode,
    pub sealed_push_token: Option<String>,
}

/// A decision or an expiry to apply to a pending approval, with its effects.
#[derive(Debug, Clone)]
pub struct Settlement {
    pub approval: ApprovalId,
    /// `Decided(…)` or `Expired`.
    pub event: ApprovalEvent,
    /// The deciding person; none for an expiry.
    pub actor: Option<PersonId>,
    pub via: Option<DecisionPath>,
    pub reason: Option<String>,
    pub now: Timestamp,
    /// What an allow carries out in the same transaction (the service's plan; none for a
    /// rejection or an expiry).
    pub on_allow: Option<OnAllow>,
    /// On reject or expiry: the server's `close` of the thread, posted in the same transaction.
    pub close: Option<NewMessage>,
}

/// What an allowed approval carries out, as the service decided it: the store applies it when the
/// approval's state machine moves to approved under the row lock, and chooses nothing.
#[derive(Debug, Clone)]
pub enum OnAllow {
    /// An outbound approval: the held send is enqueued, which consumes the approval (the send
    /// is its one use).
    Send(RemoteHop),
    /// Any other: these persons' inboxes get an `approval_decided` notice (the request's
    /// recipients), and the task logs the event.
    Notify(Vec<PersonId>),
}

/// What the audit log records of one step.
pub(in crate::store) struct AuditEntry<'a> {
    pub event: &'a str,
    pub approval: &'a ApprovalId,
    pub thread: &'a ThreadId,
    pub fingerprint: &'a str,
    pub actor: Option<&'a PersonId>,
    pub via: Option<DecisionPath>,
    pub decision: Option<Decision>,
    pub session: Option<&'a AgentIdentity>,
    pub detail: Option<&'a str>,
    pub at: Timestamp,
}

/// A task event to log, with what its hooks need to know about the task (handed over by the
/// transaction, which has them, rather than read back).
pub(in crate::store) struct LoggedEvent<'a> {
    pub thread: &'a ThreadId,
    pub seq: i64,
    pub state: TaskState,
    pub cause: &'a str,
    pub message: Option<&'a MessageId>,
    pub now: Timestamp,
    pub channel: &'a str,
    /// The party that opened the task.
    pub party: &'a PersonId,
    /// The task was created in this transaction.
    pub new_task: bool,
    /// A progress event's status text.
    pub note: Option<&'a str>,
}

/// A progress note to add, with the bounds the service sets.
#[derive(Debug, Clone)]
pub struct NewProgress {
    pub thread: ThreadId,
    pub person: PersonId,
    pub session: AgentIdentity,
    pub tool: String,
    pub target: Option<String>,
    /// `ok` or `failed`.
    pub outcome: &'static str,
    pub now: Timestamp,
    /// A note like the previous one within this many milliseconds is folded into it.
    pub coalesce_ms: i64,
    /// Most new notes per thread in any minute.
    pub per_minute: i64,
    /// Most notes one thread keeps.
    pub per_thread: i64,
}

/// Which of a party's tasks to list.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TaskFilter {
    pub context_id: Option<String>,
    pub state: Option<TaskState>,
    /// Only tasks updated at or after this time.
    pub updated_since: Option<Timestamp>,
    pub limit: i64,
    pub offset: i64,
}

/// A new delivery row.
pub(in crate::store) struct NewDelivery<'a> {
    pub(in crate::store) endpoint: &'a str,
    pub(in crate::store) order_key: &'a str,
    pub(in crate::store) url: &'a str,
    pub(in crate::store) event_type: &'a str,
    pub(in crate::store) event_id: &'a str,
    pub(in crate::store) thread: Option<&'a ThreadId>,
    pub(in crate::store) event_seq: Option<i64>,
    pub(in crate::store) payload: Option<&'a str>,
    pub(in crate::store) now: Timestamp,
}

/// Who an event concerns, for the webhooks' person and channel filters.
#[derive(Debug, Default)]
pub(in crate::store) struct Audience<'a> {
    pub channel: Option<&'a str>,
    pub persons: Vec<&'a PersonId>,
    pub thread: Option<&'a ThreadId>,
}

/// An attempt to record and its verdict to apply.
#[derive(Debug, Clone)]
pub struct FinishedAttempt {
    pub delivery: i64,
    pub attempt: i64,
    pub worker: String,
    pub started_at: Timestamp,
    pub latency_ms: i64,
    pub status: Option<i64>,
    pub error_class: String,
    pub error: Option<String>,
    pub verdict: crate::domain::delivery::AttemptVerdict,
    pub now: Timestamp,
    /// Consecutive dead deliveries after which the endpoint is disabled.
    pub disable_after: i64,
    /// When the delivery dies: a `close` of its thread to post in the same transaction (a send to
    /// a remote agent that failed for good ends the thread `failed`, never silently).
    pub on_dead: Option<NewMessage>,
}

/// Which deliveries to list.
#[derive(Debug, Clone, Default)]
pub struct DeliveryFilter {
    pub state: Option<DeliveryState>,
    /// Only pending deliveries with at least one failed attempt.
    pub failed: bool,
    pub endpoint: Option<String>,
    /// Only ids below this one (paging, newest first).
    pub before: Option<i64>,
    pub limit: i64,
}

/// What one look at a remote task found, to record.
#[derive(Debug, Clone)]
pub struct RemoteObservation {
    pub thread: ThreadId,
    pub task_id: String,
    pub state: RemoteState,
    /// When the follower looks next without being woken, and with what backoff.
    pub next_check_at: Timestamp,
    pub backoff_ms: i64,
    pub now: Timestamp,
}

/// What a refresh replaces.
#[derive(Debug, Clone)]
pub struct RemoteUpdate {
    pub card: String,
    pub jwks: String,
    pub unsigned: bool,
    pub binding: String,
    pub binding_forced: bool,
    pub url: String,
    pub tenant: Option<String>,
    pub streaming: bool,
    pub push: bool,
    /// New credentials (sealed, summary), or none to keep them.
    pub credentials: Option<(Option<String>, String)>,
    pub refreshed_at: Timestamp,
}

/// A link to store.
#[derive(Debug, Clone)]
pub struct NewLink {
    pub kind: LinkKind,
    pub id: String,
    pub secret_hash: String,
    pub person: PersonId,
    /// The approval an approval link decides; none for the other kinds.
    pub approval: Option<ApprovalId>,
    /// The tool confirmation a confirmation link decides; none for the other kinds.
    pub confirmation: Option<crate::domain::tool_check::ConfirmationId>,
    /// A login link that opens an admin console session.
    pub admin: bool,
    pub created_by: PersonId,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    /// The audit entry of an admin issuing it (none for the links webhooks carry).
    pub audit: Option<AdminChange>,
}

/// One admin change as the audit log records it, appended in the transaction of the change
/// (only when it changed something): who made it, how it arrived, what it changed, and that
/// thing before and after. The service builds it; `before` and `after` never hold a secret.
#[derive(Debug, Clone)]
pub struct AdminChange {
    pub at: Timestamp,
    /// None when the server made it (the bootstrap admin).
    pub actor: Option<PersonId>,
    /// cli, api or console; none for the server.
    pub via: Option<DecisionPath>,
    /// `person.added`, `token.revoked`, `channel.policy_changed`, … (SPEC §12's list).
    pub event: &'static str,
    /// The id of what changed: a person, token, channel, webhook, delivery, key id.
    pub subject: String,
    pub before: Option<serde_json::Value>,
    pub after: Option<serde_json::Value>,
}

/// Which audit entries to read, oldest first.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// Entries after this sequence number (paging).
    pub after: i64,
    pub since: Option<Timestamp>,
    /// Entries whose event starts with this (`token.`, `channel.policy_changed`, `decided`).
    pub event: Option<String>,
    pub actor: Option<PersonId>,
    /// Entries about this subject (an admin change's) or this approval or thread.
    pub subject: Option<String>,
    pub limit: i64,
    /// Entries before this sequence number (paging back from the newest).
    pub before: Option<i64>,
    /// Newest first instead of oldest first.
    pub newest_first: bool,
}
