//! One batch's jobs in its open transaction, separated by savepoints (see [`super`]): a failing
//! job rolls back alone, a run of repeatable jobs shares one savepoint and is replayed when one of
//! them fails, and a run of posts that open threads is written by one statement ([`post_group`]).
//! It depends only on `db`, `error`, the jobs ([`super::job`]) and `tx::post_group`.

use std::collections::VecDeque;

use sqlx::Executor;

use super::job::Job;
use crate::store::db::Conn;
use crate::store::error::Result;
use crate::store::tx::post::QueuedPost;
use crate::store::tx::post_group::post_group;

/// Most repeatable jobs that share a savepoint. A failing one makes the others of its run run
/// again, so this bounds what one failing write (a post into a closed thread, say) costs the
/// writer: at most this many jobs' work, while saving all but one savepoint call in this many.
pub(super) const SHARED_RUN: usize = 8;

/// Most posts written together by [`post_group`]: bounds one statement's size.
const MAX_GROUP: usize = 64;

/// How a SQLite batch begins: without a savepoint (see [`Mark`]).
pub(in crate::store) const SQLITE_BEGIN: &str = "BEGIN IMMEDIATE";
/// Undoes everything of a SQLite batch that has no savepoint yet, and begins it again.
const SQLITE_RESTART: &str = "ROLLBACK; BEGIN IMMEDIATE";
/// The same, then sets the savepoint for the next job.
const SQLITE_RESTART_MARKED: &str = "ROLLBACK; BEGIN IMMEDIATE; SAVEPOINT job";

/// Where a job that fails is undone to: the savepoint `job`, or, while no job has been kept, the
/// transaction's start. A SQLite batch begins without a savepoint ([`SQLITE_BEGIN`]): rolling back
/// to one set right after `BEGIN` is rolling back the transaction, and a savepoint is not free
/// there: SQLite copies the original of every page changed under it into its sub-journal. That
/// was 117,000 of the 2.74 million instructions of a delegated round trip at one in flight, where
/// each of a task's three writes is a batch of its own (`docs/performance.md`). The savepoint is
/// set when a job is kept with more to follow. A PostgreSQL batch begins with it (`BEGIN;
/// SAVEPOINT job`, one round trip), and its transaction could not be begun again in the same
/// call.
pub(super) struct Mark {
    savepoint: bool,
}

impl Mark {
    /// The mark right after the batch began with `begin`.
    pub(super) fn after(begin: &str) -> Mark {
        Mark {
            savepoint: begin.ends_with("SAVEPOINT job"),
        }
    }

    /// Undoes what ran since the mark; the mark stays where it is.
    async fn undo(&self, conn: &mut Conn) -> Result<()> {
        let sql = if self.savepoint {
            "ROLLBACK TO job"
        } else {
            SQLITE_RESTART
        };
        bookkeeping(conn, sql).await
    }

    /// Keeps (`ok`) or undoes what ran since the mark, and sets the mark here, for the next job.
    async fn settle(&mut self, conn: &mut Conn, ok: bool) -> Result<()> {
        let sql = match (self.savepoint, ok) {
            (true, true) => "RELEASE job; SAVEPOINT job",
            (true, false) => "ROLLBACK TO job; RELEASE job; SAVEPOINT job",
            (false, true) => "SAVEPOINT job",
            (false, false) => SQLITE_RESTART_MARKED,
        };
        bookkeeping(conn, sql).await?;
        self.savepoint = true;
        Ok(())
    }
}

