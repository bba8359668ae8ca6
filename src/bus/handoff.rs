//! Hand-offs: a wake-up given to ONE waiter of a topic instead of all of them (issue 49). A new
//! claimable task needs one claimer, not the herd of every session waiting for work: each
//! [`Handoffs::hand`] is a permit that goes to one waiter, the one waiting longest among those
//! that have not read the store since the permit was issued.
//!
//! A waiter reads the store after registering and again after every hand-off ([`HandoffWaiter::reading`]
//! marks each read), so nothing published after it registered is missed: a permit handed while
//! it was busy reading stays with it and ends its next wait at once. Nothing is stranded:
//!
//! - a woken waiter whose read found nothing it could take (another replica's claimer took the
//!   task, or the task is addressed to another of the person's connections) passes the permit
//!   on ([`HandoffWaiter::pass_on`]) to a waiter that has not read since the permit was issued;
//!   when every waiter has, each of them has seen the task and none could take it, and the
//!   permit ends;
//! - a waiter that goes away (its client hung up, its wait timed out, the server is stopping)
//!   holding a permit it has not finished with passes it on the same way, from its `Drop`;
//! - with no waiter at all, a permit ends: the next claimer reads the store before it waits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::Topic;

/// The waiters of every topic someone waits on.
#[derive(Default, Clone)]
pub struct Handoffs {
    queues: Arc<Mutex<HashMap<Topic, Queue>>>,
    /// Where a permit of this replica's that no waiter here could use goes (the other replicas,
    /// [`super::PgBus`]); a permit received from another replica ends here.
    overflow: Option<Overflow>,
}

/// Where permits no waiter here could use go.
pub type Overflow = Arc<dyn Fn(&Topic) + Send + Sync>;

/// A permit: its number on its topic here, and whether another replica issued it.
#[derive(Debug, Clone, Copy)]
struct Permit {
    n: u64,
    remote: bool,
}

#[derive(Default)]
struct Queue {
    /// Permits issued so far on this topic; a permit's number is this after its issue.
    issued: u64,
    /// Next waiter id.
    next_id: u64,
    /// Oldest first.
    waiters: Vec<Slot>,
}

struct Slot {
    id: u64,
    /// In [`HandoffWaiter::handed`] now.
    waiting: bool,
    /// The newest permit issued before its last read began: it has seen everything up to there.
    read_at: u64,
    /// A permit handed to it and not yet followed by a read.
    handed: Option<Permit>,
    notify: Arc<Notify>,
}

impl Queue {
    /// Gives permit `permit` to one waiter that has not read since it was issued and holds none:
    /// one waiting if any (longest first), else one busy reading (it will read again before it
    /// waits). Says whether a waiting one got it.
    fn give(&mut self, permit: Permit, except: Option<u64>) -> Handed {
        let eligible =
            |s: &Slot| s.read_at < permit.n && s.handed.is_none() && Some(s.id) != except;
        let pick = self
            .waiters
            .iter()
            .position(|s| s.waiting && eligible(s))
            .map(|i| (i, Handed::ToWaiting))
            .or_else(|| {
                self.waiters
                    .iter()
                    .position(eligible)
                    .map(|i| (i, Handed::ToBusy))
            });
        let Some((i, handed)) = pick else {
            return Handed::ToNobody;
        };
        let slot = &mut self.waiters[i];
        slot.handed = Some(permit);
        slot.notify.notify_one();
        handed
    }
}

/// Where a permit went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handed {
    /// To a waiter waiting now.
    ToWaiting,
    /// To a waiter reading the store now (it reads again before it waits).
    ToBusy,
    /// No waiter here could use it.
    ToNobody,
}

impl Handoffs {
    /// Hand-offs whose permits no waiter here could use go to `overflow` (once: a permit
    /// received from another replica is never sent on).
    pub fn with_overflow(overflow: Overflow) -> Self {
        Handoffs {
            queues: Arc::default(),
            overflow: Some(overflow),
        }
    }

    /// Issues a permit on `topic` and hands it to one waiter (see [`Queue::give`]); `remote`
    /// when another replica issued it.
    pub fn hand(&self, topic: &Topic, remote: bool) -> Handed {
        let handed = {
            let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            match queues.get_mut(topic) {
                None => Handed::ToNobody,
                Some(q) => {
                    q.issued += 1;
                    let permit = Permit {
                        n: q.issued,
                        remote,
                    };
                    q.give(permit, None)
                }
            }
        };
        if handed == Handed::ToNobody && !remote {
            self.overflowed(topic);
        }
        handed
    }

    fn overflowed(&self, topic: &Topic) {
        if let Some(overflow) = &self.overflow {
            overflow(topic);
        }
    }

