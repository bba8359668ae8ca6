//! Finishing a delivery's attempt: its record, its verdict applied, the endpoint's dead streak,
//! and when it dies the webhooks about it, its endpoint disabled at the streak's limit (with that
//! reason), and the close of a thread whose send to a remote agent failed for good (posted unless
//! the thread is closed already); and the endpoint enabled again when a retry by hand sends it
//! more. It calls `post` and `enqueue`, and must not depend on any operation (`impl Store`).

use serde_json::json;

use super::enqueue::{WebhookCache, webhook_event};
use super::post::post_in;
use crate::domain::delivery::AttemptVerdict;
use crate::store::db::{Conn, query};
use crate::store::error::Result;
use crate::store::model::input::{Audience, FinishedAttempt, NewMessage};
use crate::store::model::records::outbox::Finished;

/// Whether a pending delivery waits behind `delivery` in its order key's queue (the index
/// `deliveries_order` answers it).
async fn next_in_order(tx: &mut Conn, order_key: String, delivery: i64) -> Result<bool> {
    let row = query(
        "SELECT id FROM deliveries WHERE order_key = $1 AND state = 'pending' AND id > $2 LIMIT 1",
    )
    .bind(order_key)
    .bind(delivery)
    .fetch_optional(&mut *tx)
    .await?;
    Ok(row.is_some())
}

pub(in crate::store) async fn finish_in(
    tx: &mut Conn,
    f: FinishedAttempt,
    lock: &'static str,
    cache: &WebhookCache,
) -> Result<Finished> {
    let (state, next, finished) = match f.verdict {
        AttemptVerdict::Delivered => ("delivered", f.now, Some(f.now.0)),
        AttemptVerdict::RetryAt(at) => ("pending", at, None),
        AttemptVerdict::Dead => ("dead", f.now, Some(f.now.0)),
    };
    let row = query(
        "UPDATE deliveries SET state = $1, next_attempt_at = $2, finished_at = $3, last_status = $4, \
         last_error = $5, lease_owner = NULL, lease_until = NULL \
         WHERE id = $6 AND lease_owner = $7 AND attempts = $8 AND state = 'pending' \
         RETURNING endpoint, event_type, event_id, url, order_key",
    )
    .bind(state)
    .bind(next.0)
    .bind(finished)
    .bind(f.status)
    .bind(if f.verdict == AttemptVerdict::Delivered {
        None
    } else {
        f.error.clone()
    })
    .bind(f.delivery)
    .bind(f.worker.clone())
    .bind(f.attempt)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Ok(Finished::default());
    };
    query(
        "INSERT INTO delivery_attempts (delivery_id, attempt, worker, started_at, latency_ms, status, error_class, error) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(f.delivery)
    .bind(f.attempt)
    .bind(f.worker.clone())
    .bind(f.started_at.0)
    .bind(f.latency_ms)
    .bind(f.status)
    .bind(f.error_class.clone())
    .bind(f.error.clone())
    .execute(&mut *tx)
    .await?;
    let endpoint: String = row.try_get("endpoint")?;
    let event_type: String = row.try_get("event_type")?;
    let mut done = Finished {
        applied: true,
        ..Finished::default()
    };
    match f.verdict {
        AttemptVerdict::Delivered => {
            done.outbox_due = next_in_order(tx, row.try_get("order_key")?, f.delivery).await?;
            query("UPDATE outbox_endpoints SET dead_streak = 0 WHERE endpoint = $1")
                .bind(endpoint)
                .execute(&mut *tx)
                .await?;
        }
        AttemptVerdict::RetryAt(_) => {}
        AttemptVerdict::Dead => {
            // A death may free the next of its order key, post a close and enqueue webhooks.
            done.outbox_due = true;
            if let Some(close) = f.on_dead.clone() {
                done.closed = close_unless_closed(tx, close, lock, cache).await?;
            }
            let streak: i64 = query(
                "INSERT INTO outbox_endpoints (endpoint, dead_streak) VALUES ($1, 1) ON CONFLICT (endpoint) \
                 DO UPDATE SET dead_streak = outbox_endpoints.dead_streak + 1 RETURNING dead_streak",
            )
            .bind(endpoint.clone())
            .fetch_one(&mut *tx)
            .await?
            .try_get("dead_streak")?;
            // Events about the outbox itself are not reported again when they die (no loops).
            let about_outbox = matches!(event_type.as_str(), "delivery.dead" | "endpoint.disabled");
            if !about_outbox {
                let url: String = row.try_get("url")?;
                let event_id: String = row.try_get("event_id")?;
                let data = || {
                    json!({
                        "delivery_id": f.delivery,
                        "endpoint": endpoint,
                        "url": url,
                        "event_type": event_type,
                        "event_id": event_id,
                        "attempts": f.attempt,
                        "last_status": f.status,
                        "error": f.error,
                    })
                };
                webhook_event(tx, cache, "delivery.dead", Audience::default(), data, f.now).await?;
            }
            if streak >= f.disable_after {
                query(
                    "UPDATE outbox_endpoints SET disabled_at = $1, disabled_reason = $2 \
                     WHERE endpoint = $3 AND disabled_at IS NULL",
                )
                .bind(f.now.0)
                .bind(format!("{streak} consecutive dead deliveries"))
                .bind(endpoint.clone())
                .execute(&mut *tx)
                .await?;
                query(
                    "UPDATE deliveries SET state = 'dead', last_error = 'endpoint disabled', finished_at = $1, \
                     lease_owner = NULL, lease_until = NULL /* scan: an endpoint's deliveries, kept by retention */ WHERE endpoint = $2 AND state = 'pending'",
                )
                .bind(f.now.0)
                .bind(endpoint.clone())
                .execute(&mut *tx)
                .await?;
                done.endpoint_disabled = true;
                // A disabled webhook gets no more deliveries: later jobs read the list again.
                cache.forget();
                let url: String = row.try_get("url")?;
                let data = || {
                    json!({
                        "endpoint": endpoint,
                        "url": url,
                        "dead_deliveries": streak,
                    })
                };
                webhook_event(
                    tx,
                    cache,
                    "endpoint.disabled",
                    Audience::default(),
                    data,
                    f.now,
                )
                .await?;
            }
        }
    }
    Ok(done)
}

/// Enables `endpoint` again (a retry by hand): not disabled, its dead streak started over.
pub(in crate::store) async fn enable_in(tx: &mut Conn, endpoint: String) -> Result<()> {
    query(
        "UPDATE outbox_endpoints SET disabled_at = NULL, disabled_reason = NULL, dead_streak = 0 \
         WHERE endpoint = $1",
    )
    .bind(endpoint)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Posts `close` unless its thread is closed already (a remote's own close, or an internal one,
/// may have come first); for closes that must not fail the transaction they ride in. True when
/// it closed the thread.
async fn close_unless_closed(
    tx: &mut Conn,
    close: NewMessage,
    lock: &'static str,
    cache: &WebhookCache,
) -> Result<bool> {
    let sql = format!("SELECT state FROM threads WHERE id = $1{lock}");
    let state: Option<String> = query(sql)
        .bind(close.thread.as_str().to_owned())
        .fetch_optional(&mut *tx)
        .await?
        .map(|row| row.try_get("state"))
        .transpose()?;
    if state.is_some_and(|s| s != "closed") {
        post_in(tx, close, lock, cache).await?;
        return Ok(true);
    }
    Ok(false)
}
