//! Nothing outlives its credential: a long-poll, a blocking send and an A2A task stream (the
//! operations every binding frames, JSON-RPC SSE, HTTP+JSON SSE and gRPC alike) end with an error
//! once the credential they were opened with is revoked, its person removed, or its expiry passed,
//! and nothing written afterwards reaches them; on every replica. Nothing here times anything:
//! each wait is bounded only so that something that never ends fails instead of hanging.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use liaison::a2a::handler::{A2a, Events};
use liaison::bus::{PgBus, WakeBus};
use liaison::domain::{Kind, PersonKind, Scope, Scopes, ThreadId};
use liaison::service::{
    Caller, ErrorCode, InboxRequest, Service, Settings, SkillRoute, TaskMessage, TaskView,
    TokenSpec,
};
use liaison::wire::errors::A2aError;
use liaison::wire::pb;
use tokio_util::sync::CancellationToken;

use crate::helpers::{TestDb, TestEnv, channel, pid, post};

/// A blocking send's wait, started: the task, or why it ended.
type Wait = tokio::task::JoinHandle<Result<TaskView, A2aError>>;

/// Only keeps a stream that never ends from hanging the suite.
const HANG: Duration = Duration::from_secs(20);

fn settings() -> Settings {
    Settings {
        skills: vec![SkillRoute {
            id: "ask".into(),
            channel: channel("partners"),
            kind: Kind::Question,
            impact: None,
            direct_answers: false,
        }],
        default_skill: Some("ask".into()),
        ..Settings::default()
    }
}

/// A token of `person` with `scope`, expiring in `expires_in_s` when given, authenticated.
async fn token(
    s: &Service,
    admin: &Caller,
    person: &str,
    scope: Scope,
    expires_in_s: Option<u64>,
) -> (String, Caller) {
    let spec = TokenSpec {
        person: pid(person),
        scopes: Scopes::default().with(scope),
        expires_in_s,
        description: String::new(),
    };
    let issued = s.issue_token(admin, spec).await.unwrap();
    let caller = s.authenticate(&issued.secret).await.unwrap();
    (issued.token.id, caller)
}

/// alice (a member) and partner (a party) in channel `partners`.
async fn people(env: &TestEnv) -> Caller {
    let alice = env.member("alice", "claude@a:1").await;
    env.person("partner", PersonKind::External).await;
    env.channel("partners", &["alice", "partner"]).await;
    alice
}

/// Every item of `events` until it ends, or `None` if it has not ended within [`HANG`].
async fn drain(events: Events) -> Option<Vec<String>> {
    let items = events
        .map(|item| match item {
            Ok(ev) => format!("{ev:?}"),
            Err(e) => format!("error {:?}: {}", e.kind, e.message),
        })
        .collect::<Vec<_>>();
    tokio::time::timeout(HANG, items).await.ok()
}

