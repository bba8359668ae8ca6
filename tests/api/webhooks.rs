//! The admin's hold on webhooks, driven step by step with `deliver_next()` and a manual clock: a
//! rotated secret co-signs for its overlap (each signature checked by an HMAC computed here, per
//! Standard Webhooks), disable and enable, every dead delivery of one endpoint retried at once,
//! and the per-endpoint overview; then the same through the HTTP API and the CLI. Bad input is
//! refused with its error code and changes nothing.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use liaison::domain::delivery::{AttemptVerdict, OutboxSettings};
use liaison::keys::ring::MasterKey;
use liaison::service::{Caller, ErrorCode, Settings, WebhookSpec};
use liaison::store::{DeliveryFilter, DeliveryRecord, DeliveryState, WebhookRecord};
use liaison::workers::outbox::Worker;

use crate::helpers::{TestEnv, post, t0};
use crate::outbox::{Answer, MASTER_HEX, Received, Receiver, outbox_settings, ring, worker};

struct Setup {
    env: TestEnv,
    alice: Caller,
    worker: Worker,
}

async fn setup(outbox: OutboxSettings) -> Setup {
    let settings = Settings {
        outbox,
        ..Settings::default()
    };
    let env = TestEnv::with_master(settings, MasterKey::from_hex(MASTER_HEX).unwrap()).await;
    let alice = env.member("alice", "claude@a:1").await;
    env.channel("ops", &["alice"]).await;
    let worker = worker(&env.service, Arc::new(ring()));
    Setup { env, alice, worker }
}

impl Setup {
    /// A webhook to `url` for `events`; its record and secret.
    async fn hook(&self, url: &str, events: &[&str]) -> (WebhookRecord, String) {
        let spec = WebhookSpec {
            url: url.into(),
            events: events.iter().map(|e| (*e).to_owned()).collect(),
            ..Default::default()
        };
        self.env
            .service
            .add_webhook(&self.env.admin, spec)
            .await
            .unwrap()
    }

    async fn announce(&self, body: &str) {
        self.env
            .service
            .post(&self.alice, post("announce", Some("ops"), None, body))
            .await
            .unwrap();
    }

    async fn drain(&self) -> Vec<AttemptVerdict> {
        let mut out = Vec::new();
        while let Some(step) = self.worker.deliver_next().await.unwrap() {
            out.push(step.verdict);
        }
        out
    }

    /// A webhook.test delivered now; the request as received.
    async fn test_request(&self, hook: &str, rx: &Receiver) -> Received {
        self.env
            .service
            .test_webhook(&self.env.admin, hook)
            .await
            .unwrap();
        assert_eq!(self.drain().await, [AttemptVerdict::Delivered]);
        rx.got().pop().unwrap()
    }

    async fn of(&self, endpoint: &str, state: Option<DeliveryState>) -> Vec<DeliveryRecord> {
        let filter = DeliveryFilter {
            state,
            endpoint: Some(endpoint.to_owned()),
            limit: 100,
            ..Default::default()
        };
        let mut d = self
            .env
            .service
            .deliveries(&self.env.admin, filter)
            .await
            .unwrap();
        d.reverse();
        d
    }

    async fn webhook(&self, id: &str) -> WebhookRecord {
        let all = self.env.service.webhooks(&self.env.admin).await.unwrap();
        all.into_iter().find(|w| w.id == id).unwrap()
    }
}

/// The signatures of `webhook-signature`, in order.
fn signatures(r: &Received) -> Vec<String> {
    r.headers["webhook-signature"]
        .to_str()
        .unwrap()
        .split(' ')
        .map(str::to_owned)
        .collect()
}

/// Standard Webhooks, computed here: `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body`
/// keyed by the base64-decoded part of the secret after `whsec_`.
fn expected_signature(secret: &str, r: &Received) -> String {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap())
        .unwrap();
    let id = r.headers["webhook-id"].to_str().unwrap();
    let ts = r.headers["webhook-timestamp"].to_str().unwrap();
    let message = format!("{id}.{ts}.{}", r.raw);
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key);
    let tag = ring::hmac::sign(&key, message.as_bytes());
    format!("v1,{}", STANDARD.encode(tag.as_ref()))
}

