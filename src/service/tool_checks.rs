//! Checking an agent's own tool calls (SPEC §5b): the hooks `liaison hook pre-tool-use` and
//! `… permission-request` ask here before a tool runs; the call's impact comes from the rules
//! (`[tool_checks]`, `crate::domain::tool_check`) and the connection's rights (§4b) decide:
//!
//! - `allowed` → **allow** at once (her direct command already authorises it);
//! - `off` → **deny**, with a reason the agent reads;
//! - `confirm` → a **confirmation**: she sees the exact action live in her session panel and on
//!   Approvals and allows it once or rejects it, while the hook's call waits
//!   ([`Service::await_tool_confirmation`], a long-poll the hook repeats until its own timeout).
//!
//! **Bound to the call.** A confirmation's fingerprint covers the credential, the claimed command,
//! the tool, the input's digest and the masked summary she read; it is used up by the first read
//! of the hook that asked (the same call again needs a new one), and nobody else's hook can read
//! it. No decision by its deadline (the hook's timeout, at most `[tool_checks] max_wait_s`) is a
//! deny: "no human decided in time". Only her own `human` credential decides — never a connection's
//! token, so the agent running the hook cannot approve itself. A credential has at most
//! `[tool_checks] pending_per_connection` confirmations waiting (`too_many_waiters` past that).
//!
//! **Told to the thread.** While the connection holds a claim, a tool that changes something adds
//! `started` to the claimed command's timeline (its completion comes from `liaison hook tool-use`),
//! and a blocked one adds `refused` (rights), `rejected` or `expired`, with the progress notes'
//! coalescing and rate bounds; A2A clients see them as `WORKING` notes.
//!
//! **Audited.** Every verdict on a call with an effect (`tool.checked` with allow or deny, and the
//! confirmation's `requested`, `decided`, `used`, `expired`) with its rule; calls that only read
//! are not recorded, or the log would hold every file an agent opened.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Caller, ErrorCode, Result, Service, ServiceError, follow_ups};
use crate::bus::Topic;
use crate::domain::tool_check::{
    self, CheckEvent, Classified, ConfirmationId, ConfirmationState, MAX_COMMAND_CHARS,
    MAX_TARGET_CHARS, ToolRule, ToolSummary,
};
use crate::domain::{Decision, Impact, PersonKind, RightLevel, Scope, ThreadId, Timestamp, text};
use crate::store::{ConfirmationAsked, ConfirmationDecided, ConfirmationRecord, ToolAudit};

/// How tool calls are checked (`[tool_checks]`).
#[derive(Debug, Clone)]
pub struct ToolCheckSettings {
    /// The built-in rules, then the configured ones.
    pub rules: Vec<ToolRule>,
    /// Longest a confirmation waits for her, in seconds, whatever the hook asks.
    pub max_wait_s: u64,
    /// Most confirmations one credential has waiting at once.
    pub pending_per_connection: usize,
}

impl Default for ToolCheckSettings {
    fn default() -> Self {
        Self {
            rules: tool_check::default_rules(),
            max_wait_s: 900,
            pending_per_connection: 8,
        }
    }
}

/// How long a confirmation waits when the hook does not say (10 minutes, the timeout the settings
/// snippet gives the hook).
pub const DEFAULT_CONFIRM_WAIT_S: u64 = 600;
/// Longest one read of a confirmation waits; the hook reads again until its own deadline.
pub const MAX_READ_WAIT_S: u64 = 50;

/// What a hook asks about one call.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCheckRequest {
    /// Which hook asks: `pre_tool_use` or `permission_request`.
    pub event: CheckEvent,
    /// The tool: `Bash`, `Edit`, `mcp__github__create_pull_request`.
    pub tool: String,
    /// SHA-256 (64 lower-case hex digits) of the RFC 8785 canonical JSON of the tool's input.
    pub input_digest: String,
    /// What the human reads: a path, a command line with secrets masked.
    #[serde(default)]
    pub summary: ToolSummary,
    /// How long the hook will wait for her decision, in seconds (default 600, capped by
    /// `[tool_checks] max_wait_s`).
    #[serde(default)]
    pub wait_s: Option<u64>,
}

