//! Retention: how long each kind of record is kept ([`Retention`], from `[retention]`), and the
//! purge the background sweep runs ([`Service::purge_expired`]). Each kind is purged in bounded
//! transactions through the writer (at most about [`crate::store::PURGE_BATCH`] rows each), one
//! after another, so that other writes interleave and none waits behind a long purge. What was
//! purged is counted in `/metrics` (`liaison_retention_purged_total{kind}`).

use std::time::Duration;

use super::{Result, Service};
use crate::domain::Timestamp;

/// How long each kind of record is kept; `None` keeps it forever (the default of every kind).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retention {
    /// Threads closed (or whose task is terminal), with their messages and every row of theirs,
    /// counted from the thread's last change; and tool confirmations asked outside any command,
    /// counted from when they settled.
    pub closed_threads: Option<Duration>,
    /// Task events, counted from when each was logged (a thread's latest is always kept).
    pub task_events: Option<Duration>,
    /// Finished (delivered or dead) deliveries with their attempts, counted from the end.
    pub delivery_attempts: Option<Duration>,
    /// Audit entries, counted from when each was made.
    pub audit: Option<Duration>,
}

impl Retention {
    /// Whether anything is ever purged.
    pub fn purges(&self) -> bool {
        self.closed_threads.is_some()
            || self.task_events.is_some()
            || self.delivery_attempts.is_some()
            || self.audit.is_some()
    }
}

/// What one [`Service::purge_expired`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    pub threads: u64,
    pub messages: u64,
    pub task_events: u64,
    pub deliveries: u64,
    pub delivery_attempts: u64,
    pub audit: u64,
    /// Tool confirmations bound to no thread (a thread's go with it, uncounted).
    pub confirmations: u64,
}

impl Purged {
    pub fn total(&self) -> u64 {
        self.threads
            + self.messages
            + self.task_events
            + self.deliveries
            + self.delivery_attempts
            + self.audit
            + self.confirmations
    }
}

/// The cutoff for records kept `keep`: `now - keep` (saturating: a retention longer than the
/// epoch purges nothing).
fn cutoff(now: Timestamp, keep: Duration) -> Timestamp {
    let keep = i64::try_from(keep.as_millis()).unwrap_or(i64::MAX);
    Timestamp(now.0.saturating_sub(keep))
}

impl Service {
    /// Purges every record older than `retention` allows, kind by kind, in bounded transactions
    /// until nothing is left to purge (or the server stops). The sweep calls it periodically;
    /// tests call it after moving the clock.
    pub async fn purge_expired(&self, retention: &Retention) -> Result<Purged> {
        let store = &self.inner.store;
        let metrics = crate::metrics::get();
        let mut purged = Purged::default();
        let stopping = || self.inner.shutdown.is_cancelled();
        if let Some(keep) = retention.closed_threads {
            loop {
                let now = self.now();
                let batch = store.purge_ended_threads(cutoff(now, keep), now).await?;
                metrics.retention_purged("threads", batch.threads);
                metrics.retention_purged("messages", batch.messages);
                purged.threads += batch.threads;
                purged.messages += batch.messages;
                if batch.threads == 0 || stopping() {
                    break;
                }
                tokio::task::yield_now().await;
            }
        }
        if let Some(keep) = retention.closed_threads {
            loop {
                let n = store
                    .purge_settled_confirmations(cutoff(self.now(), keep))
                    .await?;
                metrics.retention_purged("confirmations", n);
                purged.confirmations += n;
                if n < crate::store::PURGE_BATCH || stopping() {
                    break;
                }
                tokio::task::yield_now().await;
            }
        }
        if let Some(keep) = retention.task_events {
            loop {
                let n = store.purge_task_events(cutoff(self.now(), keep)).await?;
                metrics.retention_purged("task_events", n);
                purged.task_events += n;
                if n < crate::store::PURGE_BATCH || stopping() {
                    break;
                }
                tokio::task::yield_now().await;
            }
        }
        if let Some(keep) = retention.delivery_attempts {
            loop {
                let batch = store
                    .purge_finished_deliveries(cutoff(self.now(), keep))
                    .await?;
                metrics.retention_purged("deliveries", batch.deliveries);
                metrics.retention_purged("delivery_attempts", batch.attempts);
                purged.deliveries += batch.deliveries;
                purged.delivery_attempts += batch.attempts;
                if batch.deliveries == 0 || stopping() {
                    break;
                }
                tokio::task::yield_now().await;
            }
        }
        if let Some(keep) = retention.audit {
            loop {
                let n = store.purge_audit(cutoff(self.now(), keep)).await?;
                metrics.retention_purged("audit", n);
                purged.audit += n;
                if n < crate::store::PURGE_BATCH || stopping() {
                    break;
                }
                tokio::task::yield_now().await;
            }
        }
        if purged.total() > 0 {
            tracing::info!(
                threads = purged.threads,
                messages = purged.messages,
                task_events = purged.task_events,
                deliveries = purged.deliveries,
                delivery_attempts = purged.delivery_attempts,
                audit = purged.audit,
                confirmations = purged.confirmations,
                "Purged records past their retention."
            );
        }
        Ok(purged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cutoff_is_now_minus_the_retention_and_never_overflows() {
        let now = Timestamp(10_000);
        assert_eq!(cutoff(now, Duration::from_secs(3)), Timestamp(7_000));
        assert_eq!(
            cutoff(now, Duration::from_secs(u64::MAX)),
            Timestamp(10_000 - i64::MAX)
        );
    }
}
