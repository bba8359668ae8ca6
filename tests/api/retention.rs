//! Retention with a manual clock: each kind is purged once older than its setting and not before;
//! a purged thread answers exactly like an unknown one; what an open thread, a pending approval
//! or a due delivery still needs is never purged; with the defaults nothing is; `/metrics`
//! counts what was purged.

use std::sync::Arc;
use std::time::Duration;

use liaison::domain::delivery::AttemptVerdict;
use liaison::domain::{Kind, Outcome, PersonKind, Scope, TaskState, ThreadId};
use liaison::keys::ring::MasterKey;
use liaison::service::{
    AuditQuery, Caller, ErrorCode, Purged, Retention, Settings, SkillRoute, TaskMessage,
    WebhookSpec,
};
use liaison::store::{DeliveryFilter, DeliveryRecord, TaskEventRecord};
use liaison::workers::outbox::Worker;

use crate::helpers::{TestEnv, channel, post};
use crate::outbox::{MASTER_HEX, Receiver, outbox_settings, ring, worker};

const DAY: i64 = 86_400;

fn days(n: u64) -> Option<Duration> {
    Some(Duration::from_secs(n * DAY as u64))
}

struct Setup {
    env: TestEnv,
    alice: Caller,
    bob: Caller,
    partner: Caller,
    worker: Worker,
    _rx: Receiver,
}

/// Alice and Bob in `ops`, a partner whose tasks land there, and a webhook on every message (so
/// that threads have deliveries).
async fn setup() -> Setup {
    let settings = Settings {
        outbox: outbox_settings(),
        skills: vec![SkillRoute {
            id: "ask".into(),
            channel: channel("ops"),
            kind: Kind::Question,
            impact: None,
            direct_answers: false,
        }],
        default_skill: Some("ask".into()),
        ..Settings::default()
    };
    let env = TestEnv::with_master(settings, MasterKey::from_hex(MASTER_HEX).unwrap()).await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "claude@b:1").await;
    env.person("partner", PersonKind::External).await;
    env.channel("ops", &["alice", "bob", "partner"]).await;
    let partner = env
        .caller("partner", Scope::Agent, "remote@partner:1")
        .await;
    let rx = Receiver::start().await;
    let spec = WebhookSpec {
        url: rx.url.clone(),
        events: vec!["message.created".into()],
        ..Default::default()
    };
    env.service.add_webhook(&env.admin, spec).await.unwrap();
    let worker = worker(&env.service, Arc::new(ring()));
    Setup {
        env,
        alice,
        bob,
        partner,
        worker,
        _rx: rx,
    }
}

impl Setup {
    /// A question of Alice's in `ops`, answered by Bob; closed by Alice when `close`.
    async fn thread(&self, close: bool) -> ThreadId {
        let s = &self.env.service;
        let t = s
            .post(&self.alice, post("question", Some("ops"), None, "Port?"))
            .await
            .unwrap()
            .thread;
        s.post(&self.bob, post("reply", None, Some(&t), "8080"))
            .await
            .unwrap();
        if close {
            let mut req = post("close", None, Some(&t), "");
            req.outcome = Some(Outcome::Done);
            s.post(&self.alice, req).await.unwrap();
        }
        t
    }

    async fn drain(&self) {
        while let Some(step) = self.worker.deliver_next().await.unwrap() {
            assert_eq!(step.verdict, AttemptVerdict::Delivered);
        }
    }

    async fn purge(&self, retention: Retention) -> Purged {
        self.env.service.purge_expired(&retention).await.unwrap()
    }

    async fn deliveries(&self) -> Vec<DeliveryRecord> {
        let filter = DeliveryFilter {
            limit: 100,
            ..Default::default()
        };
        self.env
            .service
            .deliveries(&self.env.admin, filter)
            .await
            .unwrap()
    }

    /// How `thread` answers Alice: its error code and message, with its id written as `ID`.
    async fn refusal(&self, thread: &ThreadId) -> (ErrorCode, String) {
        let err = self
            .env
            .service
            .thread(&self.alice, thread, None, None)
            .await
            .unwrap_err();
        (err.code, err.message.replace(thread.as_str(), "ID"))
    }
}

/// The task's events; there must be `n`.
async fn events(s: &Setup, task: &ThreadId, n: usize) -> Vec<TaskEventRecord> {
    let (events, _) = s
        .env
        .service
        .task_events(&s.partner, task, 0, false)
        .await
        .unwrap();
    assert_eq!(events.len(), n, "{events:?}");
    events
}

