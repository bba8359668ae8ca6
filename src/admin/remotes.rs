//! `/admin/v1/remotes`: register remote A2A agents from their Agent Card, list and show them
//! (never their credentials), fetch their card again, remove them.

use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use super::{ApiError, Authed, Body};
use crate::domain::PersonId;
use crate::service::{RefreshSpec, RemoteSpec, Service, ServiceError};

type ApiResult = Result<Json<Value>, ApiError>;

pub(super) fn router() -> Router<Service> {
    Router::new()
        .route("/admin/v1/remotes", get(list_remotes).post(add_remote))
        .route(
            "/admin/v1/remotes/{name}",
            get(show_remote).delete(remove_remote),
        )
        .route("/admin/v1/remotes/{name}/refresh", post(refresh_remote))
}

/// A name from the path; one that cannot be a person id names no remote.
fn name(raw: String) -> Result<PersonId, ApiError> {
    PersonId::parse(raw)
        .map_err(|_| ApiError(ServiceError::not_found("remote agent", "with that name")))
}

async fn add_remote(
    State(s): State<Service>,
    Authed(c): Authed,
    body: Body<RemoteSpec>,
) -> ApiResult {
    Ok(Json(json!({ "remote": s.add_remote(&c, body.0).await? })))
}

async fn list_remotes(State(s): State<Service>, Authed(c): Authed) -> ApiResult {
    Ok(Json(json!({ "remotes": s.list_remotes(&c).await? })))
}

async fn show_remote(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(raw): Path<String>,
) -> ApiResult {
    Ok(Json(
        json!({ "remote": s.show_remote(&c, &name(raw)?).await? }),
    ))
}

async fn refresh_remote(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(raw): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    // No body (or an empty one) is a plain refresh.
    let spec: RefreshSpec = if body.iter().all(u8::is_ascii_whitespace) {
        RefreshSpec::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError(ServiceError::invalid(format!(
                "invalid refresh request: {e}"
            )))
        })?
    };
    let report = s.refresh_remote(&c, &name(raw)?, spec).await?;
    Ok(Json(serde_json::to_value(report).unwrap_or_default()))
}

async fn remove_remote(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(raw): Path<String>,
) -> ApiResult {
    let name = name(raw)?;
    s.remove_remote(&c, &name).await?;
    Ok(Json(json!({ "removed": name })))
}
