//! The admin routes of OAuth clients (SPEC §7): list them, remove one (which revokes its
//! grants and ends their sessions). Decode, call the service, encode.
//!
//! | route | does |
//! |---|---|
//! | `GET /admin/v1/oauth/clients` | the clients, newest first |
//! | `DELETE /admin/v1/oauth/clients/{id}` | removes one (a metadata document URL percent-encoded) |

use axum::extract::{Path, State};
use axum::routing::{delete, get};
use axum::{Json, Router};

use crate::http::{ApiResult, Authed};
use crate::service::Service;

pub(super) fn router() -> Router<Service> {
    Router::new()
        .route("/admin/v1/oauth/clients", get(list))
        .route("/admin/v1/oauth/clients/{id}", delete(remove))
}

async fn list(State(s): State<Service>, Authed(c): Authed) -> ApiResult<serde_json::Value> {
    Ok(Json(
        serde_json::json!({ "clients": s.oauth_clients(&c).await? }),
    ))
}

async fn remove(
    State(s): State<Service>,
    Authed(c): Authed,
    Path(id): Path<String>,
) -> ApiResult<serde_json::Value> {
    s.remove_oauth_client(&c, &id).await?;
    Ok(Json(serde_json::json!({ "removed": id })))
}
