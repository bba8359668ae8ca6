//! The outbox's hooks: deliveries written inside the transaction of their cause (the `on_*` hooks,
//! called by the posting, claiming and approval transactions): a task event's pushes, and the
//! webhooks subscribed to an event, read from the live webhooks held in memory
//! ([`WebhookCache`]). Claiming, finishing and listing deliveries is the outbox's (`outbox.rs`,
//! `tx/finish.rs`). It calls no other block and must not depend on any operation (`impl Store`).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::domain::{PersonId, ThreadId, Timestamp};
use crate::store::cache::Slot;
use crate::store::db::{Conn, query};
use crate::store::error::{Result, StoreError};
use crate::store::model::input::{Audience, LoggedEvent, NewApproval, NewDelivery, NewMessage};
use crate::store::model::records::approvals::ApprovalRecord;
use crate::store::model::records::outbox::{PUSH_EVENT, push_endpoint, webhook_endpoint};
use crate::store::model::records::tool_checks::ConfirmationRecord;

/// Queues `d`, with the trace context of the write that queues it (its attempts continue it).
pub(in crate::store) async fn insert(tx: &mut Conn, d: NewDelivery<'_>) -> Result<()> {
    let trace = crate::store::trace::current();
    query(
        "INSERT INTO deliveries (endpoint, order_key, url, event_type, event_id, thread_id, event_seq, payload, \
         state, attempts, next_attempt_at, created_at, traceparent, tracestate) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', 0, $9, $9, $10, $11)",
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
    .bind(trace.as_ref().map(|t| t.traceparent.clone()))
    .bind(trace.and_then(|t| t.tracestate))
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
pub(in crate::store) struct LiveWebhook {
    id: String,
    url: String,
    events: Vec<String>,
    person: Option<PersonId>,
    channel: Option<String>,
}

/// The live webhooks, held in memory (see [`Slot`]): every posting transaction consults them, and
/// they change only through the admin calls (`webhooks.rs`) and when the outbox disables an
/// endpoint. Each such write forgets them inside its own job, so the jobs the writer
/// runs after it (in the same batch or a later one) read them again, and once more after its
/// commit; another replica's change is bounded by the cache's TTL (a stale entry can only add a
/// delivery that the worker drops as gone, or miss a webhook created less than a TTL ago there).
pub(in crate::store) type WebhookCache = Slot<Arc<[LiveWebhook]>>;

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
    Ok(task_webhooks(tx, cache, e).await? || pushed)
}

/// The `task.updated` webhooks of one task event (its pushes are queued apart: [`on_task_event`],
/// or PostgreSQL's claim function, `tx::claim_call`). Says whether it enqueued any.
pub(super) async fn task_webhooks(
    tx: &mut Conn,
    cache: &WebhookCache,
    e: &LoggedEvent<'_>,
) -> Result<bool> {
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
    webhook_event(tx, cache, "task.updated", audience, data, e.now).await
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
pub(in crate::store) async fn on_approval_decided(
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

/// Hook of a new tool confirmation (SPEC §5b): `approval.pending` webhooks of the person whose
/// agent asked (her only: a channel-scoped webhook is not told). Its `approval_id` is the
/// confirmation's `tcf_…` id (every approval path decides it), `subject` says it is a tool call,
/// and the summary is the masked one she reads in the console.
pub(in crate::store) async fn on_confirmation_pending(
    tx: &mut Conn,
    cache: &WebhookCache,
    c: &ConfirmationRecord,
) -> Result<bool> {
    let data = || {
        json!({
            "approval_id": c.id,
            "subject": "tool_call",
            "thread_id": c.thread,
            "message_id": null,
            "channel": null,
            "impact": c.impact.as_str(),
            "fingerprint": c.fingerprint,
            "requested_by": c.person,
            "connection": c.connection,
            "approvers": [c.person],
            "expires_at": c.expires_at.0,
            "tool": c.tool,
            "summary": c.summary,
            "body": c.summary.line(&c.tool),
        })
    };
    webhook_event(
        tx,
        cache,
        "approval.pending",
        confirmation_audience(c),
        data,
        c.created_at,
    )
    .await
}

/// Hook of a settled tool confirmation (decided or expired): `approval.decided` webhooks of her.
pub(in crate::store) async fn on_confirmation_decided(
    tx: &mut Conn,
    cache: &WebhookCache,
    c: &ConfirmationRecord,
    now: Timestamp,
) -> Result<bool> {
    let data = || {
        json!({
            "approval_id": c.id,
            "subject": "tool_call",
            "thread_id": c.thread,
            "message_id": null,
            "channel": null,
            "state": c.state.as_str(),
            "decided_by": c.decided_by,
            "via": c.decided_via,
            "reason": c.reason,
        })
    };
    webhook_event(
        tx,
        cache,
        "approval.decided",
        confirmation_audience(c),
        data,
        now,
    )
    .await
}

/// Who hears of a tool confirmation: its person (never a channel's webhook).
fn confirmation_audience(c: &ConfirmationRecord) -> Audience<'_> {
    Audience {
        channel: None,
        persons: vec![&c.person],
        thread: c.thread.as_ref(),
    }
}

/// Push deliveries of every event a task has logged so far, for a config just created (so that
/// a config given inline with SendMessage sees the task from its first event).
pub(in crate::store) async fn replay_push(
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
