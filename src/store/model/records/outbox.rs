//! The outbox as the store answers it: deliveries and their attempts, what finishing one changed,
//! the admin webhooks, each endpoint's counts, and the endpoint names and event type deliveries
//! carry; with the column lists and parsers that turn their rows into them. It must not depend on
//! any file of the store but `db` (rows) and `error`.

use crate::domain::{PersonId, ThreadId, Timestamp};
use crate::store::db::Row;
use crate::store::error::{Result, StoreError};

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryState {
    /// Waiting for its first attempt, in flight, or waiting to be retried.
    Pending,
    Delivered,
    /// Failed for good (permanent failure, last attempt, or its endpoint was disabled).
    Dead,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Dead => "dead",
        }
    }

    fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "pending" => DeliveryState::Pending,
            "delivered" => DeliveryState::Delivered,
            "dead" => DeliveryState::Dead,
            other => return Err(StoreError::Corrupt(format!("delivery state {other:?}"))),
        })
    }
}

/// One outbound delivery.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeliveryRecord {
    pub id: i64,
    /// `push:<task>/<config>` or `webhook:<id>`.
    pub endpoint: String,
    pub url: String,
    /// `task.event` for an A2A push, else the webhook event type.
    pub event_type: String,
    /// The same on every attempt; receivers deduplicate on it.
    pub event_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<ThreadId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_seq: Option<i64>,
    /// The webhook body; none for a push (rendered from the task event).
    #[serde(skip)]
    pub payload: Option<String>,
    pub state: DeliveryState,
    /// Attempts started so far (the one in flight included).
    pub attempts: i64,
    pub next_attempt_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_status: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub created_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    /// The trace context of the operation that queued it (kept while tracing is on); its
    /// attempts continue that trace.
    #[serde(skip)]
    pub trace: Option<crate::telemetry::TraceContext>,
}

/// One recorded attempt of a delivery.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AttemptRecord {
    pub attempt: i64,
    pub worker: String,
    pub started_at: Timestamp,
    pub latency_ms: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<i64>,
    pub error_class: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What finishing an attempt changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Finished {
    /// False when the lease was lost (another worker took the delivery over): nothing changed.
    pub applied: bool,
    /// The delivery's endpoint was disabled by this attempt.
    pub endpoint_disabled: bool,
    /// Something became claimable with this commit: the next pending delivery of the same order
    /// key (it waited behind this one), or webhooks a death enqueued. A retry keeps its delivery
    /// the head of its queue, so it frees nothing; its worker reads the due time again.
    pub outbox_due: bool,
    /// The delivery died and its `on_dead` close closed its thread (it was not closed already).
    pub closed: bool,
}

/// An admin webhook.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WebhookRecord {
    pub id: String,
    pub url: String,
    pub events: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub person: Option<PersonId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// Never shown.
    #[serde(skip)]
    pub sealed_secret: String,
    /// The secret a rotation replaced, co-signing until `previous_until`. Never shown.
    #[serde(skip)]
    pub previous_sealed_secret: Option<String>,
    /// Until when the replaced secret co-signs (none: no rotation overlap).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_until: Option<Timestamp>,
    pub created_at: Timestamp,
    /// Set when repeated dead deliveries, or an admin, disabled it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled_at: Option<Timestamp>,
    /// Why it is disabled: `5 consecutive dead deliveries` or `disabled by <person>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
}

/// One endpoint's deliveries, counted (the admin overview).
#[derive(Debug, Clone, serde::Serialize)]
pub struct EndpointRecord {
    /// `push:<task>/<config>`, `webhook:<id>` or a remote agent's.
    pub endpoint: String,
    /// Waiting, in flight or being retried (the failed ones included).
    pub pending: i64,
    /// Pending after at least one failed attempt (what `deliveries list --failed` lists).
    pub failed: i64,
    pub dead: i64,
    pub delivered: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    /// The webhook a `webhook:` endpoint names (removed ones included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
    /// When that webhook was removed: nothing is sent to it any more, and its deliveries are
    /// not retried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_removed_at: Option<Timestamp>,
}

/// The event type of an A2A push delivery.
pub const PUSH_EVENT: &str = "task.event";

/// The endpoint name of a task's push config.
pub fn push_endpoint(thread: &ThreadId, config: &str) -> String {
    format!("push:{thread}/{config}")
}

