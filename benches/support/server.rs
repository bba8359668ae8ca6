//! The server under test as a process: `liaison serve` (the binary Cargo built beside the bench,
//! or `LIAISON_BENCH_BIN` to compare another build) on a fresh data directory, SQLite there or a PostgreSQL URL, with the bench config (rate limits
//! lifted, the connection cap raised). `LIAISON_BENCH_SERVER_PREFIX` is a command the server is
//! started under (split at spaces): `taskset -c 1` pins it to CPU 1, off the load's core (run the
//! bench itself under `taskset -c 0`); `valgrind --tool=callgrind --instr-atstart=no …` counts
//! its instructions, and with `LIAISON_BENCH_CALLGRIND=1` the benches that support it collect only
//! during a measured cell ([`Server::callgrind`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};

use super::{Outcome, measure, percentile};

/// The server's stderr, in its data directory.
const SERVER_LOG: &str = "server.log";

/// `VmRSS` and `VmHWM` (peak) in KiB.
pub(crate) type Memory = Option<(f64, f64)>;

/// A `liaison serve` process on its own data directory and what the bench needs from it.
pub(crate) struct Server {
    child: tokio::process::Child,
    /// The public base URL it printed (`http://127.0.0.1:PORT`).
    pub(crate) url: String,
    /// The demo's people and tokens (the replica reads them from the first server).
    demo: Option<liaison::app::demo::Demo>,
    /// The bootstrap admin token (written by the first server to start on a database).
    pub(crate) admin_token: String,
    /// Scrapes `/metrics`.
    http: reqwest::Client,
    /// How far [`Server::log_summary`] has read the server's log.
    log_read: Mutex<usize>,
    dir: tempfile::TempDir,
}

