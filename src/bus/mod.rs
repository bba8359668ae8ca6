//! The wake-up bus: "something new for this person" signals that end long-polls at once.
//!
//! A signal carries no data; a woken waiter reads the store. Subscribing before reading and reading
//! again after every signal means no entry can slip between a read and a wait. The trait leaves room
//! for a database-backed bus (PostgreSQL `LISTEN/NOTIFY`) when several replicas share one database;
//! [`LocalBus`] serves one process; [`PgBus`] adds PostgreSQL `LISTEN/NOTIFY` so that a post on one
//! replica wakes long-polls on every replica.

mod handoff;
mod postgres;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

pub use handoff::{Handed, HandoffWaiter, Handoffs, Overflow};
pub use postgres::PgBus;

/// What a waiter waits on, e.g. a person's inbox.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Topic(String);

impl Topic {
    pub fn inbox(person: &crate::domain::PersonId) -> Self {
        Topic(format!("inbox:{person}"))
    }

    /// What `person`'s console shows changed without anything reaching her inbox: a message she
    /// wrote was read by a recipient's consumer, or a thread she opened was claimed.
    pub fn seen(person: &crate::domain::PersonId) -> Self {
        Topic(format!("seen:{person}"))
    }

    /// Something every reader of a channel's threads sees changed in one of them (a message, a
    /// claim or its release, a progress note, an approval decided, the task's or the remote
    /// task's state): the consoles of the channel's members read again.
    pub fn channel(name: &crate::domain::ChannelName) -> Self {
        Topic(format!("channel:{name}"))
    }

    /// A task `person`'s agents may claim became claimable: handed to ONE of the claimers waiting
    /// for work ([`WakeBus::hand`]), never published to all.
    pub fn claimable(person: &crate::domain::PersonId) -> Self {
        Topic(format!("claimable:{person}"))
    }

    /// Tokens, persons, channels, members or policies changed: cached copies are stale.
    pub fn directory() -> Self {
        Topic("directory".to_owned())
    }

    /// A task's event log (A2A streams and subscriptions).
    pub fn task(id: &str) -> Self {
        Topic(format!("task:{id}"))
    }

    /// A confirmation of one tool call was decided (SPEC §5b): the hook waiting for it reads it.
    pub fn confirmation(id: &str) -> Self {
        Topic(format!("confirmation:{id}"))
    }

    /// A confirmation asked by this credential (a token id) was decided or expired: the
    /// `claude/channel` bridge of that connection tells its live session.
    pub fn confirmations_of(credential: &str) -> Self {
        Topic(format!("confirmations:{credential}"))
    }

    /// The signing key ring changed (rotate, retire): every replica reloads it.
    pub fn keys() -> Self {
        Topic("keys".into())
    }

    /// The outbox: a commit enqueued deliveries (or finished one, freeing the next in order).
    pub fn outbox() -> Self {
        Topic("outbox".into())
    }

    /// Remote tasks (SPEC §8b): one became due to follow (a send recorded a task, a push
    /// arrived), so a follower may claim it now.
    pub fn remote() -> Self {
        Topic("remote".into())
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
    /// Hands one permit on `topic` to ONE waiter ([`handoff`]): on this replica if one can use
    /// it, else on each other replica once.
    fn hand(&self, topic: &Topic);
    /// A waiter for the permits handed on `topic`.
    fn handoff(&self, topic: &Topic) -> HandoffWaiter;
}

/// Senders by topic, shared by a bus and its subscriptions.
type Topics = Arc<Mutex<HashMap<Topic, watch::Sender<u64>>>>;

/// One waiter's view of a topic. Dropping the last subscription of a topic removes the topic, so
/// the bus holds only topics someone waits on (task and inbox topics would otherwise pile up).
pub struct Subscription {
    /// `None` only while being dropped.
    rx: Option<watch::Receiver<u64>>,
    topic: Topic,
    topics: std::sync::Weak<Mutex<HashMap<Topic, watch::Sender<u64>>>>,
}

impl Subscription {
    /// Waits for the next publish after the previous call (or after subscribing). Never returns
    /// while the bus is alive and silent.
    pub async fn woken(&mut self) {
        let rx = self.rx.as_mut().expect("present until dropped");
        if rx.changed().await.is_err() {
            // The bus was dropped (shutdown): behave as a bus that never wakes.
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let Some(topics) = self.topics.upgrade() else {
            return;
        };
        // Under the lock, so that a concurrent subscribe either sees the topic with its new
        // receiver counted or finds it gone and creates it afresh.
        let mut topics = topics.lock().unwrap_or_else(|e| e.into_inner());
        drop(self.rx.take());
        if topics
            .get(&self.topic)
            .is_some_and(|tx| tx.receiver_count() == 0)
        {
            topics.remove(&self.topic);
        }
    }
}

/// The in-process bus: one `watch` channel per topic with live subscribers.
#[derive(Default, Clone)]
pub struct LocalBus {
    /// Senders by topic. A std mutex: held only for map operations, never across an await.
    topics: Topics,
    /// Waiters for hand-offs, by topic.
    handoffs: Handoffs,
}

impl LocalBus {
    /// A bus whose hand-offs that no waiter here could use go to `overflow`.
    pub(crate) fn with_handoffs(handoffs: Handoffs) -> Self {
        LocalBus {
            topics: Topics::default(),
            handoffs,
        }
    }

    /// The hand-offs of this bus.
    pub fn handoffs(&self) -> &Handoffs {
        &self.handoffs
    }

    /// Wakes every subscriber of every topic: after a gap in cross-replica notifications, waiters
    /// re-read the store rather than risk sleeping through an entry.
    pub fn publish_all(&self) {
        let topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        for tx in topics.values() {
            tx.send_modify(|n| *n = n.wrapping_add(1));
        }
        drop(topics);
        self.handoffs.hand_all();
    }

    /// Topics with at least one live subscription.
    pub fn topic_count(&self) -> usize {
        self.topics.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl WakeBus for LocalBus {
    fn publish(&self, topic: &Topic) {
        let topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = topics.get(topic) {
            tx.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    fn subscribe(&self, topic: &Topic) -> Subscription {
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        let tx = topics
            .entry(topic.clone())
            .or_insert_with(|| watch::channel(0).0);
        Subscription {
            rx: Some(tx.subscribe()),
            topic: topic.clone(),
            topics: Arc::downgrade(&self.topics),
        }
    }

    fn hand(&self, topic: &Topic) {
        self.handoffs.hand(topic, false);
    }

    fn handoff(&self, topic: &Topic) -> HandoffWaiter {
        self.handoffs.waiter(topic)
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

    #[test]
    fn a_topic_goes_with_its_last_subscription() {
        let bus = LocalBus::default();
        let task = Topic::task("t1");
        let first = bus.subscribe(&task);
        let second = bus.subscribe(&task);
        let other = bus.subscribe(&Topic::task("t2"));
        assert_eq!(bus.topic_count(), 2);
        drop(first);
        assert_eq!(bus.topic_count(), 2);
        drop(second);
        assert_eq!(bus.topic_count(), 1);
        // A topic subscribed again after it went is a fresh one that still wakes.
        let mut again = bus.subscribe(&task);
        bus.publish(&task);
        assert!(futures::FutureExt::now_or_never(again.woken()).is_some());
        drop((again, other));
        assert_eq!(bus.topic_count(), 0);
    }
}
