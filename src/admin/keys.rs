//! `/admin/v1/keys` (scope `admin`): list the signing keys, rotate, retire one. Decode, call the
//! service (`service/keys.rs` holds the rules), encode.

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::{ApiError, Authed};
use crate::service::{Service, ServiceError};

pub(super) fn router() -> Router<Service> {
    Router::new()
        .route("/admin/v1/keys", get(list))
        .route("/admin/v1/keys/rotate", post(rotate))
        .route("/admin/v1/keys/{kid}/retire", post(retire))
}

/// The key set (`keys`), and the keys retired lately (`retired`, newest first, each listed for
/// a while after it left the set, as the console lists them).
async fn list(State(s): State<Service>, Authed(c): Authed) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        json!({ "keys": s.keys(&c).await?, "retired": s.retired_keys(&c).await? }),
    ))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RotateRequest {
    /// How long the previous keys keep co-signing, in seconds (default 7 days).
    overlap_s: Option<i64>,
}

async fn rotate(
    State(s): State<Service>,
    Authed(c): Authed,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let request: RotateRequest = if body.iter().all(u8::is_ascii_whitespace) {
        RotateRequest::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError(ServiceError::invalid(format!("invalid JSON body: {e}"))))?
    };
    let key = s.rotate_keys(&c, request.overlap_s).await?;
    Ok(Json(
        json!({ "rotated_to": key, "keys": s.keys(&c).await? }),
    ))
}

async fn retire(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(kid): Path<String>,
) -> Result<Json<Value>, ApiError> {
    s.retire_key(&c, &kid).await?;
    Ok(Json(json!({ "retired": kid, "keys": s.keys(&c).await? })))
}
