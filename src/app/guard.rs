//! The failed-authentication guard in front of every route: a request whose credential failed to
//! authenticate too often lately (or, as a backstop, whose client address did, with many distinct
//! credentials: see `service::limits`) is refused before any front reads its credential, in the
//! shape of the front it called (gRPC status, A2A JSON-RPC or HTTP+JSON error, or the admin/MCP
//! JSON error), always with `Retry-After`. A response that reports a refused credential (HTTP 401,
//! or gRPC `UNAUTHENTICATED`) is charged to what the request presented and to its address.
//! Health checks are never refused.

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::a2a;
use crate::http::ApiError;
use crate::net::ClientAddr;
use crate::service::{Presented, Service, ServiceError};
use crate::wire::errors::{A2aError, SpecVersion};

/// The middleware (`axum::middleware::from_fn_with_state`).
pub(super) async fn auth_failures(
    State(service): State<Service>,
    req: Request,
    next: Next,
) -> Response {
    let Some(ip) = req.extensions().get::<ClientAddr>().map(|c| c.0.ip()) else {
        return next.run(req).await;
    };
    let path = req.uri().path();
    if path == "/healthz" || path == "/readyz" {
        return next.run(req).await;
    }
    let grpc = is_grpc(&req);
    let shown = Shown::of(&req);
    if let Err(e) = service.check_client(ip, || shown.key(ip)) {
        return refusal(&req, grpc, e);
    }
    let response = next.run(req).await;
    let refused = if grpc {
        response
            .headers()
            .get("grpc-status")
            .is_some_and(|v| v == "16")
    } else {
        response.status() == StatusCode::UNAUTHORIZED
    };
    if refused {
        service.authentication_failed(ip, &shown.key(ip));
    }
    response
}

/// What a request presents to authenticate with, whichever front reads it: its `Authorization`
/// header (a token or a JWT, every API and binding: the credential itself when the scheme is
/// `Bearer`, in any case, so that one token is one credential however it is spelled), its cookies
/// (a console session), a link's `link` parameter (login and approval links) and an A2A push's
/// notification token. A link page's form posts its link in the body, which is not read here: its
/// cookie (the page's form token) stands for it. Nothing presented counts at the client address.
///
/// The values are kept (shared, not copied) and digested into a [`Presented`] only when it is
/// needed: while some credential is refused, or when this request fails to authenticate. The
/// digest on every request was about 1% of an intake's instructions (`docs/performance.md`).
struct Shown {
    authorization: Vec<header::HeaderValue>,
    cookies: Vec<header::HeaderValue>,
    uri: axum::http::Uri,
    tokens: Vec<header::HeaderValue>,
}

impl Shown {
    fn of(req: &Request) -> Shown {
        fn all(req: &Request, name: impl header::AsHeaderName) -> Vec<header::HeaderValue> {
            req.headers().get_all(name).iter().cloned().collect()
        }
        Shown {
            authorization: all(req, header::AUTHORIZATION),
            cookies: all(req, header::COOKIE),
            uri: req.uri().clone(),
            tokens: all(req, a2a::push_receiver::NOTIFICATION_TOKEN),
        }
    }

    fn key(&self, ip: std::net::IpAddr) -> Presented {
        let authorization = self.authorization.iter().map(|v| {
            v.to_str()
                .ok()
                .and_then(crate::http::bearer_credential)
                .map_or(v.as_bytes(), str::as_bytes)
        });
        let link = self.uri.query().and_then(|q| {
            q.split('&')
                .find_map(|pair| pair.strip_prefix("link="))
                .map(str::as_bytes)
        });
        let values = authorization
            .chain(self.cookies.iter().map(|v| v.as_bytes()))
            .chain(link)
            .chain(self.tokens.iter().map(|v| v.as_bytes()));
        Presented::new(values, ip)
    }
}

fn is_grpc(req: &Request) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"))
}

/// `e` (`rate_limited`) in the shape of the front `req` was meant for.
fn refusal(req: &Request, grpc: bool, e: ServiceError) -> Response {
    let path = req.uri().path();
    if grpc {
        let status = A2aError::from(e).grpc_status(SpecVersion::default());
        return status.into_http::<axum::body::Body>().into_response();
    }
    if path == a2a::rpc::PATH || path == format!("{}/", a2a::rpc::PATH) {
        // The request's id is not read: nothing of a refused client's body is parsed.
        return a2a::rpc::exhausted(&serde_json::Value::Null, &A2aError::from(e));
    }
    if path.starts_with(&format!("{}/", a2a::rest::PATH)) {
        let e = A2aError::from(e);
        let (status, body) = e.rest_error(SpecVersion::default());
        let mut r = (status, axum::Json(body)).into_response();
        if let Some(s) = e.retry_after_s() {
            r.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(s));
        }
        return r;
    }
    ApiError(e).into_response()
}
