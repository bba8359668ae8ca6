//! The humans' workspace on the service (SPEC §3, §4, §11): a person's own posts labelled as hers,
//! receipts per recipient and consumer, a reply's structured result, a member's own agent tokens
//! (revocation ending a waiting long-poll at once), and the thread list's filters. Both backends.

use liaison::domain::{Scope, WrittenBy};
use liaison::service::{ErrorCode, InboxRequest, OwnTokenSpec, ThreadFilter};

use crate::activity::in_channel;
use crate::helpers::{TestEnv, channel, eventually, post};

fn inbox(consumer: &str, after: Option<i64>, wait_s: u64) -> InboxRequest {
    InboxRequest {
        session: None,
        consumer: consumer.into(),
        after,
        limit: Some(20),
        wait_s: Some(wait_s),
    }
}

#[tokio::test]
async fn a_persons_own_post_is_labelled_as_hers_and_her_agents_is_not() {
    let env = TestEnv::new().await;
    let alice_agent = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "codex@b:1").await;
    let alice = env.caller("alice", Scope::Human, "alice@console:1").await;
    env.channel("demo", &["alice", "bob"]).await;

    let by_her = env
        .service
        .post(&alice, post("question", Some("demo"), None, "Which TLS?"))
        .await
        .unwrap();
    env.service
        .post(
            &alice_agent,
            post("announce", Some("demo"), None, "deployed"),
        )
        .await
        .unwrap();
    let page = env
        .service
        .inbox(&bob, inbox("codex", None, 0))
        .await
        .unwrap();
    let labels: Vec<String> = page
        .entries
        .iter()
        .map(|e| {
            serde_json::to_value(e).unwrap()["label"]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(
        labels[0].starts_with("Data written by **Alice** in person, not by an agent."),
        "{}",
        labels[0]
    );
    assert!(
        labels[1].starts_with("Data written by the agent of **Alice**."),
        "{}",
        labels[1]
    );
    let view = env
        .service
        .thread(&bob, &by_her.thread, None, None)
        .await
        .unwrap();
    assert_eq!(
        view.messages[0].message.message.written_by,
        WrittenBy::Human
    );
    // The agent's token, even of the same person, never writes as her.
    assert_eq!(alice_agent.writes_as(), WrittenBy::Agent);
}

#[tokio::test]
async fn receipts_say_delivered_read_and_acknowledged_per_consumer() {
    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "codex@b:1").await;
    env.member("carol", "claude@c:1").await;
    env.channel("demo", &["alice", "bob", "carol"]).await;
    let sent = env
        .service
        .post(&alice, post("question", Some("demo"), None, "Anyone?"))
        .await
        .unwrap();
    let receipts = |env: &TestEnv| {
        let (s, a, t) = (env.service.clone(), alice.clone(), sent.thread.clone());
        async move {
            s.thread(&a, &t, None, None).await.unwrap().messages[0]
                .receipts
                .clone()
        }
    };

    let r = receipts(&env).await;
    assert_eq!(r.len(), 2, "one per recipient: {r:?}");
    assert_eq!((r[0].person.as_str(), r[0].name.as_str()), ("bob", "Bob"));
    assert!(r.iter().all(|x| x.consumers.is_empty() && !x.read()));

    // bob's claude reads it (the inbox call returns it), then acknowledges it.
    let page = env
        .service
        .inbox(&bob, inbox("claude", None, 0))
        .await
        .unwrap();
    assert_eq!(page.entries.len(), 1);
    // The read is recorded behind the answer (a receipt is information, not an
    // acknowledgement): it shows once the writer has committed it.
    let r = eventually("bob's claude's read", || async {
        let r = receipts(&env).await;
        r[0].read().then_some(r)
    })
    .await;
    let c = &r[0].consumers;
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].consumer, "claude");
    assert!(c[0].read_at.is_some() && c[0].acked_at.is_none());
    // Asking again (a lost response) keeps the first read.
    let first_read = c[0].read_at;
    env.clock.advance_secs(5);
    env.service
        .inbox(&bob, inbox("claude", None, 0))
        .await
        .unwrap();
    // The acknowledgement is durable when answered, and its commit carries the second read
    // (written first, as it was kept first).
    env.service
        .inbox(&bob, inbox("claude", Some(page.cursor), 0))
        .await
        .unwrap();
    let r = receipts(&env).await;
    assert_eq!(r[0].consumers[0].read_at, first_read);
    assert!(r[0].acknowledged() && r[0].consumers[0].acked_at.is_some());
    // bob's codex moves its cursor past it without having been given it: acknowledged, unread.
    env.service
        .inbox(&bob, inbox("codex", Some(page.cursor), 0))
        .await
        .unwrap();
    let r = receipts(&env).await;
    let codex = r[0]
        .consumers
        .iter()
        .find(|c| c.consumer == "codex")
        .unwrap();
    assert!(codex.read_at.is_none() && codex.acked_at.is_some());
    // carol's agents have seen nothing.
    assert_eq!(r[1].person.as_str(), "carol");
    assert!(r[1].consumers.is_empty());
}

