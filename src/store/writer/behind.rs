//! Writes behind: writes whose callers do not wait for their commit (the "read" of a receipt,
//! SPEC §4: information, not an acknowledgement). They are kept here until the writer's next
//! batch takes them, so they ride with the next write that someone waits for instead of costing a
//! commit of their own in front of it; when no write comes, a timer started by the first of them
//! wakes the writer after [`FLUSH_AFTER`]. At most [`MAX_BEHIND`] are kept: past that, a write
//! behind is queued like any other (its caller still does not wait for the commit). A crash
//! (`kill -9`, power loss) loses the writes behind that no commit took yet: at most those of the
//! last [`FLUSH_AFTER`]. It depends only on `db`, `error` and the jobs ([`super::job`]).

use std::sync::Mutex;
use std::time::Duration;

use super::job::Job;
use crate::store::db::{BoxFut, Conn};
use crate::store::error::{Result, StoreError};

/// The longest a write behind waits for a write to ride with before the writer is woken for it.
pub(super) const FLUSH_AFTER: Duration = Duration::from_millis(50);

/// Most writes behind kept for the next batch; bounds that batch's size and what a crash loses.
pub(super) const MAX_BEHIND: usize = 1024;

/// What a write behind calls once its batch ended: `Ok` once it is durable.
pub(crate) type Then = Box<dyn FnOnce(Result<()>) + Send>;

/// The writes behind, waiting for the writer's next batch.
#[derive(Default)]
pub(super) struct Behind {
    jobs: Mutex<Vec<Box<dyn Job>>>,
}

/// Where [`Behind::keep`] put a job.
pub(super) enum Kept {
    /// Kept, and the first since the writer last took them: a timer must wake the writer.
    First,
    /// Kept beside others, whose timer runs.
    More,
    /// Not kept: [`MAX_BEHIND`] wait already. The job is handed back.
    Full(Box<dyn Job>),
}

impl Behind {
    pub(super) fn keep(&self, job: Box<dyn Job>) -> Kept {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        if jobs.len() >= MAX_BEHIND {
            return Kept::Full(job);
        }
        jobs.push(job);
        if jobs.len() == 1 {
            Kept::First
        } else {
            Kept::More
        }
    }

    /// Takes every write behind, oldest first (the writer, as a batch starts).
    pub(super) fn take(&self) -> Vec<Box<dyn Job>> {
        std::mem::take(&mut *self.jobs.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub(super) fn is_empty(&self) -> bool {
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }
}

/// A write behind: run once in the batch that takes it; its caller hears of the commit through
/// `then` (a failure is logged: nobody waits for it).
pub(super) struct Later<F> {
    pub(super) op: Option<F>,
    pub(super) outcome: Option<Result<()>>,
    pub(super) then: Option<Then>,
}

impl<F> Later<F> {
    fn done(&mut self, result: Result<()>) {
        if let Err(e) = &result {
            tracing::warn!(error = %e, "A write behind (a receipt's read) was not recorded.");
        }
        if let Some(then) = self.then.take() {
            then(result);
        }
    }
}

impl<F> Job for Later<F>
where
    F: for<'c> FnOnce(&'c mut Conn) -> BoxFut<'c, Result<()>> + Send,
{
    fn run<'c>(&'c mut self, conn: &'c mut Conn) -> BoxFut<'c, bool> {
        let op = self.op.take();
        Box::pin(async move {
            let result = match op {
                Some(op) => op(conn).await,
                None => Err(StoreError::Database("a write ran twice".into())),
            };
            let ok = result.is_ok();
            self.outcome = Some(result);
            ok
        })
    }

    fn repeatable(&self) -> bool {
        false
    }

    fn answer(mut self: Box<Self>, commit: Result<()>) {
        let result = match self.outcome.take() {
            Some(Ok(())) => commit,
            Some(Err(e)) => Err(e),
            None => Err(StoreError::Database("a write was not run".into())),
        };
        self.done(result);
    }

    fn fail(mut self: Box<Self>, e: StoreError) {
        self.done(Err(e));
    }

    fn abandoned(&self) -> bool {
        false
    }

    fn storage(&self) -> Option<bool> {
        match &self.outcome {
            Some(Ok(())) => Some(true),
            Some(Err(StoreError::Database(_))) => Some(false),
            _ => None,
        }
    }

    fn traced(&self, _jobs: usize, _commit_ms: f64) {}
}

/// Writes nothing: it only makes the writer start a batch, which takes the writes behind. The
/// writer drops it unrun (as a write whose caller stopped waiting).
pub(super) struct Wake;

impl Job for Wake {
    fn run<'c>(&'c mut self, _conn: &'c mut Conn) -> BoxFut<'c, bool> {
        Box::pin(async { true })
    }

