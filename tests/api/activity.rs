//! Activity across channels and since a date (SPEC §11; `GET /api/v1/activity`): a seeded
//! history in three channels, on the manual clock, read per channel, across the caller's
//! channels and since a date, each figure exact; foreign channels answer like unknown ones; bad
//! input is refused with a clear error. Both backends.

use liaison::domain::{Decision, DecisionPath, Impact, Rights, Scope, Scopes, Timestamp};
use liaison::service::{
    Activity, ActivityRequest, ActivityScope, Caller, ErrorCode, MAX_ACTIVITY_WEEKS, MemberChange,
    TokenSpec, week_start,
};
use liaison::store::WEEK_MS;
use serde_json::Value;

use crate::helpers::{TestEnv, channel, pid, post};

const DAY_MS: i64 = 86_400_000;

/// A request for one channel's activity.
pub(crate) fn in_channel(name: &str, weeks: Option<u32>) -> ActivityRequest {
    ActivityRequest {
        scope: ActivityScope::Channel {
            channel: channel(name),
        },
        weeks,
        since: None,
    }
}

fn across(weeks: Option<u32>, since: Option<String>) -> ActivityRequest {
    ActivityRequest {
        scope: ActivityScope::AllChannels,
        weeks,
        since,
    }
}

/// The date part (YYYY-MM-DD) of `t`.
fn date(t: i64) -> String {
    Timestamp(t).to_rfc3339()[..10].to_owned()
}

struct Seeded {
    env: TestEnv,
    alice: Caller,
    bob: Caller,
    /// Monday 00:00 UTC of the first week of the history; the second starts a week later.
    week_a: i64,
    /// Wednesday 00:00 UTC of the second week: only `q5` (answered after 30 s) comes after it.
    wednesday: i64,
}

/// Two weeks of history. `demo` (alice, bob), `ops` (alice, carol), `secret` (bob, carol, and
/// alice without the read right).
///
/// Week A: in demo alice asks q1, bob answers after 60 s; in ops carol asks q2, alice answers
/// after 120 s and carol closes it; in secret bob asks q3, carol answers after 120 s.
/// Week B, Monday: in demo alice's request r1 is rejected by bob (closing it); in ops alice asks
/// q4, unanswered. Wednesday: in ops carol asks q5, alice answers after 30 s.
async fn seed() -> Seeded {
    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    let bob = env.member("bob", "claude@b:1").await;
    let carol = env.member("carol", "codex@c:1").await;
    let bob_human = env.caller("bob", Scope::Human, "bob@console:1").await;
    env.channel("demo", &["alice", "bob"]).await;
    env.channel("ops", &["alice", "carol"]).await;
    env.channel("secret", &["bob", "carol"]).await;
    let s = &env.service;
    s.change_members(
        &env.admin,
        &channel("secret"),
        MemberChange {
            add: vec![pid("alice")],
            rights: Some(Rights::parse("post").unwrap()),
            remove: Vec::new(),
        },
    )
    .await
    .unwrap();
    let now = liaison::clock::Clock::now(&env.clock);
    let week_a = week_start(now).0 + WEEK_MS;
    // Monday 01:00 UTC, so that nothing spills into the next week.
    env.clock.advance_secs((week_a + 3_600_000 - now.0) / 1000);
    let ask = |ch: &str, body: &str| post("question", Some(ch), None, body);

    let q1 = s.post(&alice, ask("demo", "q1")).await.unwrap();
    let q2 = s.post(&carol, ask("ops", "q2")).await.unwrap();
    let q3 = s.post(&bob, ask("secret", "q3")).await.unwrap();
    env.clock.advance_secs(60);
    s.post(&bob, post("reply", None, Some(&q1.thread), "a1"))
        .await
        .unwrap();
    env.clock.advance_secs(60);
    s.post(&alice, post("reply", None, Some(&q2.thread), "a2"))
        .await
        .unwrap();
    s.post(&carol, post("close", None, Some(&q2.thread), ""))
        .await
        .unwrap();
    s.post(&carol, post("reply", None, Some(&q3.thread), "a3"))
        .await
        .unwrap();

    let now = liaison::clock::Clock::now(&env.clock).0;
    env.clock
        .advance_secs((week_a + WEEK_MS + 3_600_000 - now) / 1000);
    let mut change = post("request", Some("demo"), None, "r1");
    change.impact = Some(Impact::Code);
    let r1 = s.post(&alice, change).await.unwrap();
    s.decide(
        &bob_human,
        &r1.approval.unwrap(),
        Decision::Reject,
        Some("not now".into()),
        DecisionPath::Console,
    )
    .await
    .unwrap();
    s.post(&alice, ask("ops", "q4")).await.unwrap();

    let wednesday = week_a + WEEK_MS + 2 * DAY_MS;
    let now = liaison::clock::Clock::now(&env.clock).0;
    env.clock.advance_secs((wednesday + 3_600_000 - now) / 1000);
    let q5 = s.post(&carol, ask("ops", "q5")).await.unwrap();
    env.clock.advance_secs(30);
    s.post(&alice, post("reply", None, Some(&q5.thread), "a5"))
        .await
        .unwrap();
    Seeded {
        env,
        alice,
        bob,
        week_a,
        wednesday,
    }
}