    /// Hands every waiter of every topic a permit: after a gap in the notifications of the
    /// other replicas, in which hand-offs may have been lost, each reads the store again.
    pub fn hand_all(&self) {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        for q in queues.values_mut() {
            q.issued += 1;
            let permit = Permit {
                n: q.issued,
                remote: true,
            };
            for s in &mut q.waiters {
                if s.handed.is_none() {
                    s.handed = Some(permit);
                    s.notify.notify_one();
                }
            }
        }
    }

    /// Whether someone waits for a hand-off on `topic` now.
    pub fn has_waiting(&self, topic: &Topic) -> bool {
        let queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues
            .get(topic)
            .is_some_and(|q| q.waiters.iter().any(|s| s.waiting && s.handed.is_none()))
    }

    /// Registers a waiter on `topic`; it must read the store next (it has read nothing yet).
    pub fn waiter(&self, topic: &Topic) -> HandoffWaiter {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let q = queues.entry(topic.clone()).or_default();
        let id = q.next_id;
        q.next_id += 1;
        let notify = Arc::new(Notify::new());
        q.waiters.push(Slot {
            id,
            waiting: false,
            read_at: q.issued,
            handed: None,
            notify: notify.clone(),
        });
        HandoffWaiter {
            handoffs: self.clone(),
            topic: topic.clone(),
            id,
            notify,
            working_on: None,
        }
    }

    /// Waiters registered on all topics (for tests and gauges).
    pub fn waiter_count(&self) -> usize {
        let queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues.values().map(|q| q.waiters.len()).sum()
    }

    fn with_slot<T>(&self, topic: &Topic, id: u64, f: impl FnOnce(&mut Queue, usize) -> T) -> T {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let q = queues
            .get_mut(topic)
            .expect("a waiter's queue lives as long as it");
        let i = q
            .waiters
            .iter()
            .position(|s| s.id == id)
            .expect("a waiter's slot lives as long as it");
        f(q, i)
    }
}

/// One waiter for hand-offs on a topic. Dropping it leaves the queue (passing on a permit it held).
pub struct HandoffWaiter {
    handoffs: Handoffs,
    topic: Topic,
    id: u64,
    notify: Arc<Notify>,
    /// The permit the read under way answers, if a hand-off started it.
    working_on: Option<Permit>,
}

impl HandoffWaiter {
    /// Marks the start of a read of the store: it covers every permit issued so far, this
    /// waiter's own included.
    pub fn reading(&mut self) {
        let taken: Option<Permit> = self.handoffs.with_slot(&self.topic, self.id, |q, i| {
            let s = &mut q.waiters[i];
            s.read_at = q.issued;
            s.handed.take()
        });
        if let Some(p) = taken {
            self.working_on = Some(p);
        }
    }

    /// The read found something this waiter took: the permit it answered is used up.
    pub fn took(&mut self) {
        self.working_on = None;
    }

    /// The read found nothing this waiter could take: the permit it answered (if any) goes to
    /// another waiter that has not read since it was issued.
    pub fn pass_on(&mut self) {
        if let Some(permit) = self.working_on.take() {
            let id = self.id;
            let handed = self
                .handoffs
                .with_slot(&self.topic, id, |q, _| q.give(permit, Some(id)));
            if handed == Handed::ToNobody && !permit.remote {
                self.handoffs.overflowed(&self.topic);
            }
        }
    }

    /// Waits until a permit is handed to this waiter (at once when one was handed during the
    /// last read). Cancel-safe: a permit handed meanwhile stays with it.
    pub async fn handed(&mut self) {
        let ready = self.handoffs.with_slot(&self.topic, self.id, |q, i| {
            let s = &mut q.waiters[i];
            s.waiting = true;
            s.handed.is_some()
        });
        if ready {
            self.set_waiting(false);
            // The wake-up stored for it is this same hand-off: drop it, or the next wait would
            // end at once for nothing.
            let _ = futures::FutureExt::now_or_never(self.notify.notified());
        } else {
            let _waiting = Waiting(self);
            // `notify_one` keeps a permit for a waiter not yet awaiting, so a hand-off between
            // the check above and this await is not lost.
            self.notify.notified().await;
        }
    }

    fn set_waiting(&self, waiting: bool) {
        self.handoffs.with_slot(&self.topic, self.id, |q, i| {
            q.waiters[i].waiting = waiting;
        });
    }
}

/// Clears the waiting mark when a wait ends, however it ends.
struct Waiting<'a>(&'a HandoffWaiter);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.set_waiting(false);
    }
}

