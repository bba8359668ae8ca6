//! What `/metrics` reads from the database at scrape time, at the service's clock: pending
//! approvals (and how many are about to expire), the outbox's backlog, the inboxes' depth. The
//! figures are the same on every replica (they come from the shared database); no caller is
//! asked for, since the scrape has its own token and the figures name nobody.

use super::{Result, Service};
use crate::store::{ApprovalFigures, InboxFigures, OutboxFigures};

/// The window of "expiring soon" (`liaison_approvals_expiring_soon`): 15 minutes, room for a
/// human to be paged and decide.
pub const EXPIRING_SOON_MS: i64 = 15 * 60 * 1000;

impl Service {
    /// Approvals waiting for a human's decision, all channels: how many, the oldest one's age and
    /// how many expire within [`EXPIRING_SOON_MS`].
    pub async fn approval_figures(&self) -> Result<ApprovalFigures> {
        Ok(self
            .inner
            .store
            .approval_figures(self.now(), EXPIRING_SOON_MS)
            .await?)
    }

    /// The outbox's pending and dead deliveries, and how long the oldest due one has been due.
    pub async fn outbox_figures(&self) -> Result<OutboxFigures> {
        Ok(self.inner.store.outbox_figures(self.now()).await?)
    }

    /// The entries the inboxes' known consumers have yet to acknowledge: in all, and the most
    /// one consumer has.
    pub async fn inbox_figures(&self) -> Result<InboxFigures> {
        Ok(self.inner.store.inbox_figures().await?)
    }
}