impl Server {
    /// Starts `serve` (with `--demo` when `demo`) with the bench config on a fresh data
    /// directory, SQLite there or `database_url`; every process of one database gets the same
    /// `master_key`; `extra_config` is appended to the config file (TOML sections of its own).
    pub(crate) async fn start(
        database_url: Option<&str>,
        master_key: &str,
        demo: bool,
        files: u64,
        extra_config: &str,
    ) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("bench.toml");
        // Every connection of a bench comes from one address (loopback): its share of the cap is
        // the whole cap.
        let connections = files.saturating_sub(200).max(512);
        std::fs::write(
            &config,
            format!(
                "[limits]\n\
                 agent = {{ per_s = 0, burst = 0 }}\n\
                 human = {{ per_s = 0, burst = 0 }}\n\
                 admin = {{ per_s = 0, burst = 0 }}\n\
                 external = {{ per_s = 0, burst = 0 }}\n\
                 [server]\n\
                 max_connections = {connections}\n\
                 max_connections_per_address = {connections}\n\
                 {extra_config}",
            ),
        )
        .unwrap();
        let built = env!("CARGO_BIN_EXE_liaison").to_owned();
        let binary = std::env::var("LIAISON_BENCH_BIN").unwrap_or(built);
        let prefix = std::env::var("LIAISON_BENCH_SERVER_PREFIX").unwrap_or_default();
        let mut words = prefix.split_whitespace();
        let mut command = match words.next() {
            Some(program) => {
                let mut command = tokio::process::Command::new(program);
                command.args(words).arg(&binary);
                command
            }
            None => tokio::process::Command::new(&binary),
        };
        command
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .arg("--data-dir")
            .arg(dir.path())
            .args(["--listen", "127.0.0.1:0"]);
        if demo {
            command.arg("--demo");
        }
        if let Some(url) = database_url {
            command.args(["--database-url", url]);
        }
        command
            .env("RUST_LOG", "warn")
            .env("LIAISON_MASTER_KEY", master_key)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(
                std::fs::File::create(dir.path().join(SERVER_LOG)).unwrap(),
            ))
            .kill_on_drop(true);
        let mut child = command.spawn().expect("the liaison binary starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let url = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                // "liaison is serving at http://127.0.0.1:PORT (listening on 127.0.0.1:PORT)"
                if let Some((_, rest)) = line.split_once("serving at ") {
                    return rest.split_once(' ').map_or(rest, |(url, _)| url).to_owned();
                }
            }
            panic!("liaison exited before serving");
        })
        .await
        .expect("liaison serves within 60 s");
        // Keep reading stdout so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).ok();
        let demo = read(liaison::app::demo::DEMO_FILE)
            .map(|text| serde_json::from_str::<liaison::app::demo::Demo>(&text).unwrap());
        let admin_token = read(liaison::app::ADMIN_TOKEN_FILE)
            .map(|t| t.trim().to_owned())
            .unwrap_or_default();
        Server {
            child,
            url,
            demo,
            admin_token,
            http: reqwest::Client::new(),
            log_read: Mutex::new(0),
            dir,
        }
    }

    /// Prints how many lines the server logged (`RUST_LOG=warn`: warnings and errors) since the
    /// last call, with a few distinct ones (timestamps cut).
    pub(crate) fn log_summary(&self) {
        let text = std::fs::read_to_string(self.dir.path().join(SERVER_LOG)).unwrap_or_default();
        let mut read = self.log_read.lock().unwrap_or_else(|e| e.into_inner());
        let new = text.get(*read..).unwrap_or_default();
        *read = text.len();
        let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
        for line in new.lines() {
            let line = line.split_once(' ').map_or(line, |(_, rest)| rest).trim();
            let line = line.get(..line.len().min(160)).unwrap_or(line);
            *kinds.entry(line).or_default() += 1;
        }
        if kinds.is_empty() {
            return;
        }
        println!(
            "    server log: {} lines, {} distinct (timestamps cut), e.g.:",
            new.lines().count(),
            kinds.len()
        );
        let mut common: Vec<_> = kinds.into_iter().collect();
        common.sort_by_key(|line| std::cmp::Reverse(line.1));
        for (line, count) in common.into_iter().take(3) {
            println!("      {count} × {line}");
        }
    }

    pub(crate) fn demo(&self) -> &liaison::app::demo::Demo {
        self.demo.as_ref().expect("a server started with --demo")
    }

    pub(crate) fn mcp_url(&self) -> String {
        format!("{}/mcp", self.url)
    }

    /// The CPU time (user + system) the server process has used so far, on Linux.
    pub(crate) fn cpu_time(&self) -> Option<Duration> {
        super::cpu_time(self.child.id()?)
    }

    /// The measured part of a cell: `count` operations from `concurrency` workers (under
    /// callgrind the only ones counted, dumped as `label`); their outcome and the server's CPU
    /// per operation.
    pub(crate) async fn measure_cell<F, Fut>(
        &self,
        label: &str,
        concurrency: usize,
        count: usize,
        job: F,
    ) -> (Outcome, String)
    where
        F: Fn(usize, usize) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = Result<(), String>> + Send + 'static,
    {
        self.callgrind(true, label).await;
        let cpu_before = self.cpu_time();
        let cell = measure(concurrency, count, job).await;
        let cpu = cpu_per(self, cpu_before, count);
        self.callgrind(false, label).await;
        (cell, cpu)
    }

    /// With `LIAISON_BENCH_CALLGRIND` set (the server started under `valgrind --tool=callgrind
    /// --instr-atstart=no`): instrumentation on and the counters zeroed (`start`), or a dump
    /// named after `label` and instrumentation off (`stop`), by `callgrind_control`.
    pub(crate) async fn callgrind(&self, start: bool, label: &str) {
        let (Some(pid), Some(_)) = (self.child.id(), std::env::var_os("LIAISON_BENCH_CALLGRIND"))
        else {
            return;
        };
        let pid = pid.to_string();
        let dump = format!("--dump={label}");
        let steps: [[&str; 2]; 2] = if start {
            [["--instr=on", &pid], ["--zero", &pid]]
        } else {
            [[&dump, &pid], ["--instr=off", &pid]]
        };
        for args in steps {
            let _ = tokio::process::Command::new("callgrind_control")
                .args(args)
                .stdout(Stdio::null())
                .status()
                .await;
        }
    }

    /// `VmRSS` and `VmHWM` (peak) of the server process in KiB, on Linux.
    pub(crate) fn memory(&self) -> Memory {
        memory_of(self.child.id()?)
    }

    /// One unlabelled gauge or counter from `/metrics`.
    pub(crate) async fn metric(&self, name: &str) -> Option<f64> {
        let text = self
            .http
            .get(format!("{}/metrics", self.url))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    }

    /// SIGTERM (a graceful stop that closes the store), SIGKILL after 15 s.
    pub(crate) async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = tokio::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .await;
        }
        if tokio::time::timeout(Duration::from_secs(15), self.child.wait())
            .await
            .is_err()
        {
            println!("    liaison did not stop within 15 s after SIGTERM; killing it");
            let _ = self.child.kill().await;
        }
    }
}

/// The server's CPU time since `before`, in µs per operation (`-` without `/proc`).
pub(crate) fn cpu_per(server: &Server, before: Option<Duration>, operations: usize) -> String {
    server
        .cpu_time()
        .zip(before)
        .map_or("-".into(), |(after, before)| {
            format!(
                "{:.0}",
                (after - before).as_secs_f64() * 1e6 / operations as f64
            )
        })
}

/// Prints a cell's row: `lead` (the columns naming the cell), then the operations, their rate,
/// p50 and p99 in ms, the failures and `cpu`; then the warm-up's and the cell's failures.
pub(crate) fn print_row(lead: &str, count: usize, warmup: &Outcome, cell: &Outcome, cpu: &str) {
    let ms = cell.latencies_ms();
    println!(
        "{lead} {count:>6} {:>8.0} {:>8.2} {:>8.2} {:>6} {cpu:>11}",
        ms.len() as f64 / cell.elapsed.as_secs_f64(),
        percentile(&ms, 0.50),
        percentile(&ms, 0.99),
        cell.failed,
    );
    warmup.report("warm-up");
    cell.report("measured");
}

/// `VmRSS` and `VmHWM` (peak) of process `pid` in KiB, on Linux.
pub(crate) fn memory_of(pid: u32) -> Memory {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<f64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// `bytes` random bytes in hex (a master key).
pub(crate) fn random_hex(bytes: usize) -> String {
    use ring::rand::SecureRandom as _;
    let mut key = vec![0u8; bytes];
    ring::rand::SystemRandom::new()
        .fill(&mut key)
        .expect("system randomness");
    key.iter().map(|b| format!("{b:02x}")).collect()
}
