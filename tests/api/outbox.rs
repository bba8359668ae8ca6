//! The durable outbox, driven step by step with `deliver_next()` and a manual clock: A2A push
//! events reach a local receiver in order with verifiable credentials; failures retry on the
//! schedule (5xx, timeouts, refused connections, 429 with Retry-After) without reordering; 4xx
//! are permanent; dead deliveries are listed and retried by hand; repeated dead letters disable
//! an endpoint; the SSRF guard refuses private targets; two workers never make one attempt twice.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use liaison::bus::{LocalBus, Subscription, Topic, WakeBus};
use liaison::clock::Clock;
use liaison::domain::address::AddressPolicy;
use liaison::domain::delivery::{AttemptVerdict, OutboxSettings, SendFailure, SendResult};
use liaison::domain::{Kind, PersonKind, Scope, ThreadId, Timestamp};
use liaison::keys::ring::{KeyRing, MasterKey, SigningKey};
use liaison::net::outbound::OutboundClient;
use liaison::service::{
    Caller, PushConfigSpec, Service, Settings, SkillRoute, TaskMessage, WebhookSpec,
};
use liaison::store::{DeliveryFilter, DeliveryState};
use liaison::workers::outbox::Worker;

use crate::helpers::{TestEnv, channel, post};

pub(crate) const MASTER_HEX: &str =
    "3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c";

/// What the receiver answers to one request.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Answer {
    Status(u16),
    RetryAfter(u16, u64),
    Slow(Duration),
    Redirect(&'static str),
}

/// One request the receiver got.
#[derive(Clone, Debug)]
pub(crate) struct Received {
    pub(crate) headers: HeaderMap,
    pub(crate) raw: String,
    pub(crate) body: serde_json::Value,
}

/// A local HTTP receiver on port 0: answers from a script (then 200), records every request.
#[derive(Clone)]
pub(crate) struct Receiver {
    pub(crate) url: String,
    pub(crate) script: Arc<Mutex<VecDeque<Answer>>>,
    got: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    pub(crate) async fn start() -> Receiver {
        Self::start_on(0).await
    }

    /// A receiver on `port` (0: any free port).
    pub(crate) async fn start_on(port: u16) -> Receiver {
        let script: Arc<Mutex<VecDeque<Answer>>> = Arc::default();
        let got: Arc<Mutex<Vec<Received>>> = Arc::default();
        let (s, g) = (script.clone(), got.clone());
        let app = axum::Router::new().fallback(move |headers: HeaderMap, body: String| {
            let (s, g) = (s.clone(), g.clone());
            async move {
                let answer = s.lock().unwrap().pop_front();
                g.lock().unwrap().push(Received {
                    headers,
                    body: serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
                    raw: body,
                });
                let mut response = axum::http::Response::builder();
                let status = match answer {
                    None => 200,
                    Some(Answer::Status(code)) => code,
                    Some(Answer::RetryAfter(code, secs)) => {
                        response = response.header("retry-after", secs.to_string());
                        code
                    }
                    Some(Answer::Slow(d)) => {
                        tokio::time::sleep(d).await;
                        200
                    }
                    Some(Answer::Redirect(to)) => {
                        response = response.header("location", to);
                        302
                    }
                };
                response
                    .status(StatusCode::from_u16(status).unwrap())
                    .body(axum::body::Body::empty())
                    .unwrap()
            }
        });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver { url, script, got }
    }

    pub(crate) fn answer(&self, answers: &[Answer]) {
        self.script.lock().unwrap().extend(answers.iter().cloned());
    }

    pub(crate) fn got(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// The task states of the push bodies received, in order (artifact updates as "artifact").
    fn states(&self) -> Vec<String> {
        self.got()
            .iter()
            .map(|r| {
                r.body["statusUpdate"]["status"]["state"]
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| {
                        if r.body.get("artifactUpdate").is_some() {
                            "artifact".into()
                        } else {
                            r.body["type"].as_str().unwrap_or("?").to_owned()
                        }
                    })
            })
            .collect()
    }
}

pub(crate) fn outbox_settings() -> OutboxSettings {
    OutboxSettings {
        jitter: 0.0,
        timeout: Duration::from_secs(1),
        connect_timeout: Duration::from_secs(1),
        allow: AddressPolicy::parse(&["127.0.0.1".into()]).unwrap(),
        ..OutboxSettings::default()
    }
}

fn settings(outbox: OutboxSettings) -> Settings {
    Settings {
        skills: vec![SkillRoute {
            id: "ask".into(),
            channel: channel("partners"),
            kind: Kind::Question,
            impact: None,
            direct_answers: false,
        }],
        default_skill: Some("ask".into()),
        outbox,
        ..Settings::default()
    }
}

