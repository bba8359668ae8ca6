//! Round-trip benchmark (not a test): the whole path a task takes through liaison, both ways,
//! against the real server process (`serve --demo` on a fresh data directory with SQLite and,
//! when `LIAISON_BENCH_PG_URL` is set, again on a fresh PostgreSQL database created on that
//! server and dropped afterwards).
//!
//! Run: `cargo bench --bench roundtrip` (add
//! `LIAISON_BENCH_PG_URL=postgres://postgres@127.0.0.1:5432/postgres`). To keep the server off the
//! load's core: `LIAISON_BENCH_SERVER_PREFIX="taskset -c 1" taskset -c 0 cargo bench --bench
//! roundtrip` (the bench, its agents and the echo agent stay on CPU 0).
//! `LIAISON_BENCH_ROUNDTRIP="inbound:16"` runs only what it names (`inbound`, `outbound`, each
//! optionally `:` a concurrency); under callgrind (`support/server.rs`) each measured cell is
//! one dump.
//!
//! 1. **Delegated (inbound).** The demo party `partner` sends blocking A2A `SendMessage`s
//!    (JSON-RPC) at 1, 16 and 64 in flight; claimer sessions of alice written on rmcp's client
//!    ([`INBOUND`]: 1, 4 and 16 sessions) long-poll `inbox`, `claim` `thread="next"` and `reply`
//!    at once, so each call returns the task COMPLETED (`support/trip.rs`, shared with section 3
//!    of `benches/mcp.rs`). Checked: every answer is a `TASK_STATE_COMPLETED` task whose
//!    artifacts hold the reply naming that task.
//! 2. **Outbound.** An echo A2A agent in this process (JSON-RPC, unsigned card, answering
//!    `SendMessage` with a COMPLETED task carrying `echo: <text>` as its artifact, at once) is
//!    registered as the remote `echo` in a channel `outbound` whose policy says `outbound =
//!    "auto"`. alice's agent posts a `question` to `echo` ([`OUTBOUND`]: 1, 16 and 64 in flight);
//!    the figure runs from the `post` call to alice's waiting `inbox` returning the reply from
//!    `echo` in that thread (outbox → A2A `SendMessage` → the remote's answer posted as a reply →
//!    wake-up). Checked: the post went to the remote without an approval, and the reply in the
//!    thread holds `echo: <the question>`. Below each row, the A2A calls the echo agent received
//!    by method (a follower's `GetTask` after a completed task would show there).
//!
//! `srv CPU µs` is the CPU time (user + system, `/proc/<pid>/stat`) of the liaison process during
//! the cell, per task; PostgreSQL's own CPU is not counted. Every cell starts with an unmeasured
//! warm-up at its concurrency.

#![allow(clippy::disallowed_methods)] // a client of the server under test

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

#[path = "support/mod.rs"]
mod support;
use support::agent::{Agent, CALL_TIMEOUT, clip, mcp_http};
use support::measure;
use support::server::{Server, print_row, random_hex};
use support::trip::{TripCell, round_trip};

/// Section 1: (A2A calls in flight, tasks measured, claimer sessions).
const INBOUND: [TripCell; 3] = [
    TripCell {
        concurrency: 1,
        tasks: 300,
        claimers: 1,
    },
    TripCell {
        concurrency: 16,
        tasks: 1_600,
        claimers: 4,
    },
    TripCell {
        concurrency: 64,
        tasks: 3_200,
        claimers: 16,
    },
];
/// Section 2: (posts in flight, posts measured).
const OUTBOUND: [(usize, usize); 3] = [(1, 200), (16, 800), (64, 1_600)];
/// Section 2: alice's sessions the posts are spread over.
const POST_SESSIONS: usize = 4;
/// The server's connection cap (the bench's connections are far fewer).
const MAX_CONNECTIONS: u64 = 1_024;
/// What the bench adds to the server's config: the echo agent is on loopback, which the SSRF
/// guard refuses unless allowed.
const EXTRA_CONFIG: &str = "[outbox]\nallow = [\"127.0.0.1\"]\n";

#[tokio::main]
async fn main() {
    liaison::net::tls::install_crypto_provider();
    run("sqlite", None).await;
    support::with_postgres(|url| async move { run("postgres", Some(&url)).await }).await;
}

/// Whether `LIAISON_BENCH_ROUNDTRIP` (e.g. `inbound:16,outbound`; unset: everything) names the
/// cell of `section` at `concurrency`.
fn chosen(section: &str, concurrency: usize) -> bool {
    let Ok(list) = std::env::var("LIAISON_BENCH_ROUNDTRIP") else {
        return true;
    };
    list.split(',')
        .any(|item| match item.trim().split_once(':') {
            Some((s, c)) => s == section && c.parse() == Ok(concurrency),
            None => item.trim() == section,
        })
}

