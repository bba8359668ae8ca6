//! The rows a channel's activity figures are computed from (SPEC §11, the console's "Activity"):
//! one query per figure over a window of whole weeks. The service turns them into weekly series.
//! An operation file (`impl Store` only): no building block (`tx/`) and no other operation file
//! may depend on it.

use super::Store;
use super::db::query;
use super::error::Result;
use crate::domain::{ChannelName, Timestamp};

/// A week, in milliseconds.
pub const WEEK_MS: i64 = 7 * 24 * 3600 * 1000;

/// A thread opened in the window: when, when its first reply by someone other than its opener
/// came (none: not answered yet), and whether it is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedThread {
    pub opened_at: Timestamp,
    pub first_reply_at: Option<Timestamp>,
    pub closed: bool,
}

/// A count in week `week` (0 = the window's first) of `key` (a state, a kind…).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeekCount {
    pub week: i64,
    pub key: String,
    pub n: i64,
}

impl Store {
    /// The threads of `channel` opened in `[from, to)`.
    pub async fn opened_threads(
        &self,
        channel: &ChannelName,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<OpenedThread>> {
        let rows = query(
            "SELECT t.created_at, t.state, (SELECT MIN(m.created_at) FROM messages m \
             WHERE m.thread_id = t.id AND m.kind = 'reply' AND m.author <> t.opened_by) AS first_reply \
             FROM threads t WHERE t.channel = $1 AND t.created_at >= $2 AND t.created_at < $3",
        )
        .bind(channel.as_str().to_owned())
        .bind(from.0)
        .bind(to.0)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(OpenedThread {
                    opened_at: Timestamp(r.try_get("created_at")?),
                    first_reply_at: r.try_get::<Option<i64>, _>("first_reply")?.map(Timestamp),
                    closed: r.try_get::<String, _>("state")? == "closed",
                })
            })
            .collect()
    }

    /// The approvals of `channel` settled in `[from, to)`, per week, state and kind (`request`
    /// or `outbound`).
    pub async fn settled_approvals(
        &self,
        channel: &ChannelName,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<WeekCount>> {
        let rows = query(
            "SELECT (decided_at - $2) / $4 AS week, state || ':' || kind AS k, count(*) AS n \
             FROM approvals WHERE channel = $1 AND decided_at >= $2 AND decided_at < $3 \
             AND state <> 'pending' GROUP BY (decided_at - $2) / $4, state || ':' || kind",
        )
        .bind(channel.as_str().to_owned())
        .bind(from.0)
        .bind(to.0)
        .bind(WEEK_MS)
        .fetch_all(&self.pool)
        .await?;
        counts(&rows, "k")
    }

    /// The external tasks of `channel` that ended in `[from, to)`, per week and final state.
    pub async fn ended_tasks(
        &self,
        channel: &ChannelName,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<WeekCount>> {
        let rows = query(
            "SELECT (updated_at - $2) / $4 AS week, task_state AS k, count(*) AS n FROM threads \
             WHERE channel = $1 AND task_state IN ('completed', 'failed', 'canceled', 'rejected') \
             AND updated_at >= $2 AND updated_at < $3 GROUP BY (updated_at - $2) / $4, task_state",
        )
        .bind(channel.as_str().to_owned())
        .bind(from.0)
        .bind(to.0)
        .bind(WEEK_MS)
        .fetch_all(&self.pool)
        .await?;
        counts(&rows, "k")
    }
}

fn counts(rows: &[super::db::Row], key: &str) -> Result<Vec<WeekCount>> {
    rows.iter()
        .map(|r| {
            Ok(WeekCount {
                week: r.try_get("week")?,
                key: r.try_get(key)?,
                n: r.try_get("n")?,
            })
        })
        .collect()
}
