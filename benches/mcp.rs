//! MCP front benchmark (not a test): what agents feel through `/mcp`, measured with rmcp's own
//! client (legacy `initialize` sessions, protocol 2025-11-25, as Claude Code and Codex connect)
//! against the real server process: the `liaison` binary runs `serve --demo` on a fresh data
//! directory with SQLite and, when `LIAISON_BENCH_PG_URL` is set, again on a fresh PostgreSQL
//! database (created on that server and dropped afterwards).
//!
//! Run: `cargo bench --bench mcp` (add `LIAISON_BENCH_PG_URL=postgres://postgres@127.0.0.1:5432/postgres`;
//! `LIAISON_BENCH_MCP_SECTIONS=1,3` runs only those sections, each on a fresh server). The
//! server's log (warnings and errors) goes to a file; each section ends with a summary of it.
//! The flood holds about 10,600 connections open on each side: the bench raises its own
//! `RLIMIT_NOFILE` soft limit to the hard one at start (the server inherits it) and says so when
//! the hard limit is too low; then raise it first (`ulimit -Hn 30000`, as root) or expect the
//! flood to stop short and say where.
//!
//! Sections, each with its own table, every response checked (failures are counted in the table
//! and their messages printed below it):
//!
//! 1. **`post` throughput.** Demo agents post `announce`s in the demo channel (alice's to bob,
//!    bob's to alice; a fresh idempotency key each), with 1 and with 64 tool calls in flight,
//!    spread over [`POST_SESSIONS`] sessions (alice and bob alternately). Each cell starts with a
//!    short unmeasured warm-up at the same concurrency. Checked: a receipt with a message id,
//!    not replayed, addressed to the other member. posts/s, p50/p99 of the call, and the server's
//!    CPU per post.
//! 2. **Long-poll wake-up.** bob waits in `inbox` (`wait_s` 30), 50 ms later alice posts to bob;
//!    the figure is alice's `post` call returned → bob's `inbox` call returned (negative when the
//!    wake-up reached bob before the post's answer reached alice), over [`WAKE_SAMPLES`] samples,
//!    with the post call itself and post start → wake-up beside it. On one node (each backend),
//!    and on PostgreSQL across two replicas: a second `liaison serve` on the same database with
//!    the same `LIAISON_MASTER_KEY`, bob waiting on replica 2 while alice posts on replica 1 (the
//!    wake-up crosses through `LISTEN/NOTIFY`). Checked: bob's page holds exactly alice's message.
//! 3. **Delegated round trip** (`support/trip.rs`, which `cargo bench --bench roundtrip` runs at
//!    1, 16 and 64 in flight beside the outbound direction): the demo party `partner`'s blocking
//!    A2A `SendMessage` answered over MCP by claimer sessions of alice ([`TRIP_CELLS`]), at 1, 8
//!    and 32 concurrent A2A clients; tasks/s, p50/p99 and the server's CPU per task. Checked:
//!    every answer is a `TASK_STATE_COMPLETED` task whose artifacts hold the reply naming it.
//! 4. **Long-poll flood.** [`FLOOD_PEOPLE`] people (created through the admin API), one MCP
//!    session each, each session holding [`FLOOD_POLLS_PER_SESSION`] `inbox` long-polls
//!    (`wait_s` 50, re-issued when one ends): 10,000 in all, over as many HTTP/1.1 connections
//!    (plus one GET stream per session). The server's `liaison_inbox_waiters` gauge (`/metrics`)
//!    says when they all wait; then the server's RSS (`VmRSS`) is read and alice posts
//!    [`FLOOD_POSTS`] times to bob, one at a time, beside the same posts just before the flood.
//!    The flood stays under the default per-person limits (32 waiters per person, 16 sessions per
//!    token); the bench config lifts the connection cap and the rate limits (below). Then the
//!    flood is released (each call dropped, which sends `notifications/cancelled`, and each
//!    session ended with DELETE), and the bench waits (at most 70 s) for the gauge to reach 0.
//! 5. **RSS.** The server's `VmRSS` after startup, after each section, after the flood's release
//!    and once no long-poll is left waiting, and its peak (`VmHWM`).
//! 6. **The HTTP floor under the flood.** Not liaison: this bench's own binary started again as a
//!    bare hyper server (hyper-util's `auto` builder with liaison's HTTP/1.1 buffer bound, as
//!    liaison's listener; mimalloc, as liaison) whose one route answers a POST ten minutes later, and as many connections as the
//!    flood's long-polls, each sending one POST with the head and body of a flood `inbox` call.
//!    Its RSS before and once every POST is waiting (its `GET` says how many): what the HTTP
//!    server alone holds per waiting request, under whatever liaison and rmcp add. Run once,
//!    after the backends.
//!
//! The bench config file (in the data directory) lifts what a single load generator would hit
//! and a real deployment would not: the per-token rate limits (`[limits] agent`, `human`,
//! `admin`, `external`: `per_s = 0`, unlimited; 64 posts in flight from four sessions of two
//! people exceed the agent's 200/s) and `[server] max_connections` (512 by default; set to the
//! file-descriptor limit minus 200 for the flood), and `max_connections_per_address` with it
//! (every connection of the bench comes from loopback; by default one address gets an eighth of
//! the cap, which stopped the flood at about 2,500 connections). `[inbox]
//! max_waiters_per_person` (32) and `[mcp] sessions_per_token` (16) keep their defaults.
//!
//! `srv CPU µs` is the CPU time (user + system, from `/proc/<pid>/stat`) the liaison process
//! spent during the cell, divided by its operations; PostgreSQL's own CPU is not counted. Client
//! and server share the machine's cores, so on a small machine the rates are lower bounds.

