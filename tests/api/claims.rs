//! Claims: one winner among concurrent sessions, lease expiry, release by reply, fencing tokens.

use liaison::domain::{Impact, Scope, Scopes};
use liaison::service::{ClaimAction, ClaimTarget, ErrorCode, PostRequest, TokenSpec};

use crate::helpers::{TestEnv, pid, post};

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

/// As many `next` claimers of one replica at once as there are requests, on two threads: each
/// takes a different request and none is told "nothing" while one is left, however the pages of
/// the queue they read and the threads they leave to each other fall.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_many_concurrent_next_claimers_as_requests_each_take_a_different_one() {
    const N: usize = 12;
    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    env.person("bob", liaison::domain::PersonKind::Member).await;
    env.channel("demo", &["alice", "bob"]).await;
    let mut requests = std::collections::BTreeSet::new();
    for i in 0..N {
        let req = PostRequest {
            impact: Some(Impact::None),
            ..post("request", Some("demo"), None, &format!("rotate log {i}"))
        };
        requests.insert(env.service.post(&alice, req).await.unwrap().thread);
    }
    let mut claimers = Vec::new();
    for i in 0..N {
        let c = env
            .caller("bob", Scope::Agent, &format!("codex@bob:{i}"))
            .await;
        let s = env.service.clone();
        claimers.push(tokio::spawn(async move {
            s.claim(&c, ClaimTarget::Next, ClaimAction::Claim, None)
                .await
        }));
    }
    let mut taken = std::collections::BTreeSet::new();
    for c in claimers {
        let claim = c.await.unwrap().unwrap().expect("a claim");
        assert!(taken.insert(claim.thread), "one thread claimed twice");
    }
    assert_eq!(taken, requests);
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

#[tokio::test]
async fn fencing_tokens_strictly_increase_across_holders_and_a_renewal_keeps_its_token() {
    let env = TestEnv::new().await;
    let (thread, _alice) = request_thread(&env).await;
    let a = env
        .caller("bob", liaison::domain::Scope::Agent, "claude@bob:1")
        .await;
    let b = env
        .caller("bob", liaison::domain::Scope::Agent, "codex@bob:2")
        .await;
    let s = &env.service;
    let on = || ClaimTarget::Thread(thread.clone());
    let claim = |c| s.claim(c, on(), ClaimAction::Claim, None);
    let first = claim(&a).await.unwrap().unwrap();
    assert!(first.fencing_token >= 1);
    // The same session renewing keeps its token, before and after its lease ran out.
    env.clock.advance_secs(300);
    assert_eq!(
        claim(&a).await.unwrap().unwrap().fencing_token,
        first.fencing_token
    );
    env.clock.advance_secs(601);
    assert_eq!(
        claim(&a).await.unwrap().unwrap().fencing_token,
        first.fencing_token
    );
    // A new holder gets a greater token: after a takeover, and after a release.
    env.clock.advance_secs(601);
    let second = claim(&b).await.unwrap().unwrap();
    assert!(second.fencing_token > first.fencing_token);
    s.claim(&b, on(), ClaimAction::Release, None).await.unwrap();
    let third = claim(&a).await.unwrap().unwrap();
    assert!(third.fencing_token > second.fencing_token);
    // The thread view shows the live claim with its token.
    let view = s.thread(&a, &thread, None, None).await.unwrap();
    assert_eq!(view.claim.unwrap().fencing_token, third.fencing_token);
}

