//! The outbound bridge's rows as stored (SPEC §8b): a thread's remote task, and the event types and
//! endpoint of the deliveries that carry its messages out; with the column list and parser of its
//! row. It must not depend on any file of the store but `db` (rows) and `error`.

use crate::domain::{FollowMode, PersonId, RemoteState, ThreadId, Timestamp};
use crate::store::db::Row;
use crate::store::error::{Result, StoreError};

/// The event type of a delivery that sends a message to a remote agent.
pub const REMOTE_SEND: &str = "remote.send";

/// The event type of a delivery that cancels a remote task (the thread was closed here).
pub const REMOTE_CANCEL: &str = "remote.cancel";

/// The endpoint (and order key) of a thread's remote deliveries: one thread's messages go out
/// in order, and a failing thread does not hold up another.
pub fn remote_endpoint(thread: &ThreadId) -> String {
    format!("remote:{thread}")
}

/// A thread's remote task as stored.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RemoteTaskRecord {
    pub thread: ThreadId,
    pub remote: PersonId,
    pub context_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    pub earlier_tasks: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<RemoteState>,
    pub follow: FollowMode,
    #[serde(skip)]
    pub sealed_push_token: Option<String>,
    pub next_check_at: Timestamp,
    pub backoff_ms: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

pub(in crate::store) const COLUMNS: &str = "thread_id, remote, context_id, skill, task_id, earlier_tasks, state, follow, \
     sealed_push_token, next_check_at, backoff_ms, last_error, created_at, updated_at";

pub(in crate::store) fn record(row: &Row) -> Result<RemoteTaskRecord> {
    Ok(RemoteTaskRecord {
        thread: ThreadId::parse(row.try_get::<String, _>("thread_id")?)?,
        remote: PersonId::parse(row.try_get::<String, _>("remote")?)?,
        context_id: row.try_get("context_id")?,
        skill: row.try_get("skill")?,
        task_id: row.try_get("task_id")?,
        earlier_tasks: serde_json::from_str(&row.try_get::<String, _>("earlier_tasks")?)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        state: row
            .try_get::<Option<String>, _>("state")?
            .map(|s| s.parse())
            .transpose()?,
        follow: row.try_get::<String, _>("follow")?.parse()?,
        sealed_push_token: row.try_get("sealed_push_token")?,
        next_check_at: Timestamp(row.try_get("next_check_at")?),
        backoff_ms: row.try_get("backoff_ms")?,
        last_error: row.try_get("last_error")?,
        created_at: Timestamp(row.try_get("created_at")?),
        updated_at: Timestamp(row.try_get("updated_at")?),
    })
}
