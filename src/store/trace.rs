//! The trace context of the write running now (`crate::telemetry`): the writer runs each job
//! [`within`] the context its caller had, and the rows that keep one (a new thread's, a
//! delivery's) read it with [`current`]. Nothing is set while tracing is off. It calls no other
//! block.

use std::future::Future;

use crate::store::db::{Conn, query};
use crate::store::error::Result;
use crate::telemetry::TraceContext;

tokio::task_local! {
    static WRITE: TraceContext;
}

/// Runs `write` with `context` as the current write's (as is when there is none).
pub(in crate::store) async fn within<F: Future>(
    context: Option<TraceContext>,
    write: F,
) -> F::Output {
    match context {
        Some(c) => WRITE.scope(c, write).await,
        None => write.await,
    }
}

/// The context of the write running now, if it has one.
pub(in crate::store) fn current() -> Option<TraceContext> {
    WRITE.try_with(TraceContext::clone).ok()
}

/// Keeps the current write's context as `thread`'s, the thread it opens (a replay keeps the
/// first).
pub(in crate::store) async fn opened(tx: &mut Conn, thread: &str) -> Result<()> {
    let Some(c) = current() else { return Ok(()) };
    query(
        "INSERT INTO thread_traces (thread_id, traceparent, tracestate) VALUES ($1, $2, $3) \
         ON CONFLICT (thread_id) DO NOTHING",
    )
    .bind(thread.to_owned())
    .bind(c.traceparent)
    .bind(c.tracestate)
    .execute(&mut *tx)
    .await?;
    Ok(())
}
