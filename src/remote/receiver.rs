//! liaison's receiver for remote agents' push notifications (SPEC §8b): `POST
//! /remote/v1/push/{thread}`, given to a remote that liaison follows by push.
//!
//! A push is only a signal: it must carry the `X-A2A-Notification-Token` liaison gave for that
//! thread (compared in constant time; an unknown thread and a wrong token answer the same 401,
//! which also counts against the caller's address like any failed authentication). It then makes
//! the thread's task due, and the follower reads the task itself with `GetTask`. Of the body (at
//! most 1 MiB), only a progress note is taken: a WORKING status with text, about the thread's
//! current task, becomes the remote agent's `announce`; everything else comes from `GetTask`.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use super::bridge::{PUSH_PATH, accept_push};
use crate::service::Service;

/// The largest push body read (a progress note; the task itself is read with `GetTask`).
const MAX_PUSH_BYTES: usize = 1024 * 1024;

/// The receiver's routes.
pub fn router(service: Service) -> Router {
    Router::new()
        .route(&format!("{PUSH_PATH}/{{thread}}"), post(receive))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_PUSH_BYTES))
        .with_state(service)
}

async fn receive(
    State(service): State<Service>,
    Path(thread): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let token = headers
        .get("x-a2a-notification-token")
        .and_then(|v| v.to_str().ok());
    if accept_push(&service, &thread, token, &body).await {
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
