//! The outbox's operations: which URLs may be registered, deliveries (retried one by one or every
//! dead one of an endpoint) and endpoints for admins, and what the delivery worker asks for: the
//! deliveries due (by lease), what one delivery needs to be sent (a push's parts, a webhook's
//! signing secrets, an approval link), and recording an attempt with its verdict (the retry policy
//! is `domain::delivery`). The admin webhooks themselves are `webhooks`. The worker
//! (`crate::workers::outbox`) never reads the store itself; the rows are `store/outbox.rs`'s.

use std::time::Duration;

use super::{Caller, Result, Service, ServiceError};
use crate::domain::address::AddressPolicy;
use crate::domain::delivery::{AttemptVerdict, SendFailure, SendResult, verdict};
use crate::domain::tool_check::ConfirmationId;
use crate::domain::{ApprovalId, PersonId, Scope, Timestamp};
use crate::store::{
    AttemptRecord, DeliveryFilter, DeliveryRecord, DeliveryState, EndpointRecord, Finished,
    FinishedAttempt, MessageRecord, PushConfigRecord, TaskEventRecord, WebhookRecord,
};

/// An outbound URL as stored: http(s), at most 2048 bytes, and, when its host is an address
/// literal, an address the policy allows (names are checked on every connection).
pub(super) fn check_url(url: &str, policy: &AddressPolicy) -> Result<()> {
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

/// A delivery with its attempts.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeliveryView {
    #[serde(flatten)]
    pub delivery: DeliveryRecord,
    pub attempts_made: Vec<AttemptRecord>,
}

/// What an A2A push delivery is rendered from (by the A2A front's push renderer).
#[derive(Debug, Clone)]
pub struct PushParts {
    pub config: PushConfigRecord,
    /// The task as the party sees it now.
    pub view: super::TaskView,
    pub event: TaskEventRecord,
    /// The message the event is about, if any.
    pub cause: Option<MessageRecord>,
}

/// A delivery whose parts no longer exist: it cannot be sent, now or later.
fn gone(what: &str) -> SendFailure {
    SendFailure::Gone(format!("{what} no longer exists"))
}

/// A delivery's parts could not be read now (retryable).
fn unreadable(e: crate::store::StoreError) -> SendFailure {
    SendFailure::Request(e.to_string())
}

/// An internal failure: logged here, opaque to the caller.
fn internal(cause: impl std::fmt::Display) -> ServiceError {
    tracing::error!(error = %cause, "An outbox operation failed.");
    ServiceError::new(super::ErrorCode::Internal, "internal error")
}

/// 32 random bytes.
pub(super) fn random_bytes() -> Result<[u8; 32]> {
    crate::domain::secret::try_random().ok_or_else(|| internal("no system randomness"))
}

