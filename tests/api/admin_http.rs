//! The admin HTTP API and CLI against a real server, and `serve --demo` as a new user runs it.

use std::process::Command;
use std::time::Duration;

use liaison::app::App;
use liaison::config::{Config, Overrides};
use tokio_util::sync::CancellationToken;

use crate::helpers::TestDb;

pub(crate) async fn spawn_app(
    db: &TestDb,
    dir: &std::path::Path,
) -> (String, String, CancellationToken) {
    spawn_app_with(db, dir, &[]).await
}

/// [`spawn_app`] with the configuration's environment variables `env`.
pub(crate) async fn spawn_app_with(
    db: &TestDb,
    dir: &std::path::Path,
    env: &[(&str, &str)],
) -> (String, String, CancellationToken) {
    let overrides = Overrides {
        data_dir: Some(dir.to_path_buf()),
        listen: Some("127.0.0.1:0".into()),
        database_url: Some(db.url.clone()),
        ..Default::default()
    };
    let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
    let config = Config::load(&overrides, env).unwrap();
    let stop = CancellationToken::new();
    let app = App::build(config, stop.clone()).await.unwrap();
    let url = app.public_url().to_owned();
    let token = app.bootstrap_token.clone().unwrap();
    tokio::spawn(app.run_until_stopped());
    (url, token, stop)
}

pub(crate) fn cli(
    url: &str,
    dir: &std::path::Path,
    args: &[&str],
) -> (bool, serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_liaison"))
        .args(args)
        .args(["--server", url, "--data-dir", dir.to_str().unwrap()])
        .env_remove("LIAISON_ADMIN_TOKEN")
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.success(),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_cli_manages_people_tokens_and_channels_on_a_running_server() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (url, _token, stop) = spawn_app(&db, dir.path()).await;
    let d = dir.path();
    let url2 = url.clone();
    let dir2 = d.to_path_buf();
    let run = move |args: Vec<&'static str>| {
        let (u, p) = (url2.clone(), dir2.clone());
        tokio::task::spawn_blocking(move || cli(&u, &p, &args))
    };
    assert!(
        run(vec!["person", "add", "alice", "--name", "Alice"])
            .await
            .unwrap()
            .0
    );
    assert!(
        run(vec!["person", "add", "bob", "--name", "Bob"])
            .await
            .unwrap()
            .0
    );
    let (ok, _, err) = run(vec!["person", "add", "alice", "--name", "Again"])
        .await
        .unwrap();
    assert!(!ok && err.contains("already_exists"), "{err}");
    let (ok, issued, _) = run(vec!["token", "issue", "alice", "--scopes", "agent"])
        .await
        .unwrap();
    assert!(ok);
    let secret = issued["token"]["secret"].as_str().unwrap().to_owned();
    let token_id = issued["token"]["id"].as_str().unwrap().to_owned();
    let (ok, channel, _) = run(vec!["channel", "add", "demo", "--members", "alice,bob"])
        .await
        .unwrap();
    assert!(ok);
    assert_eq!(channel["channel"]["policy"]["code"], "approve");
    let (ok, listed, _) = run(vec!["channel", "list", "--json"]).await.unwrap();
    assert!(ok && listed["channels"][0]["members"].as_array().unwrap().len() == 2);
    assert!(
        run(vec!["channel", "policy", "demo", "--code", "auto"])
            .await
            .unwrap()
            .0
    );
    let (ok, party, err) = run(vec!["party", "add", "acme", "--name", "Acme Inc"])
        .await
        .unwrap();
    assert!(
        ok && party["token"]["secret"]
            .as_str()
            .unwrap()
            .starts_with("lsn_")
    );
    // A party in no channel is refused everything: the answer and the CLI say so.
    assert!(
        err.contains("warning: acme is in no channel") && err.contains("party add --channel"),
        "{err}"
    );
    assert!(party["warning"].as_str().unwrap().contains("in no channel"));
    // With --channel it joins them in the same change, and no warning is given.
    let (ok, party, err) = run(vec![
        "party",
        "add",
        "globex",
        "--name",
        "Globex",
        "--channel",
        "demo",
    ])
    .await
    .unwrap();
    assert!(
        ok && party["channels"] == serde_json::json!(["demo"]),
        "{err}"
    );
    assert!(
        party.get("warning").is_none() && !err.contains("warning"),
        "{err}"
    );
    let (_, listed, _) = run(vec!["channel", "list", "--json"]).await.unwrap();
    let members: Vec<&str> = listed["channels"][0]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["person"].as_str().unwrap())
        .collect();
    assert_eq!(members, ["alice", "bob", "globex"]);
    // An unknown or repeated channel refuses the whole party: nothing is added.
    for (args, code) in [
        (vec!["--channel", "demo", "--channel", "nope"], "not_found"),
        (
            vec!["--channel", "demo", "--channel", "demo"],
            "invalid_input",
        ),
    ] {
        let mut all = vec!["party", "add", "initech", "--name", "Initech"];
        all.extend(args);
        let (ok, _, err) = run(all).await.unwrap();
        assert!(!ok && err.contains(code), "{err}");
    }
    let (_, parties, _) = run(vec!["party", "list", "--json"]).await.unwrap();
    let ids: Vec<&str> = parties["parties"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["person"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["acme", "globex"]);
    let (ok, parties, _) = run(vec!["party", "list", "--json"]).await.unwrap();
    assert!(ok && parties["parties"][0]["person"]["kind"] == "external");
    let (ok, _, err) = run(vec![
        "party",
        "add",
        "acme2",
        "--name",
        "A",
        "--default-skill",
        "nope",
    ])
    .await
    .unwrap();
    assert!(!ok && err.contains("invalid_input"), "{err}");
    let (ok, _, err) = run(vec!["channel", "members", "nope", "--add", "alice"])
        .await
        .unwrap();
    assert!(!ok && err.contains("not_found"), "{err}");

    // An agent token gets 403 on admin routes; a revoked one 401 at once.
    let http = reqwest::Client::new();
    let status = http
        .get(format!("{url}/admin/v1/persons"))
        .bearer_auth(&secret)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 403);
    let leaked: &'static str = Box::leak(token_id.into_boxed_str());
    assert!(run(vec!["token", "revoke", leaked]).await.unwrap().0);
    let response = http
        .get(format!("{url}/admin/v1/persons"))
        .bearer_auth(&secret)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "token_revoked");
    // Malformed JSON gets the API's error shape.
    let admin = std::fs::read_to_string(d.join("admin.token")).unwrap();
    let response = http
        .post(format!("{url}/admin/v1/persons"))
        .bearer_auth(admin.trim())
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(
        response.json::<serde_json::Value>().await.unwrap()["error"]["code"],
        "invalid_input"
    );
    stop.cancel();
}

