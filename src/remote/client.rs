//! [`A2aClient`]: calls a remote agent over the binding its [`RemoteTarget`] names.
//!
//! - **JSON-RPC**: `POST` the interface URL with `{"jsonrpc":"2.0","id","method","params"}`,
//!   method names as in A2A 1.0 (`SendMessage`, `GetTask`, …); streams are SSE whose events each
//!   carry a JSON-RPC response.
//! - **HTTP+JSON**: the proto's routes under the interface URL (`/{tenant}` first when the
//!   interface names one): `POST /message:send`, `POST /message:stream`, `GET /tasks/{id}`,
//!   `POST /tasks/{id}:cancel`, `GET /tasks/{id}:subscribe`; errors are AIP-193 JSON.
//! - **gRPC**: `lf.a2a.v1.A2AService` over HTTP/2 (see `grpc.rs`).
//!
//! Every call carries `A2A-Version: 1.0`, the remote's credentials and extra headers, and the
//! interface's tenant. Every connection passes the outbound address guard. Unary calls have the
//! outbox's connect and total timeouts; streams the connect timeout and then an idle timeout
//! between reads. An answer (or one stream event) larger than [`MAX_ANSWER_BYTES`] is
//! [`CallError::TooLarge`], read no further.

use std::sync::Arc;

use futures::StreamExt as _;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::call::{Call, EventStream};
// One path segment, percent-encoded (task ids and tenants are the remote's strings).
use super::error::excerpt;
use super::oauth::{Grant, TokenCache};
use super::{Binding, CallError, RemoteAuth, RemoteError, RemoteTarget, grpc, sse};
use crate::domain::text::percent_encode as segment;
use crate::net::outbound::OutboundClient;
use crate::wire::pb;

/// Largest answer (and stream event) read: the largest message liaison can store, encoded as an
/// A2A message (`a2a::params::MAX_REQUEST_BYTES`, the bound of what liaison itself accepts).
/// Larger answers could not become a message in the thread anyway.
pub const MAX_ANSWER_BYTES: usize = crate::wire::params::MAX_REQUEST_BYTES;

/// The protocol version liaison speaks.
pub const A2A_VERSION: &str = "1.0";

/// The A2A client of the outbound bridge. Cheap to clone (clones share the OAuth2 token cache and
/// the gRPC connections).
#[derive(Clone)]
pub struct A2aClient {
    /// Every request goes through its address guard and timeouts.
    outbound: OutboundClient,
    tokens: Arc<TokenCache>,
    grpc: Arc<grpc::Connections>,
    max_answer: usize,
}

impl A2aClient {
    pub fn new(outbound: OutboundClient) -> A2aClient {
        A2aClient {
            outbound,
            tokens: Arc::default(),
            grpc: Arc::default(),
            max_answer: MAX_ANSWER_BYTES,
        }
    }

    /// Another answer cap (tests use a small one).
    pub fn with_max_answer_bytes(mut self, max: usize) -> A2aClient {
        self.max_answer = max;
        self
    }

    pub async fn send_message(
        &self,
        t: &RemoteTarget,
        mut req: pb::SendMessageRequest,
    ) -> Result<pb::SendMessageResponse, CallError> {
        req.tenant = tenant(t);
        let result = traced_call(t, "SendMessage", async {
            match t.binding {
                Binding::JsonRpc => self.jsonrpc(t, "SendMessage", &req).await,
                Binding::HttpJson => {
                    self.rest(t, reqwest::Method::POST, "/message:send", Some(&req))
                        .await
                }
                Binding::Grpc => self.grpc_unary(t, "SendMessage", req).await,
            }
        })
        .await;
        self.settle(t, result)
    }

    pub async fn send_streaming_message(
        &self,
        t: &RemoteTarget,
        mut req: pb::SendMessageRequest,
    ) -> Result<EventStream, CallError> {
        req.tenant = tenant(t);
        let result = traced_call(t, "SendStreamingMessage", async {
            match t.binding {
                Binding::JsonRpc => self.jsonrpc_stream(t, "SendStreamingMessage", &req).await,
                Binding::HttpJson => {
                    self.rest_stream(t, reqwest::Method::POST, "/message:stream", Some(&req))
                        .await
                }
                Binding::Grpc => self.grpc_stream(t, "SendStreamingMessage", req).await,
            }
        })
        .await;
        self.settle(t, result)
    }