fn result(v: serde_json::Value) -> liaison::domain::ReplyResult {
    serde_json::from_value(v).unwrap()
}

#[tokio::test]
async fn a_reply_carries_a_validated_result_and_a_bad_one_posts_nothing() {
    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "codex@b:1").await;
    env.channel("demo", &["alice", "bob"]).await;
    let asked = env
        .service
        .post(
            &alice,
            post("question", Some("demo"), None, "Replace the pricing table"),
        )
        .await
        .unwrap();
    let good = result(serde_json::json!({
        "status": "done", "summary": "Replaced it",
        "changed": ["pricing.md"], "checks": [{"name": "tests", "outcome": "passed"}],
        "links": [{"url": "https://example.com/pr/7", "title": "PR 7"}]
    }));
    let refused = [
        ("question", Some(good.clone()), "result is only for a reply"),
        (
            "reply",
            Some(result(serde_json::json!({"status": "done", "summary": "x",
                "links": [{"url": "javascript:alert(1)"}]}))),
            "links[0].url",
        ),
        (
            "reply",
            Some(result(
                serde_json::json!({"status": "failed", "summary": " "}),
            )),
            "summary",
        ),
    ];
    for (kind, r, why) in refused {
        let mut req = post(kind, None, Some(&asked.thread), "done");
        req.result = r;
        let e = env.service.post(&bob, req).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert!(e.message.contains(why), "{why}: {}", e.message);
    }
    let view = env
        .service
        .thread(&alice, &asked.thread, None, None)
        .await
        .unwrap();
    assert_eq!(view.thread.message_count, 1, "nothing was posted");

    let mut req = post("reply", None, Some(&asked.thread), "Done, see the PR.");
    req.result = Some(good.clone());
    env.service.post(&bob, req).await.unwrap();
    let view = env
        .service
        .thread(&alice, &asked.thread, None, None)
        .await
        .unwrap();
    assert_eq!(
        view.messages[1].message.message.result.as_ref(),
        Some(&good)
    );
}

