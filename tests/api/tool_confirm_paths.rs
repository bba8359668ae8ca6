//! The paths around a tool call's check (SPEC §5b), past the check itself (`tool_checks.rs`):
//! her own rules, a `PermissionRequest` following its `PreToolUse` for the same call, the
//! `approval.pending` webhook with its single-use link, a revoked connection mid-wait, and
//! retention of confirmations made outside any command. Both backends.

use std::sync::Arc;
use std::time::Duration;

use liaison::domain::tool_check::{CheckEvent, ConfirmationState, ToolRule};
use liaison::domain::{Decision, Impact, RightLevel};
use liaison::keys::ring::MasterKey;
use liaison::service::{
    AuditQuery, ErrorCode, MAX_PERSON_RULES, Retention, Settings, Verdict, WebhookSpec,
};
use liaison::store::LinkKind;

use crate::helpers::TestEnv;
use crate::outbox::{MASTER_HEX, Receiver, outbox_settings, ring, worker};
use crate::tool_checks::{audit_events, bash, desk, desk_in, edit, set_right};

fn rule(tool: &str, command: Option<&str>, contains: Option<&str>, impact: Impact) -> ToolRule {
    ToolRule {
        tool: tool.into(),
        command: command.map(str::to_owned),
        contains: contains.map(str::to_owned),
        impact,
    }
}