async fn run(backend: &str, database_url: Option<&str>) {
    println!("\n=== {backend} ===");
    let server = Server::start(
        database_url,
        &random_hex(32),
        true,
        MAX_CONNECTIONS,
        EXTRA_CONFIG,
    )
    .await;
    let inbound: Vec<TripCell> = INBOUND
        .into_iter()
        .filter(|c| chosen("inbound", c.concurrency))
        .collect();
    if !inbound.is_empty() {
        println!(
            "\n[1] Delegated round trip: blocking A2A SendMessage (JSON-RPC) -> claimed and answered over MCP -> COMPLETED"
        );
        round_trip(&server, backend, &inbound).await;
        server.log_summary();
    }
    let cells: Vec<(usize, usize)> = OUTBOUND
        .into_iter()
        .filter(|&(concurrency, _)| chosen("outbound", concurrency))
        .collect();
    if !cells.is_empty() {
        println!(
            "\n[2] Outbound round trip: alice's question to a remote A2A agent (policy auto) -> its reply in alice's inbox"
        );
        let echo = EchoAgent::start().await;
        match register(&server, &echo).await {
            Ok(()) => outbound(&server, backend, &echo, &cells).await,
            Err(e) => println!("    could not register the echo agent: {e}"),
        }
        server.log_summary();
    }
    server.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Section 2

/// Channel `outbound` (alice, policy `outbound = "auto"`) and the echo agent as remote `echo` in it.
async fn register(server: &Server, echo: &EchoAgent) -> Result<(), String> {
    let admin = reqwest::Client::new();
    let call = |path: &'static str, body: Value| {
        let request = admin
            .post(format!("{}{path}", server.url))
            .bearer_auth(&server.admin_token)
            .json(&body);
        async move {
            let response = request.send().await.map_err(|e| format!("{path}: {e}"))?;
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            if status.is_success() {
                Ok(())
            } else {
                Err(format!("{path}: HTTP {status}: {text}"))
            }
        }
    };
    call(
        "/admin/v1/channels",
        json!({"name": "outbound", "members": ["alice"], "policy": {"outbound": "auto"}}),
    )
    .await?;
    call(
        "/admin/v1/remotes",
        json!({
            "name": "echo",
            "card_url": format!("{}/.well-known/agent-card.json", echo.url),
            "channels": ["outbound"],
            "allow_unsigned": true,
        }),
    )
    .await
}

/// Where a reply from `echo` goes: the post waiting for its thread's, or, when it came first,
/// the reply's body until the post asks.
enum Slot {
    Waiting(oneshot::Sender<String>),
    Arrived(String),
}

/// The replies from `echo` that alice's inbox returned, by thread.
#[derive(Default)]
struct Replies {
    slots: Mutex<HashMap<String, Slot>>,
}

impl Replies {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn arrived(&self, thread: String, body: String) {
        let mut slots = self.lock();
        match slots.remove(&thread) {
            Some(Slot::Waiting(tx)) => {
                let _ = tx.send(body);
            }
            _ => {
                slots.insert(thread, Slot::Arrived(body));
            }
        }
    }

    /// The body of the reply in `thread`, once alice's inbox returns it.
    async fn wait(&self, thread: &str) -> Result<String, String> {
        let rx = {
            let mut slots = self.lock();
            if let Some(Slot::Arrived(body)) = slots.remove(thread) {
                return Ok(body);
            }
            let (tx, rx) = oneshot::channel();
            slots.insert(thread.to_owned(), Slot::Waiting(tx));
            rx
        };
        match tokio::time::timeout(CALL_TIMEOUT, rx).await {
            Ok(Ok(body)) => Ok(body),
            _ => {
                self.lock().remove(thread);
                Err(format!("no reply in alice's inbox within {CALL_TIMEOUT:?}"))
            }
        }
    }
}

async fn outbound(server: &Server, backend: &str, echo: &EchoAgent, cells: &[(usize, usize)]) {
    println!(
        "{:8} {:>4} {:>6} {:>8} {:>8} {:>8} {:>6} {:>11}",
        "backend", "conc", "posts", "trips/s", "p50 ms", "p99 ms", "errors", "srv CPU µs"
    );
    let http = mcp_http();
    let demo = server.demo();
    let mut posters = Vec::new();
    for _ in 0..POST_SESSIONS {
        posters.push(Agent::connect(&http, &server.mcp_url(), &demo.alice.agent_token).await);
    }
    let posters = Arc::new(posters);
    let listener = Agent::connect(&http, &server.mcp_url(), &demo.alice.agent_token).await;
    let replies = Arc::new(Replies::default());
    let stop = CancellationToken::new();
    let listening = tokio::spawn(listen(listener, replies.clone(), stop.clone()));
    for &(concurrency, posts) in cells {
        let job = {
            let (posters, replies) = (posters.clone(), replies.clone());
            move |worker: usize, n: usize| {
                let (posters, replies) = (posters.clone(), replies.clone());
                async move { ask(&posters[worker % posters.len()], &replies, n).await }
            }
        };
        let warmup = measure(concurrency, (2 * concurrency).max(10), job.clone()).await;
        echo.forget_calls();
        let label = format!("{backend}-outbound-{concurrency}");
        let (cell, cpu) = server.measure_cell(&label, concurrency, posts, job).await;
        print_row(
            &format!("{backend:8} {concurrency:>4}"),
            posts,
            &warmup,
            &cell,
            &cpu,
        );
        echo.report();
    }
    stop.cancel();
    if let Ok(Ok(listener)) = tokio::time::timeout(Duration::from_secs(5), listening).await {
        listener.close().await;
    }
    if let Some(posters) = Arc::into_inner(posters) {
        for poster in posters {
            poster.close().await;
        }
    }
}