/// (opened, answered, closed, p50, p90, rejected, refused) of a set of figures.
type Row = (i64, i64, i64, Option<i64>, Option<i64>, i64, i64);

fn row(f: &liaison::service::ActivityFigures) -> Row {
    (
        f.opened,
        f.answered,
        f.closed,
        f.first_reply_p50_s,
        f.first_reply_p90_s,
        f.rejected,
        f.refused_requests,
    )
}

fn rows(a: &Activity) -> Vec<Row> {
    a.weeks.iter().map(|w| row(&w.figures)).collect()
}

#[tokio::test]
async fn across_channels_and_since_a_date_the_figures_add_up_exactly() {
    let seeded = seed().await;
    let (s, alice, bob) = (&seeded.env.service, &seeded.alice, &seeded.bob);
    let week_a = seeded.week_a;

    // Across her channels: demo and ops, never secret (she may post there, not read).
    let all = s.activity(alice, across(Some(2), None)).await.unwrap();
    assert_eq!(all.channels, vec![channel("demo"), channel("ops")]);
    assert_eq!(all.scope, ActivityScope::AllChannels);
    assert_eq!(all.weeks[0].start, Timestamp(week_a));
    assert_eq!(all.weeks[1].start, Timestamp(week_a + WEEK_MS));
    assert_eq!(
        rows(&all),
        vec![
            (2, 2, 1, Some(60), Some(120), 0, 0),
            (3, 1, 1, Some(30), Some(30), 1, 1),
        ]
    );
    // Without `since`, the totals are those of the weeks shown.
    assert_eq!(all.since, Timestamp(week_a));
    assert_eq!(all.until, liaison::clock::Clock::now(&seeded.env.clock));
    assert_eq!(row(&all.totals), (5, 3, 2, Some(60), Some(120), 1, 1));

    // Each channel alone; per week their counts add up to the whole.
    let demo = s
        .activity(alice, in_channel("demo", Some(2)))
        .await
        .unwrap();
    let ops = s.activity(alice, in_channel("ops", Some(2))).await.unwrap();
    assert_eq!(demo.channels, vec![channel("demo")]);
    assert_eq!(
        rows(&demo),
        vec![
            (1, 1, 0, Some(60), Some(60), 0, 0),
            (1, 0, 1, None, None, 1, 1)
        ]
    );
    assert_eq!(
        rows(&ops),
        vec![
            (1, 1, 1, Some(120), Some(120), 0, 0),
            (2, 1, 0, Some(30), Some(30), 0, 0)
        ]
    );
    for w in 0..2 {
        let (d, o, a) = (
            &demo.weeks[w].figures,
            &ops.weeks[w].figures,
            &all.weeks[w].figures,
        );
        assert_eq!(d.opened + o.opened, a.opened);
        assert_eq!(d.answered + o.answered, a.answered);
        assert_eq!(d.closed + o.closed, a.closed);
    }

    // Since Wednesday (a date): the rows start with its week, the totals hold q5 only.
    let wed = s
        .activity(alice, across(None, Some(date(seeded.wednesday))))
        .await
        .unwrap();
    assert_eq!(wed.since, Timestamp(seeded.wednesday));
    assert_eq!(wed.weeks.len(), 1);
    assert_eq!(row(&wed.totals), (1, 1, 0, Some(30), Some(30), 0, 0));
    // Since the first Monday: both weeks, and the same totals as above.
    let both = s
        .activity(alice, across(None, Some(date(week_a))))
        .await
        .unwrap();
    assert_eq!(both.weeks.len(), 2);
    assert_eq!(both.totals, all.totals);
    // An RFC 3339 time is a bound to the millisecond, inclusive: r1 was opened and rejected at
    // Monday 01:00:00 of the second week.
    let monday_one = Timestamp(week_a + WEEK_MS + 3_600_000).to_rfc3339();
    let exact = s
        .activity(alice, across(Some(1), Some(monday_one)))
        .await
        .unwrap();
    assert_eq!(row(&exact.totals), (3, 1, 1, Some(30), Some(30), 1, 1));
    // More weeks than `since` needs: rows before it, totals still from it.
    let wide = s
        .activity(alice, across(Some(4), Some(date(seeded.wednesday))))
        .await
        .unwrap();
    assert_eq!(wide.weeks.len(), 4);
    assert_eq!(wide.totals, wed.totals);

    // Bob's channels are demo and secret.
    let his = s.activity(bob, across(Some(2), None)).await.unwrap();
    assert_eq!(his.channels, vec![channel("demo"), channel("secret")]);
    assert_eq!(
        row(&his.weeks[0].figures),
        (2, 2, 0, Some(60), Some(120), 0, 0)
    );
}

