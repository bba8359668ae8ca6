//! The one lease loop of every worker: claim what is due (as many as there are free slots), work
//! each claimed item in a task of its own, then sleep until the bus wakes the loop, the next item
//! falls due, a slot frees up, or the safety sweep, whichever comes first.
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
    loop {
        while tasks.try_join_next().is_some() {}
        let free = slots.available_permits();
        let claimed = if free == 0 {
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
        let pause = match source.next_due().await {
            Ok(Some(due)) => {
                let wait = due.0 - source.now().0;
                if wait > 0 {
                    Duration::from_millis(wait as u64)
                        .max(shape.min_pause)
                        .min(shape.sweep)
                } else {
                    shape.overdue_pause
                }
            }
            Ok(None) => shape.sweep,
            Err(e) => {
                tracing::warn!(error = %e, what = shape.what, "Could not read when work falls due; will retry.");
                AFTER_ERROR
            }
        };
        tokio::select! {
            () = wake.woken() => {}
            () = tokio::time::sleep(pause) => {}
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            () = shutdown.cancelled() => break,
        }
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
