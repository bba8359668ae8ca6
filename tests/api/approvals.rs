//! The human-approval envelope through the service, on both backends: who may decide, what a
//! pending, approved, consumed, rejected or expired approval does to claims and threads, and the
//! audit log of every step.

use liaison::domain::{
    ApprovalPolicy, ApprovalState, Decision, DecisionPath, Impact, Kind, PersonKind,
    PolicyDecision, Scope, TaskState,
};
use liaison::service::{
    Caller, ChannelSpec, ClaimAction, ClaimTarget, ErrorCode, InboxRequest, PostRequest, Settings,
    SkillRoute, TaskMessage,
};

use crate::helpers::{TestEnv, channel, pid, post};

fn request(thread: Option<&liaison::domain::ThreadId>, body: &str, impact: Impact) -> PostRequest {
    PostRequest {
        impact: Some(impact),
        ..post(
            "request",
            if thread.is_some() { None } else { Some("demo") },
            thread,
            body,
        )
    }
}

struct People {
    env: TestEnv,
    alice: Caller,
    bob: Caller,
    bob_human: Caller,
}

async fn people(policy: Option<ApprovalPolicy>) -> People {
    let settings = Settings {
        skills: vec![SkillRoute {
            id: "change".into(),
            channel: channel("demo"),
            kind: Kind::Request,
            impact: Some(Impact::Code),
            direct_answers: false,
        }],
        default_skill: Some("change".into()),
        ..Settings::default()
    };
    let env = TestEnv::with_settings(settings).await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "codex@b:1").await;
    env.person("partner", PersonKind::External).await;
    let spec = ChannelSpec {
        name: channel("demo"),
        description: String::new(),
        members: vec![pid("alice"), pid("bob"), pid("partner")],
        rights: None,
        policy,
    };
    env.service.add_channel(&env.admin, spec).await.unwrap();
    let bob_human = env.caller("bob", Scope::Human, "bob@console:1").await;
    People {
        env,
        alice,
        bob,
        bob_human,
    }
}

async fn claim(p: &People, who: &Caller, thread: &liaison::domain::ThreadId) -> ErrorCodeOr {
    match p
        .env
        .service
        .claim(
            who,
            ClaimTarget::Thread(thread.clone()),
            ClaimAction::Claim,
            None,
        )
        .await
    {
        Ok(_) => ErrorCodeOr::Claimed,
        Err(e) => ErrorCodeOr::Refused(e.code, e.message),
    }
}

#[derive(Debug)]
enum ErrorCodeOr {
    Claimed,
    Refused(ErrorCode, String),
}

fn refused(r: ErrorCodeOr, code: ErrorCode) -> String {
    match r {
        ErrorCodeOr::Refused(c, m) if c == code => m,
        other => panic!("expected {code}, got {other:?}"),
    }
}