/// A stream of the task `partner` opens on `on`, its reply written by alice through `env` once
/// `end` has ended the party's credential: the stream ends with an error and never shows the reply.
async fn a_stream_ends_with(
    on: &Service,
    env: &TestEnv,
    partner: &Caller,
    alice: &Caller,
    end: impl AsyncFnOnce(),
) {
    let a2a = A2a::new(on.clone(), Duration::from_secs(30));
    let task = on
        .send_task_message(
            partner,
            TaskMessage {
                message_id: "m1".into(),
                body: "Which TLS versions?".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let id = task.thread.id.clone();
    let req = pb::SubscribeToTaskRequest {
        id: id.to_string(),
        ..Default::default()
    };
    let mut events = a2a.subscribe(partner, req).await.unwrap();
    // The snapshot: the stream is open and following.
    let first = events.next().await.unwrap();
    assert!(first.is_ok(), "{first:?}");
    let stream = tokio::spawn(drain(events));
    end().await;
    // Written after the credential ended: no longer the party's to read.
    env.service
        .post(alice, post("reply", None, Some(&id), "TLS 1.3 only"))
        .await
        .unwrap();
    let items = stream
        .await
        .unwrap()
        .expect("the stream ends with its credential");
    assert!(
        !items.iter().any(|i| i.contains("TLS 1.3 only")),
        "the reply reached the stream after its credential ended: {items:#?}"
    );
    let last = items.last().expect("a closing error");
    assert!(last.starts_with("error "), "{items:#?}");
}

#[tokio::test]
async fn a_task_stream_ends_when_its_token_is_revoked() {
    let env = TestEnv::with_settings(settings()).await;
    let alice = people(&env).await;
    let s = &env.service;
    let (id, partner) = token(s, &env.admin, "partner", Scope::Agent, None).await;
    a_stream_ends_with(s, &env, &partner, &alice, async || {
        s.revoke_token(&env.admin, &id).await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn a_task_stream_ends_when_its_party_is_removed() {
    let env = TestEnv::with_settings(settings()).await;
    let alice = people(&env).await;
    let s = &env.service;
    let (_, partner) = token(s, &env.admin, "partner", Scope::Agent, None).await;
    a_stream_ends_with(s, &env, &partner, &alice, async || {
        s.remove_party(&env.admin, &pid("partner")).await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn a_task_stream_ends_when_its_token_expires() {
    let env = TestEnv::with_settings(settings()).await;
    let alice = people(&env).await;
    let s = &env.service;
    let (_, partner) = token(s, &env.admin, "partner", Scope::Agent, Some(60)).await;
    a_stream_ends_with(s, &env, &partner, &alice, async || {
        env.clock.advance_secs(61);
    })
    .await;
}

/// The partner's question sent on `service` and its blocking wait (as `SendMessage` without
/// `returnImmediately` holds it) started: the task and the wait.
async fn blocking_send(service: &Service, partner: &Caller) -> (ThreadId, Wait) {
    let seen = service
        .send_task_message(
            partner,
            TaskMessage {
                message_id: "m1".into(),
                body: "Which TLS versions?".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let task = seen.thread.id.clone();
    let a2a = A2a::new(service.clone(), Duration::from_secs(3600));
    let wait = tokio::spawn({
        let (partner, task) = (partner.clone(), task.clone());
        async move { a2a.wait_for_end(&partner, &task, seen).await }
    });
    (task, wait)
}

/// The blocking wait ended with `token_revoked`, not with the task and its reply.
async fn ends_revoked(wait: Wait) {
    let answer = tokio::time::timeout(HANG, wait)
        .await
        .expect("the wait ends with its credential")
        .unwrap();
    let e = answer.expect_err("an error, not the task with the reply");
    assert!(e.message.contains("revoked"), "{e:?}");
}

#[tokio::test]
async fn a_blocking_send_ends_when_its_token_is_revoked() {
    let env = TestEnv::with_settings(settings()).await;
    let alice = people(&env).await;
    let s = &env.service;
    let (id, partner) = token(s, &env.admin, "partner", Scope::Agent, None).await;
    let (task, wait) = blocking_send(s, &partner).await;
    // Let the wait subscribe (it would answer a reply at once otherwise: nothing to test).
    tokio::time::sleep(Duration::from_millis(100)).await;
    s.revoke_token(&env.admin, &id).await.unwrap();
    s.post(&alice, post("reply", None, Some(&task), "TLS 1.3 only"))
        .await
        .unwrap();
    ends_revoked(wait).await;
}

#[tokio::test]
async fn a_long_poll_ends_when_its_token_expires_and_returns_no_later_entry() {
    let env = TestEnv::new().await;
    let s = &env.service;
    env.member("bob", "codex@b:1").await;
    env.person("alice", PersonKind::Member).await;
    env.channel("demo", &["alice", "bob"]).await;
    let bob = env.caller("bob", Scope::Agent, "codex@b:1").await;
    let (_, alice) = token(s, &env.admin, "alice", Scope::Agent, Some(60)).await;
    let poll = tokio::spawn({
        let (s, alice) = (s.clone(), alice.clone());
        async move {
            let req = InboxRequest {
                session: None,
                consumer: "claude".into(),
                after: None,
                limit: None,
                wait_s: Some(30),
            };
            s.inbox(&alice, req).await
        }
    });
    crate::helpers::until_waiting(s, 1).await;
    env.clock.advance_secs(61);
    // Posted after the token expired: the long-poll must not hand it to the expired token.
    s.post(&bob, post("announce", Some("demo"), None, "after expiry"))
        .await
        .unwrap();
    let answer = tokio::time::timeout(HANG, poll)
        .await
        .expect("the long-poll ends")
        .unwrap();
    match answer {
        Err(e) => assert_eq!(e.code, ErrorCode::TokenExpired, "{e:?}"),
        Ok(page) => panic!(
            "an expired token's long-poll returned {} entries",
            page.entries.len()
        ),
    }
}

/// Two replicas on one PostgreSQL database (`None` on SQLite, which is one server): the test's
/// environment, a second service, and what stops their buses.
async fn two_replicas() -> Option<(TestEnv, Service, CancellationToken)> {
    let db = TestDb::new().await;
    if !db.is_postgres() {
        return None;
    }
    let stop = CancellationToken::new();
    let url = db.url.clone();
    let bus = |stop: CancellationToken| {
        let url = url.clone();
        async move {
            let bus: Arc<dyn WakeBus> = PgBus::start(&url, stop).await.unwrap();
            bus
        }
    };
    let env = TestEnv::on(db, bus(stop.clone()).await, settings()).await;
    let two = Service::new(
        liaison::service::Deps::new(
            Arc::new(liaison::store::Store::open(&url).await.unwrap()),
            bus(stop.clone()).await,
            Arc::new(liaison::clock::SystemClock),
            settings(),
            stop.clone(),
        )
        .unwrap(),
    );
    Some((env, two, stop))
}

/// A partner token issued on replica one, and its secret.
async fn partner_token(env: &TestEnv) -> liaison::service::IssuedToken {
    let spec = TokenSpec {
        person: pid("partner"),
        scopes: Scopes::default().with(Scope::Agent),
        expires_in_s: None,
        description: String::new(),
    };
    env.service.issue_token(&env.admin, spec).await.unwrap()
}

#[tokio::test]
async fn a_task_stream_on_one_replica_ends_when_its_token_is_revoked_on_the_other() {
    let Some((env, two, stop)) = two_replicas().await else {
        return;
    };
    let alice = people(&env).await;
    let issued = partner_token(&env).await;
    // The stream is opened on replica two; the token is revoked, and the reply written, on one.
    let partner = two.authenticate(&issued.secret).await.unwrap();
    a_stream_ends_with(&two, &env, &partner, &alice, async || {
        env.service
            .revoke_token(&env.admin, &issued.token.id)
            .await
            .unwrap();
    })
    .await;
    stop.cancel();
}

#[tokio::test]
async fn a_blocking_send_on_one_replica_ends_when_its_token_is_revoked_on_the_other() {
    let Some((env, two, stop)) = two_replicas().await else {
        return;
    };
    let alice = people(&env).await;
    let issued = partner_token(&env).await;
    // The send waits on replica two; the task is claimed (a wake-up with nothing to hand over),
    // then the token revoked and the reply written, on one.
    let partner = two.authenticate(&issued.secret).await.unwrap();
    let (task, wait) = blocking_send(&two, &partner).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    env.service
        .claim(
            &alice,
            liaison::service::ClaimTarget::Thread(task.clone()),
            liaison::service::ClaimAction::Claim,
            None,
        )
        .await
        .unwrap();
    env.service
        .revoke_token(&env.admin, &issued.token.id)
        .await
        .unwrap();
    env.service
        .post(&alice, post("reply", None, Some(&task), "TLS 1.3 only"))
        .await
        .unwrap();
    ends_revoked(wait).await;
    stop.cancel();
}
