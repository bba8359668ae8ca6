//! The delegated round trip, as a stranger's task takes it: an A2A party sends a *blocking*
//! `SendMessage` (JSON-RPC, no `returnImmediately`; the demo card's default skill `ask` opens a
//! task in channel `partners`) while claimer sessions of alice (MCP) wait in `inbox`; every new
//! task wakes them all, and each then takes tasks with `claim` `thread="next"` until none is left,
//! reads each (the claim's answer carries the task; against a build whose did not, a `thread`
//! call) and answers it at once with a `reply` (`answer to <task id>`), so the A2A call returns
//! the task COMPLETED. Checked: every answer is a `TASK_STATE_COMPLETED` task whose artifacts hold the
//! reply text naming that task.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::agent::{Agent, CALL_TIMEOUT, CallError, clip, mcp_http};
use super::server::{Server, print_row};
use super::{Outcome, measure};

/// How a claimer waits for work.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum ClaimStyle {
    /// A long-poll of `inbox`, then `claim` of `next` until none is left (every build): each new
    /// task wakes every waiting claimer of its person.
    Inbox,
    /// `claim` of `next` with `wait_s` (issue 49): each new task is handed to one waiting
    /// claimer.
    ClaimWait,
}

impl ClaimStyle {
    /// `LIAISON_BENCH_CLAIM_WAIT=1` chooses [`ClaimStyle::ClaimWait`].
    pub(crate) fn from_env() -> Self {
        match std::env::var("LIAISON_BENCH_CLAIM_WAIT").as_deref() {
            Ok("1") => ClaimStyle::ClaimWait,
            _ => ClaimStyle::Inbox,
        }
    }
}

/// When each task was claimed (by thread id), for the wake-up latency.
pub(crate) type ClaimTimes = Arc<Mutex<std::collections::HashMap<String, Instant>>>;

/// What the claimers did, shared by them: per kind of call, how many and their total time.
#[derive(Default)]
pub(crate) struct ClaimerLog {
    calls: Mutex<BTreeMap<&'static str, (usize, Duration)>>,
    errors: Mutex<Outcome>,
}

impl ClaimerLog {
    pub(crate) fn count(&self, what: &'static str, took: Duration) {
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let entry = calls.entry(what).or_default();
        entry.0 += 1;
        entry.1 += took;
    }

