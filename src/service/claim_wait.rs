//! A `claim` of `next` that waits for work (issue 49): the session waits on this replica until a
//! claimable task addressed to its person is handed to it, then claims it and answers with it.
//! Each new claimable task is handed to ONE waiting claimer ([`crate::bus::Topic::claimable`],
//! [`crate::bus::WakeBus::hand`]), not to every session waiting: a task costs one claim, however
//! many sessions wait, and a session of another person is never woken. What happens to a hand-off
//! whose claimer cannot take it, or has gone, is the bus's (`bus/handoff.rs`): it goes on to
//! another waiter, so nothing is stranded.

use std::future::Future;
use std::time::Duration;

use super::coordination::nothing_to_claim;
use super::{Caller, Result, Service, ServiceError};
use crate::bus::Topic;
use crate::domain::PersonId;
use crate::store::ClaimRecord;

impl Service {
    /// Claims the oldest claimable thread addressed to the caller (as `claim` of `next`); when
    /// there is none, waits up to `wait_s` seconds (at most the long-poll limit) for one to be
    /// handed to this session. Counts as a long-poll of the caller's person (the same limit) and
    /// ends with its credential. Nothing after the wait: `not_found`, as for `next` at once.
    ///
    /// Not an `async fn`, as [`Service::inbox`]: the wait's future is the traced work itself.
    pub fn claim_next_waiting<'a>(
        &'a self,
        caller: &'a Caller,
        lease_s: Option<u64>,
        wait_s: u64,
    ) -> impl Future<Output = Result<ClaimRecord>> + Send + 'a {
        let wait = self.claim_next_waiting_untraced(caller, lease_s, wait_s);
        self.traced("service.claim_wait", None, wait)
    }

    async fn claim_next_waiting_untraced(
        &self,
        caller: &Caller,
        lease_s: Option<u64>,
        wait_s: u64,
    ) -> Result<ClaimRecord> {
        caller.require_participant()?;
        let max_wait = self.inner.settings.max_wait_s;
        if wait_s > max_wait {
            return Err(ServiceError::invalid(format!(
                "wait_s {wait_s} is out of range: use 0-{max_wait}"
            )));
        }
        let session = caller.session()?.clone();
        let lease_s = super::coordination::lease_ttl(self, lease_s)?;
        // Registered before the first read: a task handed after it is seen by that read or
        // ends the wait that follows.
        let mut waiter = self.inner.bus.handoff(&Topic::claimable(caller.id()));
        let hold = self.hold_credential(caller).await?;
        let _counted = self.count_waiter(caller)?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(wait_s);
        loop {
            waiter.reading();
            if let Some(claim) = self.claim_next_once(caller, &session, lease_s).await? {
                waiter.took();
                return Ok(claim);
            }
            // Nothing this session can take: a hand-off that woke it goes to another claimer.
            waiter.pass_on();
            hold.check()?;
            if tokio::time::Instant::now() >= deadline {
                return Err(nothing_to_claim());
            }
            tokio::select! {
                () = waiter.handed() => {}
                () = tokio::time::sleep_until(deadline) => {}
                why = super::credentials::ended(Some(&hold)) => return Err(why),
                () = self.inner.shutdown.cancelled() => return Err(nothing_to_claim()),
            }
        }
    }

    /// A task `person`'s agents may claim became claimable (a new request, handoff or task
    /// without a pending approval; an approval granted; a claim released): one of the claimers
    /// waiting for work takes it. The inbox's own wake-up is published apart.
    pub(super) fn claimable_for(&self, person: &PersonId) {
        self.inner.bus.hand(&Topic::claimable(person));
    }
}