pub(crate) fn ring() -> KeyRing {
    let master = MasterKey::from_hex(MASTER_HEX).unwrap();
    let (_, record) = SigningKey::generate(&master).unwrap();
    KeyRing::open(&[record], &master).unwrap()
}

pub(crate) fn worker(service: &Service, keys: Arc<KeyRing>) -> Worker {
    let s = &service.settings().outbox;
    let client = OutboundClient::new(s.allow.clone(), s.connect_timeout, s.timeout).unwrap();
    Worker::new(
        service.clone(),
        client,
        keys.into(),
        "https://liaison.test".into(),
    )
}

struct Setup {
    env: TestEnv,
    alice: Caller,
    partner: Caller,
    keys: Arc<KeyRing>,
    worker: Worker,
}

async fn setup(outbox: OutboxSettings) -> Setup {
    setup_on(outbox, Arc::new(LocalBus::default())).await
}

async fn setup_on(outbox: OutboxSettings, bus: Arc<dyn WakeBus>) -> Setup {
    let master = MasterKey::from_hex(MASTER_HEX).unwrap();
    let env = TestEnv::with_master_on(settings(outbox), master, bus).await;

    let alice = env.member("alice", "claude@a:1").await;
    env.person("partner", PersonKind::External).await;
    env.channel("partners", &["alice", "partner"]).await;
    let partner = env
        .caller("partner", Scope::Agent, "remote@partner:1")
        .await;
    let keys = Arc::new(ring());
    let worker = worker(&env.service, keys.clone());
    Setup {
        env,
        alice,
        partner,
        keys,
        worker,
    }
}

impl Setup {
    async fn task(&self, id: &str) -> ThreadId {
        let m = TaskMessage {
            message_id: id.into(),
            body: format!("Question {id}"),
            ..Default::default()
        };
        let view = self
            .env
            .service
            .send_task_message(&self.partner, m)
            .await
            .unwrap();
        view.thread.id
    }

    async fn push_to(&self, task: &ThreadId, url: &str, spec: PushConfigSpec) {
        let spec = PushConfigSpec {
            url: url.into(),
            ..spec
        };
        self.env
            .service
            .set_push_config(&self.partner, task, spec)
            .await
            .unwrap();
    }

    async fn say(&self, task: &ThreadId, kind: &str, body: &str) {
        self.env
            .service
            .post(&self.alice, post(kind, None, Some(task), body))
            .await
            .unwrap();
    }

    /// Runs steps until nothing is due; returns the verdicts.
    async fn drain(&self) -> Vec<AttemptVerdict> {
        let mut out = Vec::new();
        while let Some(step) = self.worker.deliver_next().await.unwrap() {
            out.push(step.verdict);
        }
        out
    }

    async fn list(&self, state: Option<DeliveryState>) -> Vec<liaison::store::DeliveryRecord> {
        self.env
            .service
            .deliveries(
                &self.env.admin,
                DeliveryFilter {
                    state,
                    limit: 100,
                    ..Default::default()
                },
            )
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn outbox_push_events_arrive_in_order_with_a_jwt_that_verifies() {
    let s = setup(outbox_settings()).await;
    let rx = Receiver::start().await;
    let task = s.task("m1").await;
    s.push_to(&task, &rx.url, PushConfigSpec::default()).await;
    s.say(&task, "announce", "Looking").await;
    s.say(&task, "reply", "TLS 1.3 only").await;
    let verdicts = s.drain().await;
    assert_eq!(verdicts.len(), 3);
    assert!(verdicts.iter().all(|v| *v == AttemptVerdict::Delivered));
    assert_eq!(
        rx.states(),
        [
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            "artifact",
            "TASK_STATE_COMPLETED"
        ]
    );
    let got = rx.got();
    for r in &got {
        let token = r.headers["authorization"]
            .to_str()
            .unwrap()
            .strip_prefix("Bearer ")
            .unwrap()
            .to_owned();
        let expected = liaison::keys::push_jwt::PushDelivery {
            issuer: "https://liaison.test",
            audience: &rx.url,
            task_id: Some(task.as_str()),
            body: r.raw.as_bytes(),
            now: crate::helpers::t0().0 / 1000,
        };
        let claims =
            liaison::keys::push_jwt::verify_push_jwt(&s.keys.jwks(), &token, &expected).unwrap();
        assert_eq!(claims["taskId"], task.as_str());
        // Another body under the same token is refused.
        let swapped = liaison::keys::push_jwt::PushDelivery {
            body: b"{}",
            ..expected
        };
        assert!(
            liaison::keys::push_jwt::verify_push_jwt(&s.keys.jwks(), &token, &swapped).is_err()
        );
    }
    assert_eq!(got[0].headers["x-liaison-event-id"], format!("{task}:1"));
    // Nothing is left to send.
    assert!(s.worker.deliver_next().await.unwrap().is_none());
    assert_eq!(s.list(Some(DeliveryState::Delivered)).await.len(), 3);
}

#[tokio::test]
async fn outbox_push_uses_the_configs_own_authentication_and_token() {
    let s = setup(outbox_settings()).await;
    let rx = Receiver::start().await;
    let task = s.task("m1").await;
    let spec = PushConfigSpec {
        token: Some("tok-1".into()),
        auth_scheme: Some("Bearer".into()),
        auth_credentials: Some("secret-1".into()),
        ..Default::default()
    };
    s.push_to(&task, &rx.url, spec).await;
    s.drain().await;
    let got = rx.got();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].headers["authorization"], "Bearer secret-1");
    assert_eq!(got[0].headers["x-a2a-notification-token"], "tok-1");
}

