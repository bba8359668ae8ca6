//! The outbox's rules: what an attempt's result means (delivered, retry when, or dead), which
//! URLs may be registered, and the admin operations on webhooks and deliveries. The worker that
//! sends (and its HTTP client) lives in `crate::outbox`; the rows in `store/outbox.rs`.

use std::time::Duration;

use super::{Caller, Result, Service, ServiceError};
use crate::domain::address::AddressPolicy;
use crate::domain::{ChannelName, PersonId, Scope, Timestamp};
use crate::store::{
    AttemptRecord, AttemptVerdict, DeliveryFilter, DeliveryRecord, DeliveryState, Finished,
    FinishedAttempt, WebhookRecord,
};

/// The events an admin webhook can subscribe to.
pub const WEBHOOK_EVENTS: [&str; 6] = [
    "message.created",
    "approval.pending",
    "approval.decided",
    "task.updated",
    "delivery.dead",
    "endpoint.disabled",
];

/// Tunables of outbound delivery.
#[derive(Debug, Clone)]
pub struct OutboxSettings {
    /// Delay before each retry: the first attempt is immediate, the second waits `schedule[0]`,
    /// and so on; after the last, the delivery is dead.
    pub schedule: Vec<Duration>,
    /// Each delay is scaled by a random factor in `1 ± jitter`.
    pub jitter: f64,
    /// Consecutive dead deliveries after which an endpoint is disabled.
    pub disable_after: u32,
    /// How long a claimed delivery belongs to its worker (longer than `timeout`).
    pub lease: Duration,
    pub connect_timeout: Duration,
    /// The whole request, response included.
    pub timeout: Duration,
    /// Non-global addresses that may still be sent to.
    pub allow: AddressPolicy,
    /// Deliveries in flight at once per process.
    pub concurrency: usize,
}

impl Default for OutboxSettings {
    fn default() -> Self {
        let minutes = |m: u64| Duration::from_secs(60 * m);
        Self {
            // 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 2 h, 4 h, 8 h, 8 h: about 24 h in 11 attempts.
            schedule: vec![
                Duration::from_secs(5),
                Duration::from_secs(30),
                minutes(2),
                minutes(10),
                minutes(30),
                minutes(60),
                minutes(120),
                minutes(240),
                minutes(480),
                minutes(480),
            ],
            jitter: 0.2,
            disable_after: 5,
            lease: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(15),
            allow: AddressPolicy::default(),
            concurrency: 64,
        }
    }
}

/// What one attempt got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendResult {
    /// The receiver answered (the body is not kept).
    Status {
        code: u16,
        /// `Retry-After`, when the receiver sent one.
        retry_after: Option<Duration>,
    },
    Failed(SendFailure),
}

/// Why an attempt got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendFailure {
    Timeout(String),
    Connect(String),
    /// The SSRF guard refused the address (literal or resolved).
    RefusedAddress(String),
    InvalidUrl(String),
    /// The delivery cannot be built any more (e.g. its push config was deleted).
    Gone(String),
    /// The receiver refused it for good (an A2A error, an answer that cannot be read or is too
    /// large): trying again would get the same answer.
    Refused(String),
    Request(String),
}

impl SendFailure {
    pub fn class(&self) -> &'static str {
        match self {
            SendFailure::Timeout(_) => "timeout",
            SendFailure::Connect(_) => "connect",
            SendFailure::RefusedAddress(_) => "refused_address",
            SendFailure::InvalidUrl(_) => "invalid_url",
            SendFailure::Gone(_) => "gone",
            SendFailure::Refused(_) => "refused",
            SendFailure::Request(_) => "request",
        }
    }

    pub fn message(&self) -> &str {
        match self {
            SendFailure::Timeout(m)
            | SendFailure::Connect(m)
            | SendFailure::RefusedAddress(m)
            | SendFailure::InvalidUrl(m)
            | SendFailure::Gone(m)
            | SendFailure::Refused(m)
            | SendFailure::Request(m) => m,
        }
    }

    /// Worth trying again later: the network or the receiver may recover; a refused address, a
    /// bad URL or a vanished config will not.
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            SendFailure::Timeout(_) | SendFailure::Connect(_) | SendFailure::Request(_)
        )
    }
}

