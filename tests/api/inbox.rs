//! The inbox: exactly-once drain with named consumers, lost responses, long-poll wake-ups.

use std::time::Duration;

use liaison::service::{ErrorCode, InboxRequest, UNREAD_COUNTED};

use crate::helpers::{TestEnv, post, until_waiting};

fn req(consumer: &str, after: Option<i64>, wait_s: u64) -> InboxRequest {
    InboxRequest {
        session: None,
        consumer: consumer.into(),
        after,
        limit: Some(7),
        wait_s: Some(wait_s),
    }
}

#[tokio::test]
async fn concurrent_consumers_each_see_every_entry_exactly_once_even_when_responses_are_lost() {
    consumers_see_every_entry_once().await;
}

/// The same race with the posters and consumers on two threads at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_two_threads_concurrent_consumers_each_see_every_entry_exactly_once() {
    consumers_see_every_entry_once().await;
}

async fn consumers_see_every_entry_once() {
    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "codex@b:1").await;
    env.channel("demo", &["alice", "bob"]).await;
    const N: usize = 120;

    // Four posters write while three consumers of bob drain.
    let posters: Vec<_> = (0..4)
        .map(|p| {
            let (s, a) = (env.service.clone(), alice.clone());
            tokio::spawn(async move {
                for i in 0..N / 4 {
                    s.post(
                        &a,
                        post("announce", Some("demo"), None, &format!("p{p} m{i}")),
                    )
                    .await
                    .unwrap();
                }
            })
        })
        .collect();
    let consumers: Vec<_> = ["claude", "codex", "cron"]
        .into_iter()
        .enumerate()
        .map(|(k, name)| {
            let (s, b) = (env.service.clone(), bob.clone());
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut after = 0;
                let mut calls = 0;
                while seen.len() < N {
                    calls += 1;
                    let page = s.inbox(&b, req(name, Some(after), 1)).await.unwrap();
                    // Every third response of this consumer is "lost": ask again with the same after.
                    if (calls + k) % 3 == 0 && !page.entries.is_empty() {
                        let again = s.inbox(&b, req(name, Some(after), 0)).await.unwrap();
                        let a: Vec<i64> = page.entries.iter().map(|e| e.seq).collect();
                        let b2: Vec<i64> = again.entries.iter().map(|e| e.seq).collect();
                        assert_eq!(
                            a.first(),
                            b2.first(),
                            "a lost page is served again from its start"
                        );
                        continue;
                    }
                    seen.extend(page.entries.iter().map(|e| e.seq));
                    after = page.cursor;
                }
                // Acknowledge the last page, then nothing more comes.
                let last = s.inbox(&b, req(name, Some(after), 0)).await.unwrap();
                assert!(last.entries.is_empty());
                seen
            })
        })
        .collect();
    for p in posters {
        p.await.unwrap();
    }
    for c in consumers {
        let seen = c.await.unwrap();
        let expected: Vec<i64> = (1..=N as i64).collect();
        assert_eq!(seen, expected, "each entry once, in order");
    }
}

#[tokio::test]
async fn a_long_poll_returns_as_soon_as_an_entry_arrives() {
    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "codex@b:1").await;
    env.channel("demo", &["alice", "bob"]).await;
    let (s, b) = (env.service.clone(), bob.clone());
    let waiter = tokio::spawn(async move { s.inbox(&b, req("claude", None, 30)).await.unwrap() });
    until_waiting(&env.service, 1).await;
    env.service
        .post(&alice, post("question", Some("demo"), None, "ping?"))
        .await
        .unwrap();
    // The bound only keeps a broken wake-up from hanging the suite; it is not a latency assertion.
    let page = tokio::time::timeout(Duration::from_secs(25), waiter)
        .await
        .expect("woken before the deadline")
        .unwrap();
    assert_eq!(page.entries.len(), 1);
    assert!(!page.timed_out);
}

