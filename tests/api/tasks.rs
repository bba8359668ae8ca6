//! A2A tasks through the service: routing by skill, the derived task state through claim,
//! announce, question, answer and reply, the event log, listing, cancel, and party isolation.

use liaison::domain::{Impact, Kind, PersonKind, Scope, TaskState};
use liaison::service::{ClaimAction, ClaimTarget, ErrorCode, Settings, SkillRoute, TaskMessage};
use liaison::store::TaskFilter;

use crate::helpers::{TestEnv, channel, post};

fn settings() -> Settings {
    Settings {
        skills: vec![
            SkillRoute {
                id: "ask".into(),
                channel: channel("partners"),
                kind: Kind::Question,
                impact: None,
                direct_answers: false,
            },
            SkillRoute {
                id: "change".into(),
                channel: channel("partners"),
                kind: Kind::Request,
                impact: Some(Impact::Code),
                direct_answers: false,
            },
        ],
        default_skill: Some("ask".into()),
        ..Settings::default()
    }
}

fn message(id: &str, body: &str) -> TaskMessage {
    TaskMessage {
        message_id: id.into(),
        body: body.into(),
        ..Default::default()
    }
}

async fn setup() -> (
    TestEnv,
    liaison::service::Caller,
    liaison::service::Caller,
    liaison::service::Caller,
) {
    let env = TestEnv::with_settings(settings()).await;
    let alice = env.member("alice", "claude@a:1").await;
    env.person("partner", PersonKind::External).await;
    env.person("rival", PersonKind::External).await;
    env.channel("partners", &["alice", "partner", "rival"])
        .await;
    let partner = env
        .caller("partner", Scope::Agent, "remote@partner:1")
        .await;
    let rival = env.caller("rival", Scope::Agent, "remote@rival:1").await;
    (env, alice, partner, rival)
}

#[tokio::test]
async fn a_delegated_task_goes_through_every_state_and_logs_each_event() {
    let (env, alice, partner, _rival) = setup().await;
    let s = &env.service;
    let t = s
        .send_task_message(&partner, message("m1", "Which TLS version do you support?"))
        .await
        .unwrap();
    assert_eq!(t.state(), TaskState::Submitted);
    let id = t.thread.id.clone();
    assert_eq!(t.thread.task.as_ref().unwrap().skill, "ask");
    // The new task's view is built from what the post wrote, not read back: it must be exactly
    // what reading it gives.
    let read = s.task(&partner, &id, None).await.unwrap();
    assert_eq!(
        serde_json::to_value(&t).unwrap(),
        serde_json::to_value(&read).unwrap()
    );

    s.post(&alice, post("announce", None, Some(&id), "Looking into it"))
        .await
        .unwrap();
    s.post(
        &alice,
        post("question", None, Some(&id), "For which endpoint?"),
    )
    .await
    .unwrap();
    assert_eq!(
        s.task(&partner, &id, None).await.unwrap().state(),
        TaskState::InputRequired
    );
    let answer = TaskMessage {
        task_id: Some(id.clone()),
        ..message("m2", "The webhook endpoint")
    };
    assert_eq!(
        s.send_task_message(&partner, answer).await.unwrap().state(),
        TaskState::Working
    );
    s.post(&alice, post("reply", None, Some(&id), "TLS 1.3 only"))
        .await
        .unwrap();
    let done = s.task(&partner, &id, Some(2)).await.unwrap();
    assert_eq!(done.state(), TaskState::Completed);
    assert_eq!(done.history.len(), 2);
    assert_eq!(done.artifacts.len(), 1);

    let (events, _) = s.task_events(&partner, &id, 0, false).await.unwrap();
    let states: Vec<TaskState> = events.iter().map(|e| e.state).collect();
    use TaskState::*;
    assert_eq!(
        states,
        [Submitted, Working, InputRequired, Working, Completed]
    );
    // A message to a completed task is refused and changes nothing.
    let late = TaskMessage {
        task_id: Some(id.clone()),
        ..message("m3", "thanks!")
    };
    assert_eq!(
        s.send_task_message(&partner, late).await.unwrap_err().code,
        ErrorCode::TaskTerminal
    );
    assert_eq!(
        s.cancel_task(&partner, &id).await.unwrap_err().code,
        ErrorCode::TaskNotCancelable
    );
    // So is a claim of it (a `next` that read it as a candidate before it ended names it too).
    assert_eq!(
        s.claim(
            &alice,
            ClaimTarget::Thread(id.clone()),
            ClaimAction::Claim,
            None
        )
        .await
        .unwrap_err()
        .code,
        ErrorCode::TaskTerminal
    );
    assert_eq!(
        s.task_events(&partner, &id, 0, false)
            .await
            .unwrap()
            .0
            .len(),
        5
    );
}

