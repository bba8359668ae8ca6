//! An agent's own tool calls checked by the server (SPEC §5b): the rules give an impact, the
//! connection's rights decide allow / deny / confirm; a confirmation waits for her "allow once",
//! is bound to the exact call and used once; nobody deciding in time is a deny; only she decides;
//! a flood is bounded; secrets never stored; bad input changes nothing. Both backends.

use std::time::Duration;

use liaison::domain::tool_check::{CheckEvent, ConfirmationState, ToolSummary};
use liaison::domain::{ConnectionSlug, Decision, Impact, RightLevel, Scope};
use liaison::service::{
    AuditQuery, Caller, ClaimAction, ClaimTarget, CommandSpec, ConfirmationDecision,
    ConnectionUpdate, ErrorCode, OwnTokenSpec, SessionSpec, ToolCheckRequest, Verdict,
};

use crate::helpers::TestEnv;

pub(crate) struct Desk {
    pub(crate) env: TestEnv,
    pub(crate) alice: Caller,
    pub(crate) claude: Caller,
    pub(crate) claude_secret: String,
    pub(crate) codex: Caller,
    pub(crate) bob: Caller,
}

async fn connect(env: &TestEnv, human: &Caller, name: &str, agent: &str) -> (Caller, String) {
    let issued = env
        .service
        .issue_own_token(
            human,
            OwnTokenSpec {
                name: format!("{name} on the laptop"),
                expires_in_days: 30,
                connection: Some(ConnectionSlug::parse(name).unwrap()),
                rights: None,
            },
        )
        .await
        .unwrap();
    let caller = env
        .service
        .authenticate(&issued.secret)
        .await
        .unwrap()
        .declaring(Some(liaison::domain::AgentIdentity::parse(agent).unwrap()));
    (caller, issued.secret)
}

pub(crate) async fn desk() -> Desk {
    desk_in(TestEnv::new().await).await
}

/// Alice with two connections (claude-laptop, codex) and bob, in `env`.
pub(crate) async fn desk_in(env: TestEnv) -> Desk {
    env.person("alice", liaison::domain::PersonKind::Member)
        .await;
    let alice = env.caller("alice", Scope::Human, "alice@console:1").await;
    let (claude, claude_secret) = connect(&env, &alice, "claude-laptop", "claude@laptop:1").await;
    let (codex, _) = connect(&env, &alice, "codex", "codex@laptop:2").await;
    let bob = env.member("bob", "claude@b:1").await;
    Desk {
        env,
        alice,
        claude,
        claude_secret,
        codex,
        bob,
    }
}

pub(crate) fn digest(n: u8) -> String {
    format!("{:064x}", n)
}

pub(crate) fn bash(command: &str, n: u8) -> ToolCheckRequest {
    ToolCheckRequest {
        event: CheckEvent::PreToolUse,
        tool: "Bash".into(),
        input_digest: digest(n),
        summary: ToolSummary {
            target: command.split_whitespace().next().map(str::to_owned),
            command: Some(command.into()),
            truncated: false,
        },
        wait_s: Some(60),
    }
}

pub(crate) fn edit(path: &str) -> ToolCheckRequest {
    ToolCheckRequest {
        event: CheckEvent::PreToolUse,
        tool: "Edit".into(),
        input_digest: digest(1),
        summary: ToolSummary {
            target: Some(path.into()),
            ..Default::default()
        },
        wait_s: None,
    }
}

/// Sets claude's right for `impact` and authenticates it again (rights travel with the caller).
pub(crate) async fn set_right(d: &mut Desk, impact: Impact, level: RightLevel) {
    let mut rights = d.claude.connection.as_ref().unwrap().rights;
    rights.set(impact, level);
    d.env
        .service
        .update_own_connection(
            &d.alice,
            &d.claude.token_id,
            ConnectionUpdate {
                name: None,
                rights: Some(rights),
            },
        )
        .await
        .unwrap();
    d.claude = d
        .env
        .service
        .authenticate(&d.claude_secret)
        .await
        .unwrap()
        .declaring(Some(
            liaison::domain::AgentIdentity::parse("claude@laptop:1").unwrap(),
        ));
}

