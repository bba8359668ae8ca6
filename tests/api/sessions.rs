//! A person's sessions with her own agents (SPEC §4b): she opens one with a connection, its
//! agent joins with a single-use code, her commands reach it as her instruction with the context
//! fenced, each command's lifecycle is one timeline, unclaimed commands expire, and ending the
//! session ends waiting reads at once. Both backends.

use std::time::Duration;

use liaison::domain::personal::{CommandContext, SessionId};
use liaison::domain::{ConnectionSlug, Impact, ReplyResult, ResultStatus, Scope};
use liaison::service::{
    Caller, ClaimAction, ClaimTarget, CommandSpec, ConnectionUpdate, ErrorCode, InboxRequest,
    ItemContent, OwnTokenSpec, PostRequest, ProgressReport, SessionSpec,
};

use crate::helpers::{TestEnv, pid};

struct Desk {
    env: TestEnv,
    alice: Caller,
    claude: Caller,
    codex: Caller,
    bob: Caller,
}

async fn connect(env: &TestEnv, human: &Caller, name: &str, agent: &str) -> Caller {
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
    env.service
        .authenticate(&issued.secret)
        .await
        .unwrap()
        .declaring(Some(liaison::domain::AgentIdentity::parse(agent).unwrap()))
}

async fn desk() -> Desk {
    let env = TestEnv::new().await;
    env.person("alice", liaison::domain::PersonKind::Member)
        .await;
    let alice = env.caller("alice", Scope::Human, "alice@console:1").await;
    let claude = connect(&env, &alice, "claude-laptop", "claude@laptop:1").await;
    let codex = connect(&env, &alice, "codex", "codex@laptop:2").await;
    let bob = env.member("bob", "claude@b:1").await;
    env.channel("ops", &["alice", "bob"]).await;
    Desk {
        env,
        alice,
        claude,
        codex,
        bob,
    }
}

fn with(connection: Option<&str>) -> SessionSpec {
    SessionSpec {
        connection: connection.map(|c| ConnectionSlug::parse(c).unwrap()),
        title: None,
    }
}

fn command(text: &str) -> CommandSpec {
    CommandSpec {
        instruction: text.into(),
        ..Default::default()
    }
}

fn read(consumer: &str, session: Option<&SessionId>, wait_s: u64) -> InboxRequest {
    InboxRequest {
        consumer: consumer.into(),
        after: None,
        limit: Some(50),
        wait_s: Some(wait_s),
        session: session.cloned(),
    }
}

/// The bodies, labels and whether each is her instruction, of what `who` reads.
async fn bodies(
    env: &TestEnv,
    who: &Caller,
    consumer: &str,
    session: Option<&SessionId>,
) -> Vec<(String, bool, String)> {
    let page = env
        .service
        .inbox(who, read(consumer, session, 0))
        .await
        .unwrap();
    page.entries
        .into_iter()
        .filter_map(|e| match e.content {
            ItemContent::Message { message, .. } => Some((
                message.message.body.clone(),
                message.label.instruction,
                message.label.text.clone(),
            )),
            ItemContent::Notice { .. } => None,
        })
        .collect()
}

fn code_of(e: liaison::service::ServiceError) -> ErrorCode {
    e.code
}