/// Runs the CLI and returns (success, stdout, stderr) as text.
fn cli_text(url: &str, dir: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_liaison"))
        .args(args)
        .args(["--server", url, "--data-dir", dir.to_str().unwrap()])
        .env_remove("LIAISON_ADMIN_TOKEN")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn channel_policy_changes_only_the_named_fields_and_removed_channels_keep_their_history() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (url, _token, stop) = spawn_app(&db, dir.path()).await;
    let (u, d) = (url.clone(), dir.path().to_path_buf());
    let run = move |args: Vec<&'static str>| {
        let (u, d) = (u.clone(), d.clone());
        tokio::task::spawn_blocking(move || cli_text(&u, &d, &args))
    };
    let json = |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap();
    for args in [
        vec!["person", "add", "alice", "--name", "Alice"],
        vec!["person", "add", "bob", "--name", "Bob"],
        vec!["channel", "add", "ops", "--members", "alice,bob"],
        vec![
            "channel",
            "policy",
            "ops",
            "--production",
            "deny",
            "--approval-ttl",
            "2h",
        ],
    ] {
        let (ok, _, err) = run(args).await.unwrap();
        assert!(ok, "{err}");
    }
    // A second change names one impact: the first change stays.
    let (ok, out, err) = run(vec!["channel", "policy", "ops", "--code", "auto"])
        .await
        .unwrap();
    assert!(ok, "{err}");
    let policy = json(&out)["channel"]["policy"].clone();
    assert_eq!(policy["code"], "auto");
    assert_eq!(policy["production"], "deny");
    assert_eq!(policy["database"], "approve");
    assert_eq!(policy["approval_ttl_s"], 7_200);
    // Nothing named, a bad value, a deadline out of range: refused, nothing changed.
    for (args, expect) in [
        (vec!["channel", "policy", "ops"], "Name what to change"),
        (
            vec!["channel", "policy", "ops", "--code", "maybe"],
            "possible values",
        ),
        (
            vec!["channel", "policy", "ops", "--approval-ttl", "10s"],
            "out of range",
        ),
        (
            vec!["channel", "policy", "nope", "--code", "auto"],
            "not_found",
        ),
    ] {
        let (ok, _, err) = run(args).await.unwrap();
        assert!(!ok && err.contains(expect), "{err}");
    }
    // The table names the policy; --json is the API's answer.
    let (ok, table, _) = run(vec!["channel", "list"]).await.unwrap();
    assert!(ok);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(
        table.contains(
            "none=auto code=auto database=approve production=deny outbound=approve ttl=2h"
        ),
        "{table}"
    );
    let (_, listed, _) = run(vec!["channel", "list", "--json"]).await.unwrap();
    assert_eq!(json(&listed)["channels"][0]["policy"], policy);

    // A message before removal stays readable after it; nothing new can be posted.
    let http = reqwest::Client::new();
    let admin = std::fs::read_to_string(dir.path().join("admin.token")).unwrap();
    let issued: serde_json::Value = http
        .post(format!("{url}/admin/v1/tokens"))
        .bearer_auth(admin.trim())
        .json(&serde_json::json!({"person": "alice", "scopes": ["agent"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let alice = issued["token"]["secret"].as_str().unwrap().to_owned();
    let post = |body: serde_json::Value| {
        http.post(format!("{url}/api/v1/messages"))
            .bearer_auth(&alice)
            .json(&body)
            .send()
    };
    let posted: serde_json::Value =
        post(serde_json::json!({"kind": "announce", "channel": "ops", "body": "before"}))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let thread = posted["thread"].as_str().unwrap().to_owned();
    let (ok, out, err) = run(vec!["channel", "remove", "ops"]).await.unwrap();
    assert!(ok && json(&out)["removed"] == "ops", "{err}");
    let (ok, _, err) = run(vec!["channel", "remove", "ops"]).await.unwrap();
    assert!(!ok && err.contains("not_found"), "{err}");
    let (ok, _, err) = run(vec!["channel", "remove", "nope"]).await.unwrap();
    assert!(!ok && err.contains("not_found"), "{err}");
    let refused = post(serde_json::json!({"kind": "announce", "channel": "ops", "body": "after"}))
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let view: serde_json::Value = http
        .get(format!("{url}/api/v1/threads/{thread}"))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(view.to_string().contains("before"), "{view}");
    for args in [
        vec!["channel", "members", "ops", "--add", "bob"],
        vec!["channel", "policy", "ops", "--code", "deny"],
    ] {
        let (ok, _, err) = run(args).await.unwrap();
        assert!(!ok && err.contains("was removed"), "{err}");
    }
    let (_, listed, _) = run(vec!["channel", "list", "--json"]).await.unwrap();
    let ops = json(&listed)["channels"][0].clone();
    assert!(ops["removed_at"].is_string(), "{ops}");
    assert_eq!(ops["members"][0]["rights"], serde_json::json!(["read"]));
    // The name is never reused.
    let (ok, _, err) = run(vec!["channel", "add", "ops", "--members", "alice"])
        .await
        .unwrap();
    assert!(!ok && err.contains("already_exists"), "{err}");
    stop.cancel();
}

#[tokio::test]
async fn party_remove_revokes_the_party_and_refuses_members_and_unknown_ids() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (url, _token, stop) = spawn_app(&db, dir.path()).await;
    let (u, d) = (url.clone(), dir.path().to_path_buf());
    let run = move |args: Vec<&'static str>| {
        let (u, d) = (u.clone(), d.clone());
        tokio::task::spawn_blocking(move || cli_text(&u, &d, &args))
    };
    let (ok, _, err) = run(vec!["person", "add", "alice", "--name", "Alice"])
        .await
        .unwrap();
    assert!(ok, "{err}");
    let (ok, out, err) = run(vec!["party", "add", "acme", "--name", "Acme Inc"])
        .await
        .unwrap();
    assert!(ok, "{err}");
    let party: serde_json::Value = serde_json::from_str(&out).unwrap();
    let secret = party["token"]["secret"].as_str().unwrap().to_owned();
    let (ok, table, _) = run(vec!["party", "list"]).await.unwrap();
    assert!(
        ok && table.lines().nth(1).unwrap().starts_with("acme "),
        "{table}"
    );
    for id in ["alice", "nobody", "Not-A-Slug!"] {
        let (ok, _, err) = run(vec!["party", "remove", id]).await.unwrap();
        assert!(!ok && err.contains("not_found"), "{id}: {err}");
    }
    let (ok, _, err) = run(vec!["party", "remove", "acme"]).await.unwrap();
    assert!(ok, "{err}");
    let (_, table, _) = run(vec!["party", "list"]).await.unwrap();
    assert_eq!(table.trim(), "(none)");
    let status = reqwest::Client::new()
        .get(format!("{url}/api/v1/inbox?consumer=x"))
        .bearer_auth(&secret)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 401);
    // Removed once: a second removal is not found; alice is still there.
    let (ok, _, err) = run(vec!["party", "remove", "acme"]).await.unwrap();
    assert!(!ok && err.contains("not_found"), "{err}");
    let (_, people, _) = run(vec!["person", "list", "--json"]).await.unwrap();
    assert!(people.contains("\"alice\""));
    stop.cancel();
}

