//! The cross-replica wake-up bus on PostgreSQL `LISTEN/NOTIFY`.
//!
//! `publish` wakes local subscribers at once and queues a `pg_notify` on the channel
//! [`CHANNEL`] (topics queued together go out in one notification, one per line, after a first
//! line naming the replica that sent it); a listener task turns every notification of another
//! replica into a local publish. Its own come back too, and are skipped: their waiters were woken
//! when they were published, and a second wake-up is a second read of the store for each (a
//! blocking `SendMessage` read its task twice per change). A replica of an earlier version sends
//! no first line, and all its lines are published; it takes this one's first line for a topic
//! nobody waits on. A notification only says "read again", so duplicates are harmless. When the
//! listening connection drops, notifications sent meanwhile are lost: on reconnect every local
//! waiter is woken to re-read the store, so no entry is slept through.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool, PgPoolOptions};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{HandoffWaiter, Handoffs, LocalBus, Subscription, Topic, WakeBus};

/// The PostgreSQL notification channel shared by all replicas.
pub(super) const CHANNEL: &str = "liaison_wake";

/// Local waiters plus notifications across replicas.
pub struct PgBus {
    local: LocalBus,
    /// Topics to announce to the other replicas; drained by the notifier task.
    outgoing: mpsc::UnboundedSender<Topic>,
}

impl PgBus {
    /// Connects, starts the listener and notifier tasks (which stop with `shutdown`), and returns
    /// once the listener is subscribed.
    pub async fn start(url: &str, shutdown: CancellationToken) -> Result<Arc<PgBus>, sqlx::Error> {
        let pool = PgPoolOptions::new().max_connections(2).connect(url).await?;
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.listen(CHANNEL).await?;
        let (tx, rx) = mpsc::unbounded_channel();
        // A hand-off no waiter here could use goes to the other replicas, once, as a line
        // naming this replica (which ignores its own) and numbered (so that two permits are not
        // merged into one by the notifier's deduplication).
        let origin: Arc<str> = uuid::Uuid::now_v7().simple().to_string().into();
        let overflow = {
            let (tx, origin) = (tx.clone(), origin.clone());
            let n = std::sync::atomic::AtomicU64::new(0);
            Arc::new(move |topic: &Topic| {
                let n = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let line = format!("{HAND}{origin}|{n}|{}", topic.as_str());
                let _ = tx.send(Topic::from_wire(line));
            })
        };
        let local = LocalBus::with_handoffs(Handoffs::with_overflow(overflow));
        tokio::spawn(listen(
            listener,
            local.clone(),
            origin.clone(),
            shutdown.clone(),
        ));
        tokio::spawn(notify(pool, rx, origin, shutdown));
        Ok(Arc::new(PgBus {
            local,
            outgoing: tx,
        }))
    }
}

impl PgBus {
    /// Topics with at least one live local subscription.
    pub fn topic_count(&self) -> usize {
        self.local.topic_count()
    }
}

impl WakeBus for PgBus {
    fn publish(&self, topic: &Topic) {
        self.local.publish(topic);
        let _ = self.outgoing.send(topic.clone());
    }

    fn subscribe(&self, topic: &Topic) -> Subscription {
        self.local.subscribe(topic)
    }

    fn hand(&self, topic: &Topic) {
        // Here first; the other replicas only when no waiter here could use it (the overflow).
        self.local.handoffs().hand(topic, false);
    }

    fn handoff(&self, topic: &Topic) -> HandoffWaiter {
        self.local.handoffs().waiter(topic)
    }
}

/// The prefix of a notification line that hands a permit: `hand|<origin>|<n>|<topic>`.
const HAND: &str = "hand|";

/// The prefix of a notification's first line, naming the replica that sent it: `from|<origin>`.
const FROM: &str = "from|";

/// Whether `payload` is a notification this replica (`origin`) sent.
fn is_own(payload: &str, origin: &str) -> bool {
    payload
        .split('\n')
        .next()
        .and_then(|first| first.strip_prefix(FROM))
        .is_some_and(|from| from == origin)
}

