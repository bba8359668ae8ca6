//! Approval through MCP elicitation: when a claim meets a pending approval that its channel lets
//! the approver's own client decide (`approval_via_elicitation`, never for external requests), the
//! server asks the human through the client's form (the 2025-11-25 `elicitation/create` request
//! on a legacy session). The human must type the fingerprint's first characters, so a client that
//! accepts forms by itself (Codex in full-access mode accepts empty forms) cannot decide.
//!
//! Stateless 2026-07-28 calls cannot carry a server-to-client request; there, and for clients that
//! did not declare the elicitation capability, the claim answers `approval_pending` as usual.

use rmcp::RoleServer;
use rmcp::service::Peer;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::domain::{ApprovalId, Decision, text};
use crate::service::{Caller, ErrorCode, Service, ServiceError};

/// How many characters of the fingerprint the human types to confirm.
pub const CONFIRM_CHARS: usize = 8;
/// How long the human has to answer the form.
const ANSWER_WITHIN: std::time::Duration = std::time::Duration::from_secs(300);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
enum FormDecision {
    Allow,
    Reject,
}

/// The form the human fills in.
#[derive(Debug, Deserialize, JsonSchema)]
struct ApprovalForm {
    /// allow (once) or reject.
    decision: FormDecision,
    /// The first 8 characters of the fingerprint shown in the message, to confirm you read it.
    confirm: String,
    /// Why, when rejecting: the requester is told.
    #[serde(default)]
    reason: String,
}

rmcp::elicit_safe!(ApprovalForm);

/// Asks the approver's human to decide the approval behind `pending` (a claim's
/// `approval_pending` error). Returns whether a decision was recorded; `Ok(false)` when this
/// approval or client cannot be asked (then the original error stands).
pub async fn ask(
    service: &Service,
    caller: &Caller,
    peer: &Peer<RoleServer>,
    pending: &ServiceError,
) -> Result<bool, ServiceError> {
    let Some(id) = pending
        .details
        .as_ref()
        .and_then(|d| d["approval"]["id"].as_str())
        .and_then(|id| ApprovalId::parse(id).ok())
    else {
        return Ok(false);
    };
    let view = match service.approval_for_elicitation(caller, &id).await? {
        Some(view) => view,
        None => return Ok(false),
    };
    let a = &view.approval;
    let body: String = view.request.body.chars().take(1_000).collect();
    let message = format!(
        "{} asks your agent for a change with impact {} in channel {} (thread {}, subject {}). \
         The request, as written by their agent: {}. Fingerprint {}. Allow it once, or reject it \
         with a reason. To confirm, type the first {CONFIRM_CHARS} characters of the fingerprint.",
        view.requested_by_name,
        a.impact,
        a.channel,
        a.thread,
        text::quote(&view.subject),
        text::quote(&body),
        a.fingerprint,
    );
    let form = match peer
        .elicit_with_timeout::<ApprovalForm>(message, Some(ANSWER_WITHIN))
        .await
    {
        Ok(Some(form)) => form,
        Ok(None) => return Ok(false),
        Err(e) => {
            tracing::debug!(approval = %a.id, error = %e, "No decision through elicitation.");
            return Ok(false);
        }
    };
    if form.confirm.trim() != &a.fingerprint[..CONFIRM_CHARS] {
        return Err(ServiceError::invalid(format!(
            "the confirmation did not match the first {CONFIRM_CHARS} characters of the \
             fingerprint; nothing was decided"
        )));
    }
    let decision = match form.decision {
        FormDecision::Allow => Decision::Allow,
        FormDecision::Reject => Decision::Reject,
    };
    let reason = Some(form.reason).filter(|r| !r.trim().is_empty());
    service
        .decide_by_elicitation(caller, &a.id, decision, reason)
        .await?;
    if decision == Decision::Reject {
        return Err(ServiceError::new(
            ErrorCode::NotClaimable,
            format!(
                "your human rejected the request; thread {} is closed with the reason",
                a.thread
            ),
        ));
    }
    Ok(true)
}