#[tokio::test]
async fn a_member_issues_and_revokes_her_own_agent_tokens_within_bounds() {
    let env = TestEnv::new().await;
    let alice_agent = env.member("alice", "claude@a:1").await;
    env.member("bob", "codex@b:1").await;
    let alice = env.caller("alice", Scope::Human, "alice@console:1").await;
    let bob = env.caller("bob", Scope::Human, "bob@console:1").await;
    let spec = |name: &str, days| OwnTokenSpec {
        name: name.into(),
        expires_in_days: days,
        connection: None,
        rights: None,
    };

    // An agent credential manages no token, not even its person's.
    let e = env
        .service
        .issue_own_token(&alice_agent, spec("x", 1))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden);
    for (bad, days) in [("", 1), ("a\u{2028}b", 1), ("ok", 0), ("ok", 366)] {
        let e = env
            .service
            .issue_own_token(&alice, spec(bad, days))
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput, "{bad:?} {days}");
    }
    let issued = env
        .service
        .issue_own_token(&alice, spec("claude on greenmac", 365))
        .await
        .unwrap();
    let caller = env.service.authenticate(&issued.secret).await.unwrap();
    assert_eq!(caller.id().as_str(), "alice");
    assert_eq!(caller.scopes.to_string(), "agent");
    // The limit, at its edge: MAX live agent tokens (the admin-issued one counts), then refused.
    let live = env.service.own_tokens(&alice).await.unwrap().len();
    assert_eq!(live, 2);
    for i in live..liaison::service::MAX_OWN_AGENT_TOKENS {
        env.service
            .issue_own_token(&alice, spec(&format!("t{i}"), 1))
            .await
            .unwrap();
    }
    let e = env
        .service
        .issue_own_token(&alice, spec("one too many", 1))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::TooManyTokens);

    // Unknown, foreign and already revoked look the same; bob cannot revoke alice's token.
    let foreign = env
        .service
        .revoke_own_token(&bob, &issued.token.id)
        .await
        .unwrap_err();
    let unknown = env
        .service
        .revoke_own_token(&bob, "tok_nothing")
        .await
        .unwrap_err();
    // The same answer, word for word but the id.
    let answer =
        |e: &liaison::service::ServiceError, id: &str| (e.code, e.message.replace(id, "{id}"));
    assert_eq!(unknown.code, ErrorCode::NotFound);
    assert_eq!(
        answer(&foreign, &issued.token.id),
        answer(&unknown, "tok_nothing")
    );
    assert!(env.service.authenticate(&issued.secret).await.is_ok());
    env.service
        .revoke_own_token(&alice, &issued.token.id)
        .await
        .unwrap();
    let e = env.service.authenticate(&issued.secret).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::TokenRevoked);
    // Revoked already: her own token now answers as an unknown one does.
    let again = env
        .service
        .revoke_own_token(&alice, &issued.token.id)
        .await
        .unwrap_err();
    let unknown = env
        .service
        .revoke_own_token(&alice, "tok_nothing")
        .await
        .unwrap_err();
    assert_eq!(
        answer(&again, &issued.token.id),
        answer(&unknown, "tok_nothing")
    );
    let listed = env.service.own_tokens(&alice).await.unwrap();
    let mine = listed
        .iter()
        .find(|t| t.token.id == issued.token.id)
        .unwrap();
    assert!(!mine.live && mine.token.revoked_at.is_some());
    // Her admin-issued agent token is listed too, and her human token is not.
    assert!(listed.iter().all(|t| t.token.scopes.to_string() == "agent"));
    // A revoked one frees room under the limit.
    env.service
        .issue_own_token(&alice, spec("replacement", 1))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_token_ends_its_waiting_long_poll_at_once() {
    let env = TestEnv::new().await;
    env.member("alice", "claude@a:1").await;
    let alice = env.caller("alice", Scope::Human, "alice@console:1").await;
    let issued = env
        .service
        .issue_own_token(
            &alice,
            OwnTokenSpec {
                name: "claude".into(),
                expires_in_days: 1,
                connection: None,
                rights: None,
            },
        )
        .await
        .unwrap();
    let agent = env.service.authenticate(&issued.secret).await.unwrap();
    let poll = {
        let s = env.service.clone();
        tokio::spawn(async move { s.inbox(&agent, inbox("claude", None, 40)).await })
    };
    // The signal that the poll waits: the page's count of long-polls on the token.
    loop {
        let tokens = env.service.own_tokens(&alice).await.unwrap();
        if tokens
            .iter()
            .any(|t| t.token.id == issued.token.id && t.waiting == 1)
        {
            break;
        }
        tokio::task::yield_now().await;
    }
    env.service
        .revoke_own_token(&alice, &issued.token.id)
        .await
        .unwrap();
    // A poll that merely timed out would answer an empty page (after 40 s), not this error.
    let e = poll.await.unwrap().unwrap_err();
    assert_eq!(e.code, ErrorCode::TokenRevoked);
    let tokens = env.service.own_tokens(&alice).await.unwrap();
    assert_eq!(tokens[0].waiting, 0);
}