#[tokio::test]
async fn during_a_rotation_overlap_both_secrets_sign_and_after_it_only_the_new_one() {
    let s = setup(outbox_settings()).await;
    let rx = Receiver::start().await;
    let (hook, first) = s.hook(&rx.url, &["message.created"]).await;
    assert_eq!(signatures(&s.test_request(&hook.id, &rx).await).len(), 1);

    let (second, until) = s
        .env
        .service
        .rotate_webhook_secret(&s.env.admin, &hook.id, None)
        .await
        .unwrap();
    assert!(second.starts_with("whsec_") && second != first);
    assert_eq!(until, Some(t0().plus_secs(86_400)), "24 h by default");
    assert_eq!(s.webhook(&hook.id).await.previous_until, until);
    // Listed, the webhook shows the overlap's end and never a secret, sealed or not.
    let shown =
        serde_json::to_string(&s.env.service.webhooks(&s.env.admin).await.unwrap()).unwrap();
    assert!(shown.contains("previous_until"), "{shown}");
    assert!(!shown.contains("secret"), "{shown}");

    // A delivery made during the overlap carries two signatures, the new secret's first.
    s.announce("during").await;
    assert_eq!(s.drain().await, [AttemptVerdict::Delivered]);
    let during = rx.got().pop().unwrap();
    assert_eq!(during.body["type"], "message.created");
    assert_eq!(
        signatures(&during),
        [
            expected_signature(&second, &during),
            expected_signature(&first, &during)
        ]
    );

    // A second rotation during the overlap: the one just replaced co-signs, the oldest no longer.
    s.env.clock.advance_secs(3_600);
    let (third, until) = s
        .env
        .service
        .rotate_webhook_secret(&s.env.admin, &hook.id, Some(7_200))
        .await
        .unwrap();
    assert_eq!(until, Some(t0().plus_secs(3_600 + 7_200)));
    let r = s.test_request(&hook.id, &rx).await;
    assert_eq!(
        signatures(&r),
        [
            expected_signature(&third, &r),
            expected_signature(&second, &r)
        ]
    );

    // Once the overlap ends, only the new secret signs.
    s.env.clock.advance_secs(7_200);
    let after = s.test_request(&hook.id, &rx).await;
    assert_eq!(signatures(&after), [expected_signature(&third, &after)]);

    // Without an overlap the replaced secret stops at once.
    let (fourth, until) = s
        .env
        .service
        .rotate_webhook_secret(&s.env.admin, &hook.id, Some(0))
        .await
        .unwrap();
    assert_eq!(until, None);
    assert_eq!(s.webhook(&hook.id).await.previous_until, None);
    let r = s.test_request(&hook.id, &rx).await;
    assert_eq!(signatures(&r), [expected_signature(&fourth, &r)]);
}

#[tokio::test]
async fn rotation_refuses_a_bad_overlap_or_an_unknown_webhook_and_changes_nothing() {
    let s = setup(outbox_settings()).await;
    let rx = Receiver::start().await;
    let (hook, secret) = s.hook(&rx.url, &["message.created"]).await;
    let (gone, _) = s.hook(&rx.url, &["message.created"]).await;
    s.env
        .service
        .remove_webhook(&s.env.admin, &gone.id)
        .await
        .unwrap();
    for overlap in [-1, 604_801, i64::MAX] {
        let err = s
            .env
            .service
            .rotate_webhook_secret(&s.env.admin, &hook.id, Some(overlap))
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidInput, "{overlap}");
        assert!(
            err.message.contains("between 0 and 604800"),
            "{}",
            err.message
        );
    }
    for id in ["wh_nope", gone.id.as_str()] {
        let err = s
            .env
            .service
            .rotate_webhook_secret(&s.env.admin, id, None)
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::NotFound, "{id}");
    }
    let member = s
        .env
        .service
        .rotate_webhook_secret(&s.alice, &hook.id, None)
        .await
        .unwrap_err();
    assert_eq!(member.code, ErrorCode::Forbidden);
    // The secret is the same one, alone.
    assert_eq!(s.webhook(&hook.id).await.previous_until, None);
    let r = s.test_request(&hook.id, &rx).await;
    assert_eq!(signatures(&r), [expected_signature(&secret, &r)]);
    // The longest overlap allowed is 7 days.
    let (_, until) = s
        .env
        .service
        .rotate_webhook_secret(&s.env.admin, &hook.id, Some(604_800))
        .await
        .unwrap();
    assert_eq!(until, Some(t0().plus_secs(604_800)));
}