#[tokio::test]
async fn a_code_request_waits_for_a_human_then_its_first_claim_consumes_the_approval() {
    let p = people(None).await;
    let s = &p.env.service;
    let posted = s
        .post(
            &p.alice,
            request(None, "Bump the TLS library", Impact::Code),
        )
        .await
        .unwrap();
    let t = posted.thread.clone();

    // While pending, no claim: the refusal names who must decide.
    let why = refused(claim(&p, &p.bob, &t).await, ErrorCode::ApprovalPending);
    assert!(why.contains("Bob"), "{why}");
    let view = s.thread(&p.bob, &t, None, None).await.unwrap();
    assert_eq!(view.approvals.len(), 1);
    let approval = view.approvals[0].clone();
    assert_eq!(approval.state, ApprovalState::Pending);
    assert_eq!(approval.approvers, vec![pid("bob")]);
    assert_eq!(approval.fingerprint.len(), 64);

    // Bob's agent long-polls; the human's "allow" wakes it with a notice.
    let mut inbox = InboxRequest {
        session: None,
        consumer: "codex".into(),
        ..Default::default()
    };
    let first = s.inbox(&p.bob, inbox.clone()).await.unwrap();
    assert_eq!(first.entries.len(), 1);
    inbox.after = Some(first.cursor);
    inbox.wait_s = Some(30);
    let waiting = {
        let s = s.clone();
        let bob = p.bob.clone();
        let inbox = inbox.clone();
        tokio::spawn(async move { s.inbox(&bob, inbox).await })
    };
    // Only a human decides: not an agent token, not an admin-only token.
    for who in [&p.bob, &p.env.admin] {
        let e = s
            .decide(who, &approval.id, Decision::Allow, None, DecisionPath::Api)
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Forbidden, "{e}");
    }
    let decided = s
        .decide(
            &p.bob_human,
            &approval.id,
            Decision::Allow,
            None,
            DecisionPath::Cli,
        )
        .await
        .unwrap();
    assert_eq!(decided.state, ApprovalState::Approved);
    let woken = waiting.await.unwrap().unwrap();
    assert!(!woken.timed_out, "the long-poll was woken, not timed out");
    let notice = serde_json::to_value(&woken.entries[0]).unwrap();
    assert_eq!(notice["notice"]["type"], "approval_decided");
    assert_eq!(notice["notice"]["approval"], approval.id.as_str());

    // A second decision is told who decided first.
    let e = s
        .decide(
            &p.bob_human,
            &approval.id,
            Decision::Reject,
            Some("no".into()),
            DecisionPath::Cli,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::ApprovalDecided);
    assert!(e.message.contains("already decided by Bob"), "{e}");

    // The first claim consumes it.
    assert!(matches!(claim(&p, &p.bob, &t).await, ErrorCodeOr::Claimed));
    let a = s.thread(&p.bob, &t, None, None).await.unwrap().approvals[0].clone();
    assert_eq!(a.state, ApprovalState::Consumed);
    assert_eq!(a.consumed_session.unwrap().as_str(), "codex@b:1");

    // The lease expires unanswered: another session of Bob goes on with the same approved action.
    p.env.clock.advance_secs(601);
    let other = p.env.caller("bob", Scope::Agent, "codex@b:2").await;
    assert!(matches!(claim(&p, &other, &t).await, ErrorCodeOr::Claimed));

    // A follow-up request in the thread is a new action: it needs a new approval, and even the
    // holder's renewal waits for it.
    s.post(
        &p.alice,
        request(Some(&t), "Also bump the HTTP client", Impact::Code),
    )
    .await
    .unwrap();
    refused(claim(&p, &other, &t).await, ErrorCode::ApprovalPending);
    let approvals = s.thread(&p.bob, &t, None, None).await.unwrap().approvals;
    assert_eq!(approvals.len(), 2);
    assert_ne!(approvals[0].fingerprint, approvals[1].fingerprint);

    // The audit log holds every step, in order.
    let log: Vec<_> = s
        .audit(&p.env.admin, &liaison::service::AuditQuery::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.approval.is_some())
        .collect();
    let steps: Vec<(&str, Option<&str>)> = log
        .iter()
        .map(|e| (e.event.as_str(), e.actor.as_ref().map(|a| a.as_str())))
        .collect();
    assert_eq!(
        steps,
        [
            ("created", Some("alice")),
            ("decided", Some("bob")),
            ("consumed", Some("bob")),
            ("created", Some("alice")),
        ]
    );
    assert_eq!(log[1].via, Some(DecisionPath::Cli));
    assert_eq!(log[1].decision, Some(Decision::Allow));
    assert_eq!(log[1].fingerprint, Some(approval.fingerprint));
    assert_eq!(log[2].session.as_ref().unwrap().as_str(), "codex@b:1");
}