fn purged_total(kind: &str) -> u64 {
    let text = liaison::metrics::get().render(&liaison::metrics::Live::default());
    let prefix = format!("liaison_retention_purged_total{{kind=\"{kind}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |v| v.trim().parse().unwrap())
}

#[tokio::test]
async fn a_closed_thread_past_its_retention_is_purged_and_answers_like_an_unknown_one() {
    let s = setup().await;
    let service = &s.env.service;
    let old_closed = s.thread(true).await;
    let old_open = s.thread(false).await;
    s.drain().await;
    // Closed as long ago, but its webhooks are still due: kept until they are delivered.
    let due = s.thread(true).await;
    s.env.clock.advance_secs(2 * DAY);
    let recent = s.thread(true).await;
    let unknown = s.refusal(&ThreadId::generate()).await;
    assert_eq!(unknown.0, ErrorCode::NotFound);

    // With the defaults nothing is ever purged.
    assert_eq!(s.purge(Retention::default()).await, Purged::default());
    let counted = (purged_total("threads"), purged_total("messages"));

    let keep = Retention {
        closed_threads: days(1),
        ..Retention::default()
    };
    let purged = s.purge(keep).await;
    assert_eq!((purged.threads, purged.messages), (1, 3), "{purged:?}");
    assert_eq!(s.refusal(&old_closed).await, unknown);
    let err = service
        .post(&s.bob, post("reply", None, Some(&old_closed), "late"))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    assert!(purged_total("threads") > counted.0);
    assert!(purged_total("messages") >= counted.1 + 3);
    // The open thread, however old, the closed one with webhooks due and the recent one stay
    // whole; the purged thread's deliveries went with it.
    for (thread, messages) in [(&old_open, 2), (&due, 3), (&recent, 3)] {
        let view = service.thread(&s.alice, thread, None, None).await.unwrap();
        assert_eq!(view.messages.len(), messages, "{thread}");
    }
    let left = s.deliveries().await;
    assert!(
        left.iter().all(|d| d.thread.as_ref() != Some(&old_closed)),
        "{left:?}"
    );
    assert!(left.iter().any(|d| d.thread.as_ref() == Some(&old_open)));

    // Once delivered, the due one goes too; the recent one when it is old enough.
    s.drain().await;
    assert_eq!(s.purge(keep).await.threads, 1);
    assert_eq!(s.refusal(&due).await, unknown);
    service.thread(&s.alice, &recent, None, None).await.unwrap();
    s.env.clock.advance_secs(DAY + 1);
    assert_eq!(s.purge(keep).await.threads, 1);
    assert_eq!(s.refusal(&recent).await, unknown);
    assert_eq!(s.purge(keep).await, Purged::default());
    service
        .thread(&s.alice, &old_open, None, None)
        .await
        .unwrap();
}

#[tokio::test]
async fn task_events_deliveries_and_audit_are_purged_each_by_its_own_setting() {
    let s = setup().await;
    let service = &s.env.service;
    let task = service
        .send_task_message(
            &s.partner,
            TaskMessage {
                message_id: "m1".into(),
                body: "Which TLS version?".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .thread
        .id;
    service
        .post(&s.alice, post("announce", None, Some(&task), "Looking"))
        .await
        .unwrap();
    s.drain().await;
    let audit_at_start = service
        .audit(&s.env.admin, &AuditQuery::default())
        .await
        .unwrap()
        .len();
    assert!(audit_at_start > 0);
    let delivered = s.deliveries().await.len();
    assert!(delivered >= 2);

    s.env.clock.advance_secs(10 * DAY);
    service
        .post(&s.alice, post("reply", None, Some(&task), "TLS 1.3"))
        .await
        .unwrap();
    let all = events(&s, &task, 3).await;
    assert_eq!(all[2].state, TaskState::Completed);

    // Every kind kept 5 days: the two early events, the delivered deliveries (not the new
    // reply's, still due) and the audit entries of the setup go.
    let keep = Retention {
        task_events: days(5),
        delivery_attempts: days(5),
        audit: days(5),
        ..Retention::default()
    };
    let purged = s.purge(keep).await;
    assert_eq!(purged.task_events, 2, "{purged:?}");
    assert_eq!(purged.deliveries as usize, delivered, "{purged:?}");
    assert_eq!(
        purged.delivery_attempts as usize, delivered,
        "one attempt each"
    );
    assert_eq!(purged.audit as usize, audit_at_start, "{purged:?}");
    assert_eq!(
        purged.threads, 0,
        "threads are kept forever unless configured"
    );
    assert_eq!(events(&s, &task, 1).await[0].seq, all[2].seq);
    assert_eq!(s.deliveries().await.len(), 1, "the reply's webhook is due");
    assert!(
        service
            .audit(&s.env.admin, &AuditQuery::default())
            .await
            .unwrap()
            .is_empty()
    );
    // The task itself reads as before.
    let view = service.task(&s.partner, &task, None).await.unwrap();
    assert_eq!(view.state(), TaskState::Completed);

    // Much later: the latest event of a task is never purged; a delivery still due is not.
    s.env.clock.advance_secs(30 * DAY);
    let purged = s.purge(keep).await;
    assert_eq!(
        (purged.task_events, purged.deliveries),
        (0, 0),
        "{purged:?}"
    );
    events(&s, &task, 1).await;

    // The completed task's thread goes with `closed_threads` once its webhook was delivered, and
    // the task then answers like an unknown one.
    s.drain().await;
    let keep = Retention {
        closed_threads: days(5),
        ..keep
    };
    assert_eq!(s.purge(keep).await.threads, 1);
    let err = service.task(&s.partner, &task, None).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    let unknown = ThreadId::generate();
    let other = service.task(&s.partner, &unknown, None).await.unwrap_err();
    assert_eq!(
        err.message.replace(task.as_str(), "ID"),
        other.message.replace(unknown.as_str(), "ID")
    );
}

/// A backlog of several batches goes in one run: the purge works in transactions of at most
/// `PURGE_BATCH` rows and goes on until a batch comes back short; what is newer stays.
#[tokio::test]
async fn a_backlog_of_several_batches_is_purged_in_one_run() {
    let env = TestEnv::new().await;
    let service = &env.service;
    let audit = || async {
        let q = AuditQuery {
            limit: Some(1000),
            ..AuditQuery::default()
        };
        service.audit(&env.admin, &q).await.unwrap()
    };
    let at_start = audit().await.len();
    // Two batches and one entry more, written 50 at a time (the writer groups them).
    let backlog = 2 * liaison::store::PURGE_BATCH as usize + 1 - at_start;
    let ids: Vec<String> = (0..backlog).map(|i| format!("p{i}")).collect();
    for chunk in ids.chunks(50) {
        let adds = chunk.iter().map(|id| {
            service.add_person(
                &env.admin,
                crate::helpers::pid(id),
                PersonKind::Member,
                "Load".into(),
            )
        });
        for added in futures::future::join_all(adds).await {
            added.unwrap();
        }
    }
    env.clock.advance_secs(10 * DAY);
    service
        .add_person(
            &env.admin,
            crate::helpers::pid("newer"),
            PersonKind::Member,
            "Newer".into(),
        )
        .await
        .unwrap();
    let keep = Retention {
        audit: days(5),
        ..Retention::default()
    };
    let purged = service.purge_expired(&keep).await.unwrap();
    assert_eq!(
        purged.audit,
        2 * liaison::store::PURGE_BATCH + 1,
        "{purged:?}"
    );
    let left = audit().await;
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].subject.as_deref(), Some("newer"), "{left:?}");
}

/// Closed threads past their retention, more messages than one transaction holds: the purge
/// goes on, batch after batch, until none is left in one run; a thread closed since stays.
#[tokio::test]
async fn a_backlog_of_closed_threads_larger_than_a_batch_is_purged_in_one_run() {
    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    env.member("bob", "claude@b:1").await;
    env.channel("ops", &["alice", "bob"]).await;
    let s = &env.service;
    let closed = || async {
        let t = s
            .post(&alice, post("question", Some("ops"), None, "Port?"))
            .await
            .unwrap()
            .thread;
        let mut req = post("close", None, Some(&t), "");
        req.outcome = Some(Outcome::Done);
        s.post(&alice, req).await.unwrap();
        t
    };
    // Two messages each: more than PURGE_BATCH messages in all, so more than one batch
    // whatever else bounds a batch.
    let n = liaison::store::PURGE_BATCH / 2 + 1;
    let mut made = 0;
    while made < n {
        let k = (n - made).min(50);
        futures::future::join_all((0..k).map(|_| closed())).await;
        made += k;
    }
    let old = closed().await;
    env.clock.advance_secs(10 * DAY);
    let newer = closed().await;
    let keep = Retention {
        closed_threads: days(5),
        ..Retention::default()
    };
    let purged = s.purge_expired(&keep).await.unwrap();
    assert_eq!(
        (purged.threads, purged.messages),
        (n + 1, 2 * (n + 1)),
        "{purged:?}"
    );
    assert_eq!(
        s.thread(&alice, &old, None, None).await.unwrap_err().code,
        ErrorCode::NotFound
    );
    let view = s.thread(&alice, &newer, None, None).await.unwrap();
    assert_eq!(view.messages.len(), 2);
    assert_eq!(s.purge_expired(&keep).await.unwrap(), Purged::default());
}

/// Finished deliveries past their retention, more than one transaction holds: the purge goes on,
/// batch after batch, until none is left in one run; one delivered since stays.
#[tokio::test]
async fn a_backlog_of_finished_deliveries_larger_than_a_batch_is_purged_in_one_run() {
    let s = setup().await;
    let service = &s.env.service;
    // One message each, so one webhook delivery each: more than PURGE_BATCH in all.
    let n = liaison::store::PURGE_BATCH + 1;
    let mut made = 0;
    while made < n {
        let k = (n - made).min(50);
        let posts =
            (0..k).map(|_| service.post(&s.alice, post("question", Some("ops"), None, "Port?")));
        for posted in futures::future::join_all(posts).await {
            posted.unwrap();
        }
        made += k;
    }
    s.drain().await;
    s.env.clock.advance_secs(10 * DAY);
    service
        .post(&s.alice, post("question", Some("ops"), None, "Newer"))
        .await
        .unwrap();
    s.drain().await;
    let keep = Retention {
        delivery_attempts: days(5),
        ..Retention::default()
    };
    let purged = s.purge(keep).await;
    assert_eq!(
        (purged.deliveries, purged.delivery_attempts),
        (n, n),
        "{purged:?}"
    );
    let left = s.deliveries().await;
    assert_eq!(left.len(), 1, "the newer delivery stays: {left:?}");
    assert_eq!(s.purge(keep).await, Purged::default());
}
