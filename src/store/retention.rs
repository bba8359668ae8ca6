//! Retention: the purges the retention sweep runs, each one bounded transaction through the
//! writer, so that a purge never holds the writer for long (the service calls them in a loop
//! until one finds nothing left). An operation file (`impl Store` only): no building block
//! (`tx/`) and no other operation file may depend on it.
//!
//! What each purge may remove, and what it must leave:
//! - [`Store::purge_ended_threads`]: threads closed (or whose task is terminal) whose last change
//!   is older than the cutoff, with every row of theirs (messages, inbox entries, receipts,
//!   approvals and their links, task events, push configs, progress notes, claims, its trace
//!   context, the remote task, finished deliveries and their attempts), so that the thread answers
//!   like one that never existed (its audit entries follow `[retention] audit`). Never a thread
//!   with a pending approval, a delivery still due, or a remote task a follower holds.
//! - [`Store::purge_task_events`]: events older than the cutoff, except each thread's latest (its
//!   current state) and any a due delivery will render.
//! - [`Store::purge_finished_deliveries`]: delivered or dead deliveries finished before the
//!   cutoff, with their attempts. Pending ones (in flight or retrying) are never touched.
//! - [`Store::purge_audit`]: audit entries older than the cutoff.
//! - [`Store::purge_settled_confirmations`]: tool confirmations asked outside any claimed command
//!   (those of a command go with its thread) that settled before the cutoff, with their links.
//!   Never a pending one.

use super::Store;
use super::db::{Conn, query};
use super::error::Result;
use crate::domain::Timestamp;

/// The most rows a purge deletes in one transaction (a thread's own rows count by its messages;
/// a thread longer than this is purged alone, in one transaction of its size).
pub const PURGE_BATCH: u64 = 500;

/// Deliveries per purge transaction: each has at most a retry schedule's attempts (at most 11
/// with the default schedule), so 40 keep a transaction under [`PURGE_BATCH`] rows.
const DELIVERIES_PER_BATCH: i64 = 40;

/// Threads considered per purge transaction.
const THREADS_PER_BATCH: i64 = 50;

/// What one purge of ended threads removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgedThreads {
    pub threads: u64,
    pub messages: u64,
}

/// What one purge of finished deliveries removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgedDeliveries {
    pub deliveries: u64,
    pub attempts: u64,
}

