//! The human-approval envelope (SPEC §5), once for MCP, A2A and every decision path.
//!
//! - **When**: a `request` with an impact other than `none` needs an approval if its channel's
//!   policy says `approve` for that impact, and always when an external party sent it (unless the
//!   policy says `deny`, which refuses it at posting). The approval is stored with the request.
//! - **Who decides**: the request's recipients who hold the `approve` right in the channel (for an
//!   external task, every member of the channel who holds it), each with a token of scope `human`
//!   (never `agent`; `admin` alone is not enough). To anyone else an approval id is unknown.
//! - **What it allows**: the first claim after `allow` consumes it and starts the work; while it is
//!   pending no claim succeeds (`approval_pending`, naming who must decide). When the consuming
//!   claim's lease expires unanswered, a new claim by a recipient's session continues the same
//!   approved action without a new approval (the human approved the action, not one agent
//!   session); a follow-up `request` in the thread is a new action and needs a new approval.
//! - **Effects**: allow → each recipient's inbox gets an `approval_decided` notice (long-polls wake);
//!   reject (a reason is required: the requester is told it) or expiry → the server closes the
//!   thread with outcome `rejected` and the reason, which ends an A2A task `TASK_STATE_REJECTED`.
//! - Every step is in the append-only audit log, written in the same transaction as the step.

use serde::Serialize;

use super::{Caller, ErrorCode, Result, Service, ServiceError, counted, input};
use crate::bus::Topic;
use crate::domain::{
    ApprovalEvent, ApprovalId, ApprovalKind, ApprovalState, Attachment, Decision, DecisionPath,
    Impact, Kind, MessageId, Outcome, PersonId, PersonKind, PolicyDecision, Right, Scope, ThreadId,
    Timestamp, fingerprint, text,
};
use crate::store::{
    ApprovalRecord, ChannelRecord, MessageRecord, NewApproval, NewMessage, OnAllow, Settled,
    Settlement,
};

/// Longest rejection reason, in characters.
const MAX_REASON_CHARS: usize = 1_000;

/// An approval with what a human needs to decide it: the exact request and who is involved.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalView {
    #[serde(flatten)]
    pub approval: ApprovalRecord,
    /// Display names of the requester and of the approvers, for showing.
    pub requested_by_name: String,
    pub approver_names: Vec<String>,
    /// The thread's subject.
    pub subject: String,
    /// The request exactly as it will be acted on.
    pub request: MessageRecord,
    /// For an outbound approval: the display name of the remote agent the message would go to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
}

/// A page of approvals.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalPage {
    pub approvals: Vec<ApprovalRecord>,
    /// Pass back as `before` for the next (older) page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<ApprovalId>,
}

/// The facts of a request that decide whether it needs an approval.
pub(super) struct RequestFacts<'a> {
    pub channel: &'a ChannelRecord,
    pub kind: Kind,
    pub impact: Option<Impact>,
    pub thread: &'a ThreadId,
    pub message: &'a MessageId,
    pub body: &'a str,
    pub attachments: &'a [Attachment],
    pub recipients: &'a [PersonId],
    /// Who wrote the request.
    pub author: &'a PersonId,
    /// What the rights of the connections involved say (SPEC §4b).
    pub rights: super::rights::RightsSay,
    /// The author is an external party.
    pub external: bool,
    pub now: Timestamp,
}

/// A decision's reason, trimmed and checked: required for a rejection (the requester is told it),
/// storable, at most [`MAX_REASON_CHARS`].
fn reason_for(decision: Decision, reason: Option<String>) -> Result<Option<String>> {
    let reason = reason
        .map(|r| r.trim().to_owned())
        .filter(|r| !r.is_empty());
    if let Some(r) = &reason {
        input::storable_str("reason", r)?;
        if r.chars().count() > MAX_REASON_CHARS {
            return Err(ServiceError::invalid(format!(
                "reason must be at most {MAX_REASON_CHARS} characters"
            )));
        }
    }
    if decision == Decision::Reject && reason.is_none() {
        return Err(ServiceError::invalid(
            "a rejection needs a reason: the requester is told it",
        ));
    }
    Ok(reason)
}

/// How many characters of the fingerprint a human types to confirm a decision made through an
/// agent's client (elicitation).
pub const CONFIRM_CHARS: usize = 8;

/// What a sealed value is bound to: its purpose and the caller's person and token.
fn principal_aad(caller: &Caller, purpose: &str) -> String {
    format!("{purpose}\0{}\0{}", caller.id(), caller.token_id)
}