    pub async fn subscribe_to_task(
        &self,
        t: &RemoteTarget,
        task_id: &str,
    ) -> Result<EventStream, CallError> {
        let req = pb::SubscribeToTaskRequest {
            tenant: tenant(t),
            id: task_id.to_owned(),
        };
        let result = traced_call(t, "SubscribeToTask", async {
            match t.binding {
                Binding::JsonRpc => self.jsonrpc_stream(t, "SubscribeToTask", &req).await,
                Binding::HttpJson => {
                    let path = format!("/tasks/{}:subscribe", segment(task_id));
                    self.rest_stream::<()>(t, reqwest::Method::GET, &path, None)
                        .await
                }
                Binding::Grpc => self.grpc_stream(t, "SubscribeToTask", req).await,
            }
        })
        .await;
        self.settle(t, result)
    }

    pub async fn get_task(&self, t: &RemoteTarget, task_id: &str) -> Result<pb::Task, CallError> {
        let req = pb::GetTaskRequest {
            tenant: tenant(t),
            id: task_id.to_owned(),
            history_length: None,
        };
        let result = traced_call(t, "GetTask", async {
            match t.binding {
                Binding::JsonRpc => self.jsonrpc(t, "GetTask", &req).await,
                Binding::HttpJson => {
                    let path = format!("/tasks/{}", segment(task_id));
                    self.rest::<(), _>(t, reqwest::Method::GET, &path, None)
                        .await
                }
                Binding::Grpc => self.grpc_unary(t, "GetTask", req).await,
            }
        })
        .await;
        self.settle(t, result)
    }

    pub async fn cancel_task(
        &self,
        t: &RemoteTarget,
        task_id: &str,
    ) -> Result<pb::Task, CallError> {
        let req = pb::CancelTaskRequest {
            tenant: tenant(t),
            id: task_id.to_owned(),
            metadata: None,
        };
        let result = traced_call(t, "CancelTask", async {
            match t.binding {
                Binding::JsonRpc => self.jsonrpc(t, "CancelTask", &req).await,
                Binding::HttpJson => {
                    let path = format!("/tasks/{}:cancel", segment(task_id));
                    self.rest(t, reqwest::Method::POST, &path, Some(&req)).await
                }
                Binding::Grpc => self.grpc_unary(t, "CancelTask", req).await,
            }
        })
        .await;
        self.settle(t, result)
    }

    /// Forgets a refused OAuth2 token, so the next call fetches a new one.
    fn settle<T>(&self, t: &RemoteTarget, result: Result<T, CallError>) -> Result<T, CallError> {
        let refused = match &result {
            Err(CallError::Status { code: 401, .. }) => true,
            Err(CallError::Remote(e)) => {
                e.http_status == Some(401) || (t.binding == Binding::Grpc && e.code == 16)
            }
            _ => false,
        };
        if refused && let Some(RemoteAuth::Oauth2 { .. }) = &t.credentials.auth {
            self.tokens
                .forget(&grant(t).expect("an oauth2 target has a grant"));
        }
        result
    }

    /// `A2A-Version`, the credentials and the extra headers of `t`.
    pub(super) async fn headers(&self, t: &RemoteTarget) -> Result<HeaderMap, CallError> {
        let mut headers = HeaderMap::new();
        for extra in &t.credentials.headers {
            let name = HeaderName::from_bytes(extra.name.as_bytes()).map_err(|_| {
                CallError::Credentials(format!("{:?} is not a valid header name", extra.name))
            })?;
            let mut value = HeaderValue::from_str(&extra.value).map_err(|_| {
                CallError::Credentials(format!("the value of header {} is not valid", extra.name))
            })?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let bearer = match &t.credentials.auth {
            None => None,
            Some(RemoteAuth::Bearer { token }) => Some(token.clone()),
            Some(RemoteAuth::Oauth2 { .. }) => Some(
                self.tokens
                    .token(&self.outbound, &grant(t).expect("oauth2"))
                    .await?,
            ),
        };
        if let Some(token) = bearer {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                CallError::Credentials("the bearer token is not a valid header value".into())
            })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        headers.insert("a2a-version", HeaderValue::from_static(A2A_VERSION));
        Ok(headers)
    }