#[tokio::test]
async fn an_empty_wait_times_out_and_a_dropped_wait_acknowledges_nothing() {
    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "codex@b:1").await;
    env.channel("demo", &["alice", "bob"]).await;
    let page = env
        .service
        .inbox(&bob, req("claude", None, 1))
        .await
        .unwrap();
    assert!(page.entries.is_empty() && page.timed_out);

    env.service
        .post(&alice, post("announce", Some("demo"), None, "one"))
        .await
        .unwrap();
    let first = env
        .service
        .inbox(&bob, req("claude", Some(0), 0))
        .await
        .unwrap();
    assert_eq!(first.entries.len(), 1);
    // Entry 1 is acknowledged; then a call that is waiting is abandoned by its client: it must
    // acknowledge nothing more.
    env.service
        .inbox(&bob, req("claude", Some(first.cursor), 0))
        .await
        .unwrap();
    let (s2, b2, cursor) = (env.service.clone(), bob.clone(), first.cursor);
    let waiting = tokio::spawn(async move { s2.inbox(&b2, req("claude", Some(cursor), 30)).await });
    until_waiting(&env.service, 1).await;
    waiting.abort();
    let _ = waiting.await;
    assert_eq!(
        env.service.waiting().0,
        0,
        "the abandoned wait is no longer counted"
    );
    env.service
        .post(&alice, post("announce", Some("demo"), None, "two"))
        .await
        .unwrap();
    // Entry 2, posted after the abandoned call, is still unread.
    let again = env
        .service
        .inbox(&bob, req("claude", None, 0))
        .await
        .unwrap();
    assert_eq!(again.entries.iter().map(|e| e.seq).collect::<Vec<_>>(), [2]);
    assert_eq!(env.service.unread(&bob, "claude").await.unwrap(), 1);
}

#[tokio::test]
async fn bad_inbox_calls_are_refused_and_change_nothing() {
    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "codex@b:1").await;
    env.channel("demo", &["alice", "bob"]).await;
    env.service
        .post(&alice, post("announce", Some("demo"), None, "one"))
        .await
        .unwrap();
    let s = &env.service;
    assert_eq!(
        s.inbox(&bob, req("c", Some(5), 0)).await.unwrap_err().code,
        ErrorCode::CursorAhead
    );
    assert_eq!(
        s.inbox(&bob, req("c", None, 51)).await.unwrap_err().code,
        ErrorCode::InvalidInput
    );
    assert_eq!(
        s.inbox(&bob, req("bad name!", None, 0))
            .await
            .unwrap_err()
            .code,
        ErrorCode::InvalidInput
    );
    let mut r = req("c", None, 0);
    r.limit = Some(0);
    assert_eq!(
        s.inbox(&bob, r).await.unwrap_err().code,
        ErrorCode::InvalidInput
    );
    assert_eq!(
        s.unread(&bob, "c").await.unwrap(),
        1,
        "nothing was acknowledged"
    );
}

/// A page counts what its consumer has not acknowledged up to [`UNREAD_COUNTED`], then says
/// more are unread: the count reads every entry it counts, and a consumer that never
/// acknowledges (an agent that only claims) must not pay for its whole history on every call. Acknowledging brings the count back to an exact one.
#[tokio::test]
async fn the_unread_count_stops_at_its_bound_and_says_that_more_are_unread() {
    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "codex@b:1").await;
    env.channel("demo", &["alice", "bob"]).await;
    let s = &env.service;
    let announce = |i: i64| post("announce", Some("demo"), None, &format!("n{i}"));
    for i in 0..UNREAD_COUNTED {
        s.post(&alice, announce(i)).await.unwrap();
    }
    let page = s.inbox(&bob, req("c", None, 0)).await.unwrap();
    assert_eq!((page.unread, page.unread_more), (UNREAD_COUNTED, false));
    s.post(&alice, announce(UNREAD_COUNTED)).await.unwrap();
    let page = s.inbox(&bob, req("c", None, 0)).await.unwrap();
    assert_eq!((page.unread, page.unread_more), (UNREAD_COUNTED, true));
    assert_eq!(s.unread(&bob, "c").await.unwrap(), UNREAD_COUNTED);
    // Acknowledging the first page (7 entries) leaves 994 unread, counted exactly again.
    let page = s.inbox(&bob, req("c", Some(page.cursor), 0)).await.unwrap();
    assert_eq!((page.unread, page.unread_more), (UNREAD_COUNTED - 6, false));
    assert_eq!(s.unread(&bob, "c").await.unwrap(), UNREAD_COUNTED - 6);
}

