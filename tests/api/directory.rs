//! The cached directory (tokens, persons, channels, members, policies): a change made through one
//! replica takes effect on every replica. On PostgreSQL the two services share the database and
//! are told through `LISTEN/NOTIFY`; on SQLite the second service opens the same file with a bus of
//! its own, as another process would, so only the cache's expiry (`DIRECTORY_TTL`) can tell it.
//! Nothing here times anything: the tests wait for the change to show, bounded only so that a
//! change that never shows fails instead of hanging (how soon it shows is a figure for the
//! benchmarks; that entries expire after the TTL is the cache's own unit test).

use std::sync::Arc;
use std::time::{Duration, Instant};

use liaison::bus::{LocalBus, PgBus, WakeBus};
use liaison::domain::{Scope, Scopes};
use liaison::service::{ErrorCode, MemberChange, Service, TokenSpec};
use tokio_util::sync::CancellationToken;

use crate::helpers::{TestDb, TestEnv, pid, post};

/// Only keeps a change that never shows from hanging the suite: many times the cache's TTL.
const HANG: Duration = Duration::from_secs(30);

/// Two services on one fresh database: `a` (a test environment) and `b`.
async fn two_replicas(stop: &CancellationToken) -> (TestEnv, Service) {
    let db = TestDb::new().await;
    let url = db.url.clone();
    let bus = |url: String| {
        let stop = stop.clone();
        async move {
            if url.starts_with("postgres") {
                let bus: Arc<dyn WakeBus> = PgBus::start(&url, stop).await.unwrap();
                bus
            } else {
                Arc::new(LocalBus::default())
            }
        }
    };
    let a = TestEnv::on(db, bus(url.clone()).await, Default::default()).await;
    let b = Service::new(
        liaison::service::Deps::new(
            Arc::new(liaison::store::Store::open(&url).await.unwrap()),
            bus(url).await,
            Arc::new(liaison::clock::SystemClock),
            Default::default(),
            stop.clone(),
        )
        .unwrap(),
    );
    (a, b)
}

/// Calls `attempt` until it returns `Some`, or gives up at `deadline`.
async fn until<T, F, Fut>(deadline: Instant, mut attempt: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    loop {
        if let Some(v) = attempt().await {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_revoked_token_is_refused_on_every_replica() {
    let stop = CancellationToken::new();
    let (a, b) = two_replicas(&stop).await;
    a.member("bob", "codex@b:1").await;
    let spec = TokenSpec {
        person: pid("bob"),
        scopes: Scopes::default().with(Scope::Agent),
        expires_in_s: None,
        description: String::new(),
    };
    let issued = a.service.issue_token(&a.admin, spec).await.unwrap();
    // Both replicas have the token in memory now.
    for _ in 0..2 {
        a.service.authenticate(&issued.secret).await.unwrap();
        b.authenticate(&issued.secret).await.unwrap();
    }

    a.service
        .revoke_token(&a.admin, &issued.token.id)
        .await
        .unwrap();
    let deadline = Instant::now() + HANG;
    // The replica that revoked refuses the very next request.
    let err = a.service.authenticate(&issued.secret).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::TokenRevoked);
    let refused = until(deadline, || async {
        b.authenticate(&issued.secret).await.err()
    })
    .await
    .expect("the other replica refuses the token");
    assert_eq!(refused.code, ErrorCode::TokenRevoked);
    // And keeps refusing it once anything it had cached would have expired (time passing is
    // the point here: there is no event to wait for).
    tokio::time::sleep(liaison::store::DIRECTORY_TTL * 2).await;
    assert!(b.authenticate(&issued.secret).await.is_err());
    stop.cancel();
}

#[tokio::test]
async fn a_member_removed_from_a_channel_cannot_post_through_any_replica() {
    let stop = CancellationToken::new();
    let (a, b) = two_replicas(&stop).await;
    let alice = a.member("alice", "claude@a:1").await;
    a.member("bob", "codex@b:1").await;
    a.channel("demo", &["alice", "bob"]).await;
    // The channel and its members are in memory on both replicas now.
    a.service
        .post(&alice, post("announce", Some("demo"), None, "one"))
        .await
        .unwrap();
    b.post(&alice, post("announce", Some("demo"), None, "two"))
        .await
        .unwrap();

    let change = MemberChange {
        add: Vec::new(),
        remove: vec![pid("alice")],
        rights: None,
    };
    a.service
        .change_members(&a.admin, &crate::helpers::channel("demo"), change)
        .await
        .unwrap();
    let deadline = Instant::now() + HANG;
    let err = a
        .service
        .post(&alice, post("announce", Some("demo"), None, "three"))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    let refused = until(deadline, || async {
        b.post(&alice, post("announce", Some("demo"), None, "four"))
            .await
            .err()
    })
    .await
    .expect("the other replica refuses the post");
    assert_eq!(refused.code, ErrorCode::NotFound);
    stop.cancel();
}
