//! Channel-core benchmark (not a test): durable posts per second with 1 and 64 concurrent posters,
//! and the long-poll wake-up latency (post committed → waiting inbox call returns), on SQLite and,
//! when `LIAISON_BENCH_PG_URL` is set, on PostgreSQL.
//!
//! Run: `cargo bench --bench core` (add `LIAISON_BENCH_PG_URL=postgres://postgres@127.0.0.1:5432/postgres`).

#![allow(clippy::disallowed_methods)] // a client of the server under test

use std::sync::Arc;
use std::time::{Duration, Instant};

use liaison::bus::LocalBus;
use liaison::clock::SystemClock;
use liaison::domain::{ChannelName, PersonId, PersonKind, Scope, Scopes};
use liaison::service::{
    Caller, ChannelSpec, InboxRequest, PostRequest, Service, Settings, TokenSpec,
};
use liaison::store::Store;
use tokio_util::sync::CancellationToken;

const POSTS: usize = 2_000;
const WAKEUPS: usize = 200;

#[path = "support/mod.rs"]
mod support;

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    run(
        "sqlite",
        &format!("sqlite://{}", dir.path().join("bench.db").display()),
    )
    .await;
    support::with_postgres(|url| async move { run("postgres", &url).await }).await;
}

async fn run(backend: &str, url: &str) {
    let store = Store::open(url).await.unwrap();
    let service = Service::new(
        liaison::service::Deps::new(
            Arc::new(store),
            Arc::new(LocalBus::default()),
            Arc::new(SystemClock),
            Settings::default(),
            CancellationToken::new(),
        )
        .unwrap(),
    );
    let admin = service
        .authenticate(&service.bootstrap().await.unwrap().unwrap().secret)
        .await
        .unwrap();
    let alice = member(&service, &admin, "alice").await;
    let bob = member(&service, &admin, "bob").await;
    let spec = ChannelSpec {
        name: ChannelName::parse("bench").unwrap(),
        description: String::new(),
        members: vec![
            PersonId::parse("alice").unwrap(),
            PersonId::parse("bob").unwrap(),
        ],
        rights: None,
        policy: None,
    };
    service.add_channel(&admin, spec).await.unwrap();

    for concurrency in [1usize, 64] {
        let per = POSTS / concurrency;
        let start = Instant::now();
        let tasks: Vec<_> = (0..concurrency)
            .map(|_| {
                let (s, a) = (service.clone(), alice.clone());
                tokio::spawn(async move {
                    for i in 0..per {
                        s.post(&a, announce(&format!("bench {i}"))).await.unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let elapsed = start.elapsed();
        let rate = (per * concurrency) as f64 / elapsed.as_secs_f64();
        println!(
            "{backend:8} durable posts, {concurrency:2} posters: {rate:8.0} posts/s ({} posts in {elapsed:.2?})",
            per * concurrency
        );
    }

    // Drain bob's inbox, then measure post → wake-up of a waiting long-poll.
    let mut after = service
        .inbox(
            &bob,
            InboxRequest {
                session: None,
                consumer: "bench".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .last;
    let mut latencies = Vec::with_capacity(WAKEUPS);
    for i in 0..WAKEUPS {
        let (s, b) = (service.clone(), bob.clone());
        let req = InboxRequest {
            session: None,
            consumer: "bench".into(),
            after: Some(after),
            limit: Some(10),
            wait_s: Some(10),
        };
        let waiter = tokio::spawn(async move {
            let page = s.inbox(&b, req).await.unwrap();
            (Instant::now(), page)
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        service
            .post(&alice, announce(&format!("wake {i}")))
            .await
            .unwrap();
        let committed = Instant::now();
        let (woken, page) = waiter.await.unwrap();
        assert_eq!(page.entries.len(), 1);
        after = page.cursor;
        latencies.push(woken.saturating_duration_since(committed));
    }
    latencies.sort();
    let p = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!(
        "{backend:8} long-poll wake-up after commit: p50 {:?}, p99 {:?} ({WAKEUPS} samples)",
        p(0.50),
        p(0.99)
    );
    service.store().close().await;
}

fn announce(body: &str) -> PostRequest {
    PostRequest {
        kind: Some("announce".parse().unwrap()),
        channel: Some(ChannelName::parse("bench").unwrap()),
        body: body.into(),
        ..Default::default()
    }
}

async fn member(service: &Service, admin: &Caller, id: &str) -> Caller {
    let pid = PersonId::parse(id).unwrap();
    service
        .add_person(admin, pid.clone(), PersonKind::Member, id.into())
        .await
        .unwrap();
    let spec = TokenSpec {
        person: pid,
        scopes: Scopes::default().with(Scope::Agent),
        expires_in_s: None,
        description: String::new(),
    };
    let secret = service.issue_token(admin, spec).await.unwrap().secret;
    service.authenticate(&secret).await.unwrap()
}