/// The endpoint name of a webhook.
pub fn webhook_endpoint(id: &str) -> String {
    format!("webhook:{id}")
}

pub(in crate::store) const DELIVERY_COLUMNS: &str = "id, endpoint, url, event_type, event_id, thread_id, event_seq, payload, state, \
     attempts, next_attempt_at, last_status, last_error, created_at, finished_at, traceparent, tracestate";

pub(in crate::store) fn delivery(row: &Row) -> Result<DeliveryRecord> {
    Ok(DeliveryRecord {
        id: row.try_get("id")?,
        endpoint: row.try_get("endpoint")?,
        url: row.try_get("url")?,
        event_type: row.try_get("event_type")?,
        event_id: row.try_get("event_id")?,
        thread: row
            .try_get::<Option<String>, _>("thread_id")?
            .map(ThreadId::parse)
            .transpose()?,
        event_seq: row.try_get("event_seq")?,
        payload: row.try_get("payload")?,
        state: DeliveryState::parse(&row.try_get::<String, _>("state")?)?,
        attempts: row.try_get("attempts")?,
        next_attempt_at: Timestamp(row.try_get("next_attempt_at")?),
        last_status: row.try_get("last_status")?,
        last_error: row.try_get("last_error")?,
        created_at: Timestamp(row.try_get("created_at")?),
        finished_at: row.try_get::<Option<i64>, _>("finished_at")?.map(Timestamp),
        trace: row
            .try_get::<Option<String>, _>("traceparent")?
            .map(|traceparent| crate::telemetry::TraceContext {
                traceparent,
                tracestate: row.try_get("tracestate").ok().flatten(),
            }),
    })
}

pub(in crate::store) fn attempt(row: &Row) -> Result<AttemptRecord> {
    Ok(AttemptRecord {
        attempt: row.try_get("attempt")?,
        worker: row.try_get("worker")?,
        started_at: Timestamp(row.try_get("started_at")?),
        latency_ms: row.try_get("latency_ms")?,
        status: row.try_get("status")?,
        error_class: row.try_get("error_class")?,
        error: row.try_get("error")?,
    })
}

pub(in crate::store) const WEBHOOK_COLUMNS: &str = "w.id, w.url, w.events, w.person, w.channel, w.sealed_secret, \
     w.previous_sealed_secret, w.previous_until, w.created_at, e.disabled_at, e.disabled_reason";
pub(in crate::store) const WEBHOOK_FROM: &str =
    "webhooks w LEFT JOIN outbox_endpoints e ON e.endpoint = 'webhook:' || w.id";

pub(in crate::store) fn webhook(row: &Row) -> Result<WebhookRecord> {
    Ok(WebhookRecord {
        id: row.try_get("id")?,
        url: row.try_get("url")?,
        events: serde_json::from_str(&row.try_get::<String, _>("events")?)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        person: row
            .try_get::<Option<String>, _>("person")?
            .map(PersonId::parse)
            .transpose()?,
        channel: row.try_get("channel")?,
        sealed_secret: row.try_get("sealed_secret")?,
        previous_sealed_secret: row.try_get("previous_sealed_secret")?,
        previous_until: row
            .try_get::<Option<i64>, _>("previous_until")?
            .map(Timestamp),
        created_at: Timestamp(row.try_get("created_at")?),
        disabled_at: row.try_get::<Option<i64>, _>("disabled_at")?.map(Timestamp),
        disabled_reason: row.try_get("disabled_reason")?,
    })
}

pub(in crate::store) fn endpoint(row: &Row) -> Result<EndpointRecord> {
    Ok(EndpointRecord {
        endpoint: row.try_get("endpoint")?,
        pending: row.try_get("pending")?,
        failed: row.try_get("failed")?,
        dead: row.try_get("dead")?,
        delivered: row.try_get("delivered")?,
        disabled_at: row.try_get::<Option<i64>, _>("disabled_at")?.map(Timestamp),
        disabled_reason: row.try_get("disabled_reason")?,
        webhook_id: row.try_get("webhook_id")?,
        webhook_url: row.try_get("webhook_url")?,
        webhook_removed_at: row
            .try_get::<Option<i64>, _>("webhook_removed_at")?
            .map(Timestamp),
    })
}