#[tokio::test]
async fn the_thread_list_filters_by_state_waiting_for_me_and_subject() {
    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "codex@b:1").await;
    env.channel("demo", &["alice", "bob"]).await;
    let mut q = post("question", Some("demo"), None, "body");
    q.subject = Some("Pricing 100% table_v2".into());
    let asked = env.service.post(&alice, q).await.unwrap();
    let mut a = post("announce", Some("demo"), None, "body");
    a.subject = Some("Release notes".into());
    env.service.post(&bob, a).await.unwrap();
    let list = |who: &liaison::service::Caller, f: ThreadFilter| {
        let (s, who) = (env.service.clone(), who.clone());
        async move {
            s.channel_threads(&who, &channel("demo"), &f)
                .await
                .map(|ts| ts.into_iter().map(|t| t.subject).collect::<Vec<_>>())
        }
    };
    let f = |state: Option<&str>, mine: bool, search: Option<&str>| ThreadFilter {
        state: state.map(str::to_owned),
        waiting_for_me: mine,
        search: search.map(str::to_owned),
    };
    assert_eq!(list(&bob, f(None, false, None)).await.unwrap().len(), 2);
    assert_eq!(
        list(&bob, f(Some("open"), false, None)).await.unwrap(),
        ["Pricing 100% table_v2"]
    );
    assert_eq!(
        list(&bob, f(None, true, None)).await.unwrap(),
        ["Pricing 100% table_v2"]
    );
    assert!(
        list(&alice, f(None, true, None)).await.unwrap().is_empty(),
        "her own question waits for others"
    );
    assert_eq!(
        list(&bob, f(None, false, Some("PRICING")))
            .await
            .unwrap()
            .len(),
        1
    );
    // LIKE's wildcards are searched as text.
    assert_eq!(
        list(&bob, f(None, false, Some("100%")))
            .await
            .unwrap()
            .len(),
        1
    );
    for literal in ["_able", "g%t"] {
        let found = list(&bob, f(None, false, Some(literal))).await.unwrap();
        assert!(found.is_empty(), "{literal}: {found:?}");
    }
    assert_eq!(
        list(&bob, f(None, false, Some("table_v")))
            .await
            .unwrap()
            .len(),
        1
    );
    let e = list(&bob, f(Some("pending"), false, None))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    let e = list(&bob, f(None, false, Some(&"x".repeat(101))))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    list(&bob, f(None, false, Some(&"x".repeat(100))))
        .await
        .unwrap();
    let _ = asked;
}

/// Alice's request to Bob in `demo`, with no effect (no approval): work Bob can claim at once.
fn pricing_request() -> liaison::service::PostRequest {
    let mut req = post("request", Some("demo"), None, "Replace the pricing table");
    req.impact = Some(liaison::domain::Impact::None);
    req.to = Some(vec![crate::helpers::pid("bob").into()]);
    req
}

fn report(tool: &str, target: Option<&str>, outcome: &str) -> liaison::service::ProgressReport {
    liaison::service::ProgressReport {
        tool: tool.into(),
        target: target.map(str::to_owned),
        outcome: outcome.into(),
    }
}

