//! The JSON-RPC 2.0 binding over HTTP: `POST /a2a/jsonrpc` (with or without a trailing slash).
//! Checks the content type, the envelope, `A2A-Version` and the bearer token, then dispatches to
//! [`A2a`]. Errors are JSON-RPC error objects with HTTP 200, except authentication (HTTP 401 with
//! `WWW-Authenticate`). Streaming methods answer `text/event-stream`, one JSON-RPC response per event.

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt as _;
use serde_json::Value;
use serde_json::value::RawValue;

use super::handler::{A2a, Events};
use crate::service::ErrorCode;
use crate::wire::errors::{A2aError, ErrorKind};
use crate::wire::jsonrpc::{self, Method};
use crate::wire::{params, pb, protojson};

/// Where the binding is served (the card advertises `<public_url>` + this).
pub const PATH: &str = "/a2a/jsonrpc";

pub fn router(a2a: A2a) -> Router {
    Router::new()
        .route(PATH, post(endpoint))
        .route(&format!("{PATH}/"), post(endpoint))
        .with_state(a2a)
}

/// A JSON-RPC error for a request refused by a limit: HTTP 429, with `Retry-After` when known.
pub(crate) fn exhausted(id: &Value, e: &A2aError) -> Response {
    let mut r = json(StatusCode::TOO_MANY_REQUESTS, &jsonrpc::failure(id, e));
    if let Some(s) = e.retry_after_s() {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    r
}

/// A JSON response with this status.
fn json(status: StatusCode, value: &Value) -> Response {
    json_text(status, value.to_string())
}

/// [`json`] for a body already written as JSON text (shared with the HTTP+JSON binding).
pub(super) fn json_text(status: StatusCode, text: String) -> Response {
    let mut r = (status, text).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

async fn endpoint(
    State(a2a): State<A2a>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    // The credential is checked before the body is read, so that only an authenticated caller
    // can make the server buffer a large request; the answers keep the binding's order of checks.
    let auth = a2a
        .authenticate(crate::http::bearer(&headers).unwrap_or(""))
        .await;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    if let Err(e) = params::check_json_content_type(content_type) {
        return json(StatusCode::OK, &jsonrpc::failure(&Value::Null, &e));
    }
    let body = match (super::body::read_body(body, &auth).await, auth.as_ref()) {
        (Ok(b), _) => b,
        // Too much body without a valid credential: the credential's refusal answers.
        (Err(_), Err(refused)) => return auth_refusal(&Value::Null, refused.clone()),
        (Err(e), Ok(_)) => return json(StatusCode::OK, &jsonrpc::failure(&Value::Null, &e)),
    };
    let request = match jsonrpc::parse_request(&body) {
        Ok(r) => r,
        Err(rejected) => {
            return json(
                StatusCode::OK,
                &jsonrpc::failure(&rejected.id, &rejected.error),
            );
        }
    };
    let id = request.id.clone();
    if let Err(e) =
        params::check_version(params::requested_version(&headers, query.as_deref()).as_deref())
    {
        return json(StatusCode::OK, &jsonrpc::failure(&id, &e));
    }
    let caller = match auth {
        Ok(c) => c,
        Err(e) => return auth_refusal(&id, e),
    };
    if request.method.is_streaming() {
        let events = match request.method {
            Method::SendStreamingMessage => {
                match jsonrpc::decode_params::<pb::SendMessageRequest>(&request.params) {
                    Ok(p) => a2a.send_streaming(&caller, p).await,
                    Err(e) => Err(e),
                }
            }
            _ => match jsonrpc::decode_params::<pb::SubscribeToTaskRequest>(&request.params) {
                Ok(p) => a2a.subscribe(&caller, p).await,
                Err(e) => Err(e),
            },
        };
        return match events {
            Ok(events) => sse(id, events),
            Err(e) if e.kind == ErrorKind::ResourceExhausted => exhausted(&id, &e),
            Err(e) => json(StatusCode::OK, &jsonrpc::failure(&id, &e)),
        };
    }
    let result = dispatch(&a2a, &caller, request.method, request.params).await;
    match result {
        Ok(result) => json_text(StatusCode::OK, jsonrpc::success_text(&id, &result)),
        Err(e) => json(StatusCode::OK, &jsonrpc::failure(&id, &e)),
    }
}

/// The answer to a refused credential: 429 when rate-limited, 401 with the challenge when not
/// authenticated (as on the HTTP+JSON binding), else the table's error.
fn auth_refusal(id: &Value, e: crate::service::ServiceError) -> Response {
    if e.code == ErrorCode::RateLimited {
        return exhausted(id, &e.into());
    }
    let error = A2aError::from(e);
    if error.kind != ErrorKind::Unauthenticated {
        return json(StatusCode::OK, &jsonrpc::failure(id, &error));
    }
    let mut r = json(StatusCode::UNAUTHORIZED, &jsonrpc::failure(id, &error));
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}

/// The result of a method that answers once, as JSON text.
async fn dispatch(
    a2a: &A2a,
    caller: &crate::service::Caller,
    method: Method,
    params: Box<RawValue>,
) -> Result<String, A2aError> {
    use jsonrpc::decode_params as p;
    Ok(match method {
        Method::SendMessage => {
            protojson::render_text(&a2a.send_message(caller, p(&params)?).await?)
        }
        Method::GetTask => protojson::render_text(&a2a.get_task(caller, p(&params)?).await?),
        Method::ListTasks => protojson::render_text(&a2a.list_tasks(caller, p(&params)?).await?),
        Method::CancelTask => protojson::render_text(&a2a.cancel_task(caller, p(&params)?).await?),
        Method::CreateTaskPushNotificationConfig => {
            protojson::render_text(&a2a.create_push_config(caller, p(&params)?).await?)
        }
        Method::GetTaskPushNotificationConfig => {
            protojson::render_text(&a2a.get_push_config(caller, p(&params)?).await?)
        }
        Method::ListTaskPushNotificationConfigs => {
            protojson::render_text(&a2a.list_push_configs(caller, p(&params)?).await?)
        }
        Method::DeleteTaskPushNotificationConfig => {
            a2a.delete_push_config(caller, p(&params)?).await?;
            "{}".to_owned()
        }
        Method::GetExtendedAgentCard => {
            protojson::render_text(&a2a.extended_card(caller, p(&params)?).await?)
        }
        Method::SendStreamingMessage | Method::SubscribeToTask => {
            unreachable!("streaming methods are answered as SSE")
        }
    })
}

/// One SSE event per stream response, each a JSON-RPC response with the request's id.
fn sse(id: Value, events: Events) -> Response {
    super::sse::response(events.map(move |item| match item {
        Ok(response) => jsonrpc::success(&id, protojson::render(&response)),
        Err(e) => jsonrpc::failure(&id, &e),
    }))
}