#[tokio::test]
async fn a_disabled_webhook_gets_nothing_until_enabled_and_its_pending_deliveries_die() {
    let s = setup(outbox_settings()).await;
    let rx = Receiver::start().await;
    let (hook, _) = s.hook(&rx.url, &["message.created"]).await;
    let endpoint = format!("webhook:{}", hook.id);
    s.announce("queued").await;
    assert_eq!(s.of(&endpoint, Some(DeliveryState::Pending)).await.len(), 1);

    let disabled = s
        .env
        .service
        .set_webhook_enabled(&s.env.admin, &hook.id, false)
        .await
        .unwrap();
    assert_eq!(disabled.disabled_at, Some(t0()));
    let reason = format!("disabled by {}", s.env.admin.id());
    assert_eq!(disabled.disabled_reason.as_deref(), Some(reason.as_str()));
    let dead = s.of(&endpoint, Some(DeliveryState::Dead)).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(
        dead[0].last_error.as_deref(),
        Some("endpoint disabled by an admin")
    );
    // New events are not queued for it, and nothing reaches the receiver.
    s.announce("while disabled").await;
    assert_eq!(s.of(&endpoint, None).await.len(), 1);
    assert!(s.drain().await.is_empty());
    assert!(rx.got().is_empty());

    // Disabling it again is refused and changes nothing.
    s.env.clock.advance_secs(60);
    let err = s
        .env
        .service
        .set_webhook_enabled(&s.env.admin, &hook.id, false)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidInput);
    assert!(err.message.contains("disabled already"), "{}", err.message);
    let still = s.webhook(&hook.id).await;
    assert_eq!(still.disabled_at, Some(t0()));
    assert_eq!(still.disabled_reason.as_deref(), Some(reason.as_str()));

    // Enabled, new events flow again; the dead delivery stays dead.
    let enabled = s
        .env
        .service
        .set_webhook_enabled(&s.env.admin, &hook.id, true)
        .await
        .unwrap();
    assert_eq!(enabled.disabled_at, None);
    assert_eq!(enabled.disabled_reason, None);
    s.announce("after").await;
    assert_eq!(s.drain().await, [AttemptVerdict::Delivered]);
    let got = rx.got();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body["data"]["body"], "after");
    assert_eq!(s.of(&endpoint, Some(DeliveryState::Dead)).await.len(), 1);
    let err = s
        .env
        .service
        .set_webhook_enabled(&s.env.admin, &hook.id, true)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidInput);
    assert!(err.message.contains("not disabled"), "{}", err.message);

    // Unknown and removed webhooks are not found; members may not.
    s.env
        .service
        .remove_webhook(&s.env.admin, &hook.id)
        .await
        .unwrap();
    for enabled in [false, true] {
        for id in ["wh_nope", hook.id.as_str()] {
            let err = s
                .env
                .service
                .set_webhook_enabled(&s.env.admin, id, enabled)
                .await
                .unwrap_err();
            assert_eq!(err.code, ErrorCode::NotFound, "{id} {enabled}");
        }
    }
    let (other, _) = s.hook(&rx.url, &["message.created"]).await;
    let err = s
        .env
        .service
        .set_webhook_enabled(&s.alice, &other.id, false)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Forbidden);
    assert_eq!(s.webhook(&other.id).await.disabled_at, None);
}