/// Whether a status may succeed later: 408, 425, 429 and 5xx do; other 4xx (and redirects, which
/// are never followed) are permanent.
pub fn status_retryable(code: u16) -> bool {
    matches!(code, 408 | 425 | 429) || !(200..500).contains(&code)
}

/// The verdict on attempt number `attempt` (1-based). `random` in `[0, 1)` draws the jitter.
pub fn verdict(
    settings: &OutboxSettings,
    attempt: i64,
    result: &SendResult,
    now: Timestamp,
    random: f64,
) -> AttemptVerdict {
    let retry_after = match result {
        SendResult::Status { code, .. } if (200..300).contains(code) => {
            return AttemptVerdict::Delivered;
        }
        SendResult::Status { code, retry_after } if status_retryable(*code) => *retry_after,
        SendResult::Failed(f) if f.retryable() => None,
        _ => return AttemptVerdict::Dead,
    };
    let Some(step) = usize::try_from(attempt - 1)
        .ok()
        .and_then(|i| settings.schedule.get(i))
    else {
        return AttemptVerdict::Dead;
    };
    let factor = 1.0 + settings.jitter.clamp(0.0, 1.0) * (2.0 * random.clamp(0.0, 1.0) - 1.0);
    let scheduled = step.as_secs_f64() * factor;
    // Retry-After is honoured (never earlier than asked), up to a day.
    let asked = retry_after.map_or(0.0, |d| d.as_secs_f64().min(86_400.0));
    let delay_ms = (scheduled.max(asked) * 1000.0).round() as i64;
    AttemptVerdict::RetryAt(Timestamp(now.0 + delay_ms))
}

/// An outbound URL as stored: http(s), at most 2048 bytes, and, when its host is an address
/// literal, an address the policy allows (names are checked on every connection).
pub fn check_url(url: &str, policy: &AddressPolicy) -> Result<()> {
    if url.len() > 2048 {
        return Err(ServiceError::invalid("the URL must be at most 2048 bytes"));
    }
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| ServiceError::invalid(format!("{url:?} is not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ServiceError::invalid("the URL must be http:// or https://"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(ServiceError::invalid(
            "the URL must not carry credentials; use the config's authentication",
        ));
    }
    let host = parsed
        .host_str()
        .ok_or_else(|| ServiceError::invalid("the URL has no host"))?;
    let Ok(ip) = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
    else {
        return Ok(());
    };
    policy.check(ip).map_err(|kind| {
        ServiceError::invalid(format!(
            "{ip} is a {} address; liaison only sends to global addresses unless [outbox] allow lists it",
            kind.as_str()
        ))
    })
}

/// An admin webhook as asked for.
#[derive(Debug, Clone, Default)]
pub struct WebhookSpec {
    pub url: String,
    pub events: Vec<String>,
    pub person: Option<PersonId>,
    pub channel: Option<ChannelName>,
}

/// A delivery with its attempts.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeliveryView {
    #[serde(flatten)]
    pub delivery: DeliveryRecord,
    pub attempts_made: Vec<AttemptRecord>,
}

/// An internal failure: logged here, opaque to the caller.
fn internal(cause: impl std::fmt::Display) -> ServiceError {
    tracing::error!(error = %cause, "An outbox operation failed.");
    ServiceError::new(super::ErrorCode::Internal, "internal error")
}

/// 32 random bytes.
pub(super) fn random_bytes() -> Result<[u8; 32]> {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| internal("no system randomness"))?;
    Ok(bytes)
}

/// A new `whsec_` secret: 32 random bytes, base64.
fn new_secret() -> Result<String> {
    use base64::Engine as _;
    Ok(format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(random_bytes()?)
    ))
}

impl Service {
    /// The master key that seals webhook secrets (the app sets it once at start).
    pub fn set_master_key(&self, key: crate::a2a::keys::MasterKey) {
        let _ = self.inner.master_key.set(std::sync::Arc::new(key));
    }

    pub(super) fn master_key(&self) -> Result<&crate::a2a::keys::MasterKey> {
        self.inner
            .master_key
            .get()
            .map(|k| &**k)
            .ok_or_else(|| internal("the master key is not loaded"))
    }

