//! Per-client state stays bounded: wake-up topics go with their last waiter, each token's request
//! rate is limited, and a party's open streams are counted.

use std::sync::Arc;

use liaison::bus::{LocalBus, Topic, WakeBus as _};
use liaison::domain::{PersonKind, Scope};
use liaison::service::{ErrorCode, InboxRequest, LimitSettings, Rate, Settings};

use crate::helpers::{TestDb, TestEnv, pid, post, until_waiting};

fn wait(consumer: &str, wait_s: u64) -> InboxRequest {
    InboxRequest {
        session: None,
        consumer: consumer.into(),
        wait_s: Some(wait_s),
        ..Default::default()
    }
}

#[tokio::test]
async fn wake_up_topics_go_when_their_long_polls_end() {
    let bus = LocalBus::default();
    let env = TestEnv::on(
        TestDb::new().await,
        Arc::new(bus.clone()),
        Settings::default(),
    )
    .await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "claude@b:1").await;
    env.channel("team", &["alice", "bob"]).await;
    // The service's own standing subscription (its cached directory's invalidation) stays.
    let standing = bus.topic_count();
    // Long-polls that end because they are abandoned (a client gone) while waiting: each round
    // aborts them only once all eight wait, subscribed to alice's topic.
    for round in 0..20 {
        let mut polls = Vec::new();
        for i in 0..8 {
            let (s, a) = (env.service.clone(), alice.clone());
            let consumer = format!("c{round}-{i}");
            polls.push(tokio::spawn(async move {
                s.inbox(&a, wait(&consumer, 50)).await
            }));
        }
        until_waiting(&env.service, 8).await;
        assert_eq!(
            bus.topic_count(),
            standing + 1,
            "round {round}: alice's topic"
        );
        for p in polls {
            p.abort();
            let _ = p.await;
        }
        assert_eq!(
            env.service.waiting().0,
            0,
            "round {round}: a waiter outlived its poll"
        );
        assert_eq!(
            bus.topic_count(),
            standing,
            "round {round}: a topic outlived its abandoned waiters"
        );
    }
    // …and long-polls that end because an entry arrived.
    let mut polls = Vec::new();
    for i in 0..8 {
        let (s, b) = (env.service.clone(), bob.clone());
        polls.push(tokio::spawn(async move {
            s.inbox(&b, wait(&format!("w{i}"), 50)).await
        }));
    }
    until_waiting(&env.service, 8).await;
    env.service
        .post(&alice, post("announce", Some("team"), None, "hello"))
        .await
        .unwrap();
    for p in polls {
        assert_eq!(p.await.unwrap().unwrap().entries.len(), 1);
    }
    assert_eq!(
        bus.topic_count(),
        standing,
        "a topic outlived its last waiter"
    );
    // A task topic too (A2A streams and blocking sends wait on those).
    let sub = bus.subscribe(&Topic::task("thr_x"));
    drop(sub);
    assert_eq!(bus.topic_count(), standing);
}

fn limited(limits: LimitSettings) -> Settings {
    Settings {
        limits,
        ..Settings::default()
    }
}

#[tokio::test]
async fn a_token_beyond_its_rate_is_refused_with_the_wait_and_other_tokens_are_not() {
    let env = TestEnv::with_settings(limited(LimitSettings {
        agent: Rate::new(1, 3),
        ..LimitSettings::default()
    }))
    .await;
    env.person("alice", PersonKind::Member).await;
    let spec = |scope| liaison::service::TokenSpec {
        person: pid("alice"),
        scopes: liaison::domain::Scopes::default().with(scope),
        expires_in_s: None,
        description: String::new(),
    };
    let first = env
        .service
        .issue_token(&env.admin, spec(Scope::Agent))
        .await
        .unwrap();
    let second = env
        .service
        .issue_token(&env.admin, spec(Scope::Agent))
        .await
        .unwrap();
    for _ in 0..3 {
        env.service.authenticate(&first.secret).await.unwrap();
    }
    let refused = env.service.authenticate(&first.secret).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::RateLimited);
    assert_eq!(liaison::http::http_status(refused.code), 429);
    assert!(
        refused.retry_after_s().is_some_and(|s| s >= 1),
        "{refused:?}"
    );
    assert!(
        refused.message.contains("retry after"),
        "{}",
        refused.message
    );
    // Keyed by token: the same person's other token has its own bucket.
    env.service.authenticate(&second.secret).await.unwrap();
    // Scopes have their own rates: a human token is not limited by the agent rate.
    let human = env
        .service
        .issue_token(&env.admin, spec(Scope::Human))
        .await
        .unwrap();
    for _ in 0..5 {
        env.service.authenticate(&human.secret).await.unwrap();
    }
}

