//! The outbound bridge's building blocks (SPEC §8b): what a message to a remote agent sets in
//! motion, in the transaction that stores it: the thread's remote task row on its first message,
//! and the delivery that carries it out unless an outbound approval holds it (the settlement
//! enqueues the held send). They call only `enqueue` and must not depend on any operation
//! (`impl Store`).

use super::enqueue::insert as insert_delivery;
use crate::domain::{ThreadId, Timestamp};
use crate::store::db::{Conn, query};
use crate::store::error::{Result, StoreError};
use crate::store::model::input::{NewDelivery, NewMessage, RemoteHop, RemoteObservation};
use crate::store::model::records::remote_tasks::remote_endpoint;

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
pub(in crate::store) async fn enqueue(
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

/// Records what the follower observed of a thread's remote task: its state and when to look
/// next; a task id different from the current one starts a new round (the old id joins
/// `earlier_tasks`). In the transaction of the message that reports it, when there is one.
pub(in crate::store) async fn observed(
    tx: &mut Conn,
    o: &RemoteObservation,
    lock: &'static str,
) -> Result<()> {
    let sql = format!("SELECT task_id, earlier_tasks FROM remote_tasks WHERE thread_id = $1{lock}");
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
    .bind(o.task_id.clone())
    .bind(earlier)
    .bind(o.state.as_str())
    .bind(o.next_check_at.0)
    .bind(o.backoff_ms)
    .bind(o.now.0)
    .bind(o.thread.as_str().to_owned())
    .execute(&mut *tx)
    .await?;
    Ok(())
}