impl Service {
    /// The approval a request needs (none when its policy is `auto`), or the refusal of a `deny`.
    pub(super) async fn approval_needed(&self, r: RequestFacts<'_>) -> Result<Option<NewApproval>> {
        let Some(impact) = r
            .impact
            .filter(|i| r.kind == Kind::Request && *i != Impact::None)
        else {
            return Ok(None);
        };
        match r.channel.policy.decision(impact) {
            PolicyDecision::Deny => {
                return Err(ServiceError::new(
                    ErrorCode::DeniedByPolicy,
                    format!(
                        "channel {} refuses requests with impact {impact} (its policy says deny); \
                         nothing was posted",
                        r.channel.name
                    ),
                ));
            }
            PolicyDecision::Auto | PolicyDecision::Approve => {}
        }
        use super::rights::RightsSay;
        match r.rights {
            // Her command is the authorisation (SPEC §4b).
            RightsSay::Allowed => return Ok(None),
            // Her "allow once", whatever the channel's policy.
            RightsSay::Confirm => {
                return Ok(Some(NewApproval {
                    id: ApprovalId::generate(),
                    kind: ApprovalKind::Request,
                    impact,
                    fingerprint: fingerprint(r.thread, r.message, impact, r.body, r.attachments),
                    approvers: vec![r.author.clone()],
                    expires_at: r.now.plus_secs(r.channel.policy.approval_ttl_s),
                }));
            }
            RightsSay::Policy => {}
        }
        if r.channel.policy.decision(impact) == PolicyDecision::Auto && !r.external {
            return Ok(None);
        }
        // Nobody approves her own request to others: her agent's request to bob is bob's to
        // approve. Her request to her own agents only (SPEC §4b) is hers.
        let only_self = r.recipients.iter().all(|p| p == r.author);
        let mut approvers = Vec::new();
        for m in &r.channel.members {
            let eligible = m.rights.contains(Right::Approve)
                && (r.external || r.recipients.contains(&m.person))
                && (only_self || &m.person != r.author);
            if eligible
                && let Some(p) = self.inner.store.person(&m.person).await?
                && p.kind == PersonKind::Member
            {
                approvers.push(m.person.clone());
            }
        }
        if approvers.is_empty() {
            return Err(ServiceError::forbidden(format!(
                "a request with impact {impact} in channel {} needs a human's approval, and none of \
                 its recipients has the approve right there; address someone who has it, or ask an \
                 admin to grant it",
                r.channel.name
            )));
        }
        Ok(Some(NewApproval {
            id: ApprovalId::generate(),
            kind: ApprovalKind::Request,
            impact,
            fingerprint: fingerprint(r.thread, r.message, impact, r.body, r.attachments),
            approvers,
            expires_at: r.now.plus_secs(r.channel.policy.approval_ttl_s),
        }))
    }

    /// The refusal of a claim while `a` is pending: who must decide, and how.
    pub(super) async fn approval_pending(&self, a: &ApprovalRecord) -> Result<ServiceError> {
        let names = self.names(&a.approvers).await?;
        Ok(ServiceError::new(
            ErrorCode::ApprovalPending,
            format!(
                "the request in thread {} awaits the approval of {} (approval {}, impact {}, \
                 fingerprint {}, expires {}); a human decides with `liaison approvals allow {}` or \
                 in the console",
                a.thread,
                names.join(" or "),
                a.id,
                a.impact,
                a.fingerprint,
                a.expires_at,
                a.id
            ),
        )
        .with_details(serde_json::json!({ "approval": a, "approvers": names })))
    }

    /// Approvals the caller (a human) may decide, newest first.
    pub async fn approvals(
        &self,
        caller: &Caller,
        pending_only: bool,
        before: Option<&ApprovalId>,
        limit: Option<i64>,
    ) -> Result<ApprovalPage> {
        caller.require(Scope::Human)?;
        let limit = super::page_limit(limit)?;
        let mut approvals = self
            .inner
            .store
            .approvals_for(caller.id(), pending_only, before, limit + 1)
            .await?;
        let next = if approvals.len() as i64 > limit {
            approvals.truncate(limit as usize);
            approvals.last().map(|a| a.id.clone())
        } else {
            None
        };
        Ok(ApprovalPage { approvals, next })
    }

    /// One approval with the exact request, for a human who may decide it.
    pub async fn approval(&self, caller: &Caller, id: &ApprovalId) -> Result<ApprovalView> {
        caller.require(Scope::Human)?;
        let approval = self.decidable(caller, id).await?;
        self.view(approval).await
    }

