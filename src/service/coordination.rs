//! Claims, presence and leases: how agent sessions coordinate without stepping on each other.

use std::collections::HashSet;
use std::sync::Mutex;

use serde::Serialize;

use super::{Caller, ErrorCode, Result, Service, ServiceError, input};
use crate::bus::Topic;
use crate::domain::{LeaseMode, TaskEvent, ThreadId, Transition, text};
use crate::store::{
    ClaimAttempt, ClaimRecord, LeaseAttempt, LeaseRecord, PresenceRecord, StoreError,
};

/// Which thread to claim.
#[derive(Debug, Clone)]
pub enum ClaimTarget {
    Thread(ThreadId),
    /// The oldest open, unclaimed request or handoff addressed to the caller.
    Next,
}

/// What to do with the claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimAction {
    /// Claim, or renew when this session already holds it.
    Claim,
    Release,
}

#[derive(Debug, Clone, Serialize)]
pub struct PresenceSpec {
    pub transition: Transition,
    pub task: Option<String>,
    pub ttl_s: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct LeaseSpec {
    pub resource: String,
    pub mode: LeaseMode,
    pub ttl_s: Option<u64>,
    pub force: bool,
}

/// Longest presence TTL and lease TTL: 24 h.
const MAX_TTL_S: u64 = 24 * 3600;
/// Default lease TTL: 10 minutes.
const DEFAULT_LEASE_TTL_S: u64 = 600;

fn ttl(value: Option<u64>, default: u64, what: &str) -> Result<u64> {
    match value {
        None => Ok(default),
        Some(s) if (1..=MAX_TTL_S).contains(&s) => Ok(s),
        Some(s) => Err(ServiceError::invalid(format!(
            "{what} {s} is out of range: use 1-{MAX_TTL_S} seconds"
        ))),
    }
}

fn check_resource(resource: &str) -> Result<()> {
    let ok = !resource.is_empty()
        && resource.len() <= 200
        && resource.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b':' | b'.' | b'_' | b'-' | b'/' | b'@')
        });
    if ok {
        Ok(())
    } else {
        Err(ServiceError::invalid(
            "resource must be 1-200 characters of letters, digits and : . _ - / @ (e.g. repo:whatsapp-bridge)",
        ))
    }
}

impl Service {
    /// Claims (or renews, or releases) a request, handoff or external task thread for the caller's
    /// agent session.
    /// Returns the claim held after the call (none after a release).
    pub async fn claim(
        &self,
        caller: &Caller,
        target: ClaimTarget,
        action: ClaimAction,
        lease_s: Option<u64>,
    ) -> Result<Option<ClaimRecord>> {
        self.claim_fenced(caller, target, action, lease_s, None)
            .await
    }

    /// [`Service::claim`], the claim of a given thread carrying the fencing token the caller's
    /// session was given: a renewal with a stale token (the lease expired and another session
    /// claimed the thread since) is refused with `stale_claim` naming the holder, and one with a
    /// token the thread never issued with `invalid_input`; the check is part of the claim's
    /// transaction. A renewal keeps its token; a new holder gets the thread's next one.
    pub async fn claim_fenced(
        &self,
        caller: &Caller,
        target: ClaimTarget,
        action: ClaimAction,
        lease_s: Option<u64>,
        fencing_token: Option<i64>,
    ) -> Result<Option<ClaimRecord>> {
        let thread = match &target {
            ClaimTarget::Thread(t) => Some(t.clone()),
            ClaimTarget::Next => None,
        };
        let claim = self.claim_untraced(caller, target, action, lease_s, fencing_token);
        self.traced("service.claim", thread.as_ref(), claim).await
    }