#[tokio::test]
async fn a_party_holds_at_most_its_share_of_open_streams() {
    let env = TestEnv::with_settings(limited(LimitSettings {
        streams_per_party: 2,
        ..LimitSettings::default()
    }))
    .await;
    env.person("partner", PersonKind::External).await;
    env.person("rival", PersonKind::External).await;
    let partner = env.caller("partner", Scope::Agent, "remote@p:1").await;
    let rival = env.caller("rival", Scope::Agent, "remote@r:1").await;
    let one = env.service.open_stream(&partner).unwrap();
    let two = env.service.open_stream(&partner).unwrap();
    let refused = env.service.open_stream(&partner).err().unwrap();
    assert_eq!(refused.code, ErrorCode::TooManyStreams);
    assert!(refused.message.contains("at most 2"), "{}", refused.message);
    // Another party is not affected, and a closed stream frees its place.
    let _other = env.service.open_stream(&rival).unwrap();
    drop(one);
    let _three = env.service.open_stream(&partner).unwrap();
    drop(two);
}

/// The store lends its read connections without pinging them on return: a read cancelled half-way
/// (a client gone, a timeout) must not hand a connection in an unknown state to the next read, and
/// the connections stay within the pool's bound. On PostgreSQL a read answers over the network, so
/// polling it a few times and dropping it cancels it half-way; on SQLite a read runs whole on its
/// first poll (synchronously, see `src/store/db.rs`), so none can be cancelled half-way and the
/// test checks that every one finished at once. Each message is larger than a socket's buffer,
/// so even a server that answers before the first poll reads (a Unix socket on an idle machine)
/// cannot hand a whole answer to one poll: the reads are cut mid-answer.
#[tokio::test]
async fn reads_cancelled_half_way_leave_every_later_read_answering() {
    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    env.member("bob", "codex@b:1").await;
    env.channel("demo", &["alice", "bob"]).await;
    let s = &env.service;
    let mut threads = Vec::new();
    let filler = "x".repeat(512 * 1024);
    let body_of = |i: usize| format!("note {i} {filler}");
    for i in 0..5 {
        let body = body_of(i);
        threads.push(
            s.post(&alice, post("announce", Some("demo"), None, &body))
                .await
                .unwrap()
                .thread,
        );
    }
    let store = s.store();
    // Each read is polled one to four times, then dropped: half-way unless it finished.
    let sqlite = store.backend() == liaison::store::Backend::Sqlite;
    let mut cancelled = 0;
    for i in 0..300usize {
        let mut read = std::pin::pin!(store.thread_messages(&threads[i % 5], 0, 100));
        let mut finished = false;
        for _ in 0..=i % 4 {
            if futures::poll!(read.as_mut()).is_ready() {
                finished = true;
                break;
            }
            tokio::task::yield_now().await;
        }
        if !finished {
            cancelled += 1;
        }
    }
    if sqlite {
        assert_eq!(
            cancelled, 0,
            "a SQLite read did not finish on its first poll"
        );
    } else {
        assert!(
            cancelled >= 30,
            "only {cancelled} of 300 reads were cancelled half-way; the test proves too little"
        );
    }
    // Every later read, many at once, answers what was written.
    let reads: Vec<_> = (0..64)
        .map(|i| {
            let (store, id) = (store.clone(), threads[i % 5].clone());
            tokio::spawn(async move { store.thread_messages(&id, 0, 100).await })
        })
        .collect();
    for (i, r) in reads.into_iter().enumerate() {
        let messages = r.await.unwrap().unwrap();
        assert_eq!(messages.len(), 1);
        assert!(
            messages[0].body == body_of(i % 5),
            "read {i} answered another body"
        );
    }
    let (open, idle) = store.pool_usage();
    assert!((1..=32).contains(&open), "{open} read connections open");
    assert!(idle as u32 <= open);
}

/// `max_waiters_per_person` long-polls of one person wait together; one more is refused at once
/// (`too_many_waiters`), another person's is not, and a poll that ends frees its place.
#[tokio::test]
async fn a_person_holds_at_most_the_configured_number_of_waiting_long_polls() {
    let env = TestEnv::with_settings(Settings {
        max_waiters_per_person: 3,
        ..Settings::default()
    })
    .await;
    let max = env.service.settings().max_waiters_per_person;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "codex@b:1").await;
    env.channel("team", &["alice", "bob"]).await;
    let mut polls = Vec::new();
    for i in 0..max {
        let (s, b) = (env.service.clone(), bob.clone());
        polls.push(tokio::spawn(async move {
            s.inbox(&b, wait(&format!("w{i}"), 50)).await
        }));
    }
    // All of them at once: the limit is reached, not passed.
    until_waiting(&env.service, max).await;
    let refused = env
        .service
        .inbox(&bob, wait("one-more", 50))
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::TooManyWaiters);
    assert_eq!(env.service.waiting().0, max);
    // Without wait_s a poll is not a waiter and is served.
    env.service.inbox(&bob, wait("peek", 0)).await.unwrap();
    // Another person has places of their own.
    let (s, a) = (env.service.clone(), alice.clone());
    let other = tokio::spawn(async move { s.inbox(&a, wait("a", 50)).await });
    until_waiting(&env.service, max + 1).await;
    // One of bob's ends: its place is free again.
    let first = polls.remove(0);
    first.abort();
    let _ = first.await;
    let (s, b) = (env.service.clone(), bob.clone());
    polls.push(tokio::spawn(
        async move { s.inbox(&b, wait("again", 50)).await },
    ));
    until_waiting(&env.service, max + 1).await;
    for p in polls.into_iter().chain([other]) {
        p.abort();
        let _ = p.await;
    }
}
