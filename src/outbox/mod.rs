//! Outbound delivery: the worker that drains the durable outbox, the SSRF-safe client
//! ([`client`]) and Standard Webhooks signing ([`signature`]).
//!
//! A worker is a loop around [`Worker::deliver_next`]-sized steps: claim due deliveries by lease
//! (the service and store decide which and for how long), build each request (an A2A push is
//! rendered from its task event as `StreamResponse`s; a webhook's body was stored with it), send
//! it, and record the attempt with its verdict. It wakes on the bus's outbox topic (published by
//! every commit that enqueues, on every replica), at the next due retry, and on a slow safety
//! sweep. It depends on the service, the store's records, the A2A conversion and the key ring;
//! nothing depends on it but the app.

pub mod signature;

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::bus::{Topic, WakeBus};
use crate::domain::Timestamp;
use crate::domain::delivery::{AttemptVerdict, SendFailure, SendResult};
use crate::service::Service;
use crate::store::{DeliveryRecord, PUSH_EVENT};

use crate::net::outbound::OutboundClient;

/// The longest a worker sleeps without looking at the outbox.
const SAFETY_SWEEP: Duration = Duration::from_secs(30);

/// What one step did.
#[derive(Debug, Clone)]
pub struct Step {
    pub delivery: DeliveryRecord,
    pub verdict: AttemptVerdict,
    pub result: SendResult,
}

/// A delivery worker. Several per database are safe (replicas, or tests running two).
pub struct Worker {
    service: Service,
    client: OutboundClient,
    /// Signs push JWTs when a push config brings no credentials of its own (the current ring).
    keys: crate::keys::LiveRing,
    /// Our public URL: the JWT's `iss`.
    issuer: String,
    /// This worker's lease-owner name (unique per process start).
    id: String,
    /// Sends `remote.*` deliveries (SPEC §8b), when the bridge is wired.
    remote: Option<crate::remote::Sender>,
}

fn header(name: &'static str, value: &str) -> Option<(HeaderName, HeaderValue)> {
    Some((
        HeaderName::from_static(name),
        HeaderValue::from_str(value).ok()?,
    ))
}

fn random_unit() -> f64 {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 8];
    if ring::rand::SystemRandom::new().fill(&mut bytes).is_err() {
        return 0.5;
    }
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

impl Worker {
    pub fn new(
        service: Service,
        client: OutboundClient,
        keys: crate::keys::LiveRing,
        issuer: String,
    ) -> Worker {
        Worker {
            service,
            client,
            keys,
            issuer,
            id: format!("worker-{}", uuid::Uuid::now_v7().simple()),
            remote: None,
        }
    }