    /// Seals `secret` under the master key, bound to `id` (what it belongs to). Base64.
    pub(super) fn seal_secret(&self, id: &str, secret: &str) -> Result<String> {
        use base64::Engine as _;
        let sealed = self
            .master_key()?
            .seal(secret.as_bytes(), id.as_bytes())
            .map_err(|e| internal(e.to_string()))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(sealed))
    }

    /// Opens what [`Self::seal_secret`] sealed for `id`.
    pub(super) fn open_secret(&self, id: &str, sealed: &str) -> Result<String> {
        use base64::Engine as _;
        let sealed = base64::engine::general_purpose::STANDARD
            .decode(sealed)
            .map_err(|e| internal(format!("sealed secret: {e}")))?;
        let plain = self
            .master_key()?
            .open(&sealed, id.as_bytes())
            .ok_or_else(|| internal("a sealed secret does not open"))?;
        String::from_utf8(plain).map_err(|e| internal(e.to_string()))
    }

    /// A webhook's signing secret, for the worker.
    pub fn webhook_secret(&self, w: &WebhookRecord) -> Result<String> {
        self.open_secret(&w.id, &w.sealed_secret)
    }

    /// The outbound URL rule, for fronts storing URLs (push configs).
    pub fn check_outbound_url(&self, url: &str) -> Result<()> {
        check_url(url, &self.inner.settings.outbox.allow)
    }

    /// A task as its push notifications render it (the worker's view; no caller: the delivery
    /// was authorised when its config was stored). `None` when the thread is gone or no task.
    pub async fn push_view(&self, id: &crate::domain::ThreadId) -> Result<Option<super::TaskView>> {
        let Some(thread) = self.inner.store.thread(id).await? else {
            return Ok(None);
        };
        if thread.task.is_none() {
            return Ok(None);
        }
        Ok(Some(self.task_view(thread, Some(0)).await?))
    }

    /// The service's current time (the outbox worker's clock).
    pub fn clock_now(&self) -> Timestamp {
        self.now()
    }

    /// Registers a webhook; returns it and its secret, which is shown this once.
    pub async fn add_webhook(
        &self,
        caller: &Caller,
        spec: WebhookSpec,
    ) -> Result<(WebhookRecord, String)> {
        caller.require(Scope::Admin)?;
        self.check_outbound_url(&spec.url)?;
        if spec.events.is_empty() {
            return Err(ServiceError::invalid(format!(
                "name at least one event: {}",
                WEBHOOK_EVENTS.join(", ")
            )));
        }
        let mut events = Vec::new();
        for e in &spec.events {
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
            created_at: self.now(),
            disabled_at: None,
        };
        self.inner.store.insert_webhook(record.clone()).await?;
        Ok((record, secret))
    }

    pub async fn webhooks(&self, caller: &Caller) -> Result<Vec<WebhookRecord>> {
        caller.require(Scope::Admin)?;
        Ok(self.inner.store.webhooks().await?)
    }

    pub async fn remove_webhook(&self, caller: &Caller, id: &str) -> Result<()> {
        caller.require(Scope::Admin)?;
        if !self
            .inner
            .store
            .remove_webhook(id.to_owned(), self.now())
            .await?
        {
            return Err(ServiceError::not_found("webhook", id));
        }
        Ok(())
    }

    /// A new secret for a webhook, shown this once; the old one stops signing at once.
    pub async fn rotate_webhook_secret(&self, caller: &Caller, id: &str) -> Result<String> {
        caller.require(Scope::Admin)?;
        let secret = new_secret()?;
        let sealed = self.seal_secret(id, &secret)?;
        if !self
            .inner
            .store
            .set_webhook_secret(id.to_owned(), sealed)
            .await?
        {
            return Err(ServiceError::not_found("webhook", id));
        }
        Ok(secret)
    }

    /// Sends a `webhook.test` event to a webhook; returns the delivery's id.
    pub async fn test_webhook(&self, caller: &Caller, id: &str) -> Result<i64> {
        caller.require(Scope::Admin)?;
        let data = serde_json::json!({"webhook_id": id, "requested_by": caller.id()});
        self.inner
            .store
            .enqueue_webhook_test(id.to_owned(), data, self.now())
            .await?
            .ok_or_else(|| ServiceError::not_found("webhook", id))
    }

    pub async fn deliveries(
        &self,
        caller: &Caller,
        mut filter: DeliveryFilter,
    ) -> Result<Vec<DeliveryRecord>> {
        caller.require(Scope::Admin)?;
        if !(1..=1000).contains(&filter.limit) {
            filter.limit = filter.limit.clamp(1, 1000);
        }
        Ok(self.inner.store.deliveries(&filter).await?)
    }

    pub async fn delivery(&self, caller: &Caller, id: i64) -> Result<DeliveryView> {
        caller.require(Scope::Admin)?;
        let (delivery, attempts_made) = self
            .inner
            .store
            .delivery(id)
            .await?
            .ok_or_else(|| ServiceError::not_found("delivery", id))?;
        Ok(DeliveryView {
            delivery,
            attempts_made,
        })
    }

    /// Sends a dead delivery again (and re-enables its endpoint).
    pub async fn retry_delivery(&self, caller: &Caller, id: i64) -> Result<DeliveryView> {
        caller.require(Scope::Admin)?;
        match self.inner.store.retry_delivery(id, self.now()).await? {
            None => return Err(ServiceError::not_found("delivery", id)),
            Some(false) => {
                return Err(ServiceError::invalid(format!(
                    "delivery {id} is not dead; only dead deliveries are retried by hand"
                )));
            }
            Some(true) => {}
        }
        self.delivery(caller, id).await
    }

    /// Claims due deliveries for `worker` (the outbox worker's step).
    pub async fn claim_deliveries(&self, worker: &str, limit: i64) -> Result<Vec<DeliveryRecord>> {
        let now = self.now();
        let lease = i64::try_from(self.inner.settings.outbox.lease.as_millis()).unwrap_or(60_000);
        Ok(self
            .inner
            .store
            .claim_deliveries(worker.to_owned(), now, Timestamp(now.0 + lease), limit)
            .await?)
    }

    /// When the next delivery falls due (none pending: `None`).
    pub async fn next_delivery_due(&self) -> Result<Option<Timestamp>> {
        Ok(self.inner.store.next_delivery_due().await?)
    }

    /// Records an attempt of `d` (claimed by `worker`) and applies its verdict.
    pub async fn finish_delivery(
        &self,
        d: &DeliveryRecord,
        worker: &str,
        started_at: Timestamp,
        latency: Duration,
        result: &SendResult,
        random: f64,
    ) -> Result<(AttemptVerdict, Finished)> {
        let settings = &self.inner.settings.outbox;
        let now = self.now();
        let verdict = verdict(settings, d.attempts, result, now, random);
        let on_dead = match (verdict, result) {
            (AttemptVerdict::Dead, SendResult::Failed(f)) => {
                self.remote_failure_close(d, f.message()).await?
            }
            (AttemptVerdict::Dead, SendResult::Status { code, .. }) => {
                self.remote_failure_close(d, &format!("it answered HTTP {code}"))
                    .await?
            }
            _ => None,
        };
        let (status, error_class, error) = match result {
            SendResult::Status { code, .. } => (
                Some(i64::from(*code)),
                if (200..300).contains(code) {
                    "success"
                } else {
                    "status"
                },
                (!(200..300).contains(code)).then(|| format!("HTTP {code}")),
            ),
            SendResult::Failed(f) => (None, f.class(), Some(f.message().to_owned())),
        };
        let finished = self
            .inner
            .store
            .finish_attempt(FinishedAttempt {
                delivery: d.id,
                attempt: d.attempts,
                worker: worker.to_owned(),
                started_at,
                latency_ms: i64::try_from(latency.as_millis()).unwrap_or(i64::MAX),
                status,
                error_class: error_class.to_owned(),
                error,
                verdict,
                now,
                disable_after: i64::from(settings.disable_after.max(1)),
                on_dead,
            })
            .await?;
        Ok((verdict, finished))
    }
}