pub(crate) async fn audit_events(env: &TestEnv) -> Vec<(String, Option<String>)> {
    env.service
        .audit(
            &env.admin,
            &AuditQuery {
                event: Some("tool.".into()),
                limit: Some(1000),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .into_iter()
        .map(|r| {
            let v = serde_json::to_value(&r).unwrap();
            (
                v["event"].as_str().unwrap_or_default().to_owned(),
                v["decision"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[tokio::test]
async fn default_rights_allow_edits_at_once_and_refuse_production_with_a_reason() {
    let d = desk().await;
    let s = &d.env.service;
    let v = s.check_tool(&d.claude, edit("src/lib.rs")).await.unwrap();
    assert_eq!(v.decision, Verdict::Allow, "{v:?}");
    assert_eq!(v.impact, Impact::Code);
    let read = ToolCheckRequest {
        tool: "Read".into(),
        ..edit("src/lib.rs")
    };
    assert_eq!(
        s.check_tool(&d.claude, read).await.unwrap().impact,
        Impact::None
    );
    let push = s
        .check_tool(&d.claude, bash("git push origin main", 2))
        .await
        .unwrap();
    assert_eq!(push.decision, Verdict::Deny, "{push:?}");
    assert_eq!(push.impact, Impact::Production);
    assert!(push.reason.contains("production"), "{}", push.reason);
    assert!(push.rule.contains("git push"), "{}", push.rule);
    let db = s
        .check_tool(&d.claude, bash("psql -c 'select 1'", 3))
        .await
        .unwrap();
    assert_eq!(
        db.decision,
        Verdict::Confirm,
        "database is confirm by default"
    );
    // The read is not audited; the edit, the refusal and the confirmation are, with their rule.
    let events = audit_events(&d.env).await;
    assert_eq!(
        events,
        vec![
            ("tool.checked".to_owned(), Some("allow".to_owned())),
            ("tool.checked".to_owned(), Some("reject".to_owned())),
            ("tool.confirmation_requested".to_owned(), None),
        ]
    );
}

#[tokio::test]
async fn allow_once_reaches_the_waiting_call_and_is_used_once() {
    let mut d = desk().await;
    set_right(&mut d, Impact::Production, RightLevel::Confirm).await;
    let s = d.env.service.clone();
    let asked = s
        .check_tool(&d.claude, bash("git push origin main", 7))
        .await
        .unwrap();
    assert_eq!(asked.decision, Verdict::Confirm);
    let c = asked.confirmation.unwrap();
    assert_eq!(c.state, ConfirmationState::Pending);
    assert_eq!(c.connection.as_deref(), Some("claude-laptop"));
    // She sees it among hers.
    let pending = s.pending_tool_confirmations(&d.alice).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, c.id);

    // The hook waits; she allows; the wait returns allow.
    let waiter = {
        let s = s.clone();
        let claude = d.claude.clone();
        let id = c.id.clone();
        tokio::spawn(async move { s.await_tool_confirmation(&claude, &id, 30).await })
    };
    // The waiter is subscribed before she decides: it counts as a long-poll of alice's.
    for _ in 0..200 {
        if s.waiting().0 > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(s.waiting().0, 1);
    let decided = s
        .decide_tool_confirmation(&d.alice, &c.id, Decision::Allow, Default::default())
        .await
        .unwrap();
    assert_eq!(decided.state, ConfirmationState::Allowed);
    let verdict = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the decision wakes the waiting call")
        .unwrap()
        .unwrap();
    assert_eq!(verdict.decision, Verdict::Allow, "{verdict:?}");
    assert_eq!(
        verdict.confirmation.unwrap().state,
        ConfirmationState::Consumed
    );
    // Read again: already used.
    let again = s
        .await_tool_confirmation(&d.claude, &c.id, 0)
        .await
        .unwrap();
    assert_eq!(again.decision, Verdict::Deny);
    // The identical call again needs a new confirmation.
    let next = s
        .check_tool(&d.claude, bash("git push origin main", 7))
        .await
        .unwrap();
    assert_eq!(next.decision, Verdict::Confirm);
    assert_ne!(next.confirmation.unwrap().id, c.id);
    // Deciding a used one changes nothing.
    let late = s
        .decide_tool_confirmation(&d.alice, &c.id, Decision::Reject, Default::default())
        .await
        .unwrap_err();
    assert_eq!(late.code, ErrorCode::ApprovalDecided);
}

#[tokio::test]
async fn a_rejection_carries_her_reason_and_nobody_deciding_in_time_is_a_deny() {
    let mut d = desk().await;
    set_right(&mut d, Impact::Production, RightLevel::Confirm).await;
    let s = d.env.service.clone();
    let c = s
        .check_tool(&d.claude, bash("kubectl apply -f prod.yaml", 8))
        .await
        .unwrap()
        .confirmation
        .unwrap();
    s.decide_tool_confirmation(
        &d.alice,
        &c.id,
        Decision::Reject,
        ConfirmationDecision {
            reason: Some("not on a Friday".into()),
        },
    )
    .await
    .unwrap();
    let v = s
        .await_tool_confirmation(&d.claude, &c.id, 0)
        .await
        .unwrap();
    assert_eq!(v.decision, Verdict::Deny);
    assert!(v.reason.contains("not on a Friday"), "{}", v.reason);

    // One nobody decides: its deadline is the hook's wait (here 5 s).
    let mut req = bash("helm upgrade api ./chart", 9);
    req.wait_s = Some(5);
    let c = s
        .check_tool(&d.claude, req)
        .await
        .unwrap()
        .confirmation
        .unwrap();
    let still = s
        .await_tool_confirmation(&d.claude, &c.id, 0)
        .await
        .unwrap();
    assert_eq!(still.decision, Verdict::Confirm);
    d.env.clock.advance_secs(6);
    assert_eq!(s.expire_tool_confirmations().await.unwrap(), 1);
    let v = s
        .await_tool_confirmation(&d.claude, &c.id, 0)
        .await
        .unwrap();
    assert_eq!(v.decision, Verdict::Deny);
    assert!(
        v.reason.contains("no human decided in time"),
        "{}",
        v.reason
    );
    let late = s
        .decide_tool_confirmation(&d.alice, &c.id, Decision::Allow, Default::default())
        .await
        .unwrap_err();
    assert_eq!(late.code, ErrorCode::ApprovalExpired, "{late}");
    let events = audit_events(&d.env).await;
    assert!(events.contains(&("tool.confirmation_expired".to_owned(), None)));
    assert!(events.contains(&(
        "tool.confirmation_decided".to_owned(),
        Some("reject".to_owned())
    )));
}

#[tokio::test]
async fn only_she_decides_and_only_the_asking_connection_reads() {
    let mut d = desk().await;
    set_right(&mut d, Impact::Production, RightLevel::Confirm).await;
    let s = d.env.service.clone();
    let c = s
        .check_tool(&d.claude, bash("git push", 10))
        .await
        .unwrap()
        .confirmation
        .unwrap();
    // The agent's own token (scope agent) cannot decide.
    let own = s
        .decide_tool_confirmation(&d.claude, &c.id, Decision::Allow, Default::default())
        .await
        .unwrap_err();
    assert_eq!(own.code, ErrorCode::Forbidden, "{own}");
    // Bob, with a human token, finds nothing: another person's looks unknown.
    let bob_human = d.env.caller("bob", Scope::Human, "bob@console:1").await;
    let foreign = s
        .decide_tool_confirmation(&bob_human, &c.id, Decision::Allow, Default::default())
        .await
        .unwrap_err();
    assert_eq!(foreign.code, ErrorCode::NotFound);
    let unknown_id = liaison::domain::tool_check::ConfirmationId::generate();
    let unknown = s
        .decide_tool_confirmation(&d.alice, &unknown_id, Decision::Allow, Default::default())
        .await
        .unwrap_err();
    assert_eq!(unknown.code, ErrorCode::NotFound);
    assert_eq!(
        foreign.message.replace(c.id.as_str(), "ID"),
        unknown.message.replace(unknown_id.as_str(), "ID")
    );
    // Her other connection and bob's agent cannot read (or use) it.
    for other in [&d.codex, &d.bob] {
        let e = s
            .await_tool_confirmation(other, &c.id, 0)
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::NotFound);
    }
    // Nothing changed.
    let still = s.tool_confirmation(&d.alice, &c.id).await.unwrap();
    assert_eq!(still.state, ConfirmationState::Pending);
}

#[tokio::test]
async fn a_changed_input_needs_its_own_confirmation_and_a_flood_is_bounded() {
    let mut d = desk().await;
    set_right(&mut d, Impact::Production, RightLevel::Confirm).await;
    let s = d.env.service.clone();
    let first = s
        .check_tool(&d.claude, bash("git push origin main", 20))
        .await
        .unwrap()
        .confirmation
        .unwrap();
    // The same call asked again while it waits: the same confirmation, not a second.
    let same = s
        .check_tool(&d.claude, bash("git push origin main", 20))
        .await
        .unwrap()
        .confirmation
        .unwrap();
    assert_eq!(same.id, first.id);
    // Another digest with the same words, or the same digest read differently: new ones.
    let other_input = s
        .check_tool(&d.claude, bash("git push origin main", 21))
        .await
        .unwrap()
        .confirmation
        .unwrap();
    assert_ne!(other_input.id, first.id);
    let other_summary = s
        .check_tool(&d.claude, bash("git push origin main --force", 20))
        .await
        .unwrap()
        .confirmation
        .unwrap();
    assert_ne!(other_summary.id, first.id);
    // Allowing the first allows only it.
    s.decide_tool_confirmation(&d.alice, &first.id, Decision::Allow, Default::default())
        .await
        .unwrap();
    let v = s
        .await_tool_confirmation(&d.claude, &other_input.id, 0)
        .await
        .unwrap();
    assert_eq!(v.decision, Verdict::Confirm);
    // The allowed one, not yet read by its hook, is used by the identical call asked again.
    let v = s
        .check_tool(&d.claude, bash("git push origin main", 20))
        .await
        .unwrap();
    assert_eq!(v.decision, Verdict::Allow, "{v:?}");
    assert_eq!(
        s.await_tool_confirmation(&d.claude, &first.id, 0)
            .await
            .unwrap()
            .decision,
        Verdict::Deny
    );
    // At most 8 waiting per connection: 2 wait now, 6 more fit, the 9th is refused.
    for n in 0..6 {
        s.check_tool(&d.claude, bash("git push", 100 + n))
            .await
            .unwrap();
    }
    let flood = s
        .check_tool(&d.claude, bash("git push", 200))
        .await
        .unwrap_err();
    assert_eq!(flood.code, ErrorCode::TooManyWaiters, "{flood}");
    assert_eq!(
        s.pending_tool_confirmations(&d.alice).await.unwrap().len(),
        8
    );
}

#[tokio::test]
async fn bad_input_is_refused_and_changes_nothing_and_secrets_are_never_stored() {
    let mut d = desk().await;
    set_right(&mut d, Impact::Production, RightLevel::Confirm).await;
    let s = d.env.service.clone();
    let bad: Vec<ToolCheckRequest> = vec![
        ToolCheckRequest {
            input_digest: "abc".into(),
            ..bash("git push", 1)
        },
        ToolCheckRequest {
            input_digest: digest(0xab).to_uppercase(),
            ..bash("git push", 1)
        },
        ToolCheckRequest {
            tool: "Bash; rm".into(),
            ..bash("git push", 1)
        },
        ToolCheckRequest {
            tool: String::new(),
            ..bash("git push", 1)
        },
        bash("git push \u{0}", 1),
        bash(&"x".repeat(2001), 1),
        ToolCheckRequest {
            summary: ToolSummary {
                target: Some("t".repeat(301)),
                ..Default::default()
            },
            ..bash("git push", 1)
        },
        ToolCheckRequest {
            wait_s: Some(0),
            ..bash("git push", 1)
        },
    ];
    for req in bad {
        let e = s.check_tool(&d.claude, req.clone()).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput, "{req:?}: {e}");
    }
    // A human token is not an agent: it cannot ask (scope), and a party's agent cannot either.
    let e = s
        .check_tool(&d.alice, bash("git push", 1))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden);
    assert!(
        s.pending_tool_confirmations(&d.alice)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(audit_events(&d.env).await.is_empty());

    // A hand-made call with secrets in its summary: masked before anything is stored or shown.
    let leaky = ToolCheckRequest {
        summary: ToolSummary {
            target: Some("https://deploy:hunter2@example.com".into()),
            command: Some(
                "GITHUB_TOKEN=ghp_abcdefghijklmnop123456 git push --password s3cr3t".into(),
            ),
            truncated: false,
        },
        ..bash("", 30)
    };
    let c = s
        .check_tool(&d.claude, leaky)
        .await
        .unwrap()
        .confirmation
        .unwrap();
    let shown =
        serde_json::to_string(&s.tool_confirmation(&d.alice, &c.id).await.unwrap()).unwrap();
    let audit = serde_json::to_string(
        &s.audit(
            &d.env.admin,
            &AuditQuery {
                event: Some("tool.".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap(),
    )
    .unwrap();
    for secret in ["hunter2", "ghp_abcdefghijklmnop123456", "s3cr3t"] {
        assert!(!shown.contains(secret), "{shown}");
        assert!(!audit.contains(secret), "{audit}");
    }
    assert!(shown.contains("git push"), "{shown}");
}

#[tokio::test]
async fn the_claimed_command_shows_each_tool_started_blocked_and_confirmed() {
    let mut d = desk().await;
    set_right(&mut d, Impact::Production, RightLevel::Confirm).await;
    let s = d.env.service.clone();
    let session = s
        .open_session(
            &d.alice,
            SessionSpec {
                connection: Some(ConnectionSlug::parse("claude-laptop").unwrap()),
                title: None,
            },
        )
        .await
        .unwrap();
    let id = session.session.id.clone();
    let code = s.new_join_code(&d.alice, &id).await.unwrap();
    s.join_session(&d.claude, &code.code).await.unwrap();
    let sent = s
        .command(
            &d.alice,
            &id,
            CommandSpec {
                instruction: "Ship the fix".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    s.claim(
        &d.claude,
        ClaimTarget::Thread(sent.thread.clone()),
        ClaimAction::Claim,
        None,
    )
    .await
    .unwrap();
    d.env.clock.advance_secs(1);
    let v = s.check_tool(&d.claude, edit("src/fix.rs")).await.unwrap();
    assert_eq!(v.thread.as_ref(), Some(&sent.thread));
    d.env.clock.advance_secs(1);
    let c = s
        .check_tool(&d.claude, bash("git push origin main", 40))
        .await
        .unwrap()
        .confirmation
        .unwrap();
    assert_eq!(c.thread.as_ref(), Some(&sent.thread));
    // While it waits, the session shows it, and the command's badge says so.
    let view = s.session(&d.alice, &id).await.unwrap();
    assert_eq!(view.confirmations.len(), 1);
    assert_eq!(view.commands[0].status, "confirmation_needed");
    d.env.clock.advance_secs(1);
    s.decide_tool_confirmation(
        &d.alice,
        &c.id,
        Decision::Reject,
        ConfirmationDecision {
            reason: Some("tests first".into()),
        },
    )
    .await
    .unwrap();
    d.env.clock.advance_secs(1);
    s.await_tool_confirmation(&d.claude, &c.id, 0)
        .await
        .unwrap();
    let view = s.session(&d.alice, &id).await.unwrap();
    assert!(view.confirmations.is_empty());
    let steps: Vec<(String, String)> = view.commands[0]
        .timeline
        .iter()
        .map(|s| (s.step.to_owned(), s.text.clone()))
        .collect();
    let has = |step: &str, text: &str| steps.iter().any(|(s, t)| s == step && t.contains(text));
    assert!(has("tool", "Edit src/fix.rs: started"), "{steps:?}");
    assert!(
        has("confirmation_needed", "Bash: git push origin main"),
        "{steps:?}"
    );
    assert!(has("rejected", "tests first"), "{steps:?}");
    assert!(has("tool", "Bash git: rejected"), "{steps:?}");
}

#[tokio::test]
async fn a_live_session_learns_each_settled_confirmation_of_its_own_connection_once() {
    let mut d = desk().await;
    set_right(&mut d, Impact::Production, RightLevel::Confirm).await;
    let s = d.env.service.clone();
    // Without `after`: nothing, and where to start from.
    let start = s
        .settled_tool_confirmations(&d.claude, None, 0)
        .await
        .unwrap();
    assert!(start.settled.is_empty());
    let c = s
        .check_tool(&d.claude, bash("git push origin main", 50))
        .await
        .unwrap()
        .confirmation
        .unwrap();
    // Waiting: her decision wakes the read.
    let waiter = {
        let s = s.clone();
        let claude = d.claude.clone();
        let after = start.until;
        tokio::spawn(async move { s.settled_tool_confirmations(&claude, Some(after), 30).await })
    };
    for _ in 0..200 {
        if s.waiting().0 > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    d.env.clock.advance_secs(1);
    s.decide_tool_confirmation(
        &d.alice,
        &c.id,
        Decision::Reject,
        ConfirmationDecision {
            reason: Some("not now".into()),
        },
    )
    .await
    .unwrap();
    let page = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the decision wakes the read")
        .unwrap()
        .unwrap();
    assert_eq!(page.settled.len(), 1);
    assert_eq!(page.settled[0].id, c.id);
    assert_eq!(page.settled[0].state, ConfirmationState::Rejected);
    // Asked again from its `until`: nothing twice.
    let again = s
        .settled_tool_confirmations(&d.claude, Some(page.until), 0)
        .await
        .unwrap();
    assert!(again.settled.is_empty());
    // An expiry is settled too; her other connection never sees this one's.
    let mut req = bash("helm upgrade", 51);
    req.wait_s = Some(2);
    s.check_tool(&d.claude, req).await.unwrap();
    d.env.clock.advance_secs(3);
    s.expire_tool_confirmations().await.unwrap();
    let expired = s
        .settled_tool_confirmations(&d.claude, Some(page.until), 0)
        .await
        .unwrap();
    assert_eq!(expired.settled.len(), 1);
    assert_eq!(expired.settled[0].state, ConfirmationState::Expired);
    let codex = s
        .settled_tool_confirmations(&d.codex, Some(0), 0)
        .await
        .unwrap();
    assert!(codex.settled.is_empty());
    // A human token is not an agent's.
    let e = s
        .settled_tool_confirmations(&d.alice, Some(0), 0)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden);
}
