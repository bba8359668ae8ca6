//! Admin webhooks (SPEC §9): register one for some events (optionally one channel's or one
//! person's), send it a test, rotate its `whsec_` secret with an overlap during which both
//! secrets sign, disable and enable it, remove it. Every operation needs scope `admin` and appends
//! its audit entry in the change's transaction; the secret is shown once and never logged.

use super::delivery::random_bytes;
use super::{Caller, Result, Service, ServiceError};
use crate::domain::{ChannelName, PersonId, Scope, Timestamp};
use crate::store::WebhookRecord;

/// The events an admin webhook can subscribe to.
pub const WEBHOOK_EVENTS: [&str; 6] = [
    "message.created",
    "approval.pending",
    "approval.decided",
    "task.updated",
    "delivery.dead",
    "endpoint.disabled",
];

/// How long a rotated webhook secret keeps co-signing by default (24 h), and at most (7 days).
pub const WEBHOOK_ROTATION_OVERLAP_S: i64 = 86_400;
pub const WEBHOOK_ROTATION_MAX_OVERLAP_S: i64 = 604_800;

/// An admin webhook as asked for.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct WebhookSpec {
    pub url: String,
    pub events: Vec<String>,
    pub person: Option<PersonId>,
    pub channel: Option<ChannelName>,
}

/// A new `whsec_` secret: 32 random bytes, base64.
fn new_secret() -> Result<String> {
    use base64::Engine as _;
    Ok(format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(random_bytes()?)
    ))
}

/// The events asked for, each known, once each, in the order asked; or why not.
fn webhook_events(asked: &[String]) -> Result<Vec<String>> {
    if asked.is_empty() {
        return Err(ServiceError::invalid(format!(
            "name at least one event: {}",
            WEBHOOK_EVENTS.join(", ")
        )));
    }
    let mut events = Vec::new();
    for e in asked {
        if !WEBHOOK_EVENTS.contains(&e.as_str()) {
            return Err(ServiceError::invalid(format!(
                "unknown event {e:?}; events are {}",
                WEBHOOK_EVENTS.join(", ")
            )));
        }
        if !events.contains(e) {
            events.push(e.clone());
        }
    }
    Ok(events)
}

impl Service {
    /// Registers a webhook; returns it and its secret, which is shown this once.
    pub async fn add_webhook(
        &self,
        caller: &Caller,
        spec: WebhookSpec,
    ) -> Result<(WebhookRecord, String)> {
        caller.require(Scope::Admin)?;
        super::input::storable("webhook", &spec)?;
        self.check_outbound_url(&spec.url)?;
        let events = webhook_events(&spec.events)?;
        if let Some(p) = &spec.person
            && self.inner.store.person(p).await?.is_none()
        {
            return Err(ServiceError::not_found("person", p));
        }
        if let Some(c) = &spec.channel
            && self.inner.store.channel(c).await?.is_none()
        {
            return Err(ServiceError::not_found("channel", c));
        }
        let id = format!("wh_{}", uuid::Uuid::now_v7().simple());
        let secret = new_secret()?;
        let record = WebhookRecord {
            sealed_secret: self.seal_secret(&id, &secret)?,
            id,
            url: spec.url,
            events,
            person: spec.person,
            channel: spec.channel.map(|c| c.to_string()),
            previous_sealed_secret: None,
            previous_until: None,
            created_at: self.now(),
            disabled_at: None,
            disabled_reason: None,
        };
        let audit = self.change(
            caller,
            "webhook.added",
            &record.id,
            None,
            super::audit::shown(&record),
        );
        self.inner
            .store
            .insert_webhook(record.clone(), audit)
            .await?;
        Ok((record, secret))
    }

    pub async fn webhooks(&self, caller: &Caller) -> Result<Vec<WebhookRecord>> {
        caller.require(Scope::Admin)?;
        Ok(self.inner.store.webhooks().await?)
    }

    /// The events a webhook is sent from now on; its secret, address and filters stay.
    /// Answers the webhook.
    pub async fn set_webhook_events(
        &self,
        caller: &Caller,
        id: &str,
        events: &[String],
    ) -> Result<WebhookRecord> {
        caller.require(Scope::Admin)?;
        super::input::storable("webhook", &events)?;
        let events = webhook_events(events)?;
        let before = self
            .inner
            .store
            .webhook(id)
            .await?
            .ok_or_else(|| ServiceError::not_found("webhook", id))?;
        let audit = self.change(
            caller,
            "webhook.events_changed",
            id,
            Some(serde_json::json!({ "events": before.events })),
            Some(serde_json::json!({ "events": events })),
        );
        if !self
            .inner
            .store
            .set_webhook_events(id.to_owned(), events.clone(), audit)
            .await?
        {
            return Err(ServiceError::not_found("webhook", id));
        }
        Ok(WebhookRecord { events, ..before })
    }

