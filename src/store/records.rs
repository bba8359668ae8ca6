//! Rows as the rest of the program sees them, already parsed into domain types.

use serde::Serialize;

use crate::domain::{
    AgentIdentity, ApprovalPolicy, Attachment, ChannelName, Impact, Kind, LeaseMode, MessageId,
    Outcome, PersonId, PersonKind, Rights, Scopes, TaskState, ThreadId, ThreadState, Timestamp,
    Transition,
};

#[derive(Debug, Clone, Serialize)]
pub struct PersonRecord {
    pub id: PersonId,
    pub kind: PersonKind,
    pub display_name: String,
    pub created_at: Timestamp,
}

#[derive(Debug, Clone, Serialize)]
pub struct TokenRecord {
    /// Public handle of the token (for listing and revoking); not the secret.
    pub id: String,
    pub person: PersonId,
    pub scopes: Scopes,
    pub description: String,
    pub created_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<Timestamp>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ChannelRecord {
    pub name: ChannelName,
    pub description: String,
    pub policy: ApprovalPolicy,
    pub created_at: Timestamp,
    pub members: Vec<MemberRecord>,
    /// When an admin removed it: its history stays readable, nothing new is posted in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed_at: Option<Timestamp>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MemberRecord {
    pub person: PersonId,
    pub rights: Rights,
}

impl ChannelRecord {
    pub fn member(&self, person: &PersonId) -> Option<&MemberRecord> {
        self.members.iter().find(|m| &m.person == person)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ThreadRecord {
    pub id: ThreadId,
    pub channel: ChannelName,
    pub subject: String,
    pub opener_kind: Kind,
    pub opened_by: PersonId,
    #[serde(flatten)]
    pub state: ThreadState,
    pub message_count: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Present when an external party opened the thread: it is an A2A task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskInfo>,
}

/// The A2A side of a thread opened by an external party.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskInfo {
    pub state: TaskState,
    /// The conversation, scoped to the party that opened the task.
    pub context_id: String,
    /// The skill the task was sent to.
    pub skill: String,
    /// Earlier tasks this one follows up on.
    pub reference_task_ids: Vec<ThreadId>,
    /// Sequence number of the last event in the task's log.
    pub last_event: i64,
}

/// One entry of a task's event log.
#[derive(Debug, Clone, Serialize)]
pub struct TaskEventRecord {
    pub seq: i64,
    pub state: TaskState,
    /// `message` or `claim`.
    pub cause: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<MessageId>,
    pub created_at: Timestamp,
}

/// An external party's A2A settings.
#[derive(Debug, Clone, Serialize)]
pub struct PartyRecord {
    pub person: PersonRecord,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_skill: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwt_subject: Option<String>,
}

/// Where to push a task's events.
#[derive(Debug, Clone, Serialize)]
pub struct PushConfigRecord {
    pub thread: ThreadId,
    pub id: String,
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_scheme: Option<String>,
    /// Never shown once stored (redacted on read).
    #[serde(skip)]
    pub auth_credentials: Option<String>,
    pub created_at: Timestamp,
}

#[derive(Debug, Clone, Serialize)]
pub struct MessageRecord {
    pub id: MessageId,
    pub thread: ThreadId,
    pub channel: ChannelName,
    /// 1 for the opener, then 2, 3, … in posting order.
    pub position: i64,
    pub kind: Kind,
    pub author: PersonId,
    /// Self-declared by the posting client; never trusted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentIdentity>,
    pub recipients: Vec<PersonId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    pub body: String,
    pub attachments: Vec<Attachment>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impact: Option<Impact>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refers_to: Option<MessageId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    pub created_at: Timestamp,
}

/// What an inbox entry points at.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EntryContent {
    /// A message addressed to the person.
    Message {
        message: MessageId,
        thread: ThreadId,
        channel: ChannelName,
    },
    /// A notice from the server itself (e.g. a lease taken over with `force`).
    Notice { notice: serde_json::Value },
}

#[derive(Debug, Clone, Serialize)]
pub struct InboxEntry {
    pub seq: i64,
    #[serde(flatten)]
    pub content: EntryContent,
    pub created_at: Timestamp,
}

/// Where one consumer stands in a person's inbox.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct InboxPosition {
    /// Everything up to here is acknowledged by this consumer.
    pub acked: i64,
    /// The last sequence number handed out in this inbox.
    pub last: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClaimRecord {
    pub thread: ThreadId,
    pub person: PersonId,
    pub session: AgentIdentity,
    pub claimed_at: Timestamp,
    pub expires_at: Timestamp,
}

#[derive(Debug, Clone, Serialize)]
pub struct PresenceRecord {
    pub person: PersonId,
    pub agent: AgentIdentity,
    pub transition: Transition,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    pub updated_at: Timestamp,
    pub expires_at: Timestamp,
}

#[derive(Debug, Clone, Serialize)]
pub struct LeaseRecord {
    pub resource: String,
    pub person: PersonId,
    pub agent: AgentIdentity,
    pub mode: LeaseMode,
    pub acquired_at: Timestamp,
    pub expires_at: Timestamp,
}
