//! Posting: the thread state machine through the service, and every bad input refused cleanly.

use liaison::domain::{Attachment, Impact, MAX_BODY_BYTES, Outcome, ThreadId};
use liaison::service::{ErrorCode, PostRequest};

use crate::helpers::{TestEnv, pid, post};

async fn two_members() -> (TestEnv, liaison::service::Caller, liaison::service::Caller) {
    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "codex@b:1").await;
    env.channel("demo", &["alice", "bob"]).await;
    (env, alice, bob)
}

#[tokio::test]
async fn a_conversation_moves_the_thread_through_its_states() {
    let (env, alice, bob) = two_members().await;
    let s = &env.service;
    let q = s
        .post(
            &alice,
            post(
                "question",
                Some("demo"),
                None,
                "Which port does the API use?",
            ),
        )
        .await
        .unwrap();
    assert_eq!(q.thread_state, "open");
    assert_eq!(q.recipients, vec![pid("bob")]);
    let t = q.thread.clone();
    // The asker replying to themselves does not answer the question.
    assert_eq!(
        s.post(&alice, post("reply", None, Some(&t), "Also, which host?"))
            .await
            .unwrap()
            .thread_state,
        "open"
    );
    assert_eq!(
        s.post(&bob, post("reply", None, Some(&t), "8080 on api.local"))
            .await
            .unwrap()
            .thread_state,
        "answered"
    );
    assert_eq!(
        s.post(&alice, post("announce", None, Some(&t), "thanks"))
            .await
            .unwrap()
            .thread_state,
        "answered"
    );
    assert_eq!(
        s.post(&alice, post("question", None, Some(&t), "And staging?"))
            .await
            .unwrap()
            .thread_state,
        "open"
    );
    assert_eq!(
        s.post(&bob, post("reply", None, Some(&t), "8081"))
            .await
            .unwrap()
            .thread_state,
        "answered"
    );
    let mut close = post("close", None, Some(&t), "");
    close.outcome = Some(Outcome::Done);
    assert_eq!(s.post(&alice, close).await.unwrap().thread_state, "closed");

    let err = s
        .post(&bob, post("reply", None, Some(&t), "one more thing"))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::ThreadClosed);
    let view = s.thread(&alice, &t, None, None).await.unwrap();
    assert_eq!(view.messages.len(), 7, "the refused post changed nothing");
    assert_eq!(view.thread.state.name(), "closed");
    assert!(
        view.messages
            .iter()
            .all(|m| m.message.label.text.contains("**Alice**")
                || m.message.label.text.contains("**Bob**"))
    );
}

#[tokio::test]
async fn a_retried_post_with_the_same_key_returns_the_first_result_and_creates_nothing() {
    let (env, alice, _bob) = two_members().await;
    let s = &env.service;
    let mut req = post("announce", Some("demo"), None, "deploy done");
    req.idempotency_key = Some("k-1".into());
    let first = s.post(&alice, req.clone()).await.unwrap();
    let again = s.post(&alice, req.clone()).await.unwrap();
    assert!(!first.replayed && again.replayed);
    assert_eq!(
        (first.message, first.thread.clone()),
        (again.message, again.thread)
    );
    let view = s.thread(&alice, &first.thread, None, None).await.unwrap();
    assert_eq!(view.messages.len(), 1);
    req.body = "something else".into();
    assert_eq!(
        s.post(&alice, req).await.unwrap_err().code,
        ErrorCode::IdempotencyConflict
    );
    // Neither the replay nor the refusal left a thread of its own behind (on SQLite the new
    // thread's row is written before its message's key is found used, then removed).
    let threads = s
        .channel_threads(
            &alice,
            &crate::helpers::channel("demo"),
            &liaison::service::ThreadFilter::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        threads.iter().map(|t| t.id.clone()).collect::<Vec<_>>(),
        vec![first.thread]
    );
}

#[tokio::test]
async fn concurrent_retries_with_one_key_create_one_message() {
    retries_create_one_message().await;
}

/// The same race on a multi-threaded runtime: the contenders run at once on two threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_two_threads_concurrent_retries_with_one_key_create_one_message() {
    retries_create_one_message().await;
}