    /// Lets this worker send to remote agents.
    pub fn with_remote(mut self, sender: crate::remote::Sender) -> Worker {
        self.remote = Some(sender);
        self
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Claims the next due delivery, makes one attempt and records it. `None` when nothing is
    /// due (or everything due waits behind an earlier delivery to the same endpoint).
    pub async fn deliver_next(&self) -> anyhow::Result<Option<Step>> {
        let Some(d) = self
            .service
            .claim_deliveries(&self.id, 1)
            .await?
            .into_iter()
            .next()
        else {
            return Ok(None);
        };
        Ok(Some(self.attempt(d).await?))
    }

    /// One attempt of a claimed delivery.
    async fn attempt(&self, d: DeliveryRecord) -> anyhow::Result<Step> {
        let started_at = self.service.clock_now();
        let clock = Instant::now();
        let result = if d.event_type.starts_with("remote.") {
            match &self.remote {
                Some(sender) => sender.deliver(&d).await,
                None => SendResult::Failed(SendFailure::Request(
                    "this process does not send to remote agents".into(),
                )),
            }
        } else {
            self.post(&d, started_at).await
        };
        let latency = clock.elapsed();
        let (verdict, finished) = self
            .service
            .finish_delivery(&d, &self.id, started_at, latency, &result, random_unit())
            .await?;
        if !finished.applied {
            tracing::warn!(
                delivery = d.id,
                "A delivery's lease passed to another worker during its attempt."
            );
        }
        match (&verdict, &result) {
            (AttemptVerdict::Dead, _) => tracing::warn!(
                delivery = d.id, endpoint = %d.endpoint, attempt = d.attempts,
                "A delivery failed for good."
            ),
            (AttemptVerdict::RetryAt(_), SendResult::Status { code, .. }) => tracing::info!(
                delivery = d.id,
                status = code,
                attempt = d.attempts,
                "A delivery will be retried."
            ),
            (AttemptVerdict::RetryAt(_), SendResult::Failed(f)) => tracing::info!(
                delivery = d.id,
                class = f.class(),
                attempt = d.attempts,
                "A delivery will be retried."
            ),
            _ => {}
        }
        if finished.endpoint_disabled {
            tracing::warn!(endpoint = %d.endpoint, "An endpoint was disabled after repeated dead deliveries.");
        }
        Ok(Step {
            delivery: d,
            verdict,
            result,
        })
    }

    /// One attempt of an A2A push or a webhook: its POSTs, until one fails.
    async fn post(&self, d: &DeliveryRecord, started_at: Timestamp) -> SendResult {
        match self.requests(d, started_at).await {
            Ok(requests) => {
                let mut last = SendResult::Failed(SendFailure::Gone("nothing to send".into()));
                for (headers, body) in requests {
                    last = self.client.post(&d.url, headers, body).await;
                    if !matches!(&last, SendResult::Status { code, .. } if (200..300).contains(code))
                    {
                        break;
                    }
                }
                last
            }
            Err(failure) => SendResult::Failed(failure),
        }
    }

    /// The POSTs of one delivery: an A2A push may be two (a reply's artifact, then its status).
    async fn requests(
        &self,
        d: &DeliveryRecord,
        now: Timestamp,
    ) -> Result<Vec<(HeaderMap, Vec<u8>)>, SendFailure> {
        let store = self.service.store();
        let gone = |what: &str| SendFailure::Gone(format!("{what} no longer exists"));
        let internal = |e: crate::store::StoreError| SendFailure::Request(e.to_string());
        let mut common = HeaderMap::new();
        common.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        common.extend(header("x-liaison-delivery", &d.id.to_string()));
        common.extend(header("x-liaison-attempt", &d.attempts.to_string()));
        if d.event_type == PUSH_EVENT {
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
                .map_err(internal)?
                .ok_or_else(|| gone("the push config"))?;
            let view = self
                .service
                .push_view(thread_id)
                .await
                .map_err(|e| SendFailure::Request(e.message))?
                .ok_or_else(|| gone("the task"))?;
            let event = store
                .task_event(thread_id, seq)
                .await
                .map_err(internal)?
                .ok_or_else(|| gone("the task event"))?;
            let cause = match &event.message {
                Some(m) => store.message(m).await.map_err(internal)?,
                None => None,
            };
            common.extend(header("x-liaison-event-id", &d.event_id));
            if let Some(token) = &config.token {
                common.extend(header("x-a2a-notification-token", token));
            }
            let mut out = Vec::new();
            let responses = crate::a2a::convert::event(
                &event,
                &view.thread,
                cause.as_ref(),
                view.approval.as_ref(),
            );
            for response in responses {
                let body = serde_json::to_vec(&crate::a2a::protojson::render(&response))
                    .map_err(|e| SendFailure::Request(e.to_string()))?;
                let mut headers = common.clone();
                let authorization = match (&config.auth_scheme, &config.auth_credentials) {
                    (Some(scheme), Some(credentials)) => format!("{scheme} {credentials}"),
                    _ => {
                        let delivery = crate::keys::push_jwt::PushDelivery {
                            issuer: &self.issuer,
                            audience: &d.url,
                            task_id: Some(thread_id.as_str()),
                            body: &body,
                            now: now.0 / 1000,
                        };
                        let jwt = crate::keys::push_jwt::push_jwt(&self.keys.current(), &delivery)
                            .map_err(|e| SendFailure::Request(e.to_string()))?;
                        format!("Bearer {jwt}")
                    }
                };
                let value = HeaderValue::from_str(&authorization).map_err(|_| {
                    SendFailure::Gone(
                        "the push config's authentication is not a valid header".into(),
                    )
                })?;
                headers.insert(AUTHORIZATION, value);
                out.push((headers, body));
            }
            return Ok(out);
        }
        let webhook_id = d
            .endpoint
            .strip_prefix("webhook:")
            .ok_or_else(|| gone("the endpoint"))?;
        let webhook = store
            .webhook(webhook_id)
            .await
            .map_err(internal)?
            .ok_or_else(|| gone("the webhook"))?;
        let secret = self
            .service
            .webhook_secret(&webhook)
            .map_err(|e| SendFailure::Request(e.message))?;
        let mut body = d.payload.clone().unwrap_or_default().into_bytes();
        if d.event_type == "approval.pending" {
            body = self
                .with_approval_link(&body, webhook.person.as_ref())
                .await;
        }
        let timestamp = now.0 / 1000;
        let signature = signature::sign(&secret, &d.event_id, timestamp, &body)
            .ok_or_else(|| SendFailure::Gone("the webhook secret is malformed".into()))?;
        let mut headers = common;
        headers.extend(header("webhook-id", &d.event_id));
        headers.extend(header("webhook-timestamp", &timestamp.to_string()));
        headers.extend(header("webhook-signature", &signature));
        Ok(vec![(headers, body)])
    }

    /// An `approval.pending` body with a fresh single-use approval link (minted per attempt, so
    /// the secret is never stored in the outbox) for the webhook's person when they are an
    /// approver, else the first approver. Without one (the approval was decided meanwhile, or
    /// no console), `approval_link` is null.
    async fn with_approval_link(
        &self,
        body: &[u8],
        person: Option<&crate::domain::PersonId>,
    ) -> Vec<u8> {
        let Ok(mut event) = serde_json::from_slice::<serde_json::Value>(body) else {
            return body.to_vec();
        };
        let approvers: Vec<crate::domain::PersonId> =
            serde_json::from_value(event["data"]["approvers"].clone()).unwrap_or_default();
        let person = person.filter(|p| approvers.contains(p));
        let link = match crate::domain::ApprovalId::parse(
            event["data"]["approval_id"].as_str().unwrap_or_default(),
        ) {
            Ok(id) => match self.service.system_admin().await {
                Ok(admin) => self
                    .service
                    .issue_approval_link(&admin, &id, person, None)
                    .await
                    .map(|issued| {
                        serde_json::json!({
                            "url": format!("{}/console/approvals/{id}?link={}", self.issuer, issued.secret),
                            "for": issued.link.person,
                            "expires_at": issued.link.expires_at,
                        })
                    })
                    .ok(),
                Err(_) => None,
            },
            Err(_) => None,
        };
        event["data"]["approval_link"] = link.unwrap_or(serde_json::Value::Null);
        serde_json::to_vec(&event).unwrap_or_else(|_| body.to_vec())
    }

    /// Delivers until `shutdown`: claims what is due (up to `concurrency` in flight), sleeps
    /// until woken by the bus, the next due retry or the safety sweep. In-flight attempts finish
    /// (bounded by the request timeout) before it returns.
    pub async fn run(
        self: Arc<Self>,
        bus: Arc<dyn WakeBus>,
        concurrency: usize,
        shutdown: CancellationToken,
    ) {
        let mut wake = bus.subscribe(&Topic::outbox());
        let slots = Arc::new(Semaphore::new(concurrency.max(1)));
        let mut tasks = tokio::task::JoinSet::new();
        loop {
            while tasks.try_join_next().is_some() {}
            let free = slots.available_permits();
            let claimed = if free == 0 {
                Vec::new()
            } else {
                match self.service.claim_deliveries(&self.id, free as i64).await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(error = %e, "Could not claim deliveries; will retry.");
                        Vec::new()
                    }
                }
            };
            let full = free > 0 && claimed.len() == free;
            for d in claimed {
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    break;
                };
                let me = self.clone();
                tasks.spawn(async move {
                    if let Err(e) = me.attempt(d).await {
                        tracing::warn!(error = %e, "A delivery attempt could not be recorded; its lease will expire and it will be retried.");
                    }
                    drop(permit);
                });
            }
            if full {
                continue;
            }
            let pause = match self.service.next_delivery_due().await {
                Ok(Some(due)) => {
                    let ms = due.0 - self.service.clock_now().0;
                    if ms > 0 {
                        Duration::from_millis(ms as u64).min(SAFETY_SWEEP)
                    } else {
                        // Due but not claimable (waiting behind an earlier delivery in flight, or all
                        // slots busy): the commit that frees it wakes us.
                        SAFETY_SWEEP
                    }
                }
                Ok(None) => SAFETY_SWEEP,
                Err(e) => {
                    tracing::warn!(error = %e, "Could not read the outbox; will retry.");
                    Duration::from_secs(1)
                }
            };
            tokio::select! {
                () = wake.woken() => {}
                () = tokio::time::sleep(pause) => {}
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                () = shutdown.cancelled() => break,
            }
        }
        while tasks.join_next().await.is_some() {}
    }
}
