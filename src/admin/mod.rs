//! The admin HTTP API under `/admin/v1` (scope `admin`).
//!
//! Decode, call the service, encode: no rule lives here.

mod keys;
mod oauth;
mod outbox;
mod remotes;

use axum::extract::{Path, Query, State};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;

use crate::domain::{ApprovalPolicy, ChannelName, PersonId, PersonKind, PolicyChange};
use crate::http::{ApiError, ApiResult, Authed, Body};
use crate::service::{
    AddedParty, AuditQuery, ChannelSpec, ErrorCode, MemberChange, PartySpec, Service, ServiceError,
    TokenSpec,
};

pub fn router(service: Service) -> Router {
    Router::new()
        .route("/admin/v1/persons", get(list_persons).post(add_person))
        .route("/admin/v1/persons/{id}", delete(remove_person))
        .route("/admin/v1/parties", get(list_parties).post(add_party))
        .route("/admin/v1/parties/{id}", delete(remove_party))
        .route("/admin/v1/tokens", get(list_tokens).post(issue_token))
        .route("/admin/v1/tokens/{id}", delete(revoke_token))
        .route("/admin/v1/channels", get(list_channels).post(add_channel))
        .route("/admin/v1/channels/{name}", delete(remove_channel))
        .route("/admin/v1/channels/{name}/members", post(change_members))
        .route(
            "/admin/v1/channels/{name}/policy",
            axum::routing::put(set_policy).patch(change_policy),
        )
        .route("/admin/v1/audit", get(audit))
        .route("/admin/v1/audit/export", get(audit_export))
        .merge(keys::router())
        .merge(oauth::router())
        .merge(outbox::router())
        .merge(remotes::router())
        .layer(axum::middleware::from_fn(crate::http::storable_address))
        .with_state(service)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewPerson {
    id: PersonId,
    #[serde(default = "member")]
    kind: PersonKind,
    display_name: String,
}

fn member() -> PersonKind {
    PersonKind::Member
}

async fn add_person(
    State(s): State<Service>,
    Authed(c): Authed,
    body: Body<NewPerson>,
) -> ApiResult<serde_json::Value> {
    let p = s
        .add_person(&c, body.0.id, body.0.kind, body.0.display_name)
        .await?;
    Ok(Json(serde_json::json!({ "person": p })))
}

async fn list_persons(State(s): State<Service>, Authed(c): Authed) -> ApiResult<serde_json::Value> {
    Ok(Json(
        serde_json::json!({ "persons": s.list_persons(&c).await? }),
    ))
}

async fn remove_person(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
) -> ApiResult<serde_json::Value> {
    let id = PersonId::parse(id)
        .map_err(|_| ServiceError::new(ErrorCode::NotFound, "no such person"))?;
    s.remove_person(&c, &id).await?;
    Ok(Json(serde_json::json!({ "removed": id })))
}

async fn remove_party(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
) -> ApiResult<serde_json::Value> {
    let id =
        PersonId::parse(id).map_err(|_| ServiceError::new(ErrorCode::NotFound, "no such party"))?;
    s.remove_party(&c, &id).await?;
    Ok(Json(serde_json::json!({ "removed": id })))
}

async fn add_party(
    State(s): State<Service>,
    Authed(c): Authed,
    body: Body<PartySpec>,
) -> ApiResult<AddedParty> {
    Ok(Json(s.add_party(&c, body.0).await?))
}

async fn list_parties(State(s): State<Service>, Authed(c): Authed) -> ApiResult<serde_json::Value> {
    Ok(Json(
        serde_json::json!({ "parties": s.list_parties(&c).await? }),
    ))
}

async fn issue_token(
    State(s): State<Service>,
    Authed(c): Authed,
    body: Body<TokenSpec>,
) -> ApiResult<serde_json::Value> {
    Ok(Json(
        serde_json::json!({ "token": s.issue_token(&c, body.0).await? }),
    ))
}

#[derive(Deserialize)]
struct TokenFilter {
    person: Option<PersonId>,
}

async fn list_tokens(
    State(s): State<Service>,
    Authed(c): Authed,
    q: Query<TokenFilter>,
) -> ApiResult<serde_json::Value> {
    Ok(Json(
        serde_json::json!({ "tokens": s.list_tokens(&c, q.0.person.as_ref()).await? }),
    ))
}

async fn revoke_token(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
) -> ApiResult<serde_json::Value> {
    s.revoke_token(&c, &id).await?;
    Ok(Json(serde_json::json!({ "revoked": id })))
}

async fn add_channel(
    State(s): State<Service>,
    Authed(c): Authed,
    body: Body<ChannelSpec>,
) -> ApiResult<serde_json::Value> {
    Ok(Json(
        serde_json::json!({ "channel": s.add_channel(&c, body.0).await? }),
    ))
}

async fn list_channels(
    State(s): State<Service>,
    Authed(c): Authed,
) -> ApiResult<serde_json::Value> {
    Ok(Json(
        serde_json::json!({ "channels": s.list_all_channels(&c).await? }),
    ))
}

fn channel_name(name: String) -> Result<ChannelName, ServiceError> {
    ChannelName::parse(name).map_err(|_| ServiceError::new(ErrorCode::NotFound, "no such channel"))
}

async fn change_members(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(name): Path<String>,
    body: Body<MemberChange>,
) -> ApiResult<serde_json::Value> {
    Ok(Json(
        serde_json::json!({ "channel": s.change_members(&c, &channel_name(name)?, body.0).await? }),
    ))
}

async fn remove_channel(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(name): Path<String>,
) -> ApiResult<serde_json::Value> {
    let name = channel_name(name)?;
    s.remove_channel(&c, &name).await?;
    Ok(Json(serde_json::json!({ "removed": name })))
}

async fn audit(
    State(s): State<Service>,
    Authed(c): Authed,
    q: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<serde_json::Value> {
    let q = q.map_err(|e| ServiceError::invalid(e.body_text()))?.0;
    let page = s.audit_page(&c, &q).await?;
    Ok(Json(serde_json::to_value(page).unwrap_or_default()))
}

/// Every entry the filter selects, oldest first, as JSON lines (`application/jsonl`), read a
/// page at a time while the body streams.
async fn audit_export(
    State(s): State<Service>,
    Authed(c): Authed,
    q: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<axum::response::Response, ApiError> {
    let q = q.map_err(|e| ServiceError::invalid(e.body_text()))?.0;
    Ok(crate::http::audit_lines(s, c, q).await?)
}

async fn set_policy(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(name): Path<String>,
    body: Body<ApprovalPolicy>,
) -> ApiResult<serde_json::Value> {
    Ok(Json(
        serde_json::json!({ "channel": s.set_policy(&c, &channel_name(name)?, body.0).await? }),
    ))
}

async fn change_policy(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(name): Path<String>,
    body: Body<PolicyChange>,
) -> ApiResult<serde_json::Value> {
    Ok(Json(
        serde_json::json!({ "channel": s.change_policy(&c, &channel_name(name)?, body.0).await? }),
    ))
}