impl DeliveryState {
    /// Parses `pending`, `delivered` or `dead` (CLI and admin API filters).
    pub fn from_name(s: &str) -> Result<DeliveryState> {
        match s {
            "pending" => Ok(DeliveryState::Pending),
            "delivered" => Ok(DeliveryState::Delivered),
            "dead" => Ok(DeliveryState::Dead),
            other => Err(ServiceError::invalid(format!(
                "unknown delivery state {other:?}: pending, delivered or dead"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp(s * 1000)
    }

    fn status(code: u16) -> SendResult {
        SendResult::Status {
            code,
            retry_after: None,
        }
    }

    #[test]
    fn success_delivers_and_permanent_failures_die_at_once() {
        let s = OutboxSettings::default();
        assert_eq!(
            verdict(&s, 1, &status(204), at(0), 0.5),
            AttemptVerdict::Delivered
        );
        for code in [400, 401, 403, 404, 410, 422, 301, 302] {
            assert_eq!(
                verdict(&s, 1, &status(code), at(0), 0.5),
                AttemptVerdict::Dead,
                "{code}"
            );
        }
        let refused = SendResult::Failed(SendFailure::RefusedAddress("10.0.0.1".into()));
        assert_eq!(verdict(&s, 1, &refused, at(0), 0.5), AttemptVerdict::Dead);
    }

    #[test]
    fn retryable_failures_follow_the_schedule_with_jitter_then_die() {
        let s = OutboxSettings::default();
        for result in [
            status(500),
            status(503),
            status(408),
            status(429),
            SendResult::Failed(SendFailure::Timeout("t".into())),
            SendResult::Failed(SendFailure::Connect("c".into())),
        ] {
            assert_eq!(
                verdict(&s, 1, &result, at(0), 0.5),
                AttemptVerdict::RetryAt(at(5))
            );
            assert_eq!(
                verdict(&s, 2, &result, at(100), 0.5),
                AttemptVerdict::RetryAt(at(130))
            );
            assert_eq!(verdict(&s, 11, &result, at(0), 0.5), AttemptVerdict::Dead);
        }
        // Jitter: ±20 % of the step at the extremes.
        assert_eq!(
            verdict(&s, 2, &status(500), at(0), 0.0),
            AttemptVerdict::RetryAt(at(24))
        );
        let AttemptVerdict::RetryAt(late) = verdict(&s, 2, &status(500), at(0), 0.999_999) else {
            panic!()
        };
        assert!(late.0 <= 36_000 && late.0 > 35_900);
        let total: Duration = s.schedule.iter().sum();
        assert!(total > Duration::from_secs(20 * 3600) && total < Duration::from_secs(28 * 3600));
    }

    #[test]
    fn retry_after_is_honoured_but_never_shortens_the_schedule() {
        let s = OutboxSettings::default();
        let slow = SendResult::Status {
            code: 429,
            retry_after: Some(Duration::from_secs(120)),
        };
        assert_eq!(
            verdict(&s, 1, &slow, at(0), 0.5),
            AttemptVerdict::RetryAt(at(120))
        );
        let quick = SendResult::Status {
            code: 503,
            retry_after: Some(Duration::from_secs(1)),
        };
        assert_eq!(
            verdict(&s, 2, &quick, at(0), 0.5),
            AttemptVerdict::RetryAt(at(30))
        );
    }

    #[test]
    fn stored_urls_must_be_http_and_not_name_a_private_address() {
        let none = AddressPolicy::default();
        for bad in [
            "ftp://example.com/x",
            "not a url",
            "http://127.0.0.1:9/x",
            "http://[::1]/x",
            "http://[::ffff:10.0.0.1]/x",
            "http://169.254.169.254/latest",
            "http://user:pw@example.com/",
        ] {
            assert!(check_url(bad, &none).is_err(), "{bad}");
        }
        assert!(check_url("https://hooks.example.com/a", &none).is_ok());
        assert!(check_url("http://8.8.8.8/a", &none).is_ok());
        let loopback = AddressPolicy::parse(&["127.0.0.1".into()]).unwrap();
        assert!(check_url("http://127.0.0.1:9/x", &loopback).is_ok());
    }
}
