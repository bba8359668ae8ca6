//! `/api/v1/sessions`: a person's sessions with her own agents (SPEC §4b), for the console's
//! equivalent in other applications — open one, write commands with their context, get the
//! join code, watch each command's lifecycle, end it — with a token of scope `human` (she, in
//! person); and `POST /api/v1/join` for an agent that does not speak MCP (scope `agent`). The
//! rules and the JSON's fields are `service::personal`'s.
//!
//! | route | does |
//! |---|---|
//! | `GET /api/v1/sessions` | her sessions, newest first |
//! | `POST /api/v1/sessions` (`{"connection", "title"}`, both optional) | opens one |
//! | `GET /api/v1/sessions/{id}` | one session with each command's timeline |
//! | `POST /api/v1/sessions/{id}/commands` (`{"instruction", "subject", "impact", "context": {"url", "selection", "surface", "captured_at"}, "expires_in_s", "idempotency_key"}`) | writes a command |
//! | `POST /api/v1/sessions/{id}/code` | a new single-use join code and its start prompt |
//! | `POST /api/v1/sessions/{id}/end` | ends it at once |
//! | `POST /api/v1/join` (`{"code"}`) | the MCP `join` tool |

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::Value;

use super::ApiResult;
use crate::domain::personal::SessionId;
use crate::http::{Authed, Body};
use crate::service::{CommandSpec, Service, ServiceError, SessionSpec};

fn session_id(id: &str) -> Result<SessionId, ServiceError> {
    // A malformed id is as unknown as a foreign one.
    SessionId::parse(id).map_err(|_| ServiceError::not_found("session", id))
}

fn json(v: impl serde::Serialize) -> Json<Value> {
    Json(serde_json::to_value(v).unwrap_or_default())
}

pub(super) async fn list(State(s): State<Service>, Authed(c): Authed) -> ApiResult<Value> {
    Ok(Json(
        serde_json::json!({ "sessions": s.sessions(&c).await? }),
    ))
}

pub(super) async fn open(
    State(s): State<Service>,
    Authed(c): Authed,
    Body(spec): Body<SessionSpec>,
) -> Result<(StatusCode, Json<Value>), crate::http::ApiError> {
    Ok((StatusCode::CREATED, json(s.open_session(&c, spec).await?)))
}

pub(super) async fn show(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
) -> ApiResult<Value> {
    Ok(json(s.session(&c, &session_id(&id)?).await?))
}

pub(super) async fn command(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
    Body(spec): Body<CommandSpec>,
) -> Result<(StatusCode, Json<Value>), crate::http::ApiError> {
    let receipt = s.command(&c, &session_id(&id)?, spec).await?;
    Ok((StatusCode::CREATED, json(receipt)))
}

pub(super) async fn code(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
) -> ApiResult<Value> {
    Ok(json(s.new_join_code(&c, &session_id(&id)?).await?))
}

pub(super) async fn end(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
) -> ApiResult<Value> {
    Ok(json(s.end_session(&c, &session_id(&id)?).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct JoinBody {
    code: String,
}

pub(super) async fn join(
    State(s): State<Service>,
    Authed(c): Authed,
    Body(b): Body<JoinBody>,
) -> ApiResult<Value> {
    Ok(json(s.join_session(&c, &b.code).await?))
}