#[tokio::test]
async fn progress_notes_reach_only_the_thread_the_session_holds_and_are_bounded() {
    use liaison::service::{ClaimAction, ClaimTarget, PER_MINUTE};
    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "claude@bob-desk:1").await;
    let carol = env.member("carol", "claude@c:1").await;
    env.channel("demo", &["alice", "bob", "carol"]).await;
    let req = pricing_request();
    let asked = env.service.post(&alice, req).await.unwrap();
    let s = &env.service;

    // A party's agent token is refused, as on every member route (not told `no_claim`).
    env.person("partner", liaison::domain::PersonKind::External)
        .await;
    let partner = env
        .caller("partner", liaison::domain::Scope::Agent, "remote@p:1")
        .await;
    let e = s
        .report_progress(&partner, report("Edit", Some("a.rs"), "ok"))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden, "{e:?}");

    // Nobody holds a claim yet: nothing is recorded, for anyone.
    for who in [&alice, &bob, &carol] {
        let out = s
            .report_progress(who, report("Edit", Some("a.rs"), "ok"))
            .await
            .unwrap();
        assert_eq!(out.recorded, "no_claim");
    }
    s.claim(
        &bob,
        ClaimTarget::Thread(asked.thread.clone()),
        ClaimAction::Claim,
        None,
    )
    .await
    .unwrap();
    // Another person's hook, or another session of bob's, never writes to bob's claim.
    let out = s
        .report_progress(&carol, report("Edit", Some("a.rs"), "ok"))
        .await
        .unwrap();
    assert_eq!(out.recorded, "no_claim");
    let other_session = bob.clone().declaring(Some(
        liaison::domain::AgentIdentity::parse("codex@bob-desk:2").unwrap(),
    ));
    let out = s
        .report_progress(&other_session, report("Edit", Some("a.rs"), "ok"))
        .await
        .unwrap();
    assert_eq!(out.recorded, "no_claim");
    // Bad reports are refused whatever the claim.
    for bad in [
        report("", None, "ok"),
        report("Edit; rm", None, "ok"),
        report("Edit", Some("a\nb"), "ok"),
        report("Edit", Some(&"x".repeat(201)), "ok"),
        report("Edit", None, "maybe"),
    ] {
        let e = s.report_progress(&bob, bad).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
    }
    // Bob's session: a note; the same again is folded into it; another is a new note.
    let out = s
        .report_progress(&bob, report("Edit", Some("site/pricing.md"), "ok"))
        .await
        .unwrap();
    assert_eq!(
        (out.recorded, out.thread.as_ref()),
        ("added", Some(&asked.thread))
    );
    let out = s
        .report_progress(&bob, report("Edit", Some("site/pricing.md"), "ok"))
        .await
        .unwrap();
    assert_eq!(out.recorded, "coalesced");
    assert_eq!(out.note.unwrap().repeats, 2);
    s.report_progress(&bob, report("Bash", Some("cargo"), "failed"))
        .await
        .unwrap();
    let view = s.thread(&alice, &asked.thread, None, None).await.unwrap();
    let texts: Vec<String> = view.progress.iter().map(|n| n.text()).collect();
    assert_eq!(
        texts,
        ["Edit site/pricing.md: ok (×2)", "Bash cargo: failed"]
    );
    // At most PER_MINUTE new notes a minute per thread, at the edge; a minute later, again.
    for i in 2..PER_MINUTE {
        s.report_progress(&bob, report("Write", Some(&format!("f{i}")), "ok"))
            .await
            .unwrap();
    }
    let e = s
        .report_progress(&bob, report("Write", Some("one more"), "ok"))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::RateLimited);
    // Said with the wait, which every front turns into `Retry-After`.
    assert!(
        e.retry_after_s().is_some_and(|s| (1..=60).contains(&s)),
        "{e:?}"
    );
    env.clock.advance_secs(61);
    s.claim(
        &bob,
        ClaimTarget::Thread(asked.thread.clone()),
        ClaimAction::Claim,
        None,
    )
    .await
    .unwrap();
    let out = s
        .report_progress(&bob, report("Write", Some("one more"), "ok"))
        .await
        .unwrap();
    assert_eq!(out.recorded, "added");
    // After the reply the claim is released: nothing more is recorded.
    s.post(&bob, post("reply", None, Some(&asked.thread), "done"))
        .await
        .unwrap();
    let out = s
        .report_progress(&bob, report("Edit", Some("late.rs"), "ok"))
        .await
        .unwrap();
    assert_eq!(out.recorded, "no_claim");
}