    async fn claim_untraced(
        &self,
        caller: &Caller,
        target: ClaimTarget,
        action: ClaimAction,
        lease_s: Option<u64>,
        fencing_token: Option<i64>,
    ) -> Result<Option<ClaimRecord>> {
        caller.require_participant()?;
        if fencing_token.is_some()
            && (action == ClaimAction::Release || matches!(target, ClaimTarget::Next))
        {
            return Err(ServiceError::invalid(
                "fencing_token renews a claim on a given thread: `next` and release take none",
            ));
        }
        let session = caller.session()?.clone();
        let lease_s = ttl(lease_s, self.inner.settings.claim_lease_s, "lease_s")?;
        let thread = match target {
            ClaimTarget::Thread(id) => id,
            ClaimTarget::Next if action == ClaimAction::Release => {
                return Err(ServiceError::invalid("give the thread to release"));
            }
            ClaimTarget::Next => {
                return match self.claim_next_once(caller, &session, lease_s).await? {
                    Some(claim) => Ok(Some(claim)),
                    None => Err(nothing_to_claim()),
                };
            }
        };
        if action == ClaimAction::Release {
            let (record, _) = self.visible_thread(caller, &thread).await?;
            if !self
                .inner
                .store
                .release_claim(thread.clone(), caller.id().clone(), session)
                .await?
            {
                return Err(ServiceError::invalid(format!(
                    "your session holds no claim on thread {thread}"
                )));
            }
            self.thread_changed(&record.channel, &thread, false);
            // Free again: one claimer waiting for work takes it.
            self.claimable_for(caller.id());
            return Ok(None);
        }
        self.claim_thread(caller, &session, thread, lease_s, fencing_token)
            .await
            .map(Some)
    }

    /// One `next`: the oldest claimable thread addressed to the caller that it wins, or `None`
    /// when there is none.
    pub(super) async fn claim_next_once(
        &self,
        caller: &Caller,
        session: &crate::domain::AgentIdentity,
        lease_s: u64,
    ) -> Result<Option<ClaimRecord>> {
        // Try the candidates in order; another session may win any one of them. The queue is
        // read a page at a time, each a few threads longer than the claims in flight on this
        // replica, and a page whose every thread is lost (claimed since, awaiting approval) is
        // followed by the next, so `next` answers "nothing" only when the whole queue was tried.
        // Claimers of this replica woken together (a `next` without a wait follows the inbox's
        // wake-ups, which reach them all) leave the threads another `next` here is claiming now
        // until the queue's end: each would most likely cost a write that finds it held (a miss
        // is only a cost: the claim's transaction decides).
        let now = self.now();
        let mut after = None;
        let mut deferred = Vec::new();
        loop {
            let limit = lock(&self.inner.claims_in_flight).len().min(MAX_PAGE) + MIN_PAGE;
            let page = self
                .inner
                .store
                .claimable_threads(
                    caller.id(),
                    caller.reader().key(),
                    now,
                    after.as_ref(),
                    limit as i64,
                )
                .await?;
            let full = page.len() == limit;
            after = page.last().cloned();
            let mut free = Vec::new();
            {
                let busy = lock(&self.inner.claims_in_flight);
                for place in page {
                    if busy.contains(&place.id) {
                        deferred.push(place.id);
                    } else {
                        free.push(place.id);
                    }
                }
            }
            for id in free {
                if let Some(claim) = self.claim_if_free(caller, session, id, lease_s).await? {
                    return Ok(Some(claim));
                }
            }
            if !full {
                break;
            }
        }
        for id in deferred {
            if let Some(claim) = self.claim_if_free(caller, session, id, lease_s).await? {
                return Ok(Some(claim));
            }
        }
        Ok(None)
    }

