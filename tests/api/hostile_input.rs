//! Input no backend can store, and names that try to hide characters: refused (or cleaned) by the
//! service, identically on SQLite and PostgreSQL, and nothing changes.

use liaison::domain::{Attachment, Kind, PersonKind, Scope, Transition};
use liaison::service::{
    ErrorCode, PostRequest, PresenceSpec, ServiceError, Settings, SkillRoute, TaskMessage,
};
use liaison::store::{StoreError, TaskFilter};

use crate::helpers::{TestEnv, channel, pid, post};

fn settings() -> Settings {
    Settings {
        skills: vec![SkillRoute {
            id: "ask".into(),
            channel: channel("partners"),
            kind: Kind::Question,
            impact: None,
            direct_answers: false,
        }],
        default_skill: Some("ask".into()),
        ..Settings::default()
    }
}

fn assert_invalid(result: Result<impl std::fmt::Debug, ServiceError>, field: &str) {
    let e = result.expect_err("NUL must be refused");
    assert_eq!(e.code, ErrorCode::InvalidInput, "{e}");
    assert!(e.message.contains(field), "{field} not named in {e}");
    assert!(e.message.contains("U+0000"), "{e}");
}

#[tokio::test]
async fn nul_in_any_posted_field_is_invalid_input_and_posts_nothing() {
    let env = TestEnv::with_settings(settings()).await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "codex@b:1").await;
    env.channel("demo", &["alice", "bob"]).await;
    let s = &env.service;
    let base = || post("question", Some("demo"), None, "fine");
    let cases: Vec<(&str, PostRequest)> = vec![
        ("post.body", post("question", Some("demo"), None, "a\0b")),
        (
            "post.subject",
            PostRequest {
                subject: Some("s\0".into()),
                ..base()
            },
        ),
        (
            "post.idempotency_key",
            PostRequest {
                idempotency_key: Some("k\0".into()),
                ..base()
            },
        ),
        (
            "post.attachments[0].filename",
            PostRequest {
                attachments: vec![Attachment::Inline {
                    filename: "a\0.txt".into(),
                    media_type: "text/plain".into(),
                    data_base64: "aGk=".into(),
                }],
                ..base()
            },
        ),
        (
            "post.attachments[1].data.deep[0]",
            PostRequest {
                attachments: vec![
                    Attachment::Url {
                        url: "https://example.com/x".into(),
                        filename: None,
                        media_type: None,
                    },
                    Attachment::Data {
                        data: serde_json::json!({"deep": ["\u{0}"]}),
                    },
                ],
                ..base()
            },
        ),
    ];
    for (field, req) in cases {
        assert_invalid(s.post(&alice, req).await, field);
    }
    let page = s
        .inbox(
            &bob,
            liaison::service::InboxRequest {
                session: None,
                consumer: "codex".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(page.entries.is_empty(), "nothing was posted");
    // The same body without the NUL goes through: the refusal was about that character only.
    s.post(
        &alice,
        post("question", Some("demo"), None, "a\u{1}b\u{2028}c"),
    )
    .await
    .unwrap();

    let presence = PresenceSpec {
        transition: Transition::Working,
        task: Some("t\0".into()),
        ttl_s: None,
    };
    assert_invalid(s.presence_set(&alice, presence).await, "presence.task");
    assert!(s.fleet(&bob).await.unwrap().is_empty());
}

#[tokio::test]
async fn nul_from_a_party_or_an_admin_is_invalid_input_and_changes_nothing() {
    let env = TestEnv::with_settings(settings()).await;
    env.member("alice", "claude@a:1").await;
    env.person("partner", PersonKind::External).await;
    env.channel("partners", &["alice", "partner"]).await;
    let partner = env.caller("partner", Scope::Agent, "remote@p:1").await;
    let s = &env.service;
    let msg = |id: &str, ctx: Option<&str>, body: &str| TaskMessage {
        message_id: id.into(),
        context_id: ctx.map(str::to_owned),
        body: body.into(),
        ..Default::default()
    };
    assert_invalid(
        s.send_task_message(&partner, msg("m\0", None, "x")).await,
        "message.message_id",
    );
    assert_invalid(
        s.send_task_message(&partner, msg("m1", Some("c\0"), "x"))
            .await,
        "message.context_id",
    );
    assert_invalid(
        s.send_task_message(&partner, msg("m1", None, "\0")).await,
        "message.body",
    );
    let filter = TaskFilter {
        context_id: Some("c\0".into()),
        limit: 10,
        ..Default::default()
    };
    assert_invalid(
        s.list_tasks(&partner, filter, None, None).await,
        "filter.context_id",
    );
    let all = TaskFilter {
        limit: 10,
        ..Default::default()
    };
    assert_eq!(
        s.list_tasks(&partner, all, None, None).await.unwrap().total,
        0
    );
    // A JWT subject with a NUL is an unknown subject, not an outage.
    let e = s.party_caller("partner\0", None).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthenticated);

    let before = s.list_persons(&env.admin).await.unwrap().len();
    assert_invalid(
        s.add_person(&env.admin, pid("eve"), PersonKind::Member, "Eve\0".into())
            .await,
        "display_name",
    );
    assert_eq!(s.list_persons(&env.admin).await.unwrap().len(), before);
}

#[tokio::test]
async fn display_names_lose_bidi_controls_and_invisible_characters() {
    let env = TestEnv::new().await;
    let s = &env.service;
    let eve = s
        .add_person(
            &env.admin,
            pid("eve"),
            PersonKind::Member,
            "\u{202e}Eve\u{200b}\u{2060} \u{a0}Admin\u{feff}".into(),
        )
        .await
        .unwrap();
    assert_eq!(eve.display_name, "Eve Admin");
    for bad in ["\u{200b}\u{202e}", "a\u{2028}b", "a\u{85}b"] {
        let e = s
            .add_person(&env.admin, pid("mallory"), PersonKind::Member, bad.into())
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput, "{bad:?}");
    }
}

/// The store's own safety net: should a string with a NUL ever reach PostgreSQL, its refusal is
/// invalid data, not "the database is unavailable".
#[tokio::test]
async fn a_value_the_database_refuses_is_invalid_data_not_an_outage() {
    let db = crate::helpers::TestDb::new().await;
    let postgres = db.is_postgres();
    let store = liaison::store::Store::open(&db.url).await.unwrap();
    let result = store.party_by_subject("x\0y").await;
    if postgres {
        assert!(
            matches!(result, Err(StoreError::InvalidData(_))),
            "{result:?}"
        );
        let e = ServiceError::from(result.unwrap_err());
        assert_eq!(e.code, ErrorCode::InvalidInput);
    } else {
        assert!(matches!(result, Ok(None)), "{result:?}");
    }
    store.close().await;
}
