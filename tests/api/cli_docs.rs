//! What a new user meets on the command line (issue 48): the audit log's paging ends where the
//! log ends, `person list` shows people and not the server's own voice, and a member issues her
//! own connection's token through `/api/v1/connections` with her `human` token (what `liaison
//! connect` calls), under the Connect page's rules. Over HTTP and through the real binary, on
//! both backends.

use std::process::Command;

use serde_json::{Value, json};

use crate::admin_http::spawn_app;
use crate::helpers::TestDb;

async fn send(method: &str, url: &str, token: &str, body: Option<Value>) -> (u16, Value) {
    let http = reqwest::Client::new();
    let mut r = http
        .request(method.parse().unwrap(), url)
        .bearer_auth(token);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// The binary's stdout, run with the admin token of the data directory `dir`.
fn run(url: &str, dir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_liaison"))
        .args(args)
        .args(["--server", url, "--data-dir", dir.to_str().unwrap()])
        .env_remove("LIAISON_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn the_audit_log_offers_a_next_page_only_when_one_follows() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (url, admin, stop) = spawn_app(&db, dir.path()).await;
    for id in ["alice", "bob"] {
        let (status, _) = send(
            "POST",
            &format!("{url}/admin/v1/persons"),
            &admin,
            Some(json!({"id": id, "display_name": id})),
        )
        .await;
        assert_eq!(status, 200);
    }
    // Four entries: the bootstrap's two, then the two people.
    let (_, first) = send(
        "GET",
        &format!("{url}/admin/v1/audit?limit=3"),
        &admin,
        None,
    )
    .await;
    assert_eq!(first["entries"].as_array().unwrap().len(), 3);
    let next = first["next_after"].as_i64().expect("more follows");
    assert_eq!(Some(next), first["entries"][2]["seq"].as_i64());
    let (_, last) = send(
        "GET",
        &format!("{url}/admin/v1/audit?limit=3&after={next}"),
        &admin,
        None,
    )
    .await;
    assert_eq!(last["entries"].as_array().unwrap().len(), 1);
    assert!(last["next_after"].is_null(), "{last}");
    // Exactly a page's worth: still the last page.
    let (_, exact) = send(
        "GET",
        &format!("{url}/admin/v1/audit?limit=4"),
        &admin,
        None,
    )
    .await;
    assert!(exact["next_after"].is_null(), "{exact}");

    let (u, d) = (url.clone(), dir.path().to_path_buf());
    let (whole, paged) = tokio::task::spawn_blocking(move || {
        (
            run(&u, &d, &["audit", "--limit", "100"]),
            run(&u, &d, &["audit", "--limit", "1"]),
        )
    })
    .await
    .unwrap();
    assert!(
        whole.contains("person.added") && !whole.contains("(more:"),
        "{whole}"
    );
    assert!(paged.contains("(more: --after "), "{paged}");
    stop.cancel();
}

#[tokio::test]
async fn people_lists_do_not_show_the_servers_own_voice() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (url, admin, stop) = spawn_app(&db, dir.path()).await;
    let (_, people) = send("GET", &format!("{url}/admin/v1/persons"), &admin, None).await;
    let ids: Vec<&str> = people["persons"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["id"].as_str())
        .collect();
    assert_eq!(ids, ["admin"]);
    let (u, d) = (url.clone(), dir.path().to_path_buf());
    let table = tokio::task::spawn_blocking(move || run(&u, &d, &["person", "list"]))
        .await
        .unwrap();
    assert!(table.contains("admin"), "{table}");
    assert!(
        !table.contains("liaison server") && !table.contains("1970"),
        "{table}"
    );
    stop.cancel();
}

#[tokio::test]
async fn a_member_issues_her_connections_token_with_her_human_token() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (url, admin, stop) = spawn_app(&db, dir.path()).await;
    send(
        "POST",
        &format!("{url}/admin/v1/persons"),
        &admin,
        Some(json!({"id": "alice", "display_name": "Alice"})),
    )
    .await;
    let token = |scopes: &'static str| {
        let (url, admin) = (url.clone(), admin.clone());
        async move {
            let (_, t) = send(
                "POST",
                &format!("{url}/admin/v1/tokens"),
                &admin,
                Some(json!({"person": "alice", "scopes": [scopes]})),
            )
            .await;
            t["token"]["secret"].as_str().unwrap().to_owned()
        }
    };
    let human = token("human").await;
    let agent = token("agent").await;
    let connections = format!("{url}/api/v1/connections");
    let (_, before) = send("GET", &connections, &human, None).await;
    let listed = before["connections"].as_array().unwrap().len();

    // Refused, and nothing issued: an agent token, an expiry out of range, a bad name, a field
    // the API does not know.
    let spec = json!({"name": "Claude Code", "connection": "claude-code", "expires_in_days": 30});
    let (status, _) = send("POST", &connections, &agent, Some(spec.clone())).await;
    assert_eq!(status, 403);
    for bad in [
        json!({"name": "x", "connection": "claude-code", "expires_in_days": 0}),
        json!({"name": "x", "connection": "Not A Slug", "expires_in_days": 3}),
        json!({"name": "x", "expires_in_days": 3, "scopes": ["admin"]}),
    ] {
        let (status, answer) = send("POST", &connections, &human, Some(bad.clone())).await;
        assert_eq!(status, 400, "{bad}: {answer}");
        assert_eq!(answer["error"]["code"], "invalid_input", "{answer}");
    }
    let (_, after_refusals) = send("GET", &connections, &human, None).await;
    assert_eq!(
        after_refusals["connections"].as_array().unwrap().len(),
        listed
    );

    let (status, issued) = send("POST", &connections, &human, Some(spec.clone())).await;
    assert_eq!(status, 200, "{issued}");
    let secret = issued["token"]["secret"].as_str().unwrap();
    assert!(secret.starts_with("lsn_"));
    assert_eq!(issued["token"]["connection"], "claude-code");
    assert!(issued["token"]["expires_at"].is_string());
    // The new token is an agent credential of that connection.
    let (status, _) = send(
        "GET",
        &format!("{url}/api/v1/inbox?consumer=claude-code&limit=1"),
        secret,
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (_, listed_now) = send("GET", &connections, &human, None).await;
    let rows = listed_now["connections"].as_array().unwrap();
    assert_eq!(rows.len(), listed + 1);
    assert!(
        rows.iter().all(|r| r.get("secret").is_none()),
        "{listed_now}"
    );
    // The name is unique among her live connections.
    let (status, again) = send("POST", &connections, &human, Some(spec)).await;
    assert_eq!(status, 409, "{again}");
    stop.cancel();
}
