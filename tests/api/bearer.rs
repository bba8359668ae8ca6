//! One `Authorization` parser for every front: the `Bearer` scheme in any case, separated by
//! spaces or tabs, authenticates on A2A, MCP, `/admin/v1` and `/api/v1` alike, and never counts
//! as a failed authentication; anything else is refused the same way everywhere.

use serde_json::{Value, json};

use crate::admin_http::spawn_app_with;
use crate::helpers::TestDb;

const SPELLINGS: [&str; 5] = ["Bearer", "bearer", "BEARER", "BeArEr", "bEARER"];

async fn token(
    http: &reqwest::Client,
    url: &str,
    admin: &str,
    person: &str,
    scope: &str,
) -> String {
    let r: Value = http
        .post(format!("{url}/admin/v1/tokens"))
        .bearer_auth(admin)
        .json(&json!({"person": person, "scopes": [scope]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    r["token"]["secret"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned()
}

/// The status of one request to each front with `authorization` as the header's value.
async fn statuses(
    http: &reqwest::Client,
    url: &str,
    admin: &str,
    member: &str,
    party: &str,
    scheme: &str,
    separator: &str,
) -> Vec<(&'static str, u16)> {
    let auth = |secret: &str| format!("{scheme}{separator}{secret}");
    let status = |r: reqwest::Response| r.status().as_u16();
    let admin_v1 = http
        .get(format!("{url}/admin/v1/persons"))
        .header("authorization", auth(admin))
        .send()
        .await
        .unwrap();
    let api_v1 = http
        .get(format!("{url}/api/v1/inbox?consumer=t&wait_s=0"))
        .header("authorization", auth(member))
        .send()
        .await
        .unwrap();
    let mcp = http
        .post(format!("{url}/mcp"))
        .header("authorization", auth(member))
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bearer-test", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap();
    let a2a = http
        .get(format!("{url}/a2a/rest/tasks"))
        .header("authorization", auth(party))
        .header("a2a-version", "1.0")
        .send()
        .await
        .unwrap();
    vec![
        ("/admin/v1", status(admin_v1)),
        ("/api/v1", status(api_v1)),
        ("/mcp", status(mcp)),
        ("A2A", status(a2a)),
    ]
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive_on_every_front() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    // A small budget of failures per credential: each token below is sent many more times.
    let (url, admin, stop) = spawn_app_with(
        &db,
        dir.path(),
        &[
            ("LIAISON_LIMITS__AUTH_FAILURES__PER_S", "1"),
            ("LIAISON_LIMITS__AUTH_FAILURES__BURST", "5"),
        ],
    )
    .await;
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{url}/admin/v1/persons"))
        .bearer_auth(&admin)
        .json(&json!({"id": "ana", "display_name": "Ana"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let member = token(&http, &url, &admin, "ana", "agent").await;
    let r: Value = http
        .post(format!("{url}/admin/v1/parties"))
        .bearer_auth(&admin)
        .json(&json!({"id": "acme", "display_name": "Acme"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let party = r["token"]["secret"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned();

    // More requests than the failed-authentication budget allows a credential: were any of them
    // counted as a failure, the later ones would be refused with 429.
    for scheme in SPELLINGS {
        for separator in [" ", "  ", "\t"] {
            for (front, status) in
                statuses(&http, &url, &admin, &member, &party, scheme, separator).await
            {
                assert_eq!(status, 200, "{front} with {scheme:?}{separator:?}");
            }
        }
    }
    // Not the Bearer scheme, or no credential: refused alike on every front.
    for (scheme, separator) in [("Basic", " "), ("Bearers", " "), ("Bearer", ""), ("", "")] {
        for (front, status) in
            statuses(&http, &url, &admin, &member, &party, scheme, separator).await
        {
            assert_eq!(status, 401, "{front} with {scheme:?}{separator:?}");
        }
    }
    stop.cancel();
}
