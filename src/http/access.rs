//! The access log and the request metrics: one middleware around every route. For each request
//! it records the front, the method, the route *template* (`/api/v1/threads/{id}`, never the path
//! with its ids), the status, the latency to the response head and who called (the person id the
//! service authenticated and noted with `crate::metrics::identified`, never a credential). Health checks and scrapes log at DEBUG, everything
//! else at INFO, under the target `liaison::access`.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument as _;

use crate::metrics::RequestLabels;

/// Copies the matched route template onto the response, where [`observe`] reads it (applied with
/// `Router::route_layer`, so only to requests that matched a route).
pub async fn tag_route(req: Request, next: Next) -> Response {
    let matched = req.extensions().get::<MatchedPath>().cloned();
    let mut response = next.run(req).await;
    if let Some(m) = matched {
        response.extensions_mut().insert(m);
    }
    response
}

/// The outermost middleware: logs and counts every request.
pub async fn observe(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().as_str().to_owned();
    let grpc = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"));
    let front = front_of(req.uri().path(), grpc);
    // Named by the method alone, as the HTTP conventions say when the route is not known yet
    // (it is an attribute once the router matched it).
    let span = crate::telemetry::span!(
        method.as_str(),
        otel.kind = "server",
        trace_id = tracing::field::Empty
    );
    if !span.is_none() {
        crate::telemetry::continue_from(&span, req.headers());
        crate::telemetry::record_trace_id(&span);
        crate::telemetry::attribute(&span, "http.request.method", method.clone());
        crate::telemetry::attribute(&span, "url.path", req.uri().path().to_owned());
        crate::telemetry::attribute(&span, "liaison.front", front);
        if grpc
            && let Some((service, rpc)) = req.uri().path().trim_start_matches('/').split_once('/')
        {
            crate::telemetry::attribute(&span, "rpc.system", "grpc");
            crate::telemetry::attribute(&span, "rpc.service", service.to_owned());
            crate::telemetry::attribute(&span, "rpc.method", rpc.to_owned());
        }
    }
    let (response, caller) = crate::metrics::with_caller(next.run(req))
        .instrument(span.clone())
        .await;
    let elapsed = started.elapsed();
    let route = response
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str);
    // A nested service's catch-all is an implementation detail: `/mcp/{*__private…}` is `/mcp`.
    let route = route
        .split("/{*__private")
        .next()
        .unwrap_or(route)
        .to_owned();
    let status = response.status();
    let outcome = outcome(&response, grpc);
    let caller = caller.as_deref().unwrap_or("-");
    let latency_ms = elapsed.as_secs_f64() * 1000.0;
    if !span.is_none() {
        crate::telemetry::attribute(&span, "http.route", route.clone());
        crate::telemetry::attribute(
            &span,
            "http.response.status_code",
            i64::from(status.as_u16()),
        );
        crate::telemetry::attribute(&span, "liaison.caller", caller.to_owned());
        if outcome == "server_error" {
            crate::telemetry::failed(&span, status);
        }
    }
    let _in_span = span.enter();
    if front == "ops" {
        tracing::debug!(target: "liaison::access", %method, %route, status = status.as_u16(), latency_ms, %caller, "Request.");
    } else {
        tracing::info!(target: "liaison::access", %method, %route, status = status.as_u16(), latency_ms, %caller, "Request.");
    }
    crate::metrics::get().request(
        RequestLabels {
            front,
            method,
            route,
            outcome,
        },
        elapsed,
    );
    response
}

/// Which front a path belongs to.
fn front_of(path: &str, grpc: bool) -> &'static str {
    let under = |prefix: &str| path == prefix || path.starts_with(&format!("{prefix}/"));
    if grpc
        || under("/a2a")
        || path.starts_with("/.well-known/agent")
        || path == "/.well-known/jwks.json"
    {
        "a2a"
    } else if under("/mcp") || path.starts_with("/.well-known/oauth-protected-resource") {
        "mcp"
    } else if under("/oauth") || path == "/.well-known/oauth-authorization-server" {
        "oauth"
    } else if under("/admin") {
        "admin"
    } else if under("/api") {
        "api"
    } else if under("/console") {
        "console"
    } else if matches!(path, "/healthz" | "/readyz" | super::metrics::PATH) {
        "ops"
    } else {
        "other"
    }
}

/// `ok`, `client_error` or `server_error`; for gRPC from a trailers-only status when there is one.
fn outcome(response: &Response, grpc: bool) -> &'static str {
    if grpc
        && let Some(code) = response
            .headers()
            .get("grpc-status")
            .and_then(|v| v.to_str().ok())
    {
        return match code {
            "0" => "ok",
            // UNKNOWN, DEADLINE_EXCEEDED, INTERNAL, UNAVAILABLE, DATA_LOSS
            "2" | "4" | "13" | "14" | "15" => "server_error",
            _ => "client_error",
        };
    }
    let status = response.status();
    if status.is_server_error() {
        "server_error"
    } else if status.is_client_error() {
        "client_error"
    } else {
        "ok"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_their_fronts() {
        let cases = [
            ("/a2a/jsonrpc", false, "a2a"),
            ("/a2a/rest/tasks/x", false, "a2a"),
            ("/lf.a2a.v1.A2AService/SendMessage", true, "a2a"),
            ("/.well-known/agent-card.json", false, "a2a"),
            ("/mcp", false, "mcp"),
            ("/mcpx", false, "other"),
            ("/admin/v1/persons", false, "admin"),
            ("/api/v1/inbox", false, "api"),
            ("/console/approvals", false, "console"),
            ("/metrics", false, "ops"),
            ("/nope", false, "other"),
        ];
        for (path, grpc, front) in cases {
            assert_eq!(front_of(path, grpc), front, "{path}");
        }
    }
}
