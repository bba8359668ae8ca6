//! The delivery worker: drains the durable outbox (A2A pushes, Standard Webhooks signed by
//! [`signature`], and sends to remote agents through [`crate::workers::remote::Sender`]).
//!
//! A worker is a loop around [`Worker::deliver_next`]-sized steps: claim due deliveries by lease
//! (the service and store decide which and for how long), build each request (an A2A push is
//! rendered from its task event as `StreamResponse`s; a webhook's body was stored with it), send
//! it, and record the attempt with its verdict. It wakes on the bus's outbox topic (published by
//! every commit that enqueues, on every replica), at the next due retry, and on a slow safety
//! sweep. It asks the service for everything (what is due, what a delivery needs, recording
//! the attempt), never the store; the A2A front renders pushes (`a2a::push`), the outbound client
//! sends. Nothing depends on it but the app.

pub mod signature;
mod webhook;

use crate::a2a::push::header;

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::bus::{Topic, WakeBus};
use crate::domain::Timestamp;
use crate::domain::delivery::{AttemptVerdict, SendFailure, SendResult};
use crate::service::{Service, ServiceError};
use crate::store::{DeliveryRecord, PUSH_EVENT};
use crate::workers::lease::{self, Leased};

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
    remote: Option<crate::workers::remote::Sender>,
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
    pub fn with_remote(mut self, sender: crate::workers::remote::Sender) -> Worker {
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
        // The attempt continues the trace of the operation that queued the delivery; the
        // requests it makes carry its context (`traceparent`).
        let span = crate::telemetry::span!(
            "outbox.attempt",
            otel.kind = "client",
            trace_id = tracing::field::Empty
        );
        if !span.is_none() {
            crate::telemetry::adopt(&span, d.trace.as_ref());
            crate::telemetry::record_trace_id(&span);
            crate::telemetry::attribute(&span, "liaison.delivery", d.id);
            crate::telemetry::attribute(&span, "liaison.event_type", d.event_type.clone());
            crate::telemetry::attribute(&span, "liaison.attempt", d.attempts);
        }
        let send = async {
            if d.event_type.starts_with("remote.") {
                match &self.remote {
                    Some(sender) => sender.deliver(&d).await,
                    None => SendResult::Failed(SendFailure::Request(
                        "this process does not send to remote agents".into(),
                    )),
                }
            } else {
                self.post(&d, started_at).await
            }
        };
        let result = send.instrument(span.clone()).await;
        match &result {
            SendResult::Status { code, .. } => {
                crate::telemetry::attribute(&span, "http.response.status_code", i64::from(*code));
                if !(200..300).contains(code) {
                    crate::telemetry::failed(&span, format!("answered {code}"));
                }
            }
            SendResult::Failed(f) => crate::telemetry::failed(&span, f.class()),
        }
        drop(span);
        let latency = clock.elapsed();
        let (verdict, finished) = self
            .service
            .finish_delivery(
                &d,
                &self.id,
                started_at,
                latency,
                &result,
                crate::domain::secret::random_unit(),
            )
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
        if finished.applied {
            crate::metrics::get().delivery(match verdict {
                AttemptVerdict::Delivered => "delivered",
                AttemptVerdict::RetryAt(_) => "retried",
                AttemptVerdict::Dead => "dead",
            });
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
        let mut common = HeaderMap::new();
        common.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        common.extend(header("x-liaison-delivery", &d.id.to_string()));
        common.extend(header("x-liaison-attempt", &d.attempts.to_string()));
        if d.event_type == PUSH_EVENT {
            let parts = self.service.push_delivery(d).await?;
            let to = crate::a2a::push::PushTarget {
                url: &d.url,
                issuer: &self.issuer,
                event_id: &d.event_id,
                now_s: now.0 / 1000,
            };
            return crate::a2a::push::requests(&parts, &self.keys.current(), &to, common);
        }
        let (webhook, secrets) = self.service.webhook_delivery(d).await?;
        let mut body = d.payload.clone().unwrap_or_default().into_bytes();
        if d.event_type == "approval.pending" {
            body = webhook::with_approval_link(
                &self.service,
                &self.issuer,
                d.id,
                &body,
                webhook.person.as_ref(),
            )
            .await;
        }
        webhook::signed(common, &secrets, &d.event_id, now, body)
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
        let shape = lease::Shape {
            what: "deliveries",
            topic: Topic::outbox(),
            slots: concurrency,
            sweep: SAFETY_SWEEP,
            min_pause: Duration::ZERO,
            // Due but not claimed: all slots were busy (a finishing attempt wakes us), or another
            // replica's worker took it between the claim and this read. Deliveries queued behind
            // a head never count as due (`next_delivery_due`), so this is a short re-check, well
            // within the second a retry may be late by.
            overdue_pause: Duration::from_secs(1),
            at_stop: lease::AtStop::Finish,
        };
        lease::run(self, bus, shape, shutdown).await;
    }
}

impl Leased for Worker {
    type Item = DeliveryRecord;

    async fn claim(&self, n: usize) -> Result<Vec<DeliveryRecord>, ServiceError> {
        self.service.claim_deliveries(&self.id, n as i64).await
    }

    async fn next_due(&self) -> Result<Option<Timestamp>, ServiceError> {
        self.service.next_delivery_due().await
    }

    async fn work(self: Arc<Self>, d: DeliveryRecord, _shutdown: CancellationToken) {
        if let Err(e) = self.attempt(d).await {
            tracing::warn!(error = %e, "A delivery attempt could not be recorded; its lease will expire and it will be retried.");
        }
    }

    fn now(&self) -> Timestamp {
        self.service.clock_now()
    }
}