impl Service {
    /// The master key that seals secrets.
    pub(super) fn master_key(&self) -> Result<&crate::keys::ring::MasterKey> {
        self.inner
            .master_key
            .as_deref()
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

    /// A webhook's signing secrets, for the worker: its secret, then, until the rotation's
    /// overlap ends (by the service clock), the one it replaced.
    pub fn webhook_secrets(&self, w: &WebhookRecord) -> Result<Vec<String>> {
        let mut secrets = vec![self.open_secret(&w.id, &w.sealed_secret)?];
        if let (Some(previous), Some(until)) = (&w.previous_sealed_secret, w.previous_until)
            && self.now() < until
        {
            secrets.push(self.open_secret(&w.id, previous)?);
        }
        Ok(secrets)
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

    /// What an A2A push delivery renders: its push config, the task as the party sees it, the
    /// task event, and the message that caused it. A part that no longer exists makes the
    /// delivery `Gone` (it dies); a failure to read is retryable.
    pub async fn push_delivery(
        &self,
        d: &DeliveryRecord,
    ) -> std::result::Result<PushParts, SendFailure> {
        let store = &self.inner.store;
        let (Some(thread_id), Some(seq)) = (&d.thread, d.event_seq) else {
            return Err(gone("the task event"));
        };
        let config_id = d
            .endpoint
            .strip_prefix(&format!("push:{thread_id}/"))
            .ok_or_else(|| gone("the push config"))?;
        let config = store
            .push_config(thread_id, config_id)
            .await
            .map_err(unreadable)?
            .ok_or_else(|| gone("the push config"))?;
        let view = self
            .push_view(thread_id)
            .await
            .map_err(|e| SendFailure::Request(e.message))?
            .ok_or_else(|| gone("the task"))?;
        let event = store
            .task_event(thread_id, seq)
            .await
            .map_err(unreadable)?
            .ok_or_else(|| gone("the task event"))?;
        let cause = match &event.message {
            Some(m) => store.message(m).await.map_err(unreadable)?,
            None => None,
        };
        Ok(PushParts {
            config,
            view,
            event,
            cause,
        })
    }

    /// The webhook a webhook delivery goes to, and its signing secrets (newest first).
    pub async fn webhook_delivery(
        &self,
        d: &DeliveryRecord,
    ) -> std::result::Result<(WebhookRecord, Vec<String>), SendFailure> {
        let webhook_id = d
            .endpoint
            .strip_prefix("webhook:")
            .ok_or_else(|| gone("the endpoint"))?;
        let webhook = self
            .inner
            .store
            .webhook(webhook_id)
            .await
            .map_err(unreadable)?
            .ok_or_else(|| gone("the webhook"))?;
        let secrets = self
            .webhook_secrets(&webhook)
            .map_err(|e| SendFailure::Request(e.message))?;
        Ok((webhook, secrets))
    }

    /// The single-use link of an `approval.pending` webhook delivery's body: for an approval,
    /// for `person` when they are an approver, else for the first approver; for a tool
    /// confirmation (`tcf_…`, SPEC §5b), for the person whose agent asked. Issued in the
    /// bootstrap admin's name (as an admin's `link issue` would be). A retried delivery must be
    /// byte-identical (receivers deduplicate on `webhook-id`), so the link's id and secret are
    /// derived from the master key and the delivery, never stored: the first attempt issues it,
    /// every later one finds it and gives it again, whatever happened to its subject since.
    /// `None` when there is none to give (it was already decided at the first attempt, and so
    /// at every later one).
    pub async fn webhook_decision_link(
        &self,
        delivery: i64,
        subject: &str,
        person: Option<&PersonId>,
    ) -> Option<super::IssuedLink> {
        let context = format!(
            "{delivery}\0{subject}\0{}",
            person.map_or("", PersonId::as_str)
        );
        let (link_id, secret) = super::auth::derived_secret(
            self.master_key().ok()?,
            "webhook approval link",
            context.as_bytes(),
            "lnk_",
        );
        let confirmation = ConfirmationId::parse(subject).ok();
        let kind = if confirmation.is_some() {
            crate::store::LinkKind::Confirmation
        } else {
            crate::store::LinkKind::Approval
        };
        let given = || async {
            let hash = super::auth::hash_secret(&secret);
            let link = self.inner.store.link_by_hash(kind, &hash).await.ok()??;
            Some(super::IssuedLink {
                link,
                secret: secret.clone(),
            })
        };
        if let Some(issued) = given().await {
            return Some(issued);
        }
        let admin = self.system_admin().await.ok()?;
        let how = super::sessions::LinkIssue::Derived {
            id: link_id,
            secret: secret.clone(),
        };
        let issued = match confirmation {
            Some(id) => self.confirmation_link(&admin, &id, how).await,
            None => {
                let id = ApprovalId::parse(subject).ok()?;
                self.approval_link(&admin, &id, person, None, how).await
            }
        };
        match issued {
            Ok(issued) => Some(issued),
            // Issued meanwhile by another attempt (a lease that passed on): that one.
            Err(_) => given().await,
        }
    }

    /// The service's current time (the outbox worker's clock).
    pub fn clock_now(&self) -> Timestamp {
        self.now()
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

    /// Why nothing sent to `endpoint` can arrive any more (its webhook was removed, its push
    /// config deleted), or none while it can.
    async fn endpoint_gone(&self, endpoint: &str) -> Result<Option<String>> {
        let store = &self.inner.store;
        if let Some(id) = endpoint.strip_prefix("webhook:") {
            if store.webhook(id).await?.is_none() {
                return Ok(Some(format!("webhook {id} was removed")));
            }
        } else if let Some((thread, config)) = endpoint
            .strip_prefix("push:")
            .and_then(|rest| rest.split_once('/'))
            && let Ok(thread) = crate::domain::ThreadId::parse(thread.to_owned())
            && store.push_config(&thread, config).await?.is_none()
        {
            return Ok(Some(format!(
                "the push config {config} of task {thread} no longer exists"
            )));
        }
        Ok(None)
    }

    /// Refuses a retry to an endpoint nothing can reach any more: it would only die again.
    async fn check_retryable(&self, endpoint: &str) -> Result<()> {
        match self.endpoint_gone(endpoint).await? {
            None => Ok(()),
            Some(why) => Err(ServiceError::invalid(format!(
                "{why}: its deliveries are not sent again (they would die again); nothing was changed"
            ))),
        }
    }

    /// Sends a dead delivery again (and re-enables its endpoint).
    pub async fn retry_delivery(&self, caller: &Caller, id: i64) -> Result<DeliveryView> {
        caller.require(Scope::Admin)?;
        if let Some((d, _)) = self.inner.store.delivery(id).await? {
            self.check_retryable(&d.endpoint).await?;
        }
        let audit = self.change(
            caller,
            "delivery.retried",
            id,
            Some(serde_json::json!({ "state": "dead" })),
            Some(serde_json::json!({ "state": "pending" })),
        );
        match self
            .inner
            .store
            .retry_delivery(id, self.now(), audit)
            .await?
        {
            None => return Err(ServiceError::not_found("delivery", id)),
            Some(false) => {
                return Err(ServiceError::invalid(format!(
                    "delivery {id} is not dead; only dead deliveries are retried by hand"
                )));
            }
            Some(true) => self.outbox_due(true),
        }
        self.delivery(caller, id).await
    }

    /// Sends every dead delivery of `endpoint` again, in id order, and re-enables the endpoint
    /// (as a single retry does). Answers how many; refused when it has none.
    pub async fn retry_endpoint(&self, caller: &Caller, endpoint: &str) -> Result<i64> {
        caller.require(Scope::Admin)?;
        let dead = crate::store::DeliveryFilter {
            state: Some(crate::store::DeliveryState::Dead),
            failed: false,
            endpoint: Some(endpoint.to_owned()),
            before: None,
            limit: 1,
        };
        // Only an endpoint with dead deliveries is told why they cannot go again.
        if !self.inner.store.deliveries(&dead).await?.is_empty() {
            self.check_retryable(endpoint).await?;
        }
        let retried = self
            .inner
            .store
            .retry_endpoint(
                endpoint.to_owned(),
                self.now(),
                self.change(caller, "endpoint.retried", endpoint, None, None),
            )
            .await?;
        if retried == 0 {
            return Err(ServiceError::invalid(format!(
                "no dead delivery for endpoint {endpoint:?}"
            )));
        }
        self.outbox_due(true);
        Ok(i64::try_from(retried).unwrap_or(i64::MAX))
    }

    /// Every endpoint with deliveries, counted by state (the 500 most recently used).
    pub async fn endpoints(&self, caller: &Caller) -> Result<Vec<EndpointRecord>> {
        caller.require(Scope::Admin)?;
        Ok(self.inner.store.endpoints().await?)
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
        let closing = on_dead.as_ref().map(super::counted::close_outcome);
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
        if let Some(outcome) = closing.filter(|_| finished.closed) {
            super::counted::closed_by_server(outcome);
        }
        // Wake the workers only when the finish made something claimable (the store says).
        self.outbox_due(finished.outbox_due);
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
