//! The approval sweep: expires approvals whose deadline passed (closing their threads), until
//! shutdown. A claim or decision on an approval past its deadline expires it at once, so the sweep
//! only bounds how late an untouched thread is closed.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::service::Service;

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
