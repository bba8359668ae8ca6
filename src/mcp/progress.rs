//! Progress while a tool waits: when the client sent a `progressToken`, a notification every few
//! seconds keeps client timeouts and idle proxies from cutting a long-poll; a cancelled call, a
//! client that went away, or the end of the call's session ends the wait by dropping the future.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::RequestContext;

use super::sessions::SessionEnd;
use super::tools::Parts;

/// How often a waiting call reports progress.
pub(crate) const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Runs `work`, reporting progress (seconds waited, out of `total_s`) while it runs. `None` when the
/// call was cancelled, the client stopped listening or the call's session ended; the caller then
/// drops `work`.
///
/// `work` is pinned where the caller holds it: taken by value, this future would keep room for it
/// twice (its argument, and the pinned copy it polls) for as long as a long-poll waits.
pub(crate) async fn with_progress<F: Future>(
    mut work: Pin<&mut F>,
    ctx: &RequestContext<RoleServer>,
    total_s: u64,
) -> Option<F::Output> {
    let token = ctx.meta.get_progress_token();
    // A stateless call has no session; a session's end reaches its calls before rmcp's drain.
    let session = ctx
        .extensions
        .get::<Parts>()
        .and_then(|p| p.extensions.get::<SessionEnd>())
        .cloned();
    let session_ended = async {
        match &session {
            Some(s) => s.ended().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(session_ended);
    let started = tokio::time::Instant::now();
    let mut ticks = tokio::time::interval_at(started + PROGRESS_EVERY, PROGRESS_EVERY);
    loop {
        tokio::select! {
            out = work.as_mut() => return Some(out),
            () = ctx.ct.cancelled() => return None,
            () = &mut session_ended => return None,
            _ = ticks.tick(), if token.is_some() => {
                let waited = started.elapsed().as_secs_f64().floor();
                let note = ProgressNotificationParam::new(token.clone()?, waited)
                    .with_total(total_s as f64)
                    .with_message(format!("Waiting ({waited:.0} of {total_s} s)."));
                // Boxed: a long-poll's future keeps no room for it while it waits.
                if Box::pin(ctx.peer.notify_progress(note)).await.is_err() {
                    return None;
                }
            }
        }
    }
}
