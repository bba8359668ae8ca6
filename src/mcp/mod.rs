//! The MCP front for internal agents: Streamable HTTP at `/mcp` (rmcp; legacy sessions and the
//! stateless 2026-07-28 revision on one endpoint), the bearer check in front of it, and the
//! protected-resource metadata document.
//!
//! Decode, call the service, encode: no rule lives here. The bearer middleware authenticates every
//! request before rmcp sees it (so no session exists for an unauthenticated client) and puts the
//! [`Caller`] in the request extensions, which rmcp hands to tools inside `http::request::Parts`.
//! Depends on `service`, `domain` and `admin`'s header parsing; nothing depends on it but `app`.
//! Protocol decisions are written down in `README.md` next to this file.

pub(crate) mod args;
mod elicit;
pub(crate) mod progress;
pub(crate) mod render;
mod sessions;
mod settings;
pub(crate) mod tools;
mod waits;

pub use settings::McpSettings;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::domain::Scope;
use crate::http::{ApiError, authenticate};
use crate::service::{Caller, ErrorCode, Service, ServiceError};

pub use tools::Tools;

use sessions::{SessionBook, Use, session_of};

/// Where the protected-resource metadata lives (RFC 9728), relative to the public URL.
pub const PRM_PATH: &str = "/.well-known/oauth-protected-resource";

/// Time between shutdown and the closing of MCP sessions, for in-flight answers to be written.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// What the middleware needs to answer 401s consistently with the metadata document.
#[derive(Clone)]
struct Front {
    service: Service,
    /// Absolute URL of the protected-resource metadata, for `WWW-Authenticate`.
    metadata_url: String,
    /// Absolute URL of the MCP endpoint: the `resource` the metadata describes.
    resource: String,
    /// Legacy sessions by token, bounded by `mcp.sessions_per_token`.
    sessions: Arc<SessionBook>,
}

/// The `/mcp` endpoint and the metadata document. `public_url` is what clients reach this server at;
/// `shutdown` ends every MCP session when it fires.
pub fn router(
    service: Service,
    settings: &McpSettings,
    public_url: &str,
    shutdown: CancellationToken,
) -> Router {
    let mut sessions = LocalSessionManager::default();
    // rmcp's idle timer counts only MCP messages; `mcp.session_idle_s` exceeds the longest
    // long-poll (checked in config), and long-polls send progress when asked.
    sessions.session_config.keep_alive = Some(settings.session_idle);
    let sessions = Arc::new(sessions);
    crate::http::metrics::watch_mcp_sessions(Arc::downgrade(&sessions));
    let front = Front {
        service: service.clone(),
        metadata_url: format!("{public_url}{PRM_PATH}"),
        resource: format!("{public_url}/mcp"),
        sessions: Arc::new(SessionBook::new(
            sessions.clone(),
            settings.sessions_per_token,
        )),
    };
    let config = StreamableHttpServerConfig::default()
        // `:` comments on every SSE reply, so that proxies keep streams that wait on humans.
        .with_sse_keep_alive(Some(settings.sse_keep_alive))
        .with_allowed_hosts(allowed_hosts(settings, public_url))
        .with_allowed_origins(allowed_origins(settings, public_url))
        .enforce_origin_validation()
        .with_cancellation_token(sessions_token(shutdown));
    let config = if settings.allowed_hosts.iter().any(|h| h == "*") {
        config.disable_allowed_hosts()
    } else {
        config
    };
    let tools = Tools::new(service, public_url);
    let waits = waits::Sessions::new(sessions, tools.clone(), settings.session_idle);
    let mcp = Shared(Arc::new(StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::new(waits),
        config,
    )));
    Router::new()
        .route(PRM_PATH, get(metadata))
        .route(&format!("{PRM_PATH}/mcp"), get(metadata))
        .with_state(front.clone())
        .merge(
            Router::new()
                .nest_service("/mcp", mcp)
                .layer(middleware::from_fn_with_state(front, bearer)),
        )
}

/// rmcp's service, shared. axum clones a route's service for every request, and rmcp's service
/// clones its whole configuration (its lists of allowed hosts and origins, a dozen allocations)
/// when it is cloned and once more in its `call`: about 30,000 instructions a request
/// (callgrind, the delegated round trip). Shared, a request clones one `Arc`.
#[derive(Clone)]
struct Shared(Arc<StreamableHttpService<Tools, waits::Sessions>>);

impl tower_service::Service<Request> for Shared {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let service = self.0.clone();
        Box::pin(async move { Ok(service.handle(request).await.into_response()) })
    }
}

