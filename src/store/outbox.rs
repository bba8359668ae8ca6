//! The durable outbox's queue: deliveries, written inside the transaction of their cause (the
//! `on_*` hooks of `tx::enqueue`, called by the posting, claiming and approval transactions),
//! claimed by lease with one `UPDATE … RETURNING`, finished with the attempt's record
//! (`tx::finish`), listed, counted per endpoint, and sent again (one, or every dead one of an
//! endpoint); and the wake-up of the workers after a commit that enqueued some. The admin webhooks
//! they go to are `webhooks.rs`'s. Retry rules (when, how often, what is permanent) are the
//! service's; the store only applies the outcome it is given.
//! An operation file (`impl Store` only): no building block (`tx/`) and no other operation file may
//! depend on it.

use super::Store;
use super::db::query;
use super::error::Result;
use super::model::input::{AdminChange, DeliveryFilter, FinishedAttempt};
use super::model::records::outbox::{
    AttemptRecord, DELIVERY_COLUMNS, DeliveryRecord, DeliveryState, EndpointRecord, Finished,
    attempt, delivery, endpoint,
};
use super::model::records::threads::{PushConfigRecord, TaskEventRecord};
use super::tx::audit::append_change;
use super::tx::finish::{enable_in, finish_in};
use crate::domain::{ThreadId, Timestamp};

impl Store {
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

    /// When the next delivery can be claimed (a cheap read before sleeping): the earliest
    /// among the heads of their order key's queue, each at its retry time or, while leased, at
    /// its lease's end. Deliveries queued behind a head cannot go before it, so they never count:
    /// counting them (they are due at once) would have the worker sleep the safety sweep.
    pub async fn next_delivery_due(&self) -> Result<Option<Timestamp>> {
        let row = query(
            "SELECT MIN(CASE WHEN d.lease_until IS NOT NULL AND d.lease_until > d.next_attempt_at \
             THEN d.lease_until ELSE d.next_attempt_at END) AS due FROM deliveries d WHERE d.state = 'pending' \
             AND NOT EXISTS (SELECT 1 FROM deliveries p WHERE p.order_key = d.order_key AND p.state = 'pending' \
             AND p.id < d.id)",
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
        Ok(done)
    }

    pub async fn deliveries(&self, filter: &DeliveryFilter) -> Result<Vec<DeliveryRecord>> {
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM deliveries /* scan: newest first, stopping at a page, \
             retention purges finished deliveries */ WHERE ($1 IS NULL OR state = $1) \
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
    pub async fn retry_delivery(
        &self,
        id: i64,
        now: Timestamp,
        audit: AdminChange,
    ) -> Result<Option<bool>> {
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
                    enable_in(tx, endpoint).await?;
                    append_change(tx, &audit).await?;
                    // Its endpoint may be a webhook enabled again.
                    cache.forget();
                    Ok(Some(true))
                })
            })
            .await;
        self.webhooks.forget();
        done
    }

    /// Sends every dead delivery of `endpoint` again from now (all due at once, so claimed in id
    /// order), and re-enables the endpoint when there was one. Answers how many.
    pub async fn retry_endpoint(
        &self,
        endpoint: String,
        now: Timestamp,
        mut audit: AdminChange,
    ) -> Result<u64> {
        let cache = self.webhooks.clone();
        let done = self
            .write(move |tx| {
                Box::pin(async move {
                    let retried = query(
                        "UPDATE deliveries SET state = 'pending', next_attempt_at = $1, lease_owner = NULL, \
                         lease_until = NULL, finished_at = NULL /* scan: an endpoint's deliveries, kept by retention */ WHERE endpoint = $2 AND state = 'dead'",
                    )
                    .bind(now.0)
                    .bind(endpoint.clone())
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                    if retried > 0 {
                        enable_in(tx, endpoint).await?;
                        audit.after = Some(serde_json::json!({ "retried": retried }));
                        append_change(tx, &audit).await?;
                        cache.forget();
                    }
                    Ok(retried)
                })
            })
            .await;
        self.webhooks.forget();
        done
    }

    /// Each endpoint's deliveries counted by state, with why it is disabled and, for a
    /// webhook's, the webhook: the 500 endpoints with the most recent deliveries, most recent
    /// first (one grouped read over the deliveries).
    pub async fn endpoints(&self) -> Result<Vec<EndpointRecord>> {
        let rows = query(
            "SELECT d.endpoint, \
             SUM(CASE WHEN d.state = 'pending' THEN 1 ELSE 0 END) AS pending, \
             SUM(CASE WHEN d.state = 'pending' AND d.last_error IS NOT NULL THEN 1 ELSE 0 END) AS failed, \
             SUM(CASE WHEN d.state = 'dead' THEN 1 ELSE 0 END) AS dead, \
             SUM(CASE WHEN d.state = 'delivered' THEN 1 ELSE 0 END) AS delivered, \
             e.disabled_at, e.disabled_reason, w.id AS webhook_id, w.url AS webhook_url, \
             w.removed_at AS webhook_removed_at \
             FROM deliveries d /* scan: counts every delivery, which retention keeps to its \
             window */ LEFT JOIN outbox_endpoints e ON e.endpoint = d.endpoint \
             LEFT JOIN webhooks w ON d.endpoint = 'webhook:' || w.id \
             GROUP BY d.endpoint, e.disabled_at, e.disabled_reason, w.id, w.url, w.removed_at \
             ORDER BY MAX(d.id) DESC LIMIT 500",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(endpoint).collect()
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
}
