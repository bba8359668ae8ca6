//! What the benchmarks share: a throw-away PostgreSQL database when `LIAISON_BENCH_PG_URL` names
//! a server, a run of operations from concurrent workers with its latencies and failures, and the
//! server process's CPU time; the server as a process ([`server`]), rmcp's client as an agent
//! ([`agent`]) and the delegated round trip ([`trip`]). Included with `#[path]` (a directory
//! without `main.rs` is not a bench target); each bench uses part of it.
#![allow(dead_code)]

pub(crate) mod agent;
pub(crate) mod server;
pub(crate) mod trip;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

/// Distinct error messages an [`Outcome`] keeps (with their counts).
const ERROR_SAMPLES: usize = 5;

/// Runs `bench` with the URL of a fresh database on the server of `LIAISON_BENCH_PG_URL`, then
/// drops the database; does nothing when the variable is unset.
pub(crate) async fn with_postgres<F, Fut>(bench: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()>,
{
    let Ok(admin) = std::env::var("LIAISON_BENCH_PG_URL") else {
        return;
    };
    let name = format!("liaison_bench_{}", uuid::Uuid::now_v7().simple());
    sqlx::any::install_default_drivers();
    let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&admin)
        .await
        .expect("connect to LIAISON_BENCH_PG_URL");
    sqlx::Executor::execute(
        &mut conn,
        sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")),
    )
    .await
    .expect("create the bench database");
    let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b);
    bench(format!("{base}/{name}")).await;
    let _ = sqlx::Executor::execute(
        &mut conn,
        sqlx::AssertSqlSafe(format!("DROP DATABASE {name} WITH (FORCE)")),
    )
    .await;
}

/// What one run of operations gave: the successful ones' latencies and the failures.
#[derive(Default)]
pub(crate) struct Outcome {
    pub latencies: Vec<Duration>,
    /// Up to [`ERROR_SAMPLES`] distinct messages with their counts.
    pub errors: BTreeMap<String, usize>,
    pub failed: usize,
    pub elapsed: Duration,
}

impl Outcome {
    pub(crate) fn record(&mut self, result: Result<Duration, String>) {
        match result {
            Ok(latency) => self.latencies.push(latency),
            Err(message) => {
                self.failed += 1;
                self.count_error(message, 1);
            }
        }
    }

    fn merge(&mut self, other: Outcome) {
        self.latencies.extend(other.latencies);
        self.failed += other.failed;
        for (message, count) in other.errors {
            self.count_error(message, count);
        }
    }

    fn count_error(&mut self, message: String, count: usize) {
        if self.errors.len() < ERROR_SAMPLES || self.errors.contains_key(&message) {
            *self.errors.entry(message).or_default() += count;
        }
    }

    /// The successful latencies in milliseconds, sorted.
    pub(crate) fn latencies_ms(&self) -> Vec<f64> {
        let mut ms: Vec<f64> = self
            .latencies
            .iter()
            .map(|d| d.as_secs_f64() * 1e3)
            .collect();
        ms.sort_by(f64::total_cmp);
        ms
    }

    /// Prints the failures' messages under a table row.
    pub(crate) fn report(&self, phase: &str) {
        for (message, count) in &self.errors {
            println!("    {phase}: {count} × {message}");
        }
        let shown: usize = self.errors.values().sum();
        if shown < self.failed {
            println!(
                "    {phase}: {} more errors with other messages",
                self.failed - shown
            );
        }
    }
}

/// Runs `count` operations from `concurrency` workers, each taking the next operation number:
/// `job(worker, n)`.
pub(crate) async fn measure<F, Fut>(concurrency: usize, count: usize, job: F) -> Outcome
where
    F: Fn(usize, usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|worker| {
            let (job, next) = (job.clone(), next.clone());
            tokio::spawn(async move {
                let mut outcome = Outcome::default();
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= count {
                        return outcome;
                    }
                    let started = Instant::now();
                    let result = job(worker, n).await;
                    outcome.record(result.map(|()| started.elapsed()));
                }
            })
        })
        .collect();
    let mut total = Outcome::default();
    for worker in workers {
        total.merge(worker.await.expect("a worker panicked"));
    }
    total.elapsed = start.elapsed();
    total
}

/// The value at quantile `q` of sorted `values`; NaN when there is none.
pub(crate) fn percentile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values[((values.len() as f64 * q) as usize).min(values.len() - 1)]
}

/// The unit of the CPU times in `/proc/<pid>/stat` (`getconf CLK_TCK`, 100 on Linux in practice).
static CLOCK_TICKS: LazyLock<f64> = LazyLock::new(|| {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok())
        .unwrap_or(100.0)
});

/// The CPU time (user + system) process `pid` has used so far, on Linux.
pub(crate) fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After "pid (comm) ", the fields from `state` on; utime and stime are fields 14 and 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_secs_f64(ticks as f64 / *CLOCK_TICKS))
}