#[tokio::test]
async fn outbox_failures_retry_on_schedule_and_later_events_wait_their_turn() {
    let s = setup(outbox_settings()).await;
    let rx = Receiver::start().await;
    rx.answer(&[
        Answer::Status(503),
        Answer::Slow(Duration::from_secs(3)),
        Answer::RetryAfter(429, 300),
    ]);
    let task = s.task("m1").await;
    s.push_to(&task, &rx.url, PushConfigSpec::default()).await;
    s.say(&task, "announce", "Looking").await;
    let clock = &s.env.clock;

    let first = s.worker.deliver_next().await.unwrap().unwrap();
    assert_eq!(
        first.result,
        SendResult::Status {
            code: 503,
            retry_after: None
        }
    );
    // The retry is not due yet, and the second event waits behind the first.
    assert!(s.worker.deliver_next().await.unwrap().is_none());
    clock.advance_secs(5);
    let second = s.worker.deliver_next().await.unwrap().unwrap();
    assert!(
        matches!(second.result, SendResult::Failed(SendFailure::Timeout(_))),
        "{:?}",
        second.result
    );
    assert_eq!(second.delivery.event_seq, Some(1));
    clock.advance_secs(30);
    let third = s.worker.deliver_next().await.unwrap().unwrap();
    assert_eq!(
        third.result,
        SendResult::Status {
            code: 429,
            retry_after: Some(Duration::from_secs(300))
        }
    );
    // Retry-After (300 s) outweighs the schedule's 2 minutes.
    clock.advance_secs(120);
    assert!(s.worker.deliver_next().await.unwrap().is_none());
    clock.advance_secs(180);
    assert_eq!(
        s.drain().await,
        [AttemptVerdict::Delivered, AttemptVerdict::Delivered]
    );
    // Four tries of the first event (the slow one timed out but was received), then the second.
    let states = rx.states();
    assert_eq!(states.len(), 5);
    assert_eq!(states[4], "TASK_STATE_WORKING");
    assert!(states[..4].iter().all(|s| s == "TASK_STATE_SUBMITTED"));
    let (first_id, attempts) = {
        let d = s.list(Some(DeliveryState::Delivered)).await;
        let first = d.iter().find(|d| d.event_seq == Some(1)).unwrap().id;
        let view = s.env.service.delivery(&s.env.admin, first).await.unwrap();
        (first, view.attempts_made)
    };
    let classes: Vec<&str> = attempts.iter().map(|a| a.error_class.as_str()).collect();
    assert_eq!(
        classes,
        ["status", "timeout", "status", "success"],
        "delivery {first_id}"
    );
    assert_eq!(attempts[0].status, Some(503));
    assert_eq!(attempts[2].status, Some(429));
}

