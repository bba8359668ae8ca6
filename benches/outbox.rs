//! Outbox benchmark (not a test): deliveries per second to a local receiver with 1 and 100
//! endpoints (webhooks), and the time from a task event's commit to its A2A push arriving at the
//! receiver (p50/p99), on SQLite and, when `LIAISON_BENCH_PG_URL` is set, on PostgreSQL.
//!
//! Run: `cargo bench --bench outbox` (add `LIAISON_BENCH_PG_URL=postgres://postgres@127.0.0.1:5432/postgres`).

#![allow(clippy::disallowed_methods)] // a client of the server under test

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use liaison::bus::LocalBus;
use liaison::clock::SystemClock;
use liaison::domain::address::AddressPolicy;
use liaison::domain::delivery::OutboxSettings;
use liaison::domain::{ChannelName, Kind, PersonId, PersonKind, Scope, Scopes};
use liaison::keys::ring::{KeyRing, MasterKey, SigningKey};
use liaison::net::outbound::OutboundClient;
use liaison::service::{
    Caller, ChannelSpec, PostRequest, PushConfigSpec, Service, Settings, SkillRoute, TaskMessage,
    TokenSpec, WebhookSpec,
};
use liaison::store::Store;
use liaison::workers::outbox::Worker;
use tokio_util::sync::CancellationToken;

const DELIVERIES: usize = 4_000;
const LATENCY_EVENTS: usize = 300;

#[path = "support/mod.rs"]
mod support;

/// The receiver: counts requests and records when each event id arrived.
#[derive(Clone, Default)]
struct Receiver {
    count: Arc<AtomicUsize>,
    arrived: Arc<Mutex<HashMap<String, Instant>>>,
}

async fn receiver() -> (String, Receiver) {
    let r = Receiver::default();
    let state = r.clone();
    let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
        let state = state.clone();
        async move {
            let now = Instant::now();
            if let Some(id) = headers
                .get("x-liaison-event-id")
                .and_then(|v| v.to_str().ok())
            {
                state
                    .arrived
                    .lock()
                    .unwrap()
                    .entry(id.to_owned())
                    .or_insert(now);
            }
            state.count.fetch_add(1, Ordering::SeqCst);
            axum::http::StatusCode::NO_CONTENT
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, r)
}

#[tokio::main]
async fn main() {
    liaison::net::tls::install_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    run(
        "sqlite",
        &format!("sqlite://{}", dir.path().join("bench.db").display()),
    )
    .await;
    support::with_postgres(|url| async move { run("postgres", &url).await }).await;
}

struct World {
    service: Service,
    admin: Caller,
    alice: Caller,
    partner: Caller,
    bus: Arc<LocalBus>,
}

async fn world(url: &str) -> World {
    let settings = Settings {
        skills: vec![SkillRoute {
            id: "ask".into(),
            channel: ChannelName::parse("bench").unwrap(),
            kind: Kind::Question,
            impact: None,
            direct_answers: false,
        }],
        default_skill: Some("ask".into()),
        outbox: OutboxSettings {
            allow: AddressPolicy::parse(&["127.0.0.1".into()]).unwrap(),
            ..OutboxSettings::default()
        },
        ..Settings::default()
    };
    let bus = Arc::new(LocalBus::default());
    let store = Store::open(url).await.unwrap();
    let service = Service::new(
        liaison::service::Deps::new(
            Arc::new(store),
            bus.clone(),
            Arc::new(SystemClock),
            settings,
            CancellationToken::new(),
        )
        .unwrap()
        .with_master(MasterKey::from_hex(&"7e".repeat(32)).unwrap()),
    );
    let admin = service
        .authenticate(&service.bootstrap().await.unwrap().unwrap().secret)
        .await
        .unwrap();
    let alice = person(&service, &admin, "alice", PersonKind::Member).await;
    let partner = person(&service, &admin, "partner", PersonKind::External).await;
    let spec = ChannelSpec {
        name: ChannelName::parse("bench").unwrap(),
        description: String::new(),
        members: vec![
            PersonId::parse("alice").unwrap(),
            PersonId::parse("partner").unwrap(),
        ],
        rights: None,
        policy: None,
    };
    service.add_channel(&admin, spec).await.unwrap();
    World {
        service,
        admin,
        alice,
        partner,
        bus,
    }
}

