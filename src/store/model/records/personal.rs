//! A person's sessions with her own agents as stored (SPEC §4b): the session (never its join
//! code, only whether one is live and until when), the connections that joined it, and its
//! commands' pickup deadlines; with the parsers of their rows. It must not depend on any file of
//! the store but `db` (rows) and `error`.

use serde::Serialize;

use crate::domain::personal::SessionId;
use crate::domain::{PersonId, ThreadId, Timestamp};
use crate::store::db::Row;
use crate::store::error::Result;

/// A personal session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PersonalSessionRecord {
    pub id: SessionId,
    pub person: PersonId,
    /// The connection (token id) the session is with; none: any of her agents.
    #[serde(skip)]
    pub connection: Option<String>,
    pub title: String,
    /// Until when the live join code may be used, while there is one.
    pub code_expires_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub ended_at: Option<Timestamp>,
    /// The connections (token ids) that joined it, and when, in joining order.
    #[serde(skip)]
    pub joined: Vec<(String, Timestamp)>,
}

/// What opening a session writes.
#[derive(Debug, Clone)]
pub struct NewPersonalSession {
    pub id: SessionId,
    pub person: PersonId,
    pub connection: Option<String>,
    pub title: String,
    pub created_at: Timestamp,
}

/// A command of a session: its thread and where it stands in being picked up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandRecord {
    pub thread: ThreadId,
    pub session: SessionId,
    /// Until when an agent may claim it.
    pub pickup_by: Timestamp,
    /// When it was first claimed: from then on it never expires.
    pub claimed_at: Option<Timestamp>,
    /// The connection (token id) that claimed it first.
    #[serde(skip)]
    pub claimed_by: Option<String>,
    /// When it expired (or was withdrawn when its session ended) unclaimed.
    pub expired_at: Option<Timestamp>,
}

/// The command a new thread is (written with its opening message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCommand {
    pub session: SessionId,
    pub pickup_by: Timestamp,
}

/// What `join` with a code found.
#[derive(Debug, Clone)]
pub enum JoinAttempt {
    /// The code was live and hers: it is used up and the connection is bound.
    Joined(PersonalSessionRecord),
    /// The code is live and hers, but the session is with another of her connections: nothing
    /// was used.
    OtherConnection(PersonalSessionRecord),
    /// Unknown, someone else's, used, expired, or its session ended: all look the same.
    Unknown,
}

pub(in crate::store) const SESSION_COLUMNS: &str =
    "id, person_id, connection, title, code_expires_at, created_at, ended_at";

pub(in crate::store) const COMMAND_COLUMNS: &str =
    "thread_id, session_id, pickup_by, claimed_at, claimed_by, expired_at";

pub(in crate::store) fn session(row: &Row) -> Result<PersonalSessionRecord> {
    Ok(PersonalSessionRecord {
        id: SessionId::parse(row.try_get::<String, _>("id")?)?,
        person: PersonId::parse(row.try_get::<String, _>("person_id")?)?,
        connection: row.try_get("connection")?,
        title: row.try_get("title")?,
        code_expires_at: row
            .try_get::<Option<i64>, _>("code_expires_at")?
            .map(Timestamp),
        created_at: Timestamp(row.try_get("created_at")?),
        ended_at: row.try_get::<Option<i64>, _>("ended_at")?.map(Timestamp),
        joined: Vec::new(),
    })
}

pub(in crate::store) fn command(row: &Row) -> Result<CommandRecord> {
    Ok(CommandRecord {
        thread: ThreadId::parse(row.try_get::<String, _>("thread_id")?)?,
        session: SessionId::parse(row.try_get::<String, _>("session_id")?)?,
        pickup_by: Timestamp(row.try_get("pickup_by")?),
        claimed_at: row.try_get::<Option<i64>, _>("claimed_at")?.map(Timestamp),
        claimed_by: row.try_get("claimed_by")?,
        expired_at: row.try_get::<Option<i64>, _>("expired_at")?.map(Timestamp),
    })
}
