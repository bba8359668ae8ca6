//! `/admin/v1/keys` (scope `admin`): list the signing keys, rotate, retire one.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{KeyManager, KeysError};
use crate::domain::Scope;
use crate::http::{ApiError, authenticate};
use crate::service::{ErrorCode, Service, ServiceError};

#[derive(Clone)]
struct Keys {
    service: Service,
    manager: Arc<KeyManager>,
}

pub fn router(service: Service, manager: Arc<KeyManager>) -> Router {
    Router::new()
        .route("/admin/v1/keys", get(list))
        .route("/admin/v1/keys/rotate", post(rotate))
        .route("/admin/v1/keys/{kid}/retire", post(retire))
        .with_state(Keys { service, manager })
}

async fn admin(k: &Keys, headers: &HeaderMap) -> Result<(), ApiError> {
    let caller = authenticate(&k.service, headers).await?;
    if !caller.scopes.contains(Scope::Admin) {
        return Err(ApiError(ServiceError::forbidden(
            "this needs a token with scope `admin`",
        )));
    }
    Ok(())
}

fn error(e: KeysError) -> ApiError {
    ApiError(match e {
        KeysError::Retire(crate::keys::ring::RetireError::Unknown) => {
            ServiceError::new(ErrorCode::NotFound, "no signing key has this kid")
        }
        KeysError::Retire(r) => ServiceError::invalid(r.to_string()),
        KeysError::Invalid(m) => ServiceError::invalid(m),
        KeysError::Other(e) => {
            tracing::error!(error = %e, "A key operation failed.");
            ServiceError::new(ErrorCode::Internal, "internal error")
        }
    })
}

async fn list(State(k): State<Keys>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    admin(&k, &headers).await?;
    let keys = k.manager.list().await.map_err(|e| error(e.into()))?;
    Ok(Json(json!({ "keys": keys })))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RotateRequest {
    /// How long the previous keys keep co-signing, in seconds (default 7 days).
    overlap_s: Option<i64>,
}

async fn rotate(
    State(k): State<Keys>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    admin(&k, &headers).await?;
    let request: RotateRequest = if body.iter().all(u8::is_ascii_whitespace) {
        RotateRequest::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError(ServiceError::invalid(format!("invalid JSON body: {e}"))))?
    };
    let overlap = request.overlap_s.map_or(
        crate::keys::ring::ROTATION_OVERLAP,
        chrono::TimeDelta::seconds,
    );
    let key = k.manager.rotate(overlap).await.map_err(error)?;
    let keys = k.manager.list().await.map_err(|e| error(e.into()))?;
    Ok(Json(json!({ "rotated_to": key, "keys": keys })))
}

async fn retire(
    State(k): State<Keys>,
    headers: HeaderMap,
    Path(kid): Path<String>,
) -> Result<Json<Value>, ApiError> {
    admin(&k, &headers).await?;
    k.manager.retire(&kid).await.map_err(error)?;
    let keys = k.manager.list().await.map_err(|e| error(e.into()))?;
    Ok(Json(json!({ "retired": kid, "keys": keys })))
}