    /// Allows or rejects a pending approval. The first decision wins; a later one is told who
    /// decided and when.
    pub async fn decide(
        &self,
        caller: &Caller,
        id: &ApprovalId,
        decision: Decision,
        reason: Option<String>,
        via: DecisionPath,
    ) -> Result<ApprovalRecord> {
        caller.require(Scope::Human)?;
        let reason = reason_for(decision, reason)?;
        let approval = self.decidable(caller, id).await?;
        self.settle_decision(caller, approval, decision, reason, via)
            .await
    }

    /// A decision asked of the approver's human through their agent's MCP client (elicitation),
    /// which carries the agent's token. Allowed only when the channel's policy opts in
    /// (`approval_via_elicitation`), never for a request from an external party, and only to an
    /// approver; the human must type the fingerprint's first characters, so a client that accepts
    /// forms on its own cannot decide.
    pub async fn decide_by_elicitation(
        &self,
        caller: &Caller,
        id: &ApprovalId,
        decision: Decision,
        reason: Option<String>,
        confirm: &str,
    ) -> Result<ApprovalRecord> {
        caller.require(Scope::Agent)?;
        let reason = reason_for(decision, reason)?;
        let approval = self.decidable(caller, id).await?;
        if !self.elicitation_allowed(&approval).await? {
            return Err(ServiceError::forbidden(
                "this approval cannot be decided through the agent's client; a human decides in \
                 the console or with `liaison approvals`",
            ));
        }
        if confirm.trim() != &approval.fingerprint[..CONFIRM_CHARS] {
            return Err(ServiceError::invalid(format!(
                "the confirmation did not match the first {CONFIRM_CHARS} characters of the \
                 fingerprint; nothing was decided"
            )));
        }
        self.settle_decision(
            caller,
            approval,
            decision,
            reason,
            DecisionPath::Elicitation,
        )
        .await
    }

    /// The approval behind a pending claim, when its approver's client may ask for it by
    /// elicitation (see [`Self::decide_by_elicitation`]); none otherwise.
    pub async fn approval_for_elicitation(
        &self,
        caller: &Caller,
        id: &ApprovalId,
    ) -> Result<Option<ApprovalView>> {
        let Some(a) = self.inner.store.approval(id).await? else {
            return Ok(None);
        };
        if a.state != ApprovalState::Pending
            || !a.approvers.contains(caller.id())
            || !self.elicitation_allowed(&a).await?
        {
            return Ok(None);
        }
        Ok(Some(self.view(a).await?))
    }