impl Drop for HandoffWaiter {
    fn drop(&mut self) {
        let mut queues = self
            .handoffs
            .queues
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let Some(q) = queues.get_mut(&self.topic) else {
            return;
        };
        let Some(i) = q.waiters.iter().position(|s| s.id == self.id) else {
            return;
        };
        let slot = q.waiters.remove(i);
        // A permit it was handed, or the one its unfinished read answered, goes on.
        let mut overflow = false;
        for permit in slot.handed.into_iter().chain(self.working_on) {
            overflow |= q.give(permit, None) == Handed::ToNobody && !permit.remote;
        }
        if q.waiters.is_empty() {
            queues.remove(&self.topic);
        }
        drop(queues);
        if overflow {
            self.handoffs.overflowed(&self.topic);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::FutureExt;

    use super::*;

    fn topic() -> Topic {
        Topic::from_wire("claimable:alice".into())
    }

    #[tokio::test]
    async fn one_permit_wakes_one_waiter_the_longest_waiting() {
        let h = Handoffs::default();
        let mut a = h.waiter(&topic());
        let mut b = h.waiter(&topic());
        a.reading();
        b.reading();
        // Both wait (polled once, so they are marked waiting).
        assert!(a.handed().now_or_never().is_none());
        assert!(b.handed().now_or_never().is_none());
        // Dropped futures clear the mark: wait again in tasks.
        let wa = tokio::spawn(async move {
            a.handed().await;
            a
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        let wb = tokio::spawn(async move {
            b.handed().await;
            b
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(h.hand(&topic(), false), Handed::ToWaiting);
        let a = tokio::time::timeout(Duration::from_secs(5), wa)
            .await
            .unwrap()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!wb.is_finished(), "only one waiter is woken");
        drop(a);
        wb.abort();
    }

    #[tokio::test]
    async fn a_waiter_that_finds_nothing_passes_the_permit_on_and_it_ends_with_the_last() {
        let h = Handoffs::default();
        let mut a = h.waiter(&topic());
        let mut b = h.waiter(&topic());
        a.reading();
        b.reading();
        assert_eq!(h.hand(&topic(), false), Handed::ToBusy);
        // `a` holds it: its next wait ends at once; its read finds nothing, so `b` gets it.
        assert!(a.handed().now_or_never().is_some());
        a.reading();
        a.pass_on();
        assert!(b.handed().now_or_never().is_some());
        b.reading();
        b.pass_on();
        // Both have read since it was issued: nobody is woken again.
        assert!(a.handed().now_or_never().is_none());
        assert!(b.handed().now_or_never().is_none());
    }

    #[tokio::test]
    async fn a_waiter_gone_with_a_permit_hands_it_to_another() {
        let h = Handoffs::default();
        let mut a = h.waiter(&topic());
        let mut b = h.waiter(&topic());
        a.reading();
        b.reading();
        h.hand(&topic(), false);
        // `a` was woken and started its read, then went away before finishing it.
        assert!(a.handed().now_or_never().is_some());
        a.reading();
        drop(a);
        assert!(b.handed().now_or_never().is_some());
        drop(b);
        assert_eq!(h.waiter_count(), 0);
    }

    #[tokio::test]
    async fn a_waiter_of_another_topic_is_never_woken() {
        let h = Handoffs::default();
        let mut bob = h.waiter(&Topic::from_wire("claimable:bob".into()));
        bob.reading();
        assert_eq!(h.hand(&topic(), false), Handed::ToNobody);
        assert!(bob.handed().now_or_never().is_none());
    }

    #[tokio::test]
    async fn a_permit_nobody_here_can_use_goes_to_the_other_replicas_once_and_never_back() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let sent = Arc::new(AtomicUsize::new(0));
        let counter = sent.clone();
        let h = Handoffs::with_overflow(Arc::new(move |_: &Topic| {
            counter.fetch_add(1, Ordering::SeqCst);
        }));
        // No waiter here: this replica's permit goes to the others.
        assert_eq!(h.hand(&topic(), false), Handed::ToNobody);
        assert_eq!(sent.load(Ordering::SeqCst), 1);
        // One received from another replica ends here.
        assert_eq!(h.hand(&topic(), true), Handed::ToNobody);
        assert_eq!(sent.load(Ordering::SeqCst), 1);
        // A waiter here that cannot use it passes it on; with nobody left, it goes out once.
        let mut a = h.waiter(&topic());
        a.reading();
        assert_eq!(h.hand(&topic(), false), Handed::ToBusy);
        assert!(a.handed().now_or_never().is_some());
        a.reading();
        a.pass_on();
        assert_eq!(sent.load(Ordering::SeqCst), 2);
        // Received from elsewhere and unusable here: it ends without going back.
        h.hand(&topic(), true);
        assert!(a.handed().now_or_never().is_some());
        a.reading();
        a.pass_on();
        assert_eq!(sent.load(Ordering::SeqCst), 2);
    }
}