/// Runs the jobs of `pending` in the open transaction, moving each to `ran` once it has run (with
/// its outcome). `mark` is where the batch began ([`Mark::after`]). An error is the bookkeeping's
/// own; the jobs not yet run are then left in `pending`.
pub(super) async fn run_jobs(
    conn: &mut Conn,
    mut mark: Mark,
    pending: &mut VecDeque<Box<dyn Job>>,
    ran: &mut Vec<Box<dyn Job>>,
) -> Result<()> {
    // The last `shared` jobs of `ran` are repeatable ones that ran since the savepoint was set.
    let mut shared = 0;
    while let Some(mut job) = pending.pop_front() {
        if job.groupable().is_some()
            && pending
                .front()
                .is_some_and(|next| next.groupable().is_some())
        {
            let mut group = vec![job];
            while group.len() < MAX_GROUP
                && let Some(next) = pending.pop_front()
            {
                if next.groupable().is_none() {
                    pending.push_front(next);
                    break;
                }
                group.push(next);
            }
            if shared > 0 {
                // The group gets a savepoint of its own.
                if let Err(e) = mark.settle(conn, true).await {
                    pending.extend(group);
                    return Err(e);
                }
                shared = 0;
            }
            run_group(conn, &mut mark, group, pending, ran).await?;
            continue;
        }
        let last = pending.is_empty();
        if job.repeatable() {
            let ok = job.run(conn).await;
            ran.push(job);
            if ok {
                shared += 1;
                if shared == SHARED_RUN && !last {
                    mark.settle(conn, true).await?;
                    shared = 0;
                }
                continue;
            }
            if shared == 0 {
                // It ran right after the savepoint: it is undone alone, like a job run once.
                if last {
                    mark.undo(conn).await?;
                } else {
                    mark.settle(conn, false).await?;
                }
                continue;
            }
            // Undo the run since the savepoint (this job's included) and replay the others one
            // savepoint per job. The failure stands without a second run: the replay rebuilds
            // what the failing job ran on.
            mark.undo(conn).await?;
            let failed = ran.pop().expect("the failing job was just kept");
            let mut replay: VecDeque<_> = ran.drain(ran.len() - shared..).collect();
            shared = 0;
            let mut replayed = Ok(());
            while let Some(mut job) = replay.pop_front() {
                let ok = job.run(conn).await;
                ran.push(job);
                replayed = mark.settle(conn, ok).await;
                if replayed.is_err() {
                    ran.extend(replay.drain(..));
                    break;
                }
            }
            ran.push(failed);
            replayed?;
            continue;
        }
        if shared > 0 {
            // A job that runs once gets a savepoint of its own.
            if let Err(e) = mark.settle(conn, true).await {
                pending.push_front(job);
                return Err(e);
            }
            shared = 0;
        }
        let ok = job.run(conn).await;
        ran.push(job);
        match (ok, last) {
            // COMMIT releases the last savepoint.
            (true, true) => {}
            (false, true) => mark.undo(conn).await?,
            (ok, false) => mark.settle(conn, ok).await?,
        }
    }
    Ok(())
}

/// Writes `group` (posts that open a thread, at least two, right after a savepoint) in one call;
/// when that fails, undoes it and runs each post alone with a savepoint of its own, so that only
/// a failing post fails. A savepoint is open after it when jobs are left in `pending`.
async fn run_group(
    conn: &mut Conn,
    mark: &mut Mark,
    group: Vec<Box<dyn Job>>,
    pending: &mut VecDeque<Box<dyn Job>>,
    ran: &mut Vec<Box<dyn Job>>,
) -> Result<()> {
    let posts: Vec<&QueuedPost> = group.iter().filter_map(|job| job.groupable()).collect();
    let written = post_group(conn, &posts).await;
    drop(posts);
    match written {
        Ok(posted) => {
            for (mut job, posted) in group.into_iter().zip(posted) {
                job.written(posted);
                ran.push(job);
            }
            if !pending.is_empty() {
                mark.settle(conn, true).await?;
            }
            Ok(())
        }
        Err(e) => {
            tracing::debug!(error = %e, "A group of posts failed; writing each alone.");
            let mut group: VecDeque<_> = group.into();
            let mut outcome = mark.undo(conn).await;
            while outcome.is_ok()
                && let Some(mut job) = group.pop_front()
            {
                let ok = job.run(conn).await;
                ran.push(job);
                outcome = mark.settle(conn, ok).await;
            }
            // What did not run goes back, to be failed with the batch.
            while let Some(job) = group.pop_back() {
                pending.push_front(job);
            }
            outcome
        }
    }
}

/// Runs one of the writer's own statements (they take no parameters). On SQLite they are
/// prepared once and kept; on PostgreSQL, where a prepared call holds one statement, they go as
/// text.
pub(super) async fn bookkeeping(conn: &mut Conn, sql: &'static str) -> Result<()> {
    match conn {
        Conn::Lite(_) => {
            crate::store::db::query(sql).execute(&mut *conn).await?;
        }
        Conn::Pg(conn) => {
            conn.execute(sql).await?;
        }
    }
    Ok(())
}
