//! Approvals as stored, what a settlement did, and the audit log's entries; with the column
//! lists and parsers that turn their rows into them. It must not depend on any file of the store
//! but `db` (rows) and `error`.

use crate::domain::{
    AgentIdentity, ApprovalId, ApprovalKind, ApprovalState, ChannelName, Decision, DecisionPath,
    Impact, MessageId, PersonId, ThreadId, Timestamp,
};
use crate::store::db::Row;
use crate::store::error::{Result, StoreError};

/// An approval as stored.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ApprovalRecord {
    pub id: ApprovalId,
    /// A request with an effect, or a message leaving the team (outbound).
    pub kind: ApprovalKind,
    pub thread: ThreadId,
    pub message: MessageId,
    pub channel: ChannelName,
    pub impact: Impact,
    pub fingerprint: String,
    pub requested_by: PersonId,
    /// Who may decide.
    pub approvers: Vec<PersonId>,
    pub state: ApprovalState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<PersonId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_via: Option<DecisionPath>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumed_by: Option<PersonId>,
    /// The self-declared agent session whose claim consumed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumed_session: Option<AgentIdentity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumed_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
}

/// What a settlement did.
#[derive(Debug, Clone)]
pub enum Settled {
    /// The approval moved; here it is after the move.
    Done(ApprovalRecord),
    /// It could not move; here it is as it stands (already decided, expired or consumed).
    Refused(ApprovalRecord),
}

/// One entry of the audit log: a step of an approval, or an admin change.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AuditRecord {
    pub seq: i64,
    pub at: Timestamp,
    /// An approval's `created`, `decided`, `consumed`, `expired` or `withdrawn`; or an admin change's
    /// `person.added`, `token.revoked`, `channel.policy_changed`, ….
    pub event: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<ThreadId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actor: Option<PersonId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<DecisionPath>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<AgentIdentity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// What an admin change changed (its id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// An admin change's subject before and after it (none when it did not exist).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<serde_json::Value>,
}

pub(in crate::store) const APPROVAL_COLUMNS: &str = "id, kind, thread_id, message_id, channel, impact, fingerprint, requested_by, \
     approvers, state, reason, decided_by, decided_via, decided_at, consumed_by, consumed_session, \
     consumed_at, created_at, expires_at";

fn opt_person(row: &Row, column: &str) -> Result<Option<PersonId>> {
    Ok(row
        .try_get::<Option<String>, _>(column)?
        .map(PersonId::parse)
        .transpose()?)
}

pub(in crate::store) fn approval(row: &Row) -> Result<ApprovalRecord> {
    Ok(ApprovalRecord {
        id: ApprovalId::parse(row.try_get::<String, _>("id")?)?,
        kind: row.try_get::<String, _>("kind")?.parse()?,
        thread: ThreadId::parse(row.try_get::<String, _>("thread_id")?)?,
        message: MessageId::parse(row.try_get::<String, _>("message_id")?)?,
        channel: ChannelName::parse(row.try_get::<String, _>("channel")?)?,
        impact: row.try_get::<String, _>("impact")?.parse()?,
        fingerprint: row.try_get("fingerprint")?,
        requested_by: PersonId::parse(row.try_get::<String, _>("requested_by")?)?,
        approvers: serde_json::from_str(&row.try_get::<String, _>("approvers")?)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        state: row.try_get::<String, _>("state")?.parse()?,
        reason: row.try_get("reason")?,
        decided_by: opt_person(row, "decided_by")?,
        decided_via: row
            .try_get::<Option<String>, _>("decided_via")?
            .map(|v| v.parse())
            .transpose()?,
        decided_at: row.try_get::<Option<i64>, _>("decided_at")?.map(Timestamp),
        consumed_by: opt_person(row, "consumed_by")?,
        consumed_session: row
            .try_get::<Option<String>, _>("consumed_session")?
            .map(AgentIdentity::parse)
            .transpose()?,
        consumed_at: row.try_get::<Option<i64>, _>("consumed_at")?.map(Timestamp),
        created_at: Timestamp(row.try_get("created_at")?),
        expires_at: Timestamp(row.try_get("expires_at")?),
    })
}

fn json_column(row: &Row, column: &str) -> Result<Option<serde_json::Value>> {
    row.try_get::<Option<String>, _>(column)?
        .map(|t| serde_json::from_str(&t).map_err(|e| StoreError::Corrupt(e.to_string())))
        .transpose()
}

pub(in crate::store) fn audit(row: &Row) -> Result<AuditRecord> {
    Ok(AuditRecord {
        seq: row.try_get("seq")?,
        at: Timestamp(row.try_get("at")?),
        event: row.try_get("event")?,
        approval: row
            .try_get::<Option<String>, _>("approval_id")?
            .map(ApprovalId::parse)
            .transpose()?,
        thread: row
            .try_get::<Option<String>, _>("thread_id")?
            .map(ThreadId::parse)
            .transpose()?,
        fingerprint: row.try_get("fingerprint")?,
        actor: opt_person(row, "actor")?,
        via: row
            .try_get::<Option<String>, _>("via")?
            .map(|v| v.parse())
            .transpose()?,
        decision: row
            .try_get::<Option<String>, _>("decision")?
            .map(|v| v.parse())
            .transpose()?,
        session: row
            .try_get::<Option<String>, _>("session")?
            .map(AgentIdentity::parse)
            .transpose()?,
        detail: row.try_get("detail")?,
        subject: row.try_get("subject")?,
        before: json_column(row, "before_json")?,
        after: json_column(row, "after_json")?,
    })
}