    /// Seals `payload` for the caller: encrypted and authenticated under the master key, bound to
    /// `purpose` and to the caller's person and token, so that only the same principal's retry
    /// opens it (MCP's `requestState` on stateless calls). URL-safe base64.
    pub fn seal_for(&self, caller: &Caller, purpose: &str, payload: &[u8]) -> Result<String> {
        use base64::Engine as _;
        let key = self.inner.master_key.as_deref().ok_or_else(|| {
            ServiceError::new(ErrorCode::Internal, "the master key is not loaded")
        })?;
        let sealed = key
            .seal(payload, principal_aad(caller, purpose).as_bytes())
            .map_err(|e| ServiceError::new(ErrorCode::Internal, e.to_string()))?;
        Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sealed))
    }

    /// Opens what [`Self::seal_for`] sealed for this caller and purpose; none if it was sealed for
    /// another principal or purpose, or altered.
    pub fn open_for(&self, caller: &Caller, purpose: &str, sealed: &str) -> Option<Vec<u8>> {
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(sealed)
            .ok()?;
        self.inner
            .master_key
            .as_deref()?
            .open(&bytes, principal_aad(caller, purpose).as_bytes())
    }

    /// Whether an approval may be asked for through MCP elicitation (see [`Self::decide_by_elicitation`]).
    pub async fn elicitation_allowed(&self, a: &ApprovalRecord) -> Result<bool> {
        let channel = self.inner.store.channel(&a.channel).await?;
        let requester = self.inner.store.person(&a.requested_by).await?;
        Ok(channel.is_some_and(|c| c.policy.approval_via_elicitation)
            && requester.is_some_and(|p| p.kind == PersonKind::Member))
    }

    async fn settle_decision(
        &self,
        caller: &Caller,
        approval: ApprovalRecord,
        decision: Decision,
        reason: Option<String>,
        via: DecisionPath,
    ) -> Result<ApprovalRecord> {
        let id = &approval.id;
        let now = self.now();
        if approval.state != ApprovalState::Pending {
            // Decided, expired or withdrawn already (the store checks again under the lock).
            return Err(self.settled_error(&approval).await?);
        }
        if approval.expires_at <= now {
            self.expire(&approval).await?;
            return Err(self.settled_error(&self.current(id).await?).await?);
        }
        let close = match decision {
            Decision::Allow => None,
            Decision::Reject => {
                let who = self.names(std::slice::from_ref(caller.id())).await?;
                Some(
                    self.server_close(
                        &approval,
                        format!(
                            "Approval {} was rejected by {}: {}\nThe request was not carried out.",
                            approval.id,
                            who.join(""),
                            reason.as_deref().unwrap_or_default()
                        ),
                    )
                    .await?,
                )
            }
        };
        let closing = close.as_ref().map(counted::close_outcome);
        let notify = self.request_recipients(&approval).await?;
        let on_allow = match (decision, approval.kind) {
            (Decision::Allow, ApprovalKind::Outbound) => {
                Some(OnAllow::Send(self.held_send(&approval).await?))
            }
            (Decision::Allow, _) => Some(OnAllow::Notify(notify.clone())),
            (Decision::Reject, _) => None,
        };
        let settled = self
            .inner
            .store
            .settle_approval(Settlement {
                approval: approval.id.clone(),
                event: ApprovalEvent::Decided(decision),
                actor: Some(caller.id().clone()),
                via: Some(via),
                reason,
                now,
                on_allow,
                close,
            })
            .await?;
        // A decision notifies webhooks and the task's push configs, and an allowed outbound
        // send is enqueued, in its transaction.
        self.outbox_due(matches!(settled, Settled::Done(_)));
        match settled {
            Settled::Done(record) => {
                counted::settled(&record, closing);
                tracing::info!(approval = %record.id, decision = %decision, by = %caller.id(), via = %via, "Approval decided.");
                self.woke_by(&record, &notify).await?;
                Ok(record)
            }
            Settled::Refused(record) => Err(self.settled_error(&record).await?),
        }
    }

    /// Expires every pending approval whose deadline has passed, closing its thread. Returns how
    /// many expired. The server runs it periodically; tests call it after moving the clock.
    pub async fn expire_approvals(&self) -> Result<usize> {
        let mut expired = 0;
        loop {
            let due = self.inner.store.due_approvals(self.now(), 100).await?;
            if due.is_empty() {
                return Ok(expired);
            }
            for a in &due {
                if self.expire(a).await? {
                    expired += 1;
                }
            }
            if due.len() < 100 {
                return Ok(expired);
            }
        }
    }

    /// The approvals of a thread (for the thread view).
    pub(super) async fn thread_approvals(&self, thread: &ThreadId) -> Result<Vec<ApprovalRecord>> {
        Ok(self.inner.store.thread_approvals(thread).await?)
    }

    async fn expire(&self, a: &ApprovalRecord) -> Result<bool> {
        let close = self
            .server_close(
                a,
                format!(
                    "Approval {} expired at {} without a decision.\nThe request was not carried out.",
                    a.id, a.expires_at
                ),
            )
            .await?;
        let closing = counted::close_outcome(&close);
        let settled = self
            .inner
            .store
            .settle_approval(Settlement {
                approval: a.id.clone(),
                event: ApprovalEvent::Expired,
                actor: None,
                via: None,
                reason: Some("no decision before the deadline".into()),
                now: self.now(),
                on_allow: None,
                close: Some(close),
            })
            .await?;
        self.outbox_due(matches!(settled, Settled::Done(_)));
        match settled {
            Settled::Done(record) => {
                counted::settled(&record, Some(closing));
                tracing::info!(approval = %record.id, thread = %record.thread, "Approval expired.");
                self.woke_by(&record, &[]).await?;
                Ok(true)
            }
            Settled::Refused(_) => Ok(false),
        }
    }

    /// An approval the caller may decide; any other id is unknown.
    async fn decidable(&self, caller: &Caller, id: &ApprovalId) -> Result<ApprovalRecord> {
        match self.inner.store.approval(id).await? {
            Some(a) if a.approvers.contains(caller.id()) => Ok(a),
            _ => Err(ServiceError::not_found("approval", id)),
        }
    }

    async fn current(&self, id: &ApprovalId) -> Result<ApprovalRecord> {
        self.inner
            .store
            .approval(id)
            .await?
            .ok_or_else(|| ServiceError::not_found("approval", id))
    }

    /// Why a settled approval cannot be decided again.
    async fn settled_error(&self, a: &ApprovalRecord) -> Result<ServiceError> {
        let when = a.decided_at.map(|t| t.to_string()).unwrap_or_default();
        Ok(match (a.state, &a.decided_by) {
            (ApprovalState::Withdrawn, _) => ServiceError::new(
                ErrorCode::ApprovalDecided,
                format!(
                    "approval {} was withdrawn at {when}: its request's thread was closed before \
                     anyone decided, so there is nothing left to allow or reject",
                    a.id
                ),
            ),
            (ApprovalState::Expired, _) => ServiceError::new(
                ErrorCode::ApprovalExpired,
                format!(
                    "approval {} expired at {}; the thread is closed",
                    a.id, a.expires_at
                ),
            ),
            (state, Some(by)) => {
                let name = self.names(std::slice::from_ref(by)).await?.join("");
                ServiceError::new(
                    ErrorCode::ApprovalDecided,
                    format!(
                        "approval {} was already decided by {name} at {when}; it is {state}",
                        a.id
                    ),
                )
            }
            (state, None) => ServiceError::new(
                ErrorCode::ApprovalDecided,
                format!("approval {} is already {state}", a.id),
            ),
        }
        .with_details(serde_json::json!({ "approval": a })))
    }

    async fn view(&self, approval: ApprovalRecord) -> Result<ApprovalView> {
        let request = self
            .inner
            .store
            .message(&approval.message)
            .await?
            .ok_or(crate::store::StoreError::NotFound("message"))?;
        let subject = self
            .inner
            .store
            .thread(&approval.thread)
            .await?
            .map(|t| t.subject)
            .unwrap_or_default();
        let destination = match approval.kind {
            ApprovalKind::Outbound => Some(self.names(&request.recipients).await?.join(", ")),
            ApprovalKind::Request => None,
        };
        Ok(ApprovalView {
            destination,
            requested_by_name: self
                .names(std::slice::from_ref(&approval.requested_by))
                .await?
                .join(""),
            approver_names: self.names(&approval.approvers).await?,
            subject,
            request,
            approval,
        })
    }

    /// Display names, cleaned for showing.
    pub(super) async fn names(&self, people: &[PersonId]) -> Result<Vec<String>> {
        let mut names = Vec::with_capacity(people.len());
        for id in people {
            names.push(match self.inner.store.person(id).await? {
                Some(p) => text::display_name(&p.display_name),
                None => id.to_string(),
            });
        }
        Ok(names)
    }

    /// The recipients of the guarded request: who is told of an approval.
    async fn request_recipients(&self, a: &ApprovalRecord) -> Result<Vec<PersonId>> {
        Ok(self
            .inner
            .store
            .message(&a.message)
            .await?
            .map(|m| m.recipients)
            .unwrap_or_default())
    }

    /// The server's `close` of an approval's thread, outcome `rejected`, to the requester and the
    /// request's recipients.
    async fn server_close(&self, a: &ApprovalRecord, body: String) -> Result<NewMessage> {
        let mut recipients = self.request_recipients(a).await?;
        recipients.push(a.requested_by.clone());
        recipients.sort();
        recipients.dedup();
        // A rejected answer to a remote agent that waits for it ends its task too.
        let remote = match a.kind {
            ApprovalKind::Outbound => self.cancel_hop(&a.thread).await?,
            ApprovalKind::Request => None,
        };
        let mut close = self.server_close_message(
            &a.thread,
            &a.channel,
            recipients,
            Outcome::Rejected,
            body,
            Some(a.message.clone()),
        );
        close.remote = remote;
        Ok(close)
    }

    /// After a post that withdrew approvals (a close of a thread whose request awaited a
    /// decision): each approver's console and long-polls read again, so the approval leaves
    /// their queue at once.
    pub(super) fn withdrawn(&self, withdrawn: &[ApprovalRecord]) {
        for a in withdrawn {
            tracing::info!(approval = %a.id, thread = %a.thread, "Approval withdrawn: its thread was closed.");
            for p in &a.approvers {
                self.inner.bus.publish(&Topic::inbox(p));
            }
        }
    }

    /// Wakes whoever a settled approval concerns: the notified inboxes, the thread's participants
    /// (a close reached their inboxes), and the task's followers.
    async fn woke_by(&self, a: &ApprovalRecord, notified: &[PersonId]) -> Result<()> {
        let bus = &self.inner.bus;
        for p in notified {
            bus.publish(&Topic::inbox(p));
        }
        if a.state != ApprovalState::Approved {
            for p in self.request_recipients(a).await? {
                bus.publish(&Topic::inbox(&p));
            }
            bus.publish(&Topic::inbox(&a.requested_by));
        } else if a.kind == ApprovalKind::Request {
            // The request may be claimed now: one claimer waiting for work takes it.
            for p in self.request_recipients(a).await? {
                self.claimable_for(&p);
            }
        }
        // Every reader of the thread sees the decision (the requester's "pending" included).
        self.thread_changed(&a.channel, &a.thread, true);
        Ok(())
    }
}
