//! The HTTP+JSON binding: the proto's REST routes under `/a2a/rest`, also with a `/{tenant}` segment
//! after that prefix (the tenant is accepted and ignored: liaison has one tenant per deployment).
//! Errors are AIP-193 bodies with the table's HTTP status; streams are SSE with one
//! `StreamResponse` per event.
//!
//! Paths such as `/tasks/{id}:cancel` put a literal after a variable in one segment, which the
//! router cannot express, so one catch-all route parses the path here.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use axum::routing::any;
use futures::StreamExt as _;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::handler::{A2a, Events};
use super::rpc::json_text;
use crate::service::Caller;
use crate::wire::errors::{A2aError, ErrorKind, SpecVersion};
use crate::wire::{params, pb, protojson, query};

/// Where the binding is served (the card advertises `<public_url>` + this).
pub const PATH: &str = "/a2a/rest";

/// What a request asks for, once the path is parsed.
enum Route {
    Send,
    Stream,
    ListTasks,
    GetTask(String),
    Cancel(String),
    Subscribe(String),
    PushConfigs(String),
    PushConfig(String, String),
    ExtendedCard,
}

pub fn router(a2a: A2a) -> Router {
    Router::new()
        .route(&format!("{PATH}/{{*path}}"), any(endpoint))
        .with_state(a2a)
}