/// A reply is one delivery of two POSTs (its artifact, then its status). A receiver that
/// deduplicates on `X-Liaison-Event-Id`, as the README tells it to, must see both, even when the
/// second POST failed and the retry sent the first again: each POST has its own id, the same at
/// every attempt.
#[tokio::test]
async fn outbox_each_post_of_a_delivery_has_its_own_event_id_stable_across_retries() {
    let s = setup(outbox_settings()).await;
    let rx = Receiver::start().await;
    // SUBMITTED, then the reply's artifact is taken and its status refused.
    rx.answer(&[
        Answer::Status(200),
        Answer::Status(200),
        Answer::Status(503),
    ]);
    let task = s.task("m1").await;
    s.push_to(&task, &rx.url, PushConfigSpec::default()).await;
    s.say(&task, "reply", "TLS 1.3 only").await;
    assert_eq!(s.drain().await.len(), 2);
    s.env.clock.advance_secs(5);
    assert_eq!(s.drain().await, [AttemptVerdict::Delivered]);

    let got = rx.got();
    let id = |r: &Received| r.headers["x-liaison-event-id"].to_str().unwrap().to_owned();
    assert_eq!(
        got.len(),
        5,
        "SUBMITTED, artifact, status (503), artifact, status"
    );
    assert_eq!(
        id(&got[0]),
        format!("{task}:1"),
        "a one-POST event keeps its id"
    );
    assert_eq!(id(&got[1]), format!("{task}:2.1"));
    assert_eq!(id(&got[2]), format!("{task}:2.2"));
    assert_eq!(id(&got[3]), id(&got[1]), "stable across retries");
    assert_eq!(id(&got[4]), id(&got[2]), "stable across retries");
    // The deduplicating receiver: what it accepted (answered 2xx), each id once.
    let mut seen = std::collections::HashSet::new();
    let accepted: Vec<String> = got
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 2)
        .filter(|(_, r)| seen.insert(id(r)))
        .map(|(_, r)| {
            r.body["statusUpdate"]["status"]["state"]
                .as_str()
                .unwrap_or("artifact")
                .to_owned()
        })
        .collect();
    assert_eq!(
        accepted,
        ["TASK_STATE_SUBMITTED", "artifact", "TASK_STATE_COMPLETED"]
    );
}

/// The worker sleeps until the next due time it reads: that time must be the head of each
/// queue's, never a later delivery's that cannot go before its head (which is always "overdue"
/// and made the worker fall back to the 30 s safety sweep).
#[tokio::test]
async fn outbox_the_next_due_time_is_the_retry_of_the_head_whatever_queues_behind_it() {
    let s = setup(OutboxSettings {
        schedule: vec![
            Duration::from_secs(1),
            Duration::from_secs(1),
            Duration::from_secs(2),
        ],
        lease: Duration::from_secs(5),
        ..outbox_settings()
    })
    .await;
    let rx = Receiver::start().await;
    rx.answer(&[Answer::RetryAfter(503, 1), Answer::Status(503)]);
    let task = s.task("m1").await;
    s.push_to(&task, &rx.url, PushConfigSpec::default()).await;
    for word in ["Looking", "Still looking", "Nearly there"] {
        s.say(&task, "announce", word).await;
    }
    let clock = &s.env.clock;
    let service = &s.env.service;
    assert_eq!(
        service.next_delivery_due().await.unwrap(),
        Some(clock.now())
    );

    // The head fails (Retry-After: 1) with three deliveries queued behind it.
    let started = clock.now();
    let first = s.worker.deliver_next().await.unwrap().unwrap();
    assert!(matches!(first.verdict, AttemptVerdict::RetryAt(_)));
    assert_eq!(s.list(Some(DeliveryState::Pending)).await.len(), 4);
    assert_eq!(
        service.next_delivery_due().await.unwrap(),
        Some(Timestamp(started.0 + 1_000)),
        "the retry one second on, not a queued delivery that cannot go"
    );
    clock.advance_secs(1);
    let second = s.worker.deliver_next().await.unwrap().unwrap();
    assert!(matches!(second.verdict, AttemptVerdict::RetryAt(_)));
    assert_eq!(
        service.next_delivery_due().await.unwrap(),
        Some(Timestamp(started.0 + 2_000)),
        "the schedule's second step"
    );

    // A worker dies with the head in flight: it is due when its lease ends, not before.
    clock.advance_secs(1);
    let claimed = service.claim_deliveries("dead-worker", 1).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(
        service.next_delivery_due().await.unwrap(),
        Some(Timestamp(clock.now().0 + 5_000)),
        "the lease's end"
    );
    assert!(s.worker.deliver_next().await.unwrap().is_none());
    clock.advance_secs(5);
    assert_eq!(
        s.drain().await,
        [AttemptVerdict::Delivered; 4],
        "the head, then the three behind it, in order"
    );
    assert_eq!(service.next_delivery_due().await.unwrap(), None);
}

/// A bus that counts what is published on the outbox's topic.
#[derive(Default)]
struct CountingBus {
    inner: LocalBus,
    outbox: AtomicUsize,
}

