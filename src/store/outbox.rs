//! The durable outbox's tables: deliveries written inside the transaction of their cause (the
//! `on_*` hooks below, called by the posting, claiming and approval transactions), claimed by
//! lease with one `UPDATE … RETURNING`, finished with the attempt's record, and the admin
//! webhooks they go to. Retry rules (when, how often, what is permanent) are the service's; the
//! store only applies the outcome it is given.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Store;
use super::db::{Conn, query};
use super::error::{Result, StoreError};
use super::model::input::{
    AttemptVerdict, Audience, DeliveryFilter, FinishedAttempt, LoggedEvent, NewApproval,
    NewDelivery, NewMessage,
};
use super::model::records::approvals::ApprovalRecord;
use super::model::records::outbox::{
    AttemptRecord, DELIVERY_COLUMNS, DeliveryRecord, DeliveryState, Finished, PUSH_EVENT,
    WEBHOOK_COLUMNS, WEBHOOK_FROM, WebhookRecord, attempt, delivery, push_endpoint, webhook,
    webhook_endpoint,
};
use super::model::records::threads::{PushConfigRecord, TaskEventRecord};
use crate::domain::{PersonId, ThreadId, Timestamp};

pub(super) async fn insert(tx: &mut Conn, d: NewDelivery<'_>) -> Result<()> {
    query(
        "INSERT INTO deliveries (endpoint, order_key, url, event_type, event_id, thread_id, event_seq, payload, \
         state, attempts, next_attempt_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', 0, $9, $9)",
    )
    .bind(d.endpoint.to_owned())
    .bind(d.order_key.to_owned())
    .bind(d.url.to_owned())
    .bind(d.event_type.to_owned())
    .bind(d.event_id.to_owned())
    .bind(d.thread.map(|t| t.as_str().to_owned()))
    .bind(d.event_seq)
    .bind(d.payload.map(str::to_owned))
    .bind(d.now.0)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Push deliveries of one task event, one per push config of the task whose endpoint is enabled.
async fn push_event(
    tx: &mut Conn,
    thread: &ThreadId,
    seq: i64,
    only_config: Option<&str>,
    now: Timestamp,
) -> Result<bool> {
    let rows = query(
        "SELECT c.id, c.url FROM push_configs c LEFT JOIN outbox_endpoints e \
         ON e.endpoint = 'push:' || c.thread_id || '/' || c.id \
         WHERE c.thread_id = $1 AND e.disabled_at IS NULL AND ($2 IS NULL OR c.id = $2) ORDER BY c.created_at, c.id",
    )
    .bind(thread.as_str().to_owned())
    .bind(only_config.map(str::to_owned))
    .fetch_all(&mut *tx)
    .await?;
    let event_id = format!("{thread}:{seq}");
    let enqueued = !rows.is_empty();
    for row in rows {
        let config: String = row.try_get("id")?;
        let url: String = row.try_get("url")?;
        let endpoint = push_endpoint(thread, &config);
        insert(
            tx,
            NewDelivery {
                endpoint: &endpoint,
                order_key: &endpoint,
                url: &url,
                event_type: PUSH_EVENT,
                event_id: &event_id,
                thread: Some(thread),
                event_seq: Some(seq),
                payload: None,
                now,
            },
        )
        .await?;
    }
    Ok(enqueued)
}

/// A webhook deliveries can go to: not removed, its endpoint not disabled.
#[derive(Debug)]
pub(super) struct LiveWebhook {
    id: String,
    url: String,
    events: Vec<String>,
    person: Option<PersonId>,
    channel: Option<String>,
}

/// The live webhooks, held in memory (see [`super::cache::Slot`]): every posting transaction
/// consults them, and they change only through the admin calls below and when the outbox
/// disables an endpoint. Each such write forgets them inside its own job, so the jobs the writer
/// runs after it (in the same batch or a later one) read them again, and once more after its
/// commit; another replica's change is bounded by the cache's TTL (a stale entry can only add a
/// delivery that the worker drops as gone, or miss a webhook created less than a TTL ago there).
pub(super) type WebhookCache = super::cache::Slot<Arc<[LiveWebhook]>>;

/// The live webhooks, from memory or read in the writer's transaction (which sees the batch's
/// own earlier changes; a failed commit is followed by the changing call's own forget).
async fn live_webhooks(tx: &mut Conn, cache: &WebhookCache) -> Result<Arc<[LiveWebhook]>> {
    if let Some(live) = cache.get() {
        return Ok(live);
    }
    let since = cache.epoch();
    let rows = query(
        "SELECT w.id, w.url, w.events, w.person, w.channel FROM webhooks w \
         LEFT JOIN outbox_endpoints e ON e.endpoint = 'webhook:' || w.id \
         WHERE w.removed_at IS NULL AND e.disabled_at IS NULL ORDER BY w.id",
    )
    .fetch_all(&mut *tx)
    .await?;
    let live: Arc<[LiveWebhook]> = rows
        .iter()
        .map(|row| {
            Ok(LiveWebhook {
                id: row.try_get("id")?,
                url: row.try_get("url")?,
                events: serde_json::from_str(&row.try_get::<String, _>("events")?)
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                person: row
                    .try_get::<Option<String>, _>("person")?
                    .map(PersonId::parse)
                    .transpose()?,
                channel: row.try_get("channel")?,
            })
        })
        .collect::<Result<Vec<_>>>()?
        .into();
    cache.put(since, live.clone());
    Ok(live)
}

/// One delivery per live webhook subscribed to `event_type` whose filters match `audience`,
/// all with the same event id and a Standard Webhooks body `{type, timestamp, data}` (built only
/// when some webhook wants it).
pub(super) async fn webhook_event(
    tx: &mut Conn,
    cache: &WebhookCache,
    event_type: &str,
    audience: Audience<'_>,
    data: impl FnOnce() -> Value,
    now: Timestamp,
) -> Result<bool> {
    let live = live_webhooks(tx, cache).await?;
    let hooks: Vec<&LiveWebhook> = live
        .iter()
        .filter(|w| w.events.iter().any(|e| e == event_type))
        .filter(|w| {
            w.channel
                .as_deref()
                .is_none_or(|c| audience.channel == Some(c))
        })
        .filter(|w| {
            w.person
                .as_ref()
                .is_none_or(|p| audience.persons.contains(&p))
        })
        .collect();
    if hooks.is_empty() {
        return Ok(false);
    }
    let event_id = format!("msg_{}", uuid::Uuid::now_v7().simple());
    let timestamp = chrono::DateTime::from_timestamp_millis(now.0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let body = json!({"type": event_type, "timestamp": timestamp, "data": data()}).to_string();
    for w in hooks {
        let endpoint = webhook_endpoint(&w.id);
        let order_key = match audience.thread {
            Some(t) => format!("{endpoint}:{t}"),
            None => endpoint.clone(),
        };
        insert(
            tx,
            NewDelivery {
                endpoint: &endpoint,
                order_key: &order_key,
                url: &w.url,
                event_type,
                event_id: &event_id,
                thread: audience.thread,
                event_seq: None,
                payload: Some(&body),
                now,
            },
        )
        .await?;
    }
    Ok(true)
}

/// Hook of the task event log: the event's push deliveries and `task.updated` webhooks. Says
/// whether it enqueued any (these hooks all do).
pub(super) async fn on_task_event(
    tx: &mut Conn,
    cache: &WebhookCache,
    e: &LoggedEvent<'_>,
) -> Result<bool> {
    // A task created in this transaction has no push config: configs are stored by later
    // writes, which replay the events logged before them (`replay_push`).
    let pushed = !e.new_task && push_event(tx, e.thread, e.seq, None, e.now).await?;
    let data = || {
        json!({
            "task_id": e.thread,
            "seq": e.seq,
            "state": e.state.as_str(),
            "cause": e.cause,
            "message_id": e.message,
            "channel": e.channel,
            "party": e.party,
        })
    };
    let audience = Audience {
        channel: Some(e.channel),
        persons: vec![e.party],
        thread: Some(e.thread),
    };
    Ok(webhook_event(tx, cache, "task.updated", audience, data, e.now).await? || pushed)
}

/// Hook of the posting transaction: `message.created` webhooks.
pub(super) async fn on_message(
    tx: &mut Conn,
    cache: &WebhookCache,
    m: &NewMessage,
    position: i64,
) -> Result<bool> {
    let data = || {
        json!({
            "id": m.id,
            "thread_id": m.thread,
            "channel": m.channel,
            "position": position,
            "kind": m.kind.as_str(),
            "author": m.author,
            "agent": m.agent,
            "recipients": m.recipients,
            "subject": m.subject,
            "body": m.body,
            "impact": m.impact.map(crate::domain::Impact::as_str),
            "outcome": m.outcome.map(crate::domain::Outcome::as_str),
            "refers_to": m.refers_to,
        })
    };
    let mut persons: Vec<&PersonId> = m.recipients.iter().collect();
    persons.push(&m.author);
    let audience = Audience {
        channel: Some(m.channel.as_str()),
        persons,
        thread: Some(&m.thread),
    };
    webhook_event(tx, cache, "message.created", audience, data, m.created_at).await
}

/// Hook of a new approval: `approval.pending` webhooks.
pub(super) async fn on_approval_pending(
    tx: &mut Conn,
    cache: &WebhookCache,
    a: &NewApproval,
    m: &NewMessage,
) -> Result<bool> {
    let data = || {
        json!({
            "approval_id": a.id,
            "thread_id": m.thread,
            "message_id": m.id,
            "channel": m.channel,
            "impact": a.impact.as_str(),
            "fingerprint": a.fingerprint,
            "requested_by": m.author,
            "approvers": a.approvers,
            "expires_at": a.expires_at.0,
            "body": m.body,
        })
    };
    let mut persons: Vec<&PersonId> = a.approvers.iter().collect();
    persons.push(&m.author);
    let audience = Audience {
        channel: Some(m.channel.as_str()),
        persons,
        thread: Some(&m.thread),
    };
    webhook_event(tx, cache, "approval.pending", audience, data, m.created_at).await
}

/// Hook of a settled approval: `approval.decided` webhooks (an expiry is a decision too).
pub(super) async fn on_approval_decided(
    tx: &mut Conn,
    cache: &WebhookCache,
    a: &ApprovalRecord,
    now: Timestamp,
) -> Result<bool> {
    let data = || {
        json!({
            "approval_id": a.id,
            "thread_id": a.thread,
            "message_id": a.message,
            "channel": a.channel,
            "state": a.state.as_str(),
            "decided_by": a.decided_by,
            "via": a.decided_via.map(|v| v.as_str()),
            "reason": a.reason,
        })
    };
    let mut persons: Vec<&PersonId> = a.approvers.iter().collect();
    persons.push(&a.requested_by);
    let audience = Audience {
        channel: Some(a.channel.as_str()),
        persons,
        thread: Some(&a.thread),
    };
    webhook_event(tx, cache, "approval.decided", audience, data, now).await
}

impl Store {
    /// Installs what to call after a write enqueued deliveries (the app publishes the outbox
    /// topic on the bus, which reaches every replica). Later calls replace it.
    pub fn on_outbox_enqueue(&self, wake: impl Fn() + Send + Sync + 'static) {
        *self.outbox_wake.write().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(wake));
    }

    /// Wakes the outbox workers (after a commit that may have enqueued deliveries).
    pub(super) fn outbox_enqueued(&self) {
        if let Some(wake) = &*self.outbox_wake.read().unwrap_or_else(|e| e.into_inner()) {
            wake();
        }
    }

    /// Claims up to `limit` due deliveries for `worker` until `lease_until`: each the oldest
    /// pending one of its order key, not leased by a live worker. The attempt counter is taken
    /// here, so two workers can never make the same attempt.
    pub async fn claim_deliveries(
        &self,
        worker: String,
        now: Timestamp,
        lease_until: Timestamp,
        limit: i64,
    ) -> Result<Vec<DeliveryRecord>> {
        let skip_locked = match self.backend {
            super::Backend::Postgres => " FOR UPDATE SKIP LOCKED",
            super::Backend::Sqlite => "",
        };
        // The candidates are picked once (a CTE), so the LIMIT holds however the planner joins.
        let sql = format!(
            "WITH picked AS (SELECT d.id FROM deliveries d WHERE d.state = 'pending' AND d.next_attempt_at <= $3 \
             AND (d.lease_until IS NULL OR d.lease_until <= $3) \
             AND NOT EXISTS (SELECT 1 FROM deliveries p WHERE p.order_key = d.order_key AND p.state = 'pending' \
             AND p.id < d.id) ORDER BY d.next_attempt_at, d.id LIMIT $4{skip_locked}) \
             UPDATE deliveries SET lease_owner = $1, lease_until = $2, attempts = attempts + 1 \
             WHERE id IN (SELECT id FROM picked) AND state = 'pending' AND (lease_until IS NULL OR lease_until <= $3) \
             RETURNING {DELIVERY_COLUMNS}"
        );
        let mut claimed = self
            .write(move |tx| {
                Box::pin(async move {
                    let rows = query(sql)
                        .bind(worker)
                        .bind(lease_until.0)
                        .bind(now.0)
                        .bind(limit)
                        .fetch_all(&mut *tx)
                        .await?;
                    rows.iter().map(delivery).collect::<Result<Vec<_>>>()
                })
            })
            .await?;
        claimed.sort_by_key(|d| d.id);
        Ok(claimed)
    }

    /// Whether a delivery is due at `now` (a cheap read before claiming), and else when the
    /// next one is.
    pub async fn next_delivery_due(&self) -> Result<Option<Timestamp>> {
        let row = query(
            "SELECT MIN(CASE WHEN lease_until IS NOT NULL AND lease_until > next_attempt_at \
             THEN lease_until ELSE next_attempt_at END) AS due FROM deliveries WHERE state = 'pending'",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get::<Option<i64>, _>("due")?.map(Timestamp))
    }

    /// Records an attempt and applies its verdict, if `worker` still holds the lease. A dead
    /// delivery lengthens its endpoint's dead streak (a delivered one resets it); at
    /// `disable_after` the endpoint is disabled, its pending deliveries die with it, and
    /// `delivery.dead` / `endpoint.disabled` webhooks are enqueued.
    pub async fn finish_attempt(&self, f: FinishedAttempt) -> Result<Finished> {
        let lock = self.for_update();
        let cache = self.webhooks.clone();
        let done = self
            .write(move |tx| Box::pin(async move { finish_in(tx, f, lock, &cache).await }))
            .await?;
        if done.endpoint_disabled {
            self.webhooks.forget();
        }
        if done.applied {
            self.outbox_enqueued();
        }
        Ok(done)
    }

    pub async fn deliveries(&self, filter: &DeliveryFilter) -> Result<Vec<DeliveryRecord>> {
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE ($1 IS NULL OR state = $1) \
             AND ($2 = 0 OR (state = 'pending' AND last_error IS NOT NULL)) AND ($3 IS NULL OR endpoint = $3) \
             AND ($4 IS NULL OR id < $4) ORDER BY id DESC LIMIT $5"
        );
        let rows = query(sql)
            .bind(filter.state.map(DeliveryState::as_str))
            .bind(i64::from(filter.failed))
            .bind(filter.endpoint.clone())
            .bind(filter.before)
            .bind(filter.limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(delivery).collect()
    }

    /// A delivery and its attempts, oldest first.
    pub async fn delivery(&self, id: i64) -> Result<Option<(DeliveryRecord, Vec<AttemptRecord>)>> {
        let sql = format!("SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE id = $1");
        let Some(row) = query(sql).bind(id).fetch_optional(&self.pool).await? else {
            return Ok(None);
        };
        let attempts = query(
            "SELECT attempt, worker, started_at, latency_ms, status, error_class, error FROM delivery_attempts \
             WHERE delivery_id = $1 ORDER BY attempt",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        Ok(Some((
            delivery(&row)?,
            attempts.iter().map(attempt).collect::<Result<_>>()?,
        )))
    }

    /// Sends a dead delivery again from now (a fresh schedule) and re-enables its endpoint.
    /// `None` when there is no such delivery; `Some(false)` when it is not dead.
    pub async fn retry_delivery(&self, id: i64, now: Timestamp) -> Result<Option<bool>> {
        let cache = self.webhooks.clone();
        let done = self
            .write(move |tx| {
                Box::pin(async move {
                    let Some(row) = query("SELECT state, endpoint FROM deliveries WHERE id = $1")
                        .bind(id)
                        .fetch_optional(&mut *tx)
                        .await?
                    else {
                        return Ok(None);
                    };
                    if row.try_get::<String, _>("state")? != "dead" {
                        return Ok(Some(false));
                    }
                    let endpoint: String = row.try_get("endpoint")?;
                    query(
                        "UPDATE deliveries SET state = 'pending', next_attempt_at = $1, lease_owner = NULL, \
                         lease_until = NULL, finished_at = NULL WHERE id = $2",
                    )
                    .bind(now.0)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                    query(
                        "UPDATE outbox_endpoints SET disabled_at = NULL, dead_streak = 0 WHERE endpoint = $1",
                    )
                    .bind(endpoint)
                    .execute(&mut *tx)
                    .await?;
                    // Its endpoint may be a webhook enabled again.
                    cache.forget();
                    Ok(Some(true))
                })
            })
            .await;
        self.webhooks.forget();
        let done = done?;
        if done == Some(true) {
            self.outbox_enqueued();
        }
        Ok(done)
    }

    /// The task event a push delivery is about.
    pub async fn task_event(&self, thread: &ThreadId, seq: i64) -> Result<Option<TaskEventRecord>> {
        Ok(self
            .task_events(thread, seq - 1)
            .await?
            .into_iter()
            .find(|e| e.seq == seq))
    }

    /// One push config of a task (with its credentials: for sending).
    pub async fn push_config(
        &self,
        thread: &ThreadId,
        id: &str,
    ) -> Result<Option<PushConfigRecord>> {
        Ok(self
            .push_configs(thread)
            .await?
            .into_iter()
            .find(|c| c.id == id))
    }

    pub async fn insert_webhook(&self, w: WebhookRecord) -> Result<()> {
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
                cache.forget();
                Ok(())
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
    pub async fn remove_webhook(&self, id: String, now: Timestamp) -> Result<bool> {
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
                     lease_owner = NULL, lease_until = NULL WHERE endpoint = $2 AND state = 'pending'",
                )
                .bind(now.0)
                .bind(webhook_endpoint(&id))
                .execute(&mut *tx)
                .await?;
                cache.forget();
                Ok(true)
            })
        })
        .await;
        self.webhooks.forget();
        done
    }

    /// Replaces a webhook's sealed secret; false when there is no such webhook.
    pub async fn set_webhook_secret(&self, id: String, sealed: String) -> Result<bool> {
        self.write(move |tx| {
            Box::pin(async move {
                let done = query(
                    "UPDATE webhooks SET sealed_secret = $1 WHERE id = $2 AND removed_at IS NULL",
                )
                .bind(sealed)
                .bind(id)
                .execute(&mut *tx)
                .await?;
                Ok(done.rows_affected() > 0)
            })
        })
        .await
    }

    /// Enqueues a `webhook.test` event to one webhook (enabled or not: the test is how an admin
    /// checks a repaired receiver).
    pub async fn enqueue_webhook_test(
        &self,
        id: String,
        data: Value,
        now: Timestamp,
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
                        .bind(event_id)
                        .fetch_one(&mut *tx)
                        .await?;
                    Ok(Some(row.try_get::<i64, _>("id")?))
                })
            })
            .await?;
        if id_out.is_some() {
            self.outbox_enqueued();
        }
        Ok(id_out)
    }
}

