//! Fleet benchmark (not a test, issue 49): what a delegated task costs as the number of agents
//! connected and waiting for work grows, against the real server process (`serve --demo`, SQLite
//! on a fresh data directory and, with `LIAISON_BENCH_PG_URL`, a fresh PostgreSQL database).
//!
//! For 1, 10, 100 and 1,000 waiting agents ([`FLEET`]; `LIAISON_BENCH_FLEET=10,1000` picks), in
//! two layouts (`LIAISON_BENCH_FLEET_LAYOUT=persons` picks):
//!
//! - **connections**: every agent is a connection of alice (an agent token of hers of its own,
//!   one MCP session each): every one of them is a recipient of every task and may claim it;
//! - **persons**: one connection of alice claims; the others are one agent each of as many other
//!   persons, waiting the same way but never recipients.
//!
//! The demo party `partner` sends [`TASKS`] blocking A2A `SendMessage`s at [`CONCURRENCY`] in
//! flight; a waiting agent claims each task and replies at once (`support/trip.rs`), so the call
//! returns it COMPLETED (checked). Claimers wait for work as `LIAISON_BENCH_CLAIM_WAIT` says: unset,
//! a long-poll of `inbox` then `claim` of `next` (what every build serves: each task wakes
//! every waiting agent of alice); `1`, `claim` of `next` with `wait_s` (each task handed to one).
//!
//! Per cell: tasks/s, the A2A call's p50/p99, the wake-up (from the `SendMessage` sent to the
//! claim answered to the claimer: the intake, the wake-up and the claim) p50/p99, and the server's
//! CPU per task (user + system of its process; PostgreSQL's own not counted). Below each row, the
//! claimers' calls by kind.
//!
//! Run (release build; the server pinned off the bench's core):
//! `LIAISON_BENCH_SERVER_PREFIX="taskset -c 1" taskset -c 0 cargo bench --bench fleet`.

#![allow(clippy::disallowed_methods)] // a client of the server under test

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

#[path = "support/mod.rs"]
mod support;
use support::agent::{Agent, CALL_TIMEOUT, clip, mcp_http};
use support::server::{Server, cpu_per, random_hex};
use support::trip::{ClaimStyle, ClaimTimes, ClaimerLog, claim_and_answer, delegate_task};
use support::{measure, percentile};

/// Waiting agents per cell.
const FLEET: [usize; 4] = [1, 10, 100, 1_000];
/// Tasks measured per cell (`LIAISON_BENCH_FLEET_TASKS` overrides), and in flight.
const TASKS: usize = 300;
const CONCURRENCY: usize = 4;
/// The server's connection cap: every waiting agent holds one, and the bench's calls some more.
const MAX_CONNECTIONS: u64 = 4_096;
/// Every agent of alice waits at once (the default allows 32 long-polls per person).
const EXTRA_CONFIG: &str = "[inbox]\nmax_waiters_per_person = 2000\n";

#[derive(Clone, Copy, Debug)]
enum Layout {
    Connections,
    Persons,
}

#[tokio::main]
async fn main() {
    liaison::net::tls::install_crypto_provider();
    run("sqlite", None).await;
    support::with_postgres(|url| async move { run("postgres", Some(&url)).await }).await;
}

fn chosen(n: usize) -> bool {
    match std::env::var("LIAISON_BENCH_FLEET") {
        Ok(list) => list.split(',').any(|i| i.trim().parse() == Ok(n)),
        Err(_) => true,
    }
}

async fn run(backend: &str, database_url: Option<&str>) {
    let style = ClaimStyle::from_env();
    println!("\n=== {backend} (claimers: {style:?}) ===");
    let server = Server::start(
        database_url,
        &random_hex(32),
        true,
        MAX_CONNECTIONS,
        EXTRA_CONFIG,
    )
    .await;
    println!(
        "{:8} {:11} {:>6} {:>6} {:>8} {:>8} {:>8} {:>9} {:>9} {:>6} {:>11}",
        "backend",
        "layout",
        "agents",
        "tasks",
        "tasks/s",
        "p50 ms",
        "p99 ms",
        "wake p50",
        "wake p99",
        "errors",
        "srv CPU µs"
    );
    let mut round = 0;
    let layouts = std::env::var("LIAISON_BENCH_FLEET_LAYOUT").unwrap_or_default();
    for layout in [Layout::Connections, Layout::Persons] {
        let name = format!("{layout:?}").to_lowercase();
        if !layouts.is_empty() && !layouts.split(',').any(|l| l.trim() == name) {
            continue;
        }
        for n in FLEET.into_iter().filter(|&n| chosen(n)) {
            round += 1;
            cell(&server, backend, style, layout, n, round).await;
        }
    }
    server.log_summary();
    server.stop().await;
}

