//! Durability: a separate process posts concurrently and reports each acknowledged post; it is
//! killed with SIGKILL right after the N-th acknowledgement; every acknowledged message must be
//! there when the store is opened again.
//!
//! The child is this same test binary, re-run with `--ignored --exact` on `child_process_posts`.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;

use liaison::bus::LocalBus;
use liaison::clock::SystemClock;
use liaison::domain::MessageId;
use liaison::service::{Service, Settings};
use liaison::store::Store;
use tokio_util::sync::CancellationToken;

use crate::helpers::{TestDb, TestEnv, post};

const CHILD_ENV: &str = "LIAISON_DURABILITY_CHILD_DB";
const ACKS: usize = 300;

#[tokio::test]
async fn every_acknowledged_post_survives_a_kill_9() {
    let db = TestDb::new().await;
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "durability::child_process_posts",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &db.url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut acked = Vec::new();
    for line in stdout.lines() {
        let line = line.unwrap();
        if let Some(id) = line.strip_prefix("ACK ") {
            acked.push(MessageId::parse(id).unwrap());
            if acked.len() == ACKS {
                child.kill().unwrap(); // SIGKILL on Unix
                break;
            }
        }
    }
    child.wait().unwrap();
    assert_eq!(
        acked.len(),
        ACKS,
        "the child acknowledged enough posts before the kill"
    );

    let store = Store::open(&db.url).await.unwrap();
    let mut missing = 0;
    for id in &acked {
        if store.message(id).await.unwrap().is_none() {
            missing += 1;
        }
    }
    assert_eq!(missing, 0, "acknowledged messages lost after kill -9");
    store.close().await;
}

/// The child: posts from 16 concurrent tasks forever, printing `ACK <id>` after each success.
#[tokio::test]
#[ignore = "run by every_acknowledged_post_survives_a_kill_9 as a separate process"]
async fn child_process_posts() {
    let Ok(url) = std::env::var(CHILD_ENV) else {
        return;
    };
    let store = Store::open(&url).await.unwrap();
    let service = Service::new(
        liaison::service::Deps::new(
            Arc::new(store),
            Arc::new(LocalBus::default()),
            Arc::new(SystemClock),
            Settings::default(),
            CancellationToken::new(),
        )
        .unwrap(),
    );
    let issued = service.bootstrap().await.unwrap().unwrap();
    let admin = service.authenticate(&issued.secret).await.unwrap();
    let env = TestEnv {
        service: service.clone(),
        clock: liaison::clock::ManualClock::starting_at(crate::helpers::t0()),
        admin,
        _db: None,
    };
    let alice = env.member("alice", "claude@a:1").await;
    env.person("bob", liaison::domain::PersonKind::Member).await;
    env.channel("demo", &["alice", "bob"]).await;
    let tasks: Vec<_> = (0..16)
        .map(|t| {
            let (s, a) = (service.clone(), alice.clone());
            tokio::spawn(async move {
                for i in 0.. {
                    let r = s
                        .post(
                            &a,
                            post("announce", Some("demo"), None, &format!("t{t} #{i}")),
                        )
                        .await
                        .unwrap();
                    use std::io::Write as _;
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ACK {}", r.message).unwrap();
                    out.flush().unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}
