//! Logging never takes the server down: with stderr a closed pipe, `serve` starts, serves, and
//! stops cleanly on SIGTERM.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::helpers::TestDb;

#[tokio::test]
async fn a_closed_stderr_neither_crashes_the_server_nor_blocks_its_shutdown() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let url = db.url.clone();
    let data = dir.path().to_path_buf();
    let status = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_liaison"))
            .args(["serve", "--listen", "127.0.0.1:0", "--database-url", &url])
            .arg("--data-dir")
            .arg(&data)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Close the read end: every write to stderr now fails with EPIPE.
        drop(child.stderr.take());
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        let mut serving = None;
        while stdout.read_line(&mut line).unwrap_or(0) > 0 {
            if let Some(rest) = line.split("serving at ").nth(1) {
                serving = rest.split_whitespace().next().map(str::to_owned);
                break;
            }
            line.clear();
        }
        let base = serving.expect("the server started and said where it serves");
        // It answers (and logs each request to the closed stderr).
        let health = std::process::Command::new(env!("CARGO_BIN_EXE_liaison"))
            .args(["healthcheck", &base])
            .status()
            .unwrap();
        assert!(health.success(), "the server answers /readyz");
        let pid = child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
    .await
    .unwrap();
    let status = status.expect("the server stopped on SIGTERM");
    assert_eq!(status.code(), Some(0), "{status:?}");
}