impl WakeBus for CountingBus {
    fn publish(&self, topic: &Topic) {
        if *topic == Topic::outbox() {
            self.outbox.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.publish(topic);
    }

    fn subscribe(&self, topic: &Topic) -> Subscription {
        self.inner.subscribe(topic)
    }

    fn hand(&self, topic: &Topic) {
        self.inner.hand(topic);
    }

    fn handoff(&self, topic: &Topic) -> liaison::bus::HandoffWaiter {
        self.inner.handoff(topic)
    }
}

/// A finished attempt wakes the outbox's workers only when it made something claimable: the
/// next delivery of its queue, or what a death enqueued. A retry keeps the head, and the last of
/// a queue frees nothing (each wake-up is a claim, a write, on every replica).
#[tokio::test]
async fn outbox_a_finish_wakes_the_workers_only_when_it_freed_a_delivery() {
    let bus = Arc::new(CountingBus::default());
    let s = setup_on(outbox_settings(), bus.clone()).await;
    let rx = Receiver::start().await;
    rx.answer(&[Answer::Status(503)]);
    let task = s.task("m1").await;
    s.push_to(&task, &rx.url, PushConfigSpec::default()).await;
    s.say(&task, "announce", "Looking").await;
    let wakes = || bus.outbox.load(Ordering::SeqCst);

    // Two deliveries queued on the task's key; the head fails and is retried: nothing freed.
    let before = wakes();
    let first = s.worker.deliver_next().await.unwrap().unwrap();
    assert!(matches!(first.verdict, AttemptVerdict::RetryAt(_)));
    assert_eq!(wakes(), before, "a retry frees nothing");
    s.env.clock.advance_secs(5);
    let again = s.worker.deliver_next().await.unwrap().unwrap();
    assert_eq!(again.verdict, AttemptVerdict::Delivered);
    assert_eq!(
        wakes(),
        before + 1,
        "the head delivered frees the one behind it"
    );
    let last = s.worker.deliver_next().await.unwrap().unwrap();
    assert_eq!(last.verdict, AttemptVerdict::Delivered);
    assert_eq!(wakes(), before + 1, "the last of its queue frees nothing");

    // A 4xx is permanent: the death wakes the workers (it may enqueue webhooks, free the next).
    rx.answer(&[Answer::Status(404)]);
    s.say(&task, "announce", "Found it").await;
    let before = wakes();
    let dead = s.worker.deliver_next().await.unwrap().unwrap();
    assert_eq!(dead.verdict, AttemptVerdict::Dead);
    assert_eq!(wakes(), before + 1, "a death wakes the workers");
    assert!(s.worker.deliver_next().await.unwrap().is_none());
}

#[tokio::test]
async fn outbox_a_refused_connection_is_retried_until_the_receiver_listens() {
    let s = setup(outbox_settings()).await;
    // A port nobody listens on (bound, then released).
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let task = s.task("m1").await;
    s.push_to(
        &task,
        &format!("http://127.0.0.1:{port}/hook"),
        PushConfigSpec::default(),
    )
    .await;
    let step = s.worker.deliver_next().await.unwrap().unwrap();
    assert!(
        matches!(step.result, SendResult::Failed(SendFailure::Connect(_))),
        "{:?}",
        step.result
    );
    assert!(matches!(step.verdict, AttemptVerdict::RetryAt(_)));
    assert_eq!(s.list(Some(DeliveryState::Pending)).await.len(), 1);
    // The receiver comes up on that port: the retry, once due, is delivered.
    let rx = Receiver::start_on(port).await;
    assert!(
        s.worker.deliver_next().await.unwrap().is_none(),
        "not due yet"
    );
    s.env.clock.advance_secs(5);
    assert_eq!(s.drain().await, [AttemptVerdict::Delivered]);
    assert_eq!(rx.states(), ["TASK_STATE_SUBMITTED"]);
}

#[tokio::test]
async fn outbox_a_4xx_is_permanent_and_a_dead_delivery_is_listed_and_retried_by_hand() {
    let s = setup(outbox_settings()).await;
    let rx = Receiver::start().await;
    rx.answer(&[Answer::Status(404)]);
    let task = s.task("m1").await;
    s.push_to(&task, &rx.url, PushConfigSpec::default()).await;
    s.say(&task, "announce", "Looking").await;
    // The first event dies at once; the second is not held behind a dead one.
    assert_eq!(
        s.drain().await,
        [AttemptVerdict::Dead, AttemptVerdict::Delivered]
    );
    let dead = s.list(Some(DeliveryState::Dead)).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].last_status, Some(404));
    let failed = s
        .env
        .service
        .deliveries(
            &s.env.admin,
            DeliveryFilter {
                failed: true,
                limit: 10,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(failed.is_empty(), "dead is not 'failed and retrying'");
    // A retry by hand sends it again.
    s.env
        .service
        .retry_delivery(&s.env.admin, dead[0].id)
        .await
        .unwrap();
    assert_eq!(s.drain().await, [AttemptVerdict::Delivered]);
    assert_eq!(
        rx.states(),
        [
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            "TASK_STATE_SUBMITTED"
        ]
    );
    // Retrying what is not dead is refused and changes nothing; an unknown id is not found.
    let err = s
        .env
        .service
        .retry_delivery(&s.env.admin, dead[0].id)
        .await
        .unwrap_err();
    assert_eq!(err.code, liaison::service::ErrorCode::InvalidInput);
    let err = s
        .env
        .service
        .retry_delivery(&s.env.admin, 999_999)
        .await
        .unwrap_err();
    assert_eq!(err.code, liaison::service::ErrorCode::NotFound);
    // Only admins see deliveries.
    assert!(
        s.env
            .service
            .deliveries(&s.alice, DeliveryFilter::default())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn outbox_after_the_last_attempt_a_delivery_is_dead_and_repeated_deaths_disable_the_endpoint()
{
    let outbox = OutboxSettings {
        schedule: vec![Duration::from_secs(10)],
        disable_after: 2,
        ..outbox_settings()
    };
    let s = setup(outbox).await;
    let rx = Receiver::start().await;
    let ops = Receiver::start().await;
    let (_hook, _secret) = s
        .env
        .service
        .add_webhook(
            &s.env.admin,
            WebhookSpec {
                url: ops.url.clone(),
                events: vec!["delivery.dead".into(), "endpoint.disabled".into()],
                ..Default::default()
            },
        )
        .await
        .unwrap();
    rx.answer(&[Answer::Status(500); 4]);
    let task = s.task("m1").await;
    s.push_to(&task, &rx.url, PushConfigSpec::default()).await;
    s.say(&task, "announce", "one").await;
    s.say(&task, "announce", "two").await;
    let clock = &s.env.clock;
    // Event 1: two attempts (the schedule has one retry), then dead; event 2 the same, and the
    // second dead letter disables the endpoint, which kills event 3.
    let step = s.worker.deliver_next().await.unwrap().unwrap();
    assert!(matches!(step.verdict, AttemptVerdict::RetryAt(_)));
    clock.advance_secs(10);
    let mut verdicts = Vec::new();
    while let Some(step) = s.worker.deliver_next().await.unwrap() {
        verdicts.push((step.delivery.event_type.clone(), step.verdict));
        clock.advance_secs(10);
    }
    let push_verdicts: Vec<_> = verdicts
        .iter()
        .filter(|(t, _)| t == "task.event")
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(push_verdicts[0], AttemptVerdict::Dead);
    assert_eq!(*push_verdicts.last().unwrap(), AttemptVerdict::Dead);
    assert_eq!(
        rx.got().len(),
        4,
        "two attempts each for events 1 and 2, none for 3"
    );
    let dead = s.list(Some(DeliveryState::Dead)).await;
    assert_eq!(dead.len(), 3);
    assert!(
        dead.iter()
            .any(|d| d.last_error.as_deref() == Some("endpoint disabled"))
    );
    let events: Vec<String> = ops
        .got()
        .iter()
        .map(|r| r.body["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        events,
        ["delivery.dead", "delivery.dead", "endpoint.disabled"]
    );
    // New events for a disabled endpoint are not even queued.
    s.say(&task, "announce", "three").await;
    assert!(s.worker.deliver_next().await.unwrap().is_none());
}

#[tokio::test]
async fn outbox_ssrf_names_and_redirects_to_private_addresses_are_refused() {
    let strict = OutboxSettings {
        allow: AddressPolicy::default(),
        ..outbox_settings()
    };
    let s = setup(strict).await;
    let task = s.task("m1").await;
    // Literal private, loopback, link-local and v4-mapped addresses are refused when stored.
    for url in [
        "http://127.0.0.1:8080/x",
        "http://10.0.0.1/x",
        "http://169.254.169.254/latest/meta-data",
        "http://[::ffff:127.0.0.1]/x",
        "http://[::1]/x",
        "ftp://example.com/x",
    ] {
        let spec = PushConfigSpec {
            url: url.into(),
            ..Default::default()
        };
        let err = s
            .env
            .service
            .set_push_config(&s.partner, &task, spec)
            .await
            .unwrap_err();
        assert_eq!(err.code, liaison::service::ErrorCode::InvalidInput, "{url}");
    }
    // A name is stored, but it resolves to loopback, which the client refuses to connect to.
    let rx = Receiver::start().await;
    let port = rx.url.rsplit(':').next().unwrap();
    s.push_to(
        &task,
        &format!("http://localhost:{port}"),
        PushConfigSpec::default(),
    )
    .await;
    let step = s.worker.deliver_next().await.unwrap().unwrap();
    assert!(
        matches!(
            step.result,
            SendResult::Failed(SendFailure::RefusedAddress(_))
        ),
        "{:?}",
        step.result
    );
    assert_eq!(step.verdict, AttemptVerdict::Dead);
    assert!(rx.got().is_empty());

    // With loopback allowed, a redirect (here to a private address) is not followed: it is a
    // permanent failure.
    let s = setup(outbox_settings()).await;
    let task = s.task("m1").await;
    let rx = Receiver::start().await;
    rx.answer(&[Answer::Redirect("http://10.0.0.1/internal")]);
    s.push_to(&task, &rx.url, PushConfigSpec::default()).await;
    let step = s.worker.deliver_next().await.unwrap().unwrap();
    assert_eq!(
        step.result,
        SendResult::Status {
            code: 302,
            retry_after: None
        }
    );
    assert_eq!(step.verdict, AttemptVerdict::Dead);
    assert_eq!(rx.got().len(), 1);
}

#[tokio::test]
async fn outbox_webhooks_sign_message_events_and_filter_by_channel() {
    let s = setup(outbox_settings()).await;
    let rx = Receiver::start().await;
    let other = Receiver::start().await;
    let (hook, secret) = s
        .env
        .service
        .add_webhook(
            &s.env.admin,
            WebhookSpec {
                url: rx.url.clone(),
                events: vec!["message.created".into(), "task.updated".into()],
                channel: Some(channel("partners")),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(secret.starts_with("whsec_"));
    s.env.channel("elsewhere", &["alice"]).await;
    s.env
        .service
        .add_webhook(
            &s.env.admin,
            WebhookSpec {
                url: other.url.clone(),
                events: vec!["message.created".into()],
                channel: Some(channel("elsewhere")),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let task = s.task("m1").await;
    s.drain().await;
    let got = rx.got();
    let types: Vec<&str> = got
        .iter()
        .map(|r| r.body["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["message.created", "task.updated"]);
    assert_eq!(got[0].body["data"]["thread_id"], task.as_str());
    assert!(
        other.got().is_empty(),
        "another channel's webhook hears nothing"
    );
    for r in &got {
        let id = r.headers["webhook-id"].to_str().unwrap();
        let ts: i64 = r.headers["webhook-timestamp"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let expected =
            liaison::workers::outbox::signature::sign(&secret, id, ts, r.raw.as_bytes()).unwrap();
        assert_eq!(r.headers["webhook-signature"], expected.as_str());
    }
    // Bad input changes nothing.
    for spec in [
        WebhookSpec {
            url: rx.url.clone(),
            events: vec!["nope".into()],
            ..Default::default()
        },
        WebhookSpec {
            url: rx.url.clone(),
            events: vec![],
            ..Default::default()
        },
        WebhookSpec {
            url: "http://10.0.0.1/".into(),
            events: vec!["message.created".into()],
            ..Default::default()
        },
    ] {
        assert!(s.env.service.add_webhook(&s.env.admin, spec).await.is_err());
    }
    assert_eq!(s.env.service.webhooks(&s.env.admin).await.unwrap().len(), 2);
    // Rotation without an overlap: the new secret alone signs from now on.
    let (rotated, previous_until) = s
        .env
        .service
        .rotate_webhook_secret(&s.env.admin, &hook.id, Some(0))
        .await
        .unwrap();
    assert_ne!(rotated, secret);
    assert_eq!(previous_until, None);
    s.env
        .service
        .test_webhook(&s.env.admin, &hook.id)
        .await
        .unwrap();
    s.drain().await;
    let last = rx.got().pop().unwrap();
    assert_eq!(last.body["type"], "webhook.test");
    let expected = liaison::workers::outbox::signature::sign(
        &rotated,
        last.headers["webhook-id"].to_str().unwrap(),
        last.headers["webhook-timestamp"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap(),
        last.raw.as_bytes(),
    )
    .unwrap();
    assert_eq!(last.headers["webhook-signature"], expected.as_str());
    s.env
        .service
        .remove_webhook(&s.env.admin, &hook.id)
        .await
        .unwrap();
    assert!(
        s.env
            .service
            .remove_webhook(&s.env.admin, &hook.id)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn outbox_two_workers_on_one_database_never_make_the_same_attempt() {
    let s = setup(outbox_settings()).await;
    let rx = Receiver::start().await;
    let mut tasks = Vec::new();
    for i in 0..8 {
        let task = s.task(&format!("m{i}")).await;
        s.push_to(&task, &rx.url, PushConfigSpec::default()).await;
        tasks.push(task);
    }
    for t in &tasks {
        s.say(t, "announce", "working").await;
    }
    // A second service (a replica) on the same database, with its own worker.
    let db_url = s.env._db.as_ref().unwrap().url.clone();
    let store = liaison::store::Store::open(&db_url).await.unwrap();
    let replica = Service::new(
        liaison::service::Deps::new(
            Arc::new(store),
            Arc::new(liaison::bus::LocalBus::default()),
            Arc::new(s.env.clock.clone()),
            settings(outbox_settings()),
            tokio_util::sync::CancellationToken::new(),
        )
        .unwrap(),
    );
    let other = worker(&replica, s.keys.clone());
    let (a, b) = tokio::join!(
        async {
            let mut n = 0;
            while s.worker.deliver_next().await.unwrap().is_some() {
                n += 1;
            }
            n
        },
        async {
            let mut n = 0;
            while other.deliver_next().await.unwrap().is_some() {
                n += 1;
            }
            n
        }
    );
    // Stragglers: an order key freed by the other worker after one gave up.
    let rest = s.drain().await.len();
    assert_eq!(a + b + rest, 16);
    let got = rx.got();
    assert_eq!(got.len(), 16);
    let mut attempts: Vec<(String, String)> = got
        .iter()
        .map(|r| {
            (
                r.headers["x-liaison-delivery"].to_str().unwrap().to_owned(),
                r.headers["x-liaison-attempt"].to_str().unwrap().to_owned(),
            )
        })
        .collect();
    attempts.sort();
    attempts.dedup();
    assert_eq!(attempts.len(), 16, "no attempt made twice");
    // Per task, the events arrived in order.
    for t in &tasks {
        let seqs: Vec<String> = got
            .iter()
            .filter(|r| {
                r.headers["x-liaison-event-id"]
                    .to_str()
                    .unwrap()
                    .starts_with(t.as_str())
            })
            .map(|r| r.headers["x-liaison-event-id"].to_str().unwrap().to_owned())
            .collect();
        assert_eq!(seqs, [format!("{t}:1"), format!("{t}:2")]);
    }
}

/// `/metrics`'s outbox figures at the service's clock: pending and dead deliveries, and how long
/// the oldest due one has waited past its time (a retry not yet due is not late).
#[tokio::test]
async fn outbox_figures_count_pending_and_dead_and_age_the_oldest_due_delivery() {
    let outbox = OutboxSettings {
        schedule: vec![Duration::from_secs(10)],
        ..outbox_settings()
    };
    let s = setup(outbox).await;
    let figures = |f: liaison::store::OutboxFigures| (f.pending, f.dead, f.oldest_due_age_ms);
    let service = &s.env.service;
    assert_eq!(figures(service.outbox_figures().await.unwrap()), (0, 0, 0));
    let rx = Receiver::start().await;
    rx.answer(&[Answer::Status(503), Answer::Status(503)]);
    let task = s.task("m1").await;
    s.push_to(&task, &rx.url, PushConfigSpec::default()).await;
    // The task's state is due at once; 7 s later it has waited 7 s.
    assert_eq!(figures(service.outbox_figures().await.unwrap()), (1, 0, 0));
    s.env.clock.advance_secs(7);
    assert_eq!(
        figures(service.outbox_figures().await.unwrap()),
        (1, 0, 7000)
    );
    // A failed attempt: pending still, due again in 10 s, so not late.
    let step = s.worker.deliver_next().await.unwrap().unwrap();
    assert!(matches!(step.verdict, AttemptVerdict::RetryAt(_)));
    assert_eq!(figures(service.outbox_figures().await.unwrap()), (1, 0, 0));
    s.env.clock.advance_secs(15);
    assert_eq!(
        figures(service.outbox_figures().await.unwrap()),
        (1, 0, 5000)
    );
    // The last attempt fails too: dead, nothing pending.
    let step = s.worker.deliver_next().await.unwrap().unwrap();
    assert_eq!(step.verdict, AttemptVerdict::Dead);
    assert_eq!(figures(service.outbox_figures().await.unwrap()), (0, 1, 0));
}
