//! Claims: one winner among concurrent sessions, lease expiry, release by reply.

use liaison::domain::Impact;
use liaison::service::{ClaimAction, ClaimTarget, ErrorCode, PostRequest};

use crate::helpers::{TestEnv, post};

async fn request_thread(env: &TestEnv) -> (liaison::domain::ThreadId, liaison::service::Caller) {
    let alice = env.member("alice", "claude@a:1").await;
    env.person("bob", liaison::domain::PersonKind::Member).await;
    env.channel("demo", &["alice", "bob"]).await;
    let req = PostRequest {
        impact: Some(Impact::None),
        ..post("request", Some("demo"), None, "rotate the logs")
    };
    (env.service.post(&alice, req).await.unwrap().thread, alice)
}

#[tokio::test]
async fn of_many_concurrent_claimers_exactly_one_wins_and_the_others_see_the_holder() {
    one_claimer_wins().await;
}

/// The same race on a multi-threaded runtime: the contenders run at once on two threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_two_threads_of_many_concurrent_claimers_exactly_one_wins_and_the_others_see_the_holder()
{
    one_claimer_wins().await;
}

async fn one_claimer_wins() {
    let env = TestEnv::new().await;
    let (thread, _alice) = request_thread(&env).await;
    let mut sessions = Vec::new();
    for i in 0..16 {
        sessions.push(
            env.caller(
                "bob",
                liaison::domain::Scope::Agent,
                &format!("claude@bob-laptop:{i}"),
            )
            .await,
        );
    }
    let tasks: Vec<_> = sessions
        .into_iter()
        .map(|c| {
            let (s, t) = (env.service.clone(), thread.clone());
            tokio::spawn(async move {
                s.claim(&c, ClaimTarget::Thread(t), ClaimAction::Claim, None)
                    .await
            })
        })
        .collect();
    let mut winners = 0;
    let mut holders = std::collections::BTreeSet::new();
    for t in tasks {
        match t.await.unwrap() {
            Ok(Some(claim)) => {
                winners += 1;
                holders.insert(claim.session.to_string());
            }
            Err(e) => {
                assert_eq!(e.code, ErrorCode::AlreadyClaimed);
                holders.insert(
                    e.details.unwrap()["holder"]["session"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                );
            }
            Ok(None) => panic!("a claim returns the claim"),
        }
    }
    assert_eq!(winners, 1);
    assert_eq!(holders.len(), 1, "every loser names the one winner");
}

#[tokio::test]
async fn an_expired_claim_can_be_taken_and_a_reply_releases_it() {
    let env = TestEnv::new().await;
    let (thread, alice) = request_thread(&env).await;
    let one = env
        .caller("bob", liaison::domain::Scope::Agent, "claude@bob:1")
        .await;
    let two = env
        .caller("bob", liaison::domain::Scope::Agent, "codex@bob:2")
        .await;
    let s = &env.service;
    s.claim(&one, ClaimTarget::Next, ClaimAction::Claim, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        s.claim(
            &two,
            ClaimTarget::Thread(thread.clone()),
            ClaimAction::Claim,
            None
        )
        .await
        .unwrap_err()
        .code,
        ErrorCode::AlreadyClaimed
    );
    // Renewing extends the lease; after the lease runs out, another session may claim.
    env.clock.advance_secs(500);
    let renewed = s
        .claim(
            &one,
            ClaimTarget::Thread(thread.clone()),
            ClaimAction::Claim,
            None,
        )
        .await
        .unwrap()
        .unwrap();
    env.clock.advance_secs(500);
    assert_eq!(
        s.claim(
            &two,
            ClaimTarget::Thread(thread.clone()),
            ClaimAction::Claim,
            None
        )
        .await
        .unwrap_err()
        .code,
        ErrorCode::AlreadyClaimed
    );
    env.clock.advance_secs(101);
    assert!(renewed.expires_at <= crate::helpers::t0().plus_secs(1101));
    let taken = s
        .claim(
            &two,
            ClaimTarget::Thread(thread.clone()),
            ClaimAction::Claim,
            None,
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.session.as_str(), "codex@bob:2");
    // The author cannot claim their own request; a reply releases the claim.
    assert_eq!(
        s.claim(
            &alice,
            ClaimTarget::Thread(thread.clone()),
            ClaimAction::Claim,
            None
        )
        .await
        .unwrap_err()
        .code,
        ErrorCode::NotClaimable
    );
    s.post(&two, post("reply", None, Some(&thread), "done"))
        .await
        .unwrap();
    assert!(
        s.thread(&two, &thread, None, None)
            .await
            .unwrap()
            .claim
            .is_none()
    );
    // A question thread is not claimable.
    let q = s
        .post(&alice, post("question", Some("demo"), None, "?"))
        .await
        .unwrap();
    assert_eq!(
        s.claim(
            &one,
            ClaimTarget::Thread(q.thread),
            ClaimAction::Claim,
            None
        )
        .await
        .unwrap_err()
        .code,
        ErrorCode::NotClaimable
    );
}