#![allow(clippy::disallowed_methods)] // a client of the server under test

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

#[path = "support/mod.rs"]
mod support;
use support::agent::{Agent, CALL_TIMEOUT, clip, close_all, mcp_http};
use support::server::{Memory, Server, memory_of, print_row, random_hex};
use support::trip::TripCell;
use support::{Outcome, measure, percentile};

/// Section 1: posts measured per cell, by tool calls in flight.
const POST_CELLS: [(usize, usize); 2] = [(1, 300), (64, 3_000)];
/// Section 1: MCP sessions the posts are spread over (alice and bob alternately).
const POST_SESSIONS: usize = 4;
/// Section 2: wake-ups measured (after [`WAKE_WARMUP`] unmeasured ones).
const WAKE_SAMPLES: usize = 200;
const WAKE_WARMUP: usize = 10;
/// Section 2: time for bob's long-poll to reach the server before alice posts.
const WAKE_HEAD_START: Duration = Duration::from_millis(50);
/// Section 3: (concurrent A2A clients, tasks measured, alice's MCP sessions claiming them).
const TRIP_CELLS: [TripCell; 4] = [
    trip(1, 100, 1),
    trip(8, 400, 4),
    trip(32, 640, 4),
    trip(32, 640, 8),
];
/// Section 4: people, one MCP session each, each session holding this many long-polls.
const FLOOD_PEOPLE: usize = 400;
const FLOOD_POLLS_PER_SESSION: usize = 25;
/// Section 4: long-polls started per second while the flood builds up.
const FLOOD_RAMP_PER_S: usize = 1_000;
/// Section 4: posts measured before and during the flood, one at a time.
const FLOOD_POSTS: usize = 200;
/// The allocator liaison's binary uses, so that section 6's bare server is measured like it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Set in the environment of this bench's binary started again as section 6's bare server.
const FLOOR_SERVER_ENV: &str = "LIAISON_BENCH_FLOOR_SERVER";

