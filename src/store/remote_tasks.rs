//! The outbound bridge's rows (SPEC §8b): one per thread delegated to a remote agent, and the
//! outbox deliveries that carry its messages out.
//!
//! A message to a remote agent is stored with what it sets in motion, in one transaction: the
//! thread's row here (its first message creates it), and unless an outbound approval holds it, a
//! `remote.send` delivery (a `close` gets a `remote.cancel`). When the approval is allowed, the
//! settlement enqueues the held send in its own transaction. So a send is never lost between the
//! post and the outbox, and the outbox's lease makes one worker send it. The follower that turns
//! the remote task's changes into messages claims rows here by lease too.
//!
//! What a post sets in motion is written by its transaction's blocks (`tx::remote_hops`); here are
//! the operations on the rows after that: the follower's lease, what it observed, its trouble. An
//! operation file (`impl Store` only): no building block (`tx/`) and no other operation file may
//! depend on it.

use super::Store;
use super::db::query;
use super::error::Result;
use super::model::input::RemoteObservation;
use super::model::records::remote_tasks::{COLUMNS, RemoteTaskRecord, record};
use super::tx::remote_hops::observed;
use crate::domain::{PersonId, ThreadId, Timestamp};

impl Store {
    /// The remote task row of a thread.
    pub async fn remote_task(&self, thread: &ThreadId) -> Result<Option<RemoteTaskRecord>> {
        let sql = format!("SELECT {COLUMNS} FROM remote_tasks WHERE thread_id = $1");
        let row = query(sql)
            .bind(thread.as_str().to_owned())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(record).transpose()
    }

    /// The remote tasks of the threads delegated to `remote`, newest first, at most `limit`.
    pub async fn remote_tasks_of(
        &self,
        remote: &PersonId,
        limit: i64,
    ) -> Result<Vec<RemoteTaskRecord>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM remote_tasks /* scan: a remote's tasks, stopping at the page */ WHERE remote = $1 \
             ORDER BY created_at DESC, thread_id DESC LIMIT $2"
        );
        let rows = query(sql)
            .bind(remote.as_str().to_owned())
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(record).collect()
    }

    /// Records the task a send created or continued: a task id different from the current one
    /// starts a new round (the old id joins `earlier_tasks`).
    pub async fn record_remote_task(&self, o: RemoteObservation) -> Result<()> {
        let lock = self.for_update();
        self.write(move |tx| Box::pin(async move { observed(tx, &o, lock).await }))
            .await
    }

    /// Records that following a task hit a problem (shown to admins; the follower retries).
    pub async fn remote_task_trouble(
        &self,
        thread: &ThreadId,
        error: String,
        next_check_at: Timestamp,
        backoff_ms: i64,
        now: Timestamp,
    ) -> Result<()> {
        let thread = thread.as_str().to_owned();
        self.write(move |tx| {
            Box::pin(async move {
                query(
                    "UPDATE remote_tasks SET last_error = $1, next_check_at = $2, backoff_ms = $3, updated_at = $4 \
                     WHERE thread_id = $5",
                )
                .bind(error.chars().take(500).collect::<String>())
                .bind(next_check_at.0)
                .bind(backoff_ms)
                .bind(now.0)
                .bind(thread)
                .execute(&mut *tx)
                .await?;
                Ok(())
            })
        })
        .await
    }

    /// Claims up to `limit` remote tasks to follow for `owner` until `lease_until`: those with a
    /// task id, not terminal, not leased by a live follower, and due (`next_check_at` passed).
    pub async fn claim_remote_tasks(
        &self,
        owner: String,
        now: Timestamp,
        lease_until: Timestamp,
        limit: i64,
    ) -> Result<Vec<RemoteTaskRecord>> {
        let skip_locked = match self.backend {
            super::Backend::Postgres => " FOR UPDATE SKIP LOCKED",
            super::Backend::Sqlite => "",
        };
        let sql = format!(
            "WITH picked AS (SELECT thread_id FROM remote_tasks WHERE task_id IS NOT NULL \
             AND (state IS NULL OR state NOT IN ('completed', 'failed', 'rejected', 'canceled')) \
             AND (lease_until IS NULL OR lease_until <= $3) \
             AND next_check_at <= $3 ORDER BY next_check_at LIMIT $4{skip_locked}) \
             UPDATE remote_tasks SET lease_owner = $1, lease_until = $2 \
             WHERE thread_id IN (SELECT thread_id FROM picked) AND (lease_until IS NULL OR lease_until <= $3) \
             RETURNING {COLUMNS}"
        );
        self.write(move |tx| {
            Box::pin(async move {
                let rows = query(sql)
                    .bind(owner)
                    .bind(lease_until.0)
                    .bind(now.0)
                    .bind(limit)
                    .fetch_all(&mut *tx)
                    .await?;
                rows.iter().map(record).collect()
            })
        })
        .await
    }

    /// Extends `owner`'s lease on a thread's remote task to `until` (a time already past gives
    /// it up). False when the lease passed to another follower.
    pub async fn renew_remote_task(
        &self,
        thread: &ThreadId,
        owner: String,
        until: Timestamp,
    ) -> Result<bool> {
        let thread = thread.as_str().to_owned();
        self.write(move |tx| {
            Box::pin(async move {
                let done = query(
                    "UPDATE remote_tasks SET lease_until = $1 WHERE thread_id = $2 AND lease_owner = $3",
                )
                .bind(until.0)
                .bind(thread)
                .bind(owner)
                .execute(&mut *tx)
                .await?;
                Ok(done.rows_affected() == 1)
            })
        })
        .await
    }

    /// When a follower should look next without being woken: the earliest time a task that is
    /// still followed falls due (its lease, if any, counted).
    pub async fn next_remote_check(&self) -> Result<Option<Timestamp>> {
        let row = query(
            "SELECT MIN(CASE WHEN lease_until IS NOT NULL AND lease_until > next_check_at \
             THEN lease_until ELSE next_check_at END) AS due FROM remote_tasks WHERE task_id IS NOT NULL \
             AND (state IS NULL OR state NOT IN ('completed', 'failed', 'rejected', 'canceled'))",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get::<Option<i64>, _>("due")?.map(Timestamp))
    }

    /// Makes a thread's remote task due now (a push said it changed). False when the thread has
    /// no remote task.
    pub async fn nudge_remote_task(&self, thread: &ThreadId, now: Timestamp) -> Result<bool> {
        let thread = thread.as_str().to_owned();
        self.write(move |tx| {
            Box::pin(async move {
                let done = query(
                    "UPDATE remote_tasks SET next_check_at = $1 WHERE thread_id = $2 AND next_check_at > $1",
                )
                .bind(now.0)
                .bind(thread)
                .execute(&mut *tx)
                .await?;
                Ok(done.rows_affected() == 1)
            })
        })
        .await
    }
}
