//! The member routes of `/api/v1`: the inbox, a thread, posting and claiming, for a person's own
//! token (scope `agent`). The same service calls as the MCP tools of the same names, with the same
//! argument shapes (`crate::mcp::args`), so a script and an agent see one behaviour. The agent
//! identity a claim needs comes from the `Liaison-Agent` header or the body's `agent`.
//!
//! | route | does |
//! |---|---|
//! | `GET /api/v1/inbox?consumer=C&after=N&limit=L&wait_s=S&session=ID` | the MCP `inbox` tool |
//! | `GET /api/v1/threads/{id}?cursor=N&limit=L` | the MCP `thread` tool |
//! | `POST /api/v1/messages` (the `post` tool's arguments) | the MCP `post` tool |
//! | `POST /api/v1/claims` (`{"thread", "action", "lease_s", "fencing_token", "agent"}`) | the MCP `claim` tool |

use axum::Json;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::ApiResult;
use crate::domain::personal::SessionId;
use crate::domain::{AgentIdentity, ThreadId};
use crate::http::{ApiError, Authed, Body};
use crate::mcp::args::{ClaimActionArg, ClaimArgs, PostArgs};
use crate::service::{Caller, ClaimAction, ClaimTarget, InboxRequest, Service, ServiceError};

/// A query string whose rejections come back in the API's error shape with `invalid_input`.
pub(super) struct Params<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(Params(v)),
            Err(rejection) => Err(ApiError(ServiceError::invalid(rejection.body_text()))),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct InboxQuery {
    consumer: String,
    after: Option<i64>,
    limit: Option<i64>,
    wait_s: Option<u64>,
    session: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ThreadQuery {
    cursor: Option<i64>,
    limit: Option<i64>,
}

pub(super) async fn inbox(
    State(s): State<Service>,
    Authed(c): Authed,
    Params(q): Params<InboxQuery>,
) -> ApiResult<Value> {
    let session = match q.session {
        // A malformed id is as unknown as a foreign one.
        Some(s) => {
            Some(SessionId::parse(s.as_str()).map_err(|_| ServiceError::not_found("session", &s))?)
        }
        None => None,
    };
    let req = InboxRequest {
        session,
        consumer: q.consumer,
        after: q.after,
        limit: q.limit,
        wait_s: q.wait_s,
    };
    // A client gone mid-wait drops this future: nothing new is acknowledged.
    let page = s.inbox(&c, req).await?;
    Ok(Json(serde_json::to_value(page).unwrap_or_default()))
}

pub(super) async fn thread(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
    Params(q): Params<ThreadQuery>,
) -> ApiResult<Value> {
    let id = ThreadId::parse(id).map_err(ServiceError::from)?;
    let view = s.thread(&c, &id, q.cursor, q.limit).await?;
    let mut value = serde_json::to_value(&view).unwrap_or_default();
    // The same shape as the MCP tool: the cursor as a string.
    value["next_cursor"] = json!(view.next_cursor.map(|n| n.to_string()));
    Ok(Json(value))
}

/// The caller, with the body's agent identity when it declares one.
fn declaring(c: Caller, agent: Option<String>) -> Result<Caller, ServiceError> {
    match agent {
        Some(agent) => Ok(c.declaring(Some(AgentIdentity::parse(agent)?))),
        None => Ok(c),
    }
}

pub(super) async fn post(
    State(s): State<Service>,
    Authed(c): Authed,
    Body(mut args): Body<PostArgs>,
) -> ApiResult<Value> {
    let c = declaring(c, args.agent.take())?;
    let receipt = s.post(&c, args.into_request()?).await?;
    Ok(Json(serde_json::to_value(receipt).unwrap_or_default()))
}

pub(super) async fn claim(
    State(s): State<Service>,
    Authed(c): Authed,
    Body(args): Body<ClaimArgs>,
) -> ApiResult<Value> {
    let c = declaring(c, args.agent)?;
    let target = match args.thread.as_str() {
        "next" if args.action == ClaimActionArg::Claim => ClaimTarget::Next,
        "next" => {
            return Err(ServiceError::invalid("give the thread id to renew or release").into());
        }
        id => ClaimTarget::Thread(ThreadId::parse(id).map_err(ServiceError::from)?),
    };
    let action = match args.action {
        ClaimActionArg::Claim | ClaimActionArg::Renew => ClaimAction::Claim,
        ClaimActionArg::Release => ClaimAction::Release,
    };
    let claim = s
        .claim_fenced(&c, target, action, args.lease_s, args.fencing_token)
        .await?;
    Ok(Json(json!({ "claim": claim })))
}

/// `POST /api/v1/progress`: what `liaison hook tool-use` reports (a tool, its target, ok or
/// failed), added to the thread the caller's session holds the claim on.
pub(super) async fn progress(
    State(s): State<Service>,
    Authed(c): Authed,
    Body(report): Body<crate::service::ProgressReport>,
) -> ApiResult<Value> {
    let outcome = s.report_progress(&c, report).await?;
    Ok(Json(serde_json::to_value(outcome).unwrap_or_default()))
}