#[test]
fn the_cli_documents_itself_version_help_and_completions() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_liaison"))
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let version = run(&["--version"]);
    assert!(
        version.starts_with(&format!("liaison {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    let help = run(&["serve", "--help"]);
    for env in [
        "LIAISON_LISTEN",
        "LIAISON_DATA_DIR",
        "LIAISON_PUBLIC_URL",
        "LIAISON_DATABASE_URL",
    ] {
        assert!(help.contains(&format!("[env: {env}")), "{env}: {help}");
    }
    let help = run(&["channel", "policy", "--help"]);
    assert!(
        help.contains("[possible values: auto, approve, deny]"),
        "{help}"
    );
    assert!(help.contains("[env: LIAISON_SERVER"), "{help}");
    assert!(run(&["--help"]).contains("LIAISON_TOKEN"));
    assert!(run(&["completions", "bash"]).contains("complete -F _liaison"));
    assert!(run(&["completions", "zsh"]).starts_with("#compdef liaison"));
    assert!(run(&["completions", "fish"]).contains("complete -c liaison"));
}

#[tokio::test]
async fn serve_demo_prints_usable_tokens_and_writes_demo_json() {
    use tokio::io::AsyncBufReadExt as _;

    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_liaison"))
        .args([
            "serve",
            "--demo",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            dir.path().to_str().unwrap(),
        ])
        .args(["--database-url", &db.url])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // What it prints, up to the line that says it serves (printed once demo.json is written).
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut printed = Vec::new();
    let url = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            if let Some(rest) = line.split("liaison is serving at ").nth(1) {
                return rest.split_whitespace().next().unwrap().to_owned();
            }
            printed.push(line);
        }
        panic!("serve --demo exited without serving: {printed:?}");
    })
    .await
    .expect("serve --demo said where it serves");
    // Keep draining stdout so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = stdout.next_line().await {} });
    let token_after = |label: &str| -> String {
        let found: Vec<&str> = printed
            .iter()
            .filter_map(|l| l.split(label).nth(1))
            .map(str::trim)
            .collect();
        match found.as_slice() {
            [one] if !one.is_empty() => (*one).to_owned(),
            _ => panic!("no single {label:?} line in: {printed:#?}"),
        }
    };
    let alice_agent = token_after("alice  agent token:");
    let bob_agent = token_after("bob    agent token:");
    let partner = token_after("partner agent token:");
    let human: Vec<String> = printed
        .iter()
        .filter_map(|l| l.split("human token:").nth(1))
        .map(|t| t.trim().to_owned())
        .collect();
    let [alice_human, bob_human] = human.as_slice() else {
        panic!("two human tokens expected: {printed:#?}");
    };
    let admin = printed
        .iter()
        .position(|l| l.starts_with("Created the bootstrap admin token"))
        .and_then(|i| printed.get(i + 1))
        .map(|l| l.trim().to_owned())
        .expect("the bootstrap admin token is printed");

    // demo.json holds what was printed.
    let demo_file = dir.path().join("demo.json");
    let demo: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&demo_file).unwrap()).unwrap();
    assert_eq!(demo["url"], url.as_str());
    assert_eq!(demo["alice"]["agent_token"], alice_agent.as_str());
    assert_eq!(demo["alice"]["human_token"], alice_human.as_str());
    assert_eq!(demo["bob"]["agent_token"], bob_agent.as_str());
    assert_eq!(demo["bob"]["human_token"], bob_human.as_str());
    assert_eq!(demo["partner"]["agent_token"], partner.as_str());

    // Each printed token does what the instructions say it is for.
    let http = reqwest::Client::new();
    let status = |r: reqwest::Response| r.status().as_u16();
    assert_eq!(
        status(http.get(format!("{url}/readyz")).send().await.unwrap()),
        200
    );
    // Alice's agent posts in the demo channel; Bob's agent reads it in its inbox.
    let posted = http
        .post(format!("{url}/api/v1/messages"))
        .bearer_auth(&alice_agent)
        .json(&serde_json::json!({"kind": "question", "channel": "demo", "body": "Demo?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 200);
    let inbox: serde_json::Value = http
        .get(format!("{url}/api/v1/inbox?consumer=t"))
        .bearer_auth(&bob_agent)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(inbox["entries"][0]["body"], "Demo?", "{inbox}");
    // The human tokens list approvals (which an agent token may not).
    for token in [alice_human, bob_human] {
        let r = http
            .get(format!("{url}/api/v1/approvals?pending=true"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(status(r), 200);
    }
    let r = http
        .get(format!("{url}/api/v1/approvals?pending=true"))
        .bearer_auth(&alice_agent)
        .send()
        .await
        .unwrap();
    assert_eq!(status(r), 403);
    // The partner's token is an A2A party's.
    let r = http
        .post(format!("{url}/a2a/jsonrpc"))
        .bearer_auth(&partner)
        .header("A2A-Version", "1.0")
        .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}))
        .send()
        .await
        .unwrap();
    let listed: serde_json::Value = r.json().await.unwrap();
    assert!(listed["result"]["tasks"].is_array(), "{listed}");
    // The admin token manages the demo's people; none of the others is an admin's.
    let people: serde_json::Value = http
        .get(format!("{url}/admin/v1/persons"))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let text = people.to_string();
    for id in ["alice", "bob", "partner"] {
        assert!(text.contains(&format!("\"{id}\"")), "{id}: {text}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("admin.token"))
            .unwrap()
            .trim(),
        admin
    );
    for token in [&alice_agent, &bob_agent, alice_human, &partner] {
        let r = http
            .get(format!("{url}/admin/v1/persons"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(status(r), 403);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            std::fs::metadata(&demo_file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            std::fs::metadata(dir.path().join("admin.token"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o600
        );
    }
    child.start_kill().unwrap();
    let _ = child.wait().await;
}

/// `[a2a] card_name` names the server on its Agent Card (other liaisons label it with it); a name
/// the card could not carry refuses to start, saying which setting.
#[tokio::test]
async fn the_card_is_named_by_configuration_and_a_bad_name_refuses_to_start() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let load = |name: &str| {
        let overrides = Overrides {
            data_dir: Some(dir.path().to_path_buf()),
            listen: Some("127.0.0.1:0".into()),
            database_url: Some(db.url.clone()),
            ..Default::default()
        };
        Config::load(
            &overrides,
            [("LIAISON_A2A__CARD_NAME".to_owned(), name.to_owned())],
        )
        .unwrap()
    };
    let bad = App::build(load("Acme\u{2028}engineering"), CancellationToken::new()).await;
    let e = format!("{:#}", bad.err().expect("refused"));
    assert!(e.contains("[a2a] card_name"), "{e}");
    let stop = CancellationToken::new();
    let app = App::build(load("Acme engineering"), stop.clone())
        .await
        .unwrap();
    let url = app.public_url().to_owned();
    tokio::spawn(app.run_until_stopped());
    let card: serde_json::Value = reqwest::get(format!("{url}/.well-known/agent-card.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["name"], "Acme engineering");
    stop.cancel();
}