/// `$first, $first+1, …` for `n` values.
fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The rows of `threads` that refer to them, children before parents (PostgreSQL enforces the
/// foreign keys; SQLite's writer has them on too).
const THREAD_ROWS: &[&str] = &[
    "DELETE FROM approval_links WHERE approval_id IN (SELECT id FROM approvals WHERE thread_id IN ({ids}))",
    "DELETE FROM approvals WHERE thread_id IN ({ids})",
    "DELETE FROM inbox_entries WHERE thread_id IN ({ids})",
    "DELETE FROM receipts WHERE thread_id IN ({ids})",
    "DELETE FROM progress_notes WHERE thread_id IN ({ids})",
    "DELETE FROM task_events WHERE thread_id IN ({ids})",
    "DELETE FROM push_configs WHERE thread_id IN ({ids})",
    "DELETE FROM remote_tasks WHERE thread_id IN ({ids})",
    "DELETE FROM claims WHERE thread_id IN ({ids})",
    "DELETE FROM thread_traces WHERE thread_id IN ({ids})",
    "DELETE FROM session_commands WHERE thread_id IN ({ids})",
    "DELETE FROM confirmation_links WHERE confirmation_id IN (SELECT id FROM tool_confirmations WHERE thread_id IN ({ids}))",
    "DELETE FROM tool_confirmations WHERE thread_id IN ({ids})",
    "DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM deliveries WHERE thread_id IN ({ids}))",
    "DELETE FROM deliveries WHERE thread_id IN ({ids})",
];

impl Store {
    /// Purges threads that ended before `before` (see the module's notes), as many as fit in one
    /// transaction of about [`PURGE_BATCH`] messages, oldest first. `now` tells a remote task a
    /// follower holds (its lease) from one left behind.
    pub async fn purge_ended_threads(
        &self,
        before: Timestamp,
        now: Timestamp,
    ) -> Result<PurgedThreads> {
        let lock = self.for_update();
        self.write(move |tx| {
            Box::pin(async move {
                let sql = format!(
                    "SELECT t.id, t.message_count FROM threads t \
                     WHERE (t.state = 'closed' OR t.task_state IN ('completed', 'failed', 'canceled', 'rejected')) \
                     AND t.updated_at < $1 \
                     AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.thread_id = t.id AND a.state = 'pending') \
                     AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.thread_id = t.id AND d.state = 'pending') \
                     AND NOT EXISTS (SELECT 1 FROM remote_tasks r WHERE r.thread_id = t.id AND r.lease_until > $2) \
                     ORDER BY t.updated_at, t.id LIMIT $3{lock}"
                );
                let rows = query(sql)
                    .bind(before.0)
                    .bind(now.0)
                    .bind(THREADS_PER_BATCH)
                    .fetch_all(&mut *tx)
                    .await?;
                let mut ids = Vec::new();
                let mut messages = 0u64;
                for row in &rows {
                    let count = row.try_get::<i64, _>("message_count")?.max(0) as u64;
                    if !ids.is_empty() && messages + count > PURGE_BATCH {
                        break;
                    }
                    ids.push(row.try_get::<String, _>("id")?);
                    messages += count;
                }
                if ids.is_empty() {
                    return Ok(PurgedThreads::default());
                }
                let list = placeholders(1, ids.len());
                for sql in THREAD_ROWS {
                    delete_for(tx, sql.replace("{ids}", &list), &ids).await?;
                }
                let messages = delete_for(
                    tx,
                    format!("DELETE FROM messages WHERE thread_id IN ({list})"),
                    &ids,
                )
                .await?;
                let threads =
                    delete_for(tx, format!("DELETE FROM threads WHERE id IN ({list})"), &ids)
                        .await?;
                Ok(PurgedThreads { threads, messages })
            })
        })
        .await
    }

    /// Purges up to [`PURGE_BATCH`] task events logged before `before`, keeping each thread's
    /// latest and those a due delivery will render. Returns how many it removed.
    pub async fn purge_task_events(&self, before: Timestamp) -> Result<u64> {
        self.write(move |tx| {
            Box::pin(async move {
                let done = query(
                    "DELETE FROM task_events WHERE (thread_id, seq) IN ( \
                     SELECT e.thread_id, e.seq FROM task_events e JOIN threads t ON t.id = e.thread_id \
                     WHERE e.created_at < $1 AND e.seq < t.task_event_seq \
                     AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.thread_id = e.thread_id \
                         AND d.event_seq = e.seq AND d.state = 'pending') \
                     ORDER BY e.created_at LIMIT $2)",
                )
                .bind(before.0)
                .bind(PURGE_BATCH as i64)
                .execute(&mut *tx)
                .await?;
                Ok(done.rows_affected())
            })
        })
        .await
    }

    /// Purges up to 40 deliveries delivered or dead before `before`, with their attempts.
    pub async fn purge_finished_deliveries(&self, before: Timestamp) -> Result<PurgedDeliveries> {
        let lock = self.for_update();
        self.write(move |tx| {
            Box::pin(async move {
                // Chosen and locked first: an admin's retry (dead → pending) on another replica
                // either commits before (the delivery is no longer finished) or waits.
                let sql = format!(
                    "SELECT id FROM deliveries WHERE state <> 'pending' AND finished_at < $1 \
                     ORDER BY finished_at, id LIMIT $2{lock}"
                );
                let rows = query(sql)
                    .bind(before.0)
                    .bind(DELIVERIES_PER_BATCH)
                    .fetch_all(&mut *tx)
                    .await?;
                let ids = rows
                    .iter()
                    .map(|r| r.try_get::<i64, _>("id"))
                    .collect::<Result<Vec<_>>>()?;
                if ids.is_empty() {
                    return Ok(PurgedDeliveries::default());
                }
                let list = placeholders(1, ids.len());
                let mut attempts = query(format!(
                    "DELETE FROM delivery_attempts WHERE delivery_id IN ({list})"
                ));
                let mut deliveries = query(format!("DELETE FROM deliveries WHERE id IN ({list})"));
                for id in &ids {
                    attempts = attempts.bind(*id);
                    deliveries = deliveries.bind(*id);
                }
                let attempts = attempts.execute(&mut *tx).await?.rows_affected();
                let deliveries = deliveries.execute(&mut *tx).await?.rows_affected();
                Ok(PurgedDeliveries {
                    deliveries,
                    attempts,
                })
            })
        })
        .await
    }

    /// Purges up to [`PURGE_BATCH`] audit entries made before `before`, oldest first.
    /// Purges up to [`PURGE_BATCH`] tool confirmations bound to no thread that settled
    /// (decided, expired or used; counted from the last of those moments) before `before`,
    /// with their links. Returns how many confirmations it removed.
    pub async fn purge_settled_confirmations(&self, before: Timestamp) -> Result<u64> {
        self.write(move |tx| {
            Box::pin(async move {
                let rows = query(
                    "SELECT id FROM tool_confirmations WHERE thread_id IS NULL AND state <> 'pending' \
                     AND COALESCE(consumed_at, decided_at, created_at) < $1 ORDER BY created_at, id LIMIT $2",
                )
                .bind(before.0)
                .bind(PURGE_BATCH as i64)
                .fetch_all(&mut *tx)
                .await?;
                let ids = rows
                    .iter()
                    .map(|r| r.try_get::<String, _>("id"))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                if ids.is_empty() {
                    return Ok(0);
                }
                let list = placeholders(1, ids.len());
                delete_for(
                    tx,
                    format!("DELETE FROM confirmation_links WHERE confirmation_id IN ({list})"),
                    &ids,
                )
                .await?;
                delete_for(
                    tx,
                    format!("DELETE FROM tool_confirmations WHERE id IN ({list})"),
                    &ids,
                )
                .await
            })
        })
        .await
    }

    pub async fn purge_audit(&self, before: Timestamp) -> Result<u64> {
        self.write(move |tx| {
            Box::pin(async move {
                let done = query(
                    "DELETE FROM audit_log WHERE seq IN \
                     (SELECT seq FROM audit_log /* scan: oldest first, stopping at the batch */ \
                     WHERE at < $1 ORDER BY seq LIMIT $2)",
                )
                .bind(before.0)
                .bind(PURGE_BATCH as i64)
                .execute(&mut *tx)
                .await?;
                Ok(done.rows_affected())
            })
        })
        .await
    }
}

/// Runs `sql` (its `$1…$n` are `ids`) and returns the rows it deleted.
async fn delete_for(tx: &mut Conn, sql: String, ids: &[String]) -> Result<u64> {
    let mut q = query(sql);
    for id in ids {
        q = q.bind(id.clone());
    }
    Ok(q.execute(&mut *tx).await?.rows_affected())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Backend;

    /// Every table of the schema that keeps a thread's rows (a `thread_id` column) is in
    /// [`THREAD_ROWS`] (but `messages` and `audit_log`), so that a table added later cannot leave a
    /// purged thread's rows behind.
    #[tokio::test]
    async fn the_thread_purge_covers_every_table_with_a_thread_id() {
        let db = crate::store::test_db::TestDb::new().await;
        let store = Store::open(&db.url).await.unwrap();
        let sql = match store.backend() {
            Backend::Sqlite => {
                "SELECT m.name AS t FROM sqlite_master m JOIN pragma_table_info(m.name) c \
                 WHERE m.type = 'table' AND c.name = 'thread_id' ORDER BY 1"
            }
            Backend::Postgres => {
                "SELECT CAST(table_name AS TEXT) AS t FROM information_schema.columns \
                 WHERE column_name = 'thread_id' AND table_schema = current_schema() ORDER BY 1"
            }
        };
        let tables: Vec<String> = query(sql)
            .fetch_all(&store.pool)
            .await
            .unwrap()
            .iter()
            .map(|r| r.try_get("t").unwrap())
            .collect();
        assert!(tables.len() > 5, "{tables:?}");
        // `messages` goes in a statement of its own; the audit log keeps its own retention
        // (`[retention] audit`): what was decided on a thread outlives the thread.
        let left: Vec<&String> = tables
            .iter()
            .filter(|table| {
                let delete = format!("DELETE FROM {table} WHERE thread_id IN");
                !["messages", "audit_log"].contains(&table.as_str())
                    && !THREAD_ROWS.iter().any(|d| d.starts_with(&delete))
            })
            .collect();
        assert!(
            left.is_empty(),
            "the thread purge leaves the rows of {left:?}"
        );
    }
}
