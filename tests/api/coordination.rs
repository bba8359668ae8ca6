//! Presence, fleet, leases (with force) and token lifetimes, with a clock moved by hand.

use liaison::domain::{LeaseMode, Scope, Scopes, Transition};
use liaison::service::{ErrorCode, InboxRequest, LeaseSpec, PresenceSpec, TokenSpec};

use crate::helpers::{TestEnv, pid};

fn lease(resource: &str, mode: LeaseMode, force: bool) -> LeaseSpec {
    LeaseSpec {
        resource: resource.into(),
        mode,
        ttl_s: Some(60),
        force,
    }
}

#[tokio::test]
async fn presence_expires_silently_and_the_fleet_is_scoped_to_shared_channels() {
    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "codex@b:1").await;
    let carol = env.member("carol", "x@c:1").await;
    env.channel("demo", &["alice", "bob"]).await;
    let s = &env.service;
    let spec = |t, ttl| PresenceSpec {
        transition: t,
        task: Some("fixing CI".into()),
        ttl_s: ttl,
    };
    s.presence_set(&alice, spec(Transition::Working, None))
        .await
        .unwrap();
    s.presence_set(&bob, spec(Transition::Blocked, Some(30)))
        .await
        .unwrap();
    s.presence_set(&carol, spec(Transition::Idle, None))
        .await
        .unwrap();
    let fleet: Vec<String> = s
        .fleet(&alice)
        .await
        .unwrap()
        .iter()
        .map(|p| p.person.to_string())
        .collect();
    assert_eq!(
        fleet,
        ["alice", "bob"],
        "carol shares no channel with alice"
    );
    env.clock.advance_secs(31);
    let fleet: Vec<String> = s
        .fleet(&alice)
        .await
        .unwrap()
        .iter()
        .map(|p| p.person.to_string())
        .collect();
    assert_eq!(fleet, ["alice"], "bob's 30 s presence expired");
    env.clock.advance_secs(90);
    assert!(
        s.fleet(&alice).await.unwrap().is_empty(),
        "the default TTL is 120 s"
    );
    let bad = PresenceSpec {
        transition: Transition::Done,
        task: None,
        ttl_s: Some(0),
    };
    assert_eq!(
        s.presence_set(&alice, bad).await.unwrap_err().code,
        ErrorCode::InvalidInput
    );
}

#[tokio::test]
async fn leases_refuse_conflicts_and_force_tells_the_previous_holder() {
    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "codex@b:1").await;
    env.channel("demo", &["alice", "bob"]).await;
    let s = &env.service;
    s.lease_acquire(&alice, lease("repo:bridge", LeaseMode::Exclusive, false))
        .await
        .unwrap();
    let err = s
        .lease_acquire(&bob, lease("repo:bridge", LeaseMode::Shared, false))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::LeaseHeld);
    assert!(err.message.contains("alice"), "{}", err.message);

    let taken = s
        .lease_acquire(&bob, lease("repo:bridge", LeaseMode::Exclusive, true))
        .await
        .unwrap();
    assert_eq!(taken.person, pid("bob"));
    let inbox = s
        .inbox(
            &alice,
            InboxRequest {
                session: None,
                consumer: "claude".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let notice = serde_json::to_value(&inbox.entries[0]).unwrap();
    assert_eq!(notice["type"], "notice");
    assert_eq!(notice["notice"]["type"], "lease_taken");
    assert_eq!(notice["notice"]["taken_by"], "bob");
    assert_eq!(s.leases(&alice).await.unwrap().len(), 1);

    // Shared holders coexist; expiry frees the resource.
    s.lease_acquire(&alice, lease("service:api", LeaseMode::Shared, false))
        .await
        .unwrap();
    s.lease_acquire(&bob, lease("service:api", LeaseMode::Shared, false))
        .await
        .unwrap();
    assert_eq!(
        s.lease_acquire(&alice, lease("repo:bridge", LeaseMode::Exclusive, false))
            .await
            .unwrap_err()
            .code,
        ErrorCode::LeaseHeld
    );
    env.clock.advance_secs(61);
    s.lease_acquire(&alice, lease("repo:bridge", LeaseMode::Exclusive, false))
        .await
        .unwrap();
    s.lease_release(&alice, "repo:bridge").await.unwrap();
    assert_eq!(
        s.lease_release(&alice, "repo:bridge")
            .await
            .unwrap_err()
            .code,
        ErrorCode::InvalidInput
    );
    assert_eq!(
        s.lease_acquire(&alice, lease("bad resource!", LeaseMode::Shared, false))
            .await
            .unwrap_err()
            .code,
        ErrorCode::InvalidInput
    );
}

#[tokio::test]
async fn expired_revoked_and_removed_tokens_are_refused_at_once() {
    let env = TestEnv::new().await;
    env.person("alice", liaison::domain::PersonKind::Member)
        .await;
    let s = &env.service;
    let issue = |expires| TokenSpec {
        person: pid("alice"),
        scopes: Scopes::default().with(Scope::Agent),
        expires_in_s: expires,
        description: String::new(),
    };
    let short = s.issue_token(&env.admin, issue(Some(60))).await.unwrap();
    let long = s.issue_token(&env.admin, issue(None)).await.unwrap();
    s.authenticate(&short.secret).await.unwrap();
    env.clock.advance_secs(61);
    assert_eq!(
        s.authenticate(&short.secret).await.unwrap_err().code,
        ErrorCode::TokenExpired
    );
    s.revoke_token(&env.admin, &long.token.id).await.unwrap();
    assert_eq!(
        s.authenticate(&long.secret).await.unwrap_err().code,
        ErrorCode::TokenRevoked
    );
    assert_eq!(
        s.authenticate("lsn_nonsense").await.unwrap_err().code,
        ErrorCode::Unauthenticated
    );
    let third = s.issue_token(&env.admin, issue(None)).await.unwrap();
    s.remove_person(&env.admin, &pid("alice")).await.unwrap();
    assert_eq!(
        s.authenticate(&third.secret).await.unwrap_err().code,
        ErrorCode::TokenRevoked
    );
    // An agent token cannot administer.
    env.person("bob", liaison::domain::PersonKind::Member).await;
    let bob = env.caller("bob", Scope::Agent, "a@b:c").await;
    assert_eq!(
        s.list_persons(&bob).await.unwrap_err().code,
        ErrorCode::Forbidden
    );
}
