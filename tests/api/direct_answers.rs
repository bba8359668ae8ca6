//! Direct answers (SPEC §8): on a conversational skill, a task the team answers with a single
//! `reply` and nothing else is the party's answer as a bare message; any other course keeps it a
//! task the party follows.

use liaison::domain::{Kind, PersonKind, Scope, TaskState};
use liaison::service::{ClaimAction, ClaimTarget, Settings, SkillRoute, TaskMessage};

use crate::helpers::{TestEnv, channel, post};

fn settings() -> Settings {
    let route = |id: &str, direct_answers| SkillRoute {
        id: id.into(),
        channel: channel("partners"),
        kind: Kind::Question,
        impact: None,
        direct_answers,
    };
    Settings {
        skills: vec![route("chat", true), route("ask", false)],
        default_skill: Some("chat".into()),
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

async fn setup() -> (TestEnv, liaison::service::Caller, liaison::service::Caller) {
    let env = TestEnv::with_settings(settings()).await;
    let alice = env.member("alice", "claude@a:1").await;
    env.person("partner", PersonKind::External).await;
    env.channel("partners", &["alice", "partner"]).await;
    let partner = env
        .caller("partner", Scope::Agent, "remote@partner:1")
        .await;
    (env, alice, partner)
}

#[tokio::test]
async fn a_single_reply_on_a_conversational_skill_is_a_direct_answer_also_to_a_retry() {
    let (env, alice, partner) = setup().await;
    let s = &env.service;
    let sent = s
        .send_task_message(&partner, message("m1", "Are you open today?"))
        .await
        .unwrap();
    assert!(s.answers_directly(&sent));
    assert!(s.direct_answer(&sent).is_none(), "not answered yet");
    let id = sent.thread.id;
    s.post(&alice, post("reply", None, Some(&id), "Yes, until six"))
        .await
        .unwrap();
    let view = s.task(&partner, &id, None).await.unwrap();
    assert_eq!(view.state(), TaskState::Completed);
    let answer = s.direct_answer(&view).expect("a direct answer");
    assert_eq!(answer.body, "Yes, until six");
    // A retry after a lost answer gets the same answer.
    let retry = s
        .send_task_message(&partner, message("m1", "Are you open today?"))
        .await
        .unwrap();
    assert_eq!(retry.thread.id, id);
    assert_eq!(s.direct_answer(&retry).unwrap().id, answer.id);
    // A view that does not hold the whole history is no answer.
    let trimmed = s.task(&partner, &id, Some(1)).await.unwrap();
    assert!(s.direct_answer(&trimmed).is_none());
}

async fn open(
    s: &liaison::service::Service,
    partner: &liaison::service::Caller,
    id: &str,
) -> liaison::domain::ThreadId {
    s.send_task_message(partner, message(id, "Please look into it"))
        .await
        .unwrap()
        .thread
        .id
}

#[tokio::test]
async fn a_claim_a_note_or_a_question_before_the_reply_keeps_it_a_task() {
    let (env, alice, partner) = setup().await;
    let s = &env.service;
    // Claimed first: the task went WORKING, which the party could follow.
    let claimed = open(s, &partner, "m1").await;
    s.claim(
        &alice,
        ClaimTarget::Thread(claimed.clone()),
        ClaimAction::Claim,
        None,
    )
    .await
    .unwrap();
    // A note first.
    let noted = open(s, &partner, "m2").await;
    s.post(&alice, post("announce", None, Some(&noted), "Looking"))
        .await
        .unwrap();
    // A question first, answered by the party.
    let asked = open(s, &partner, "m3").await;
    s.post(&alice, post("question", None, Some(&asked), "Which one?"))
        .await
        .unwrap();
    let answer = TaskMessage {
        task_id: Some(asked.clone()),
        ..message("m4", "The first")
    };
    s.send_task_message(&partner, answer).await.unwrap();
    for id in [&claimed, &noted, &asked] {
        s.post(&alice, post("reply", None, Some(id), "Done"))
            .await
            .unwrap();
        let view = s.task(&partner, id, None).await.unwrap();
        assert_eq!(view.state(), TaskState::Completed, "{id}");
        assert!(s.direct_answer(&view).is_none(), "{id}");
    }
    // Closed without a reply: no answer either.
    let closed = open(s, &partner, "m5").await;
    let mut close = post("close", None, Some(&closed), "Not for us");
    close.outcome = Some(liaison::domain::Outcome::Rejected);
    s.post(&alice, close).await.unwrap();
    let view = s.task(&partner, &closed, None).await.unwrap();
    assert!(s.direct_answer(&view).is_none());
}

#[tokio::test]
async fn a_skill_not_declared_conversational_always_answers_with_the_task() {
    let (env, alice, partner) = setup().await;
    let s = &env.service;
    let msg = TaskMessage {
        skill: Some("ask".into()),
        ..message("m1", "Are you open today?")
    };
    let sent = s.send_task_message(&partner, msg).await.unwrap();
    assert!(!s.answers_directly(&sent));
    s.post(&alice, post("reply", None, Some(&sent.thread.id), "Yes"))
        .await
        .unwrap();
    let view = s.task(&partner, &sent.thread.id, None).await.unwrap();
    assert_eq!(view.state(), TaskState::Completed);
    assert!(s.direct_answer(&view).is_none());
}
