//! liaison's receiver for remote agents' push notifications (SPEC §8b): `POST
//! /remote/v1/push/{thread}`, given to a remote that liaison follows by push.
//!
//! A push is only a signal: it must carry the `X-A2A-Notification-Token` liaison gave for that
//! thread (compared in constant time; an unknown thread and a wrong token answer the same 401,
//! which also counts against the caller's address like any failed authentication). It then makes
//! the thread's task due, and the follower reads the task itself with `GetTask`: nothing in a
//! push body is taken as the task's content, so a forged or replayed body can change nothing.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use super::bridge::{PUSH_PATH, accept_push};
use crate::service::Service;

/// The receiver's routes.
pub fn router(service: Service) -> Router {
    Router::new()
        .route(&format!("{PUSH_PATH}/{{thread}}"), post(receive))
        .with_state(service)
}

async fn receive(
    State(service): State<Service>,
    Path(thread): Path<String>,
    headers: HeaderMap,
) -> Response {
    let token = headers
        .get("x-a2a-notification-token")
        .and_then(|v| v.to_str().ok());
    if accept_push(&service, &thread, token).await {
        StatusCode::NO_CONTENT.into_response()
    } else {
        (
            StatusCode::UNAUTHORIZED,
            axum::Json(serde_json::json!({
                "error": {
                    "code": "unauthenticated",
                    "message": "unknown task, or not the notification token liaison gave for it",
                }
            })),
        )
            .into_response()
    }
}