#[tokio::test]
async fn a_stale_fencing_token_is_refused_naming_the_holder_and_nothing_is_written() {
    let env = TestEnv::new().await;
    let (thread, _alice) = request_thread(&env).await;
    let a = env
        .caller("bob", liaison::domain::Scope::Agent, "claude@bob:1")
        .await;
    let b = env
        .caller("bob", liaison::domain::Scope::Agent, "codex@bob:2")
        .await;
    let s = &env.service;
    let on = || ClaimTarget::Thread(thread.clone());
    let fenced = |body: &str, token: Option<i64>| PostRequest {
        fencing_token: token,
        ..post("announce", None, Some(&thread), body)
    };
    let old = s
        .claim(&a, on(), ClaimAction::Claim, None)
        .await
        .unwrap()
        .unwrap()
        .fencing_token;
    // While A holds the claim, and after its lease ran out with nobody claiming since, its token
    // is good.
    s.post(&a, fenced("working on it", Some(old)))
        .await
        .unwrap();
    env.clock.advance_secs(601);
    s.post(&a, fenced("still on it", Some(old))).await.unwrap();

    let new = s
        .claim(&b, on(), ClaimAction::Claim, None)
        .await
        .unwrap()
        .unwrap()
        .fencing_token;
    assert!(new > old);
    let before = s.thread(&a, &thread, None, None).await.unwrap();

    let refused = s
        .post(&a, fenced("late result", Some(old)))
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::StaleClaim);
    let details = refused.details.unwrap();
    assert_eq!(details["fencing_token"], old);
    assert_eq!(details["holder"]["person"], "bob");
    assert_eq!(details["holder"]["session"], "codex@bob:2");
    assert_eq!(details["holder"]["fencing_token"], new);
    assert!(
        refused.message.contains("codex@bob:2"),
        "{}",
        refused.message
    );
    // A reply (which would end B's claim) is refused the same way.
    assert_eq!(
        s.post(
            &a,
            PostRequest {
                fencing_token: Some(old),
                ..post("reply", None, Some(&thread), "done")
            }
        )
        .await
        .unwrap_err()
        .code,
        ErrorCode::StaleClaim
    );
    let after = s.thread(&a, &thread, None, None).await.unwrap();
    assert_eq!(after.thread.message_count, before.thread.message_count);
    assert_eq!(after.messages.len(), before.messages.len());
    assert_eq!(
        after.claim.as_ref().unwrap().session.as_str(),
        "codex@bob:2"
    );

    // A's renewal with its old token is refused too, and leaves B's claim as it was.
    let renewal = s
        .claim_fenced(&a, on(), ClaimAction::Claim, None, Some(old))
        .await
        .unwrap_err();
    assert_eq!(renewal.code, ErrorCode::StaleClaim);
    assert_eq!(renewal.details.unwrap()["holder"]["session"], "codex@bob:2");
    let held = s
        .thread(&a, &thread, None, None)
        .await
        .unwrap()
        .claim
        .unwrap();
    assert_eq!(
        (held.session.as_str(), held.fencing_token),
        ("codex@bob:2", new)
    );
    // B's own token is stale in A's hands: it is B's claim.
    assert_eq!(
        s.post(&a, fenced("not mine", Some(new)))
            .await
            .unwrap_err()
            .code,
        ErrorCode::StaleClaim
    );

    // B posts and renews with its token; a token never issued is invalid input, not stale.
    s.post(&b, fenced("taking over", Some(new))).await.unwrap();
    let renewed = s
        .claim_fenced(&b, on(), ClaimAction::Claim, None, Some(new))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(renewed.fencing_token, new);
    for never in [new + 1, 0] {
        let e = s.post(&b, fenced("?", Some(never))).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput, "{never}: {}", e.message);
    }
    assert_eq!(
        s.claim_fenced(&b, on(), ClaimAction::Claim, None, Some(new + 1))
            .await
            .unwrap_err()
            .code,
        ErrorCode::InvalidInput
    );
    // A post without a token behaves as before, from either session.
    s.post(&a, fenced("a note", None)).await.unwrap();
    let last = s.thread(&b, &thread, None, None).await.unwrap();
    assert_eq!(last.thread.message_count, after.thread.message_count + 2);
}

