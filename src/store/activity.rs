//! The rows the activity figures are computed from (SPEC §11, the console's "Activity",
//! `/api/v1/activity`): one query per figure over a window cut into equal buckets (whole weeks
//! for the weekly rows, one bucket for the totals since a date), over the threads an
//! [`ActivityFilter`] selects. The service turns them into figures.
//! An operation file (`impl Store` only): no building block (`tx/`) and no other operation file
//! may depend on it.

use super::Store;
use super::db::{Query, query};
use super::error::Result;
use crate::domain::{ChannelName, ThreadId, Timestamp};

/// A week, in milliseconds.
pub const WEEK_MS: i64 = 7 * 24 * 3600 * 1000;

/// Which threads the figures count: those of `channels`, and of those only `threads` when given
/// (the threads of one personal session, say). The service decides what the caller may see; the
/// store only selects. An empty channel list selects nothing.
#[derive(Debug, Clone, Copy)]
pub struct ActivityFilter<'a> {
    pub channels: &'a [ChannelName],
    pub threads: Option<&'a [ThreadId]>,
}

/// A time window `[from, to)` cut into buckets of `step` milliseconds (bucket 0 starts at `from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from: Timestamp,
    pub to: Timestamp,
    pub step: i64,
}

/// A thread opened in the window: when, when its first reply by someone other than its opener
/// came (none: not answered yet), and whether it is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedThread {
    pub opened_at: Timestamp,
    pub first_reply_at: Option<Timestamp>,
    pub closed: bool,
}

/// A count in bucket `week` (0 = the window's first) of `key` (a state, a kind…).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeekCount {
    pub week: i64,
    pub key: String,
    pub n: i64,
}

impl ActivityFilter<'_> {
    fn selects_nothing(&self) -> bool {
        self.channels.is_empty() || self.threads.is_some_and(<[ThreadId]>::is_empty)
    }

    /// ` AND {channel} IN ($first, …)` and, with a thread list, ` AND {thread} IN (…)`, the
    /// placeholders numbered from `first` in the order [`ActivityFilter::bind`] binds them.
    fn condition(&self, channel: &str, thread: &str, first: usize) -> String {
        let list = |from: usize, n: usize| {
            (from..from + n)
                .map(|i| format!("${i}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut sql = format!(" AND {channel} IN ({})", list(first, self.channels.len()));
        if let Some(threads) = self.threads {
            let next = first + self.channels.len();
            sql.push_str(&format!(" AND {thread} IN ({})", list(next, threads.len())));
        }
        sql
    }

    fn bind(&self, mut q: Query) -> Query {
        for c in self.channels {
            q = q.bind(c.as_str().to_owned());
        }
        for t in self.threads.unwrap_or_default() {
            q = q.bind(t.as_str().to_owned());
        }
        q
    }
}

impl Store {
    /// The threads `filter` selects that were opened in the window, with their first reply by
    /// someone other than the opener: another person, or another reader of the same person (her
    /// command answered by her agent, SPEC §4b), as the thread's state machine counts it.
    pub async fn opened_threads(
        &self,
        filter: ActivityFilter<'_>,
        window: Window,
    ) -> Result<Vec<OpenedThread>> {
        if filter.selects_nothing() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT t.created_at, t.state, (SELECT MIN(m.created_at) FROM messages m \
             WHERE m.thread_id = t.id AND m.kind = 'reply' AND (m.author <> t.opened_by \
             OR COALESCE(m.connection, '') <> COALESCE((SELECT o.connection FROM messages o \
             WHERE o.thread_id = t.id AND o.position = 1), ''))) AS first_reply \
             FROM threads t WHERE t.created_at >= $1 AND t.created_at < $2{}",
            filter.condition("t.channel", "t.id", 3)
        );
        let q = query(sql).bind(window.from.0).bind(window.to.0);
        let rows = filter.bind(q).fetch_all(&self.pool).await?;
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

    /// The approvals of the threads `filter` selects that were settled in the window, per
    /// bucket, state and kind (`state:kind`, the kind `request` or `outbound`).
    pub async fn settled_approvals(
        &self,
        filter: ActivityFilter<'_>,
        window: Window,
    ) -> Result<Vec<WeekCount>> {
        if filter.selects_nothing() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT (decided_at - $1) / $3 AS week, state || ':' || kind AS k, count(*) AS n \
             FROM approvals WHERE decided_at >= $1 AND decided_at < $2 AND state <> 'pending'{} \
             GROUP BY (decided_at - $1) / $3, state || ':' || kind",
            filter.condition("channel", "thread_id", 4)
        );
        let q = query(sql)
            .bind(window.from.0)
            .bind(window.to.0)
            .bind(window.step);
        counts(&filter.bind(q).fetch_all(&self.pool).await?, "k")
    }

    /// The external tasks among the threads `filter` selects that ended in the window, per
    /// bucket and final state.
    pub async fn ended_tasks(
        &self,
        filter: ActivityFilter<'_>,
        window: Window,
    ) -> Result<Vec<WeekCount>> {
        if filter.selects_nothing() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT (updated_at - $1) / $3 AS week, task_state AS k, count(*) AS n FROM threads \
             WHERE task_state IN ('completed', 'failed', 'canceled', 'rejected') \
             AND updated_at >= $1 AND updated_at < $2{} \
             GROUP BY (updated_at - $1) / $3, task_state",
            filter.condition("channel", "id", 4)
        );
        let q = query(sql)
            .bind(window.from.0)
            .bind(window.to.0)
            .bind(window.step);
        counts(&filter.bind(q).fetch_all(&self.pool).await?, "k")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_numbers_its_placeholders_after_the_windows() {
        let channels = [
            ChannelName::parse("demo").unwrap(),
            ChannelName::parse("ops").unwrap(),
        ];
        let threads = [ThreadId::generate()];
        let all = ActivityFilter {
            channels: &channels,
            threads: None,
        };
        assert_eq!(all.condition("c", "t", 3), " AND c IN ($3, $4)");
        let some = ActivityFilter {
            threads: Some(&threads),
            ..all
        };
        assert_eq!(
            some.condition("c", "t", 4),
            " AND c IN ($4, $5) AND t IN ($6)"
        );
        assert!(!some.selects_nothing());
        assert!(
            ActivityFilter {
                channels: &[],
                threads: None
            }
            .selects_nothing()
        );
        assert!(
            ActivityFilter {
                threads: Some(&[]),
                ..all
            }
            .selects_nothing()
        );
    }
}