/// Push deliveries of every event a task has logged so far, for a config just created (so that
/// a config given inline with SendMessage sees the task from its first event).
pub(super) async fn replay_push(
    tx: &mut Conn,
    thread: &ThreadId,
    config: &str,
    now: Timestamp,
) -> Result<()> {
    let seqs = query("SELECT seq FROM task_events WHERE thread_id = $1 ORDER BY seq")
        .bind(thread.as_str().to_owned())
        .fetch_all(&mut *tx)
        .await?;
    for row in seqs {
        push_event(tx, thread, row.try_get("seq")?, Some(config), now).await?;
    }
    Ok(())
}

async fn finish_in(
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
         RETURNING endpoint, event_type, event_id, url",
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
        endpoint_disabled: false,
    };
    match f.verdict {
        AttemptVerdict::Delivered => {
            query("UPDATE outbox_endpoints SET dead_streak = 0 WHERE endpoint = $1")
                .bind(endpoint)
                .execute(&mut *tx)
                .await?;
        }
        AttemptVerdict::RetryAt(_) => {}
        AttemptVerdict::Dead => {
            if let Some(close) = f.on_dead.clone() {
                super::remote_tasks::close_unless_closed(tx, close, lock, cache).await?;
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
                    "UPDATE outbox_endpoints SET disabled_at = $1 WHERE endpoint = $2 AND disabled_at IS NULL",
                )
                .bind(f.now.0)
                .bind(endpoint.clone())
                .execute(&mut *tx)
                .await?;
                query(
                    "UPDATE deliveries SET state = 'dead', last_error = 'endpoint disabled', finished_at = $1, \
                     lease_owner = NULL, lease_until = NULL WHERE endpoint = $2 AND state = 'pending'",
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
