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

use crate::domain::{RemoteState, ThreadId, Timestamp};
use crate::http::ApiError;
use crate::remote::PUSH_PATH;
use crate::remote::observe::{PUSH_SAFETY, ms, state_of, status_update};
use crate::service::{ErrorCode, Service, ServiceError};

/// The header a push carries the notification token liaison gave for the task in.
pub const NOTIFICATION_TOKEN: &str = "x-a2a-notification-token";
use crate::wire::pb;

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
        .get(NOTIFICATION_TOKEN)
        .and_then(|v| v.to_str().ok());
    if accept_push(&service, &thread, token, &body).await {
        StatusCode::NO_CONTENT.into_response()
    } else {
        ApiError(ServiceError::new(
            ErrorCode::Unauthenticated,
            "unknown task, or not the notification token liaison gave for it",
        ))
        .into_response()
    }
}

/// What the push receiver does with a push: checks that the thread is delegated and the token is
/// the one liaison gave (unknown threads and wrong tokens look the same: `false`), then posts a
/// progress note the push carries (a WORKING status with text, of the thread's current task) and
/// makes the task due, so the follower reads the whole task with `GetTask`. Nothing but a progress
/// note is taken from the body.
async fn accept_push(service: &Service, thread: &str, token: Option<&str>, body: &[u8]) -> bool {
    let (Ok(thread), Some(token)) = (ThreadId::parse(thread), token) else {
        return false;
    };
    if !matches!(service.remote_push_token_ok(&thread, token).await, Ok(true)) {
        return false;
    }
    if let Ok(event) = serde_json::from_slice::<pb::StreamResponse>(body)
        && let Some(pb::stream_response::Payload::StatusUpdate(u)) = event.payload
        && let Some(status) = &u.status
        && state_of(status.state) == Some(RemoteState::Working)
        && let Ok(update) = status_update(&u.task_id, status)
        && !update.text.trim().is_empty()
    {
        let next = Timestamp(service.clock_now().0 + ms(PUSH_SAFETY));
        // A note about another task than the thread's current one changes nothing.
        let _ = service.remote_observed(&thread, update, next, 0).await;
    }
    service.remote_nudge(&thread).await.is_ok()
}
