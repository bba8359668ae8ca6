//! The one lease loop of every worker: claim what is due (as many as there are free slots), work
//! each claimed item in a task of its own, then sleep until the bus wakes the loop, the next item
//! falls due, a slot frees up, or the safety sweep, whichever comes first. A freed slot leads to a
//! claim only when work was due and waiting for one.
//!
//! The claim is a lease in the database (the service and store decide which items and for how
//! long), so several loops per database are safe: replicas, or tests running two. The loop holds
//! no transaction and no lock across the work. [`step`] claims and works one item, for tests that
//! drive a worker by hand.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::bus::{Topic, WakeBus};
use crate::domain::Timestamp;
use crate::service::ServiceError;

/// A source of leased work: what a worker claims, and how it works one item.
pub trait Leased: Send + Sync + 'static {
    type Item: Send + 'static;

    /// Claims up to `n` due items for this worker.
    fn claim(&self, n: usize)
    -> impl Future<Output = Result<Vec<Self::Item>, ServiceError>> + Send;

    /// When the next item falls due, if any is waiting.
    fn next_due(&self) -> impl Future<Output = Result<Option<Timestamp>, ServiceError>> + Send;

    /// Works one claimed item to its end (or until `shutdown`); reports its own failures.
    fn work(
        self: Arc<Self>,
        item: Self::Item,
        shutdown: CancellationToken,
    ) -> impl Future<Output = ()> + Send;

    /// The service's clock, against which `next_due` is read.
    fn now(&self) -> Timestamp;
}

/// How a loop runs.
#[derive(Debug, Clone)]
pub struct Shape {
    /// What the loop works, for its log lines ("deliveries", "remote tasks").
    pub what: &'static str,
    /// The bus topic whose publications mean "something may be due now".
    pub topic: Topic,
    /// Items worked at once.
    pub slots: usize,
    /// The longest the loop sleeps without looking.
    pub sweep: Duration,
    /// The shortest sleep before a due time still ahead (none: sleep exactly until it).
    pub min_pause: Duration,
    /// The sleep when an item is due but was not claimable (waiting behind another in flight, or
    /// every slot busy): a commit or a freed slot wakes the loop sooner.
    pub overdue_pause: Duration,
    /// At shutdown: wait for the work in flight (bounded by its own timeouts), or abort it (work
    /// that may never end by itself, such as a held stream; its lease expires and another loop
    /// resumes it).
    pub at_stop: AtStop,
}

/// What happens to work in flight when the loop stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtStop {
    Finish,
    Abort,
}

/// The sleep after a failed read of when work falls due.
const AFTER_ERROR: Duration = Duration::from_secs(1);