#[tokio::test]
async fn her_command_reaches_the_joined_agent_as_her_instruction_and_each_step_is_on_its_timeline()
{
    let Desk {
        env,
        alice,
        claude,
        codex,
        ..
    } = desk().await;
    let s = env
        .service
        .open_session(&alice, with(Some("claude-laptop")))
        .await
        .unwrap();
    assert_eq!(s.session.with.to_string(), "alice/claude-laptop");
    assert_eq!(s.channel.as_str(), "@alice");
    let id = s.session.id.clone();
    let code = env.service.new_join_code(&alice, &id).await.unwrap();
    assert!(code.prompt.contains(&code.code), "{}", code.prompt);

    let joined = env.service.join_session(&claude, &code.code).await.unwrap();
    assert_eq!(joined.session.id, id);
    assert_eq!(joined.consumer, id.to_string());
    assert!(joined.pending.is_empty());

    env.clock.advance_secs(1);
    let sent = env
        .service
        .command(
            &alice,
            &id,
            CommandSpec {
                context: Some(CommandContext {
                    url: Some("https://example.com/pricing".into()),
                    selection: Some("| pro | 20 € |".into()),
                    surface: Some("pricing page".into()),
                    captured_at: Some("2026-12-05T10:30:00Z".into()),
                }),
                ..command("Replace the pricing table")
            },
        )
        .await
        .unwrap();

    // Her instruction to claude-laptop alone; the context is an attachment, fenced data.
    let got = bodies(&env, &claude, &joined.consumer, Some(&id)).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, "Replace the pricing table");
    assert!(got[0].1, "labelled as her instruction: {}", got[0].2);
    assert!(
        bodies(&env, &codex, "codex", None).await.is_empty(),
        "a command to claude-laptop never reaches codex"
    );
    let view = env
        .service
        .thread(&claude, &sent.thread, None, None)
        .await
        .unwrap();
    assert!(
        view.messages[0]
            .message
            .message
            .attachments
            .iter()
            .any(|a| serde_json::to_string(a).unwrap().contains("pricing page"))
    );
    // Codex cannot claim it: it was not addressed to it.
    let refused = env
        .service
        .claim(
            &codex,
            ClaimTarget::Thread(sent.thread.clone()),
            ClaimAction::Claim,
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::NotClaimable);

    // The agent works: claims, a tool runs, it asks, she answers, it replies with a result.
    env.clock.advance_secs(1);
    env.service
        .claim(
            &claude,
            ClaimTarget::Thread(sent.thread.clone()),
            ClaimAction::Claim,
            None,
        )
        .await
        .unwrap();
    env.clock.advance_secs(1);
    env.service
        .report_progress(
            &claude,
            ProgressReport {
                tool: "Edit".into(),
                target: Some("site/pricing.html".into()),
                outcome: "ok".into(),
            },
        )
        .await
        .unwrap();
    env.clock.advance_secs(1);
    let ask = PostRequest {
        kind: Some("question".parse().unwrap()),
        thread: Some(sent.thread.clone()),
        body: "Keep the old prices as a footnote?".into(),
        ..Default::default()
    };
    env.service.post(&claude, ask).await.unwrap();
    let mid = env.service.session(&alice, &id).await.unwrap();
    assert_eq!(mid.commands[0].status, "question");
    env.clock.advance_secs(1);
    let answer = PostRequest {
        kind: Some("reply".parse().unwrap()),
        thread: Some(sent.thread.clone()),
        body: "No, drop them.".into(),
        ..Default::default()
    };
    env.service.post(&alice, answer).await.unwrap();
    // Her answer reaches the agent in the session's read too.
    let got = bodies(&env, &claude, &joined.consumer, Some(&id)).await;
    assert!(got.iter().any(|(b, _, _)| b == "No, drop them."), "{got:?}");
    env.clock.advance_secs(1);
    let done = PostRequest {
        kind: Some("reply".parse().unwrap()),
        thread: Some(sent.thread.clone()),
        body: "Replaced; old prices dropped.".into(),
        result: Some(ReplyResult {
            status: ResultStatus::Done,
            summary: "Pricing table replaced".into(),
            changed: vec!["site/pricing.html".into()],
            checks: Vec::new(),
            links: Vec::new(),
        }),
        ..Default::default()
    };
    env.service.post(&claude, done).await.unwrap();

    let view = env.service.session(&alice, &id).await.unwrap();
    let c = &view.commands[0];
    assert_eq!(c.status, "done");
    assert_eq!(c.instruction, "Replace the pricing table");
    assert_eq!(
        c.context.as_ref().and_then(|x| x.surface.as_deref()),
        Some("pricing page")
    );
    let steps: Vec<&str> = c.timeline.iter().map(|s| s.step).collect();
    assert_eq!(
        steps,
        [
            "received", "read", "claimed", "tool", "question", "answer", "result"
        ],
        "{:#?}",
        c.timeline
    );
    let read_by = &c.timeline[1];
    assert_eq!(
        read_by.connection.as_ref().map(ConnectionSlug::as_str),
        Some("claude-laptop")
    );
    assert_eq!(
        c.timeline[2]
            .connection
            .as_ref()
            .map(ConnectionSlug::as_str),
        Some("claude-laptop")
    );
    assert_eq!(
        c.timeline[6].result.as_ref().map(|r| r.summary.as_str()),
        Some("Pricing table replaced")
    );
    // The session's figures: one command opened and answered.
    let figures = env
        .service
        .activity(
            &alice,
            liaison::service::ActivityRequest {
                scope: liaison::service::ActivityScope::Session {
                    session: id.clone(),
                },
                weeks: Some(1),
                since: None,
            },
        )
        .await
        .unwrap();
    assert_eq!((figures.totals.opened, figures.totals.answered), (1, 1));
    // Nobody else can see the session or its commands.
    let bob = env.caller("bob", Scope::Human, "bob@console:1").await;
    let foreign = env
        .service
        .activity(
            &bob,
            liaison::service::ActivityRequest {
                scope: liaison::service::ActivityScope::Session {
                    session: id.clone(),
                },
                weeks: Some(1),
                since: None,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(foreign.code, ErrorCode::NotFound);
    assert_eq!(
        code_of(env.service.session(&bob, &id).await.unwrap_err()),
        ErrorCode::NotFound
    );
    assert_eq!(
        code_of(
            env.service
                .thread(&bob, &sent.thread, None, None)
                .await
                .unwrap_err()
        ),
        ErrorCode::NotFound
    );
}

#[tokio::test]
async fn join_codes_are_single_use_short_lived_and_foreign_used_or_expired_ones_look_unknown() {
    let Desk {
        env,
        alice,
        claude,
        codex,
        bob,
    } = desk().await;
    let s = env
        .service
        .open_session(&alice, with(Some("claude-laptop")))
        .await
        .unwrap();
    let id = s.session.id.clone();
    let first = env.service.new_join_code(&alice, &id).await.unwrap();
    // A new code kills the one before.
    let code = env.service.new_join_code(&alice, &id).await.unwrap();
    let unknown = |e: liaison::service::ServiceError| {
        assert_eq!(e.code, ErrorCode::NotFound, "{e}");
        e.message
    };
    let replaced = unknown(
        env.service
            .join_session(&claude, &first.code)
            .await
            .unwrap_err(),
    );

    // Codex is not the session's connection: refused, and the code is not used up.
    let other = env
        .service
        .join_session(&codex, &code.code)
        .await
        .unwrap_err();
    assert_eq!(other.code, ErrorCode::Forbidden, "{other}");
    assert!(other.message.contains("alice/claude-laptop"), "{other}");
    // Bob's connection with alice's code: as unknown as a made-up one.
    let bob_conn = {
        let human = env.caller("bob", Scope::Human, "bob@console:1").await;
        connect(&env, &human, "claude", "claude@b:2").await
    };
    let foreign = unknown(
        env.service
            .join_session(&bob_conn, &code.code)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        foreign, replaced,
        "foreign and replaced codes look the same"
    );
    let made_up = unknown(
        env.service
            .join_session(&claude, "lj-0000-0000-0000")
            .await
            .unwrap_err(),
    );
    assert_eq!(made_up, replaced);
    for garbage in [
        "",
        "hello",
        "lj-abcd",
        "lj-abcd-efgh-jkm\u{2028}",
        &"x".repeat(5000),
    ] {
        assert_eq!(
            unknown(
                env.service
                    .join_session(&claude, garbage)
                    .await
                    .unwrap_err()
            ),
            replaced
        );
    }
    // Bob's plain agent token is no connection of alice's either.
    assert!(env.service.join_session(&bob, &code.code).await.is_err());
    // An admin or human credential cannot join.
    let join_as_human = env
        .service
        .join_session(&alice, &code.code)
        .await
        .unwrap_err();
    assert_eq!(join_as_human.code, ErrorCode::Forbidden);

    // Typed again in upper case with spaces: still the code. Then used: gone.
    let retyped = format!("  {}  ", code.code.to_uppercase());
    env.service.join_session(&claude, &retyped).await.unwrap();
    assert_eq!(
        unknown(
            env.service
                .join_session(&claude, &code.code)
                .await
                .unwrap_err()
        ),
        replaced
    );

    // A code past its ten minutes is unknown.
    let late = env.service.new_join_code(&alice, &id).await.unwrap();
    env.clock.advance_secs(601);
    assert_eq!(
        unknown(
            env.service
                .join_session(&claude, &late.code)
                .await
                .unwrap_err()
        ),
        replaced
    );
    let view = env.service.session(&alice, &id).await.unwrap();
    assert_eq!(view.session.joined.len(), 1);
    assert!(view.session.code_expires_at.is_none());
}

#[tokio::test]
async fn a_command_nobody_picks_up_expires_and_leaves_every_inbox_but_a_claimed_one_never_does() {
    let Desk {
        env,
        alice,
        claude,
        codex,
        ..
    } = desk().await;
    let s = env.service.open_session(&alice, with(None)).await.unwrap();
    let id = s.session.id.clone();
    let late = env
        .service
        .command(
            &alice,
            &id,
            CommandSpec {
                expires_in_s: Some(60),
                ..command("Rotate the logs")
            },
        )
        .await
        .unwrap();
    let taken = env
        .service
        .command(
            &alice,
            &id,
            CommandSpec {
                expires_in_s: Some(60),
                ..command("Bump the version")
            },
        )
        .await
        .unwrap();
    // "Any of my agents": both her connections have both.
    assert_eq!(bodies(&env, &codex, "codex", None).await.len(), 2);
    assert_eq!(bodies(&env, &claude, "claude", None).await.len(), 2);
    env.clock.advance_secs(30);
    env.service
        .claim(
            &claude,
            ClaimTarget::Thread(taken.thread.clone()),
            ClaimAction::Claim,
            Some(10),
        )
        .await
        .unwrap();
    // Not due yet: nothing expires.
    assert_eq!(env.service.expire_commands().await.unwrap(), 0);
    env.clock.advance_secs(31);
    assert_eq!(env.service.expire_commands().await.unwrap(), 1);
    assert_eq!(env.service.expire_commands().await.unwrap(), 0, "once");

    // Withdrawn from every inbox; the claimed one stays, its lease long gone and all.
    let left = bodies(&env, &codex, "codex", None).await;
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].0, "Bump the version");
    let refused = env
        .service
        .claim(
            &codex,
            ClaimTarget::Thread(late.thread.clone()),
            ClaimAction::Claim,
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::NotClaimable);
    assert!(refused.message.contains("expired"), "{refused}");
    // The claimed command, its lease expired, can still be taken over: it never expires.
    env.service
        .claim(
            &codex,
            ClaimTarget::Thread(taken.thread.clone()),
            ClaimAction::Claim,
            None,
        )
        .await
        .unwrap();

    let view = env.service.session(&alice, &id).await.unwrap();
    let statuses: Vec<&str> = view.commands.iter().map(|c| c.status).collect();
    assert_eq!(statuses, ["expired", "working"]);
    assert_eq!(view.commands[0].timeline.last().unwrap().step, "expired");
    // Withdrawn, not forgotten: the timeline still says both agents had read it.
    let reads = view.commands[0]
        .timeline
        .iter()
        .filter(|s| s.step == "read")
        .count();
    assert_eq!(reads, 2, "{:#?}", view.commands[0].timeline);
    // Nor counted as unread anywhere.
    assert_eq!(env.service.unread(&codex, "codex").await.unwrap(), 1);

    // A claim after the deadline but before any sweep is refused and withdraws it at once.
    let raced = env
        .service
        .command(
            &alice,
            &id,
            CommandSpec {
                expires_in_s: Some(60),
                ..command("Clear the cache")
            },
        )
        .await
        .unwrap();
    env.clock.advance_secs(61);
    let refused = env
        .service
        .claim(
            &claude,
            ClaimTarget::Thread(raced.thread.clone()),
            ClaimAction::Claim,
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::NotClaimable, "{refused}");
    assert_eq!(env.service.expire_commands().await.unwrap(), 0);
    let view = env.service.session(&alice, &id).await.unwrap();
    assert_eq!(view.commands[2].status, "expired");
}

