//! A claim in one round trip on PostgreSQL: the call of `liaison_claim` (migration 0026), which
//! runs the claim's common steps inside PostgreSQL (the thread's lock, the command's deadline, the
//! fencing check, the approval gate, the current claim, the token, the claim row, the task's state,
//! its event and the event's pushes), then the event's `task.updated` webhooks when some live
//! webhook wants them (held in memory, so only then a statement more). What the function leaves to
//! the statement-by-statement path (a refusal with an error, a command to withdraw, an approval to
//! consume) it answers before writing anything, and this says so with `None`: the caller runs its
//! own steps in the same transaction. It calls `enqueue` only.

use super::enqueue::{self, WebhookCache};
use crate::domain::{AgentIdentity, PersonId, TaskState, ThreadId, Timestamp};
use crate::store::db::{Conn, query};
use crate::store::error::{Result, StoreError};
use crate::store::model::input::LoggedEvent;
use crate::store::model::records::coordination::{ClaimAttempt, ClaimRecord, claim};

/// One claim's inputs, as `Store::claim` takes them.
pub(in crate::store) struct ClaimInput {
    pub thread: ThreadId,
    pub person: PersonId,
    pub connection: Option<String>,
    pub session: AgentIdentity,
    pub now: Timestamp,
    pub expires_at: Timestamp,
    pub fence: Option<i64>,
}

/// Claims with one call of `liaison_claim`; `None` when the function left the claim to the
/// caller's steps (nothing was written then, and the thread's row stays locked).
pub(in crate::store) async fn run(
    tx: &mut Conn,
    cache: &WebhookCache,
    c: &ClaimInput,
) -> Result<Option<ClaimAttempt>> {
    let trace = crate::store::trace::current();
    let row = query(
        "SELECT outcome, thread_id, person_id, session, claimed_at, expires_at, fencing_token, \
         connection, event_seq, channel, opened_by, pushed \
         FROM liaison_claim($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(c.thread.as_str().to_owned())
    .bind(c.person.as_str().to_owned())
    .bind(c.session.as_str().to_owned())
    .bind(c.connection.clone())
    .bind(c.now.0)
    .bind(c.expires_at.0)
    .bind(c.fence)
    .bind(trace.as_ref().map(|t| t.traceparent.clone()))
    .bind(trace.and_then(|t| t.tracestate))
    .fetch_one(&mut *tx)
    .await?;
    let outcome: String = row.try_get("outcome")?;
    Ok(Some(match outcome.as_str() {
        "slow" => return Ok(None),
        "closed" => ClaimAttempt::Closed,
        "expired" => ClaimAttempt::Expired,
        "held" => ClaimAttempt::Held(claim(&row)?),
        "claimed" => {
            let record: ClaimRecord = claim(&row)?;
            let mut outbox_due = row.try_get::<Option<i64>, _>("pushed")?.unwrap_or(0) > 0;
            if let Some(seq) = row.try_get::<Option<i64>, _>("event_seq")? {
                let channel: String = row.try_get("channel")?;
                let party = PersonId::parse(row.try_get::<String, _>("opened_by")?)?;
                let event = LoggedEvent {
                    thread: &c.thread,
                    seq,
                    state: TaskState::Working,
                    cause: "claim",
                    message: None,
                    now: c.now,
                    channel: &channel,
                    party: &party,
                    new_task: false,
                    note: None,
                };
                outbox_due |= enqueue::task_webhooks(tx, cache, &event).await?;
            }
            ClaimAttempt::Claimed {
                claim: record,
                outbox_due,
            }
        }
        other => {
            return Err(StoreError::Corrupt(format!(
                "liaison_claim answered an unknown outcome {other:?}"
            )));
        }
    }))
}
