//! The figures `/metrics` reads from the database at scrape time: pending approvals (how many,
//! the oldest one's age, how many expire soon), the outbox (pending, dead, the oldest due one's
//! lateness) and the inboxes' depth (what known consumers have yet to acknowledge). Each is one
//! aggregate query; the service picks the moment and the windows.
//! An operation file (`impl Store` only): no building block (`tx/`) and no other operation file
//! may depend on it.

use super::Store;
use super::db::query;
use super::error::Result;
use crate::domain::Timestamp;

/// Pending approvals at a moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApprovalFigures {
    pub pending: i64,
    /// How long the oldest pending approval has waited, in milliseconds; 0 when none is pending.
    pub oldest_age_ms: i64,
    /// Pending approvals whose deadline falls within the window asked for (or has passed and
    /// the expiry sweep has not run yet).
    pub expiring_soon: i64,
}

/// The outbox at a moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxFigures {
    /// Deliveries neither delivered nor dead (in flight and retrying included).
    pub pending: i64,
    /// Dead deliveries still kept.
    pub dead: i64,
    /// How long the oldest due pending delivery has been due, in milliseconds; 0 when none is.
    pub oldest_due_age_ms: i64,
}

/// The inboxes at a moment, over every consumer that has acknowledged something (a consumer
/// row exists from its first acknowledgement) of a person not removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InboxFigures {
    /// Entries after each consumer's cursor, summed over the consumers.
    pub unacknowledged: i64,
    /// The most entries any one consumer has yet to acknowledge.
    pub deepest: i64,
}

impl Store {
    /// The pending approvals at `now`; `soon_ms` is the window of
    /// [`ApprovalFigures::expiring_soon`]. The `(state, expires_at)` index finds the rows.
    pub async fn approval_figures(&self, now: Timestamp, soon_ms: i64) -> Result<ApprovalFigures> {
        let row = query(
            "SELECT COUNT(*) AS n, MIN(created_at) AS oldest, \
             CAST(COALESCE(SUM(CASE WHEN expires_at <= $1 THEN 1 ELSE 0 END), 0) AS BIGINT) AS soon \
             FROM approvals WHERE state = 'pending'",
        )
        .bind(now.0.saturating_add(soon_ms))
        .fetch_one(&self.pool)
        .await?;
        let oldest: Option<i64> = row.try_get("oldest")?;
        Ok(ApprovalFigures {
            pending: row.try_get("n")?,
            oldest_age_ms: oldest.map_or(0, |t| (now.0 - t).max(0)),
            expiring_soon: row.try_get("soon")?,
        })
    }

    /// The outbox at `now`: one pass over the pending and dead rows, which the
    /// `(state, next_attempt_at)` index finds (delivered rows, the many, are never read).
    pub async fn outbox_figures(&self, now: Timestamp) -> Result<OutboxFigures> {
        let row = query(
            "SELECT \
             CAST(COALESCE(SUM(CASE WHEN state = 'pending' THEN 1 ELSE 0 END), 0) AS BIGINT) AS pending, \
             CAST(COALESCE(SUM(CASE WHEN state = 'dead' THEN 1 ELSE 0 END), 0) AS BIGINT) AS dead, \
             MIN(CASE WHEN state = 'pending' AND next_attempt_at <= $1 THEN next_attempt_at END) AS due \
             FROM deliveries WHERE state IN ('pending', 'dead')",
        )
        .bind(now.0)
        .fetch_one(&self.pool)
        .await?;
        let due: Option<i64> = row.try_get("due")?;
        Ok(OutboxFigures {
            pending: row.try_get("pending")?,
            dead: row.try_get("dead")?,
            oldest_due_age_ms: due.map_or(0, |t| (now.0 - t).max(0)),
        })
    }

    /// The inboxes' depth: for each consumer that has acknowledged once, its person's last
    /// sequence number less its cursor. A person no consumer has acknowledged for yet is not
    /// counted (nothing is known to drain it).
    pub async fn inbox_figures(&self) -> Result<InboxFigures> {
        let row = query(
            "SELECT CAST(COALESCE(SUM(p.inbox_seq - c.acked), 0) AS BIGINT) AS unacked, \
             CAST(COALESCE(MAX(p.inbox_seq - c.acked), 0) AS BIGINT) AS deepest \
             FROM consumers c JOIN persons p ON p.id = c.person_id WHERE p.removed_at IS NULL",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(InboxFigures {
            unacknowledged: row.try_get("unacked")?,
            deepest: row.try_get("deepest")?,
        })
    }
}