fn start_worker(w: &World, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    let master = MasterKey::from_hex(&"7e".repeat(32)).unwrap();
    let (_, record) = SigningKey::generate(&master).unwrap();
    let keys = Arc::new(KeyRing::open(&[record], &master).unwrap());
    let s = &w.service.settings().outbox;
    let client = OutboundClient::new(s.allow.clone(), s.connect_timeout, s.timeout).unwrap();
    let worker = Arc::new(Worker::new(
        w.service.clone(),
        client,
        keys.into(),
        "http://bench.invalid".into(),
    ));
    tokio::spawn(worker.run(w.bus.clone(), s.concurrency, stop))
}

async fn run(backend: &str, url: &str) {
    let w = world(url).await;
    for endpoints in [1usize, 100] {
        let (hook, rx) = receiver().await;
        let mut hooks = Vec::new();
        for _ in 0..endpoints {
            let spec = WebhookSpec {
                url: hook.clone(),
                events: vec!["message.created".into()],
                ..Default::default()
            };
            hooks.push(w.service.add_webhook(&w.admin, spec).await.unwrap().0.id);
        }
        // Enqueue first (each post is one commit writing `endpoints` deliveries), then drain.
        let posts = DELIVERIES / endpoints;
        let tasks: Vec<_> = (0..16)
            .map(|t| {
                let (s, a) = (w.service.clone(), w.alice.clone());
                tokio::spawn(async move {
                    for i in (t..posts).step_by(16) {
                        s.post(&a, announce(&format!("bench {i}"))).await.unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let stop = CancellationToken::new();
        let start = Instant::now();
        let worker = start_worker(&w, stop.clone());
        while rx.count.load(Ordering::SeqCst) < posts * endpoints {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let elapsed = start.elapsed();
        println!(
            "{backend}: {} deliveries to {endpoints} endpoint(s) in {:.2} s = {:.0} deliveries/s",
            posts * endpoints,
            elapsed.as_secs_f64(),
            (posts * endpoints) as f64 / elapsed.as_secs_f64()
        );
        stop.cancel();
        let _ = worker.await;
        for id in hooks {
            w.service.remove_webhook(&w.admin, &id).await.unwrap();
        }
    }
    latency(backend, &w).await;
    w.service.store().close().await;
}

/// Commit → delivery of A2A push events, one event at a time with the worker idle in between.
async fn latency(backend: &str, w: &World) {
    let (hook, rx) = receiver().await;
    let stop = CancellationToken::new();
    let worker = start_worker(w, stop.clone());
    let task = w
        .service
        .send_task_message(
            &w.partner,
            TaskMessage {
                message_id: "bench".into(),
                body: "Follow this task".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .thread
        .id;
    let spec = PushConfigSpec {
        url: hook,
        ..Default::default()
    };
    w.service
        .set_push_config(&w.partner, &task, spec)
        .await
        .unwrap();
    let mut samples = Vec::with_capacity(LATENCY_EVENTS);
    for i in 0..LATENCY_EVENTS {
        let req = PostRequest {
            kind: Some(Kind::Announce),
            thread: Some(task.clone()),
            body: format!("Progress {i}"),
            ..Default::default()
        };
        w.service.post(&w.alice, req).await.unwrap();
        let committed = Instant::now();
        // Event 1 is the task's creation; the i-th announce is event i + 2.
        let id = format!("{task}:{}", i + 2);
        let arrived = loop {
            if let Some(t) = rx.arrived.lock().unwrap().get(&id) {
                break *t;
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        };
        samples.push(arrived.saturating_duration_since(committed));
    }
    samples.sort();
    let p = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "{backend}: task event commit -> push delivered, {LATENCY_EVENTS} events: p50 {:.1} ms, p99 {:.1} ms",
        p(0.50).as_secs_f64() * 1000.0,
        p(0.99).as_secs_f64() * 1000.0
    );
    stop.cancel();
    let _ = worker.await;
}

fn announce(body: &str) -> PostRequest {
    PostRequest {
        kind: Some(Kind::Announce),
        channel: Some(ChannelName::parse("bench").unwrap()),
        body: body.to_owned(),
        ..Default::default()
    }
}

async fn person(service: &Service, admin: &Caller, id: &str, kind: PersonKind) -> Caller {
    let pid = PersonId::parse(id).unwrap();
    service
        .add_person(admin, pid.clone(), kind, id.to_owned())
        .await
        .unwrap();
    let spec = TokenSpec {
        person: pid,
        scopes: Scopes::default().with(Scope::Agent),
        expires_in_s: None,
        description: String::new(),
    };
    let issued = service.issue_token(admin, spec).await.unwrap();
    service.authenticate(&issued.secret).await.unwrap()
}