/// `next` reads the claim queue a page at a time and goes on past a page of requests it cannot
/// take: with more requests awaiting approval than a page (and than the 20 candidates `next` once
/// read), the claimable one behind them is still found, and with none left the answer is "nothing".
#[tokio::test]
async fn next_finds_a_claimable_request_behind_more_than_a_page_awaiting_approval() {
    let p = people(None).await;
    let s = &p.env.service;
    let mut pending = Vec::new();
    for i in 0..23 {
        let body = format!("Bump library {i}");
        pending.push(
            s.post(&p.alice, request(None, &body, Impact::Code))
                .await
                .unwrap()
                .thread,
        );
    }
    let free = s
        .post(&p.alice, request(None, "Read the logs", Impact::None))
        .await
        .unwrap()
        .thread;
    let next = || s.claim(&p.bob, ClaimTarget::Next, ClaimAction::Claim, None);
    let claimed = next().await.unwrap().expect("a claim");
    assert_eq!(claimed.thread, free, "the one request needing no approval");
    // Claimed now: what is left awaits approval, so there is nothing to take.
    let e = next().await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound, "{e}");
    // Each of the others still waits for its approval, unclaimed.
    for t in &pending {
        refused(claim(&p, &p.bob, t).await, ErrorCode::ApprovalPending);
    }
}

