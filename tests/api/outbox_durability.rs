//! The outbox survives `kill -9`: a separate process posts while its worker delivers
//! `message.created` webhooks to a slow receiver, and is killed mid-way (deliveries queued and in
//! flight). A worker started afterwards on the same database, once the dead worker's leases have
//! run out, delivers the rest: the receiver, deduplicating by `webhook-id`, sees every
//! acknowledged message.
//!
//! The child is this same test binary, re-run with `--ignored --exact` on `outbox_child_posts`.

use std::collections::HashSet;
use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use liaison::bus::LocalBus;
use liaison::clock::{ManualClock, SystemClock};
use liaison::domain::Timestamp;
use liaison::keys::ring::MasterKey;
use liaison::service::{Service, Settings, WebhookSpec};
use liaison::store::Store;
use tokio_util::sync::CancellationToken;

use crate::helpers::{TestDb, TestEnv, post};
use crate::outbox::{Answer, MASTER_HEX, Receiver, outbox_settings, ring, worker};

const CHILD_DB: &str = "LIAISON_OUTBOX_CHILD_DB";
const CHILD_HOOK: &str = "LIAISON_OUTBOX_CHILD_HOOK";
const ACKS: usize = 120;

fn settings() -> Settings {
    Settings {
        outbox: outbox_settings(),
        ..Settings::default()
    }
}

#[tokio::test]
async fn outbox_deliveries_survive_a_kill_9_and_are_all_delivered_after_restart() {
    let db = TestDb::new().await;
    let rx = Receiver::start().await;
    // Slow answers keep deliveries queued and in flight when the kill comes.
    rx.answer(&[Answer::Slow(Duration::from_millis(150)); 10_000]);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "outbox_durability::outbox_child_posts",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DB, &db.url)
        .env(CHILD_HOOK, &rx.url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut acked = Vec::new();
    let reader = tokio::task::spawn_blocking(move || {
        for line in stdout.lines() {
            let line = line.unwrap();
            if let Some(id) = line.strip_prefix("ACK ") {
                acked.push(id.to_owned());
                if acked.len() == ACKS {
                    child.kill().unwrap(); // SIGKILL on Unix
                    break;
                }
            }
        }
        child.wait().unwrap();
        acked
    });
    let acked = reader.await.unwrap();
    assert_eq!(acked.len(), ACKS, "the child acknowledged enough posts");
    let before = rx.got().len();

    // Restart: a new worker on the same database, after the dead worker's leases ran out.
    let store = Store::open(&db.url).await.unwrap();
    let later = chrono::Utc::now().timestamp_millis() + 10 * 60 * 1000;
    let service = Service::new(
        liaison::service::Deps::new(
            Arc::new(store),
            Arc::new(LocalBus::default()),
            Arc::new(ManualClock::starting_at(Timestamp(later))),
            settings(),
            CancellationToken::new(),
        )
        .unwrap()
        .with_master(MasterKey::from_hex(MASTER_HEX).unwrap()),
    );
    rx.script.lock().unwrap().clear();
    let w = worker(&service, Arc::new(ring()));
    let mut after = 0;
    while w.deliver_next().await.unwrap().is_some() {
        after += 1;
    }
    assert!(
        after > 0,
        "deliveries were left for the restarted worker ({before} arrived before)"
    );
    let seen: HashSet<String> = rx
        .got()
        .iter()
        .filter(|r| r.body["type"] == "message.created")
        .map(|r| r.body["data"]["id"].as_str().unwrap().to_owned())
        .collect();
    let missing: Vec<&String> = acked.iter().filter(|id| !seen.contains(*id)).collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged messages never delivered",
        missing.len()
    );
    // Every webhook-id the receiver saw is one event: duplicates (retries of in-flight
    // attempts) carry the same id.
    let ids: HashSet<String> = rx
        .got()
        .iter()
        .map(|r| r.headers["webhook-id"].to_str().unwrap().to_owned())
        .collect();
    assert!(ids.len() >= ACKS);
    service.store().close().await;
}

/// The child: sets up a webhook, runs a worker, posts from 8 tasks forever, printing
/// `ACK <message id>` after each acknowledged post.
#[tokio::test]
#[ignore = "run by outbox_deliveries_survive_a_kill_9_and_are_all_delivered_after_restart"]
async fn outbox_child_posts() {
    let (Ok(url), Ok(hook)) = (std::env::var(CHILD_DB), std::env::var(CHILD_HOOK)) else {
        return;
    };
    let store = Store::open(&url).await.unwrap();
    let bus = Arc::new(LocalBus::default());
    let service = Service::new(
        liaison::service::Deps::new(
            Arc::new(store),
            bus.clone(),
            Arc::new(SystemClock),
            settings(),
            CancellationToken::new(),
        )
        .unwrap()
        .with_master(MasterKey::from_hex(MASTER_HEX).unwrap()),
    );
    let issued = service.bootstrap().await.unwrap().unwrap();
    let admin = service.authenticate(&issued.secret).await.unwrap();
    let env = TestEnv {
        service: service.clone(),
        clock: ManualClock::starting_at(crate::helpers::t0()),
        admin,
        _db: None,
    };
    let alice = env.member("alice", "claude@a:1").await;
    env.person("bob", liaison::domain::PersonKind::Member).await;
    env.channel("demo", &["alice", "bob"]).await;
    let spec = WebhookSpec {
        url: hook,
        events: vec!["message.created".into()],
        ..Default::default()
    };
    service.add_webhook(&env.admin, spec).await.unwrap();
    let w = Arc::new(worker(&service, Arc::new(ring())));
    tokio::spawn(w.run(bus, 16, CancellationToken::new()));
    let tasks: Vec<_> = (0..8)
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
                    {
                        use std::io::Write as _;
                        let mut out = std::io::stdout().lock();
                        writeln!(out, "ACK {}", r.message).unwrap();
                        out.flush().unwrap();
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}
