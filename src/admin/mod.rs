//! The admin HTTP API under `/admin/v1` (scope `admin`).
//!
//! Decode, call the service, encode: no rule lives here.

mod keys;
mod oauth;
mod outbox;
mod remotes;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;

use crate::domain::{ApprovalPolicy, ChannelName, PersonId, PersonKind, PolicyChange};
use crate::http::{ApiError, ApiResult, Authed, Body};
use crate::service::{
    AddedParty, AuditQuery, ChannelSpec, ErrorCode, ListQuery, Listed, MemberChange, PartySpec,
    Service, ServiceError, TokenSpec,
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

/// A search of a list, a page at a time (`q`, a kind or state, `page` from 1, `per_page` up to
/// 200, 50 by default): what the console's lists send. Without any of them a list answers whole,
/// as before these existed.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Search {
    q: Option<String>,
    kind: Option<String>,
    state: Option<String>,
    person: Option<PersonId>,
    page: Option<i64>,
    per_page: Option<i64>,
}

/// Rows a page holds when the search does not say.
const PER_PAGE: i64 = 50;

impl Search {
    /// The search asked for, if any: its text, its filter, and which page.
    fn paged(&self, filter: Option<&String>) -> Option<ListQuery> {
        let asked =
            self.q.is_some() || filter.is_some() || self.page.is_some() || self.per_page.is_some();
        asked.then(|| ListQuery {
            text: self.q.clone(),
            filter: filter.cloned(),
            page: self.page.unwrap_or(1),
            per_page: self.per_page.unwrap_or(PER_PAGE),
        })
    }
}

/// The query string, or the reason it is refused (an unknown parameter, a page not a number).
fn search(q: Result<Query<Search>, QueryRejection>) -> Result<Search, ApiError> {
    q.map(|q| q.0)
        .map_err(|e| ApiError(ServiceError::invalid(e.body_text())))
}

/// One page of a list as the API answers it: the rows under `key`, the page, and the next
/// page's number while another follows (else null).
fn listed<T: serde::Serialize>(key: &str, q: &ListQuery, l: Listed<T>) -> serde_json::Value {
    let mut answer =
        serde_json::json!({ "page": q.page, "next_page": l.more.then_some(q.page + 1) });
    answer[key] = serde_json::to_value(l.items).unwrap_or_default();
    answer
}

async fn list_persons(
    State(s): State<Service>,
    Authed(c): Authed,
    q: Result<Query<Search>, QueryRejection>,
) -> ApiResult<serde_json::Value> {
    let q = search(q)?;
    if q.state.is_some() || q.person.is_some() {
        return Err(ServiceError::invalid("people are searched by q, kind and page").into());
    }
    match q.paged(q.kind.as_ref()) {
        Some(asked) => Ok(Json(listed(
            "persons",
            &asked,
            s.search_persons(&c, &asked).await?,
        ))),
        None => Ok(Json(
            serde_json::json!({ "persons": s.list_persons(&c).await? }),
        )),
    }
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

async fn list_tokens(
    State(s): State<Service>,
    Authed(c): Authed,
    q: Result<Query<Search>, QueryRejection>,
) -> ApiResult<serde_json::Value> {
    let q = search(q)?;
    if q.kind.is_some() {
        return Err(ServiceError::invalid("tokens are searched by q, state and page").into());
    }
    match q.paged(q.state.as_ref()) {
        Some(_) if q.person.is_some() => Err(ServiceError::invalid(
            "give person (all of one person's tokens) or a search, not both",
        )
        .into()),
        Some(asked) => Ok(Json(listed(
            "tokens",
            &asked,
            s.search_tokens(&c, &asked).await?,
        ))),
        None => Ok(Json(
            serde_json::json!({ "tokens": s.list_tokens(&c, q.person.as_ref()).await? }),
        )),
    }
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