#[tokio::test]
async fn foreign_channels_look_unknown_and_bad_input_is_refused_clearly() {
    let seeded = seed().await;
    let (s, alice) = (&seeded.env.service, &seeded.alice);
    let foreign = s
        .activity(alice, in_channel("secret", None))
        .await
        .unwrap_err();
    let unknown = s
        .activity(alice, in_channel("nope", None))
        .await
        .unwrap_err();
    assert_eq!(foreign.code, ErrorCode::NotFound);
    assert_eq!(unknown.code, ErrorCode::NotFound);
    assert_eq!(foreign.message.replace("secret", "nope"), unknown.message);

    let now = liaison::clock::Clock::now(&seeded.env.clock).0;
    let (tomorrow, too_old) = (date(now + DAY_MS), date(now - 367 * DAY_MS));
    let bad_since = [
        ("soon", "neither a date"),
        ("2027-02-30", "neither a date"),
        ("12/11/2026", "neither a date"),
        (tomorrow.as_str(), "in the future"),
        (too_old.as_str(), "more than 366 days ago"),
    ];
    for (since, why) in bad_since {
        for scope in [in_channel("demo", None).scope, ActivityScope::AllChannels] {
            let req = ActivityRequest {
                scope,
                weeks: None,
                since: Some(since.to_owned()),
            };
            let e = s.activity(alice, req).await.unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidInput, "{since}");
            assert!(e.message.contains(why), "{since}: {}", e.message);
        }
    }
    for weeks in [0, MAX_ACTIVITY_WEEKS + 1] {
        let e = s
            .activity(alice, across(Some(weeks), Some(date(now))))
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert!(e.message.contains("weeks"), "{}", e.message);
    }
    // A year back is the edge; the rows stop at 26 weeks, the totals do not.
    let year = s
        .activity(alice, across(None, Some(date(now - 365 * DAY_MS))))
        .await
        .unwrap();
    assert_eq!(year.weeks.len(), MAX_ACTIVITY_WEEKS as usize);
    assert_eq!(year.totals.opened, 5);
}