#[tokio::test]
async fn a_rejection_needs_a_reason_and_closes_the_thread_with_it() {
    let p = people(None).await;
    let s = &p.env.service;
    let t = s
        .post(
            &p.alice,
            request(None, "Drop the users table", Impact::Database),
        )
        .await
        .unwrap()
        .thread;
    let a = s
        .approvals(&p.bob_human, true, None, None)
        .await
        .unwrap()
        .approvals[0]
        .clone();
    let e = s
        .decide(
            &p.bob_human,
            &a.id,
            Decision::Reject,
            Some("  ".into()),
            DecisionPath::Api,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    let r = s
        .decide(
            &p.bob_human,
            &a.id,
            Decision::Reject,
            Some("Not on a Friday".into()),
            DecisionPath::Api,
        )
        .await
        .unwrap();
    assert_eq!(r.state, ApprovalState::Rejected);
    let view = s.thread(&p.alice, &t, None, None).await.unwrap();
    assert_eq!(view.thread.state.name(), "closed");
    let close = &view.messages.last().unwrap().message.message;
    assert_eq!(close.kind, Kind::Close);
    assert_eq!(close.author.as_str(), "liaison");
    assert!(
        close.body.contains("rejected by Bob: Not on a Friday"),
        "{}",
        close.body
    );
    // The requester's inbox has the close.
    let page = s
        .inbox(
            &p.alice,
            InboxRequest {
                session: None,
                consumer: "claude".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(
        serde_json::to_string(&page)
            .unwrap()
            .contains("Not on a Friday")
    );
    refused(claim(&p, &p.bob, &t).await, ErrorCode::NotClaimable);
}

#[tokio::test]
async fn an_undecided_approval_expires_and_closes_its_thread() {
    let p = people(None).await;
    let s = &p.env.service;
    let t = s
        .post(
            &p.alice,
            request(None, "Restart production", Impact::Production),
        )
        .await
        .unwrap()
        .thread;
    let a = s.thread(&p.bob, &t, None, None).await.unwrap().approvals[0].clone();
    assert_eq!(s.expire_approvals().await.unwrap(), 0, "not yet due");
    p.env.clock.advance_secs(24 * 3600);
    assert_eq!(s.expire_approvals().await.unwrap(), 1);
    assert_eq!(s.expire_approvals().await.unwrap(), 0, "once");
    let view = s.thread(&p.alice, &t, None, None).await.unwrap();
    assert_eq!(view.approvals[0].state, ApprovalState::Expired);
    assert_eq!(view.thread.state.name(), "closed");
    let e = s
        .decide(
            &p.bob_human,
            &a.id,
            Decision::Allow,
            None,
            DecisionPath::Cli,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::ApprovalExpired);
    let log = s
        .audit(&p.env.admin, &liaison::service::AuditQuery::default())
        .await
        .unwrap();
    assert_eq!(log.last().unwrap().event, "expired");
    assert_eq!(log.last().unwrap().actor, None);
}

#[tokio::test]
async fn a_decision_on_a_past_deadline_expires_it_instead() {
    let p = people(None).await;
    let s = &p.env.service;
    s.post(&p.alice, request(None, "Rotate keys", Impact::Code))
        .await
        .unwrap();
    let a = s
        .approvals(&p.bob_human, true, None, None)
        .await
        .unwrap()
        .approvals[0]
        .clone();
    p.env.clock.advance_secs(24 * 3600 + 1);
    let e = s
        .decide(
            &p.bob_human,
            &a.id,
            Decision::Allow,
            None,
            DecisionPath::Cli,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::ApprovalExpired);
}

#[tokio::test]
async fn policies_decide_which_requests_need_approval_and_deny_refuses_at_posting() {
    let policy = ApprovalPolicy {
        code: PolicyDecision::Auto,
        production: PolicyDecision::Deny,
        ..ApprovalPolicy::default()
    };
    let p = people(Some(policy)).await;
    let s = &p.env.service;
    // auto: no approval, claimable at once.
    let t = s
        .post(&p.alice, request(None, "Fix a typo", Impact::Code))
        .await
        .unwrap()
        .thread;
    assert!(
        s.thread(&p.bob, &t, None, None)
            .await
            .unwrap()
            .approvals
            .is_empty()
    );
    assert!(matches!(claim(&p, &p.bob, &t).await, ErrorCodeOr::Claimed));
    // impact none never needs one.
    let t = s
        .post(&p.alice, request(None, "Look at the logs", Impact::None))
        .await
        .unwrap()
        .thread;
    assert!(
        s.thread(&p.bob, &t, None, None)
            .await
            .unwrap()
            .approvals
            .is_empty()
    );
    // deny: refused, nothing posted.
    let e = s
        .post(&p.alice, request(None, "Deploy now", Impact::Production))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::DeniedByPolicy);
    let page = s
        .inbox(
            &p.bob,
            InboxRequest {
                session: None,
                consumer: "codex".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(page.entries.len(), 2, "the denied request reached nobody");
    // An external party's request with an effect needs approval even under `auto`.
    let partner = p.env.caller("partner", Scope::Agent, "remote@p:1").await;
    let task = s
        .send_task_message(
            &partner,
            TaskMessage {
                message_id: "m1".into(),
                body: "Please change the API".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(task.state(), TaskState::Submitted);
    let a = s
        .thread(&p.bob, &task.thread.id, None, None)
        .await
        .unwrap()
        .approvals;
    assert_eq!(a.len(), 1);
    // Any member with the approve right decides an external task.
    assert_eq!(a[0].approvers, vec![pid("alice"), pid("bob")]);
}

#[tokio::test]
async fn an_approval_id_is_unknown_to_whoever_may_not_decide_it() {
    let p = people(None).await;
    let s = &p.env.service;
    s.post(
        &p.alice,
        request(None, "Change the schema", Impact::Database),
    )
    .await
    .unwrap();
    let a = s
        .approvals(&p.bob_human, false, None, None)
        .await
        .unwrap()
        .approvals[0]
        .clone();
    // Alice asked; she is not among the approvers (she is not a recipient).
    let alice_human = p.env.caller("alice", Scope::Human, "alice@console:1").await;
    let foreign = s
        .decide(
            &alice_human,
            &a.id,
            Decision::Allow,
            None,
            DecisionPath::Api,
        )
        .await
        .unwrap_err();
    let unknown_id = liaison::domain::ApprovalId::generate();
    let unknown = s
        .decide(
            &alice_human,
            &unknown_id,
            Decision::Allow,
            None,
            DecisionPath::Api,
        )
        .await
        .unwrap_err();
    assert_eq!(foreign.code, ErrorCode::NotFound);
    assert_eq!(unknown.code, ErrorCode::NotFound);
    assert_eq!(
        foreign.message.replace(a.id.as_str(), "ID"),
        unknown.message.replace(unknown_id.as_str(), "ID")
    );
    assert!(
        s.approvals(&alice_human, false, None, None)
            .await
            .unwrap()
            .approvals
            .is_empty()
    );
    // Nothing changed.
    let still = s.approval(&p.bob_human, &a.id).await.unwrap();
    assert_eq!(still.approval.state, ApprovalState::Pending);
    assert_eq!(still.request.body, "Change the schema");
    assert_eq!(still.requested_by_name, "Alice");
}

#[tokio::test]
async fn a_request_nobody_may_approve_is_refused_at_posting() {
    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    env.member("bob", "codex@b:1").await;
    env.member("carol", "codex@c:1").await;
    let mut spec = ChannelSpec {
        name: channel("demo"),
        description: String::new(),
        members: vec![pid("alice"), pid("bob")],
        rights: Some(liaison::domain::Rights::parse("read,post,request").unwrap()),
        policy: None,
    };
    // An admin cannot make such a channel: its policy needs an approver it does not have.
    let e = env
        .service
        .add_channel(&env.admin, spec.clone())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    // But its only approver can leave liaison (removing a person is never refused for it).
    spec.members.push(pid("carol"));
    spec.rights = None;
    env.service.add_channel(&env.admin, spec).await.unwrap();
    env.service
        .change_members(
            &env.admin,
            &channel("demo"),
            liaison::service::MemberChange {
                add: vec![pid("alice"), pid("bob")],
                rights: Some(liaison::domain::Rights::parse("read,post,request").unwrap()),
                remove: vec![],
            },
        )
        .await
        .unwrap();
    env.service
        .remove_person(&env.admin, &pid("carol"))
        .await
        .unwrap();
    let e = env
        .service
        .post(&alice, request(None, "Deploy", Impact::Code))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden);
    assert!(e.message.contains("approve right"), "{e}");
}

/// `/metrics`'s approval figures at the service's clock: how many are pending, how long the
/// oldest has waited, how many expire within the next 15 minutes (or are past their deadline,
/// the sweep not run yet).
#[tokio::test]
async fn approval_figures_age_the_oldest_pending_and_count_those_about_to_expire() {
    let p = people(None).await;
    let s = &p.env.service;
    let figures = s.approval_figures().await.unwrap();
    assert_eq!(
        (
            figures.pending,
            figures.oldest_age_ms,
            figures.expiring_soon
        ),
        (0, 0, 0)
    );
    // Two requests an hour apart, each with the default 24-hour deadline.
    s.post(
        &p.alice,
        request(None, "Restart production", Impact::Production),
    )
    .await
    .unwrap();
    p.env.clock.advance_secs(3600);
    s.post(
        &p.alice,
        request(None, "Migrate the database", Impact::Database),
    )
    .await
    .unwrap();
    p.env.clock.advance_secs(60);
    let figures = s.approval_figures().await.unwrap();
    assert_eq!(
        (
            figures.pending,
            figures.oldest_age_ms,
            figures.expiring_soon
        ),
        (2, 3660 * 1000, 0)
    );
    // 14 minutes before the first deadline, only the first is expiring soon.
    p.env.clock.advance_secs(24 * 3600 - 3660 - 14 * 60);
    let figures = s.approval_figures().await.unwrap();
    assert_eq!((figures.pending, figures.expiring_soon), (2, 1));
    // 16 minutes before the second's deadline it is not counted yet; the first, past its own,
    // still is until the sweep.
    p.env.clock.advance_secs(3600 - 2 * 60);
    assert_eq!(s.approval_figures().await.unwrap().expiring_soon, 1);
    // The sweep expires the first: the second is then the oldest, and not yet due.
    assert_eq!(s.expire_approvals().await.unwrap(), 1);
    let figures = s.approval_figures().await.unwrap();
    assert_eq!(
        (
            figures.pending,
            figures.oldest_age_ms,
            figures.expiring_soon
        ),
        (1, (24 * 3600 - 16 * 60) * 1000, 0)
    );
}

/// A request closed while its approval is pending withdraws the approval, in the close's
/// transaction: it leaves the approvers' queue, no path can decide it any more (the console's,
/// the API's and the CLI's decision, a link, an agent's client by elicitation: each is told it was
/// withdrawn), the audit log says so, the deadline's sweep leaves it alone, and the thread is
/// purged by retention like any closed one.
#[tokio::test]
async fn a_request_closed_while_its_approval_is_pending_is_withdrawn_from_every_path() {
    let policy = ApprovalPolicy {
        approval_via_elicitation: true,
        ..ApprovalPolicy::default()
    };
    let p = people(Some(policy)).await;
    let s = &p.env.service;
    let mut req = request(None, "Bump the TLS library", Impact::Code);
    req.to = Some(vec![pid("bob").into()]);
    let posted = s.post(&p.alice, req).await.unwrap();
    let approval = posted
        .approval
        .clone()
        .expect("the request awaits an approval");
    let link = s
        .issue_approval_link(&p.env.admin, &approval, None, None)
        .await
        .unwrap();
    let pending = s.approvals(&p.bob_human, true, None, None).await.unwrap();
    assert_eq!(pending.approvals.len(), 1);

    // Alice gives up: her close withdraws it.
    let mut close = post("close", None, Some(&posted.thread), "Not needed after all");
    close.outcome = Some(liaison::domain::Outcome::Canceled);
    s.post(&p.alice, close).await.unwrap();

    let pending = s.approvals(&p.bob_human, true, None, None).await.unwrap();
    assert!(pending.approvals.is_empty(), "{pending:?}");
    let all = s.approvals(&p.bob_human, false, None, None).await.unwrap();
    assert_eq!(all.approvals.len(), 1);
    assert_eq!(all.approvals[0].state, ApprovalState::Withdrawn);
    let withdrawn = |e: liaison::service::ServiceError| {
        assert_eq!(e.code, ErrorCode::ApprovalDecided, "{e:?}");
        assert!(e.message.contains("withdrawn"), "{e:?}");
    };
    for (decision, reason) in [(Decision::Allow, None), (Decision::Reject, Some("No"))] {
        for via in [DecisionPath::Console, DecisionPath::Api, DecisionPath::Cli] {
            let e = s
                .decide(
                    &p.bob_human,
                    &approval,
                    decision,
                    reason.map(str::to_owned),
                    via,
                )
                .await
                .unwrap_err();
            withdrawn(e);
        }
    }
    let fingerprint = all.approvals[0].fingerprint[..8].to_owned();
    let e = s
        .decide_by_elicitation(&p.bob, &approval, Decision::Allow, None, &fingerprint)
        .await
        .unwrap_err();
    withdrawn(e);
    // Its link's page still opens (it shows the approval as it stands), but decides nothing.
    let (_, csrf) = s
        .open_link(
            liaison::store::LinkKind::Approval,
            &link.secret,
            Some(approval.as_str()),
        )
        .await
        .unwrap();
    let e = s
        .decide_by_link(
            &approval,
            &link.secret,
            &csrf,
            Some(&csrf),
            Decision::Allow,
            None,
        )
        .await
        .unwrap_err();
    withdrawn(e);
    let e = s
        .issue_approval_link(&p.env.admin, &approval, None, None)
        .await
        .unwrap_err();
    assert_ne!(e.code, ErrorCode::Internal, "{e:?}");
    let a = s.store().approval(&approval).await.unwrap().unwrap();
    assert_eq!(a.state, ApprovalState::Withdrawn);
    assert_eq!(a.decided_by, None);

    // The audit log has the step, by who closed the thread.
    let q = liaison::service::AuditQuery {
        event: Some("withdrawn".into()),
        ..Default::default()
    };
    let audit = s.audit(&p.env.admin, &q).await.unwrap();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].approval.as_ref(), Some(&approval));
    assert_eq!(audit[0].actor, Some(pid("alice")));

    // Past its deadline the sweep finds nothing pending; retention purges the closed thread.
    p.env.clock.advance_secs(3 * 86_400);
    assert_eq!(s.expire_approvals().await.unwrap(), 0);
    assert_eq!(s.approval_figures().await.unwrap().pending, 0);
    let keep = liaison::service::Retention {
        closed_threads: Some(std::time::Duration::from_secs(86_400)),
        ..Default::default()
    };
    let purged = s.purge_expired(&keep).await.unwrap();
    assert_eq!(purged.threads, 1, "{purged:?}");
    let e = s.approval(&p.bob_human, &approval).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
}
