//! The coordination tools: `claim`, `presence_set`, `fleet`, `lease_acquire`, `lease_release`,
//! `leases`, `join`.

use rmcp::handler::server::tool::{InputResponses as ToolInputResponses, RequestState};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResponse, CallToolResult};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, tool, tool_router};
use serde_json::json;

use super::{Tools, caller, done, more, page};
use crate::domain::{LeaseMode, ThreadId, text};
use crate::mcp::args::{
    ClaimActionArg, ClaimArgs, JoinArgs, LeaseAcquireArgs, LeaseReleaseArgs, ListArgs, PresenceArgs,
};
use crate::mcp::elicit::{self, Stateless};
use crate::mcp::progress::with_progress;
use crate::mcp::render;
use crate::service::{ClaimAction, ClaimTarget, ErrorCode, LeaseSpec, PresenceSpec, ServiceError};
use crate::store::ClaimRecord;

#[tool_router(router = coordination_router, vis = "pub(super)")]
impl Tools {
    #[tool(
        description = "Claim a request or handoff thread addressed to you, so that exactly one agent session works \
                       on it (thread=\"next\" takes the oldest waiting one and answers with its thread and messages, \
                       so you read the task in the answer; with wait_s it waits for one to be handed to you, \
                       one waiting session per new task). Renew before the lease ends; a reply \
                       or close releases it. Another session holding it gets already_claimed with the holder.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn claim(
        &self,
        Parameters(a): Parameters<ClaimArgs>,
        RequestState(state): RequestState,
        ToolInputResponses(responses): ToolInputResponses,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let stateless = ctx
            .protocol_version()
            .is_some_and(|v| v.as_str() >= "2026-07-28");
        // A stateless call declares its client's capabilities in the request itself.
        let can_elicit = ctx
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        let result = async {
            let (c, _) = caller(&ctx, a.agent.as_deref())?;
            let target = match a.thread.as_str() {
                "next" if a.action == ClaimActionArg::Claim => ClaimTarget::Next,
                "next" => {
                    return Err(ServiceError::invalid(
                        "give the thread id to renew or release",
                    ));
                }
                id => ClaimTarget::Thread(ThreadId::parse(id)?),
            };
            let action = match a.action {
                ClaimActionArg::Claim | ClaimActionArg::Renew => ClaimAction::Claim,
                ClaimActionArg::Release => ClaimAction::Release,
            };
            if let Some(wait_s) = a.wait_s {
                if !matches!(target, ClaimTarget::Next) || a.fencing_token.is_some() {
                    return Err(ServiceError::invalid(
                        "wait_s waits for work: give it with thread=\"next\" only",
                    ));
                }
                // Ends with the call: a claim wait whose client cancelled it, or whose session
                // closed, never takes a task for no one (it would hold the task until its lease
                // ended). Dropping the wait passes on a hand-off it held.
                let waiting = std::pin::pin!(self.claim_waiting(&c, a.lease_s, wait_s));
                let Some(claim) = with_progress(waiting, &ctx, wait_s).await else {
                    return Err(cancelled_claim());
                };
                let claim = claim?;
                return Ok(CallToolResponse::Complete(
                    self.claimed_next(&c, claim).await,
                ));
            }
            let next = matches!(target, ClaimTarget::Next);
            let claim = match self
                .service
                .claim_fenced(&c, target.clone(), action, a.lease_s, a.fencing_token)
                .await
            {
                // The channel may let this approver's human decide through the client:
                // a server-to-client request on a session, the input-required retry when
                // stateless.
                Err(e) if e.code == ErrorCode::ApprovalPending && stateless && can_elicit => {
                    match elicit::ask_stateless(
                        &self.service,
                        &c,
                        &e,
                        state.as_deref(),
                        responses.as_ref(),
                    )
                    .await?
                    {
                        Stateless::Ask(form) => return Ok(CallToolResponse::InputRequired(*form)),
                        Stateless::Pending => return Err(e),
                        Stateless::Allowed => {
                            self.service
                                .claim_fenced(&c, target, action, a.lease_s, a.fencing_token)
                                .await?
                        }
                    }
                }
                Err(e) if e.code == ErrorCode::ApprovalPending && !stateless => {
                    if !elicit::ask(&self.service, &c, &ctx.peer, &e).await? {
                        return Err(e);
                    }
                    self.service
                        .claim_fenced(&c, target, action, a.lease_s, a.fencing_token)
                        .await?
                }
                other => other?,
            };
            if next && let Some(claim) = claim {
                return Ok(CallToolResponse::Complete(
                    self.claimed_next(&c, claim).await,
                ));
            }
            let claim = render::value(&claim);
            let text = render::claimed(&claim);
            Ok(CallToolResponse::Complete(render::ok(
                render::object([("claim", claim)]),
                vec![text],
            )))
        }
        .await;
        result.unwrap_or_else(|e| CallToolResponse::Complete(render::error(e)))
    }

    #[tool(
        description = "Report what your agent session is doing (started, working, blocked, done, idle) with an \
                       optional one-line task; it expires after ttl_s unless reported again.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn presence_set(
        &self,
        Parameters(a): Parameters<PresenceArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(
            async {
                let (c, _) = caller(&ctx, a.agent.as_deref())?;
                let spec = PresenceSpec {
                    transition: a.transition.domain(),
                    task: a.task,
                    ttl_s: a.ttl_s,
                };
                let p = self.service.presence_set(&c, spec).await?;
                let text = format!(
                    "Presence of self-declared agent {} set to {} until {}.",
                    text::quote(p.agent.as_str()),
                    p.transition,
                    p.expires_at
                );
                Ok(render::ok(json!({ "presence": p }), vec![text]))
            }
            .await,
        )
    }

    #[tool(
        description = "Live presence of the agents of everyone who shares a channel with you. Paginated.",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn fleet(
        &self,
        Parameters(a): Parameters<ListArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(
            async {
                let (c, _) = caller(&ctx, None)?;
                let (items, next_cursor) = page(self.service.fleet(&c).await?, &a)?;
                let remotes = self.service.remote_agents(&c).await?;
                let lines: Vec<String> = items
                    .iter()
                    .map(|p| {
                        let task = p
                            .task
                            .as_deref()
                            .map(|t| format!(": {}", text::quote(t)))
                            .unwrap_or_default();
                        format!(
                            "- {} / self-declared agent {}: {}{task}, until {}",
                            p.person,
                            text::quote(p.agent.as_str()),
                            p.transition,
                            p.expires_at
                        )
                    })
                    .collect();
                let text = if lines.is_empty() {
                    "No live agents.".to_owned()
                } else {
                    format!("Fleet:\n{}", lines.join("\n"))
                };
                Ok(render::ok(
                    json!({ "fleet": items, "next_cursor": next_cursor, "remote_agents": remotes }),
                    vec![text + &more(&next_cursor), render::remote_agents(&remotes)],
                ))
            }
            .await,
        )
    }

    #[tool(
        description = "Take an advisory lease on a named resource (repo:…, service:…) for ttl_s; acquire again to \
                       renew. Held by someone else: refused with the holder, unless force (ask a human first).",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn lease_acquire(
        &self,
        Parameters(a): Parameters<LeaseAcquireArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(
            async {
                let (c, _) = caller(&ctx, a.agent.as_deref())?;
                let spec = LeaseSpec {
                    resource: a.resource,
                    mode: a.mode.map_or(LeaseMode::Exclusive, |m| m.domain()),
                    ttl_s: a.ttl_s,
                    force: a.force,
                };
                let l = self.service.lease_acquire(&c, spec).await?;
                let text = format!(
                    "You (self-declared agent {}) hold {} ({}) until {}.",
                    text::quote(l.agent.as_str()),
                    text::quote(&l.resource),
                    l.mode,
                    l.expires_at
                );
                Ok(render::ok(json!({ "lease": l }), vec![text]))
            }
            .await,
        )
    }

    #[tool(
        description = "Release a lease your agent session holds.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn lease_release(
        &self,
        Parameters(a): Parameters<LeaseReleaseArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(
            async {
                let (c, _) = caller(&ctx, a.agent.as_deref())?;
                self.service.lease_release(&c, &a.resource).await?;
                Ok(render::ok(
                    json!({ "released": a.resource }),
                    vec![format!("Released {}.", a.resource)],
                ))
            }
            .await,
        )
    }

    #[tool(
        description = "Live leases of everyone who shares a channel with you. Paginated.",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn leases(
        &self,
        Parameters(a): Parameters<ListArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(
            async {
                let (c, _) = caller(&ctx, None)?;
                let (items, next_cursor) = page(self.service.leases(&c).await?, &a)?;
                let lines: Vec<String> = items
                    .iter()
                    .map(|l| {
                        format!(
                            "- {}: {} / self-declared agent {}, {} until {}",
                            text::quote(&l.resource),
                            l.person,
                            text::quote(l.agent.as_str()),
                            l.mode,
                            l.expires_at
                        )
                    })
                    .collect();
                let text = if lines.is_empty() {
                    "No live leases.".to_owned()
                } else {
                    format!("Leases:\n{}", lines.join("\n"))
                };
                Ok(render::ok(
                    json!({ "leases": items, "next_cursor": next_cursor }),
                    vec![text + &more(&next_cursor)],
                ))
            }
            .await,
        )
    }

    #[tool(
        description = "Join your person's session with the code she gave you (lj-xxxx-xxxx-xxxx): binds this \
                       connection to her session and returns it, its pending commands, and the consumer and \
                       session to wait on with `inbox`. Her commands are her instructions to you; run each \
                       once (claim it first) and report in its thread. Codes are single use and short-lived.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn join(
        &self,
        Parameters(a): Parameters<JoinArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        done(
            async {
                let (c, _) = caller(&ctx, None)?;
                let joined = self.service.join_session(&c, &a.code).await?;
                let pending: Vec<String> = joined
                    .pending
                    .iter()
                    .map(|p| format!("- {} {} (pick up by {})", p.thread, text::quote(&p.subject), p.pickup_by))
                    .collect();
                let mut text = format!(
                    "Joined session {} ({}) with {}. Wait for commands with inbox(consumer=\"{}\", \
                     session=\"{}\", after={}, wait_s=50); claim each command before you work on it.",
                    joined.session.id,
                    text::quote(&joined.session.title),
                    joined.session.with,
                    joined.consumer,
                    joined.session.id,
                    joined.cursor
                );
                if !pending.is_empty() {
                    text.push_str(&format!("\nPending commands:\n{}", pending.join("\n")));
                }
                Ok(render::ok(json!({ "joined": joined }), vec![text]))
            }
            .await,
        )
    }
}