    /// What one call to `t` carries: its headers, the answer cap, the guarded client.
    async fn call(&self, t: &RemoteTarget) -> Result<Call<'_>, CallError> {
        Ok(Call {
            outbound: &self.outbound,
            headers: self.headers(t).await?,
            max_answer: self.max_answer,
        })
    }

    async fn jsonrpc<P: Serialize, R: DeserializeOwned>(
        &self,
        t: &RemoteTarget,
        method: &str,
        params: &P,
    ) -> Result<R, CallError> {
        let mut headers = self.headers(t).await?;
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        let body = envelope(method, params)?;
        let answer = self
            .outbound
            .request_bounded(
                reqwest::Method::POST,
                &t.url,
                headers,
                Some(body),
                self.max_answer,
            )
            .await
            .map_err(CallError::from_fetch)?;
        let value: Option<Value> = serde_json::from_slice(&answer.body).ok();
        if let Some(error) = value.as_ref().and_then(|v| v.get("error")) {
            return Err(CallError::Remote(RemoteError {
                http_status: Some(answer.status),
                ..jsonrpc_error(error)
            }));
        }
        if !(200..300).contains(&answer.status) {
            return Err(CallError::Status {
                code: answer.status,
                retry_after: answer.retry_after,
            });
        }
        let mut value =
            value.ok_or_else(|| CallError::Undecodable("the answer is not JSON".into()))?;
        decode(value.get_mut("result").map(Value::take).ok_or_else(|| {
            CallError::Undecodable("a JSON-RPC answer with neither result nor error".into())
        })?)
    }

    async fn jsonrpc_stream<P: Serialize>(
        &self,
        t: &RemoteTarget,
        method: &str,
        params: &P,
    ) -> Result<EventStream, CallError> {
        let mut headers = self.headers(t).await?;
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        let body = envelope(method, params)?;
        let response = self
            .outbound
            .open_stream(reqwest::Method::POST, &t.url, headers, Some(body))
            .await
            .map_err(CallError::Transport)?;
        let status = response.status().as_u16();
        let response = self
            .event_stream_or_error(response, |v| {
                v.get("error").map(|e| {
                    CallError::Remote(RemoteError {
                        http_status: Some(status),
                        ..jsonrpc_error(e)
                    })
                })
            })
            .await?;
        Ok(events(response, self.max_answer, |event| {
            let mut value: Value = serde_json::from_str(&event.data)
                .map_err(|e| CallError::Undecodable(format!("a stream event is not JSON: {e}")))?;
            if let Some(error) = value.get("error") {
                return Err(CallError::Remote(jsonrpc_error(error)));
            }
            decode(value.get_mut("result").map(Value::take).ok_or_else(|| {
                CallError::Undecodable("a stream event with neither result nor error".into())
            })?)
        }))
    }

    fn rest_url(&self, t: &RemoteTarget, path: &str) -> String {
        match &t.tenant {
            Some(tenant) => format!("{}/{}{path}", t.url, segment(tenant)),
            None => format!("{}{path}", t.url),
        }
    }

    async fn rest<B: Serialize, R: DeserializeOwned>(
        &self,
        t: &RemoteTarget,
        method: reqwest::Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<R, CallError> {
        let mut headers = self.headers(t).await?;
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        let body = match body {
            Some(b) => {
                headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                Some(serde_json::to_vec(b).map_err(|e| CallError::Undecodable(e.to_string()))?)
            }
            None => None,
        };
        let answer = self
            .outbound
            .request_bounded(
                method,
                &self.rest_url(t, path),
                headers,
                body,
                self.max_answer,
            )
            .await
            .map_err(CallError::from_fetch)?;
        let value: Option<Value> = serde_json::from_slice(&answer.body).ok();
        if !(200..300).contains(&answer.status) {
            return Err(match value.as_ref().and_then(|v| v.get("error")) {
                Some(error) => CallError::Remote(rest_error(answer.status, error)),
                None => CallError::Status {
                    code: answer.status,
                    retry_after: answer.retry_after,
                },
            });
        }
        decode(value.ok_or_else(|| CallError::Undecodable("the answer is not JSON".into()))?)
    }

    async fn rest_stream<B: Serialize>(
        &self,
        t: &RemoteTarget,
        method: reqwest::Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<EventStream, CallError> {
        let mut headers = self.headers(t).await?;
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        let body = match body {
            Some(b) => {
                headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                Some(serde_json::to_vec(b).map_err(|e| CallError::Undecodable(e.to_string()))?)
            }
            None => None,
        };
        let response = self
            .outbound
            .open_stream(method, &self.rest_url(t, path), headers, body)
            .await
            .map_err(CallError::Transport)?;
        let status = response.status().as_u16();
        let response = self
            .event_stream_or_error(response, move |v| {
                v.get("error")
                    .map(|e| CallError::Remote(rest_error(status, e)))
            })
            .await?;
        Ok(events(response, self.max_answer, |event| {
            let value: Value = serde_json::from_str(&event.data)
                .map_err(|e| CallError::Undecodable(format!("a stream event is not JSON: {e}")))?;
            if let Some(error) = value.get("error") {
                let code = error["code"]
                    .as_u64()
                    .and_then(|c| u16::try_from(c).ok())
                    .unwrap_or(500);
                return Err(CallError::Remote(rest_error(code, error)));
            }
            if event.event.as_deref() == Some("error") {
                return Err(CallError::Undecodable(
                    "an error event without an error".into(),
                ));
            }
            decode(value)
        }))
    }

    /// The response when it is an event stream; else the error it carries (read up to 64 KiB).
    async fn event_stream_or_error(
        &self,
        mut response: reqwest::Response,
        error_of: impl Fn(&Value) -> Option<CallError>,
    ) -> Result<reqwest::Response, CallError> {
        let status = response.status().as_u16();
        let is_sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if (200..300).contains(&status) && is_sse {
            return Ok(response);
        }
        let retry_after = crate::net::outbound::retry_after(response.headers());
        let mut body = Vec::new();
        while body.len() < 64 * 1024 {
            match response.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                Ok(None) => break,
                Err(e) => return Err(CallError::Transport(crate::net::outbound::classify(&e))),
            }
        }
        if let Some(e) = serde_json::from_slice::<Value>(&body)
            .ok()
            .as_ref()
            .and_then(error_of)
        {
            return Err(e);
        }
        if !(200..300).contains(&status) {
            return Err(CallError::Status {
                code: status,
                retry_after,
            });
        }
        Err(CallError::Undecodable(
            "a stream was asked for, but the answer is not text/event-stream".into(),
        ))
    }

    async fn grpc_unary<Req, Resp>(
        &self,
        t: &RemoteTarget,
        method: &str,
        req: Req,
    ) -> Result<Resp, CallError>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        let call = self.call(t).await?;
        grpc::unary(&call, &self.grpc, t, method, req).await
    }

    async fn grpc_stream<Req: prost::Message>(
        &self,
        t: &RemoteTarget,
        method: &str,
        req: Req,
    ) -> Result<EventStream, CallError> {
        let call = self.call(t).await?;
        grpc::server_stream(&call, &self.grpc, t, method, req).await
    }
}