async fn retries_create_one_message() {
    let (env, alice, _bob) = two_members().await;
    let mut req = post("announce", Some("demo"), None, "once");
    req.idempotency_key = Some("race".into());
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (s, a, r) = (env.service.clone(), alice.clone(), req.clone());
            tokio::spawn(async move { s.post(&a, r).await.unwrap() })
        })
        .collect();
    let mut ids = std::collections::BTreeSet::new();
    for t in tasks {
        ids.insert(t.await.unwrap().message);
    }
    assert_eq!(ids.len(), 1);
}

#[tokio::test]
async fn bad_posts_get_specific_errors_and_change_nothing() {
    let (env, alice, bob) = two_members().await;
    let s = &env.service;
    let carol = env.member("carol", "x@c:1").await;
    env.channel("other", &["carol", "bob"]).await;
    let q = s
        .post(&alice, post("question", Some("demo"), None, "hello?"))
        .await
        .unwrap();

    let cases: Vec<(&str, PostRequest, ErrorCode)> = vec![
        (
            "reply with no thread",
            post("reply", Some("demo"), None, "hi"),
            ErrorCode::ThreadRequired,
        ),
        (
            "close with no thread",
            post("close", Some("demo"), None, ""),
            ErrorCode::ThreadRequired,
        ),
        (
            "request without impact",
            post("request", Some("demo"), None, "do it"),
            ErrorCode::InvalidInput,
        ),
        (
            "impact on a question",
            PostRequest {
                impact: Some(Impact::Code),
                ..post("question", Some("demo"), None, "x")
            },
            ErrorCode::InvalidInput,
        ),
        (
            "outcome on a reply",
            PostRequest {
                outcome: Some(Outcome::Failed),
                ..post("reply", None, Some(&q.thread), "x")
            },
            ErrorCode::InvalidInput,
        ),
        (
            "oversize body",
            post(
                "announce",
                Some("demo"),
                None,
                &"x".repeat(MAX_BODY_BYTES + 1),
            ),
            ErrorCode::InvalidInput,
        ),
        (
            "empty body",
            post("announce", Some("demo"), None, "  "),
            ErrorCode::InvalidInput,
        ),
        (
            "unknown channel",
            post("announce", Some("nope"), None, "x"),
            ErrorCode::NotFound,
        ),
        (
            "channel of others",
            post("announce", Some("other"), None, "x"),
            ErrorCode::NotFound,
        ),
        (
            "non-member recipient",
            PostRequest {
                to: Some(vec![pid("carol").into()]),
                ..post("announce", Some("demo"), None, "x")
            },
            ErrorCode::InvalidInput,
        ),
        (
            "unknown thread",
            post("reply", None, Some(&ThreadId::generate()), "x"),
            ErrorCode::NotFound,
        ),
        (
            "subject on a reply",
            PostRequest {
                subject: Some("s".into()),
                ..post("reply", None, Some(&q.thread), "x")
            },
            ErrorCode::InvalidInput,
        ),
        (
            "missing kind",
            PostRequest {
                kind: None,
                ..post("announce", Some("demo"), None, "x")
            },
            ErrorCode::InvalidInput,
        ),
        (
            "oversize attachment",
            PostRequest {
                attachments: vec![Attachment::Inline {
                    filename: "a".into(),
                    media_type: "text/plain".into(),
                    data_base64: "A".repeat(8 * 1024 * 1024),
                }],
                ..post("announce", Some("demo"), None, "x")
            },
            ErrorCode::InvalidInput,
        ),
    ];
    for (what, req, code) in cases {
        let err = s.post(&alice, req).await.unwrap_err();
        assert_eq!(err.code, code, "{what}: {err}");
        assert!(!err.message.is_empty());
    }
    // Nothing reached bob's inbox but the one question.
    assert_eq!(s.unread(&bob, "t").await.unwrap(), 1);

    // A thread in a channel carol is not in looks exactly like an unknown one.
    let foreign = s.thread(&carol, &q.thread, None, None).await.unwrap_err();
    let unknown_id = ThreadId::generate();
    let unknown = s.thread(&carol, &unknown_id, None, None).await.unwrap_err();
    assert_eq!(foreign.code, unknown.code);
    assert_eq!(
        foreign.message.replace(q.thread.as_str(), "ID"),
        unknown.message.replace(unknown_id.as_str(), "ID")
    );
}