#[tokio::test]
async fn ending_a_session_ends_its_waiting_read_at_once_and_every_later_use() {
    let Desk {
        env, alice, claude, ..
    } = desk().await;
    let s = env
        .service
        .open_session(&alice, with(Some("claude-laptop")))
        .await
        .unwrap();
    let id = s.session.id.clone();
    let code = env.service.new_join_code(&alice, &id).await.unwrap();
    let joined = env.service.join_session(&claude, &code.code).await.unwrap();
    let working = env
        .service
        .command(&alice, &id, command("Run the migration"))
        .await
        .unwrap();
    env.service
        .claim(
            &claude,
            ClaimTarget::Thread(working.thread.clone()),
            ClaimAction::Claim,
            None,
        )
        .await
        .unwrap();
    let waiting_one = env
        .service
        .command(&alice, &id, command("Then vacuum"))
        .await
        .unwrap();
    // Drain what is there, then wait.
    let first = env
        .service
        .inbox(&claude, read(&joined.consumer, Some(&id), 0))
        .await
        .unwrap();
    let service = env.service.clone();
    let waiter = claude.clone();
    let mut req = read(&joined.consumer, Some(&id), 50);
    req.after = Some(first.cursor);
    let waiting = tokio::spawn(async move { service.inbox(&waiter, req).await });
    // The wait is subscribed once the waiter gauge counts it.
    for _ in 0..500 {
        if env.service.waiting().0 > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(env.service.waiting().0, 1);
    env.service.end_session(&alice, &id).await.unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the waiting read returns when the session ends, not at its deadline")
        .unwrap()
        .unwrap_err();
    assert_eq!(ended.code, ErrorCode::SessionEnded, "{ended}");

    // Every later use of the session is refused the same way, and changes nothing.
    let again = env
        .service
        .inbox(&claude, read(&joined.consumer, Some(&id), 0))
        .await
        .unwrap_err();
    assert_eq!(again.code, ErrorCode::SessionEnded);
    let reply = PostRequest {
        kind: Some("reply".parse().unwrap()),
        thread: Some(working.thread.clone()),
        body: "done".into(),
        ..Default::default()
    };
    assert_eq!(
        env.service.post(&claude, reply).await.unwrap_err().code,
        ErrorCode::SessionEnded
    );
    assert_eq!(
        env.service
            .command(&alice, &id, command("One more"))
            .await
            .unwrap_err()
            .code,
        ErrorCode::SessionEnded
    );
    assert_eq!(
        env.service
            .new_join_code(&alice, &id)
            .await
            .unwrap_err()
            .code,
        ErrorCode::SessionEnded
    );
    assert_eq!(
        env.service.end_session(&alice, &id).await.unwrap_err().code,
        ErrorCode::SessionEnded
    );
    assert_eq!(
        env.service
            .join_session(&claude, &code.code)
            .await
            .unwrap_err()
            .code,
        ErrorCode::NotFound
    );
    let view = env.service.session(&alice, &id).await.unwrap();
    assert_eq!(view.session.state, "ended");
    assert_eq!(view.commands.len(), 2);
    // The unclaimed command was withdrawn with the session; the claimed one stays as it was.
    assert_eq!(view.commands[0].status, "working");
    assert_eq!(view.commands[1].thread, waiting_one.thread);
    assert_eq!(view.commands[1].status, "expired");
    // Her own close still works: she can tidy up.
    let close = PostRequest {
        kind: Some("close".parse().unwrap()),
        thread: Some(working.thread.clone()),
        body: "Ended the session; I will finish by hand.".into(),
        ..Default::default()
    };
    env.service.post(&alice, close).await.unwrap();
}

#[tokio::test]
async fn the_sessions_connection_rights_decide_what_her_commands_may_do() {
    let Desk {
        env, alice, claude, ..
    } = desk().await;
    let id = env
        .service
        .open_session(&alice, with(Some("claude-laptop")))
        .await
        .unwrap()
        .session
        .id;
    let with_impact = |impact: Impact, text: &str| CommandSpec {
        impact: Some(impact),
        ..command(text)
    };
    // Production is off by default: refused at posting, nothing written.
    let off = env
        .service
        .command(&alice, &id, with_impact(Impact::Production, "Deploy"))
        .await
        .unwrap_err();
    assert_eq!(off.code, ErrorCode::DeniedByPolicy, "{off}");
    // Code is allowed: no approval.
    let code = env
        .service
        .command(&alice, &id, with_impact(Impact::Code, "Fix the typo"))
        .await
        .unwrap();
    assert!(code.approval.is_none());
    // Database asks her "allow once".
    let db = env
        .service
        .command(&alice, &id, with_impact(Impact::Database, "Add an index"))
        .await
        .unwrap();
    assert!(db.approval.is_some());
    let view = env.service.session(&alice, &id).await.unwrap();
    assert_eq!(view.commands.len(), 2, "the refused one wrote nothing");
    assert_eq!(view.commands[1].status, "confirmation_needed");
    assert_eq!(view.commands[1].pending_approval, db.approval);
    // Nobody decided before its pickup deadline: the command expires and its confirmation
    // leaves her queue with it.
    env.clock.advance_secs(601);
    assert_eq!(env.service.expire_commands().await.unwrap(), 2);
    let withdrawn = env
        .service
        .decide(
            &alice,
            db.approval.as_ref().unwrap(),
            liaison::domain::Decision::Allow,
            None,
            liaison::domain::DecisionPath::Api,
        )
        .await
        .unwrap_err();
    assert_eq!(withdrawn.code, ErrorCode::ApprovalDecided, "{withdrawn}");
    assert!(withdrawn.message.contains("withdrawn"), "{withdrawn}");
    // Switched to allowed, the next database command goes through without an approval.
    let mut rights = claude.connection.as_ref().unwrap().rights;
    rights.database = liaison::domain::RightLevel::Allowed;
    env.service
        .update_own_connection(
            &alice,
            &claude.token_id,
            ConnectionUpdate {
                name: None,
                rights: Some(rights),
            },
        )
        .await
        .unwrap();
    let next = env
        .service
        .command(
            &alice,
            &id,
            with_impact(Impact::Database, "Add another index"),
        )
        .await
        .unwrap();
    assert!(next.approval.is_none());
}

#[tokio::test]
async fn only_she_in_person_runs_her_sessions_and_bad_input_changes_nothing() {
    let Desk {
        env,
        alice,
        claude,
        bob,
        ..
    } = desk().await;
    // Her agent cannot open a session or write a command (that would forge her instruction).
    assert_eq!(
        env.service
            .open_session(&claude, with(None))
            .await
            .unwrap_err()
            .code,
        ErrorCode::Forbidden
    );
    let id = env
        .service
        .open_session(&alice, with(None))
        .await
        .unwrap()
        .session
        .id;
    assert_eq!(
        env.service
            .command(&claude, &id, command("do it"))
            .await
            .unwrap_err()
            .code,
        ErrorCode::Forbidden
    );
    // Bob's human token: alice's session is unknown to him, exactly like a made-up one.
    let bob_human = env.caller("bob", Scope::Human, "bob@console:1").await;
    let foreign = env.service.session(&bob_human, &id).await.unwrap_err();
    let other = SessionId::generate();
    let made_up = env.service.session(&bob_human, &other).await.unwrap_err();
    assert_eq!(foreign.code, ErrorCode::NotFound);
    assert_eq!(
        foreign.message.replace(id.as_str(), "ID"),
        made_up.message.replace(other.as_str(), "ID")
    );
    for refused in [
        env.service
            .command(&bob_human, &id, command("x"))
            .await
            .unwrap_err(),
        env.service
            .new_join_code(&bob_human, &id)
            .await
            .unwrap_err(),
        env.service.end_session(&bob_human, &id).await.unwrap_err(),
    ] {
        assert_eq!(refused.code, ErrorCode::NotFound, "{refused}");
    }
    // Bob cannot post into her personal channel either.
    let mut intrude = crate::helpers::post("announce", Some("@alice"), None, "hello");
    intrude.to = None;
    assert_eq!(
        env.service.post(&bob, intrude).await.unwrap_err().code,
        ErrorCode::NotFound
    );

    // Bad input, field by field: a clear error each, and nothing written.
    let bad_commands = [
        (
            CommandSpec {
                expires_in_s: Some(59),
                ..command("x")
            },
            "expires_in_s",
        ),
        (
            CommandSpec {
                expires_in_s: Some(86_401),
                ..command("x")
            },
            "expires_in_s",
        ),
        (
            CommandSpec {
                context: Some(CommandContext {
                    url: Some("javascript:alert(1)".into()),
                    ..Default::default()
                }),
                ..command("x")
            },
            "context.url",
        ),
        (
            CommandSpec {
                context: Some(CommandContext {
                    surface: Some("a\u{2028}b".into()),
                    ..Default::default()
                }),
                ..command("x")
            },
            "context.surface",
        ),
        (command(""), "body"),
        (command("nul \u{0} inside"), "U+0000"),
    ];
    for (spec, field) in bad_commands {
        let e = env.service.command(&alice, &id, spec).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput, "{e}");
        assert!(e.message.contains(field), "{field}: {e}");
    }
    let bad_sessions = [
        (
            SessionSpec {
                title: Some("two\nlines".into()),
                connection: None,
            },
            ErrorCode::InvalidInput,
        ),
        (
            SessionSpec {
                title: Some("x".repeat(121)),
                connection: None,
            },
            ErrorCode::InvalidInput,
        ),
        (with(Some("no-such-agent")), ErrorCode::NotFound),
    ];
    for (spec, code) in bad_sessions {
        assert_eq!(
            env.service
                .open_session(&alice, spec)
                .await
                .unwrap_err()
                .code,
            code
        );
    }
    assert_eq!(env.service.sessions(&alice).await.unwrap().len(), 1);
    assert!(
        env.service
            .session(&alice, &id)
            .await
            .unwrap()
            .commands
            .is_empty()
    );
    // Her personal channel is hers: admins cannot reshape it.
    let e = env
        .service
        .change_members(
            &env.admin,
            &liaison::domain::ChannelName::personal(&pid("alice")),
            liaison::service::MemberChange {
                add: vec![pid("bob")],
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput, "{e}");
    assert!(e.message.contains("personal channel"), "{e}");

    // At most MAX_OPEN_SESSIONS open at once.
    for _ in 1..liaison::service::MAX_OPEN_SESSIONS {
        env.service.open_session(&alice, with(None)).await.unwrap();
    }
    let e = env
        .service
        .open_session(&alice, with(None))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::TooManySessions, "{e}");
}
