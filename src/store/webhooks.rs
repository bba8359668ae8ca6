//! The admin webhooks: created, listed, removed, disabled and enabled, their secret replaced
//! (the replaced one co-signing for an overlap), and a `webhook.test` delivery enqueued to one
//! (enabled or not). Each change forgets the live webhooks that every
//! posting transaction consults (`tx::enqueue::WebhookCache`), inside its own job and again after
//! its commit. An operation file (`impl Store` only): no building block (`tx/`) and no other
//! operation file may depend on it.

use serde_json::{Value, json};

use super::Store;
use super::db::query;
use super::error::{Result, StoreError};
use super::model::input::{AdminChange, NewDelivery};
use super::model::records::outbox::{
    WEBHOOK_COLUMNS, WEBHOOK_FROM, WebhookRecord, webhook, webhook_endpoint,
};
use super::tx::audit::append_change;
use super::tx::enqueue::insert;
use crate::domain::Timestamp;

impl Store {
    pub async fn insert_webhook(&self, w: WebhookRecord, audit: AdminChange) -> Result<()> {
        let cache = self.webhooks.clone();
        let done = self.write(move |tx| {
            Box::pin(async move {
                let events = serde_json::to_string(&w.events)
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                query(
                    "INSERT INTO webhooks (id, url, events, person, channel, sealed_secret, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7)",
                )
                .bind(w.id)
                .bind(w.url)
                .bind(events)
                .bind(w.person.map(|p| p.as_str().to_owned()))
                .bind(w.channel)
                .bind(w.sealed_secret)
                .bind(w.created_at.0)
                .execute(&mut *tx)
                .await?;
                append_change(tx, &audit).await?;
                cache.forget();
                Ok(())
            })
        })
        .await;
        self.webhooks.forget();
        done
    }

    /// The events a webhook is sent (its secret and everything else unchanged). False when
    /// there is no such webhook (or it was removed).
    pub async fn set_webhook_events(
        &self,
        id: String,
        events: Vec<String>,
        audit: AdminChange,
    ) -> Result<bool> {
        let cache = self.webhooks.clone();
        let done = self
            .write(move |tx| {
                Box::pin(async move {
                    let events = serde_json::to_string(&events)
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                    let done = query(
                        "UPDATE webhooks SET events = $1 WHERE id = $2 AND removed_at IS NULL",
                    )
                    .bind(events)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                    if done.rows_affected() == 0 {
                        return Ok(false);
                    }
                    append_change(tx, &audit).await?;
                    cache.forget();
                    Ok(true)
                })
            })
            .await;
        self.webhooks.forget();
        done
    }

    /// Webhooks not removed, oldest first.
    pub async fn webhooks(&self) -> Result<Vec<WebhookRecord>> {
        let sql = format!(
            "SELECT {WEBHOOK_COLUMNS} FROM {WEBHOOK_FROM} WHERE w.removed_at IS NULL ORDER BY w.created_at, w.id"
        );
        let rows = query(sql).fetch_all(&self.pool).await?;
        rows.iter().map(webhook).collect()
    }

    pub async fn webhook(&self, id: &str) -> Result<Option<WebhookRecord>> {
        let sql = format!(
            "SELECT {WEBHOOK_COLUMNS} FROM {WEBHOOK_FROM} WHERE w.removed_at IS NULL AND w.id = $1"
        );
        query(sql)
            .bind(id.to_owned())
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(webhook)
            .transpose()
    }

    /// Removes a webhook; its pending deliveries die. False when there was none.
    pub async fn remove_webhook(
        &self,
        id: String,
        now: Timestamp,
        audit: AdminChange,
    ) -> Result<bool> {
        let cache = self.webhooks.clone();
        let done = self.write(move |tx| {
            Box::pin(async move {
                let done = query(
                    "UPDATE webhooks SET removed_at = $1 WHERE id = $2 AND removed_at IS NULL",
                )
                .bind(now.0)
                .bind(id.clone())
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() == 0 {
                    return Ok(false);
                }
                query(
                    "UPDATE deliveries SET state = 'dead', last_error = 'webhook removed', finished_at = $1, \
                     lease_owner = NULL, lease_until = NULL /* scan: an endpoint's deliveries, kept by retention */ WHERE endpoint = $2 AND state = 'pending'",
                )
                .bind(now.0)
                .bind(webhook_endpoint(&id))
                .execute(&mut *tx)
                .await?;
                append_change(tx, &audit).await?;
                cache.forget();
                Ok(true)
            })
        })
        .await;
        self.webhooks.forget();
        done
    }