/// `/api/v1` passes the token through both ways and answers a stale one with HTTP 409.
#[tokio::test]
async fn over_api_v1_a_stale_fencing_token_is_a_409_naming_the_holder() {
    use serde_json::{Value, json};
    // `/api/v1` over the service on its manual clock: the lease runs out when the test says.
    let env = TestEnv::new().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let router = liaison::api::router(env.service.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });
    let http = reqwest::Client::new();
    let send = |path: &str, token: &str, agent: Option<&str>, body: Value| {
        let mut r = http
            .post(format!("{url}{path}"))
            .bearer_auth(token)
            .json(&body);
        if let Some(agent) = agent {
            r = r.header("liaison-agent", agent);
        }
        r.send()
    };
    let mut secrets = Vec::new();
    for id in ["ana", "ben"] {
        env.person(id, liaison::domain::PersonKind::Member).await;
        let spec = TokenSpec {
            person: pid(id),
            scopes: Scopes::default().with(Scope::Agent),
            expires_in_s: None,
            description: String::new(),
        };
        secrets.push(
            env.service
                .issue_token(&env.admin, spec)
                .await
                .unwrap()
                .secret,
        );
    }
    let (ana, ben) = (&secrets[0], &secrets[1]);
    env.channel("fence", &["ana", "ben"]).await;
    let asked: Value = send(
        "/api/v1/messages",
        ana,
        None,
        json!({"kind": "handoff", "channel": "fence", "body": "Take it"}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let thread = asked["thread"].as_str().unwrap().to_owned();
    let (one, two) = ("claude@ben:1", "codex@ben:2");
    let first: Value = send(
        "/api/v1/claims",
        ben,
        Some(one),
        json!({"thread": thread, "lease_s": 1}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let old = first["claim"]["fencing_token"].as_i64().unwrap();
    env.clock.advance_secs(2);
    let second: Value = send("/api/v1/claims", ben, Some(two), json!({"thread": thread}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let new = second["claim"]["fencing_token"]
        .as_i64()
        .unwrap_or_else(|| panic!("the lease ran out, so the other session claims: {second}"));
    assert!(new > old, "{second}");

    let refused = send(
        "/api/v1/messages",
        ben,
        Some(one),
        json!({"kind": "announce", "thread": thread, "body": "late", "fencing_token": old}),
    )
    .await
    .unwrap();
    assert_eq!(refused.status(), 409);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "stale_claim", "{body}");
    assert_eq!(body["error"]["details"]["holder"]["session"], two, "{body}");
    let renewal = send(
        "/api/v1/claims",
        ben,
        Some(one),
        json!({"thread": thread, "action": "renew", "fencing_token": old}),
    )
    .await
    .unwrap();
    assert_eq!(renewal.status(), 409);
    let ok = send(
        "/api/v1/messages",
        ben,
        Some(two),
        json!({"kind": "announce", "thread": thread, "body": "fresh", "fencing_token": new}),
    )
    .await
    .unwrap();
    assert_eq!(ok.status(), 200, "{}", ok.text().await.unwrap());
}

/// The member CLI (`liaison claim|post|thread`, the person's own token) over `/api/v1` on the
/// service's manual clock: the lease runs out when the test says, another session claims, and the
/// first session's stale fencing token is refused naming the holder, nothing written.
#[tokio::test]
async fn on_the_command_line_a_stale_fencing_token_is_refused_naming_the_holder() {
    use serde_json::Value;
    let env = TestEnv::new().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let router = liaison::api::router(env.service.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });
    let mut secrets = Vec::new();
    for id in ["ana", "ben"] {
        env.person(id, liaison::domain::PersonKind::Member).await;
        let spec = TokenSpec {
            person: pid(id),
            scopes: Scopes::default().with(Scope::Agent),
            expires_in_s: None,
            description: String::new(),
        };
        secrets.push(
            env.service
                .issue_token(&env.admin, spec)
                .await
                .unwrap()
                .secret,
        );
    }
    let (ana, ben) = (secrets[0].as_str(), secrets[1].as_str());
    env.channel("fence", &["ana", "ben"]).await;
    // The CLI as a person runs it: her server, her token, the session's name; nothing else of
    // this process's LIAISON_* settings.
    let cli = |token: &str, agent: Option<&str>, args: &[&str]| {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_liaison"));
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("LIAISON_")) {
            cmd.env_remove(k);
        }
        cmd.env("LIAISON_SERVER", &url).env("LIAISON_TOKEN", token);
        if let Some(agent) = agent {
            cmd.env("LIAISON_AGENT", agent);
        }
        cmd.args(args).output()
    };
    let ok = |out: std::process::Output| {
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        String::from_utf8(out.stdout).unwrap()
    };
    let json = |text: String| serde_json::from_str::<Value>(&text).unwrap();

    let posted = json(ok(cli(
        ana,
        None,
        &[
            "post",
            "--kind",
            "handoff",
            "--channel",
            "fence",
            "--json",
            "Take the fence",
        ],
    )
    .await
    .unwrap()));
    let thread = posted["thread"].as_str().unwrap().to_owned();
    let (one, two) = ("codex@ben-laptop:41", "claude@ben-laptop:42");
    let first = json(ok(cli(
        ben,
        Some(one),
        &["claim", &thread, "--lease", "60", "--json"],
    )
    .await
    .unwrap()));
    let old = first["claim"]["fencing_token"]
        .as_i64()
        .unwrap()
        .to_string();
    let renewed = ok(cli(
        ben,
        Some(one),
        &["claim", &thread, "--lease", "60", "--fencing-token", &old],
    )
    .await
    .unwrap());
    assert!(
        renewed.contains(&format!("fencing token {old}")),
        "{renewed}"
    );
    // The renewed lease still holds: another session is refused.
    let early = cli(ben, Some(two), &["claim", &thread]).await.unwrap();
    let stderr = String::from_utf8_lossy(&early.stderr);
    assert!(
        !early.status.success() && stderr.contains("already_claimed"),
        "{stderr}"
    );
    // The lease runs out; the other session claims.
    env.clock.advance_secs(61);
    let second = json(ok(cli(ben, Some(two), &["claim", &thread, "--json"])
        .await
        .unwrap()));
    let new = second["claim"]["fencing_token"].as_i64().unwrap();
    assert!(new > old.parse::<i64>().unwrap(), "{second}");

    let late = cli(
        ben,
        Some(one),
        &[
            "post",
            "--kind",
            "announce",
            "--thread",
            &thread,
            "--fencing-token",
            &old,
            "Late news",
        ],
    )
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&late.stderr);
    assert!(
        !late.status.success() && stderr.contains("stale_claim") && stderr.contains(two),
        "{stderr}"
    );
    let renewal = cli(ben, Some(one), &["claim", &thread, "--fencing-token", &old])
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&renewal.stderr);
    assert!(
        !renewal.status.success() && stderr.contains("stale_claim"),
        "{stderr}"
    );
    ok(cli(
        ben,
        Some(two),
        &[
            "post",
            "--kind",
            "announce",
            "--thread",
            &thread,
            "--fencing-token",
            &new.to_string(),
            "Fresh news",
        ],
    )
    .await
    .unwrap());
    let view = json(ok(cli(ana, None, &["thread", &thread, "--json"])
        .await
        .unwrap()));
    let bodies: Vec<&str> = view["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["body"].as_str().unwrap())
        .collect();
    assert_eq!(bodies, ["Take the fence", "Fresh news"]);
}
