//! Tool calls checked by the server (SPEC §5b): what the hooks `liaison hook pre-tool-use` and
//! `… permission-request` call with an agent's token, and her decisions with her own `human`
//! token. The rules and the JSON's fields are `service::tool_checks`'s.
//!
//! | route | does |
//! |---|---|
//! | `POST /api/v1/tool-checks` (`{"event", "tool", "input_digest", "summary": {"target", "command", "truncated"}, "wait_s"}`) | the verdict: `allow`, `deny` with a reason, or `confirm` with the confirmation to wait on |
//! | `GET /api/v1/tool-checks/{id}?wait_s=N` | waits (at most 50 s) for her decision; `allow` uses it up |
//! | `GET /api/v1/tool-checks?after=MS&wait_s=N` | the connection's confirmations settled since `after` (without it: none, and the `until` to start from); what the `claude/channel` bridge pushes |
//! | `GET /api/v1/confirmations` | her confirmations waiting for her (scope `human`) |
//! | `GET /api/v1/confirmations/{id}` | one of them, in any state |
//! | `POST /api/v1/confirmations/{id}/allow`, `…/reject` (`{"reason"}`, optional) | allow once, reject |
//!
//! | `GET /api/v1/tool-rules` | her own tool rules (`service::tool_rules`) |
//! | `PUT /api/v1/tool-rules` (`{"rules": [{"tool", "command"?, "contains"?, "impact"}]}`) | replaces them (scope `human`, in person) |
//!
//! `POST /api/v1/approvals/{id}/allow|reject` with a `tcf_…` id decides a confirmation too, so
//! `liaison approvals allow tcf_…` works.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::ApiResult;
use crate::domain::Decision;
use crate::domain::tool_check::{ConfirmationId, ToolRule};
use crate::http::{Authed, Body};
use crate::service::{Caller, ConfirmationDecision, Service, ServiceError, ToolCheckRequest};

pub(super) fn confirmation_id(id: &str) -> Result<ConfirmationId, ServiceError> {
    // A malformed id is as unknown as a foreign one.
    ConfirmationId::parse(id).map_err(|_| ServiceError::not_found("confirmation", id))
}

pub(super) async fn check(
    State(s): State<Service>,
    Authed(c): Authed,
    Body(req): Body<ToolCheckRequest>,
) -> ApiResult<Value> {
    Ok(Json(json!(s.check_tool(&c, req).await?)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WaitQuery {
    #[serde(default)]
    wait_s: u64,
}

pub(super) async fn wait(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
    Query(q): Query<WaitQuery>,
) -> ApiResult<Value> {
    let verdict = s
        .await_tool_confirmation(&c, &confirmation_id(&id)?, q.wait_s)
        .await?;
    Ok(Json(json!(verdict)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SettledQuery {
    after: Option<i64>,
    #[serde(default)]
    wait_s: u64,
}

pub(super) async fn settled(
    State(s): State<Service>,
    Authed(c): Authed,
    Query(q): Query<SettledQuery>,
) -> ApiResult<Value> {
    let page = s.settled_tool_confirmations(&c, q.after, q.wait_s).await?;
    Ok(Json(json!(page)))
}

pub(super) async fn list(State(s): State<Service>, Authed(c): Authed) -> ApiResult<Value> {
    Ok(Json(
        json!({ "confirmations": s.pending_tool_confirmations(&c).await? }),
    ))
}

pub(super) async fn show(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
) -> ApiResult<Value> {
    let record = s.tool_confirmation(&c, &confirmation_id(&id)?).await?;
    Ok(Json(json!({ "confirmation": record })))
}

/// Decides one; the body (`{"reason"}`) is optional.
pub(super) async fn decide(
    s: &Service,
    c: &Caller,
    id: &str,
    decision: Decision,
    body: &Bytes,
    via: crate::domain::DecisionPath,
) -> ApiResult<Value> {
    #[derive(Deserialize, Default)]
    #[serde(deny_unknown_fields)]
    struct DecisionBody {
        reason: Option<String>,
        via: Option<String>,
    }
    let body: DecisionBody = if body.iter().all(u8::is_ascii_whitespace) {
        DecisionBody::default()
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ServiceError::invalid(format!("the body is not a decision: {e}")))?
    };
    let via = match body.via.as_deref() {
        None => via,
        Some("api") => crate::domain::DecisionPath::Api,
        Some("cli") => crate::domain::DecisionPath::Cli,
        Some(other) => {
            return Err(ServiceError::invalid(format!(
                "via {other:?} is not a path of this route: use api or cli"
            ))
            .into());
        }
    };
    let c = c.clone().arriving_via(via);
    let record = s
        .decide_tool_confirmation(
            &c,
            &confirmation_id(id)?,
            decision,
            ConfirmationDecision {
                reason: body.reason,
            },
        )
        .await?;
    Ok(Json(json!({ "confirmation": record })))
}

pub(super) async fn allow(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Value> {
    let via = c.via;
    decide(&s, &c, &id, Decision::Allow, &body, via).await
}

pub(super) async fn reject(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Value> {
    let via = c.via;
    decide(&s, &c, &id, Decision::Reject, &body, via).await
}

pub(super) async fn rules(State(s): State<Service>, Authed(c): Authed) -> ApiResult<Value> {
    Ok(Json(json!({ "rules": s.tool_rules(&c).await? })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RulesBody {
    rules: Vec<ToolRule>,
}

pub(super) async fn set_rules(
    State(s): State<Service>,
    Authed(c): Authed,
    Body(body): Body<RulesBody>,
) -> ApiResult<Value> {
    Ok(Json(
        json!({ "rules": s.set_tool_rules(&c, body.rules).await? }),
    ))
}