/// Replicas on one PostgreSQL database: a post on one wakes a long-poll waiting on the other
/// through `LISTEN/NOTIFY`. On SQLite (one process by design) there is nothing to test.
#[tokio::test]
async fn on_postgres_a_post_on_one_replica_wakes_a_long_poll_on_another() {
    use std::sync::Arc;

    use liaison::bus::PgBus;
    use liaison::domain::{Scope, Scopes};
    use liaison::service::{Service, TokenSpec};

    let db = crate::helpers::TestDb::new().await;
    if !db.is_postgres() {
        return;
    }
    let url = db.url.clone();
    let stop = tokio_util::sync::CancellationToken::new();
    let a = TestEnv::on(
        db,
        PgBus::start(&url, stop.clone()).await.unwrap(),
        Default::default(),
    )
    .await;
    let alice = a.member("alice", "claude@a:1").await;
    a.member("bob", "codex@b:1").await;
    a.channel("demo", &["alice", "bob"]).await;
    let spec = TokenSpec {
        person: crate::helpers::pid("bob"),
        scopes: Scopes::default().with(Scope::Agent),
        expires_in_s: None,
        description: String::new(),
    };
    let secret = a.service.issue_token(&a.admin, spec).await.unwrap().secret;

    // Replica b: its own store and bus on the same database.
    let b = Service::new(
        liaison::service::Deps::new(
            Arc::new(liaison::store::Store::open(&url).await.unwrap()),
            PgBus::start(&url, stop.clone()).await.unwrap(),
            Arc::new(liaison::clock::SystemClock),
            Default::default(),
            stop.clone(),
        )
        .unwrap(),
    );
    let bob_on_b = b.authenticate(&secret).await.unwrap();
    let b2 = b.clone();
    let waiter =
        tokio::spawn(async move { b2.inbox(&bob_on_b, req("claude", None, 30)).await.unwrap() });
    // Waiting on b (subscribed to b's bus, whose listener already listens): only a notification
    // from a can wake it now.
    until_waiting(&b, 1).await;
    a.service
        .post(
            &alice,
            post("question", Some("demo"), None, "across replicas?"),
        )
        .await
        .unwrap();
    // Without the cross-replica wake-up the call would only return at its 30 s deadline.
    let page = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("woken across replicas")
        .unwrap();
    assert_eq!(page.entries.len(), 1);
    stop.cancel();
}

/// `/metrics`'s inbox depth: what each consumer that has acknowledged once has yet to
/// acknowledge, summed, and the deepest one.
#[tokio::test]
async fn inbox_depth_counts_what_each_known_consumer_has_yet_to_acknowledge() {
    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "codex@b:1").await;
    env.channel("demo", &["alice", "bob"]).await;
    let s = &env.service;
    let figures = s.inbox_figures().await.unwrap();
    assert_eq!((figures.unacknowledged, figures.deepest), (0, 0));
    for body in ["one", "two", "three"] {
        s.post(&alice, post("announce", Some("demo"), None, body))
            .await
            .unwrap();
    }
    // No consumer of bob has acknowledged anything: nobody is known to drain his inbox.
    let figures = s.inbox_figures().await.unwrap();
    assert_eq!((figures.unacknowledged, figures.deepest), (0, 0));
    let page = s.inbox(&bob, req("claude", None, 0)).await.unwrap();
    assert_eq!(page.entries.len(), 3);
    // claude acknowledges one entry, cron two: 2 + 1 left, claude the deepest.
    s.inbox(&bob, req("claude", Some(1), 0)).await.unwrap();
    s.inbox(&bob, req("cron", Some(2), 0)).await.unwrap();
    let figures = s.inbox_figures().await.unwrap();
    assert_eq!((figures.unacknowledged, figures.deepest), (3, 2));
    // A new entry deepens both; acknowledging everything empties claude's share.
    s.post(&alice, post("announce", Some("demo"), None, "four"))
        .await
        .unwrap();
    let figures = s.inbox_figures().await.unwrap();
    assert_eq!((figures.unacknowledged, figures.deepest), (5, 3));
    s.inbox(&bob, req("claude", Some(4), 0)).await.unwrap();
    let figures = s.inbox_figures().await.unwrap();
    assert_eq!((figures.unacknowledged, figures.deepest), (2, 2));
}