#[tokio::test]
async fn long_bodies_are_read_whole_in_slices_of_at_most_twenty_thousand_characters() {
    let (env, alice, bob) = two_members().await;
    let body: String = (0..100_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect::<String>()
        .replacen('a', "é", 10);
    let r = env
        .service
        .post(&alice, post("announce", Some("demo"), None, &body))
        .await
        .unwrap();
    let mut read = String::new();
    let mut offset = Some(0);
    while let Some(o) = offset {
        let slice = env
            .service
            .read_message(&bob, &r.message, Some(o), None)
            .await
            .unwrap();
        assert!(slice.body.chars().count() <= 20_000);
        assert_eq!(slice.total_chars, body.chars().count());
        read.push_str(&slice.body);
        offset = slice.next_offset;
    }
    assert_eq!(read, body);
}

#[tokio::test]
async fn a_thread_page_or_inbox_page_holds_at_most_twenty_thousand_characters_of_body() {
    let (env, alice, bob) = two_members().await;
    let s = &env.service;
    let big = "é".repeat(100_000);
    let first = s
        .post(&alice, post("question", Some("demo"), None, &big))
        .await
        .unwrap();
    for _ in 0..2 {
        s.post(
            &alice,
            post("announce", None, Some(&first.thread), &big[..30_000]),
        )
        .await
        .unwrap();
    }
    let view = s.thread(&bob, &first.thread, None, None).await.unwrap();
    let shown: usize = view
        .messages
        .iter()
        .map(|m| m.message.message.body.chars().count())
        .sum();
    assert_eq!(shown, liaison::service::MAX_SLICE_CHARS);
    assert!(view.messages.iter().all(|m| m.body.body_truncated));
    assert_eq!(view.messages[0].body.body_chars, 100_000);
    assert_eq!(view.messages[1].body.body_chars, 15_000);
    // The rest is read in slices.
    let slice = s
        .read_message(&bob, &first.message, Some(20_000), None)
        .await
        .unwrap();
    assert_eq!(slice.next_offset, Some(40_000));

    for _ in 0..20 {
        s.post(
            &alice,
            post("announce", None, Some(&first.thread), &big[..6_000]),
        )
        .await
        .unwrap();
    }
    let page = s
        .inbox(
            &bob,
            liaison::service::InboxRequest {
                session: None,
                consumer: "codex".into(),
                limit: Some(100),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(page.entries.len(), 23);
    let bodies = serde_json::to_value(&page).unwrap();
    let shown: usize = bodies["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["body"].as_str().unwrap().chars().count())
        .sum();
    assert_eq!(shown, liaison::service::MAX_SLICE_CHARS);
    assert!(bodies["entries"][22]["body_truncated"] == true);
    // Every cut body says what was left out and where `read_message` continues it, also a body
    // the page's budget cut to nothing.
    let first_entry = &bodies["entries"][0];
    assert_eq!(
        first_entry["body_rest"],
        serde_json::json!({ "chars_left_out": 98_000, "offset": 2_000 })
    );
    let last = &bodies["entries"][22];
    assert_eq!(last["body"], "");
    assert_eq!(
        last["body_rest"],
        serde_json::json!({ "chars_left_out": 3_000, "offset": 0 })
    );
    let rest = s
        .read_message(
            &bob,
            &liaison::domain::MessageId::parse(last["id"].as_str().unwrap()).unwrap(),
            Some(0),
            None,
        )
        .await
        .unwrap();
    assert_eq!(rest.body.chars().count(), 3_000);
    let whole: Vec<_> = view.messages.iter().map(|m| m.body.body_rest).collect();
    assert_eq!(
        whole[0],
        Some(liaison::service::BodyRest {
            chars_left_out: 80_000,
            offset: 20_000
        })
    );
    assert_eq!(
        whole[1],
        Some(liaison::service::BodyRest {
            chars_left_out: 15_000,
            offset: 0
        })
    );
}

/// A thread closed while replies to it are in flight, among other posts (some reusing one key
/// for different bodies), all at once: so in the writer's same batches, where a reply that passed
/// the service's check before the close may be refused by the store (and the posts that shared
/// its savepoint run again). The refused posts change nothing, and every accepted post is
/// written once, in order, with its inbox entries.
#[tokio::test]
async fn a_thread_closed_among_concurrent_posts_loses_none_and_writes_each_once() {
    close_among_posts().await;
}

/// The same race on a multi-threaded runtime: the contenders run at once on two threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_two_threads_a_thread_closed_among_concurrent_posts_loses_none_and_writes_each_once() {
    close_among_posts().await;
}

async fn close_among_posts() {
    let (env, alice, bob) = two_members().await;
    let s = &env.service;
    let question = s
        .post(&alice, post("question", Some("demo"), None, "closing soon"))
        .await
        .unwrap();
    let thread = question.thread.clone();
    // Each read is a new consumer, so it pages the whole inbox from its start.
    let read_inbox = |who: liaison::service::Caller, consumer: &'static str| {
        let s = s.clone();
        async move {
            let mut all = Vec::new();
            loop {
                let page = s
                    .inbox(
                        &who,
                        liaison::service::InboxRequest {
                            session: None,
                            consumer: consumer.into(),
                            after: all.last().map(|e: &liaison::service::InboxItem| e.seq),
                            limit: Some(100),
                            wait_s: None,
                        },
                    )
                    .await
                    .unwrap();
                if page.entries.is_empty() {
                    return all;
                }
                all.extend(page.entries);
            }
        }
    };
    let before = read_inbox(bob.clone(), "before").await.len();

    let tasks: Vec<_> = (0..60)
        .map(|i| {
            let (s, alice, bob, t) = (s.clone(), alice.clone(), bob.clone(), thread.clone());
            tokio::spawn(async move {
                match i {
                    20 => {
                        let mut close = post("close", None, Some(&t), "");
                        close.outcome = Some(Outcome::Done);
                        ("close", s.post(&alice, close).await.map(|o| o.message))
                    }
                    // Six posts reuse one key for different bodies: one is written, five refused.
                    i if i % 10 == 4 => {
                        let mut req = post("announce", Some("demo"), None, &format!("k{i}"));
                        req.idempotency_key = Some("reused".into());
                        ("keyed", s.post(&alice, req).await.map(|o| o.message))
                    }
                    i if i % 2 == 1 => (
                        "reply",
                        s.post(&bob, post("reply", None, Some(&t), &format!("r{i}")))
                            .await
                            .map(|o| o.message),
                    ),
                    i => (
                        "announce",
                        s.post(
                            &alice,
                            post("announce", Some("demo"), None, &format!("a{i}")),
                        )
                        .await
                        .map(|o| o.message),
                    ),
                }
            })
        })
        .collect();
    let (mut replies, mut refused, mut reused) = (0, 0, 0);
    // What bob's inbox must gain: alice's posts (his replies are his own).
    let mut for_bob = std::collections::BTreeSet::new();
    for task in tasks {
        match task.await.unwrap() {
            ("reply", Ok(_)) => replies += 1,
            ("reply", Err(e)) => {
                assert_eq!(e.code, ErrorCode::ThreadClosed, "{}", e.message);
                refused += 1;
            }
            ("keyed", Err(e)) => {
                assert_eq!(e.code, ErrorCode::IdempotencyConflict, "{}", e.message);
                reused += 1;
            }
            (_, outcome) => {
                for_bob.insert(outcome.unwrap().to_string());
            }
        }
    }
    assert_eq!((for_bob.len(), reused, replies + refused), (25, 5, 30));

    // The thread holds the question, the accepted replies and the close, at positions 1..=n.
    let view = s.thread(&alice, &thread, None, Some(100)).await.unwrap();
    let positions: Vec<i64> = view
        .messages
        .iter()
        .map(|m| m.message.message.position)
        .collect();
    assert_eq!(positions, (1..=replies as i64 + 2).collect::<Vec<_>>());
    assert_eq!(view.thread.state.name(), "closed");

    // Bob's inbox gained each of alice's posts once, in order (the numbers between are his
    // other agents' copies of his own replies, which his connection never reads: SPEC §4b).
    let entries = read_inbox(bob.clone(), "after").await;
    let new = &entries[before..];
    let seqs: Vec<i64> = new.iter().map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let got: Vec<String> = new
        .iter()
        .filter_map(|e| match &e.content {
            liaison::service::ItemContent::Message { message, .. } => {
                Some(message.message.id.to_string())
            }
            liaison::service::ItemContent::Notice { .. } => None,
        })
        .collect();
    assert_eq!(got.len(), for_bob.len(), "each once");
    assert_eq!(
        got.into_iter().collect::<std::collections::BTreeSet<_>>(),
        for_bob
    );
}

/// Posts that open threads, queued together: on PostgreSQL the writer writes such a run in one
/// statement, and undoes it to write each alone when any of them fails. Whatever the grouping,
/// each post gets the answer it would get alone: written once with its inbox entries numbered
/// without gaps in the posts' order, a key used before answered with the earlier message or
/// refused, one key sent three times at once written once, and a post to a recipient that does
/// not exist refused without writing anything. The middle round has neither of the last two (which
/// make a group fail and its posts be written alone), so its groups are written whole.
#[tokio::test]
async fn posts_opening_threads_together_get_the_answers_they_would_alone() {
    use liaison::domain::{Kind, MessageId, Timestamp};
    use liaison::store::{NewMessage, StoreError};

    let env = TestEnv::new().await;
    env.member("alice", "claude@a:1").await;
    env.member("bob", "codex@b:1").await;
    env.member("carol", "codex@c:1").await;
    env.channel("demo", &["alice", "bob", "carol"]).await;
    let store = env.service.store().clone();
    let new = |body: &str, to: &[&str], key: Option<&str>| NewMessage {
        id: MessageId::generate(),
        thread: ThreadId::generate(),
        opens_thread: true,
        channel: crate::helpers::channel("demo"),
        kind: Kind::Question,
        author: pid("alice"),
        agent: None,
        recipients: to.iter().map(|p| pid(p)).collect(),
        subject: Some(format!("about {body}")),
        body: body.to_owned(),
        attachments: Vec::new(),
        impact: None,
        outcome: None,
        refers_to: None,
        idempotency_key: key.map(str::to_owned),
        request_hash: format!("hash of {}", key.unwrap_or(body)),
        created_at: Timestamp(1_800_000_000_000),
        task: None,
        approval: None,
        remote: None,
        written_by: liaison::domain::WrittenBy::Agent,
        result: None,
        observed: None,
        fencing_token: None,
        addressing: Default::default(),
        command: None,
    };
    let earlier = store
        .post(new("earlier", &["bob"], Some("used")))
        .await
        .unwrap();

    // Every post sent, in the order sent: the inboxes must list them in this order.
    let mut sent = vec![earlier.message.id.clone()];
    for round in 0..3 {
        let mut posts = Vec::new();
        let hostile = round != 1;
        for i in 0..40 {
            let body = format!("r{round}p{i}");
            let post = match i {
                7 if hostile => new(&body, &["bob", "ghost"], None),
                11 => new("earlier", &["bob"], Some("used")),
                13 => {
                    let mut m = new(&body, &["bob"], Some("used"));
                    m.request_hash = "another request".into();
                    m
                }
                17..=19 if hostile => {
                    let mut m = new(&body, &["bob", "carol"], Some(&format!("thrice{round}")));
                    m.request_hash = format!("thrice {round}");
                    m
                }
                i if i % 3 == 0 => new(&body, &["carol"], None),
                _ => new(&body, &["bob", "carol", "bob"], None),
            };
            posts.push(post);
        }
        sent.extend(posts.iter().map(|m| m.id.clone()));
        let answers = futures::future::join_all(posts.iter().map(|m| store.post(m.clone()))).await;
        let mut thrice = std::collections::BTreeSet::new();
        for (i, (m, answer)) in posts.iter().zip(answers).enumerate() {
            match i {
                7 if hostile => assert!(
                    matches!(answer, Err(StoreError::NotFound("recipient"))),
                    "{answer:?}"
                ),
                11 => {
                    let replay = answer.unwrap();
                    assert!(replay.replayed);
                    assert_eq!(replay.message.id, earlier.message.id);
                }
                13 => assert!(
                    matches!(answer, Err(StoreError::IdempotencyMismatch)),
                    "{answer:?}"
                ),
                17..=19 if hostile => {
                    thrice.insert(answer.unwrap().message.id);
                }
                _ => {
                    let done = answer.unwrap();
                    assert!(!done.replayed);
                    assert_eq!(done.message.id, m.id);
                    assert_eq!(done.thread.id, m.thread);
                    assert_eq!(done.message.position, 1);
                }
            }
        }
        if hostile {
            assert_eq!(thrice.len(), 1, "one key sent three times is written once");
            assert!(store.message(&posts[7].id).await.unwrap().is_none());
            assert!(store.thread(&posts[7].thread).await.unwrap().is_none());
        }
        assert!(store.message(&posts[13].id).await.unwrap().is_none());
    }

    // Each inbox holds every post written for it, once, numbered 1, 2, 3… in the order the
    // posts were sent. The first and last rounds write 21 posts to bob and carol, 13 to carol
    // alone, and the key sent thrice to both; the middle one 24 to both and 14 to carol alone.
    for (person, expected) in [("bob", 1 + 2 * 22 + 24), ("carol", 2 * 35 + 38)] {
        let order: Vec<usize> = inbox_messages(&store, person)
            .await
            .iter()
            .map(|message| sent.iter().position(|id| id == message).unwrap())
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{person}: {order:?}");
        assert_eq!(order.len(), expected, "{person}");
    }
}

/// On SQLite a post's inbox entries are written by a pair of statements per recipient up to
/// eight recipients, and by one pair for all of them beyond: every count, opening a thread and
/// posting in one, reaches each recipient once, numbered without gaps; a missing recipient among
/// many writes nothing.
#[tokio::test]
async fn posts_to_any_number_of_recipients_reach_each_inbox_once_in_order() {
    use std::collections::BTreeMap;

    use liaison::domain::{Kind, MessageId, Timestamp};
    use liaison::store::{NewMessage, StoreError};

    let env = TestEnv::new().await;
    let people: Vec<String> = (0..12).map(|i| format!("p{i}")).collect();
    let mut callers = Vec::new();
    for p in &people {
        callers.push(env.member(p, &format!("agent@{p}:1")).await);
    }
    let s = &env.service;
    // Message ids each person must find in their inbox, in order.
    let mut expected: BTreeMap<String, Vec<MessageId>> = BTreeMap::new();
    for size in 2..=people.len() {
        let name = format!("wide{size}");
        let members: Vec<&str> = people[..size].iter().map(String::as_str).collect();
        env.channel(&name, &members).await;
        let question = s
            .post(
                &callers[0],
                post("question", Some(&name), None, "who is here?"),
            )
            .await
            .unwrap();
        assert_eq!(question.recipients.len(), size - 1);
        let reply = s
            .post(
                &callers[1],
                post("reply", None, Some(&question.thread), "all of us"),
            )
            .await
            .unwrap();
        assert!(!reply.recipients.is_empty());
        for receipt in [question, reply] {
            for person in &receipt.recipients {
                expected
                    .entry(person.as_str().to_owned())
                    .or_default()
                    .push(receipt.message.clone());
            }
        }
    }

    // Ten recipients, one of whom does not exist: nothing is written, no counter moves.
    let store = s.store().clone();
    let mut to: Vec<_> = people[1..10].iter().map(|p| pid(p)).collect();
    to.push(pid("ghost"));
    let ghostly = NewMessage {
        id: MessageId::generate(),
        thread: ThreadId::generate(),
        opens_thread: true,
        channel: crate::helpers::channel("wide12"),
        kind: Kind::Question,
        author: pid("p0"),
        agent: None,
        recipients: to,
        subject: None,
        body: "anyone?".into(),
        attachments: Vec::new(),
        impact: None,
        outcome: None,
        refers_to: None,
        idempotency_key: None,
        request_hash: "ghostly".into(),
        created_at: Timestamp(1_800_000_000_000),
        task: None,
        approval: None,
        remote: None,
        written_by: liaison::domain::WrittenBy::Agent,
        result: None,
        observed: None,
        fencing_token: None,
        addressing: Default::default(),
        command: None,
    };
    let refused = store.post(ghostly.clone()).await;
    assert!(
        matches!(refused, Err(StoreError::NotFound("recipient"))),
        "{refused:?}"
    );
    assert!(store.message(&ghostly.id).await.unwrap().is_none());
    assert!(store.thread(&ghostly.thread).await.unwrap().is_none());

    // One more post to everyone: its entry follows each inbox's last without a gap.
    let last = s
        .post(&callers[0], post("question", Some("wide12"), None, "last"))
        .await
        .unwrap();
    for person in &last.recipients {
        expected
            .entry(person.as_str().to_owned())
            .or_default()
            .push(last.message.clone());
    }
    assert_eq!(expected.len(), people.len());
    for (person, messages) in &expected {
        assert_eq!(&inbox_messages(&store, person).await, messages, "{person}");
    }
}

/// The messages of `person`'s inbox in order, once it is checked to be numbered 1, 2, 3… without
/// gaps and to hold only message entries.
async fn inbox_messages(
    store: &liaison::store::Store,
    person: &str,
) -> Vec<liaison::domain::MessageId> {
    let entries = store
        .inbox_entries(&pid(person), liaison::domain::PERSON_READER, 0, 1000, None)
        .await
        .unwrap();
    let seqs: Vec<i64> = entries.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=entries.len() as i64).collect::<Vec<_>>(),
        "{person}"
    );
    // Every entry of the inbox is numbered without gaps, her other agents' copies of her own
    // posts (SPEC §4b) included; those are left out of what she was sent.
    let mut sent = Vec::new();
    for e in entries {
        let message = match e.content {
            liaison::store::EntryContent::Message { message, .. } => message,
            other => panic!("{person}: {other:?}"),
        };
        if store
            .message(&message)
            .await
            .unwrap()
            .unwrap()
            .author
            .as_str()
            != person
        {
            sent.push(message);
        }
    }
    sent
}