/// What the hook does with the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Allow,
    Deny,
    /// She must decide: read the confirmation until it is decided.
    Confirm,
}

/// The answer to a hook.
#[derive(Debug, Clone, Serialize)]
pub struct ToolVerdict {
    pub decision: Verdict,
    /// Why, in words the agent reads (and Claude Code shows).
    pub reason: String,
    pub impact: Impact,
    /// The rule that gave the impact.
    pub rule: String,
    /// The confirmation to wait on, when `confirm` (and after).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<ConfirmationRecord>,
    /// The claimed command the call was made for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<ThreadId>,
}

/// Most settled confirmations one read returns.
pub const SETTLED_PAGE: i64 = 20;

/// Confirmations settled since a moment, and the moment to ask from next.
#[derive(Debug, Clone, Serialize)]
pub struct SettledConfirmations {
    pub settled: Vec<ConfirmationRecord>,
    /// Milliseconds since the epoch: pass it as `after` next time.
    pub until: i64,
}

/// Her decision.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfirmationDecision {
    /// Why (shown to the agent on a reject); at most 500 characters.
    #[serde(default)]
    pub reason: Option<String>,
}

fn check_request(req: &ToolCheckRequest) -> Result<()> {
    super::progress::check_tool_name(&req.tool)?;
    let d = req.input_digest.as_str();
    if d.len() != 64
        || !d
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(ServiceError::invalid(
            "input_digest must be the SHA-256 of the input's canonical JSON: 64 lower-case hex digits",
        ));
    }
    if let Some(t) = &req.summary.target
        && (t.chars().count() > MAX_TARGET_CHARS || text::first_storable_violation(t).is_some())
    {
        return Err(ServiceError::invalid(format!(
            "summary.target must be at most {MAX_TARGET_CHARS} storable characters"
        )));
    }
    if let Some(c) = &req.summary.command
        && (c.chars().count() > MAX_COMMAND_CHARS || text::first_storable_violation(c).is_some())
    {
        return Err(ServiceError::invalid(format!(
            "summary.command must be at most {MAX_COMMAND_CHARS} storable characters; cut a longer one and set truncated"
        )));
    }
    if req.wait_s == Some(0) {
        return Err(ServiceError::invalid(
            "wait_s must be at least 1 second: it is how long a human has to decide",
        ));
    }
    Ok(())
}

/// The note's target: the path or program, one line.
fn note_target(summary: &ToolSummary) -> Option<String> {
    let t = summary.target.as_deref()?.trim();
    (!t.is_empty()).then(|| t.chars().take(200).collect())
}