    fn repeatable(&self) -> bool {
        false
    }

    fn answer(self: Box<Self>, _commit: Result<()>) {}

    fn fail(self: Box<Self>, _e: StoreError) {}

    fn abandoned(&self) -> bool {
        true
    }

    fn storage(&self) -> Option<bool> {
        None
    }

    fn traced(&self, _jobs: usize, _commit_ms: f64) {}
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::super::tests::{Act, insert, rows, writer};
    use super::*;
    use crate::store::db::query;

    /// A `then` that keeps what it heard in `heard`.
    fn heard_into(heard: &Arc<Mutex<Vec<(&'static str, bool)>>>, id: &'static str) -> Then {
        let heard = heard.clone();
        Box::new(move |r| heard.lock().unwrap().push((id, r.is_ok())))
    }

    #[tokio::test]
    async fn a_write_behind_rides_with_the_next_write_and_is_written_first() {
        let db = crate::store::test_db::TestDb::new().await;
        let w = writer(&db).await;
        let heard = Arc::new(Mutex::new(Vec::new()));
        w.run_behind(
            |conn| insert(conn, "read".into(), Act::Insert),
            heard_into(&heard, "read"),
        )
        .await
        .unwrap();
        // The next write someone waits for: its batch takes the write behind first, so once it
        // is answered, the write behind is durable and its caller was told.
        w.run(|conn| {
            Box::pin(async move {
                let seen: i64 = query("SELECT COUNT(*) AS n FROM t WHERE id = 'read'")
                    .fetch_one(&mut *conn)
                    .await?
                    .try_get("n")?;
                assert_eq!(seen, 1, "written before the write that took it");
                insert(conn, "ack".into(), Act::Insert).await
            })
        })
        .await
        .unwrap();
        assert_eq!(*heard.lock().unwrap(), [("read", true)]);
        assert_eq!(rows(&db).await, ["ack", "read"]);
        // One that fails fails alone, and says so.
        w.run_behind(
            |conn| insert(conn, "bad".into(), Act::InsertThenFail),
            heard_into(&heard, "bad"),
        )
        .await
        .unwrap();
        w.run(|conn| insert(conn, "next".into(), Act::Insert))
            .await
            .unwrap();
        assert_eq!(heard.lock().unwrap()[1], ("bad", false));
        assert_eq!(rows(&db).await, ["ack", "next", "read"]);
    }

    #[tokio::test]
    async fn a_write_behind_with_no_write_after_it_is_written_by_itself_and_at_close() {
        let db = crate::store::test_db::TestDb::new().await;
        let w = writer(&db).await;
        let (tx, rx) = tokio::sync::oneshot::channel();
        w.run_behind(
            |conn| insert(conn, "alone".into(), Act::Insert),
            Box::new(move |r| {
                let _ = tx.send(r.is_ok());
            }),
        )
        .await
        .unwrap();
        // Nothing else is written: the timer wakes the writer. (The bound only keeps a lost
        // wake-up from hanging the suite.)
        let written = tokio::time::timeout(std::time::Duration::from_secs(30), rx).await;
        assert_eq!(written.map(Result::ok), Ok(Some(true)));
        assert_eq!(rows(&db).await, ["alone"]);
        // Closing the store writes what is left behind before the writer stops.
        let heard = Arc::new(Mutex::new(Vec::new()));
        for id in ["c1", "c2"] {
            w.run_behind(
                move |conn| insert(conn, id.into(), Act::Insert),
                heard_into(&heard, id),
            )
            .await
            .unwrap();
        }
        w.close().await;
        assert_eq!(*heard.lock().unwrap(), [("c1", true), ("c2", true)]);
        assert_eq!(rows(&db).await, ["alone", "c1", "c2"]);
        // A closed store keeps nothing behind.
        let refused = w
            .run_behind(
                |conn| insert(conn, "late".into(), Act::Insert),
                Box::new(|_| {}),
            )
            .await;
        assert!(refused.is_err());
    }

    #[test]
    fn the_writes_kept_behind_are_bounded() {
        let behind = Behind::default();
        for _ in 0..MAX_BEHIND {
            assert!(!matches!(behind.keep(Box::new(Wake)), Kept::Full(_)));
        }
        assert!(matches!(behind.keep(Box::new(Wake)), Kept::Full(_)));
        assert_eq!(behind.take().len(), MAX_BEHIND);
        assert!(behind.is_empty());
        assert!(matches!(behind.keep(Box::new(Wake)), Kept::First));
    }
}