/// One cell: `n` agents waiting in `layout`, then the tasks.
async fn cell(
    server: &Server,
    backend: &str,
    style: ClaimStyle,
    layout: Layout,
    n: usize,
    round: usize,
) {
    let admin = reqwest::Client::new();
    // Alice's agent tokens: all `n` (connections), or one (persons) beside n - 1 other persons'.
    let specs: Vec<(bool, usize)> = (0..n)
        .map(|i| match layout {
            Layout::Connections => (true, i),
            Layout::Persons => (i == 0, i),
        })
        .collect();
    let tokens: Vec<Result<(bool, String), String>> = futures::stream::iter(specs)
        .map(|(alice, i)| {
            let admin = admin.clone();
            async move {
                // Each token of alice is a connection of hers: each needs a name of its own.
                let name = format!("fleet {round}-{i}");
                let token = if alice {
                    token_of(&admin, server, "alice", &name).await?
                } else {
                    let id = format!("fleet{round}-{i:04}");
                    admin_call(
                        &admin,
                        server,
                        "/admin/v1/persons",
                        json!({"id": id, "display_name": format!("Fleet {i}")}),
                    )
                    .await?;
                    token_of(&admin, server, &id, &name).await?
                };
                Ok((alice, token))
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let tokens: Vec<(bool, String)> = match tokens.into_iter().collect() {
        Ok(t) => t,
        Err(e) => {
            println!("    setup failed: {e}");
            return;
        }
    };
    let http = mcp_http();
    let mcp_url = server.mcp_url();
    let agents: Vec<(bool, Agent)> = futures::stream::iter(tokens)
        .map(|(alice, token)| {
            let (http, mcp_url) = (http.clone(), mcp_url.clone());
            async move { (alice, Agent::connect(&http, &mcp_url, &token).await) }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let stop = CancellationToken::new();
    let log = Arc::new(ClaimerLog::default());
    let times: ClaimTimes = Arc::new(Mutex::new(HashMap::new()));
    let mut claimers = Vec::new();
    for (i, (_, agent)) in agents.into_iter().enumerate() {
        claimers.push(tokio::spawn(claim_and_answer(
            agent,
            format!("fleet-{i}"),
            style,
            Some(times.clone()),
            stop.clone(),
            log.clone(),
        )));
    }
    // Every agent in its wait before the measure (the gauge counts waiting long-polls).
    for _ in 0..600 {
        if server.metric("liaison_inbox_waiters").await.unwrap_or(0.0) >= n as f64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let a2a = reqwest::Client::builder()
        .timeout(CALL_TIMEOUT + Duration::from_secs(30))
        .build()
        .expect("an HTTP client");
    let url: Arc<str> = format!("{}/a2a/jsonrpc", server.url).into();
    let token: Arc<str> = server.demo().partner.agent_token.as_str().into();
    let wakes: Arc<Mutex<Vec<f64>>> = Arc::default();
    let job = {
        let (a2a, url, token, times, wakes) = (a2a, url, token, times.clone(), wakes.clone());
        move |_worker: usize, k: usize| {
            let (a2a, url, token, times, wakes) = (
                a2a.clone(),
                url.clone(),
                token.clone(),
                times.clone(),
                wakes.clone(),
            );
            async move {
                let sent = Instant::now();
                let id = delegate_task(&a2a, &url, &token, k).await?;
                let claimed = times.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                if let Some(at) = claimed {
                    let ms = at.saturating_duration_since(sent).as_secs_f64() * 1e3;
                    wakes.lock().unwrap_or_else(|e| e.into_inner()).push(ms);
                }
                Ok(())
            }
        }
    };
    let _warmup = measure(CONCURRENCY, 20, job.clone()).await;
    log.forget_calls();
    wakes.lock().unwrap_or_else(|e| e.into_inner()).clear();
    let tasks = std::env::var("LIAISON_BENCH_FLEET_TASKS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(TASKS);
    let cpu_before = server.cpu_time();
    let outcome = measure(CONCURRENCY, tasks, job).await;
    let cpu = cpu_per(server, cpu_before, tasks);
    let ms = outcome.latencies_ms();
    let mut wakes = std::mem::take(&mut *wakes.lock().unwrap_or_else(|e| e.into_inner()));
    wakes.sort_by(f64::total_cmp);
    println!(
        "{backend:8} {:11} {n:>6} {tasks:>6} {:>8.0} {:>8.2} {:>8.2} {:>9.2} {:>9.2} {:>6} {cpu:>11}",
        format!("{layout:?}").to_lowercase(),
        outcome.latencies.len() as f64 / outcome.elapsed.as_secs_f64(),
        percentile(&ms, 0.50),
        percentile(&ms, 0.99),
        percentile(&wakes, 0.50),
        percentile(&wakes, 0.99),
        outcome.failed,
    );
    outcome.report("tasks");
    stop.cancel();
    let closing: Vec<_> = claimers.into_iter().collect();
    futures::stream::iter(closing)
        .for_each_concurrent(64, |claimer| async move {
            if let Ok(agent) = claimer.await {
                agent.close().await;
            }
        })
        .await;
    log.report();
}

/// A new agent token of `person`, a connection named `name`.
async fn token_of(
    admin: &reqwest::Client,
    server: &Server,
    person: &str,
    name: &str,
) -> Result<String, String> {
    let token = admin_call(
        admin,
        server,
        "/admin/v1/tokens",
        json!({"person": person, "scopes": ["agent"], "description": name}),
    )
    .await?;
    token["token"]["secret"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("no token secret: {}", clip(&token)))
}

async fn admin_call(
    admin: &reqwest::Client,
    server: &Server,
    path: &str,
    body: Value,
) -> Result<Value, String> {
    let response = admin
        .post(format!("{}{path}", server.url))
        .bearer_auth(&server.admin_token)
        .json(&body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let value: Value = response.json().await.map_err(|e| e.to_string())?;
    if status.is_success() {
        Ok(value)
    } else {
        Err(format!("{path}: HTTP {status}: {}", clip(&value)))
    }
}
