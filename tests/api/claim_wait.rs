//! `claim` of `next` waiting for work (issue 49): each new claimable task is handed to ONE waiting
//! claimer of its recipients, a waiter of another person is never given it, and across replicas
//! the hand-off reaches a claimer waiting on another replica.

use std::sync::Arc;
use std::time::Duration;

use liaison::domain::{Impact, PersonKind, ThreadId};
use liaison::service::{Caller, ErrorCode, PostRequest, Service};
use tokio::sync::mpsc;

use crate::helpers::{TestEnv, post, until_waiting};

/// alice, bob and carol; bob alone receives alice's requests in `pair`, carol shares `other`.
async fn people(env: &TestEnv) -> Caller {
    let alice = env.member("alice", "claude@a:1").await;
    env.person("bob", PersonKind::Member).await;
    env.person("carol", PersonKind::Member).await;
    env.channel("pair", &["alice", "bob"]).await;
    env.channel("other", &["alice", "carol"]).await;
    alice
}

async fn ask(service: &Service, alice: &Caller, text: &str) -> ThreadId {
    let req = PostRequest {
        impact: Some(Impact::None),
        ..post("request", Some("pair"), None, text)
    };
    service.post(alice, req).await.unwrap().thread
}

/// Spawns a waiting claim of `caller`, reporting `(name, thread claimed)` on `done`.
fn wait_for_work(
    service: &Service,
    caller: Caller,
    name: &'static str,
    done: &mpsc::UnboundedSender<(&'static str, ThreadId)>,
) -> tokio::task::JoinHandle<()> {
    let (service, done) = (service.clone(), done.clone());
    tokio::spawn(async move {
        let claim = service.claim_next_waiting(&caller, None, 30).await.unwrap();
        let _ = done.send((name, claim.thread));
    })
}

#[tokio::test]
async fn each_new_request_is_handed_to_one_waiting_claimer_and_never_to_another_person() {
    let env = TestEnv::new().await;
    let alice = people(&env).await;
    let s = &env.service;
    let (done, mut claimed) = mpsc::unbounded_channel();
    let bob1 = env
        .caller("bob", liaison::domain::Scope::Agent, "codex@b:1")
        .await;
    let bob2 = env
        .caller("bob", liaison::domain::Scope::Agent, "codex@b:2")
        .await;
    let carol = env
        .caller("carol", liaison::domain::Scope::Agent, "codex@c:1")
        .await;
    let waiting_bob1 = wait_for_work(s, bob1, "bob1", &done);
    let waiting_bob2 = wait_for_work(s, bob2, "bob2", &done);
    let waiting_carol = wait_for_work(s, carol, "carol", &done);
    until_waiting(s, 3).await;

    let first = ask(s, &alice, "rotate the logs").await;
    let (who, thread) = tokio::time::timeout(Duration::from_secs(20), claimed.recv())
        .await
        .expect("a waiting claimer is handed the request")
        .unwrap();
    assert!(who.starts_with("bob"), "{who} is no recipient");
    assert_eq!(thread, first);

    // The other bob still waits, and takes the next one.
    let second = ask(s, &alice, "renew the certificate").await;
    let (other, thread) = tokio::time::timeout(Duration::from_secs(20), claimed.recv())
        .await
        .expect("the other claimer is handed the second request")
        .unwrap();
    assert!(
        other.starts_with("bob") && other != who,
        "{other} after {who}"
    );
    assert_eq!(thread, second);

    // Nothing was ever handed to carol: alice's requests in `pair` are not hers.
    assert!(claimed.try_recv().is_err());
    assert!(!waiting_carol.is_finished());
    waiting_carol.abort();
    let _ = (waiting_bob1.await, waiting_bob2.await);
}

#[tokio::test]
async fn a_request_waiting_before_the_claim_is_taken_at_once_and_a_wait_ends_empty_with_not_found()
{
    let env = TestEnv::new().await;
    let alice = people(&env).await;
    let s = &env.service;
    let bob = env
        .caller("bob", liaison::domain::Scope::Agent, "codex@b:1")
        .await;
    let thread = ask(s, &alice, "rotate the logs").await;
    let claim = s.claim_next_waiting(&bob, None, 30).await.unwrap();
    assert_eq!(claim.thread, thread);
    let none = s.claim_next_waiting(&bob, None, 0).await.unwrap_err();
    assert_eq!(none.code, ErrorCode::NotFound);
}

#[tokio::test]
async fn a_wait_beyond_the_long_poll_limit_is_refused() {
    let env = TestEnv::new().await;
    people(&env).await;
    let bob = env
        .caller("bob", liaison::domain::Scope::Agent, "codex@b:1")
        .await;
    let e = env
        .service
        .claim_next_waiting(&bob, None, 10_000)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    assert!(e.message.contains("wait_s"), "{}", e.message);
    assert_eq!(env.service.waiting().0, 0, "nothing is left waiting");
}

/// A claimer handed a request it cannot take (its approval is pending) passes it on; once the
/// approval is granted the request is handed again and claimed.
#[tokio::test]
async fn a_request_freed_by_its_approval_is_handed_to_a_waiting_claimer() {
    let env = TestEnv::new().await;
    let alice = people(&env).await;
    let s = &env.service;
    let (done, mut claimed) = mpsc::unbounded_channel();
    let bob = env
        .caller("bob", liaison::domain::Scope::Agent, "codex@b:1")
        .await;
    let req = PostRequest {
        impact: Some(Impact::Code),
        ..post("request", Some("pair"), None, "bump the TLS library")
    };
    let posted = s.post(&alice, req).await.unwrap();
    assert!(
        posted.approval.is_some(),
        "a code request awaits bob's approval"
    );
    let waiting = wait_for_work(s, bob, "bob", &done);
    until_waiting(s, 1).await;
    assert!(claimed.try_recv().is_err());
    env.allow_pending("bob").await;
    let (_, thread) = tokio::time::timeout(Duration::from_secs(20), claimed.recv())
        .await
        .expect("the approved request is handed to the waiting claimer")
        .unwrap();
    assert_eq!(thread, posted.thread);
    waiting.await.unwrap();
}

/// Replicas on one PostgreSQL database: a request posted on one is handed to a claimer waiting
/// on the other (no claimer waits on the first). On SQLite there is one process by design.
#[tokio::test]
async fn on_postgres_a_request_posted_on_one_replica_is_handed_to_a_claimer_on_another() {
    use liaison::bus::PgBus;
    use liaison::domain::{Scope, Scopes};
    use liaison::service::TokenSpec;

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
    let alice = people(&a).await;
    let spec = TokenSpec {
        person: crate::helpers::pid("bob"),
        scopes: Scopes::default().with(Scope::Agent),
        expires_in_s: None,
        description: String::new(),
    };
    let secret = a.service.issue_token(&a.admin, spec).await.unwrap().secret;
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
    let bob_on_b = b.authenticate(&secret).await.unwrap().declaring(Some(
        liaison::domain::AgentIdentity::parse("codex@b:1").unwrap(),
    ));
    let (done, mut claimed) = mpsc::unbounded_channel();
    let waiting = wait_for_work(&b, bob_on_b, "bob on b", &done);
    until_waiting(&b, 1).await;
    let thread = ask(&a.service, &alice, "across replicas").await;
    // Without the hand-off across replicas the claim would only end at its 30 s deadline.
    let (_, got) = tokio::time::timeout(Duration::from_secs(20), claimed.recv())
        .await
        .expect("handed across replicas")
        .unwrap();
    assert_eq!(got, thread);
    waiting.await.unwrap();
    stop.cancel();
}

/// A claimer waiting for work holds its credential: revoking the token ends the wait at once with
/// `token_revoked`, and nothing is left waiting.
#[tokio::test]
async fn revoking_the_token_ends_a_waiting_claim_at_once() {
    use liaison::domain::{Scope, Scopes};
    use liaison::service::TokenSpec;
    let env = TestEnv::new().await;
    people(&env).await;
    let s = env.service.clone();
    let issued = s
        .issue_token(
            &env.admin,
            TokenSpec {
                person: liaison::domain::PersonId::parse("bob").unwrap(),
                scopes: Scopes::default().with(Scope::Agent),
                expires_in_s: None,
                description: String::new(),
            },
        )
        .await
        .unwrap();
    let bob = s
        .authenticate(&issued.secret)
        .await
        .unwrap()
        .declaring(Some(
            liaison::domain::AgentIdentity::parse("codex@b:1").unwrap(),
        ));
    let waiting = tokio::spawn({
        let s = s.clone();
        async move { s.claim_next_waiting(&bob, None, 30).await }
    });
    until_waiting(&s, 1).await;
    s.revoke_token(&env.admin, &issued.token.id).await.unwrap();
    // Bounded so a regression fails instead of hanging for the 30 s wait.
    let ended = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the wait ended when its token was revoked")
        .unwrap();
    assert_eq!(ended.unwrap_err().code, ErrorCode::TokenRevoked);
    assert_eq!(s.waiting().0, 0, "nothing is left waiting");
}
