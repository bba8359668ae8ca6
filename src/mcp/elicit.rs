//! Approval through MCP elicitation: when a claim meets a pending approval that its channel lets
//! the approver's own client decide (`approval_via_elicitation`, never for external requests), the
//! server asks the human through the client's form (the 2025-11-25 `elicitation/create` request
//! on a legacy session). The human must type the fingerprint's first characters, so a client that
//! accepts forms by itself (Codex in full-access mode accepts empty forms) cannot decide.
//!
//! On a stateless 2026-07-28 call the same form travels as the input-required retry (MRTR): the
//! claim answers an `InputRequiredResult` whose `requestState` is sealed under the master key and
//! bound to the caller's person and token (and expires in five minutes); the client's retry carries
//! the human's answer, which is checked exactly as on a legacy session. Clients that did not
//! declare the elicitation capability get `approval_pending` as usual.

use rmcp::RoleServer;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitationSchema, InputRequest, InputRequests,
    InputRequiredResult,
};
use rmcp::service::Peer;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::domain::{ApprovalId, Decision, text};
use crate::service::{CONFIRM_CHARS, Caller, ErrorCode, Service, ServiceError};

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

/// The purpose a sealed request state is bound to.
const STATE_PURPOSE: &str = "mcp-claim-approval";
/// The key of the form among the input requests.
const INPUT_KEY: &str = "approval";

#[derive(serde::Serialize, Deserialize)]
struct SealedState {
    approval: ApprovalId,
    /// Milliseconds since the epoch after which the state is refused.
    expires_at: i64,
}

/// What a stateless claim meeting a pending approval does next.
pub(super) enum Stateless {
    /// Ask the human: answer with this input-required result.
    Ask(Box<InputRequiredResult>),
    /// The human allowed it: claim again.
    Allowed,
    /// Nothing to ask (no elicitation here): the pending error stands.
    Pending,
}

/// The stateless (2026-07-28) form of [`ask`]: the first round returns the form with a sealed
/// state; the retry round (`state` and `responses` present) checks the state and the answer and
/// decides.
pub(super) async fn ask_stateless(
    service: &Service,
    caller: &Caller,
    pending: &ServiceError,
    state: Option<&str>,
    responses: Option<&rmcp::model::InputResponses>,
) -> Result<Stateless, ServiceError> {
    let Some(id) = pending_approval(pending) else {
        return Ok(Stateless::Pending);
    };
    let view = match service.approval_for_elicitation(caller, &id).await? {
        Some(view) => view,
        None => return Ok(Stateless::Pending),
    };
    let now = chrono::Utc::now().timestamp_millis();
    if let (Some(state), Some(responses)) = (state, responses) {
        let opened: SealedState = service
            .open_for(caller, STATE_PURPOSE, state)
            .and_then(|plain| serde_json::from_slice(&plain).ok())
            .ok_or_else(|| {
                ServiceError::invalid("the request state is not one this server gave you")
            })?;
        if opened.approval != id || opened.expires_at < now {
            return Err(ServiceError::invalid(
                "the request state is for another approval or has expired; claim again",
            ));
        }
        let answer = responses.get(INPUT_KEY).cloned().unwrap_or_default();
        if answer["action"] != "accept" {
            return Ok(Stateless::Pending);
        }
        let form: ApprovalForm = serde_json::from_value(answer["content"].clone())
            .map_err(|e| ServiceError::invalid(format!("the approval form is incomplete: {e}")))?;
        decide(service, caller, &view.approval, form).await?;
        return Ok(Stateless::Allowed);
    }
    let schema = ElicitationSchema::from_type::<ApprovalForm>()
        .map_err(|e| ServiceError::new(ErrorCode::Internal, e.to_string()))?;
    let mut requests = InputRequests::new();
    requests.insert(
        INPUT_KEY.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(
            ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: question(&view),
                requested_schema: schema,
            },
        )),
    );
    let sealed = SealedState {
        approval: id,
        expires_at: now + ANSWER_WITHIN.as_millis() as i64,
    };
    let state = service.seal_for(
        caller,
        STATE_PURPOSE,
        &serde_json::to_vec(&sealed).unwrap_or_default(),
    )?;
    Ok(Stateless::Ask(Box::new(InputRequiredResult::new(
        Some(requests),
        Some(state),
    ))))
}

fn pending_approval(pending: &ServiceError) -> Option<ApprovalId> {
    pending
        .details
        .as_ref()
        .and_then(|d| d["approval"]["id"].as_str())
        .and_then(|id| ApprovalId::parse(id).ok())
}

/// What the human is asked.
fn question(view: &crate::service::ApprovalView) -> String {
    let a = &view.approval;
    let body: String = view.request.body.chars().take(1_000).collect();
    format!(
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
    )
}

/// Records the human's answer through the service, which checks the confirmation; a rejection
/// closes the thread.
async fn decide(
    service: &Service,
    caller: &Caller,
    a: &crate::store::ApprovalRecord,
    form: ApprovalForm,
) -> Result<(), ServiceError> {
    let decision = match form.decision {
        FormDecision::Allow => Decision::Allow,
        FormDecision::Reject => Decision::Reject,
    };
    service
        .decide_by_elicitation(caller, &a.id, decision, Some(form.reason), &form.confirm)
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
    Ok(())
}

/// Asks the approver's human to decide the approval behind `pending` (a claim's
/// `approval_pending` error). Returns whether a decision was recorded; `Ok(false)` when this
/// approval or client cannot be asked (then the original error stands).
pub(super) async fn ask(
    service: &Service,
    caller: &Caller,
    peer: &Peer<RoleServer>,
    pending: &ServiceError,
) -> Result<bool, ServiceError> {
    let Some(id) = pending_approval(pending) else {
        return Ok(false);
    };
    let view = match service.approval_for_elicitation(caller, &id).await? {
        Some(view) => view,
        None => return Ok(false),
    };
    let form = match peer
        .elicit_with_timeout::<ApprovalForm>(question(&view), Some(ANSWER_WITHIN))
        .await
    {
        Ok(Some(form)) => form,
        Ok(None) => return Ok(false),
        Err(e) => {
            tracing::debug!(approval = %id, error = %e, "No decision through elicitation.");
            return Ok(false);
        }
    };
    decide(service, caller, &view.approval, form).await?;
    Ok(true)
}