/// alice's agent asks `echo` question `n` and waits for its reply in the thread.
async fn ask(alice: &Agent, replies: &Replies, n: usize) -> Result<(), String> {
    let question = format!("outbound question {n} {}", uuid::Uuid::now_v7().simple());
    let receipt = alice
        .call(
            "post",
            json!({
                "kind": "question",
                "channel": "outbound",
                "to": ["echo"],
                "body": question,
                "idempotency_key": uuid::Uuid::now_v7().to_string(),
            }),
            CALL_TIMEOUT,
        )
        .await
        .map_err(|e| format!("post: {e}"))?;
    let thread = receipt["thread"].as_str().unwrap_or_default();
    if thread.is_empty() || receipt["remote"] != json!("echo") || receipt.get("approval").is_some()
    {
        return Err(format!(
            "not a question sent to echo at once: {}",
            clip(&receipt)
        ));
    }
    let body = replies.wait(thread).await?;
    if !body.contains(&format!("echo: {question}")) {
        return Err(format!("the reply does not echo the question: {body:.200}"));
    }
    Ok(())
}

/// alice's listening session: waits in her inbox and hands each reply from `echo` to the post
/// waiting for it. Returns the session when `stop` fires.
async fn listen(agent: Agent, replies: Arc<Replies>, stop: CancellationToken) -> Agent {
    let consumer = "outbound-listener";
    let mut cursor = agent
        .call(
            "inbox",
            json!({"consumer": consumer, "limit": 1}),
            CALL_TIMEOUT,
        )
        .await
        .ok()
        .and_then(|page| page["last"].as_i64());
    loop {
        let poll = agent.call(
            "inbox",
            json!({"consumer": consumer, "after": cursor, "wait_s": 20, "limit": 100}),
            CALL_TIMEOUT + Duration::from_secs(20),
        );
        let page = tokio::select! {
            () = stop.cancelled() => return agent,
            page = poll => page,
        };
        let Ok(page) = page else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        cursor = page["cursor"].as_i64().or(cursor);
        for entry in page["entries"].as_array().into_iter().flatten() {
            if entry["author"] == json!("echo") && entry["kind"] == json!("reply") {
                let thread = entry["thread"].as_str().unwrap_or_default().to_owned();
                let body = entry["body"].as_str().unwrap_or_default().to_owned();
                replies.arrived(thread, body);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The echo agent

/// An A2A 1.0 agent on JSON-RPC in this process that completes every `SendMessage` at once with
/// an artifact echoing the text, and counts the calls it gets by method.
struct EchoAgent {
    url: String,
    calls: Arc<Mutex<BTreeMap<String, usize>>>,
}

impl EchoAgent {
    async fn start() -> EchoAgent {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let calls = Arc::new(Mutex::new(BTreeMap::new()));
        let card = json!({
            "name": "Echo",
            "description": "Completes every task at once, echoing its text.",
            "version": "1.0.0",
            "supportedInterfaces": [
                {"url": format!("{url}/a2a"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
            "capabilities": {"streaming": false, "pushNotifications": false},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "echo", "name": "Echo", "description": "Echoes the text.", "tags": ["echo"]}],
        });
        let app = axum::Router::new()
            .route(
                "/.well-known/agent-card.json",
                get(move || std::future::ready(Json(card.clone()))),
            )
            .route("/a2a", post(echo_rpc))
            .with_state(calls.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        EchoAgent { url, calls }
    }

    fn forget_calls(&self) {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// One line: the calls received by method since the last [`EchoAgent::forget_calls`].
    fn report(&self) {
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let line: Vec<String> = calls.iter().map(|(m, n)| format!("{n} {m}")).collect();
        println!("    echo agent received: {}", line.join(", "));
    }
}

/// `SendMessage`: a COMPLETED task in the message's context whose artifact is `echo: <text>`.
/// Anything else: the A2A error "task not found" (it keeps no task).
async fn echo_rpc(
    State(calls): State<Arc<Mutex<BTreeMap<String, usize>>>>,
    Json(request): Json<Value>,
) -> Json<Value> {
    let method = request["method"].as_str().unwrap_or("?").to_owned();
    *calls
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(method.clone())
        .or_default() += 1;
    let id = request["id"].clone();
    if method != "SendMessage" {
        return Json(json!({
            "jsonrpc": "2.0", "id": id,
            "error": {"code": -32001, "message": "task not found"},
        }));
    }
    let message = &request["params"]["message"];
    let text: String = message["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect();
    let context = message["contextId"]
        .as_str()
        .map_or_else(|| uuid::Uuid::now_v7().to_string(), str::to_owned);
    Json(json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {"task": {
            "id": uuid::Uuid::now_v7().to_string(),
            "contextId": context,
            "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "echo", "parts": [{"text": format!("echo: {text}")}]}],
        }},
    }))
}
