//! The coordination between agent sessions as stored: claims on threads, presence and advisory
//! leases, and what trying to claim or lease answers; with the parsers of their rows. It must not
//! depend on any file of the store but `db` (rows), `error` and the approvals' records.

use serde::Serialize;

use super::approvals::ApprovalRecord;
use crate::domain::{AgentIdentity, LeaseMode, PersonId, ThreadId, Timestamp, Transition};
use crate::store::db::Row;
use crate::store::error::{ClaimHolder, Result};

#[derive(Debug, Clone, Serialize)]
pub struct ClaimRecord {
    pub thread: ThreadId,
    pub person: PersonId,
    pub session: AgentIdentity,
    pub claimed_at: Timestamp,
    pub expires_at: Timestamp,
    /// The thread's fencing token for this holder: strictly greater than every token an earlier
    /// holder of the thread was given; the same session renewing keeps it. A post or a renewal
    /// carrying it is refused once another session has claimed the thread since.
    pub fencing_token: i64,
    /// The connection (token id) holding it, when a connection claimed (SPEC §4b): its tool
    /// hooks report on this claim, and another connection declaring the same session never
    /// renews it.
    #[serde(skip)]
    pub connection: Option<String>,
}

/// A thread's place in the claim queue: oldest first, by creation and then id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuePlace {
    pub id: ThreadId,
    pub created_at: i64,
}

/// The columns [`claim`] reads.
pub(in crate::store) const CLAIM_COLUMNS: &str =
    "thread_id, person_id, session, claimed_at, expires_at, fencing_token, connection";

impl From<&ClaimRecord> for ClaimHolder {
    fn from(c: &ClaimRecord) -> Self {
        ClaimHolder {
            thread: c.thread.clone(),
            person: c.person.clone(),
            session: c.session.clone(),
            claimed_at: c.claimed_at,
            expires_at: c.expires_at,
            fencing_token: c.fencing_token,
        }
    }
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

/// The result of trying to claim a thread.
#[derive(Debug, Clone)]
pub enum ClaimAttempt {
    /// The caller holds the claim (new, taken over after expiry, or renewed); `outbox_due` says
    /// whether its commit enqueued deliveries (the task event's pushes and webhooks).
    Claimed {
        claim: ClaimRecord,
        outbox_due: bool,
    },
    /// Someone else holds a live claim.
    Held(ClaimRecord),
    /// The thread is closed (or gone) and cannot be claimed.
    Closed,
    /// A command of a personal session that was not claimed before its deadline: withdrawn.
    Expired,
    /// The thread's newest approval does not allow work (pending); nothing was claimed.
    AwaitingApproval(Box<ApprovalRecord>),
}

/// The result of trying to acquire a lease.
#[derive(Debug, Clone)]
pub enum LeaseAttempt {
    /// Acquired (or renewed); `displaced` lists holders removed by `force`.
    Acquired {
        lease: LeaseRecord,
        displaced: Vec<LeaseRecord>,
    },
    /// Refused: these live holders are incompatible with the requested mode.
    Held(Vec<LeaseRecord>),
}

pub(in crate::store) fn claim(row: &Row) -> Result<ClaimRecord> {
    Ok(ClaimRecord {
        thread: ThreadId::parse(row.try_get::<String, _>("thread_id")?)?,
        person: PersonId::parse(row.try_get::<String, _>("person_id")?)?,
        session: AgentIdentity::parse(row.try_get::<String, _>("session")?)?,
        claimed_at: Timestamp(row.try_get("claimed_at")?),
        expires_at: Timestamp(row.try_get("expires_at")?),
        fencing_token: row.try_get("fencing_token")?,
        connection: row.try_get("connection")?,
    })
}

pub(in crate::store) fn presence(row: &Row) -> Result<PresenceRecord> {
    Ok(PresenceRecord {
        person: PersonId::parse(row.try_get::<String, _>("person_id")?)?,
        agent: AgentIdentity::parse(row.try_get::<String, _>("agent")?)?,
        transition: row
            .try_get::<String, _>("transition")?
            .parse::<Transition>()?,
        task: row.try_get("task")?,
        updated_at: Timestamp(row.try_get("updated_at")?),
        expires_at: Timestamp(row.try_get("expires_at")?),
    })
}

pub(in crate::store) fn lease(row: &Row) -> Result<LeaseRecord> {
    Ok(LeaseRecord {
        resource: row.try_get("resource")?,
        person: PersonId::parse(row.try_get::<String, _>("person_id")?)?,
        agent: AgentIdentity::parse(row.try_get::<String, _>("agent")?)?,
        mode: row.try_get::<String, _>("mode")?.parse::<LeaseMode>()?,
        acquired_at: Timestamp(row.try_get("acquired_at")?),
        expires_at: Timestamp(row.try_get("expires_at")?),
    })
}

/// A progress note an agent's own tool added to a thread it holds the claim on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProgressRecord {
    pub seq: i64,
    pub person: PersonId,
    /// The self-declared session that held the claim.
    pub session: AgentIdentity,
    pub tool: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// `ok` or `failed`.
    pub outcome: String,
    /// The same tool on the same target with the same outcome, coalesced into this note.
    pub repeats: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl ProgressRecord {
    /// One line: "Edit src/lib.rs: ok (×3)".
    pub fn text(&self) -> String {
        let mut t = self.tool.clone();
        if let Some(target) = &self.target {
            t.push(' ');
            t.push_str(target);
        }
        t.push_str(": ");
        t.push_str(&self.outcome);
        if self.repeats > 1 {
            t.push_str(&format!(" (×{})", self.repeats));
        }
        t
    }
}

/// What adding a progress note did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgressAdded {
    /// A new note (and, for a task, an event of its log); `outbox_due` says whether that event
    /// enqueued deliveries (its pushes and webhooks).
    Added {
        note: ProgressRecord,
        outbox_due: bool,
    },
    /// Folded into the previous note (same tool, target and outcome, shortly after).
    Coalesced(ProgressRecord),
    /// The session holds no live claim on the thread (any more).
    NoClaim,
    /// The thread already got `per_minute` notes in the last minute.
    RateLimited,
    /// The thread holds `per_thread` notes: no more are kept.
    Full,
}

pub(in crate::store) const PROGRESS_COLUMNS: &str =
    "seq, person_id, session, tool, target, outcome, repeats, created_at, updated_at";

pub(in crate::store) fn progress(row: &Row) -> Result<ProgressRecord> {
    Ok(ProgressRecord {
        seq: row.try_get("seq")?,
        person: PersonId::parse(row.try_get::<String, _>("person_id")?)?,
        session: AgentIdentity::parse(row.try_get::<String, _>("session")?)?,
        tool: row.try_get("tool")?,
        target: row.try_get("target")?,
        outcome: row.try_get("outcome")?,
        repeats: row.try_get("repeats")?,
        created_at: Timestamp(row.try_get("created_at")?),
        updated_at: Timestamp(row.try_get("updated_at")?),
    })
}