    /// One candidate of a `next`: its claim, or `None` when another session won it or it can no
    /// longer be claimed (the next candidate is then tried).
    async fn claim_if_free(
        &self,
        caller: &Caller,
        session: &crate::domain::AgentIdentity,
        id: ThreadId,
        lease_s: u64,
    ) -> Result<Option<ClaimRecord>> {
        let _claiming = InFlight::enter(&self.inner.claims_in_flight, &id);
        match self.claim_thread(caller, session, id, lease_s, None).await {
            Ok(claim) => Ok(Some(claim)),
            Err(e)
                if matches!(
                    e.code,
                    ErrorCode::AlreadyClaimed
                        | ErrorCode::NotClaimable
                        | ErrorCode::ApprovalPending
                        // Answered or closed since the candidates were read.
                        | ErrorCode::TaskTerminal
                        | ErrorCode::ThreadClosed
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    async fn claim_thread(
        &self,
        caller: &Caller,
        session: &crate::domain::AgentIdentity,
        thread: ThreadId,
        lease_s: u64,
        fencing_token: Option<i64>,
    ) -> Result<ClaimRecord> {
        let now = self.now();
        let (record, _) = self.visible_thread(caller, &thread).await?;
        // SPEC §4: a request, a handoff or an external task (whatever the kind its skill routes
        // to) is claimed; the claim is what moves a task to WORKING.
        if !record.opener_kind.claimable() && record.task.is_none() {
            return Err(ServiceError::new(
                ErrorCode::NotClaimable,
                format!(
                    "thread {thread} was opened by a {}; only requests, handoffs and external tasks are claimed",
                    record.opener_kind
                ),
            ));
        }
        // A task that has ended is refused by the claim's own transaction (`task_terminal`, by
        // the same rule of the task), which stays the authority; the thread just read already
        // shows it, and refusing here spares the writer a transaction that can only refuse. A
        // `next` reads its candidates a moment earlier, and with claimers answering at once many
        // have ended by then (PostgreSQL, 64 in flight: 1,481 such claims for 3,328 tasks, each
        // about nine round trips of the writer ending in a rollback).
        if let Some(task) = &record.task {
            task.state
                .apply(TaskEvent::Claimed)
                .map_err(StoreError::from)?;
        }
        self.command_gate(caller, &record, true).await?;
        // Addressed to this reader (SPEC §4b): a connection never claims what it wrote itself,
        // nor a command its person gave another of her connections.
        let addressed = self
            .inner
            .store
            .opener_addressed_to(caller.id(), caller.reader().key(), &thread)
            .await?;
        if !addressed {
            return Err(ServiceError::new(
                ErrorCode::NotClaimable,
                format!("thread {thread} is not addressed to you"),
            ));
        }
        let attempt = self
            .inner
            .store
            .claim(
                thread.clone(),
                caller.id().clone(),
                caller.connection.as_ref().map(|c| c.token.clone()),
                session.clone(),
                now,
                now.plus_secs(lease_s),
                fencing_token,
            )
            .await?;
        match attempt {
            ClaimAttempt::Claimed { claim, outbox_due } => {
                // A claim of a task logs a task event, which pushes and webhooks may deliver.
                self.outbox_due(outbox_due);
                // Every reader's console shows who holds the claim.
                self.thread_changed(&record.channel, &thread, record.task.is_some());
                tracing::debug!(thread = %thread, session = %claim.session, fencing_token = claim.fencing_token, "Thread claimed.");
                Ok(claim)
            }
            ClaimAttempt::Held(holder) => Err(ServiceError::new(
                ErrorCode::AlreadyClaimed,
                format!(
                    "thread {thread} is claimed by {} (self-declared session {}) until {}",
                    holder.person,
                    text::quote(holder.session.as_str()),
                    holder.expires_at
                ),
            )
            .with_details(serde_json::json!({ "holder": holder }))),
            ClaimAttempt::AwaitingApproval(a) => Err(self.approval_pending(&a).await?),
            ClaimAttempt::Closed => Err(ServiceError::new(
                ErrorCode::NotClaimable,
                format!("thread {thread} is closed and cannot be claimed"),
            )),
            ClaimAttempt::Expired => {
                // Withdrawn just now, perhaps: her console shows it as expired.
                self.inner.bus.publish(&Topic::inbox(caller.id()));
                Err(ServiceError::new(
                    ErrorCode::NotClaimable,
                    format!(
                        "command {thread} expired before anyone picked it up and was withdrawn; \
                         its person can send it again"
                    ),
                ))
            }
        }
    }

    /// Reports the caller's agent's state for `ttl_s` (default 120 s); it expires silently.
    pub async fn presence_set(
        &self,
        caller: &Caller,
        spec: PresenceSpec,
    ) -> Result<PresenceRecord> {
        caller.require_participant()?;
        let agent = caller.session()?.clone();
        let ttl_s = ttl(spec.ttl_s, self.inner.settings.presence_ttl_s, "ttl_s")?;
        input::storable("presence", &spec)?;
        if let Some(task) = &spec.task
            && (task.chars().count() > 500 || task.contains(['\n', '\r']))
        {
            return Err(ServiceError::invalid(
                "task must be one line of at most 500 characters",
            ));
        }
        let now = self.now();
        let record = PresenceRecord {
            person: caller.id().clone(),
            agent,
            transition: spec.transition,
            task: spec.task.filter(|t| !t.trim().is_empty()),
            updated_at: now,
            expires_at: now.plus_secs(ttl_s),
        };
        self.inner.store.set_presence(record.clone()).await?;
        Ok(record)
    }

    /// Live presence of the people who share a channel with the caller.
    pub async fn fleet(&self, caller: &Caller) -> Result<Vec<PresenceRecord>> {
        caller.require_participant()?;
        Ok(self.inner.store.fleet(caller.id(), self.now()).await?)
    }

    /// Acquires or renews an advisory lease. `force` takes it from incompatible holders, who are
    /// told through their inbox.
    pub async fn lease_acquire(&self, caller: &Caller, spec: LeaseSpec) -> Result<LeaseRecord> {
        caller.require_participant()?;
        let agent = caller.session()?.clone();
        check_resource(&spec.resource)?;
        let ttl_s = ttl(spec.ttl_s, DEFAULT_LEASE_TTL_S, "ttl_s")?;
        let now = self.now();
        let want = LeaseRecord {
            resource: spec.resource.clone(),
            person: caller.id().clone(),
            agent,
            mode: spec.mode,
            acquired_at: now,
            expires_at: now.plus_secs(ttl_s),
        };
        match self
            .inner
            .store
            .acquire_lease(want, spec.force, now)
            .await?
        {
            LeaseAttempt::Acquired { lease, displaced } => {
                for old in &displaced {
                    tracing::info!(resource = %lease.resource, from = %old.person, to = %lease.person, "Lease taken with force.");
                    self.inner.bus.publish(&Topic::inbox(&old.person));
                }
                Ok(lease)
            }
            LeaseAttempt::Held(holders) => {
                let names: Vec<String> = holders
                    .iter()
                    .map(|h| {
                        format!(
                            "{} (self-declared agent {}, {} until {})",
                            h.person,
                            text::quote(h.agent.as_str()),
                            h.mode,
                            h.expires_at
                        )
                    })
                    .collect();
                Err(ServiceError::new(
                    ErrorCode::LeaseHeld,
                    format!(
                        "{} is held by {}; wait for expiry, or pass force to take it",
                        text::quote(&spec.resource),
                        names.join(", ")
                    ),
                )
                .with_details(serde_json::json!({ "holders": holders })))
            }
        }
    }

    pub async fn lease_release(&self, caller: &Caller, resource: &str) -> Result<()> {
        caller.require_participant()?;
        let agent = caller.session()?.clone();
        check_resource(resource)?;
        if !self
            .inner
            .store
            .release_lease(resource.to_owned(), caller.id().clone(), agent, self.now())
            .await?
        {
            return Err(ServiceError::invalid(format!(
                "your session holds no lease on {}",
                text::quote(resource)
            )));
        }
        Ok(())
    }

    /// Live leases of the people who share a channel with the caller.
    pub async fn leases(&self, caller: &Caller) -> Result<Vec<LeaseRecord>> {
        caller.require_participant()?;
        Ok(self.inner.store.leases(caller.id(), self.now()).await?)
    }
}

/// The std mutex's guard, through a poisoning (the sets it guards stay consistent).
/// The lease of a claim: `lease_s`, or the configured default.
pub(super) fn lease_ttl(service: &Service, lease_s: Option<u64>) -> Result<u64> {
    ttl(lease_s, service.inner.settings.claim_lease_s, "lease_s")
}

/// The claim queue's page for a `next`: this many threads beyond the claims in flight on this
/// replica, which count up to [`MAX_PAGE`].
const MIN_PAGE: usize = 4;
const MAX_PAGE: usize = 60;

/// What a `next` finding nothing answers.
pub(super) fn nothing_to_claim() -> ServiceError {
    ServiceError::new(
        ErrorCode::NotFound,
        "no open request, handoff or external task is waiting to be claimed \
         (requests awaiting a human's approval are skipped)",
    )
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A thread marked as being claimed by a `next` of this replica, for as long as the guard lives.
struct InFlight<'a> {
    set: &'a Mutex<HashSet<ThreadId>>,
    thread: ThreadId,
}

impl<'a> InFlight<'a> {
    fn enter(set: &'a Mutex<HashSet<ThreadId>>, thread: &ThreadId) -> Option<InFlight<'a>> {
        lock(set).insert(thread.clone()).then(|| InFlight {
            set,
            thread: thread.clone(),
        })
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        lock(self.set).remove(&self.thread);
    }
}