/// Closes session `id` once its credential ends (revoked, its person removed, expired), on any
/// replica: "the old code stops working at once", open streams included. A token's next request
/// is refused anyway (every request is authenticated). The watch goes with the session.
fn end_with_credential(front: &Front, caller: Caller, id: String) {
    let (service, book) = (front.service.clone(), front.sessions.clone());
    let session = id.clone();
    let task = tokio::spawn(async move {
        match service.hold_credential(&caller).await {
            Ok(hold) => {
                hold.ended().await;
                // The long-polls of that credential end with `token_revoked` at the same
                // moment: let their answers reach the clients before the streams close.
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            }
            Err(e) if matches!(e.code, ErrorCode::TokenRevoked | ErrorCode::TokenExpired) => {}
            // The store did not answer: the session lives on, its requests checked one by one.
            Err(e) => {
                tracing::warn!(error = %e, "Could not watch the credential of an MCP session.");
                return;
            }
        }
        tracing::debug!(session = %id, "Closing an MCP session: its credential can no longer be used.");
        book.end(&id).await;
    });
    front.sessions.watch(&session, task.abort_handle());
}

/// Cancelled a moment after `shutdown`: the service ends long-polls with their current (empty)
/// answer at once, and that answer must still reach the client before rmcp closes the sessions.
fn sessions_token(shutdown: CancellationToken) -> CancellationToken {
    let sessions = CancellationToken::new();
    let token = sessions.clone();
    tokio::spawn(async move {
        shutdown.cancelled().await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
        token.cancel();
    });
    sessions
}

/// Loopback names plus the public URL's host, unless the configuration lists hosts.
fn allowed_hosts(settings: &McpSettings, public_url: &str) -> Vec<String> {
    if !settings.allowed_hosts.is_empty() {
        return settings.allowed_hosts.clone();
    }
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).into();
    if let Some(host) = url_host(public_url)
        && !hosts.contains(&host)
    {
        hosts.push(host);
    }
    hosts
}

/// Loopback origins plus the public URL's origin, unless the configuration lists origins.
fn allowed_origins(settings: &McpSettings, public_url: &str) -> Vec<String> {
    if !settings.allowed_origins.is_empty() {
        return settings.allowed_origins.clone();
    }
    let mut origins: Vec<String> = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
        .map(String::from)
        .into();
    origins.push(public_url.trim_end_matches('/').to_owned());
    origins
}

/// The host part of an `http(s)://host[:port]/…` URL, without brackets for IPv6.
fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        authority.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// RFC 9728 metadata. With OAuth on (the default) it names liaison itself as the authorization
/// server, so a client given only the URL can sign in; with `[oauth] enabled = false` it names
/// none, and a client uses the token it was given.
async fn metadata(State(front): State<Front>) -> Response {
    let oauth = front.service.oauth_settings();
    let mut doc = serde_json::json!({
        "resource": front.resource,
        "resource_name": "liaison MCP",
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["agent"],
        "resource_documentation": "Connect with OAuth (give your client this server's /mcp URL), or issue an agent token on the console's Connect page and send it as `Authorization: Bearer <token>`.",
    });
    if oauth.enabled && !oauth.issuer.is_empty() {
        doc["authorization_servers"] = serde_json::json!([oauth.issuer]);
    }
    let mut response = Json(doc).into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    response
}