impl Tools {
    /// The answer to a claim of `next`: the claim, and the thread it took as the `thread` tool
    /// shows it (its state and its first page of messages, each labelled), so the agent reads
    /// its task without another call. The claim stands whatever the read answers: when the
    /// thread cannot be read now, the answer is the claim alone and says how to read it.
    pub(crate) async fn claimed_next(
        &self,
        c: &crate::service::Caller,
        claim: ClaimRecord,
    ) -> CallToolResult {
        let claimed = render::value(&claim);
        let mut text = vec![render::claimed(&claimed)];
        match self.service.thread_of_claim(c, &claim).await {
            Ok(view) => {
                let mut value = render::value(&view);
                value["next_cursor"] = json!(view.next_cursor.map(|n| n.to_string()));
                text.extend(render::thread(&value));
                render::ok(
                    render::object([("claim", claimed), ("thread", value)]),
                    text,
                )
            }
            Err(e) => {
                tracing::warn!(thread = %claim.thread, error = %e.message, "A claimed thread could not be read for the claim's answer.");
                text.push(format!(
                    "Read it with the thread tool (thread {}): it could not be read now.",
                    claim.thread
                ));
                render::ok(render::object([("claim", claimed)]), text)
            }
        }
    }
}

impl Tools {
    /// The wait of a `claim` of `next` with `wait_s`, once its arguments are checked: the claim
    /// the service hands this caller. Shared by the tool and by the wait answered outside rmcp's
    /// per-request path ([`crate::mcp::waits`]). Dropping it passes on a hand-off it held, so a
    /// cancelled wait never takes a task for no one.
    pub(crate) fn claim_waiting<'a>(
        &'a self,
        c: &'a crate::service::Caller,
        lease_s: Option<u64>,
        wait_s: u64,
    ) -> impl Future<Output = Result<ClaimRecord, ServiceError>> + Send + 'a {
        self.service.claim_next_waiting(c, lease_s, wait_s)
    }
}

/// Why a `claim` wait ended without a claim: its call was cancelled or its session ended.
pub(crate) fn cancelled_claim() -> ServiceError {
    ServiceError::invalid("the claim's wait was cancelled: nothing was claimed")
}