#[tokio::test]
async fn retry_all_sends_every_dead_delivery_of_one_endpoint_again_and_no_others() {
    let outbox = OutboxSettings {
        disable_after: 3,
        ..outbox_settings()
    };
    let s = setup(outbox).await;
    let (a_rx, b_rx) = (Receiver::start().await, Receiver::start().await);
    a_rx.answer(&[Answer::Status(410); 3]);
    b_rx.answer(&[Answer::Status(410)]);
    let (a, _) = s.hook(&a_rx.url, &["message.created"]).await;
    let (b, _) = s.hook(&b_rx.url, &["message.created"]).await;
    let (a_end, b_end) = (format!("webhook:{}", a.id), format!("webhook:{}", b.id));
    for body in ["one", "two", "three"] {
        s.announce(body).await;
    }
    s.drain().await;
    let a_dead = s.of(&a_end, Some(DeliveryState::Dead)).await;
    assert_eq!(a_dead.len(), 3);
    assert_eq!(s.of(&b_end, Some(DeliveryState::Dead)).await.len(), 1);
    // Three dead in a row disabled A.
    let disabled = s.webhook(&a.id).await;
    assert!(disabled.disabled_at.is_some());
    assert_eq!(
        disabled.disabled_reason.as_deref(),
        Some("3 consecutive dead deliveries")
    );

    // An endpoint without a dead delivery, or unknown: refused, nothing changes.
    s.env
        .service
        .retry_endpoint(&s.env.admin, &b_end)
        .await
        .unwrap();
    s.drain().await;
    for endpoint in [b_end.as_str(), "webhook:wh_nope", ""] {
        let err = s
            .env
            .service
            .retry_endpoint(&s.env.admin, endpoint)
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidInput, "{endpoint}");
        assert!(err.message.contains("no dead delivery"), "{}", err.message);
    }
    assert_eq!(
        s.env
            .service
            .retry_endpoint(&s.alice, &a_end)
            .await
            .unwrap_err()
            .code,
        ErrorCode::Forbidden
    );
    assert_eq!(s.of(&a_end, Some(DeliveryState::Dead)).await.len(), 3);

    // Every dead one of A goes out again, in order, and A is enabled again.
    assert_eq!(
        s.env
            .service
            .retry_endpoint(&s.env.admin, &a_end)
            .await
            .unwrap(),
        3
    );
    let enabled = s.webhook(&a.id).await;
    assert_eq!((enabled.disabled_at, enabled.disabled_reason), (None, None));
    assert_eq!(s.drain().await, [AttemptVerdict::Delivered; 3]);
    let resent: Vec<String> = a_rx.got()[3..]
        .iter()
        .map(|r| r.headers["webhook-id"].to_str().unwrap().to_owned())
        .collect();
    let original: Vec<String> = a_dead.iter().map(|d| d.event_id.clone()).collect();
    assert_eq!(resent, original);
    assert_eq!(s.of(&a_end, Some(DeliveryState::Delivered)).await.len(), 3);
    // B got its one retry earlier (done) and nothing more.
    assert_eq!(b_rx.got().len(), 4);
    assert_eq!(s.of(&b_end, Some(DeliveryState::Dead)).await.len(), 0);
}

#[tokio::test]
async fn the_endpoint_overview_counts_each_endpoints_deliveries_by_state() {
    let outbox = OutboxSettings {
        disable_after: 2,
        ..outbox_settings()
    };
    let s = setup(outbox).await;
    let (a_rx, b_rx) = (Receiver::start().await, Receiver::start().await);
    // A: delivered, dead (a 4xx is permanent), failed and being retried, delivered; and one more
    // not tried yet.
    a_rx.answer(&[
        Answer::Status(200),
        Answer::Status(410),
        Answer::Status(503),
    ]);
    // B: dead twice, which disables it; the rest die with it.
    b_rx.answer(&[Answer::Status(410); 2]);
    let (a, _) = s.hook(&a_rx.url, &["message.created"]).await;
    let (b, _) = s.hook(&b_rx.url, &["message.created"]).await;
    for body in ["one", "two", "three", "four"] {
        s.announce(body).await;
    }
    s.drain().await;
    s.announce("five").await;
    assert!(
        s.env
            .service
            .endpoints(&s.alice)
            .await
            .is_err_and(|e| e.code == ErrorCode::Forbidden)
    );
    let rows = s.env.service.endpoints(&s.env.admin).await.unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    let row = |id: &str| {
        rows.iter()
            .find(|r| r.endpoint == format!("webhook:{id}"))
            .unwrap()
    };
    let ra = row(&a.id);
    assert_eq!(
        (ra.pending, ra.failed, ra.dead, ra.delivered),
        (2, 1, 1, 2),
        "{ra:?}"
    );
    assert_eq!(ra.disabled_at, None);
    assert_eq!(ra.webhook_id.as_deref(), Some(a.id.as_str()));
    assert_eq!(ra.webhook_url.as_deref(), Some(a_rx.url.as_str()));
    let rb = row(&b.id);
    assert_eq!(
        (rb.pending, rb.failed, rb.dead, rb.delivered),
        (0, 0, 4, 0),
        "{rb:?}"
    );
    assert!(rb.disabled_at.is_some());
    assert_eq!(
        rb.disabled_reason.as_deref(),
        Some("2 consecutive dead deliveries")
    );
    let json = serde_json::to_value(&rows).unwrap();
    assert!(json[0].get("failed").is_some() && json[0].get("endpoint").is_some());
}