fn error(a2a: &A2a, e: &A2aError) -> Response {
    let (status, body) = e.rest_error(a2a.version());
    let mut r = respond(a2a, status, &body);
    if let Some(s) = e.retry_after_s() {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    r
}

/// A JSON response in the configured media type (`a2a.rest_content_type`).
fn respond(a2a: &A2a, status: StatusCode, value: &Value) -> Response {
    respond_text(a2a, status, value.to_string())
}

/// [`respond`] for a body already written as JSON text.
fn respond_text(a2a: &A2a, status: StatusCode, text: String) -> Response {
    let mut r = json_text(status, text);
    r.headers_mut()
        .insert(header::CONTENT_TYPE, a2a.rest_content_type().clone());
    r
}

/// A refused credential: the table's error, with the `WWW-Authenticate` challenge on a 401.
fn auth_failure(a2a: &A2a, e: &A2aError) -> Response {
    let mut r = error(a2a, e);
    if e.kind == ErrorKind::Unauthenticated {
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    r
}

fn not_found() -> A2aError {
    A2aError::new(
        ErrorKind::MethodNotFound,
        "no such route in the A2A HTTP+JSON binding",
    )
}

/// Parses the path (after `/a2a/rest/`) and method into a route. The path is read as it is
/// first, then with its first segment taken as the tenant: a tenant is an opaque string, so one
/// that looks like a route's start (`tasks-eu`, `message`) is still a tenant. Only a path that
/// reads as a route both ways (e.g. `tasks/tasks`) is taken without a tenant.
fn route(method: &Method, path: &str) -> Result<Route, A2aError> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match_route(method, &segments)
        .or_else(|| match_route(method, segments.get(1..)?))
        .ok_or_else(not_found)
}

/// The route of a path without a tenant, if it is one.
fn match_route(method: &Method, segments: &[&str]) -> Option<Route> {
    let get = method == Method::GET;
    let post = method == Method::POST;
    Some(match (segments, get, post) {
        (["message:send"], _, true) => Route::Send,
        (["message:stream"], _, true) => Route::Stream,
        (["tasks"], true, _) => Route::ListTasks,
        (["extendedAgentCard"], true, _) => Route::ExtendedCard,
        (["tasks", id], _, _) => match id.rsplit_once(':') {
            Some((id, "cancel")) if post => Route::Cancel(id.to_owned()),
            Some((id, "subscribe")) if get || post => Route::Subscribe(id.to_owned()),
            None if get => Route::GetTask((*id).to_owned()),
            _ => return None,
        },
        (["tasks", id, "pushNotificationConfigs"], _, _) if get || post => {
            Route::PushConfigs((*id).to_owned())
        }
        (["tasks", id, "pushNotificationConfigs", config], _, _)
            if get || method == Method::DELETE =>
        {
            Route::PushConfig((*id).to_owned(), (*config).to_owned())
        }
        _ => return None,
    })
}

fn body_of<T: DeserializeOwned + Default>(
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<T, A2aError> {
    if body.is_empty() {
        return Ok(T::default());
    }
    params::check_json_content_type(
        headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
    )?;
    decode_body(body)
}

/// A JSON body as the request `T`: a body that is not JSON is a parse error; JSON whose fields do
/// not fit the request is InvalidParams, as the same params are over JSON-RPC. The syntax is
/// checked over the whole body first, so a misfit early in a body that is cut short later is still
/// a parse error.
fn decode_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, A2aError> {
    serde_json::from_slice::<serde::de::IgnoredAny>(body)
        .map_err(|e| A2aError::new(ErrorKind::ParseError, format!("Invalid JSON body: {e}")))?;
    serde_json::from_slice(body)
        .map_err(|e| A2aError::new(ErrorKind::InvalidParams, format!("Invalid params: {e}")))
}

async fn endpoint(
    State(a2a): State<A2a>,
    Path(path): Path<String>,
    uri: axum::http::Uri,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    // The credential is checked before the body is read: see the JSON-RPC binding.
    let auth = a2a
        .authenticate(crate::http::bearer(&headers).unwrap_or(""))
        .await;
    let body = match super::body::read_body(body, &auth).await {
        Ok(b) => b,
        // A refused credential's error when it read too much body without one.
        Err(e) => return auth_failure(&a2a, &e),
    };
    let route = match route(&method, &path) {
        Ok(r) => r,
        Err(e) => return error(&a2a, &e),
    };
    if let Err(e) =
        params::check_version(params::requested_version(&headers, uri.query()).as_deref())
    {
        return error(&a2a, &e);
    }
    let caller = match auth {
        Ok(c) => c,
        Err(e) => return auth_failure(&a2a, &e.into()),
    };
    match handle(&a2a, &caller, route, &uri, &method, &headers, &body).await {
        Ok(Reply::Json(text)) => respond_text(&a2a, StatusCode::OK, text),
        Ok(Reply::Stream(events)) => sse(events, a2a.version()),
        Err(e) => error(&a2a, &e),
    }
}

enum Reply {
    /// The answer's JSON text.
    Json(String),
    Stream(Events),
}

async fn handle(
    a2a: &A2a,
    caller: &Caller,
    route: Route,
    uri: &axum::http::Uri,
    method: &Method,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Reply, A2aError> {
    let render = |text: String| Ok(Reply::Json(text));
    match route {
        Route::Send => {
            let response = a2a.send_message(caller, body_of(headers, body)?).await?;
            render(protojson::render_text(&response))
        }
        Route::Stream => Ok(Reply::Stream(
            a2a.send_streaming(caller, body_of(headers, body)?).await?,
        )),
        Route::ListTasks => render(protojson::render_text(
            &a2a.list_tasks(caller, query::from_uri(uri, &[])?).await?,
        )),
        Route::GetTask(id) => render(protojson::render_text(
            &a2a.get_task(caller, query::from_uri(uri, &[("id", &id)])?)
                .await?,
        )),
        Route::Cancel(id) => {
            let mut req: pb::CancelTaskRequest = body_of(headers, body)?;
            req.id = id;
            render(protojson::render_text(&a2a.cancel_task(caller, req).await?))
        }
        Route::Subscribe(id) => {
            let req = pb::SubscribeToTaskRequest {
                tenant: String::new(),
                id,
            };
            Ok(Reply::Stream(a2a.subscribe(caller, req).await?))
        }
        Route::PushConfigs(task) if method == Method::POST => {
            let mut c: pb::TaskPushNotificationConfig = body_of(headers, body)?;
            c.task_id = task;
            render(protojson::render_text(
                &a2a.create_push_config(caller, c).await?,
            ))
        }
        Route::PushConfigs(task) => {
            let req = query::from_uri(uri, &[("taskId", &task)])?;
            render(protojson::render_text(
                &a2a.list_push_configs(caller, req).await?,
            ))
        }
        Route::PushConfig(task, id) if method == Method::DELETE => {
            let req = pb::DeleteTaskPushNotificationConfigRequest {
                tenant: String::new(),
                task_id: task,
                id,
            };
            a2a.delete_push_config(caller, req).await?;
            render("{}".to_owned())
        }
        Route::PushConfig(task, id) => {
            let req = pb::GetTaskPushNotificationConfigRequest {
                tenant: String::new(),
                task_id: task,
                id,
            };
            render(protojson::render_text(
                &a2a.get_push_config(caller, req).await?,
            ))
        }
        Route::ExtendedCard => render(protojson::render_text(
            &a2a.extended_card(caller, pb::GetExtendedAgentCardRequest::default())
                .await?,
        )),
    }
}

/// One SSE event per stream response (a `StreamResponse`, or an AIP-193 error).
fn sse(events: Events, version: SpecVersion) -> Response {
    super::sse::response(events.map(move |item| match item {
        Ok(response) => protojson::render(&response),
        Err(e) => e.rest_error(version).1,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_with_and_without_a_tenant() {
        assert!(matches!(
            route(&Method::POST, "message:send"),
            Ok(Route::Send)
        ));
        assert!(matches!(
            route(&Method::POST, "acme/message:stream"),
            Ok(Route::Stream)
        ));
        assert!(matches!(route(&Method::GET, "tasks"), Ok(Route::ListTasks)));
        assert!(
            matches!(route(&Method::GET, "acme/tasks/thr_1"), Ok(Route::GetTask(id)) if id == "thr_1")
        );
        assert!(
            matches!(route(&Method::POST, "tasks/thr_1:cancel"), Ok(Route::Cancel(id)) if id == "thr_1")
        );
        assert!(matches!(
            route(&Method::GET, "tasks/thr_1:subscribe"),
            Ok(Route::Subscribe(_))
        ));
        assert!(matches!(
            route(&Method::POST, "tasks/thr_1/pushNotificationConfigs"),
            Ok(Route::PushConfigs(_))
        ));
        assert!(
            matches!(route(&Method::DELETE, "tasks/t/pushNotificationConfigs/c"), Ok(Route::PushConfig(t, c)) if t == "t" && c == "c")
        );
        assert!(route(&Method::DELETE, "tasks/t").is_err());
        assert!(route(&Method::GET, "message:send").is_err());
        assert!(route(&Method::GET, "acme/message:send").is_err());
        assert!(route(&Method::GET, "a/b/tasks/t").is_err());
    }

    #[test]
    fn a_tenant_may_look_like_the_start_of_a_route() {
        for tenant in [
            "tasks-eu",
            "tasks:x",
            "message",
            "extendedAgentCard",
            "message:send",
        ] {
            let path = format!("{tenant}/tasks/thr_1");
            assert!(
                matches!(route(&Method::GET, &path), Ok(Route::GetTask(id)) if id == "thr_1"),
                "{path}"
            );
            let path = format!("{tenant}/tasks/thr_1:cancel");
            assert!(
                matches!(route(&Method::POST, &path), Ok(Route::Cancel(id)) if id == "thr_1"),
                "{path}"
            );
            let path = format!("{tenant}/tasks");
            assert!(
                matches!(route(&Method::GET, &path), Ok(Route::ListTasks)),
                "{path}"
            );
        }
        assert!(matches!(
            route(&Method::POST, "tasks/message:send"),
            Ok(Route::Send)
        ));
        // Read both ways, a path is taken without a tenant: the task `tasks`.
        assert!(
            matches!(route(&Method::GET, "tasks/tasks"), Ok(Route::GetTask(id)) if id == "tasks")
        );
    }

    #[test]
    fn a_body_that_is_not_json_is_a_parse_error_and_a_misfit_invalid_params() {
        for body in [&b"{nope"[..], b"{\"message\":", b"\xff\xfe", b"{} {}"] {
            let error = decode_body::<pb::SendMessageRequest>(body).unwrap_err();
            assert_eq!(error.kind, ErrorKind::ParseError, "{body:?}");
        }
        // A misfit (`id` is a string) before the body is cut short: still not JSON.
        let error = decode_body::<pb::CancelTaskRequest>(br#"{"id": 1,"#).unwrap_err();
        assert_eq!(error.kind, ErrorKind::ParseError);
        for body in [
            &br#"{"message": "text"}"#[..],
            br#"{"message": {"parts": "text"}}"#,
            br#"{"message": {"role": "ROLE_NOBODY"}}"#,
            br#"{"configuration": {"historyLength": "many"}}"#,
            b"[]",
            b"7",
        ] {
            let error = decode_body::<pb::SendMessageRequest>(body).unwrap_err();
            assert_eq!(
                error.kind,
                ErrorKind::InvalidParams,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        let request: pb::CancelTaskRequest = decode_body(br#"{"unknown": 1}"#).unwrap();
        assert_eq!(request, pb::CancelTaskRequest::default());
    }
}