/// A line of a notification received: a hand-off from another replica goes to one waiter here
/// (and no further); any other line wakes the topic's subscribers.
fn received(local: &LocalBus, origin: &str, line: &str) {
    let Some(rest) = line.strip_prefix(HAND) else {
        local.publish(&Topic::from_wire(line.to_owned()));
        return;
    };
    let mut parts = rest.splitn(3, '|');
    let (Some(from), Some(_n), Some(topic)) = (parts.next(), parts.next(), parts.next()) else {
        return;
    };
    if from != origin {
        local
            .handoffs()
            .hand(&Topic::from_wire(topic.to_owned()), true);
    }
}

async fn listen(
    mut listener: PgListener,
    local: LocalBus,
    origin: Arc<str>,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            next = listener.try_recv() => match next {
                Ok(Some(n)) => {
                    if is_own(n.payload(), &origin) {
                        continue;
                    }
                    // One notification may carry several topics, one per line.
                    for line in n.payload().split('\n').filter(|l| !l.starts_with(FROM)) {
                        received(&local, &origin, line);
                    }
                }
                // The connection dropped; sqlx reconnects on the next call. Anything sent in the
                // gap is lost, so wake everyone to re-read.
                Ok(None) => local.publish_all(),
                Err(e) => {
                    tracing::warn!(error = %e, "Lost the wake-up listener; retrying.");
                    local.publish_all();
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            },
        }
    }
}

/// Longest payload of one notification (PostgreSQL's limit is 8000 bytes).
const MAX_PAYLOAD: usize = 7900;

/// The payloads announcing `topics` from replica `origin`: each a first line naming it, then
/// the topics, newline-separated, as few notifications as fit.
fn payloads(topics: &[Topic], origin: &str) -> Vec<String> {
    let head = format!("{FROM}{origin}");
    let mut out: Vec<String> = Vec::new();
    for t in topics {
        match out.last_mut() {
            Some(p) if p.len() + 1 + t.as_str().len() <= MAX_PAYLOAD => {
                p.push('\n');
                p.push_str(t.as_str());
            }
            _ => out.push(format!("{head}\n{}", t.as_str())),
        }
    }
    out
}

async fn notify(
    pool: PgPool,
    mut rx: mpsc::UnboundedReceiver<Topic>,
    origin: Arc<str>,
    shutdown: CancellationToken,
) {
    let mut batch = Vec::new();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            n = rx.recv_many(&mut batch, 256) => if n == 0 { return },
        }
        batch.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        batch.dedup();
        // One notification for everything queued meanwhile: one round trip, not one per topic.
        for payload in payloads(&batch, &origin) {
            let sent = sqlx::query("SELECT pg_notify($1, $2)")
                .bind(CHANNEL)
                .bind(&payload)
                .execute(&pool)
                .await;
            if let Err(e) = sent {
                tracing::warn!(error = %e, topics = batch.len(), "Could not notify the other replicas.");
            }
        }
        batch.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_share_notifications_up_to_the_payload_limit() {
        let few = [
            Topic::from_wire("inbox:a".into()),
            Topic::from_wire("task:t".into()),
        ];
        assert_eq!(payloads(&few, "r1"), ["from|r1\ninbox:a\ntask:t"]);
        let many: Vec<Topic> = (0..2000)
            .map(|i| Topic::from_wire(format!("inbox:p{i:05}")))
            .collect();
        let out = payloads(&many, "r1");
        assert!(out.len() > 1 && out.iter().all(|p| p.len() <= MAX_PAYLOAD));
        assert!(out.iter().all(|p| p.starts_with("from|r1\n")));
        let back: Vec<&str> = out
            .iter()
            .flat_map(|p| p.split('\n'))
            .filter(|l| !l.starts_with(FROM))
            .collect();
        assert_eq!(back, many.iter().map(Topic::as_str).collect::<Vec<_>>());
    }

    #[test]
    fn a_replica_skips_its_own_notifications_and_takes_every_other() {
        let [own] = payloads(&[Topic::from_wire("task:t".into())], "r1")
            .try_into()
            .unwrap();
        assert!(is_own(&own, "r1"));
        assert!(!is_own(&own, "r2"));
        // An earlier version's notification names no replica: it is always taken.
        assert!(!is_own("task:t\ninbox:a", "r1"));
    }
}