/// A GET on the member API, answered by the router itself (the manual clock stays in charge).
async fn get(router: &axum::Router, path: &str, token: Option<&str>) -> (u16, Value) {
    let mut request = axum::http::Request::get(path);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let request = request.body(axum::body::Body::empty()).unwrap();
    let response = tower_service::Service::call(&mut router.clone(), request)
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

#[tokio::test]
async fn api_v1_serves_the_activity_as_json_and_refuses_bad_input_in_its_error_shape() {
    let seeded = seed().await;
    let env = &seeded.env;
    let issued = env
        .service
        .issue_token(
            &env.admin,
            TokenSpec {
                person: pid("alice"),
                scopes: Scopes::default().with(Scope::Agent),
                expires_in_s: None,
                description: String::new(),
            },
        )
        .await
        .unwrap();
    let token = Some(issued.secret.as_str());
    let router = liaison::api::router(env.service.clone());

    let (status, all) = get(&router, "/api/v1/activity?weeks=2", token).await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(all["scope"], "all_channels");
    assert_eq!(all["channels"], serde_json::json!(["demo", "ops"]));
    assert!(all.get("channel").is_none(), "{all}");
    assert_eq!(all["totals"]["opened"], 5);
    assert_eq!(all["totals"]["first_reply_p90_s"], 120);
    assert_eq!(all["totals"]["refused_requests"], 1);
    let weeks = all["weeks"].as_array().unwrap();
    assert_eq!(weeks.len(), 2);
    assert_eq!(
        weeks[0]["start"],
        Timestamp(seeded.week_a).to_rfc3339().as_str()
    );
    assert_eq!(weeks[1]["opened"], 3);
    assert_eq!(weeks[1]["tasks"], serde_json::json!({}));

    let path = format!(
        "/api/v1/activity?channel=ops&since={}",
        date(seeded.wednesday)
    );
    let (status, ops) = get(&router, &path, token).await;
    assert_eq!(status, 200, "{ops}");
    assert_eq!(ops["scope"], "channel");
    assert_eq!(ops["channel"], "ops");
    assert_eq!(
        ops["since"],
        Timestamp(seeded.wednesday).to_rfc3339().as_str()
    );
    assert_eq!(ops["totals"]["opened"], 1);
    assert_eq!(ops["totals"]["first_reply_p50_s"], 30);
    // An RFC 3339 time with an offset, its `+` percent-encoded as a client sends it.
    let path = format!(
        "/api/v1/activity?since={}T01%3A00%3A00%2B01%3A00",
        date(seeded.wednesday)
    );
    let (status, offset) = get(&router, &path, token).await;
    assert_eq!(status, 200, "{offset}");
    assert_eq!(offset["since"], ops["since"]);

    // Foreign, unknown and malformed channels: one and the same 404.
    let (status, foreign) = get(&router, "/api/v1/activity?channel=secret", token).await;
    assert_eq!(status, 404);
    assert_eq!(foreign["error"]["code"], "not_found");
    for other in ["nope", "No%20Such"] {
        let (status, body) =
            get(&router, &format!("/api/v1/activity?channel={other}"), token).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (404, &Value::from("not_found")),
            "{body}"
        );
    }
    // Bad input: the API's error shape with a message that says what to send.
    for (query, says) in [
        ("since=last-week", "neither a date"),
        ("weeks=0", "weeks"),
        ("weeks=many", "weeks"),
        ("days=3", "days"),
    ] {
        let (status, body) = get(&router, &format!("/api/v1/activity?{query}"), token).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["code"], "invalid_input", "{query}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{query}: {message}");
    }
    let (status, body) = get(&router, "/api/v1/activity", None).await;
    assert_eq!(status, 401, "{body}");
}

/// A sample of the process's registry: `name{labels}`'s value (0 when absent).
fn sample(series: &str) -> u64 {
    let text = liaison::metrics::get().render(&liaison::metrics::Live::default());
    let prefix = format!("{series} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// An approval that expires counts as a decision `expired`, and the server's close of its thread
/// as a close (outcome `rejected`). The registry is the process's, shared with the tests running
/// alongside: each delta is at least this test's own (the interop suite checks the counters
/// exactly, against a server of its own).
#[tokio::test]
async fn an_expired_approval_and_its_close_are_counted_on_metrics() {
    let env = TestEnv::new().await;
    let alice = env.member("alice", "claude@a:1").await;
    env.member("bob", "claude@b:1").await;
    env.channel("demo", &["alice", "bob"]).await;
    let mut change = post("request", Some("demo"), None, "r1");
    change.impact = Some(Impact::Code);
    let series = [
        "liaison_approval_decisions_total{outcome=\"expired\"}",
        "liaison_threads_closed_total{outcome=\"rejected\"}",
        "liaison_messages_posted_total{kind=\"close\"}",
        "liaison_messages_posted_total{kind=\"request\"}",
        "liaison_threads_opened_total",
    ];
    let before: Vec<u64> = series.iter().map(|s| sample(s)).collect();
    env.service.post(&alice, change).await.unwrap();
    env.clock.advance_secs(25 * 3600);
    assert_eq!(env.service.expire_approvals().await.unwrap(), 1);
    for (s, b) in series.iter().zip(before) {
        assert!(sample(s) > b, "{s} did not move from {b}");
    }
}
