//! The service's spans (`crate::telemetry`): one per operation that moves a delegated task on,
//! joined to the trace of the request that opened its thread when the operation names one, so
//! that an agent's claim and reply, made in requests of their own, land in the external client's
//! trace (linked to the request they ran in). While tracing is off an operation runs as is.

use std::future::Future;

use futures::future::Either;

use tracing::Instrument as _;

use super::{Result, Service};
use crate::domain::ThreadId;
use crate::telemetry::{self, span};

impl Service {
    /// The trace context kept for `thread` (none while tracing is off, or when it was opened
    /// while tracing was off), for a worker's span to continue.
    pub async fn thread_trace(&self, thread: &ThreadId) -> Option<telemetry::TraceContext> {
        if !telemetry::on() {
            return None;
        }
        self.inner.store.thread_trace(thread).await.ok().flatten()
    }

    /// Runs `op` in a span named `name`, a child of `thread`'s stored trace context when it has
    /// one; an error is the span's status.
    ///
    /// While tracing is off this is `op` itself, not a future around it: an `async fn` would keep
    /// room for `op` twice (its argument, and the same future once awaited), and a long-poll's
    /// future lives as long as it waits. With tracing on, the span's work is boxed for the same
    /// reason.
    pub(super) fn traced<'a, T: 'a>(
        &'a self,
        name: &'static str,
        thread: Option<&'a ThreadId>,
        op: impl Future<Output = Result<T>> + Send + 'a,
    ) -> impl Future<Output = Result<T>> + Send + 'a {
        if !telemetry::on() {
            return Either::Left(op);
        }
        Either::Right(Box::pin(async move {
            let span = span!(name, trace_id = tracing::field::Empty);
            if let Some(thread) = thread {
                // A thread without a context (opened while tracing was off) or a failed read: the
                // operation stays in its request's trace.
                let at = self.thread_trace(thread).await;
                telemetry::adopt(&span, at.as_ref());
                telemetry::attribute(&span, "liaison.thread", thread.as_str().to_owned());
            }
            telemetry::record_trace_id(&span);
            let out = op.instrument(span.clone()).await;
            if let Err(e) = &out {
                telemetry::attribute(&span, "liaison.error", e.code.as_str());
                telemetry::failed(&span, &e.message);
            }
            out
        }))
    }
}
