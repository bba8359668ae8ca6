//! The audit log of admin changes (issue 26): every admin operation appends its entry in the
//! transaction of the change, with who, via what, and the subject before and after, never a
//! secret; a refused change appends nothing; the log filters; and console sessions get admin
//! rights only from an admin login link of a person who holds a live admin token.

use liaison::domain::{
    ApprovalPolicy, DecisionPath, PersonKind, PolicyChange, PolicyDecision, Right, Rights, Scope,
    Scopes,
};
use liaison::service::{
    AuditQuery, ChannelSpec, ErrorCode, MemberChange, PartySpec, Service, TokenSpec,
};
use liaison::store::{AuditRecord, LinkKind};

use crate::helpers::{TestEnv, channel, pid};

async fn log(env: &TestEnv, q: AuditQuery) -> Vec<AuditRecord> {
    env.service.audit(&env.admin, &q).await.unwrap()
}

async fn all(env: &TestEnv) -> Vec<AuditRecord> {
    log(env, AuditQuery::default()).await
}

fn events(entries: &[AuditRecord]) -> Vec<&str> {
    entries.iter().map(|e| e.event.as_str()).collect()
}

#[tokio::test]
async fn every_admin_change_is_logged_with_before_and_after_and_no_secret() {
    let env = TestEnv::new().await;
    let s = &env.service;
    let cli = env.admin.clone().arriving_via(DecisionPath::Cli);
    // The bootstrap is the server's own change.
    let boot = all(&env).await;
    assert_eq!(events(&boot), ["person.added", "token.issued"]);
    assert_eq!(boot[0].actor, None);
    assert_eq!(boot[0].via, None);

    let since = boot.last().unwrap().seq;
    s.add_person(&cli, pid("alice"), PersonKind::Member, "Alice".into())
        .await
        .unwrap();
    let token = s
        .issue_token(
            &env.admin,
            TokenSpec {
                person: pid("alice"),
                scopes: Scopes::default().with(Scope::Agent),
                expires_in_s: Some(3_600),
                description: "laptop".into(),
            },
        )
        .await
        .unwrap();
    s.add_channel(
        &env.admin,
        ChannelSpec {
            name: channel("ops"),
            description: "Operations".into(),
            members: vec![pid("alice")],
            rights: None,
            policy: None,
        },
    )
    .await
    .unwrap();
    s.change_policy(
        &env.admin,
        &channel("ops"),
        PolicyChange {
            code: Some(PolicyDecision::Auto),
            ..PolicyChange::default()
        },
    )
    .await
    .unwrap();
    s.add_person(&env.admin, pid("bob"), PersonKind::Member, "Bob".into())
        .await
        .unwrap();
    s.change_members(
        &env.admin,
        &channel("ops"),
        MemberChange {
            add: vec![pid("bob")],
            rights: Some(Rights::default().with(Right::Read)),
            remove: vec![],
        },
    )
    .await
    .unwrap();
    let party_token = s
        .add_party(
            &env.admin,
            PartySpec {
                id: pid("partner"),
                display_name: "Partner Inc".into(),
                default_skill: None,
                jwt_subject: Some("partner-sub".into()),
                issue_token: true,
                channels: Vec::new(),
            },
        )
        .await
        .unwrap()
        .token;
    let link = s
        .issue_login_link(&env.admin, &pid("alice"), None)
        .await
        .unwrap();
    s.revoke_token(&env.admin, &token.token.id).await.unwrap();
    s.remove_party(&env.admin, &pid("partner")).await.unwrap();
    s.remove_channel(&env.admin, &channel("ops")).await.unwrap();
    s.remove_person(&env.admin, &pid("bob")).await.unwrap();

    let entries = log(
        &env,
        AuditQuery {
            after: Some(since),
            ..AuditQuery::default()
        },
    )
    .await;
    assert_eq!(
        events(&entries),
        [
            "person.added",
            "token.issued",
            "channel.added",
            "channel.policy_changed",
            "person.added",
            "channel.members_changed",
            "party.added",
            "token.issued",
            "link.login_issued",
            "token.revoked",
            "party.removed",
            "channel.removed",
            "person.removed",
        ]
    );
    for e in &entries {
        assert_eq!(e.actor.as_ref().map(|a| a.as_str()), Some("admin"), "{e:?}");
        assert!(e.subject.is_some(), "{e:?}");
    }
    assert_eq!(entries[0].via, Some(DecisionPath::Cli));
    assert_eq!(entries[1].via, Some(DecisionPath::Api));
    assert_eq!(entries[0].after.as_ref().unwrap()["display_name"], "Alice");
    assert_eq!(entries[0].before, None);
    // The policy change shows exactly what changed.
    let policy = &entries[3];
    assert_eq!(policy.subject.as_deref(), Some("ops"));
    assert_eq!(policy.before.as_ref().unwrap()["policy"]["code"], "approve");
    assert_eq!(policy.after.as_ref().unwrap()["policy"]["code"], "auto");
    assert_eq!(
        policy.after.as_ref().unwrap()["policy"]["database"],
        "approve"
    );
    // The members before and after.
    let members = &entries[5];
    assert_eq!(
        members.before.as_ref().unwrap()["members"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let after = members.after.as_ref().unwrap()["members"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(after.len(), 2);
    assert_eq!(after[0]["person"], "alice");
    assert_eq!(after[1]["person"], "bob");
    assert_eq!(after[1]["rights"], serde_json::json!(["read"]));
    // A revocation shows the token as it was; a removal the thing removed.
    assert_eq!(entries[9].subject.as_deref(), Some(token.token.id.as_str()));
    assert_eq!(entries[9].before.as_ref().unwrap()["person"], "alice");
    assert_eq!(
        entries[10].before.as_ref().unwrap()["jwt_subject"],
        "partner-sub"
    );
    assert_eq!(entries[12].before.as_ref().unwrap()["id"], "bob");
    assert_eq!(entries[12].after, None);
    // No secret anywhere in the log.
    let text = serde_json::to_string(&all(&env).await).unwrap();
    for secret in [
        token.secret.as_str(),
        party_token.unwrap().secret.as_str(),
        link.secret.as_str(),
    ] {
        assert!(!text.contains(secret), "a secret reached the audit log");
    }
    assert!(!text.contains("secret_hash"));
}

#[tokio::test]
async fn a_refused_change_logs_nothing() {
    let env = TestEnv::new().await;
    let s = &env.service;
    env.member("alice", "claude@a:1").await;
    let before = all(&env).await.len();
    // A duplicate, an unknown id, a bad display name, a policy out of range, a removal of self.
    let e = s
        .add_person(&env.admin, pid("alice"), PersonKind::Member, "Again".into())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::AlreadyExists);
    let e = s.revoke_token(&env.admin, "tok_nope").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    let e = s
        .add_person(
            &env.admin,
            pid("carol"),
            PersonKind::Member,
            "a\u{2028}b".into(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    let e = s
        .remove_person(&env.admin, &pid("admin"))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    let e = s
        .remove_channel(&env.admin, &channel("nowhere"))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    // A member's token cannot make admin changes, and its refusal logs nothing either.
    let alice = env.caller("alice", Scope::Agent, "claude@a:2").await;
    let e = s
        .add_person(&alice, pid("mallory"), PersonKind::Member, "M".into())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden);
    let e = s.audit(&alice, &AuditQuery::default()).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden);
    // The agent token `caller` issued is one more entry; nothing for the refusals.
    assert_eq!(all(&env).await.len(), before + 1);
}

#[tokio::test]
async fn a_channel_whose_policy_needs_an_approver_must_have_one() {
    let env = TestEnv::new().await;
    let s = &env.service;
    env.member("alice", "claude@a:1").await;
    env.member("bob", "claude@b:1").await;
    let read_post = Rights::default().with(Right::Read).with(Right::Post);
    let spec = |policy: Option<ApprovalPolicy>| ChannelSpec {
        name: channel("dev"),
        description: String::new(),
        members: vec![pid("alice"), pid("bob")],
        rights: Some(read_post),
        policy,
    };
    let before = all(&env).await.len();
    // The default policy needs approval for code, database and production.
    let e = s.add_channel(&env.admin, spec(None)).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    assert!(e.message.contains("code, database, production"), "{e}");
    assert!(s.list_all_channels(&env.admin).await.unwrap().is_empty());
    assert_eq!(all(&env).await.len(), before);
    // A policy that needs no approval is fine without an approver.
    let auto = ApprovalPolicy {
        code: PolicyDecision::Auto,
        database: PolicyDecision::Deny,
        production: PolicyDecision::Deny,
        ..ApprovalPolicy::default()
    };
    s.add_channel(&env.admin, spec(Some(auto))).await.unwrap();
    // Asking for approval now is refused, and changes nothing.
    let e = s
        .change_policy(
            &env.admin,
            &channel("dev"),
            PolicyChange {
                production: Some(PolicyDecision::Approve),
                ..PolicyChange::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    assert!(e.message.contains("production"), "{e}");
    let e = s
        .set_policy(&env.admin, &channel("dev"), ApprovalPolicy::default())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    let dev = s.list_all_channels(&env.admin).await.unwrap();
    assert_eq!(dev[0].policy, auto);
    // With an approver it goes through; removing the last approver is then refused.
    s.change_members(
        &env.admin,
        &channel("dev"),
        MemberChange {
            add: vec![pid("bob")],
            rights: Some(Rights::all()),
            remove: vec![],
        },
    )
    .await
    .unwrap();
    s.set_policy(&env.admin, &channel("dev"), ApprovalPolicy::default())
        .await
        .unwrap();
    let e = s
        .change_members(
            &env.admin,
            &channel("dev"),
            MemberChange {
                add: vec![],
                rights: None,
                remove: vec![pid("bob")],
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    let dev = s.list_all_channels(&env.admin).await.unwrap();
    assert_eq!(dev[0].members.len(), 2);
}

#[tokio::test]
async fn the_log_filters_by_event_actor_subject_and_time() {
    let env = TestEnv::new().await;
    let s = &env.service;
    env.member("alice", "claude@a:1").await;
    env.clock.advance_secs(3_600);
    let later = chrono::DateTime::from_timestamp_millis(env.service.clock_now().0)
        .unwrap()
        .to_rfc3339();
    env.member("bob", "claude@b:1").await;
    let q = |event: Option<&str>, subject: Option<&str>| AuditQuery {
        event: event.map(str::to_owned),
        subject: subject.map(str::to_owned),
        ..AuditQuery::default()
    };
    let tokens = log(&env, q(Some("token."), None)).await;
    assert_eq!(tokens.len(), 3, "bootstrap, alice's, bob's");
    assert!(tokens.iter().all(|e| e.event == "token.issued"));
    let alice = log(&env, q(None, Some("alice"))).await;
    assert_eq!(events(&alice), ["person.added"]);
    let late = log(
        &env,
        AuditQuery {
            since: Some(later),
            ..AuditQuery::default()
        },
    )
    .await;
    assert_eq!(events(&late), ["person.added", "token.issued"]);
    assert_eq!(late[0].subject.as_deref(), Some("bob"));
    let by_admin = log(
        &env,
        AuditQuery {
            actor: Some("admin".into()),
            ..AuditQuery::default()
        },
    )
    .await;
    assert_eq!(by_admin.len(), 4, "the bootstrap is the server's");
    // Bad filters are refused with the reason.
    for bad in [
        AuditQuery {
            since: Some("yesterday".into()),
            ..AuditQuery::default()
        },
        AuditQuery {
            actor: Some("Not A Slug".into()),
            ..AuditQuery::default()
        },
        AuditQuery {
            limit: Some(0),
            ..AuditQuery::default()
        },
        AuditQuery {
            event: Some("x\ny".into()),
            ..AuditQuery::default()
        },
        AuditQuery {
            subject: Some("s".repeat(201)),
            ..AuditQuery::default()
        },
    ] {
        let e = s.audit(&env.admin, &bad).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput, "{bad:?}");
    }
}

/// Opens a console session from a login link, as the console's pages do.
async fn sign_in(s: &Service, secret: &str) -> String {
    let (_, csrf) = s.open_link(LinkKind::Login, secret, None).await.unwrap();
    s.console_login(secret, &csrf, Some(&csrf))
        .await
        .unwrap()
        .secret
}

#[tokio::test]
async fn only_an_admin_login_link_of_an_admin_opens_the_admin_pages() {
    let env = TestEnv::new().await;
    let s = &env.service;
    env.member("alice", "claude@a:1").await;
    // Alice holds no admin token: no admin link for her.
    let e = s
        .issue_admin_login_link(&env.admin, &pid("alice"), None)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    assert!(e.message.contains("no live admin token"), "{e}");
    // A plain session (hers, or the admin's own from a plain link) reaches no admin page.
    let plain = s
        .issue_login_link(&env.admin, &pid("admin"), None)
        .await
        .unwrap();
    let session = sign_in(s, &plain.secret).await;
    let (member, record) = s.console_caller(&session).await.unwrap();
    assert!(!record.admin);
    let e = s.console_admin(&member, &record).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);

    // An admin login link of the admin: the session's admin caller has `admin` only.
    let link = s
        .issue_admin_login_link(&env.admin, &pid("admin"), None)
        .await
        .unwrap();
    let session = sign_in(s, &link.secret).await;
    let (member, record) = s.console_caller(&session).await.unwrap();
    assert!(record.admin);
    assert!(member.scopes.contains(Scope::Human) && !member.scopes.contains(Scope::Admin));
    let admin = s.console_admin(&member, &record).await.unwrap();
    assert_eq!(admin.scopes, Scopes::default().with(Scope::Admin));
    assert_eq!(admin.via, DecisionPath::Console);
    s.add_person(&admin, pid("carol"), PersonKind::Member, "Carol".into())
        .await
        .unwrap();
    let last = all(&env).await.pop().unwrap();
    assert_eq!(last.event, "person.added");
    assert_eq!(last.via, Some(DecisionPath::Console));

    // Revoking the admin's last admin token closes the admin pages of the live session at once.
    let admin_token = env.admin.token_id.clone();
    s.revoke_token(&admin, &admin_token).await.unwrap();
    let (member, record) = s.console_caller(&session).await.unwrap();
    let e = s.console_admin(&member, &record).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);

    // An agent credential never gets a console session at all: links, plain or admin, are for
    // members only (a party's id is refused), and an agent token's secret (a member's or a
    // party's) is neither a session, nor a link, nor a link's way to a session.
    let party = s
        .add_party(
            &admin_caller(&env).await,
            PartySpec {
                id: pid("partner"),
                display_name: "Partner".into(),
                default_skill: None,
                jwt_subject: None,
                issue_token: true,
                channels: Vec::new(),
            },
        )
        .await
        .unwrap();
    let e = s
        .issue_admin_login_link(&admin_caller(&env).await, &pid("partner"), None)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    let e = s
        .issue_login_link(&admin_caller(&env).await, &pid("partner"), None)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput, "{e}");
    let alices = s
        .issue_token(
            &admin_caller(&env).await,
            TokenSpec {
                person: pid("alice"),
                scopes: Scopes::default().with(Scope::Agent),
                expires_in_s: None,
                description: String::new(),
            },
        )
        .await
        .unwrap()
        .secret;
    for secret in [party.token.unwrap().secret, alices] {
        assert!(s.authenticate(&secret).await.is_ok(), "a live agent token");
        let e = s.console_caller(&secret).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::Unauthenticated, "{e}");
        for kind in [LinkKind::Login, LinkKind::Approval] {
            assert!(s.open_link(kind, &secret, None).await.is_err(), "{kind:?}");
        }
        assert!(s.console_login(&secret, "c", Some("c")).await.is_err());
    }
}

/// A fresh admin token's caller (the bootstrap one may have been revoked).
async fn admin_caller(env: &TestEnv) -> liaison::service::Caller {
    let s = &env.service;
    s.add_person(&env.admin, pid("root2"), PersonKind::Member, "Root".into())
        .await
        .ok();
    env.caller("root2", Scope::Admin, "cli@h:1").await
}