    /// Forgets the calls counted so far (the warm-up's).
    pub(crate) fn forget_calls(&self) {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    pub(crate) fn fail(&self, message: String) {
        self.errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(Err(message));
    }

    /// One line per kind of call, then the errors; forgets them.
    pub(crate) fn report(&self) {
        let calls = std::mem::take(&mut *self.calls.lock().unwrap_or_else(|e| e.into_inner()));
        let line: Vec<String> = calls
            .iter()
            .map(|(what, (n, took))| {
                format!(
                    "{n} {what} (mean {:.2} ms)",
                    took.as_secs_f64() * 1e3 / *n as f64
                )
            })
            .collect();
        println!("    claimers' calls: {}", line.join(", "));
        let errors = std::mem::take(&mut *self.errors.lock().unwrap_or_else(|e| e.into_inner()));
        errors.report("claimers");
    }
}

/// One cell of the round trip: concurrent A2A clients, tasks measured, alice's MCP sessions
/// claiming them.
#[derive(Clone, Copy)]
pub(crate) struct TripCell {
    pub concurrency: usize,
    pub tasks: usize,
    pub claimers: usize,
}

/// Runs `cells` on `server` (started with `--demo`): one table row per cell, tasks/s, p50/p99 of
/// the A2A call and the server's CPU per task (the claimers' MCP calls included); below each row,
/// the claimers' calls by kind with their mean latency.
pub(crate) async fn round_trip(server: &Server, backend: &str, cells: &[TripCell]) {
    println!(
        "{:8} {:>4} {:>8} {:>6} {:>8} {:>8} {:>8} {:>6} {:>11}",
        "backend",
        "conc",
        "claimers",
        "tasks",
        "tasks/s",
        "p50 ms",
        "p99 ms",
        "errors",
        "srv CPU µs"
    );
    let http = mcp_http();
    let demo = server.demo();
    let a2a = Arc::new(
        reqwest::Client::builder()
            .timeout(CALL_TIMEOUT + Duration::from_secs(30))
            .build()
            .expect("an HTTP client"),
    );
    let url: Arc<str> = format!("{}/a2a/jsonrpc", server.url).into();
    let token: Arc<str> = demo.partner.agent_token.as_str().into();
    for &TripCell {
        concurrency,
        tasks,
        claimers: claimer_count,
    } in cells
    {
        let stop = CancellationToken::new();
        let log = Arc::new(ClaimerLog::default());
        let mut claimers = Vec::new();
        for i in 0..claimer_count {
            let agent = Agent::connect(&http, &server.mcp_url(), &demo.alice.agent_token).await;
            claimers.push(tokio::spawn(claim_and_answer(
                agent,
                format!("claimer-{i}"),
                ClaimStyle::from_env(),
                None,
                stop.clone(),
                log.clone(),
            )));
        }
        let job = {
            let (a2a, url, token) = (a2a.clone(), url.clone(), token.clone());
            move |_worker: usize, n: usize| {
                let (a2a, url, token) = (a2a.clone(), url.clone(), token.clone());
                async move { delegate(&a2a, &url, &token, n).await }
            }
        };
        let warmup = measure(concurrency, (2 * concurrency).max(10), job.clone()).await;
        log.forget_calls();
        let label = format!("{backend}-inbound-{concurrency}");
        let (cell, cpu) = server.measure_cell(&label, concurrency, tasks, job).await;
        let lead = format!("{backend:8} {concurrency:>4} {claimer_count:>8}");
        print_row(&lead, tasks, &warmup, &cell, &cpu);
        stop.cancel();
        for claimer in claimers {
            if let Ok(agent) = claimer.await {
                agent.close().await;
            }
        }
        log.report();
    }
}

/// One claimer: waits for work (`style`); when woken, claims the oldest waiting task until none
/// is left, answering each at once (noting when it claimed each in `times`). Returns its session
/// when `stop` fires.
pub(crate) async fn claim_and_answer(
    agent: Agent,
    consumer: String,
    style: ClaimStyle,
    times: Option<ClaimTimes>,
    stop: CancellationToken,
    log: Arc<ClaimerLog>,
) -> Agent {
    if style == ClaimStyle::ClaimWait {
        return claim_waiting(agent, times, stop, log).await;
    }
    // Start after what alice's inbox already holds (section 1's posts from bob); a task that
    // arrives meanwhile is taken by the first round of claims below.
    let mut cursor = match agent
        .call(
            "inbox",
            json!({"consumer": consumer, "limit": 1}),
            CALL_TIMEOUT,
        )
        .await
    {
        Ok(page) => page["last"].as_i64(),
        Err(e) => {
            log.fail(format!("first inbox: {e}"));
            None
        }
    };
    loop {
        // Take waiting tasks until none is left, answering each at once.
        loop {
            let started = Instant::now();
            let claim = agent
                .call("claim", json!({"thread": "next"}), CALL_TIMEOUT)
                .await;
            let claim = match claim {
                Ok(claim) => {
                    log.count("claims taken", started.elapsed());
                    claim
                }
                Err(CallError::Tool { code, .. }) if code == "not_found" => {
                    log.count("claims finding none", started.elapsed());
                    break;
                }
                // The candidate `next` picked was answered by another claimer meanwhile (the
                // server does not skip it, unlike one claimed meanwhile): take the next one.
                Err(CallError::Tool { code, .. }) if code == "task_terminal" => {
                    log.count("claims losing a race (task_terminal)", started.elapsed());
                    continue;
                }
                Err(e) => {
                    log.count("claims failed", started.elapsed());
                    log.fail(format!("claim: {e}"));
                    break;
                }
            };
            if !answer(&agent, &claim, times.as_ref(), &log).await {
                break;
            }
        }
        // Then wait for the next entry (or 20 s).
        let started = Instant::now();
        let poll = agent.call(
            "inbox",
            json!({"consumer": consumer, "after": cursor, "wait_s": 20, "limit": 100}),
            CALL_TIMEOUT + Duration::from_secs(20),
        );
        let page = tokio::select! {
            () = stop.cancelled() => None,
            page = poll => Some(page),
        };
        let Some(page) = page else {
            return agent;
        };
        log.count("inbox waits", started.elapsed());
        match page {
            Ok(page) => cursor = page["cursor"].as_i64().or(cursor),
            Err(e) => {
                log.fail(format!("inbox: {e}"));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// A claimer of [`ClaimStyle::ClaimWait`]: `claim` of `next` waiting up to 20 s, answering each
/// task at once.
async fn claim_waiting(
    agent: Agent,
    times: Option<ClaimTimes>,
    stop: CancellationToken,
    log: Arc<ClaimerLog>,
) -> Agent {
    loop {
        let started = Instant::now();
        let call = agent.call(
            "claim",
            json!({"thread": "next", "wait_s": 20}),
            CALL_TIMEOUT + Duration::from_secs(20),
        );
        let claim = tokio::select! {
            () = stop.cancelled() => return agent,
            claim = call => claim,
        };
        let claim = match claim {
            Ok(claim) => {
                log.count("claims taken (waiting)", started.elapsed());
                claim
            }
            Err(CallError::Tool { code, .. }) if code == "not_found" => {
                log.count("claim waits ending empty", started.elapsed());
                continue;
            }
            Err(e) => {
                log.count("claims failed", started.elapsed());
                log.fail(format!("claim: {e}"));
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        answer(&agent, &claim, times.as_ref(), &log).await;
    }
}

/// What an agent does with a task it claimed: reads it, unless the claim's answer carries it (a
/// claim of `next` does since `87ce327`; before, an agent called `thread`, so the bench does
/// too against such a build and the two compare the same work), then replies. False when the
/// claim names no thread.
async fn answer(
    agent: &Agent,
    claim: &Value,
    times: Option<&ClaimTimes>,
    log: &ClaimerLog,
) -> bool {
    let Some(thread) = claim["claim"]["thread"].as_str() else {
        log.fail(format!("a claim without a thread: {}", clip(claim)));
        return false;
    };
    if let Some(times) = times {
        times
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(thread.to_owned(), Instant::now());
    }
    if claim["thread"].is_null() {
        let started = Instant::now();
        let read = agent
            .call("thread", json!({"thread": thread}), CALL_TIMEOUT)
            .await;
        log.count(
            "task reads (the claim's answer had no thread)",
            started.elapsed(),
        );
        if let Err(e) = read {
            log.fail(format!("thread: {e}"));
        }
    }
    let started = Instant::now();
    let reply = agent
        .call(
            "post",
            json!({"kind": "reply", "thread": thread, "body": format!("answer to {thread}")}),
            CALL_TIMEOUT,
        )
        .await;
    log.count("replies", started.elapsed());
    if let Err(e) = reply {
        log.fail(format!("reply: {e}"));
    }
    true
}

/// The partner's blocking `SendMessage`; checks the task came back COMPLETED with its answer.
async fn delegate(http: &reqwest::Client, url: &str, token: &str, n: usize) -> Result<(), String> {
    delegate_task(http, url, token, n).await.map(|_| ())
}

/// [`delegate`], answering the task's id.
pub(crate) async fn delegate_task(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    n: usize,
) -> Result<String, String> {
    let body = json!({
        "jsonrpc": "2.0",
        "id": n,
        "method": "SendMessage",
        "params": {"message": {
            "messageId": uuid::Uuid::now_v7().to_string(),
            "role": "ROLE_USER",
            "parts": [{"text": format!("bench question {n}")}],
        }},
    });
    let response = http
        .post(url)
        .bearer_auth(token)
        .header(liaison::wire::params::VERSION_HEADER, "1.0")
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("HTTP request failed: {e}"))?;
    let status = response.status();
    let value: Value = response
        .json()
        .await
        .map_err(|e| format!("HTTP {status}, body not JSON: {e}"))?;
    if let Some(error) = value.get("error") {
        return Err(format!("HTTP {status}, JSON-RPC error: {}", clip(error)));
    }
    let task = &value["result"]["task"];
    let id = task["id"].as_str().unwrap_or_default();
    let state = task["status"]["state"].as_str().unwrap_or_default();
    if state != "TASK_STATE_COMPLETED" {
        // The task id differs per request: keep the message comparable across failures.
        return Err(format!("HTTP {status}, task in state {state:?}"));
    }
    let answer = format!("answer to {id}");
    let answered = task["artifacts"].as_array().is_some_and(|artifacts| {
        artifacts.iter().any(|a| {
            a["parts"]
                .as_array()
                .is_some_and(|parts| parts.iter().any(|p| p["text"] == json!(answer)))
        })
    });
    if id.is_empty() || !answered {
        return Err(format!(
            "a COMPLETED task without its answer: {}",
            clip(task)
        ));
    }
    Ok(id.to_owned())
}
