//! The outbound bridge's rows (SPEC §8b): one per thread delegated to a remote agent, and the
//! outbox deliveries that carry its messages out.
//!
//! A message to a remote agent is stored with what it sets in motion, in one transaction: the
//! thread's row here (its first message creates it), and unless an outbound approval holds it, a
//! `remote.send` delivery (a `close` gets a `remote.cancel`). When the approval is allowed, the
//! settlement enqueues the held send in its own transaction. So a send is never lost between the
//! post and the outbox, and the outbox's lease makes one worker send it. The follower that turns
//! the remote task's changes into messages claims rows here by lease too.

use super::db::{Conn, Row, query};
use super::messages::{NewMessage, post_in};
use super::outbox::{NewDelivery, insert as insert_delivery};
use super::{Result, Store, StoreError};
use crate::domain::{FollowMode, PersonId, RemoteState, ThreadId, Timestamp};

/// The event type of a delivery that sends a message to a remote agent.
pub const REMOTE_SEND: &str = "remote.send";
/// The event type of a delivery that cancels a remote task (the thread was closed here).
pub const REMOTE_CANCEL: &str = "remote.cancel";

/// The endpoint (and order key) of a thread's remote deliveries: one thread's messages go out
/// in order, and a failing thread does not hold up another.
pub fn remote_endpoint(thread: &ThreadId) -> String {
    format!("remote:{thread}")
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

const COLUMNS: &str = "thread_id, remote, context_id, skill, task_id, earlier_tasks, state, follow, \
     sealed_push_token, next_check_at, backoff_ms, last_error, created_at, updated_at";

fn record(row: &Row) -> Result<RemoteTaskRecord> {
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

/// Hook of the posting transaction: the thread's row on its first message to the remote, and the
/// delivery unless an approval holds it.
pub(super) async fn on_post(tx: &mut Conn, m: &NewMessage, hop: &RemoteHop) -> Result<()> {
    if let Some(start) = &hop.start {
        query(
            "INSERT INTO remote_tasks (thread_id, remote, context_id, skill, follow, sealed_push_token, \
             next_check_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $7) \
             ON CONFLICT (thread_id) DO NOTHING",
        )
        .bind(m.thread.as_str().to_owned())
        .bind(hop.remote.as_str().to_owned())
        .bind(start.context_id.clone())
        .bind(start.skill.clone())
        .bind(start.follow.as_str())
        .bind(start.sealed_push_token.clone())
        .bind(m.created_at.0)
        .execute(&mut *tx)
        .await?;
    }
    if !hop.held {
        enqueue(tx, &m.thread, &m.id, hop, m.created_at).await?;
    }
    Ok(())
}

/// Enqueues the delivery of message `message` (its id is the event id, so a receiver sees one
/// id however often it is retried).
pub(super) async fn enqueue(
    tx: &mut Conn,
    thread: &ThreadId,
    message: &crate::domain::MessageId,
    hop: &RemoteHop,
    now: Timestamp,
) -> Result<()> {
    let endpoint = remote_endpoint(thread);
    let payload = serde_json::json!({ "message": message, "remote": hop.remote }).to_string();
    insert_delivery(
        tx,
        NewDelivery {
            endpoint: &endpoint,
            order_key: &endpoint,
            url: &hop.url,
            event_type: hop.event_type,
            event_id: message.as_str(),
            thread: Some(thread),
            event_seq: None,
            payload: Some(&payload),
            now,
        },
    )
    .await
}

/// Posts `close` unless its thread is closed already (a remote's own close, or an internal one,
/// may have come first); for closes that must not fail the transaction they ride in.
pub(super) async fn close_unless_closed(
    tx: &mut Conn,
    close: NewMessage,
    lock: &'static str,
    cache: &super::outbox::WebhookCache,
) -> Result<()> {
    let sql = format!("SELECT state FROM threads WHERE id = $1{lock}");
    let state: Option<String> = query(sql)
        .bind(close.thread.as_str().to_owned())
        .fetch_optional(&mut *tx)
        .await?
        .map(|row| row.try_get("state"))
        .transpose()?;
    if state.is_some_and(|s| s != "closed") {
        post_in(tx, close, lock, cache).await?;
    }
    Ok(())
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

impl Store {
    /// The remote task row of a thread.
    pub async fn remote_task(&self, thread: &ThreadId) -> Result<Option<RemoteTaskRecord>> {
        let sql = format!("SELECT {COLUMNS} FROM remote_tasks WHERE thread_id = $1");
        let row = query(sql)
            .bind(thread.as_str().to_owned())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(record).transpose()
    }

    /// Records the task a send created or continued: a task id different from the current one
    /// starts a new round (the old id joins `earlier_tasks`).
    pub async fn record_remote_task(&self, o: RemoteObservation) -> Result<()> {
        let lock = self.for_update();
        self.write(move |tx| {
            Box::pin(async move {
                let sql = format!(
                    "SELECT task_id, earlier_tasks FROM remote_tasks WHERE thread_id = $1{lock}"
                );
                let row = query(sql)
                    .bind(o.thread.as_str().to_owned())
                    .fetch_optional(&mut *tx)
                    .await?
                    .ok_or(StoreError::NotFound("remote task"))?;
                let current: Option<String> = row.try_get("task_id")?;
                let mut earlier: Vec<String> =
                    serde_json::from_str(&row.try_get::<String, _>("earlier_tasks")?)
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                if let Some(old) = current.filter(|old| *old != o.task_id)
                    && !earlier.contains(&old)
                {
                    earlier.push(old);
                }
                let earlier =
                    serde_json::to_string(&earlier).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                query(
                    "UPDATE remote_tasks SET task_id = $1, earlier_tasks = $2, state = $3, next_check_at = $4, \
                     backoff_ms = $5, last_error = NULL, updated_at = $6 WHERE thread_id = $7",
                )
                .bind(o.task_id)
                .bind(earlier)
                .bind(o.state.as_str())
                .bind(o.next_check_at.0)
                .bind(o.backoff_ms)
                .bind(o.now.0)
                .bind(o.thread.as_str().to_owned())
                .execute(&mut *tx)
                .await?;
                Ok(())
            })
        })
        .await
    }

    /// Records that following a task hit a problem (shown to admins; the follower retries).
    pub async fn remote_task_trouble(
        &self,
        thread: &ThreadId,
        error: String,
        next_check_at: Timestamp,
        backoff_ms: i64,
        now: Timestamp,
    ) -> Result<()> {
        let thread = thread.as_str().to_owned();
        self.write(move |tx| {
            Box::pin(async move {
                query(
                    "UPDATE remote_tasks SET last_error = $1, next_check_at = $2, backoff_ms = $3, updated_at = $4 \
                     WHERE thread_id = $5",
                )
                .bind(error.chars().take(500).collect::<String>())
                .bind(next_check_at.0)
                .bind(backoff_ms)
                .bind(now.0)
                .bind(thread)
                .execute(&mut *tx)
                .await?;
                Ok(())
            })
        })
        .await
    }

    /// Claims up to `limit` remote tasks to follow for `owner` until `lease_until`: those with a
    /// task id, not terminal, not leased by a live follower, and due (`next_check_at` passed).
    pub async fn claim_remote_tasks(
        &self,
        owner: String,
        now: Timestamp,
        lease_until: Timestamp,
        limit: i64,
    ) -> Result<Vec<RemoteTaskRecord>> {
        let skip_locked = match self.backend {
            super::Backend::Postgres => " FOR UPDATE SKIP LOCKED",
            super::Backend::Sqlite => "",
        };
        let sql = format!(
            "WITH picked AS (SELECT thread_id FROM remote_tasks WHERE task_id IS NOT NULL \
             AND (state IS NULL OR state NOT IN ('completed', 'failed', 'rejected', 'canceled')) \
             AND (lease_until IS NULL OR lease_until <= $3) \
             AND next_check_at <= $3 ORDER BY next_check_at LIMIT $4{skip_locked}) \
             UPDATE remote_tasks SET lease_owner = $1, lease_until = $2 \
             WHERE thread_id IN (SELECT thread_id FROM picked) AND (lease_until IS NULL OR lease_until <= $3) \
             RETURNING {COLUMNS}"
        );
        self.write(move |tx| {
            Box::pin(async move {
                let rows = query(sql)
                    .bind(owner)
                    .bind(lease_until.0)
                    .bind(now.0)
                    .bind(limit)
                    .fetch_all(&mut *tx)
                    .await?;
                rows.iter().map(record).collect()
            })
        })
        .await
    }

    /// Extends `owner`'s lease on a thread's remote task to `until` (a time already past gives
    /// it up). False when the lease passed to another follower.
    pub async fn renew_remote_task(
        &self,
        thread: &ThreadId,
        owner: String,
        until: Timestamp,
    ) -> Result<bool> {
        let thread = thread.as_str().to_owned();
        self.write(move |tx| {
            Box::pin(async move {
                let done = query(
                    "UPDATE remote_tasks SET lease_until = $1 WHERE thread_id = $2 AND lease_owner = $3",
                )
                .bind(until.0)
                .bind(thread)
                .bind(owner)
                .execute(&mut *tx)
                .await?;
                Ok(done.rows_affected() == 1)
            })
        })
        .await
    }

    /// When a follower should look next without being woken: the earliest time a task that is
    /// still followed falls due (its lease, if any, counted).
    pub async fn next_remote_check(&self) -> Result<Option<Timestamp>> {
        let row = query(
            "SELECT MIN(CASE WHEN lease_until IS NOT NULL AND lease_until > next_check_at \
             THEN lease_until ELSE next_check_at END) AS due FROM remote_tasks WHERE task_id IS NOT NULL \
             AND (state IS NULL OR state NOT IN ('completed', 'failed', 'rejected', 'canceled'))",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get::<Option<i64>, _>("due")?.map(Timestamp))
    }

    /// Makes a thread's remote task due now (a push said it changed). False when the thread has
    /// no remote task.
    pub async fn nudge_remote_task(&self, thread: &ThreadId, now: Timestamp) -> Result<bool> {
        let thread = thread.as_str().to_owned();
        self.write(move |tx| {
            Box::pin(async move {
                let done = query(
                    "UPDATE remote_tasks SET next_check_at = $1 WHERE thread_id = $2 AND next_check_at > $1",
                )
                .bind(now.0)
                .bind(thread)
                .execute(&mut *tx)
                .await?;
                Ok(done.rows_affected() == 1)
            })
        })
        .await
    }
}