/// The OAuth2 grant of `t`, if its credentials are client credentials.
fn grant(t: &RemoteTarget) -> Option<Grant<'_>> {
    match &t.credentials.auth {
        Some(RemoteAuth::Oauth2 {
            token_url,
            client_id,
            client_secret,
            scopes,
        }) => Some(Grant {
            token_url,
            client_id,
            client_secret,
            scopes,
        }),
        _ => None,
    }
}

fn tenant(t: &RemoteTarget) -> String {
    t.tenant.clone().unwrap_or_default()
}

/// A JSON-RPC request with a fresh id.
fn envelope<P: Serialize>(method: &str, params: &P) -> Result<Vec<u8>, CallError> {
    serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0",
        "id": uuid::Uuid::now_v7().to_string(),
        "method": method,
        "params": params,
    }))
    .map_err(|e| CallError::Undecodable(e.to_string()))
}

fn decode<R: DeserializeOwned>(value: Value) -> Result<R, CallError> {
    serde_json::from_value(value)
        .map_err(|e| CallError::Undecodable(format!("not the A2A message expected: {e}")))
}

/// The `google.rpc.ErrorInfo` reason among error details, if any.
fn error_info_reason(details: Option<&Value>) -> Option<String> {
    details?
        .as_array()?
        .iter()
        .find(|d| {
            d["@type"]
                .as_str()
                .is_some_and(|t| t.ends_with("google.rpc.ErrorInfo"))
        })
        .and_then(|d| d["reason"].as_str())
        .map(excerpt)
}

