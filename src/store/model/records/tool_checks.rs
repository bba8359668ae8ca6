//! Confirmations of an agent's own tool calls as stored (SPEC §5b), with the parser of their
//! rows. It must not depend on any file of the store but `db` (rows) and `error`.

use serde::Serialize;

use crate::domain::tool_check::{ConfirmationId, ConfirmationState, ToolSummary};
use crate::domain::{Impact, PersonId, ThreadId, Timestamp};
use crate::store::db::Row;
use crate::store::error::{Result, StoreError};

/// One confirmation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfirmationRecord {
    pub id: ConfirmationId,
    pub person: PersonId,
    /// The credential (token id) whose agent made the call: only its hook consumes the decision.
    #[serde(skip)]
    pub credential: String,
    /// The connection's name, when the credential is one.
    pub connection: Option<String>,
    /// The agent session the hook declared.
    pub agent: Option<String>,
    /// The claimed command (thread) it was made for.
    pub thread: Option<ThreadId>,
    pub tool: String,
    pub input_digest: String,
    pub summary: ToolSummary,
    pub impact: Impact,
    /// The rule that gave the impact.
    pub rule: String,
    pub fingerprint: String,
    pub state: ConfirmationState,
    pub reason: Option<String>,
    pub decided_by: Option<PersonId>,
    pub decided_via: Option<String>,
    pub decided_at: Option<Timestamp>,
    pub consumed_at: Option<Timestamp>,
    pub created_at: Timestamp,
    /// Past this, a pending confirmation is expired: the call is denied.
    pub expires_at: Timestamp,
}

/// What asking for a confirmation did.
#[derive(Debug, Clone)]
pub enum ConfirmationAsked {
    /// A new one, pending; true when its `approval.pending` webhooks were queued (the outbox
    /// has work).
    Created(ConfirmationRecord, bool),
    /// The same call (same fingerprint) already waits, or was allowed and not yet used: the
    /// caller waits on that one instead of making a second.
    Existing(ConfirmationRecord),
    /// The credential already has this many pending: nothing was written.
    TooMany(i64),
}

/// What deciding did.
#[derive(Debug, Clone)]
pub enum ConfirmationDecided {
    /// Decided now; true when its `approval.decided` webhooks were queued.
    Decided(ConfirmationRecord, bool),
    /// It was not pending (or had passed its deadline): it stays as it is.
    Settled(ConfirmationRecord),
    /// Unknown, or another person's: both look the same.
    Unknown,
}

pub(in crate::store) const CONFIRMATION_COLUMNS: &str = "id, person_id, credential, connection_name, agent, thread_id, tool, input_digest, \
     summary, impact, rule, fingerprint, state, reason, decided_by, decided_via, decided_at, \
     consumed_at, created_at, expires_at";

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

pub(in crate::store) fn confirmation(row: &Row) -> Result<ConfirmationRecord> {
    let summary: String = row.try_get("summary")?;
    Ok(ConfirmationRecord {
        id: ConfirmationId::parse(row.try_get::<String, _>("id")?)?,
        person: PersonId::parse(row.try_get::<String, _>("person_id")?)?,
        credential: row.try_get("credential")?,
        connection: row.try_get("connection_name")?,
        agent: row.try_get("agent")?,
        thread: row
            .try_get::<Option<String>, _>("thread_id")?
            .map(ThreadId::parse)
            .transpose()?,
        tool: row.try_get("tool")?,
        input_digest: row.try_get("input_digest")?,
        summary: serde_json::from_str(&summary).map_err(corrupt)?,
        impact: row
            .try_get::<String, _>("impact")?
            .parse()
            .map_err(corrupt)?,
        rule: row.try_get("rule")?,
        fingerprint: row.try_get("fingerprint")?,
        state: row
            .try_get::<String, _>("state")?
            .parse()
            .map_err(corrupt)?,
        reason: row.try_get("reason")?,
        decided_by: row
            .try_get::<Option<String>, _>("decided_by")?
            .map(PersonId::parse)
            .transpose()?,
        decided_via: row.try_get("decided_via")?,
        decided_at: row.try_get::<Option<i64>, _>("decided_at")?.map(Timestamp),
        consumed_at: row.try_get::<Option<i64>, _>("consumed_at")?.map(Timestamp),
        created_at: Timestamp(row.try_get("created_at")?),
        expires_at: Timestamp(row.try_get("expires_at")?),
    })
}