/// Authenticates every request to `/mcp` before rmcp sees it; the caller travels in the extensions.
async fn bearer(State(front): State<Front>, mut req: Request, next: Next) -> Response {
    // The endpoint is `/mcp` alone: anything below it is an unknown route, whatever the token.
    if !matches!(req.uri().path(), "/mcp" | "/mcp/") {
        return crate::http::unknown_route(req.method().clone())
            .await
            .into_response();
    }
    let caller = match authenticate(&front.service, req.headers()).await {
        Ok(caller) => caller,
        Err(e) => return refuse(&front, e),
    };
    if !(caller.scopes.contains(Scope::Agent) || caller.scopes.contains(Scope::Human)) {
        let e =
            ServiceError::forbidden("MCP needs a token with scope `agent`; ask an admin for one");
        return refuse(&front, e);
    }
    let named = session_of(req.headers()).map(str::to_owned);
    let ending = req.method() == Method::DELETE;
    let busy = match &named {
        Some(id) => match front.sessions.enter(&caller.token_id, id) {
            Use::Go(busy) => busy,
            // As rmcp answers an unknown session: the client starts a new one.
            Use::Foreign => {
                return ApiError(ServiceError::new(
                    ErrorCode::NotFound,
                    "no such MCP session",
                ))
                .into_response();
            }
        },
        None => None,
    };
    if let Some(busy) = &busy {
        // Its client ends the session: no call of it may wait on through rmcp's drain.
        if ending {
            busy.end_waits();
        }
        req.extensions_mut().insert(busy.session_end());
    }
    let token = caller.token_id.clone();
    let holder = (named.is_none() && !ending).then(|| caller.clone());
    detach_head(&mut req);
    req.extensions_mut().insert::<Caller>(caller);
    if crate::telemetry::on() {
        req.extensions_mut()
            .insert(crate::telemetry::RequestSpan(tracing::Span::current()));
    }
    let response = next.run(req).await;
    match (&named, busy) {
        (Some(id), _) if ending && response.status().is_success() => {
            front.sessions.forget(id);
            // rmcp says 202; clients expect 200 or 204 for an ended session (the Python SDK
            // warns "Session termination failed: 202" otherwise).
            let mut response = response;
            if response.status() == axum::http::StatusCode::ACCEPTED {
                *response.status_mut() = axum::http::StatusCode::NO_CONTENT;
            }
            response
        }
        (Some(_), Some(busy)) => crate::net::hold(response, busy),
        (Some(_), None) => response,
        (None, _) => {
            let created = response
                .headers()
                .get(sessions::SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            match created {
                Some(id) => match front.sessions.created(&token, &id).await {
                    Ok(()) => {
                        if let Some(caller) = holder {
                            end_with_credential(&front, caller, id);
                        }
                        response
                    }
                    Err(e) => ApiError(e).into_response(),
                },
                None => response,
            }
        }
    }
}

/// Gives the request head its own copies of the URI and of every header value, and drops the
/// credential the middleware has read.
///
/// hyper's URI and header values are views into the buffer it read the request into. rmcp keeps
/// the head (and copies of it) for as long as a call runs, so that buffer stayed shared, and
/// hyper took a second one for the connection's next read: every waiting long-poll held two
/// (3.8 KiB more of resident memory each, measured with 10,000). Once the body is read, the
/// buffer is hyper's alone again and it reads on in place. The request carries its [`Caller`]
/// from here, so no copy of the raw credential lives on with the call.
fn detach_head(req: &mut Request) {
    let owned: axum::http::HeaderMap = req
        .headers()
        .iter()
        .filter(|(name, _)| *name != header::AUTHORIZATION)
        .map(|(name, value)| (name.clone(), owned_value(value)))
        .collect();
    *req.headers_mut() = owned;
    if let Ok(uri) = axum::http::Uri::try_from(req.uri().to_string()) {
        *req.uri_mut() = uri;
    }
}

/// A header value in storage of its own (the same bytes, the same sensitivity).
fn owned_value(value: &HeaderValue) -> HeaderValue {
    let mut owned = HeaderValue::from_bytes(value.as_bytes()).unwrap_or_else(|_| value.clone());
    owned.set_sensitive(value.is_sensitive());
    owned
}

/// The service's error as JSON, with a `WWW-Authenticate` challenge pointing at the metadata.
fn refuse(front: &Front, e: ServiceError) -> Response {
    let challenge = match e.code {
        ErrorCode::Unauthenticated => {
            format!("Bearer resource_metadata=\"{}\"", front.metadata_url)
        }
        ErrorCode::TokenExpired | ErrorCode::TokenRevoked => format!(
            "Bearer error=\"invalid_token\", error_description=\"{}\", resource_metadata=\"{}\"",
            e.code, front.metadata_url
        ),
        ErrorCode::Forbidden => format!(
            "Bearer error=\"insufficient_scope\", scope=\"agent\", resource_metadata=\"{}\"",
            front.metadata_url
        ),
        _ => return ApiError(e).into_response(),
    };
    let mut response = ApiError(e).into_response();
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    if response.status() == StatusCode::FORBIDDEN {
        tracing::debug!("MCP request refused: token lacks scope agent.");
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_default_to_loopback_and_the_public_host() {
        let s = McpSettings::default();
        assert_eq!(
            url_host("https://Liaison.example.com:8443/x"),
            Some("liaison.example.com".into())
        );
        assert_eq!(url_host("http://[::1]:8080"), Some("::1".into()));
        let hosts = allowed_hosts(&s, "https://liaison.example.com");
        assert!(
            hosts.contains(&"liaison.example.com".to_owned())
                && hosts.contains(&"localhost".to_owned())
        );
        let s = McpSettings {
            allowed_hosts: vec!["gw.internal".into()],
            ..McpSettings::default()
        };
        assert_eq!(
            allowed_hosts(&s, "http://127.0.0.1:1"),
            vec!["gw.internal".to_owned()]
        );
    }
}