#[tokio::test]
async fn a_claimed_request_is_working_and_a_cancel_ends_it_once() {
    let (env, alice, partner, _rival) = setup().await;
    let s = &env.service;
    let msg = TaskMessage {
        skill: Some("change".into()),
        ..message("m1", "Bump the TLS library")
    };
    let id = s
        .send_task_message(&partner, msg.clone())
        .await
        .unwrap()
        .thread
        .id;
    // The same message id again returns the same task.
    assert_eq!(
        s.send_task_message(&partner, msg).await.unwrap().thread.id,
        id
    );
    // A change from a party needs a human's approval before anyone works on it.
    let pending = s
        .claim(
            &alice,
            ClaimTarget::Thread(id.clone()),
            ClaimAction::Claim,
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(pending.code, ErrorCode::ApprovalPending);
    env.allow_pending("alice").await;
    s.claim(
        &alice,
        ClaimTarget::Thread(id.clone()),
        ClaimAction::Claim,
        None,
    )
    .await
    .unwrap();
    assert_eq!(
        s.task(&partner, &id, None).await.unwrap().state(),
        TaskState::Working
    );
    assert_eq!(
        s.cancel_task(&partner, &id).await.unwrap().state(),
        TaskState::Canceled
    );
    assert_eq!(
        s.cancel_task(&partner, &id).await.unwrap().state(),
        TaskState::Canceled,
        "idempotent"
    );
    let bad = TaskMessage {
        skill: Some("nope".into()),
        ..message("m9", "x")
    };
    assert_eq!(
        s.send_task_message(&partner, bad).await.unwrap_err().code,
        ErrorCode::InvalidInput
    );
}

/// A party's messages go to the team, never to the other parties sharing the channel; a member's
/// new thread in that channel addresses the members only; in a party's task the party stays a
/// participant.
#[tokio::test]
async fn a_partys_messages_never_list_the_other_parties_among_their_recipients() {
    let (env, alice, partner, rival) = setup().await;
    let s = &env.service;
    env.member("bob", "codex@b:1").await;
    s.change_members(
        &env.admin,
        &crate::helpers::channel("partners"),
        liaison::service::MemberChange {
            add: vec![crate::helpers::pid("bob")],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let task = s
        .send_task_message(&partner, message("m1", "Which TLS version?"))
        .await
        .unwrap();
    let bob = env.caller("bob", Scope::Agent, "codex@b:1").await;
    let view = s.thread(&bob, &task.thread.id, None, None).await.unwrap();
    assert_eq!(
        view.messages[0].message.message.recipients,
        [crate::helpers::pid("alice"), crate::helpers::pid("bob")]
    );
    // A member's reply in the party's task goes to the party and the team, not the rival.
    let reply = s
        .post(
            &alice,
            post("reply", None, Some(&task.thread.id), "TLS 1.3"),
        )
        .await
        .unwrap();
    assert_eq!(
        reply.recipients,
        [crate::helpers::pid("bob"), crate::helpers::pid("partner")]
    );
    // A member's new thread in the channel: the members only.
    let opened = s
        .post(
            &alice,
            post("announce", Some("partners"), None, "Team note"),
        )
        .await
        .unwrap();
    assert_eq!(opened.recipients, [crate::helpers::pid("bob")]);
    let theirs = s
        .send_task_message(&rival, message("m2", "And you?"))
        .await
        .unwrap();
    let view = s.thread(&bob, &theirs.thread.id, None, None).await.unwrap();
    assert!(
        !view.messages[0]
            .message
            .message
            .recipients
            .contains(&crate::helpers::pid("partner"))
    );
}

#[tokio::test]
async fn a_party_sees_only_its_own_tasks_and_lists_them_newest_first() {
    let (env, alice, partner, rival) = setup().await;
    let s = &env.service;
    let mut ids = Vec::new();
    for i in 0..5 {
        let ctx = if i < 3 { "ctx-a" } else { "ctx-b" };
        let m = TaskMessage {
            context_id: Some(ctx.into()),
            ..message(&format!("m{i}"), &format!("q{i}"))
        };
        ids.push(s.send_task_message(&partner, m).await.unwrap().thread.id);
        env.clock.advance_secs(1);
    }
    let foreign = s.task(&rival, &ids[0], None).await.unwrap_err();
    let unknown = s
        .task(&rival, &liaison::domain::ThreadId::generate(), None)
        .await
        .unwrap_err();
    assert_eq!(
        (foreign.code, unknown.code),
        (ErrorCode::NotFound, ErrorCode::NotFound)
    );
    assert_eq!(
        s.cancel_task(&rival, &ids[0]).await.unwrap_err().code,
        ErrorCode::NotFound
    );
    // Members use the member tools; parties the task methods.
    assert_eq!(
        s.task(&alice, &ids[0], None).await.unwrap_err().code,
        ErrorCode::Forbidden
    );
    assert_eq!(
        s.inbox(&partner, Default::default())
            .await
            .unwrap_err()
            .code,
        ErrorCode::Forbidden
    );

    let page = s
        .list_tasks(
            &partner,
            TaskFilter {
                limit: 2,
                ..Default::default()
            },
            None,
            Some(0),
        )
        .await
        .unwrap();
    assert_eq!(page.total, 5);
    assert_eq!(page.tasks[0].thread.id, ids[4], "newest first");
    let next = s
        .list_tasks(
            &partner,
            TaskFilter {
                limit: 2,
                ..Default::default()
            },
            page.next_page_token.as_deref(),
            None,
        )
        .await
        .unwrap();
    assert_eq!(next.tasks[0].thread.id, ids[2]);
    let ctx = TaskFilter {
        limit: 10,
        context_id: Some("ctx-a".into()),
        ..Default::default()
    };
    assert_eq!(
        s.list_tasks(&partner, ctx, None, None).await.unwrap().total,
        3
    );
    assert_eq!(
        s.list_tasks(
            &rival,
            TaskFilter {
                limit: 10,
                ..Default::default()
            },
            None,
            None
        )
        .await
        .unwrap()
        .total,
        0
    );
    assert_eq!(
        s.list_tasks(
            &partner,
            TaskFilter {
                limit: 0,
                ..Default::default()
            },
            None,
            None
        )
        .await
        .unwrap_err()
        .code,
        ErrorCode::InvalidInput
    );
}

#[tokio::test]
async fn an_external_task_of_every_skill_can_be_claimed_and_is_then_working() {
    let (env, alice, partner, _rival) = setup().await;
    let s = &env.service;
    // `ask` routes to a question thread, `change` to a request: both are external tasks (SPEC §4).
    for (i, skill) in ["ask", "change"].into_iter().enumerate() {
        let msg = TaskMessage {
            skill: Some(skill.into()),
            ..message(&format!("m{i}"), "Please look at the webhook")
        };
        let id = s.send_task_message(&partner, msg).await.unwrap().thread.id;
        if skill == "change" {
            // A change has an effect: a human allows it first (see tests/api/approvals.rs).
            env.allow_pending("alice").await;
        }
        let claim = s
            .claim(
                &alice,
                ClaimTarget::Thread(id.clone()),
                ClaimAction::Claim,
                None,
            )
            .await
            .unwrap()
            .expect("a claim is held");
        assert_eq!(claim.thread, id, "{skill}");
        assert_eq!(
            s.task(&partner, &id, None).await.unwrap().state(),
            TaskState::Working,
            "{skill}"
        );
    }
    // Claim-next finds an unclaimed external task of the default skill too.
    let id = s
        .send_task_message(&partner, message("m9", "Anything?"))
        .await
        .unwrap()
        .thread
        .id;
    let next = s
        .claim(&alice, ClaimTarget::Next, ClaimAction::Claim, None)
        .await
        .unwrap()
        .expect("a claim is held");
    assert_eq!(next.thread, id);
    // A question between members is still not claimable.
    let bob = env.member("bob", "codex@b:1").await;
    env.channel("team", &["alice", "bob"]).await;
    let q = s
        .post(&bob, post("question", Some("team"), None, "Lunch?"))
        .await
        .unwrap();
    let refused = s
        .claim(
            &alice,
            ClaimTarget::Thread(q.thread),
            ClaimAction::Claim,
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::NotClaimable);
}

#[tokio::test]
async fn a_blocking_send_sees_an_answer_committed_before_its_wait_subscribed() {
    let (env, alice, partner, _rival) = setup().await;
    let s = &env.service;
    // The cap is what a lost wake-up costs: the wait would return the stale task after it.
    let a2a = liaison::a2a::handler::A2a::new(s.clone(), std::time::Duration::from_secs(3));
    // The send read the task (SUBMITTED) ...
    let seen = s
        .send_task_message(&partner, message("m1", "Which TLS version?"))
        .await
        .unwrap();
    assert_eq!(seen.state(), TaskState::Submitted);
    let id = seen.thread.id.clone();
    // ... the agent answered before the wait began ...
    s.post(&alice, post("reply", None, Some(&id), "TLS 1.3"))
        .await
        .unwrap();
    // ... and the wait, given what the send read, still returns the answer.
    let done = a2a.wait_for_end(&partner, &id, seen).await.unwrap();
    assert_eq!(done.state(), TaskState::Completed);
    assert_eq!(done.artifacts.len(), 1);
}

/// Deduplication by messageId keeps only what a retry needs: the same message again (same
/// target, same content, same party) gets its task as it stands; the same id for a different
/// message is a new message (the official TCK reuses one id per scenario name).
#[tokio::test]
async fn a_retried_message_returns_the_task_as_it_stands_and_a_reused_id_is_a_new_message() {
    let (env, alice, partner, rival) = setup().await;
    let s = &env.service;
    let id = s
        .send_task_message(&partner, message("m1", "Which TLS version?"))
        .await
        .unwrap()
        .thread
        .id;
    s.post(&alice, post("question", None, Some(&id), "Which endpoint?"))
        .await
        .unwrap();
    let answer = TaskMessage {
        task_id: Some(id.clone()),
        ..message("m2", "The webhook")
    };
    assert_eq!(
        s.send_task_message(&partner, answer.clone())
            .await
            .unwrap()
            .state(),
        TaskState::Working
    );
    // While the task runs, a retry of the opening message returns it as it is now.
    let again = s
        .send_task_message(&partner, message("m1", "Which TLS version?"))
        .await
        .unwrap();
    assert_eq!(
        (again.thread.id.clone(), again.state()),
        (id.clone(), TaskState::Working)
    );
    s.post(&alice, post("reply", None, Some(&id), "TLS 1.3"))
        .await
        .unwrap();
    // A retry of the party's last message returns the task as it is now, ended or not.
    for _ in 0..2 {
        let again = s.send_task_message(&partner, answer.clone()).await.unwrap();
        assert_eq!(
            (again.thread.id.clone(), again.state()),
            (id.clone(), TaskState::Completed)
        );
    }
    let events = s
        .task_events(&partner, &id, 0, false)
        .await
        .unwrap()
        .0
        .len();
    // The id for another message in the ended task is that message, refused as any would be.
    let other_in_task = TaskMessage {
        task_id: Some(id.clone()),
        ..message("m1", "Which TLS version?")
    };
    assert_eq!(
        s.send_task_message(&partner, other_in_task)
            .await
            .unwrap_err()
            .code,
        ErrorCode::TaskTerminal
    );
    // The id for a different new message opens a new task, and its retry finds that one.
    let mut opened = vec![id.clone()];
    for reuse in [
        message("m1", "Something else"),
        message("m2", "The webhook"),
        message("m1", "Something else"),
    ] {
        let view = s.send_task_message(&partner, reuse).await.unwrap();
        assert_eq!(view.state(), TaskState::Submitted);
        if !opened.contains(&view.thread.id) {
            opened.push(view.thread.id);
        }
    }
    assert_eq!(opened.len(), 3, "two new tasks; the last send was a retry");
    // The opening message again, now that the task ended after the party posted in it: the
    // party had the answer, so this is a new task, and its own retry gets that one.
    let fresh = s
        .send_task_message(&partner, message("m1", "Which TLS version?"))
        .await
        .unwrap();
    assert!(!opened.contains(&fresh.thread.id));
    let retry = s
        .send_task_message(&partner, message("m1", "Which TLS version?"))
        .await
        .unwrap();
    assert_eq!(retry.thread.id, fresh.thread.id);
    // Every one shows the client's messageId.
    for view in [&fresh, &retry] {
        assert_eq!(
            liaison::service::client_message_id(
                view.history[0].idempotency_key.as_deref().unwrap()
            ),
            Some("m1")
        );
    }
    assert_eq!(
        s.task_events(&partner, &id, 0, false)
            .await
            .unwrap()
            .0
            .len(),
        events,
        "nothing changed in the ended task"
    );
    // Another party's ids are its own: the same messageId opens the rival's own task.
    let theirs = s
        .send_task_message(&rival, message("m1", "Which TLS version?"))
        .await
        .unwrap();
    assert!(!opened.contains(&theirs.thread.id) && theirs.thread.id != fresh.thread.id);
    assert_eq!(theirs.state(), TaskState::Submitted);
}

/// The same message under one messageId, each time after the party canceled the task the
/// previous one opened, opens a new task each time, well past the 32 uses the walk over uses
/// once allowed (the newest use is found with one read; the bound that remains,
/// `MAX_MESSAGE_ID_USES`, is tested at its edge in the service's unit tests). A retry of the
/// newest use still gets its task, and different messages under the id never count against it.
#[tokio::test]
async fn one_message_repeated_after_each_cancel_opens_a_new_task_each_time() {
    let (env, _alice, partner, _rival) = setup().await;
    let s = &env.service;
    let uses = 40;
    let total = || async {
        let filter = TaskFilter {
            limit: 100,
            ..Default::default()
        };
        s.list_tasks(&partner, filter, None, None)
            .await
            .unwrap()
            .total
    };
    let mut opened = Vec::new();
    for _ in 0..uses {
        let view = s
            .send_task_message(&partner, message("m1", "Which TLS version?"))
            .await
            .unwrap();
        assert_eq!(view.state(), TaskState::Submitted);
        assert!(!opened.contains(&view.thread.id), "a new task each time");
        s.cancel_task(&partner, &view.thread.id).await.unwrap();
        opened.push(view.thread.id);
    }
    assert_eq!(total().await, uses);
    // Another message under the same id is a new task, and its retry (still open) is that task.
    let other = s
        .send_task_message(&partner, message("m1", "Something else"))
        .await
        .unwrap();
    assert!(!opened.contains(&other.thread.id));
    let retry = s
        .send_task_message(&partner, message("m1", "Something else"))
        .await
        .unwrap();
    assert_eq!(retry.thread.id, other.thread.id);
    assert_eq!(total().await, uses + 1);
    assert_eq!(
        liaison::service::client_message_id(retry.history[0].idempotency_key.as_deref().unwrap()),
        Some("m1")
    );
}

/// A retry of the newest of many uses, its task not seen through by the party, gets that task.
#[tokio::test]
async fn a_retry_of_the_newest_of_many_uses_gets_its_task() {
    let (env, alice, partner, _rival) = setup().await;
    let s = &env.service;
    for _ in 0..35 {
        let view = s
            .send_task_message(&partner, message("m1", "Ping"))
            .await
            .unwrap();
        s.cancel_task(&partner, &view.thread.id).await.unwrap();
    }
    let newest = s
        .send_task_message(&partner, message("m1", "Ping"))
        .await
        .unwrap();
    // The team answers it (the party posts nothing after it): a repeat is a lost answer's retry.
    s.post(&alice, post("reply", None, Some(&newest.thread.id), "Pong"))
        .await
        .unwrap();
    let retry = s
        .send_task_message(&partner, message("m1", "Ping"))
        .await
        .unwrap();
    assert_eq!(retry.thread.id, newest.thread.id);
    assert_eq!(retry.state(), TaskState::Completed);
}

#[tokio::test]
async fn a_party_outside_a_skills_channel_is_refused_not_told_not_found() {
    let (env, _alice, _partner, _rival) = setup().await;
    let s = &env.service;
    env.person("loner", PersonKind::External).await;
    let loner = env.caller("loner", Scope::Agent, "remote@loner:1").await;
    let refused = s
        .send_task_message(&loner, message("m1", "Hello?"))
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Forbidden);
    assert!(
        refused.message.contains("skill \"ask\""),
        "{}",
        refused.message
    );
    assert_eq!(
        s.list_tasks(
            &loner,
            TaskFilter {
                limit: 10,
                ..Default::default()
            },
            None,
            None
        )
        .await
        .unwrap()
        .total,
        0
    );
}

/// A new task's retry is recognised by its post, with nothing read first; when the way to a new
/// task is closed since (the party left the skill's channel), the retry still gets its task as
/// it stands, while a new message is refused.
#[tokio::test]
async fn a_retry_gets_its_task_even_after_the_party_lost_the_skill() {
    let (env, alice, partner, _rival) = setup().await;
    let s = &env.service;
    let first = s
        .send_task_message(&partner, message("m1", "Which TLS version?"))
        .await
        .unwrap();
    let id = first.thread.id.clone();
    s.post(&alice, post("question", None, Some(&id), "Which endpoint?"))
        .await
        .unwrap();
    // A retry while nothing changed: the same task, as it stands now.
    let again = s
        .send_task_message(&partner, message("m1", "Which TLS version?"))
        .await
        .unwrap();
    assert_eq!(
        (again.thread.id.clone(), again.state()),
        (id.clone(), TaskState::InputRequired)
    );
    let change = liaison::service::MemberChange {
        add: Vec::new(),
        remove: vec![crate::helpers::pid("partner")],
        rights: None,
    };
    s.change_members(&env.admin, &channel("partners"), change)
        .await
        .unwrap();
    let again = s
        .send_task_message(&partner, message("m1", "Which TLS version?"))
        .await
        .unwrap();
    assert_eq!(again.thread.id, id);
    assert_eq!(
        s.send_task_message(&partner, message("m3", "A new question"))
            .await
            .unwrap_err()
            .code,
        ErrorCode::Forbidden
    );
    // The id for another message is that new message, refused as any new task now is.
    assert_eq!(
        s.send_task_message(&partner, message("m1", "Something else"))
            .await
            .unwrap_err()
            .code,
        ErrorCode::Forbidden
    );
}