#[tokio::test]
async fn the_http_api_and_the_cli_rotate_disable_enable_retry_and_list_endpoints() {
    let db = crate::helpers::TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (url, token, stop) = crate::admin_http::spawn_app(&db, dir.path()).await;
    let http = reqwest::Client::new();
    let call = |method: reqwest::Method, path: &str, body: Option<&str>| {
        let mut request = http
            .request(method, format!("{url}{path}"))
            .bearer_auth(&token);
        if let Some(b) = body {
            request = request
                .header("content-type", "application/json")
                .body(b.to_owned());
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let body: serde_json::Value = response.json().await.unwrap_or_default();
            (status, body)
        }
    };
    use reqwest::Method;
    // A name that never resolves: deliveries to it fail, which is all this test needs.
    let (status, added) = call(
        Method::POST,
        "/admin/v1/webhooks",
        Some(r#"{"url": "https://hooks.invalid/x", "events": ["message.created"]}"#),
    )
    .await;
    assert_eq!(status, 200, "{added}");
    let id = added["webhook"]["id"].as_str().unwrap().to_owned();
    let rotate = format!("/admin/v1/webhooks/{id}/rotate-secret");

    // Refused: unknown fields, an overlap out of range, an unknown webhook.
    for (path, body, code, status_code) in [
        (rotate.as_str(), r#"{"overlap": 60}"#, "invalid_input", 400),
        (
            rotate.as_str(),
            r#"{"overlap_s": -1}"#,
            "invalid_input",
            400,
        ),
        (
            rotate.as_str(),
            r#"{"overlap_s": 604801}"#,
            "invalid_input",
            400,
        ),
        (
            "/admin/v1/webhooks/wh_nope/rotate-secret",
            "",
            "not_found",
            404,
        ),
        (
            "/admin/v1/deliveries/retry",
            &format!(r#"{{"endpoint": "webhook:{id}", "all": true}}"#),
            "invalid_input",
            400,
        ),
        ("/admin/v1/deliveries/retry", "{}", "invalid_input", 400),
        (
            "/admin/v1/deliveries/retry",
            &format!(r#"{{"endpoint": "webhook:{id}"}}"#),
            "invalid_input",
            400,
        ),
        ("/admin/v1/webhooks/wh_nope/disable", "", "not_found", 404),
        ("/admin/v1/webhooks/wh_nope/enable", "", "not_found", 404),
        (
            &format!("/admin/v1/webhooks/{id}/enable"),
            "",
            "invalid_input",
            400,
        ),
    ] {
        let (status, answer) = call(Method::POST, path, Some(body)).await;
        assert_eq!(status, status_code, "{path} {body}: {answer}");
        assert_eq!(answer["error"]["code"], code, "{path} {body}: {answer}");
    }
    let (_, answer) = call(Method::POST, &rotate, Some(r#"{"overlap_s": 604801}"#)).await;
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("overlap_s must be between 0 and 604800"),
        "{answer}"
    );
    let (_, listed) = call(Method::GET, "/admin/v1/webhooks", None).await;
    let shown = &listed["webhooks"][0];
    assert!(shown.get("previous_until").is_none() && shown.get("disabled_at").is_none());

    // No body: the default 24 h overlap.
    let (status, rotated) = call(Method::POST, &rotate, None).await;
    assert_eq!(status, 200, "{rotated}");
    assert!(rotated["secret"].as_str().unwrap().starts_with("whsec_"));
    let until =
        chrono::DateTime::parse_from_rfc3339(rotated["previous_until"].as_str().unwrap()).unwrap();
    let ahead = until
        .signed_duration_since(chrono::Utc::now())
        .num_seconds();
    assert!((86_000..=86_400).contains(&ahead), "{ahead}");

    // The CLI: rotate with --overlap, disable, enable, retry --endpoint, endpoints.
    let (u, d) = (url.clone(), dir.path().to_path_buf());
    let run = move |args: Vec<String>| {
        let (u, d) = (u.clone(), d.clone());
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            crate::admin_http::cli(&u, &d, &args)
        })
    };
    let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let (ok, rotated, err) = run(args(&["webhook", "rotate-secret", &id, "--overlap", "1h"]))
        .await
        .unwrap();
    assert!(ok, "{err}");
    let until =
        chrono::DateTime::parse_from_rfc3339(rotated["previous_until"].as_str().unwrap()).unwrap();
    let ahead = until
        .signed_duration_since(chrono::Utc::now())
        .num_seconds();
    assert!((3_400..=3_600).contains(&ahead), "{ahead}");
    let (ok, _, err) = run(args(&["webhook", "rotate-secret", &id, "--overlap", "8d"]))
        .await
        .unwrap();
    assert!(!ok && err.contains("invalid_input"), "{err}");

    let (ok, disabled, err) = run(args(&["webhook", "disable", &id])).await.unwrap();
    assert!(ok, "{err}");
    assert_eq!(disabled["webhook"]["disabled_reason"], "disabled by admin");
    let (ok, _, err) = run(args(&["webhook", "disable", &id])).await.unwrap();
    assert!(!ok && err.contains("disabled already"), "{err}");

    let (ok, listed, _) = run(args(&["webhook", "list", "--json"])).await.unwrap();
    assert!(
        ok && listed["webhooks"][0]["disabled_at"].is_string(),
        "{listed}"
    );
    let (ok, _, err) = run(args(&["webhook", "enable", &id])).await.unwrap();
    assert!(ok, "{err}");
    let (ok, _, err) = run(args(&["webhook", "enable", &id])).await.unwrap();
    assert!(!ok && err.contains("not disabled"), "{err}");

    let endpoint = format!("webhook:{id}");
    let (ok, _, err) = run(args(&["deliveries", "retry", "--endpoint", &endpoint]))
        .await
        .unwrap();
    assert!(!ok && err.contains("no dead delivery"), "{err}");
    // A test delivery, killed by disabling the webhook, is then retried with its endpoint.
    let (status, _) = call(Method::POST, &format!("/admin/v1/webhooks/{id}/test"), None).await;
    assert_eq!(status, 200);
    let (status, _) = call(
        Method::POST,
        &format!("/admin/v1/webhooks/{id}/disable"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (ok, retried, err) = run(args(&["deliveries", "retry", "--endpoint", &endpoint]))
        .await
        .unwrap();
    assert!(ok, "{err}");
    assert_eq!(retried["retried"], 1, "{retried}");
    let (_, listed) = call(Method::GET, "/admin/v1/webhooks", None).await;
    assert!(
        listed["webhooks"][0].get("disabled_at").is_none(),
        "retrying enables it again: {listed}"
    );

    let (ok, endpoints, err) = run(args(&["deliveries", "endpoints", "--json"]))
        .await
        .unwrap();
    assert!(ok, "{err}");
    let row = &endpoints["endpoints"][0];
    assert_eq!(row["endpoint"], endpoint.as_str(), "{endpoints}");
    assert_eq!(row["webhook_id"], id.as_str());
    assert_eq!(row["webhook_url"], "https://hooks.invalid/x");
    let (ok, _, err) = run(args(&["deliveries", "endpoints"])).await.unwrap();
    assert!(ok, "{err}");
    stop.cancel();
}

#[tokio::test]
async fn every_webhook_and_delivery_change_is_audited_without_its_secret() {
    let s = setup(outbox_settings()).await;
    let svc = &s.env.service;
    let admin = &s.env.admin;
    let rx = Receiver::start().await;
    rx.answer(&[Answer::Status(410)]);
    let (hook, first) = s.hook(&rx.url, &["message.created"]).await;
    let since = svc
        .audit(admin, &liaison::service::AuditQuery::default())
        .await
        .unwrap()
        .iter()
        .find(|e| e.event == "webhook.added")
        .unwrap()
        .seq;
    let delivery = svc.test_webhook(admin, &hook.id).await.unwrap();
    s.drain().await;
    svc.retry_delivery(admin, delivery).await.unwrap();
    s.drain().await;
    let (second, until) = svc
        .rotate_webhook_secret(admin, &hook.id, Some(3_600))
        .await
        .unwrap();
    svc.set_webhook_enabled(admin, &hook.id, false)
        .await
        .unwrap();
    // A refusal (already disabled) logs nothing.
    svc.set_webhook_enabled(admin, &hook.id, false)
        .await
        .unwrap_err();
    svc.set_webhook_enabled(admin, &hook.id, true)
        .await
        .unwrap();
    svc.remove_webhook(admin, &hook.id).await.unwrap();
    let log = svc
        .audit(
            admin,
            &liaison::service::AuditQuery {
                after: Some(since - 1),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let events: Vec<&str> = log.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        events,
        [
            "webhook.added",
            "webhook.tested",
            "delivery.retried",
            "webhook.secret_rotated",
            "webhook.disabled",
            "webhook.enabled",
            "webhook.removed",
        ]
    );
    assert_eq!(log[0].after.as_ref().unwrap()["url"], rx.url.as_str());
    assert_eq!(log[1].after.as_ref().unwrap()["delivery"], delivery);
    assert_eq!(
        log[2].subject.as_deref(),
        Some(delivery.to_string().as_str())
    );
    assert_eq!(
        log[3].after.as_ref().unwrap()["previous_until"],
        serde_json::to_value(until).unwrap()
    );
    assert_eq!(
        log[4].after.as_ref().unwrap()["reason"],
        "disabled by admin"
    );
    assert_eq!(log[6].before.as_ref().unwrap()["id"], hook.id.as_str());
    let text = serde_json::to_string(&log).unwrap();
    assert!(!text.contains(&first) && !text.contains(&second));
    assert!(!text.contains(&hook.sealed_secret), "not even sealed");
}

/// Standard Webhooks receivers deduplicate on `webhook-id`, so every attempt of one delivery
/// must carry the same body: an `approval.pending` body's approval link is issued once, at the
/// first attempt, and given again at every retry, even after the approval was decided.
#[tokio::test]
async fn a_retried_approval_pending_webhook_is_byte_identical_link_included() {
    let s = setup(outbox_settings()).await;
    s.env.member("bob", "codex@b:1").await;
    s.env.channel("review", &["alice", "bob"]).await;
    let rx = Receiver::start().await;
    rx.answer(&[Answer::Status(503), Answer::Status(500)]);
    s.hook(&rx.url, &["approval.pending"]).await;
    let request = liaison::service::PostRequest {
        impact: Some(liaison::domain::Impact::Code),
        ..post("request", Some("review"), None, "Bump the TLS library")
    };
    s.env.service.post(&s.alice, request).await.unwrap();

    assert_eq!(
        s.drain().await,
        [AttemptVerdict::RetryAt(t0().plus_secs(5))]
    );
    s.env.clock.advance_secs(5);
    assert!(matches!(s.drain().await[..], [AttemptVerdict::RetryAt(_)]));
    // Decided between two attempts: the third still carries the link the first one did.
    s.env.allow_pending("bob").await;
    s.env.clock.advance_secs(30);
    assert_eq!(s.drain().await, [AttemptVerdict::Delivered]);

    let got = rx.got();
    assert_eq!(got.len(), 3);
    let link = &got[0].body["data"]["approval_link"];
    assert!(
        link["url"].as_str().unwrap().contains("/console/"),
        "{link}"
    );
    assert_eq!(link["for"], "bob");
    for retry in &got[1..] {
        assert_eq!(retry.raw, got[0].raw, "the same bytes at every attempt");
        assert_eq!(retry.headers["webhook-id"], got[0].headers["webhook-id"]);
    }
}
