//! The approval sweep: expires approvals whose deadline passed (closing their threads), until
//! shutdown. A claim or decision on an approval past its deadline expires it at once, so the sweep
//! only bounds how late an untouched thread is closed.
//!
//! The command sweep: withdraws the commands of personal sessions nobody picked up in time.
//!
//! The retention sweep: purges what `[retention]` no longer keeps, every [`RETENTION_SWEEP`]
//! (the service purges in bounded transactions, so the writer is never held for long).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::service::{Retention, Service};

/// How often pending approvals are checked for expiry.
pub const APPROVAL_SWEEP: Duration = Duration::from_secs(15);

/// Expires due approvals every [`APPROVAL_SWEEP`] until `shutdown`.
pub async fn sweep_approvals(service: Service, shutdown: CancellationToken) {
    loop {
        if let Err(e) = service.expire_approvals().await {
            tracing::warn!(error = %e, "Could not expire approvals; will retry.");
        }
        tokio::select! {
            () = tokio::time::sleep(APPROVAL_SWEEP) => {}
            () = shutdown.cancelled() => return,
        }
    }
}

/// How often the commands of personal sessions are checked for their pickup deadline (a
/// command due at 10:00:00 is withdrawn by 10:00:01; a claim after the deadline is refused at
/// once whatever the sweep did).
pub const COMMAND_SWEEP: Duration = Duration::from_secs(1);

/// Withdraws unclaimed commands past their deadline, and expires tool confirmations past theirs, every [`COMMAND_SWEEP`] until `shutdown`.
/// On PostgreSQL every replica sweeps; each withdrawal is conditional, so two never withdraw one
/// command twice.
pub async fn sweep_commands(service: Service, shutdown: CancellationToken) {
    loop {
        if let Err(e) = service.expire_commands().await {
            tracing::warn!(error = %e, "Could not expire commands; will retry.");
        }
        // Tool-call confirmations nobody decided in time (SPEC §5b): their hooks deny.
        if let Err(e) = service.expire_tool_confirmations().await {
            tracing::warn!(error = %e, "Could not expire tool confirmations; will retry.");
        }
        tokio::select! {
            () = tokio::time::sleep(COMMAND_SWEEP) => {}
            () = shutdown.cancelled() => return,
        }
    }
}

/// How often records past their retention are purged.
pub const RETENTION_SWEEP: Duration = Duration::from_secs(600);

/// Purges what `retention` no longer keeps, at start and then every [`RETENTION_SWEEP`], until
/// `shutdown`. On PostgreSQL every replica sweeps; their purges lock the rows they take, so two
/// never remove the same rows twice and each only finds less to do.
pub async fn sweep_retention(service: Service, retention: Retention, shutdown: CancellationToken) {
    loop {
        if let Err(e) = service.purge_expired(&retention).await {
            tracing::warn!(error = %e, "Could not purge records past their retention; will retry.");
        }
        tokio::select! {
            () = tokio::time::sleep(RETENTION_SWEEP) => {}
            () = shutdown.cancelled() => return,
        }
    }
}
