//! The member HTTP API under `/api/v1`, for people with their own token (what the CLI's member
//! commands call): deciding approvals, which needs a token with scope `human`, and the member
//! routes of [`member`] (inbox, thread, post, claim) for a token with scope `agent`.
//!
//! | route | does |
//! |---|---|
//! | `GET /api/v1/approvals?pending=true&before=ID&limit=N` | approvals the caller may decide, newest first |
//! | `GET /api/v1/approvals/{id}` | one approval with the exact request and its fingerprint |
//! | `POST /api/v1/approvals/{id}/allow` | allow once (body optional: `{"via": "cli"}`) |
//! | `POST /api/v1/approvals/{id}/reject` | reject, body `{"reason": "…"}` (required) |
//! | `POST /api/v1/progress` | a progress note, body `{"tool", "target", "outcome": "ok"\|"failed"}`, on the caller's claimed thread (`service::progress`) |
//! | `GET /api/v1/activity?channel=NAME&since=DATE&weeks=N` | the activity figures of a channel, or of all the caller's (no `channel`), per week and since a date (`api::activity`) |
//! | `/api/v1/sessions…`, `POST /api/v1/join` | her sessions with her own agents and their commands (`api::sessions`) |
//! | `/api/v1/tool-checks…`, `/api/v1/confirmations…` | an agent's own tool calls checked, and her "allow once" (`api::tool_checks`) |
//! | `GET`/`POST /api/v1/connections` | her own agent connections: list, issue one (scope `human`, `api::connections`) |
//!
//! Decode, call the service, encode: no rule lives here. Errors have the admin API's shape.

mod activity;
mod connections;
mod member;
mod sessions;
mod tool_checks;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use crate::domain::{ApprovalId, Decision, DecisionPath};
use crate::http::{ApiResult, Authed};
use crate::service::{Service, ServiceError};

pub fn router(service: Service) -> Router {
    Router::new()
        .route("/api/v1/approvals", get(list))
        .route("/api/v1/approvals/{id}", get(show))
        .route("/api/v1/approvals/{id}/allow", post(allow))
        .route("/api/v1/approvals/{id}/reject", post(reject))
        .route("/api/v1/inbox", get(member::inbox))
        .route("/api/v1/threads/{id}", get(member::thread))
        .route("/api/v1/messages", post(member::post))
        .route("/api/v1/claims", post(member::claim))
        .route("/api/v1/progress", post(member::progress))
        .route("/api/v1/activity", get(activity::activity))
        .route(
            "/api/v1/connections",
            get(connections::list).post(connections::issue),
        )
        .route("/api/v1/sessions", get(sessions::list).post(sessions::open))
        .route("/api/v1/sessions/{id}", get(sessions::show))
        .route("/api/v1/sessions/{id}/commands", post(sessions::command))
        .route("/api/v1/sessions/{id}/code", post(sessions::code))
        .route("/api/v1/sessions/{id}/end", post(sessions::end))
        .route("/api/v1/join", post(sessions::join))
        .route(
            "/api/v1/tool-checks",
            post(tool_checks::check).get(tool_checks::settled),
        )
        .route("/api/v1/tool-checks/{id}", get(tool_checks::wait))
        .route(
            "/api/v1/tool-rules",
            get(tool_checks::rules).put(tool_checks::set_rules),
        )
        .route("/api/v1/confirmations", get(tool_checks::list))
        .route("/api/v1/confirmations/{id}", get(tool_checks::show))
        .route("/api/v1/confirmations/{id}/allow", post(tool_checks::allow))
        .route(
            "/api/v1/confirmations/{id}/reject",
            post(tool_checks::reject),
        )
        .layer(axum::middleware::from_fn(crate::http::storable_address))
        .with_state(service)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    #[serde(default)]
    pending: bool,
    before: Option<String>,
    limit: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct DecisionBody {
    reason: Option<String>,
    /// How the human reached this route: `api` (default) or `cli`, recorded in the audit log.
    via: Option<String>,
}

fn approval_id(id: &str) -> Result<ApprovalId, ServiceError> {
    // A malformed id is as unknown as a foreign one.
    ApprovalId::parse(id).map_err(|_| ServiceError::not_found("approval", id))
}

fn path_of(body: &DecisionBody) -> Result<DecisionPath, ServiceError> {
    match body.via.as_deref() {
        None | Some("api") => Ok(DecisionPath::Api),
        Some("cli") => Ok(DecisionPath::Cli),
        Some(other) => Err(ServiceError::invalid(format!(
            "via {other:?} is not a path of this route: use api or cli"
        ))),
    }
}

async fn list(
    State(s): State<Service>,
    Authed(c): Authed,
    Query(q): Query<ListQuery>,
) -> ApiResult<serde_json::Value> {
    let before = q.before.as_deref().map(approval_id).transpose()?;
    let page = s.approvals(&c, q.pending, before.as_ref(), q.limit).await?;
    Ok(Json(serde_json::to_value(page).unwrap_or_default()))
}

async fn show(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
) -> ApiResult<serde_json::Value> {
    // A confirmation of an agent's tool call (`tcf_…`): `liaison approvals show tcf_…`.
    if id.starts_with("tcf_") {
        let record = s
            .tool_confirmation(&c, &tool_checks::confirmation_id(&id)?)
            .await?;
        return Ok(Json(serde_json::json!({ "confirmation": record })));
    }
    let view = s.approval(&c, &approval_id(&id)?).await?;
    Ok(Json(serde_json::json!({ "approval": view })))
}

async fn decide(
    s: Service,
    c: crate::service::Caller,
    id: String,
    decision: Decision,
    body: Bytes,
) -> ApiResult<serde_json::Value> {
    // A confirmation of an agent's tool call (`tcf_…`) is decided where approvals are.
    if id.starts_with("tcf_") {
        return tool_checks::decide(&s, &c, &id, decision, &body, DecisionPath::Api).await;
    }
    // The body is optional for allow: empty means no reason and the `api` path.
    let body: DecisionBody = if body.iter().all(u8::is_ascii_whitespace) {
        DecisionBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ServiceError::invalid(format!("the body is not a decision: {e}")))?
    };
    let via = path_of(&body)?;
    let record = s
        .decide(&c, &approval_id(&id)?, decision, body.reason, via)
        .await?;
    Ok(Json(serde_json::json!({ "approval": record })))
}

async fn allow(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<serde_json::Value> {
    decide(s, c, id, Decision::Allow, body).await
}

async fn reject(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<serde_json::Value> {
    decide(s, c, id, Decision::Reject, body).await
}
