//! A2A tasks through the service: routing by skill, the derived task state through claim,
//! announce, question, answer and reply, the event log, listing, cancel, and party isolation.

use liaison::domain::{Decision, DecisionPath, Impact, Kind, PersonKind, Scope, TaskState};
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
            },
            SkillRoute {
                id: "change".into(),
                channel: channel("partners"),
                kind: Kind::Request,
                impact: Some(Impact::Code),
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

    s.claim(
        &alice,
        ClaimTarget::Thread(id.clone()),
        ClaimAction::Claim,
        None,
    )
    .await
    .unwrap_err(); // a question is not claimable
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
    let human = env.caller("alice", Scope::Human, "alice@console:1").await;
    let approval = s
        .approvals(&human, true, None, None)
        .await
        .unwrap()
        .approvals[0]
        .id
        .clone();
    s.decide(&human, &approval, Decision::Allow, None, DecisionPath::Cli)
        .await
        .unwrap();
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