/// Standard base64 of `n` zero bytes.
fn zeros_base64(n: usize) -> String {
    let mut s = "AAAA".repeat(n / 3);
    s.push_str(["", "AA==", "AAA="][n % 3]);
    s
}

fn inline(n_bytes: usize) -> Attachment {
    Attachment::Inline {
        filename: "a.bin".into(),
        media_type: "application/octet-stream".into(),
        data_base64: zeros_base64(n_bytes),
    }
}

/// Each message limit, at the value the server enforces (the domain's constants): a message at the
/// limit is taken, one unit over it is refused.
#[tokio::test]
async fn a_message_at_each_limit_is_taken_and_one_over_is_refused() {
    use liaison::domain::{MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS};

    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "codex@b:1").await;
    env.channel("demo", &["alice", "bob"]).await;
    let s = &env.service;
    let with = |attachments: Vec<Attachment>| PostRequest {
        attachments,
        ..post("announce", Some("demo"), None, "see attached")
    };
    let at_limit = [
        (
            "body",
            post("announce", Some("demo"), None, &"x".repeat(MAX_BODY_BYTES)),
        ),
        ("attachment size", with(vec![inline(MAX_ATTACHMENT_BYTES)])),
        ("attachment count", with(vec![inline(1); MAX_ATTACHMENTS])),
    ];
    for (what, req) in at_limit {
        s.post(&alice, req)
            .await
            .unwrap_or_else(|e| panic!("{what} at the limit: {e}"));
    }
    let over = [
        (
            "body",
            post(
                "announce",
                Some("demo"),
                None,
                &"x".repeat(MAX_BODY_BYTES + 1),
            ),
        ),
        (
            "attachment size",
            with(vec![inline(MAX_ATTACHMENT_BYTES + 1)]),
        ),
        (
            "attachment count",
            with(vec![inline(1); MAX_ATTACHMENTS + 1]),
        ),
    ];
    for (what, req) in over {
        let err = s.post(&alice, req).await.unwrap_err();
        assert_eq!(
            err.code,
            ErrorCode::InvalidInput,
            "{what} over the limit: {err}"
        );
    }
    assert_eq!(
        s.unread(&bob, "t").await.unwrap(),
        3,
        "the three at the limit only"
    );
}