impl Service {
    /// A hook asks whether a tool call may run.
    pub async fn check_tool(&self, caller: &Caller, req: ToolCheckRequest) -> Result<ToolVerdict> {
        caller.require(Scope::Agent)?;
        caller.require_participant()?;
        check_request(&req)?;
        let summary = req.summary.masked();
        let tool = req.tool.clone();
        let settings = &self.inner.settings.tool_checks;
        // The configured rules, then her own (`tool_rules`): the strictest found wins.
        let mut rules = settings.rules.clone();
        rules.extend(self.inner.store.person_tool_rules(caller.id()).await?);
        let Classified { impact, rule } = tool_check::classify(&rules, &tool, &summary);
        let rights = caller
            .connection
            .as_ref()
            .map(|c| c.rights)
            .unwrap_or_default();
        let thread = self.claimed_thread(caller).await?;
        let target = note_target(&summary);
        let now = self.now();
        let audit = |decision: Decision, detail: String| ToolAudit {
            at: now,
            event: "tool.checked",
            confirmation: None,
            thread: thread.as_ref().map(|t| t.as_str().to_owned()),
            fingerprint: None,
            actor: Some(caller.id().clone()),
            via: None,
            decision: Some(decision),
            session: caller.agent.as_ref().map(|a| a.as_str().to_owned()),
            detail,
        };
        let line = summary.line(&tool);
        let credential = caller
            .connection
            .as_ref()
            .map(|c| c.token.clone())
            .unwrap_or_else(|| caller.token_id.clone());
        let call = follow_ups::call_key(&credential, &tool, &req.input_digest);
        let level = rights.level(impact);
        // The same call's `PermissionRequest` after its `PreToolUse` allowed it (`follow_ups`).
        if req.event == CheckEvent::PermissionRequest
            && level != RightLevel::Off
            && self.inner.follow_ups.take(&call, now)
        {
            return Ok(ToolVerdict {
                decision: Verdict::Allow,
                reason: "liaison: this call's PreToolUse check already allowed it".to_owned(),
                impact,
                rule,
                confirmation: None,
                thread,
            });
        }
        match level {
            RightLevel::Allowed => {
                if impact != Impact::None {
                    self.inner
                        .store
                        .audit_tool_check(audit(
                            Decision::Allow,
                            format!("{line} ({impact}; {rule})"),
                        ))
                        .await?;
                    self.tool_note(caller, &tool, target.as_deref(), "started")
                        .await;
                }
                if req.event == CheckEvent::PreToolUse {
                    self.inner.follow_ups.allowed(call, now);
                }
                Ok(ToolVerdict {
                    decision: Verdict::Allow,
                    reason: format!("{impact}: allowed for this connection ({rule})"),
                    impact,
                    rule,
                    confirmation: None,
                    thread,
                })
            }
            RightLevel::Off => {
                self.inner
                    .store
                    .audit_tool_check(audit(
                        Decision::Reject,
                        format!("{line} ({impact}; {rule})"),
                    ))
                    .await?;
                self.tool_note(caller, &tool, target.as_deref(), "refused")
                    .await;
                let whose = match &caller.connection {
                    Some(c) => format!("connection {}", text::quote(c.name.as_str())),
                    None => "this token".to_owned(),
                };
                Ok(ToolVerdict {
                    decision: Verdict::Deny,
                    reason: format!(
                        "liaison: {} has turned {impact} actions off for {whose} ({rule}). Do not retry it; tell {} what you wanted to do, so they can change the connection's rights if they agree.",
                        caller.person.display_name, caller.person.display_name
                    ),
                    impact,
                    rule,
                    confirmation: None,
                    thread,
                })
            }
            RightLevel::Confirm => {
                let wait_s = req
                    .wait_s
                    .unwrap_or(DEFAULT_CONFIRM_WAIT_S)
                    .min(settings.max_wait_s);
                let fingerprint = tool_check::fingerprint(
                    &credential,
                    thread.as_ref().map(ThreadId::as_str),
                    &tool,
                    &req.input_digest,
                    &summary,
                );
                let record = ConfirmationRecord {
                    id: ConfirmationId::generate(),
                    person: caller.id().clone(),
                    credential,
                    connection: caller.connection.as_ref().map(|c| c.name.to_string()),
                    agent: caller.agent.as_ref().map(|a| a.as_str().to_owned()),
                    thread: thread.clone(),
                    tool: tool.clone(),
                    input_digest: req.input_digest.clone(),
                    summary,
                    impact,
                    rule: rule.clone(),
                    fingerprint,
                    state: ConfirmationState::Pending,
                    reason: None,
                    decided_by: None,
                    decided_via: None,
                    decided_at: None,
                    consumed_at: None,
                    created_at: now,
                    expires_at: Timestamp(now.0 + (wait_s as i64) * 1000),
                };
                let cap = settings.pending_per_connection as i64;
                let asked = self.inner.store.ask_confirmation(record, cap).await?;
                let c = match asked {
                    ConfirmationAsked::TooMany(n) => {
                        return Err(ServiceError::new(
                            ErrorCode::TooManyWaiters,
                            format!(
                                "{n} confirmations of this connection already wait for {}; wait for her decisions before asking for more",
                                caller.person.display_name
                            ),
                        ));
                    }
                    ConfirmationAsked::Created(c, outbox_due) => {
                        self.inner.bus.publish(&Topic::seen(caller.id()));
                        self.outbox_due(outbox_due);
                        c
                    }
                    ConfirmationAsked::Existing(c) => c,
                };
                if req.event == CheckEvent::PreToolUse {
                    self.inner.follow_ups.asked_before_use(c.id.clone());
                }
                // Allowed earlier and not yet used (its first hook gave up waiting): this call
                // is exactly the one she allowed, so it uses it.
                if c.state == ConfirmationState::Allowed {
                    return Box::pin(self.settled_verdict(caller, c)).await;
                }
                Ok(ToolVerdict {
                    decision: Verdict::Confirm,
                    reason: format!(
                        "liaison: waiting for {} to allow this {impact} action once (the session panel or Approvals in liaison's console, or `liaison approvals allow {}`)",
                        caller.person.display_name, c.id
                    ),
                    impact,
                    rule,
                    confirmation: Some(c),
                    thread,
                })
            }
        }
    }