#[tokio::test]
async fn a_working_tasks_progress_note_is_an_event_of_its_log() {
    use liaison::domain::{Kind, PersonKind, TaskState};
    use liaison::service::{ClaimAction, ClaimTarget, Settings, SkillRoute, TaskMessage};
    let settings = Settings {
        skills: vec![SkillRoute {
            id: "handoff".into(),
            channel: channel("partners"),
            kind: Kind::Handoff,
            impact: None,
            direct_answers: false,
        }],
        default_skill: Some("handoff".into()),
        ..Settings::default()
    };
    let env = TestEnv::with_settings(settings).await;
    let alice = env.member("alice", "claude@a:1").await;
    env.person("partner", PersonKind::External).await;
    env.channel("partners", &["alice", "partner"]).await;
    let partner = env.caller("partner", Scope::Agent, "remote@p:1").await;
    let s = &env.service;
    let task = s
        .send_task_message(
            &partner,
            TaskMessage {
                message_id: "m1".into(),
                body: "Rotate the staging certificate".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .thread
        .id;
    s.claim(
        &alice,
        ClaimTarget::Thread(task.clone()),
        ClaimAction::Claim,
        None,
    )
    .await
    .unwrap();
    s.report_progress(&alice, report("Bash", Some("openssl"), "ok"))
        .await
        .unwrap();
    let (events, _) = s.task_events(&partner, &task, 0, false).await.unwrap();
    let last = events.last().unwrap();
    assert_eq!(
        (last.state, last.cause.as_str()),
        (TaskState::Working, "progress")
    );
    assert_eq!(last.note.as_deref(), Some("Bash openssl: ok"));
    // A folded repeat adds no event.
    s.report_progress(&alice, report("Bash", Some("openssl"), "ok"))
        .await
        .unwrap();
    let (again, _) = s.task_events(&partner, &task, 0, false).await.unwrap();
    assert_eq!(again.len(), events.len());
}

#[tokio::test]
async fn the_activity_of_a_channel_matches_a_seeded_history_exactly() {
    use liaison::domain::{Decision, DecisionPath, Impact, Kind, PersonKind, TaskState, Timestamp};
    use liaison::service::{Settings, SkillRoute, TaskMessage, week_start};
    use liaison::store::WEEK_MS;
    let settings = Settings {
        skills: vec![SkillRoute {
            id: "ask".into(),
            channel: channel("partners"),
            kind: Kind::Question,
            impact: None,
            direct_answers: false,
        }],
        default_skill: Some("ask".into()),
        ..Settings::default()
    };
    let env = TestEnv::with_settings(settings).await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "claude@b:1").await;
    env.person("partner", PersonKind::External).await;
    env.channel("demo", &["alice", "bob"]).await;
    env.channel("partners", &["alice", "partner"]).await;
    let partner = env.caller("partner", Scope::Agent, "remote@p:1").await;
    let bob_human = env.caller("bob", Scope::Human, "bob@console:1").await;
    let s = &env.service;
    // Start on a Monday, 01:00 UTC, so that nothing of the first week spills into the next.
    let now = liaison::clock::Clock::now(&env.clock);
    let monday = week_start(now).0 + WEEK_MS + 3_600_000;
    env.clock.advance_secs((monday - now.0) / 1000);
    let ask = |body: &str| post("question", Some("demo"), None, body);
    let change = |body: &str| {
        let mut r = post("request", Some("demo"), None, body);
        r.impact = Some(Impact::Code);
        r
    };

    // Week 1: two questions answered after 60 s and 600 s (one then closed), an announce
    // nobody answers, a request allowed, a request rejected (which closes its thread).
    let q1 = s.post(&alice, ask("q1")).await.unwrap();
    let q2 = s.post(&alice, ask("q2")).await.unwrap();
    s.post(&alice, post("announce", Some("demo"), None, "fyi"))
        .await
        .unwrap();
    env.clock.advance_secs(60);
    s.post(&bob, post("reply", None, Some(&q1.thread), "a1"))
        .await
        .unwrap();
    env.clock.advance_secs(540);
    s.post(&bob, post("reply", None, Some(&q2.thread), "a2"))
        .await
        .unwrap();
    s.post(&alice, post("close", None, Some(&q2.thread), ""))
        .await
        .unwrap();
    for (body, decision) in [("r1", Decision::Allow), ("r2", Decision::Reject)] {
        let r = s.post(&alice, change(body)).await.unwrap();
        let reason = (decision == Decision::Reject).then(|| "not now".to_owned());
        s.decide(
            &bob_human,
            &r.approval.unwrap(),
            decision,
            reason,
            DecisionPath::Console,
        )
        .await
        .unwrap();
    }

    // Week 2: a request that expires (and closes), a question answered after 30 s; in
    // #partners a task answered after 45 s (completed).
    env.clock.advance_secs(7 * 24 * 3600);
    s.post(&alice, change("r3")).await.unwrap();
    let q4 = s.post(&bob, ask("q4")).await.unwrap();
    env.clock.advance_secs(30);
    s.post(&alice, post("reply", None, Some(&q4.thread), "a4"))
        .await
        .unwrap();
    let task = s
        .send_task_message(
            &partner,
            TaskMessage {
                message_id: "m1".into(),
                body: "Which TLS?".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .thread
        .id;
    env.clock.advance_secs(45);
    s.post(&alice, post("reply", None, Some(&task), "1.3"))
        .await
        .unwrap();
    assert_eq!(
        s.task(&partner, &task, None).await.unwrap().state(),
        TaskState::Completed
    );
    env.clock.advance_secs(25 * 3600);
    assert_eq!(s.expire_approvals().await.unwrap(), 1);

    let demo = s
        .activity(&alice, in_channel("demo", Some(3)))
        .await
        .unwrap();
    let w = &demo.weeks;
    assert_eq!(w.len(), 3);
    assert_eq!(w[2].start, Timestamp(monday - 3_600_000 + WEEK_MS));
    // The week before the history: nothing.
    assert_eq!(
        (
            w[0].figures.opened,
            w[0].figures.allowed,
            w[0].figures.first_reply_p50_s
        ),
        (0, 0, None)
    );
    let week1 = (
        w[1].figures.opened,
        w[1].figures.answered,
        w[1].figures.closed,
        w[1].figures.first_reply_p50_s,
        w[1].figures.first_reply_p90_s,
    );
    assert_eq!(week1, (5, 2, 2, Some(60), Some(600)));
    let approvals1 = (
        w[1].figures.allowed,
        w[1].figures.rejected,
        w[1].figures.expired,
        w[1].figures.refused_requests,
    );
    assert_eq!(approvals1, (1, 1, 0, 1));
    let week2 = (
        w[2].figures.opened,
        w[2].figures.answered,
        w[2].figures.closed,
        w[2].figures.first_reply_p50_s,
        w[2].figures.first_reply_p90_s,
    );
    assert_eq!(week2, (2, 1, 1, Some(30), Some(30)));
    assert_eq!(
        (
            w[2].figures.allowed,
            w[2].figures.rejected,
            w[2].figures.expired,
            w[2].figures.refused_requests
        ),
        (0, 0, 1, 0)
    );
    assert!(w.iter().all(|w| w.figures.tasks.is_empty()));

    let partners = s
        .activity(&alice, in_channel("partners", Some(3)))
        .await
        .unwrap();
    let p = &partners.weeks[2];
    assert_eq!(
        (
            p.figures.opened,
            p.figures.answered,
            p.figures.first_reply_p50_s
        ),
        (1, 1, Some(45))
    );
    assert_eq!(p.figures.tasks.get("completed"), Some(&1));
    // A channel she is not in looks like one that does not exist; bounds at both edges.
    let e = s
        .activity(&bob, in_channel("partners", None))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    for bad in [0, liaison::service::MAX_ACTIVITY_WEEKS + 1] {
        let e = s
            .activity(&alice, in_channel("demo", Some(bad)))
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
    }
    let longest = s
        .activity(
            &alice,
            in_channel("demo", Some(liaison::service::MAX_ACTIVITY_WEEKS)),
        )
        .await
        .unwrap();
    assert_eq!(
        longest.weeks.len(),
        liaison::service::MAX_ACTIVITY_WEEKS as usize
    );
}

/// Two replicas adding progress notes to one claimed thread at once: every note is added, each
/// with its own number, in one order (the numbering was a read-then-insert that two writers could
/// both make, and one got `already_exists`).
#[tokio::test]
async fn two_replicas_adding_progress_notes_at_once_number_them_without_a_conflict() {
    use liaison::service::{ClaimAction, ClaimTarget, PER_MINUTE};
    let db = crate::helpers::TestDb::new().await;
    let url = db.url.clone();
    let a = TestEnv::on(
        db,
        std::sync::Arc::new(liaison::bus::LocalBus::default()),
        Default::default(),
    )
    .await;
    let b = liaison::service::Service::new(
        liaison::service::Deps::new(
            std::sync::Arc::new(liaison::store::Store::open(&url).await.unwrap()),
            std::sync::Arc::new(liaison::bus::LocalBus::default()),
            std::sync::Arc::new(a.clock.clone()),
            Default::default(),
            tokio_util::sync::CancellationToken::new(),
        )
        .unwrap(),
    );
    let alice = a.member("alice", "claude@a:1").await;
    let bob = a.member("bob", "claude@bob-desk:1").await;
    a.channel("demo", &["alice", "bob"]).await;
    let req = pricing_request();
    let asked = a.service.post(&alice, req).await.unwrap();
    let half = PER_MINUTE / 2;
    let rounds = 8;
    for round in 0..rounds {
        // The claim renewed, and a new minute for the thread's budget of notes.
        a.service
            .claim(
                &bob,
                ClaimTarget::Thread(asked.thread.clone()),
                ClaimAction::Claim,
                None,
            )
            .await
            .unwrap();
        let reports = (0..half).flat_map(|i| {
            let (a, b, bob) = (&a.service, &b, &bob);
            [
                a.report_progress(bob, report("Edit", Some(&format!("a{round}-{i}")), "ok")),
                b.report_progress(bob, report("Edit", Some(&format!("b{round}-{i}")), "ok")),
            ]
        });
        for out in futures::future::join_all(reports).await {
            let out = out.unwrap_or_else(|e| panic!("round {round}: {e:?}"));
            assert_eq!(out.recorded, "added");
        }
        a.clock.advance_secs(61);
    }
    let notes = a
        .service
        .store()
        .progress_notes(&asked.thread, 1_000)
        .await
        .unwrap();
    let seqs: Vec<i64> = notes.iter().map(|n| n.seq).collect();
    let expected: Vec<i64> = (1..=rounds * 2 * half).collect();
    assert_eq!(seqs, expected);
}
