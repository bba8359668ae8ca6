//! Threads and their messages as the store answers them, with the A2A side of a thread opened by
//! an external party (its task, its event log, its push configs) and the answer of a post; with
//! the column lists and parsers that turn their rows into them. It must not depend on any file of
//! the store but `db` (rows) and `error`.

use serde::Serialize;

use crate::domain::{
    AgentIdentity, Attachment, ChannelName, Impact, Kind, MessageId, Outcome, PersonId,
    ReplyResult, TaskState, ThreadId, ThreadState, Timestamp, WrittenBy,
};
use crate::store::db::Row;
use crate::store::error::{Result, StoreError, json_err};

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
    /// `message`, `claim`, `approval` or `progress`.
    pub cause: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<MessageId>,
    pub created_at: Timestamp,
    /// A `progress` event's note.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
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
    /// An agent for its person (the default), or the person herself.
    pub written_by: WrittenBy,
    /// A reply's structured result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<ReplyResult>,
    /// The connection (token id) that wrote it, when one did; the service shows its name.
    #[serde(skip)]
    pub connection: Option<String>,
}

/// The result of a post.
#[derive(Debug, Clone)]
pub struct PostOutcome {
    pub message: MessageRecord,
    pub thread: ThreadRecord,
    /// True when an earlier post with the same idempotency key was returned and nothing was created.
    pub replayed: bool,
    /// True when the commit enqueued outbound deliveries: the service wakes the outbox workers.
    pub outbox_due: bool,
    /// The approvals this post withdrew: a `close` withdraws those still pending in its thread.
    pub withdrawn: Vec<crate::store::ApprovalRecord>,
}

pub(in crate::store) const MESSAGE_COLUMNS: &str = "id, thread_id, channel, position, kind, author, agent, recipients, subject, body, \
     attachments, impact, outcome, refers_to, idempotency_key, created_at, written_by, result, connection";
pub(in crate::store) const THREAD_COLUMNS: &str = "id, channel, subject, opener_kind, opened_by, state, asker, asker_reader, outcome, \
     message_count, created_at, updated_at, task_state, context_id, skill, reference_task_ids, task_event_seq";

fn opt_parse<T: std::str::FromStr<Err = crate::domain::ParseError>>(
    v: Option<String>,
) -> Result<Option<T>> {
    Ok(v.map(|s| s.parse()).transpose()?)
}

pub(in crate::store) fn message(row: &Row) -> Result<MessageRecord> {
    let recipients: Vec<PersonId> =
        serde_json::from_str(&row.try_get::<String, _>("recipients")?).map_err(json_err)?;
    Ok(MessageRecord {
        id: MessageId::parse(row.try_get::<String, _>("id")?)?,
        thread: ThreadId::parse(row.try_get::<String, _>("thread_id")?)?,
        channel: ChannelName::parse(row.try_get::<String, _>("channel")?)?,
        position: row.try_get("position")?,
        kind: row.try_get::<String, _>("kind")?.parse()?,
        author: PersonId::parse(row.try_get::<String, _>("author")?)?,
        agent: row
            .try_get::<Option<String>, _>("agent")?
            .map(AgentIdentity::parse)
            .transpose()?,
        recipients,
        subject: row.try_get("subject")?,
        body: row.try_get("body")?,
        attachments: serde_json::from_str(&row.try_get::<String, _>("attachments")?)
            .map_err(json_err)?,
        impact: opt_parse(row.try_get("impact")?)?,
        outcome: opt_parse(row.try_get("outcome")?)?,
        refers_to: row
            .try_get::<Option<String>, _>("refers_to")?
            .map(MessageId::parse)
            .transpose()?,
        idempotency_key: row.try_get("idempotency_key")?,
        created_at: Timestamp(row.try_get("created_at")?),
        written_by: opt_parse(row.try_get("written_by")?)?.unwrap_or(WrittenBy::Agent),
        result: row
            .try_get::<Option<String>, _>("result")?
            .map(|r| serde_json::from_str(&r))
            .transpose()
            .map_err(json_err)?,
        connection: row.try_get("connection")?,
    })
}

pub(in crate::store) fn thread(row: &Row) -> Result<ThreadRecord> {
    let name: String = row.try_get("state")?;
    let asker = row
        .try_get::<Option<String>, _>("asker")?
        .map(PersonId::parse)
        .transpose()?;
    let outcome = opt_parse(row.try_get("outcome")?)?;
    let state = ThreadState::from_parts(&name, asker, row.try_get("asker_reader")?, outcome)
        .ok_or_else(|| StoreError::Corrupt(format!("thread state {name:?}")))?;
    Ok(ThreadRecord {
        id: ThreadId::parse(row.try_get::<String, _>("id")?)?,
        channel: ChannelName::parse(row.try_get::<String, _>("channel")?)?,
        subject: row.try_get("subject")?,
        opener_kind: row.try_get::<String, _>("opener_kind")?.parse()?,
        opened_by: PersonId::parse(row.try_get::<String, _>("opened_by")?)?,
        state,
        message_count: row.try_get("message_count")?,
        created_at: Timestamp(row.try_get("created_at")?),
        updated_at: Timestamp(row.try_get("updated_at")?),
        task: match row.try_get::<Option<String>, _>("task_state")? {
            None => None,
            Some(state) => Some(TaskInfo {
                state: state.parse()?,
                context_id: row
                    .try_get::<Option<String>, _>("context_id")?
                    .unwrap_or_default(),
                skill: row
                    .try_get::<Option<String>, _>("skill")?
                    .unwrap_or_default(),
                reference_task_ids: serde_json::from_str(
                    &row.try_get::<Option<String>, _>("reference_task_ids")?
                        .unwrap_or_else(|| "[]".into()),
                )
                .map_err(json_err)?,
                last_event: row.try_get("task_event_seq")?,
            }),
        },
    })
}

pub(in crate::store) fn event(row: &Row) -> Result<TaskEventRecord> {
    Ok(TaskEventRecord {
        seq: row.try_get("seq")?,
        state: row.try_get::<String, _>("state")?.parse()?,
        cause: row.try_get("cause")?,
        message: row
            .try_get::<Option<String>, _>("message_id")?
            .map(MessageId::parse)
            .transpose()?,
        created_at: Timestamp(row.try_get("created_at")?),
        note: row.try_get("note")?,
    })
}

pub(in crate::store) fn push_config(row: &Row) -> Result<PushConfigRecord> {
    Ok(PushConfigRecord {
        thread: ThreadId::parse(row.try_get::<String, _>("thread_id")?)?,
        id: row.try_get("id")?,
        url: row.try_get("url")?,
        token: row.try_get("token")?,
        auth_scheme: row.try_get("auth_scheme")?,
        auth_credentials: row.try_get("auth_credentials")?,
        created_at: Timestamp(row.try_get("created_at")?),
    })
}