    pub async fn remove_webhook(&self, caller: &Caller, id: &str) -> Result<()> {
        caller.require(Scope::Admin)?;
        let before = super::audit::shown(&self.inner.store.webhook(id).await?);
        let audit = self.change(caller, "webhook.removed", id, before, None);
        if !self
            .inner
            .store
            .remove_webhook(id.to_owned(), self.now(), audit)
            .await?
        {
            return Err(ServiceError::not_found("webhook", id));
        }
        Ok(())
    }

    /// A new secret for a webhook, shown this once. The secret it replaces keeps co-signing
    /// every request for `overlap_s` seconds (default 24 h, at most 7 days; 0: it stops at once),
    /// so receivers can roll. Rotating again during an overlap keeps only the secret just
    /// replaced (the older one stops signing). Answers the secret and the overlap's end.
    pub async fn rotate_webhook_secret(
        &self,
        caller: &Caller,
        id: &str,
        overlap_s: Option<i64>,
    ) -> Result<(String, Option<Timestamp>)> {
        caller.require(Scope::Admin)?;
        let overlap = overlap_s.unwrap_or(WEBHOOK_ROTATION_OVERLAP_S);
        if !(0..=WEBHOOK_ROTATION_MAX_OVERLAP_S).contains(&overlap) {
            return Err(ServiceError::invalid(format!(
                "overlap_s must be between 0 and {WEBHOOK_ROTATION_MAX_OVERLAP_S} seconds (7 days), not {overlap}"
            )));
        }
        let previous_until = (overlap > 0).then(|| self.now().plus_secs(overlap.unsigned_abs()));
        let secret = new_secret()?;
        let sealed = self.seal_secret(id, &secret)?;
        // What changed, never the secrets: which secret signs, and until when the old one does.
        let audit = self.change(
            caller,
            "webhook.secret_rotated",
            id,
            None,
            Some(serde_json::json!({ "previous_until": previous_until })),
        );
        if !self
            .inner
            .store
            .rotate_webhook_secret(id.to_owned(), sealed, previous_until, audit)
            .await?
        {
            return Err(ServiceError::not_found("webhook", id));
        }
        Ok((secret, previous_until))
    }

    /// Disables a webhook (no new deliveries; its pending ones die, retryable by hand) or
    /// enables it again (its dead streak starts over; dead deliveries stay dead). Refused when
    /// it already is so. Answers the webhook.
    pub async fn set_webhook_enabled(
        &self,
        caller: &Caller,
        id: &str,
        enabled: bool,
    ) -> Result<WebhookRecord> {
        caller.require(Scope::Admin)?;
        let reason = (!enabled).then(|| format!("disabled by {}", caller.id()));
        let audit = self.change(
            caller,
            if enabled {
                "webhook.enabled"
            } else {
                "webhook.disabled"
            },
            id,
            Some(serde_json::json!({ "enabled": !enabled })),
            Some(serde_json::json!({ "enabled": enabled, "reason": reason })),
        );
        match self
            .inner
            .store
            .set_webhook_disabled(id.to_owned(), reason, self.now(), audit)
            .await?
        {
            None => return Err(ServiceError::not_found("webhook", id)),
            Some(false) if enabled => {
                return Err(ServiceError::invalid(format!(
                    "webhook {id} is not disabled"
                )));
            }
            Some(false) => {
                return Err(ServiceError::invalid(format!(
                    "webhook {id} is disabled already"
                )));
            }
            Some(true) => {}
        }
        self.inner
            .store
            .webhook(id)
            .await?
            .ok_or_else(|| ServiceError::not_found("webhook", id))
    }

    /// Sends a `webhook.test` event to a webhook; returns the delivery's id.
    pub async fn test_webhook(&self, caller: &Caller, id: &str) -> Result<i64> {
        caller.require(Scope::Admin)?;
        let data = serde_json::json!({"webhook_id": id, "requested_by": caller.id()});
        let delivery = self
            .inner
            .store
            .enqueue_webhook_test(
                id.to_owned(),
                data,
                self.now(),
                self.change(caller, "webhook.tested", id, None, None),
            )
            .await?
            .ok_or_else(|| ServiceError::not_found("webhook", id))?;
        self.outbox_due(true);
        Ok(delivery)
    }
}