    /// Replaces a webhook's sealed secret. With `previous_until`, the secret replaced co-signs
    /// until then (a secret that was co-signing already is dropped: only the last two are
    /// kept); without, it is forgotten at once. False when there is no such webhook.
    pub async fn rotate_webhook_secret(
        &self,
        id: String,
        sealed: String,
        previous_until: Option<Timestamp>,
        audit: AdminChange,
    ) -> Result<bool> {
        self.write(move |tx| {
            Box::pin(async move {
                // The right-hand sides read the row as it was: the previous secret is the one
                // being replaced.
                let done = match previous_until {
                    Some(until) => query(
                        "UPDATE webhooks SET previous_sealed_secret = sealed_secret, previous_until = $1, \
                         sealed_secret = $2 WHERE id = $3 AND removed_at IS NULL",
                    )
                    .bind(until.0),
                    None => query(
                        "UPDATE webhooks SET previous_sealed_secret = NULL, previous_until = NULL, \
                         sealed_secret = $1 WHERE id = $2 AND removed_at IS NULL",
                    ),
                }
                .bind(sealed)
                .bind(id)
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() == 0 {
                    return Ok(false);
                }
                append_change(tx, &audit).await?;
                Ok(true)
            })
        })
        .await
    }

    /// Disables a webhook's endpoint for `reason` (its pending deliveries die, retryable by hand)
    /// or, with `None`, enables it again (its dead streak starts over). `None` when there is no
    /// such webhook; `Some(false)` when it already was disabled, or enabled: nothing changed.
    pub async fn set_webhook_disabled(
        &self,
        id: String,
        reason: Option<String>,
        now: Timestamp,
        audit: AdminChange,
    ) -> Result<Option<bool>> {
        let cache = self.webhooks.clone();
        let done = self
            .write(move |tx| {
                Box::pin(async move {
                    let live = query("SELECT id FROM webhooks WHERE id = $1 AND removed_at IS NULL")
                        .bind(id.clone())
                        .fetch_optional(&mut *tx)
                        .await?;
                    if live.is_none() {
                        return Ok(None);
                    }
                    let endpoint = webhook_endpoint(&id);
                    let changed = match reason {
                        Some(reason) => {
                            let done = query(
                                "INSERT INTO outbox_endpoints (endpoint, dead_streak, disabled_at, disabled_reason) \
                                 VALUES ($1, 0, $2, $3) ON CONFLICT (endpoint) DO UPDATE \
                                 SET disabled_at = excluded.disabled_at, disabled_reason = excluded.disabled_reason \
                                 WHERE outbox_endpoints.disabled_at IS NULL",
                            )
                            .bind(endpoint.clone())
                            .bind(now.0)
                            .bind(reason)
                            .execute(&mut *tx)
                            .await?;
                            if done.rows_affected() > 0 {
                                query(
                                    "UPDATE deliveries SET state = 'dead', last_error = 'endpoint disabled by an admin', \
                                     finished_at = $1, lease_owner = NULL, lease_until = NULL \
                                     /* scan: an endpoint's deliveries, kept by retention */ WHERE endpoint = $2 AND state = 'pending'",
                                )
                                .bind(now.0)
                                .bind(endpoint)
                                .execute(&mut *tx)
                                .await?;
                            }
                            done.rows_affected() > 0
                        }
                        None => {
                            query(
                                "UPDATE outbox_endpoints SET disabled_at = NULL, disabled_reason = NULL, \
                                 dead_streak = 0 WHERE endpoint = $1 AND disabled_at IS NOT NULL",
                            )
                            .bind(endpoint)
                            .execute(&mut *tx)
                            .await?
                            .rows_affected()
                                > 0
                        }
                    };
                    if changed {
                        append_change(tx, &audit).await?;
                        cache.forget();
                    }
                    Ok(Some(changed))
                })
            })
            .await;
        self.webhooks.forget();
        done
    }

    /// Enqueues a `webhook.test` event to one webhook (enabled or not: the test is how an admin
    /// checks a repaired receiver).
    pub async fn enqueue_webhook_test(
        &self,
        id: String,
        data: Value,
        now: Timestamp,
        audit: AdminChange,
    ) -> Result<Option<i64>> {
        let id_out = self
            .write(move |tx| {
                Box::pin(async move {
                    let Some(row) =
                        query("SELECT url FROM webhooks WHERE id = $1 AND removed_at IS NULL")
                            .bind(id.clone())
                            .fetch_optional(&mut *tx)
                            .await?
                    else {
                        return Ok(None);
                    };
                    let url: String = row.try_get("url")?;
                    let endpoint = webhook_endpoint(&id);
                    let timestamp = chrono::DateTime::from_timestamp_millis(now.0)
                        .unwrap_or_default()
                        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
                    let body =
                        json!({"type": "webhook.test", "timestamp": timestamp, "data": data})
                            .to_string();
                    let event_id = format!("msg_{}", uuid::Uuid::now_v7().simple());
                    insert(
                        tx,
                        NewDelivery {
                            endpoint: &endpoint,
                            order_key: &endpoint,
                            url: &url,
                            event_type: "webhook.test",
                            event_id: &event_id,
                            thread: None,
                            event_seq: None,
                            payload: Some(&body),
                            now,
                        },
                    )
                    .await?;
                    let row = query("SELECT MAX(id) AS id FROM deliveries WHERE event_id = $1")
                        .bind(event_id.clone())
                        .fetch_one(&mut *tx)
                        .await?;
                    let delivery = row.try_get::<i64, _>("id")?;
                    let mut audit = audit;
                    audit.after = Some(json!({ "delivery": delivery, "event_id": event_id }));
                    append_change(tx, &audit).await?;
                    Ok(Some(delivery))
                })
            })
            .await?;
        Ok(id_out)
    }
}