    /// The hook waits (up to `wait_s`, at most [`MAX_READ_WAIT_S`]) for her decision on the
    /// confirmation it asked for, and gets the final verdict once there is one: `allow` (using
    /// the confirmation up), `deny` (rejected, expired, already used), or `confirm` again when
    /// the wait ended first. Only the credential that asked may read it.
    pub async fn await_tool_confirmation(
        &self,
        caller: &Caller,
        id: &ConfirmationId,
        wait_s: u64,
    ) -> Result<ToolVerdict> {
        caller.require(Scope::Agent)?;
        caller.require_participant()?;
        let credential = caller
            .connection
            .as_ref()
            .map(|c| c.token.clone())
            .unwrap_or_else(|| caller.token_id.clone());
        let wait_s = wait_s.min(MAX_READ_WAIT_S);
        let mut subscription = None;
        let mut hold = None;
        let _guard;
        if wait_s > 0 {
            hold = Some(self.hold_credential(caller).await?);
            subscription = Some(self.inner.bus.subscribe(&Topic::confirmation(id.as_str())));
            _guard = self.count_waiter(caller)?;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(wait_s);
        loop {
            let c = self
                .inner
                .store
                .confirmation_of(caller.id(), id)
                .await?
                .filter(|c| c.credential == credential)
                .ok_or_else(|| ServiceError::not_found("confirmation", id))?;
            let now = self.now();
            let pending = c.state == ConfirmationState::Pending && c.expires_at > now;
            if !pending {
                return Box::pin(self.settled_verdict(caller, c)).await;
            }
            let wake_at = deadline.min(
                tokio::time::Instant::now()
                    + Duration::from_millis((c.expires_at.0 - now.0).max(0) as u64),
            );
            let Some(sub) = subscription
                .as_mut()
                .filter(|_| tokio::time::Instant::now() < deadline)
            else {
                return Ok(ToolVerdict {
                    decision: Verdict::Confirm,
                    reason: format!(
                        "liaison: still waiting for {} to decide",
                        caller.person.display_name
                    ),
                    impact: c.impact,
                    rule: c.rule.clone(),
                    thread: c.thread.clone(),
                    confirmation: Some(c),
                });
            };
            tokio::select! {
                () = sub.woken() => {}
                () = tokio::time::sleep_until(wake_at) => {}
                why = super::credentials::ended(hold.as_ref()) => return Err(why),
                () = self.inner.shutdown.cancelled() => {
                    return Err(ServiceError::new(ErrorCode::Unavailable, "liaison is shutting down; ask again"));
                }
            }
        }
    }

    /// The verdict of a confirmation that is no longer waiting (or is allowed and unused).
    async fn settled_verdict(&self, caller: &Caller, c: ConfirmationRecord) -> Result<ToolVerdict> {
        let now = self.now();
        let target = note_target(&c.summary);
        let who = c
            .decided_by
            .as_ref()
            .map(|p| p.to_string())
            .unwrap_or_else(|| caller.person.display_name.clone());
        let (decision, reason, note) = match c.state {
            ConfirmationState::Allowed => {
                if self
                    .inner
                    .store
                    .use_confirmation(c.credential.clone(), c.id.clone(), now)
                    .await?
                {
                    if self.inner.follow_ups.was_asked_before_use(&c.id) {
                        let call = follow_ups::call_key(&c.credential, &c.tool, &c.input_digest);
                        self.inner.follow_ups.allowed(call, now);
                    }
                    (
                        Verdict::Allow,
                        format!("liaison: {who} allowed this once"),
                        "started",
                    )
                } else {
                    (
                        Verdict::Deny,
                        "liaison: this confirmation was already used; the same call again needs a new one"
                            .to_owned(),
                        "denied",
                    )
                }
            }
            ConfirmationState::Rejected => (
                Verdict::Deny,
                match &c.reason {
                    Some(r) => format!("liaison: {who} rejected this: {}", text::quote(r)),
                    None => format!("liaison: {who} rejected this"),
                },
                "rejected",
            ),
            ConfirmationState::Consumed => (
                Verdict::Deny,
                "liaison: this confirmation was already used; the same call again needs a new one"
                    .to_owned(),
                "denied",
            ),
            ConfirmationState::Expired | ConfirmationState::Pending => {
                // Past its deadline: expired now if the sweep has not done it yet.
                if c.state == ConfirmationState::Pending {
                    self.expire_tool_confirmations().await?;
                }
                (
                    Verdict::Deny,
                    "liaison: no human decided in time, so the call is denied; ask again only if it is still needed"
                        .to_owned(),
                    "expired",
                )
            }
        };
        self.tool_note(caller, &c.tool, target.as_deref(), note)
            .await;
        let fresh = self
            .inner
            .store
            .confirmation_of(&c.person, &c.id)
            .await?
            .unwrap_or(c);
        Ok(ToolVerdict {
            decision,
            reason,
            impact: fresh.impact,
            rule: fresh.rule.clone(),
            thread: fresh.thread.clone(),
            confirmation: Some(fresh),
        })
    }

    /// Her decision on one of her agents' calls: only she, in person (a `human` credential that
    /// is not a connection), on a pending one before its deadline.
    pub async fn decide_tool_confirmation(
        &self,
        caller: &Caller,
        id: &ConfirmationId,
        decision: Decision,
        input: ConfirmationDecision,
    ) -> Result<ConfirmationRecord> {
        caller.require(Scope::Human)?;
        if caller.connection.is_some() || caller.person.kind != PersonKind::Member {
            return Err(ServiceError::forbidden(
                "only the person herself decides her agents' actions, with a human credential",
            ));
        }
        let reason = input
            .reason
            .map(|r| r.trim().to_owned())
            .filter(|r| !r.is_empty());
        if let Some(r) = &reason
            && (r.chars().count() > 500 || text::first_storable_violation(r).is_some())
        {
            return Err(ServiceError::invalid(
                "reason must be at most 500 storable characters",
            ));
        }
        let decided = self
            .inner
            .store
            .decide_confirmation(
                caller.id().clone(),
                id.clone(),
                decision,
                reason,
                caller.via,
                self.now(),
            )
            .await?;
        match decided {
            ConfirmationDecided::Decided(c, outbox_due) => {
                self.outbox_due(outbox_due);
                self.inner.bus.publish(&Topic::confirmation(c.id.as_str()));
                self.inner
                    .bus
                    .publish(&Topic::confirmations_of(&c.credential));
                self.inner.bus.publish(&Topic::seen(caller.id()));
                Ok(c)
            }
            ConfirmationDecided::Unknown => Err(ServiceError::not_found("confirmation", id)),
            ConfirmationDecided::Settled(c) => {
                let (code, what) = match c.state {
                    ConfirmationState::Pending | ConfirmationState::Expired => (
                        ErrorCode::ApprovalExpired,
                        "expired: no one decided in time",
                    ),
                    ConfirmationState::Allowed | ConfirmationState::Consumed => {
                        (ErrorCode::ApprovalDecided, "already allowed")
                    }
                    ConfirmationState::Rejected => (ErrorCode::ApprovalDecided, "already rejected"),
                };
                Err(ServiceError::new(
                    code,
                    format!("confirmation {id} is {what}; nothing changed"),
                ))
            }
        }
    }

    /// The calling connection's confirmations settled (decided or expired) after `after` (ms
    /// since the epoch), oldest first, at most [`SETTLED_PAGE`]; waits up to `wait_s` (at most
    /// [`MAX_READ_WAIT_S`]) for the next when there is none. Without `after`, answers at once
    /// with none and the server's `until` to start from. What `liaison mcp --stdio --channel`
    /// pushes into a live session, so an agent whose hook stopped waiting learns her decision.
    pub async fn settled_tool_confirmations(
        &self,
        caller: &Caller,
        after: Option<i64>,
        wait_s: u64,
    ) -> Result<SettledConfirmations> {
        caller.require(Scope::Agent)?;
        caller.require_participant()?;
        let credential = caller
            .connection
            .as_ref()
            .map(|c| c.token.clone())
            .unwrap_or_else(|| caller.token_id.clone());
        let Some(after) = after else {
            return Ok(SettledConfirmations {
                settled: Vec::new(),
                until: self.now().0,
            });
        };
        let after = Timestamp(after);
        let wait_s = wait_s.min(MAX_READ_WAIT_S);
        let mut subscription = None;
        let mut hold = None;
        let _guard;
        if wait_s > 0 {
            hold = Some(self.hold_credential(caller).await?);
            subscription = Some(
                self.inner
                    .bus
                    .subscribe(&Topic::confirmations_of(&credential)),
            );
            _guard = self.count_waiter(caller)?;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(wait_s);
        loop {
            let settled = self
                .inner
                .store
                .settled_confirmations(&credential, after, SETTLED_PAGE)
                .await?;
            let timed_out = tokio::time::Instant::now() >= deadline;
            let Some(sub) = subscription
                .as_mut()
                .filter(|_| settled.is_empty() && !timed_out)
            else {
                let until = settled.last().and_then(|c| c.decided_at).unwrap_or(after).0;
                return Ok(SettledConfirmations { settled, until });
            };
            tokio::select! {
                () = sub.woken() => {}
                () = tokio::time::sleep_until(deadline) => {}
                why = super::credentials::ended(hold.as_ref()) => return Err(why),
                () = self.inner.shutdown.cancelled() => {
                    return Ok(SettledConfirmations { settled: Vec::new(), until: after.0 });
                }
            }
        }
    }

    /// Her confirmations waiting for her, newest first.
    pub async fn pending_tool_confirmations(
        &self,
        caller: &Caller,
    ) -> Result<Vec<ConfirmationRecord>> {
        caller.require(Scope::Human)?;
        caller.require_participant()?;
        self.inner
            .store
            .pending_confirmations(caller.id(), self.now())
            .await
            .map_err(Into::into)
    }

    /// One of her confirmations (another person's is unknown).
    pub async fn tool_confirmation(
        &self,
        caller: &Caller,
        id: &ConfirmationId,
    ) -> Result<ConfirmationRecord> {
        caller.require(Scope::Human)?;
        caller.require_participant()?;
        self.inner
            .store
            .confirmation_of(caller.id(), id)
            .await?
            .ok_or_else(|| ServiceError::not_found("confirmation", id))
    }

    /// Expires the confirmations past their deadline (the sweep, and a hook reading one late),
    /// waking their hooks and their persons' consoles.
    pub async fn expire_tool_confirmations(&self) -> Result<usize> {
        let expired = self.inner.store.expire_confirmations(self.now()).await?;
        for c in &expired {
            self.inner.bus.publish(&Topic::confirmation(c.id.as_str()));
            self.inner
                .bus
                .publish(&Topic::confirmations_of(&c.credential));
            self.inner.bus.publish(&Topic::seen(&c.person));
        }
        // Their `approval.decided` webhooks, if any subscribed.
        self.outbox_due(!expired.is_empty());
        Ok(expired.len())
    }

    /// The thread the caller's connection (or declared session) holds a live claim on, as
    /// `report_progress` finds it.
    async fn claimed_thread(&self, caller: &Caller) -> Result<Option<ThreadId>> {
        let mut claims = self.inner.store.claims_of(caller.id(), self.now()).await?;
        if let Some(c) = &caller.connection {
            claims.retain(|claim| claim.connection.as_deref() == Some(c.token.as_str()));
        }
        let claim = match &caller.agent {
            Some(agent) => claims.into_iter().find(|c| &c.session == agent),
            None => claims.into_iter().next(),
        };
        Ok(claim.map(|c| c.thread))
    }

    /// A lifecycle note on the claimed thread; best effort (a full or rate-limited thread, or
    /// no claim, records nothing and never changes the verdict).
    async fn tool_note(
        &self,
        caller: &Caller,
        tool: &str,
        target: Option<&str>,
        outcome: &'static str,
    ) {
        if let Err(e) = self.add_tool_note(caller, tool, target, outcome).await {
            tracing::debug!(error = %e, "tool note not recorded");
        }
    }
}