#[tokio::test]
async fn her_own_rules_make_only_her_calls_stricter_and_a_bad_list_changes_nothing() {
    let mut d = desk().await;
    set_right(&mut d, Impact::Production, RightLevel::Confirm).await;
    let s = d.env.service.clone();
    let release = |n| bash("make release VERSION=2", n);
    // No rule names `make`: it counts as code, which her connection may do.
    let before = s.check_tool(&d.claude, release(1)).await.unwrap();
    assert_eq!(
        (before.decision, before.impact),
        (Verdict::Allow, Impact::Code)
    );

    let mine = vec![
        rule("Bash", Some("make release"), None, Impact::Production),
        // Cannot loosen what a configured rule says: git push stays production.
        rule("Bash", Some("git push"), None, Impact::None),
    ];
    let saved = s.set_tool_rules(&d.alice, mine.clone()).await.unwrap();
    assert_eq!(saved, mine);
    assert_eq!(s.tool_rules(&d.alice).await.unwrap(), mine);
    // Her agents read them too (they bind its calls); they are not secret to it.
    assert_eq!(s.tool_rules(&d.claude).await.unwrap(), mine);

    let after = s.check_tool(&d.claude, release(2)).await.unwrap();
    assert_eq!(after.decision, Verdict::Confirm, "{after:?}");
    assert_eq!(after.impact, Impact::Production);
    assert!(after.rule.contains("make release"), "{}", after.rule);
    let push = s
        .check_tool(&d.claude, bash("git push origin main", 3))
        .await
        .unwrap();
    assert_eq!(push.impact, Impact::Production, "{push:?}");
    // Bob's agents are not bound by alice's rules.
    let bobs = s.check_tool(&d.bob, release(4)).await.unwrap();
    assert_eq!(bobs.impact, Impact::Code, "{bobs:?}");

    // Each bad list is refused with a clear error and changes nothing.
    let too_many: Vec<ToolRule> = (0..=MAX_PERSON_RULES)
        .map(|i| rule("Bash", Some(&format!("tool{i}")), None, Impact::Code))
        .collect();
    let bad: Vec<(Vec<ToolRule>, &str)> = vec![
        (too_many, "50 a person may keep"),
        (
            vec![rule("Bash", Some("rm\0-rf"), None, Impact::Production)],
            "U+0000",
        ),
        (
            vec![rule("Bash", Some("rm"), Some("rf"), Impact::Production)],
            "not both",
        ),
        (
            vec![rule("Ba*sh", None, None, Impact::Production)],
            "prefix followed by *",
        ),
        (
            vec![rule("Bash", Some("  "), None, Impact::Production)],
            "no word",
        ),
    ];
    for (rules, says) in bad {
        let e = s.set_tool_rules(&d.alice, rules).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput, "{e}");
        assert!(e.message.contains(says), "{says}: {e}");
    }
    // Only she, in person: never her agent (it would loosen its own checks), nor anyone else's.
    let e = s.set_tool_rules(&d.claude, vec![]).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden, "{e}");
    assert_eq!(
        s.tool_rules(&d.alice).await.unwrap(),
        mine,
        "nothing changed"
    );

    // Each change is audited, before and after; clearing them removes them all.
    s.set_tool_rules(&d.alice, vec![]).await.unwrap();
    assert!(s.tool_rules(&d.alice).await.unwrap().is_empty());
    let log = s
        .audit(
            &d.env.admin,
            &AuditQuery {
                event: Some("tool_rules.changed".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(log.len(), 2, "{log:?}");
    let last = serde_json::to_value(&log[0]).unwrap();
    assert_eq!(last["subject"], "alice");
    let again = s.check_tool(&d.claude, release(5)).await.unwrap();
    assert_eq!(again.impact, Impact::Code);
}

#[tokio::test]
async fn a_permission_request_after_its_pre_tool_use_is_the_same_call_checked_once() {
    let mut d = desk().await;
    set_right(&mut d, Impact::Production, RightLevel::Confirm).await;
    let s = d.env.service.clone();
    let as_permission = |mut r: liaison::service::ToolCheckRequest| {
        r.event = CheckEvent::PermissionRequest;
        r
    };
    // Allowed at once by PreToolUse; Claude Code's own ask rule then fires PermissionRequest
    // for the same call: allowed again, with no second audit entry.
    s.check_tool(&d.claude, edit("src/a.rs")).await.unwrap();
    let entries = audit_events(&d.env).await.len();
    let follow = s
        .check_tool(&d.claude, as_permission(edit("src/a.rs")))
        .await
        .unwrap();
    assert_eq!(follow.decision, Verdict::Allow);
    assert!(follow.reason.contains("PreToolUse"), "{}", follow.reason);
    assert_eq!(audit_events(&d.env).await.len(), entries, "checked once");
    // A second PermissionRequest for it is a new call: checked (and audited) as usual.
    let second = s
        .check_tool(&d.claude, as_permission(edit("src/a.rs")))
        .await
        .unwrap();
    assert_eq!(second.decision, Verdict::Allow);
    assert!(!second.reason.contains("PreToolUse"), "{}", second.reason);
    assert_eq!(audit_events(&d.env).await.len(), entries + 1);

    // Confirmed once by her through PreToolUse: the follow-up needs no second confirmation...
    let asked = s
        .check_tool(&d.claude, bash("git push origin main", 8))
        .await
        .unwrap();
    let c = asked.confirmation.unwrap();
    s.decide_tool_confirmation(&d.alice, &c.id, Decision::Allow, Default::default())
        .await
        .unwrap();
    let used = s
        .await_tool_confirmation(&d.claude, &c.id, 0)
        .await
        .unwrap();
    assert_eq!(used.decision, Verdict::Allow);
    let follow = s
        .check_tool(&d.claude, as_permission(bash("git push origin main", 8)))
        .await
        .unwrap();
    assert_eq!(follow.decision, Verdict::Allow, "{follow:?}");
    assert!(follow.confirmation.is_none());
    // ...but the identical call again, even by PermissionRequest alone, needs a new one.
    let again = s
        .check_tool(&d.claude, as_permission(bash("git push origin main", 8)))
        .await
        .unwrap();
    assert_eq!(again.decision, Verdict::Confirm, "{again:?}");
    assert_ne!(again.confirmation.unwrap().id, c.id);
    // Another connection's PermissionRequest for the same input is its own call.
    let codex = s
        .check_tool(&d.codex, as_permission(edit("src/a.rs")))
        .await
        .unwrap();
    assert!(!codex.reason.contains("PreToolUse"), "{}", codex.reason);
}

#[tokio::test]
async fn the_pending_webhook_carries_a_single_use_link_that_decides_as_her() {
    let settings = Settings {
        outbox: outbox_settings(),
        ..Settings::default()
    };
    let env = TestEnv::with_master(settings, MasterKey::from_hex(MASTER_HEX).unwrap()).await;
    let mut d = desk_in(env).await;
    set_right(&mut d, Impact::Production, RightLevel::Confirm).await;
    let s = d.env.service.clone();
    let outbox = worker(&s, Arc::new(ring()));
    let rx = Receiver::start().await;
    // Her own webhook (a chat notification), and bob's, which must hear nothing of hers.
    let hook = |person: &str| WebhookSpec {
        url: rx.url.clone(),
        events: vec!["approval.pending".into(), "approval.decided".into()],
        person: Some(liaison::domain::PersonId::parse(person).unwrap()),
        ..Default::default()
    };
    s.add_webhook(&d.env.admin, hook("alice")).await.unwrap();
    s.add_webhook(&d.env.admin, hook("bob")).await.unwrap();

    let c = s
        .check_tool(&d.claude, bash("git push origin main", 21))
        .await
        .unwrap()
        .confirmation
        .unwrap();
    while outbox.deliver_next().await.unwrap().is_some() {}
    let got = rx.got();
    let bodies: Vec<&serde_json::Value> = got.iter().map(|r| &r.body).collect();
    assert_eq!(got.len(), 1, "only her webhook: {bodies:?}");
    let data = &got[0].body["data"];
    assert_eq!(got[0].body["type"], "approval.pending");
    assert_eq!(data["approval_id"], c.id.as_str());
    assert_eq!(data["subject"], "tool_call");
    assert_eq!(data["tool"], "Bash");
    assert_eq!(data["summary"]["command"], "git push origin main");
    assert_eq!(data["approvers"], serde_json::json!(["alice"]));
    let link = &data["approval_link"];
    assert_eq!(link["for"], "alice");
    let url = link["url"].as_str().unwrap();
    assert!(
        url.contains(&format!("/console/approvals/{}?link=", c.id)),
        "{url}"
    );
    let secret = url.split("link=").nth(1).unwrap().to_owned();

    // Not the link of another confirmation, nor an approval link.
    let other = s
        .check_tool(&d.claude, bash("kubectl apply -f prod.yaml", 22))
        .await
        .unwrap()
        .confirmation
        .unwrap();
    let e = s
        .open_confirmation_link(&other.id, &secret)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthenticated, "{e}");
    assert!(
        s.open_link(LinkKind::Approval, &secret, Some(c.id.as_str()))
            .await
            .is_err()
    );
    // Her page: the exact action; then "allow once", as her, via the link.
    let opened = s.open_confirmation_link(&c.id, &secret).await.unwrap();
    assert_eq!(opened.caller.id().as_str(), "alice");
    assert_eq!(opened.confirmation.id, c.id);
    let e = s
        .decide_confirmation_by_link(
            &c.id,
            &secret,
            "forged",
            Some("forged"),
            Decision::Allow,
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden, "a forged form: {e}");
    let decided = s
        .decide_confirmation_by_link(
            &c.id,
            &secret,
            &opened.csrf,
            Some(&opened.csrf),
            Decision::Allow,
            None,
        )
        .await
        .unwrap();
    assert_eq!(decided.state, ConfirmationState::Allowed);
    assert_eq!(decided.decided_via.as_deref(), Some("link"));
    // Used once: a replay decides nothing.
    let e = s
        .decide_confirmation_by_link(
            &c.id,
            &secret,
            &opened.csrf,
            Some(&opened.csrf),
            Decision::Reject,
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthenticated, "{e}");
    let verdict = s
        .await_tool_confirmation(&d.claude, &c.id, 0)
        .await
        .unwrap();
    assert_eq!(verdict.decision, Verdict::Allow);
    // Her webhook hears the decision too.
    while outbox.deliver_next().await.unwrap().is_some() {}
    let got = rx.got();
    let decided: Vec<_> = got
        .iter()
        .filter(|r| r.body["type"] == "approval.decided")
        .collect();
    assert_eq!(decided.len(), 1);
    assert_eq!(decided[0].body["data"]["approval_id"], c.id.as_str());
    assert_eq!(decided[0].body["data"]["state"], "allowed");
    assert_eq!(decided[0].body["data"]["via"], "link");
}

#[tokio::test]
async fn revoking_the_connection_ends_its_waiting_check_at_once() {
    let mut d = desk().await;
    set_right(&mut d, Impact::Production, RightLevel::Confirm).await;
    let s = d.env.service.clone();
    let c = s
        .check_tool(&d.claude, bash("git push origin main", 31))
        .await
        .unwrap()
        .confirmation
        .unwrap();
    let waiter = {
        let s = s.clone();
        let claude = d.claude.clone();
        let id = c.id.clone();
        tokio::spawn(async move { s.await_tool_confirmation(&claude, &id, 45).await })
    };
    for _ in 0..200 {
        if s.waiting().0 > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(s.waiting().0, 1, "the hook's read is waiting");
    s.revoke_own_token(&d.alice, &d.claude.token_id)
        .await
        .unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the revocation ends the waiting read at once")
        .unwrap();
    let e = ended.unwrap_err();
    assert_eq!(e.code, ErrorCode::TokenRevoked, "{e}");
    // Nothing was allowed; she can still see the confirmation, which no hook can use.
    let still = s.tool_confirmation(&d.alice, &c.id).await.unwrap();
    assert_eq!(still.state, ConfirmationState::Pending);
}

#[tokio::test]
async fn confirmations_outside_any_command_are_purged_once_settled_past_retention() {
    let mut d = desk().await;
    set_right(&mut d, Impact::Production, RightLevel::Confirm).await;
    let s = d.env.service.clone();
    // No claim: the confirmations belong to no thread.
    let mut ids = Vec::new();
    for n in 0..3u8 {
        let c = s
            .check_tool(&d.claude, bash(&format!("git push origin b{n}"), 40 + n))
            .await
            .unwrap()
            .confirmation
            .unwrap();
        assert!(c.thread.is_none());
        ids.push(c.id);
    }
    s.decide_tool_confirmation(&d.alice, &ids[0], Decision::Reject, Default::default())
        .await
        .unwrap();
    d.env.clock.advance_secs(30);
    s.decide_tool_confirmation(&d.alice, &ids[1], Decision::Allow, Default::default())
        .await
        .unwrap();
    let retention = Retention {
        closed_threads: Some(Duration::from_secs(3600)),
        ..Default::default()
    };
    assert_eq!(s.purge_expired(&retention).await.unwrap().confirmations, 0);
    // An hour after the first was decided: only it goes. The third still waits (then expires
    // and goes an hour later); a pending one is never purged.
    d.env.clock.advance_secs(3600 - 30 + 1);
    let purged = s.purge_expired(&retention).await.unwrap();
    assert_eq!(purged.confirmations, 1, "{purged:?}");
    let gone = s.tool_confirmation(&d.alice, &ids[0]).await.unwrap_err();
    assert_eq!(gone.code, ErrorCode::NotFound);
    assert!(s.tool_confirmation(&d.alice, &ids[1]).await.is_ok());
    s.expire_tool_confirmations().await.unwrap();
    assert_eq!(
        s.tool_confirmation(&d.alice, &ids[2]).await.unwrap().state,
        ConfirmationState::Expired,
        "expired at its 60 s deadline"
    );
    d.env.clock.advance_secs(7200);
    assert_eq!(s.purge_expired(&retention).await.unwrap().confirmations, 2);
}