#[tokio::main]
async fn main() {
    if std::env::var_os(FLOOR_SERVER_ENV).is_some() {
        return floor::serve().await;
    }
    liaison::net::tls::install_crypto_provider();
    let files = raise_file_limit();
    println!("open files: soft limit {files} (the server inherits it)");
    let sections = sections();
    if sections.iter().any(|s| (1..=4).contains(s)) {
        run("sqlite", None, files).await;
        support::with_postgres(|url| async move { run("postgres", Some(&url), files).await }).await;
    }
    if sections.contains(&6) {
        floor::measure().await;
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns the soft limit in force.
fn raise_file_limit() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum
        && setrlimit(
            Resource::Nofile,
            rustix::process::Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            },
        )
        .is_err()
    {
        println!("could not raise the open-file limit to its hard limit");
    }
    getrlimit(Resource::Nofile).current.unwrap_or(1 << 20)
}

/// The sections to run: `LIAISON_BENCH_MCP_SECTIONS` (e.g. `1,3`), by default all (the memory
/// table, 5, is printed whenever one of 1 to 4 runs).
fn sections() -> Vec<u32> {
    std::env::var("LIAISON_BENCH_MCP_SECTIONS").map_or_else(
        |_| vec![1, 2, 3, 4, 6],
        |list| {
            list.split(',')
                .filter_map(|s| s.trim().parse().ok())
                .collect()
        },
    )
}

