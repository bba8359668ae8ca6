//! The task event log's building blocks: appending an event that no message caused (a claim, an
//! approval's decision) to a task's log, with its hooks (`enqueue`). A message's event is written
//! by the post's own statements (`post_rows`). They call only `enqueue` and must not depend on any
//! operation (`impl Store`).

use super::enqueue::{self, WebhookCache};
use crate::domain::{PersonId, TaskState, ThreadId, Timestamp};
use crate::store::db::{Conn, query};
use crate::store::error::Result;
use crate::store::model::input::LoggedEvent;

/// Appends one event to a task's log (inside the transaction that caused it); says whether its
/// hooks enqueued deliveries.
async fn append_event(tx: &mut Conn, cache: &WebhookCache, e: LoggedEvent<'_>) -> Result<bool> {
    query(
        "INSERT INTO task_events (thread_id, seq, state, cause, message_id, created_at, note) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(e.thread.as_str().to_owned())
    .bind(e.seq)
    .bind(e.state.as_str())
    .bind(e.cause.to_owned())
    .bind(e.message.map(|m| m.as_str().to_owned()))
    .bind(e.now.0)
    .bind(e.note.map(str::to_owned))
    .execute(&mut *tx)
    .await?;
    enqueue::on_task_event(tx, cache, &e).await
}

/// Moves a submitted task to working when it is claimed, with its event; says whether the event
/// enqueued deliveries (none when the thread is no task, or the task was working already).
pub(in crate::store) async fn on_claim(
    tx: &mut Conn,
    cache: &WebhookCache,
    thread: &ThreadId,
    now: Timestamp,
) -> Result<bool> {
    log_event(tx, cache, thread, now, "claim", None, |state| {
        let next = state.apply(crate::domain::TaskEvent::Claimed)?;
        Ok((next != state).then_some(next))
    })
    .await
}

/// Records a decision on a task's approval as an event of its log, without changing its state, so
/// that streams and subscriptions show the new status message.
pub(in crate::store) async fn on_approval(
    tx: &mut Conn,
    cache: &WebhookCache,
    thread: &ThreadId,
    now: Timestamp,
) -> Result<bool> {
    log_event(tx, cache, thread, now, "approval", None, |state| {
        Ok(Some(state))
    })
    .await
}

/// Records a progress note of a working task as an event of its log, without changing its
/// state: streams, subscriptions and pushes show a `WORKING` status update with the note.
pub(in crate::store) async fn on_progress(
    tx: &mut Conn,
    cache: &WebhookCache,
    thread: &ThreadId,
    now: Timestamp,
    note: &str,
) -> Result<bool> {
    log_event(tx, cache, thread, now, "progress", Some(note), |state| {
        Ok((state == TaskState::Working).then_some(state))
    })
    .await
}

/// Appends to a task's log an event that no message caused: `next` gives the state after it from
/// the state before, or none when there is nothing to log. A thread that is no task logs nothing.
/// Says whether the event's hooks enqueued deliveries. The caller holds the thread's row lock
/// (PostgreSQL), so that the event's number read here is the last one committed: two replicas
/// never number two events alike.
async fn log_event(
    tx: &mut Conn,
    cache: &WebhookCache,
    thread: &ThreadId,
    now: Timestamp,
    cause: &str,
    note: Option<&str>,
    next: impl FnOnce(TaskState) -> Result<Option<TaskState>>,
) -> Result<bool> {
    let row =
        query("SELECT task_state, task_event_seq, channel, opened_by FROM threads WHERE id = $1")
            .bind(thread.as_str().to_owned())
            .fetch_one(&mut *tx)
            .await?;
    let Some(state) = row.try_get::<Option<String>, _>("task_state")? else {
        return Ok(false);
    };
    let Some(next) = next(state.parse()?)? else {
        return Ok(false);
    };
    let seq = row.try_get::<i64, _>("task_event_seq")? + 1;
    let channel: String = row.try_get("channel")?;
    let party = PersonId::parse(row.try_get::<String, _>("opened_by")?)?;
    query("UPDATE threads SET task_state = $1, task_event_seq = $2, updated_at = $3 WHERE id = $4")
        .bind(next.as_str())
        .bind(seq)
        .bind(now.0)
        .bind(thread.as_str().to_owned())
        .execute(&mut *tx)
        .await?;
    let event = LoggedEvent {
        thread,
        seq,
        state: next,
        cause,
        message: None,
        now,
        channel: &channel,
        party: &party,
        new_task: false,
        note,
    };
    append_event(tx, cache, event).await
}