/// Works `source` until `shutdown`.
pub async fn run<L: Leased>(
    source: Arc<L>,
    bus: Arc<dyn WakeBus>,
    shape: Shape,
    shutdown: CancellationToken,
) {
    let mut wake = bus.subscribe(&shape.topic);
    let slots = Arc::new(Semaphore::new(shape.slots.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    // Whether to claim at the top of the loop. The claim is a write (a commit on SQLite, the
    // writer's round trips on PostgreSQL), so the loop claims only for a reason: at start, a bus
    // wake-up (a commit enqueued work), the due time it slept until, or a freed slot while work
    // was due and waiting for one. A slot freed with nothing due changes nothing claimable: the
    // loop only reads when work falls due again (a finish that frees the next item in order
    // publishes on the bus).
    let mut claim_now = true;
    loop {
        while tasks.try_join_next().is_some() {}
        let free = slots.available_permits();
        let claimed = if free == 0 || !claim_now {
            Vec::new()
        } else {
            source.claim(free).await.unwrap_or_else(|e| {
                tracing::warn!(error = %e, what = shape.what, "Could not claim due work; will retry.");
                Vec::new()
            })
        };
        let full = free > 0 && claimed.len() == free;
        for item in claimed {
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                break;
            };
            let me = source.clone();
            let stop = shutdown.clone();
            tasks.spawn(async move {
                me.work(item, stop).await;
                drop(permit);
            });
        }
        if full {
            continue;
        }
        // `overdue`: something is due already but was not claimed (every slot busy, or the read
        // failed), so a freed slot is a reason to claim.
        let (pause, overdue) = match source.next_due().await {
            Ok(Some(due)) => {
                let wait = due.0 - source.now().0;
                if wait > 0 {
                    let pause = Duration::from_millis(wait as u64)
                        .max(shape.min_pause)
                        .min(shape.sweep);
                    (pause, false)
                } else {
                    (shape.overdue_pause, true)
                }
            }
            Ok(None) => (shape.sweep, false),
            Err(e) => {
                tracing::warn!(error = %e, what = shape.what, "Could not read when work falls due; will retry.");
                (AFTER_ERROR, true)
            }
        };
        // A slot freed while nothing was due, and the read after it finds work due (the finished
        // item freed the next of its queue, or a commit's wake-up went to a claim that came too
        // early): claim it now rather than after the pause.
        if !claim_now && overdue && free > 0 && !shutdown.is_cancelled() {
            claim_now = true;
            continue;
        }
        claim_now = tokio::select! {
            () = wake.woken() => true,
            () = tokio::time::sleep(pause) => true,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => overdue,
            () = shutdown.cancelled() => break,
        };
    }
    match shape.at_stop {
        AtStop::Finish => while tasks.join_next().await.is_some() {},
        AtStop::Abort => tasks.shutdown().await,
    }
}

/// Claims one due item and works it; `false` when nothing was due.
pub async fn step<L: Leased>(
    source: &Arc<L>,
    shutdown: CancellationToken,
) -> Result<bool, ServiceError> {
    let Some(item) = source.claim(1).await?.into_iter().next() else {
        return Ok(false);
    };
    source.clone().work(item, shutdown).await;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::bus::LocalBus;

    /// `waiting` items, all due at `due`; an item's work ends when `gate` gives a permit. Counts
    /// the claims (writes), the reads of the due time and the items worked.
    struct Source {
        due: Mutex<Option<Timestamp>>,
        waiting: AtomicUsize,
        gate: Semaphore,
        claims: AtomicUsize,
        reads: AtomicUsize,
        worked: AtomicUsize,
    }

    impl Source {
        fn new(waiting: usize) -> Arc<Source> {
            Arc::new(Source {
                due: Mutex::new((waiting > 0).then_some(Timestamp(900))),
                waiting: AtomicUsize::new(waiting),
                gate: Semaphore::new(0),
                claims: AtomicUsize::new(0),
                reads: AtomicUsize::new(0),
                worked: AtomicUsize::new(0),
            })
        }

        fn count(&self, of: &AtomicUsize) -> usize {
            of.load(Ordering::SeqCst)
        }
    }

    impl Leased for Source {
        type Item = ();

        async fn claim(&self, n: usize) -> Result<Vec<()>, ServiceError> {
            self.claims.fetch_add(1, Ordering::SeqCst);
            let take = self.waiting.load(Ordering::SeqCst).min(n);
            self.waiting.fetch_sub(take, Ordering::SeqCst);
            if self.waiting.load(Ordering::SeqCst) == 0 {
                *self.due.lock().unwrap() = None;
            }
            Ok(vec![(); take])
        }

        async fn next_due(&self) -> Result<Option<Timestamp>, ServiceError> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            Ok(*self.due.lock().unwrap())
        }

        async fn work(self: Arc<Self>, (): (), _shutdown: CancellationToken) {
            self.gate.acquire().await.expect("open").forget();
            self.worked.fetch_add(1, Ordering::SeqCst);
        }

        fn now(&self) -> Timestamp {
            Timestamp(1_000)
        }
    }

    fn shape(slots: usize) -> Shape {
        Shape {
            what: "test items",
            topic: Topic::outbox(),
            slots,
            sweep: Duration::from_secs(60),
            min_pause: Duration::from_millis(1),
            overdue_pause: Duration::from_secs(60),
            at_stop: AtStop::Finish,
        }
    }

    async fn until(what: &str, done: impl Fn() -> bool) {
        for _ in 0..1_000 {
            if done() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        panic!("timed out waiting for {what}");
    }

    #[tokio::test]
    async fn a_freed_slot_claims_only_while_due_work_waits_for_one() {
        let bus = Arc::new(LocalBus::default());
        let source = Source::new(2);
        let stop = CancellationToken::new();
        let looped = tokio::spawn(run(source.clone(), bus.clone(), shape(1), stop.clone()));
        // One slot, two items due: the first is claimed, the second waits for the slot.
        until("the read while the slot is busy", || {
            source.count(&source.reads) == 1
        })
        .await;
        assert_eq!(source.count(&source.claims), 1);
        // The slot frees with work due: claimed without any wake-up.
        source.gate.add_permits(1);
        until("the second claim", || source.count(&source.claims) == 2).await;
        until("the read after it", || source.count(&source.reads) == 2).await;
        // The slot frees with nothing due: a read, and no claim (it would be an empty write).
        source.gate.add_permits(1);
        until("the read after the last item", || {
            source.count(&source.reads) == 3
        })
        .await;
        assert_eq!(source.count(&source.worked), 2);
        assert_eq!(source.count(&source.claims), 2);

        // A wake-up from the bus claims (a commit enqueued work), even when it finds none.
        bus.publish(&Topic::outbox());
        until("the claim after the wake-up", || {
            source.count(&source.claims) == 3
        })
        .await;
        stop.cancel();
        looped.await.unwrap();
    }

    #[tokio::test]
    async fn work_found_due_after_a_slot_frees_is_claimed_without_waiting_for_a_wake_up() {
        let bus = Arc::new(LocalBus::default());
        let source = Source::new(1);
        let stop = CancellationToken::new();
        let looped = tokio::spawn(run(source.clone(), bus.clone(), shape(1), stop.clone()));
        // The one item is claimed; the read while it is worked finds nothing else due.
        until("the read while the item is worked", || {
            source.count(&source.reads) == 1
        })
        .await;
        assert_eq!(source.count(&source.claims), 1);
        // Its work makes the next item due and publishes nothing (a finish that freed the next
        // delivery of its queue, whose enqueue's wake-up was spent while this one held it).
        source.waiting.store(1, Ordering::SeqCst);
        *source.due.lock().unwrap() = Some(Timestamp(900));
        source.gate.add_permits(1);
        // The read after the freed slot sees it due and claims at once: the pause of the shape is
        // a minute, and the test gives two seconds.
        until("the claim of the item found due", || {
            source.count(&source.claims) == 2
        })
        .await;
        source.gate.add_permits(1);
        until("both items worked", || source.count(&source.worked) == 2).await;
        stop.cancel();
        looped.await.unwrap();
    }
}