async fn run(backend: &str, database_url: Option<&str>, files: u64) {
    println!("\n=== {backend} ===");
    let master_key = random_hex(32);
    let server = Server::start(database_url, &master_key, true, files, "").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut rss = vec![("after startup", server.memory())];
    let sections = sections();

    if sections.contains(&1) {
        post_throughput(&server, backend).await;
        server.log_summary();
        rss.push(("after section 1", server.memory()));
    }
    if sections.contains(&2) {
        wake_ups(&server, backend, database_url, &master_key, files).await;
        server.log_summary();
        rss.push(("after section 2", server.memory()));
    }
    if sections.contains(&3) {
        println!(
            "\n[3] Delegated round trip: blocking A2A SendMessage (JSON-RPC) answered over MCP by claimer sessions of alice"
        );
        support::trip::round_trip(&server, backend, &TRIP_CELLS).await;
        server.log_summary();
        rss.push(("after section 3", server.memory()));
    }
    if sections.contains(&4) {
        flood(&server, backend, &mut rss).await;
        server.log_summary();
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    rss.push(("end (2 s later)", server.memory()));

    println!("\n[5] Server memory");
    println!(
        "{:8} {:28} {:>9} {:>13}",
        "backend", "when", "RSS MiB", "peak RSS MiB"
    );
    for (when, memory) in &rss {
        let (now, peak) = memory.map_or(("-".into(), "-".into()), |(rss, hwm)| {
            (
                format!("{:.1}", rss / 1024.0),
                format!("{:.1}", hwm / 1024.0),
            )
        });
        println!("{backend:8} {when:28} {now:>9} {peak:>13}");
    }
    server.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Section 1

async fn post_throughput(server: &Server, backend: &str) {
    println!("\n[1] MCP post throughput ({POST_SESSIONS} sessions, alice and bob alternately)");
    println!(
        "{:8} {:>4} {:>6} {:>8} {:>8} {:>8} {:>6} {:>11}",
        "backend", "conc", "posts", "posts/s", "p50 ms", "p99 ms", "errors", "srv CPU µs"
    );
    let http = mcp_http();
    let demo = server.demo();
    let mut agents = Vec::new();
    for i in 0..POST_SESSIONS {
        let (token, to) = if i % 2 == 0 {
            (&demo.alice.agent_token, "bob")
        } else {
            (&demo.bob.agent_token, "alice")
        };
        agents.push((Agent::connect(&http, &server.mcp_url(), token).await, to));
    }
    let agents = Arc::new(agents);
    for (concurrency, posts) in POST_CELLS {
        let job = {
            let agents = agents.clone();
            move |worker: usize, n: usize| {
                let agents = agents.clone();
                async move {
                    let (agent, to) = &agents[worker % agents.len()];
                    post_announce(agent, to, n).await.map(|_| ())
                }
            }
        };
        let warmup = measure(concurrency, (2 * concurrency).max(30), job.clone()).await;
        let label = format!("{backend}-post-{concurrency}");
        let (cell, cpu) = server.measure_cell(&label, concurrency, posts, job).await;
        print_row(
            &format!("{backend:8} {concurrency:>4}"),
            posts,
            &warmup,
            &cell,
            &cpu,
        );
    }
    close_all(agents).await;
}

/// alice or bob posts an announce in the demo channel to the other; returns the message id.
async fn post_announce(agent: &Agent, to: &str, n: usize) -> Result<String, String> {
    let receipt = agent
        .call(
            "post",
            json!({
                "kind": "announce",
                "channel": "demo",
                "to": [to],
                "body": format!("bench post {n}"),
                "idempotency_key": uuid::Uuid::now_v7().to_string(),
            }),
            CALL_TIMEOUT,
        )
        .await
        .map_err(|e| e.to_string())?;
    let message = receipt["message"].as_str().unwrap_or_default();
    if !message.starts_with("msg_")
        || receipt["replayed"] != json!(false)
        || receipt["recipients"] != json!([to])
    {
        return Err(format!("not a fresh post to {to}: {}", clip(&receipt)));
    }
    Ok(message.to_owned())
}

// ---------------------------------------------------------------------------------------------
// Section 2

async fn wake_ups(
    server: &Server,
    backend: &str,
    database_url: Option<&str>,
    master_key: &str,
    files: u64,
) {
    println!("\n[2] Long-poll wake-up: alice's post returned -> bob's waiting inbox returned");
    println!(
        "{:8} {:10} {:>7} {:>12} {:>12} {:>13} {:>13} {:>12} {:>12} {:>6}",
        "backend",
        "topology",
        "samples",
        "wake p50 ms",
        "wake p99 ms",
        "start p50 ms",
        "start p99 ms",
        "post p50 ms",
        "post p99 ms",
        "errors"
    );
    wake_up(backend, "one node", server, server).await;
    if let Some(url) = database_url {
        let replica = Server::start(Some(url), master_key, false, files, "").await;
        wake_up(backend, "2 replicas", server, &replica).await;
        replica.log_summary();
        replica.stop().await;
    }
}

async fn wake_up(backend: &str, topology: &str, alice_at: &Server, bob_at: &Server) {
    let http = mcp_http();
    let demo = alice_at.demo();
    let alice = Agent::connect(&http, &alice_at.mcp_url(), &demo.alice.agent_token).await;
    let bob = Arc::new(Agent::connect(&http, &bob_at.mcp_url(), &demo.bob.agent_token).await);
    let consumer = format!("wake-{}", topology.replace(' ', "-"));
    // Skip what bob's inbox already holds: the first wait acknowledges up to `last`.
    let mut cursor = match bob
        .call(
            "inbox",
            json!({"consumer": consumer, "limit": 1}),
            CALL_TIMEOUT,
        )
        .await
    {
        Ok(page) => page["last"].as_i64().unwrap_or(0),
        Err(e) => {
            println!("{backend:8} {topology:10} bob's first inbox call failed: {e}");
            return;
        }
    };
    let (mut wake, mut start, mut post) = (Vec::new(), Vec::new(), Vec::new());
    let mut errors = Outcome::default();
    for i in 0..WAKE_WARMUP + WAKE_SAMPLES {
        let waiting = {
            let (bob, consumer) = (bob.clone(), consumer.clone());
            tokio::spawn(async move {
                let page = bob
                    .call(
                        "inbox",
                        json!({"consumer": consumer, "after": cursor, "wait_s": 30}),
                        CALL_TIMEOUT + Duration::from_secs(30),
                    )
                    .await;
                (page, Instant::now())
            })
        };
        tokio::time::sleep(WAKE_HEAD_START).await;
        let started = Instant::now();
        let posted = post_announce(&alice, "bob", i).await;
        let returned = Instant::now();
        let (page, woke) = waiting.await.expect("the long-poll task panicked");
        let result = match (posted, page) {
            (Err(e), _) => Err(format!("alice's post: {e}")),
            (_, Err(e)) => Err(format!("bob's inbox: {e}")),
            (Ok(message), Ok(page)) => {
                if let Some(next) = page["cursor"].as_i64() {
                    cursor = next;
                }
                let entries = page["entries"].as_array().cloned().unwrap_or_default();
                if entries.len() == 1 && entries[0]["id"] == json!(message) {
                    Ok(())
                } else {
                    Err(format!(
                        "bob's page is not alice's one message: {}",
                        clip(&page)
                    ))
                }
            }
        };
        match result {
            Ok(()) if i >= WAKE_WARMUP => {
                wake.push(signed_ms(woke, returned));
                start.push(signed_ms(woke, started));
                post.push(signed_ms(returned, started));
            }
            Ok(()) => {}
            Err(e) => errors.record(Err(e)),
        }
    }
    for v in [&mut wake, &mut start, &mut post] {
        v.sort_by(f64::total_cmp);
    }
    println!(
        "{backend:8} {topology:10} {:>7} {:>12.2} {:>12.2} {:>13.2} {:>13.2} {:>12.2} {:>12.2} {:>6}",
        wake.len(),
        percentile(&wake, 0.50),
        percentile(&wake, 0.99),
        percentile(&start, 0.50),
        percentile(&start, 0.99),
        percentile(&post, 0.50),
        percentile(&post, 0.99),
        errors.failed
    );
    errors.report("samples");
    alice.close().await;
    if let Some(bob) = Arc::into_inner(bob) {
        bob.close().await;
    }
}

/// `later - earlier` in milliseconds, negative when `later` came first.
fn signed_ms(later: Instant, earlier: Instant) -> f64 {
    match later.checked_duration_since(earlier) {
        Some(d) => d.as_secs_f64() * 1e3,
        None => -(earlier.duration_since(later).as_secs_f64() * 1e3),
    }
}

// ---------------------------------------------------------------------------------------------
// Section 3 (in `support/trip.rs`, shared with `benches/roundtrip.rs`)

const fn trip(concurrency: usize, tasks: usize, claimers: usize) -> TripCell {
    TripCell {
        concurrency,
        tasks,
        claimers,
    }
}

// ---------------------------------------------------------------------------------------------
// Section 4

/// What the flood's long-polls saw, shared by them.
#[derive(Default)]
struct FloodLog {
    /// Long-polls that ended (empty, after `wait_s`) and were issued again.
    returned: AtomicUsize,
    errors: Mutex<Outcome>,
}

async fn flood(server: &Server, backend: &str, rss: &mut Vec<(&'static str, Memory)>) {
    let total = FLOOD_PEOPLE * FLOOD_POLLS_PER_SESSION;
    println!(
        "\n[4] Long-poll flood: {total} inbox long-polls from {FLOOD_PEOPLE} people (one session each, {FLOOD_POLLS_PER_SESSION} polls per session)"
    );
    let http = mcp_http();
    let admin = reqwest::Client::new();
    let setup = Instant::now();
    // People are never removed nor their ids reused: each flood has its own.
    static ROUND: AtomicUsize = AtomicUsize::new(0);
    let round = ROUND.fetch_add(1, Ordering::Relaxed);
    let tokens: Vec<Result<String, String>> = futures::stream::iter(0..FLOOD_PEOPLE)
        .map(|i| flood_person(&admin, server, round, i))
        .buffer_unordered(16)
        .collect()
        .await;
    let tokens: Vec<String> = match tokens.into_iter().collect() {
        Ok(tokens) => tokens,
        Err(e) => {
            println!("    could not create the flood's people: {e}");
            return;
        }
    };
    let demo = server.demo();
    let alice = Agent::connect(&http, &server.mcp_url(), &demo.alice.agent_token).await;
    let mcp_url = server.mcp_url();
    let sessions: Vec<Result<Agent, String>> = futures::stream::iter(&tokens)
        .map(|token| Agent::try_connect(&http, &mcp_url, token))
        .buffer_unordered(32)
        .collect()
        .await;
    let mut agents = Vec::new();
    let mut refused = Outcome::default();
    for session in sessions {
        match session {
            Ok(agent) => agents.push(Arc::new(agent)),
            Err(e) => refused.record(Err(e)),
        }
    }
    println!(
        "    setup: {} people with tokens, {} sessions in {:.1} s",
        tokens.len(),
        agents.len(),
        setup.elapsed().as_secs_f64()
    );
    refused.report("sessions");

    println!(
        "{:8} {:16} {:>8} {:>9} {:>6} {:>8} {:>8} {:>6}",
        "backend", "phase", "waiters", "RSS MiB", "posts", "p50 ms", "p99 ms", "errors"
    );
    let before = server.memory();
    let baseline = posts_one_at_a_time(&alice).await;
    flood_row(backend, "before the flood", server, before, &baseline).await;

    // The flood, built up at FLOOD_RAMP_PER_S long-polls per second.
    let stop = CancellationToken::new();
    let log = Arc::new(FloodLog::default());
    let mut polls = Vec::with_capacity(total);
    let ramp = Instant::now();
    let pause = Duration::from_secs_f64(FLOOD_POLLS_PER_SESSION as f64 / FLOOD_RAMP_PER_S as f64);
    for agent in &agents {
        for _ in 0..FLOOD_POLLS_PER_SESSION {
            polls.push(tokio::spawn(hold_long_poll(
                agent.clone(),
                stop.clone(),
                log.clone(),
            )));
        }
        tokio::time::sleep(pause).await;
    }
    let target = (agents.len() * FLOOD_POLLS_PER_SESSION) as f64;
    let mut best = 0.0;
    let mut best_at = Instant::now();
    loop {
        let waiting = server.metric("liaison_inbox_waiters").await.unwrap_or(0.0);
        if waiting > best {
            (best, best_at) = (waiting, Instant::now());
        }
        if waiting >= target || best_at.elapsed() > Duration::from_secs(15) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    println!(
        "    {best} long-polls waiting (server gauge) {:.1} s after the first was started",
        ramp.elapsed().as_secs_f64()
    );
    let held = server.memory();
    rss.push(("flood held", held));
    let during = posts_one_at_a_time(&alice).await;
    flood_row(
        backend,
        "during the flood",
        server,
        server.memory(),
        &during,
    )
    .await;
    println!(
        "    {} long-polls had ended and been issued again by then",
        log.returned.load(Ordering::Relaxed)
    );
    log.errors
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .report("long-polls");

    // Release: cancelled calls (`notifications/cancelled`) end the waits; then the sessions close.
    stop.cancel();
    for poll in polls {
        let _ = poll.await;
    }
    let closing = futures::stream::iter(agents)
        .map(|agent| async move {
            if let Some(agent) = Arc::into_inner(agent) {
                agent.close().await;
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<()>>();
    closing.await;
    alice.close().await;
    drop(http);
    tokio::time::sleep(Duration::from_secs(1)).await;
    rss.push(("flood released", server.memory()));
    println!(
        "    released: the server counts {} long-polls waiting, {} MCP sessions",
        server
            .metric("liaison_inbox_waiters")
            .await
            .map_or("-".into(), |v| v.to_string()),
        server
            .metric("liaison_mcp_sessions")
            .await
            .map_or("-".into(), |v| v.to_string()),
    );
    // Long-polls whose session is gone may still wait on the server until their `wait_s` ends.
    let released = Instant::now();
    while server.metric("liaison_inbox_waiters").await.unwrap_or(0.0) > 0.0
        && released.elapsed() < Duration::from_secs(70)
    {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "    {} long-polls still waiting on the server {:.1} s after the release",
        server
            .metric("liaison_inbox_waiters")
            .await
            .map_or("-".into(), |v| v.to_string()),
        released.elapsed().as_secs_f64()
    );
    rss.push(("no long-poll left waiting", server.memory()));
}

/// Creates person `floodR-NNNN` and an agent token for it; returns the token.
async fn flood_person(
    admin: &reqwest::Client,
    server: &Server,
    round: usize,
    i: usize,
) -> Result<String, String> {
    let id = format!("flood{round}-{i:04}");
    let call = |path: &'static str, body: Value| {
        let request = admin
            .post(format!("{}{path}", server.url))
            .bearer_auth(&server.admin_token)
            .json(&body);
        async move {
            let response = request.send().await.map_err(|e| e.to_string())?;
            let status = response.status();
            let value: Value = response.json().await.map_err(|e| e.to_string())?;
            if status.is_success() {
                Ok(value)
            } else {
                Err(format!("{path}: HTTP {status}: {}", clip(&value)))
            }
        }
    };
    call(
        "/admin/v1/persons",
        json!({"id": id, "display_name": format!("Flood {i}")}),
    )
    .await?;
    let token = call(
        "/admin/v1/tokens",
        json!({"person": id, "scopes": ["agent"]}),
    )
    .await?;
    token["token"]["secret"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("no token secret: {}", clip(&token)))
}

/// One flood long-poll, issued again whenever it ends, until `stop`.
async fn hold_long_poll(agent: Arc<Agent>, stop: CancellationToken, log: Arc<FloodLog>) {
    loop {
        let poll = agent.call(
            "inbox",
            json!({"consumer": "flood", "wait_s": 50}),
            Duration::from_secs(80),
        );
        let page = tokio::select! {
            () = stop.cancelled() => return,
            page = poll => page,
        };
        let error = match page {
            Ok(page) if page["entries"].as_array().is_some_and(Vec::is_empty) => {
                log.returned.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            Ok(page) => format!("a flood inbox held entries: {}", clip(&page)),
            Err(e) => e.to_string(),
        };
        log.errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(Err(error));
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// [`FLOOD_POSTS`] posts from alice to bob, one at a time.
async fn posts_one_at_a_time(alice: &Agent) -> Outcome {
    let mut outcome = Outcome::default();
    let start = Instant::now();
    for n in 0..FLOOD_POSTS {
        let started = Instant::now();
        let result = post_announce(alice, "bob", n).await;
        outcome.record(result.map(|_| started.elapsed()));
    }
    outcome.elapsed = start.elapsed();
    outcome
}

async fn flood_row(backend: &str, phase: &str, server: &Server, memory: Memory, posts: &Outcome) {
    let waiting = server
        .metric("liaison_inbox_waiters")
        .await
        .map_or("-".into(), |w| format!("{w}"));
    let ms = posts.latencies_ms();
    println!(
        "{backend:8} {phase:16} {waiting:>8} {:>9} {:>6} {:>8.2} {:>8.2} {:>6}",
        memory.map_or("-".into(), |(rss, _)| format!("{:.1}", rss / 1024.0)),
        ms.len(),
        percentile(&ms, 0.50),
        percentile(&ms, 0.99),
        posts.failed
    );
    posts.report(phase);
}

// ---------------------------------------------------------------------------------------------
// Section 6

mod floor {
    use std::convert::Infallible;
    use std::process::Stdio;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    use axum::body::Body;
    use futures::StreamExt as _;
    use http_body_util::BodyExt as _;
    use hyper::body::Incoming;
    use hyper::{Method, Request, Response};
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto::Builder;
    use serde_json::json;
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
    use tokio::net::TcpStream;

    use super::{FLOOD_PEOPLE, FLOOD_POLLS_PER_SESSION, FLOOR_SERVER_ENV, random_hex};

    /// How long the bare server keeps a POST waiting: longer than the measurement.
    const HOLD: Duration = Duration::from_secs(600);

    /// The bare server: prints its port, then serves until killed. A `GET` is answered at once
    /// with the number of POSTs read so far; a POST is read whole and answered after [`HOLD`].
    pub(super) async fn serve() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        println!("{}", listener.local_addr().expect("an address").port());
        // hyper's HTTP/1.1 buffer bounded as liaison bounds it (`liaison::net::DEFAULT_MAX_REQUEST_HEAD`).
        let mut builder = Builder::new(TokioExecutor::new());
        builder
            .http1()
            .max_buf_size(liaison::net::DEFAULT_MAX_REQUEST_HEAD);
        let builder = Arc::new(builder);
        let read = Arc::new(AtomicUsize::new(0));
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let (builder, read) = (builder.clone(), read.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let read = read.clone();
                    async move {
                        if req.method() == Method::GET {
                            let n = read.load(Ordering::Relaxed).to_string();
                            return Ok::<_, Infallible>(Response::new(Body::from(n)));
                        }
                        let body = req.into_body().collect().await.map(|b| b.to_bytes());
                        read.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(HOLD).await;
                        Ok(Response::new(Body::from(body.unwrap_or_default())))
                    }
                });
                let conn = builder.serve_connection_with_upgrades(TokioIo::new(tcp), service);
                let _ = conn.await;
            });
        }
    }

    /// Section 6: the bare server's RSS idle and with as many POSTs waiting as the flood holds.
    pub(super) async fn measure() {
        let total = FLOOD_PEOPLE * FLOOD_POLLS_PER_SESSION;
        println!(
            "\n[6] The HTTP floor: a bare hyper server (auto builder, mimalloc) holding {total} POSTs, each on its own connection (not liaison)"
        );
        let mut child =
            tokio::process::Command::new(std::env::current_exe().expect("this bench's own path"))
                .env(FLOOR_SERVER_ENV, "1")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("the bare server starts");
        let mut lines = BufReader::new(child.stdout.take().expect("its stdout")).lines();
        let port: u16 = lines
            .next_line()
            .await
            .ok()
            .flatten()
            .and_then(|line| line.trim().parse().ok())
            .expect("the bare server prints its port");
        let pid = child.id().expect("a running bare server");
        let count_url = format!("http://127.0.0.1:{port}/");
        let read = || async {
            let text = reqwest::get(&count_url).await.ok()?.text().await.ok()?;
            text.parse::<usize>().ok()
        };
        let idle = read().await.and_then(|_| rss_kib(pid));

        // The head and body of a flood `inbox` call, as rmcp's client sends them.
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "inbox", "arguments": {"consumer": "flood", "wait_s": 50}}})
        .to_string();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\nauthorization: Bearer lsn_{}\r\n\
             mcp-session-id: {}\r\nmcp-protocol-version: 2025-11-25\r\ncontent-length: {}\r\n\r\n{body}",
            random_hex(24),
            random_hex(16),
            body.len()
        );
        let open = |_| async {
            let mut tcp = TcpStream::connect(("127.0.0.1", port)).await?;
            tcp.set_nodelay(true)?;
            tcp.write_all(request.as_bytes()).await?;
            Ok::<_, std::io::Error>(tcp)
        };
        let opened: Vec<_> = futures::stream::iter(0..total)
            .map(open)
            .buffer_unordered(256)
            .collect()
            .await;
        let failed = opened.iter().filter(|c| c.is_err()).count();
        let mut waiting = 0;
        let mut changed = Instant::now();
        while waiting < total - failed && changed.elapsed() < Duration::from_secs(15) {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let now = read().await.unwrap_or(waiting);
            if now > waiting {
                (waiting, changed) = (now, Instant::now());
            }
        }
        let held = rss_kib(pid);
        println!(
            "{:>8} {:>16} {:>13} {:>20} {:>14}",
            "waiting", "RSS MiB at rest", "RSS MiB held", "KiB per waiting POST", "failed opens"
        );
        let mib = |kib: Option<f64>| kib.map_or("-".into(), |k| format!("{:.1}", k / 1024.0));
        let per = idle
            .zip(held)
            .filter(|_| waiting > 0)
            .map_or("-".into(), |(i, h)| {
                format!("{:.1}", (h - i) / waiting as f64)
            });
        println!(
            "{waiting:>8} {:>16} {:>13} {per:>20} {failed:>14}",
            mib(idle),
            mib(held)
        );
        drop(opened);
        let _ = child.kill().await;
    }

    fn rss_kib(pid: u32) -> Option<f64> {
        super::memory_of(pid).map(|(rss, _)| rss)
    }
}
