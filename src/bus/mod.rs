//! The wake-up bus: "something new for this person" signals that end long-polls at once.
//!
//! A signal carries no data; a woken waiter reads the store. Subscribing before reading and reading
//! again after every signal means no entry can slip between a read and a wait. The trait leaves room
//! for a database-backed bus (PostgreSQL `LISTEN/NOTIFY`) when several replicas share one database;
//! [`LocalBus`] serves one process; [`PgBus`] adds PostgreSQL `LISTEN/NOTIFY` so that a post on one
//! replica wakes long-polls on every replica.

mod postgres;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

pub use postgres::PgBus;

/// What a waiter waits on, e.g. a person's inbox.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Topic(String);

impl Topic {
    pub fn inbox(person: &crate::domain::PersonId) -> Self {
        Topic(format!("inbox:{person}"))
    }

    /// A task's event log (A2A streams and subscriptions).
    pub fn task(id: &str) -> Self {
        Topic(format!("task:{id}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A topic received from another replica.
    pub(crate) fn from_wire(s: String) -> Self {
        Topic(s)
    }
}

pub trait WakeBus: Send + Sync + 'static {
    /// Wakes every current subscriber of `topic`.
    fn publish(&self, topic: &Topic);
    /// A subscription that sees every publish made after this call returns.
    fn subscribe(&self, topic: &Topic) -> Subscription;
}

/// One waiter's view of a topic.
pub struct Subscription(watch::Receiver<u64>);

impl Subscription {
    /// Waits for the next publish after the previous call (or after subscribing). Never returns
    /// while the bus is alive and silent.
    pub async fn woken(&mut self) {
        if self.0.changed().await.is_err() {
            // The bus was dropped (shutdown): behave as a bus that never wakes.
            std::future::pending::<()>().await;
        }
    }
}

/// The in-process bus: one `watch` channel per topic with live subscribers.
#[derive(Default, Clone)]
pub struct LocalBus {
    /// Senders by topic. A std mutex: held only for map operations, never across an await.
    topics: Arc<Mutex<HashMap<Topic, watch::Sender<u64>>>>,
}

impl LocalBus {
    /// Wakes every subscriber of every topic: after a gap in cross-replica notifications, waiters
    /// re-read the store rather than risk sleeping through an entry.
    pub fn publish_all(&self) {
        let topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        for tx in topics.values() {
            tx.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

impl WakeBus for LocalBus {
    fn publish(&self, topic: &Topic) {
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = topics.get(topic) {
            if tx.receiver_count() == 0 {
                topics.remove(topic);
            } else {
                tx.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }

    fn subscribe(&self, topic: &Topic) -> Subscription {
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        let tx = topics
            .entry(topic.clone())
            .or_insert_with(|| watch::channel(0).0);
        Subscription(tx.subscribe())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::domain::PersonId;

    #[tokio::test]
    async fn a_publish_wakes_subscribers_of_that_topic_only() {
        let bus = LocalBus::default();
        let alice = Topic::inbox(&PersonId::parse("alice").unwrap());
        let bob = Topic::inbox(&PersonId::parse("bob").unwrap());
        let mut a = bus.subscribe(&alice);
        let mut b = bus.subscribe(&bob);
        bus.publish(&alice);
        tokio::time::timeout(Duration::from_secs(1), a.woken())
            .await
            .unwrap();
        assert!(
            tokio::time::timeout(Duration::from_millis(20), b.woken())
                .await
                .is_err()
        );
    }
}