fn jsonrpc_error(error: &Value) -> RemoteError {
    let code = error["code"].as_i64().unwrap_or(0);
    let reason = error_info_reason(error.get("data"));
    // -32603 is the server's internal error; an ErrorInfo reason of UNAVAILABLE or
    // RESOURCE_EXHAUSTED says "later" whatever the code; A2A's and the standard codes are final.
    let retryable = code == -32603
        || matches!(
            reason.as_deref(),
            Some("UNAVAILABLE" | "RESOURCE_EXHAUSTED")
        );
    RemoteError {
        code,
        reason,
        message: excerpt(error["message"].as_str().unwrap_or("")),
        http_status: None,
        retryable,
    }
}

fn rest_error(status: u16, error: &Value) -> RemoteError {
    RemoteError {
        code: i64::from(status),
        reason: error_info_reason(error.get("details")),
        message: excerpt(error["message"].as_str().unwrap_or("")),
        http_status: Some(status),
        retryable: crate::domain::delivery::status_retryable(status),
    }
}

/// The SSE events of `response` decoded by `decode_event`; the stream ends after the first error.
fn events(
    response: reqwest::Response,
    max: usize,
    decode_event: impl Fn(sse::SseEvent) -> Result<pb::StreamResponse, CallError> + Send + 'static,
) -> EventStream {
    let stream = sse::events(response, max)
        .map(move |event| event.and_then(&decode_event))
        .scan(false, |failed, item| {
            if *failed {
                return futures::future::ready(None);
            }
            *failed = item.is_err();
            futures::future::ready(Some(item))
        });
    Box::pin(stream)
}

/// Runs one call to a remote agent in its span (while tracing is on): a client span named by the
/// A2A method, whose context the call's requests carry.
async fn traced_call<T>(
    t: &RemoteTarget,
    method: &'static str,
    call: impl std::future::Future<Output = Result<T, CallError>>,
) -> Result<T, CallError> {
    use tracing::Instrument as _;
    let span = crate::telemetry::span!(method, otel.kind = "client");
    if span.is_none() {
        return call.await;
    }
    crate::telemetry::attribute(&span, "rpc.system", "a2a");
    crate::telemetry::attribute(&span, "rpc.method", method);
    crate::telemetry::attribute(&span, "server.address", t.url.clone());
    let out = call.instrument(span.clone()).await;
    if let Err(e) = &out {
        crate::telemetry::failed(&span, e);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_errors_keep_code_reason_and_a_short_message() {
        let e = jsonrpc_error(&serde_json::json!({
            "code": -32001, "message": "no such task\nreally",
            "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND"}]
        }));
        assert_eq!(e.code, -32001);
        assert_eq!(e.reason.as_deref(), Some("TASK_NOT_FOUND"));
        assert_eq!(e.message, "no such task really");
        assert!(!e.retryable);
        let e = rest_error(503, &serde_json::json!({"message": "busy"}));
        assert!(e.retryable && e.reason.is_none());
        assert!(!CallError::TooLarge { limit: 1 }.retryable());
    }

    #[test]
    fn path_segments_are_percent_encoded() {
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
    }
}
