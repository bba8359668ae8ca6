//! The HTTP toolkit every HTTP front shares (admin, member API, console, MCP, the A2A push
//! receiver): the JSON error shape and its status table, bearer authentication with the declared
//! agent identity, the typed JSON body, the answer to an unknown route, the access log
//! ([`access`]), `GET /metrics` ([`metrics`]) and `Connection: close` on answers given before
//! their request body was read ([`unread`]).
//!
//! It stands beside the fronts, on the service: it decodes and encodes, and holds no rule. No
//! front imports another front's plumbing; they import this.

pub mod access;
pub mod metrics;
pub mod unread;

use axum::Json;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::domain::AgentIdentity;
use crate::service::{Caller, ErrorCode, Service, ServiceError};

/// The header an agent may use to declare its identity (`agent_id@host:session`); never trusted.
pub const AGENT_HEADER: &str = "liaison-agent";

/// The header by which liaison's own CLI says it is the CLI (`Liaison-Client: cli`), so the
/// audit log records admin changes made with it as `via: cli`; anything else is `via: api`.
/// Self-declared: it names the path, it never authorises.
pub const CLIENT_HEADER: &str = "liaison-client";

/// A service error as an HTTP response: `{"error": {"code", "message", "details"}}`.
pub struct ApiError(pub ServiceError);

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        ApiError(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(http_status(self.0.code))
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, Json(serde_json::json!({ "error": self.0 }))).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        if let Some(s) = self.0.retry_after_s() {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(s));
        }
        response
    }
}

/// The credential of the `Authorization` header when its scheme is `Bearer`: the one parser every
/// front uses (A2A's three bindings, MCP, the admin and member APIs, `/metrics`).
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    bearer_credential(headers.get(header::AUTHORIZATION)?.to_str().ok()?)
}

/// The credential of an `Authorization` value with the `Bearer` scheme: the scheme is
/// case-insensitive (RFC 9110 §11.1) and separated from the credential by spaces or tabs.
pub fn bearer_credential(value: &str) -> Option<&str> {
    let value = value.trim_start_matches([' ', '\t']);
    let split = value.find([' ', '\t'])?;
    let (scheme, credential) = value.split_at(split);
    let credential = credential.trim_matches([' ', '\t']);
    (scheme.eq_ignore_ascii_case("bearer") && !credential.is_empty()).then_some(credential)
}

/// Reads `Authorization: Bearer …` and resolves it; `Liaison-Agent` adds the declared identity.
pub async fn authenticate(service: &Service, headers: &HeaderMap) -> Result<Caller, ServiceError> {
    let secret = bearer(headers).ok_or_else(|| {
        ServiceError::new(
            ErrorCode::Unauthenticated,
            "send Authorization: Bearer <token>",
        )
    })?;
    let caller = service.authenticate(secret).await?;
    let agent = match headers.get(AGENT_HEADER).map(|v| v.to_str()) {
        None => None,
        Some(Ok(v)) => Some(AgentIdentity::parse(v)?),
        Some(Err(_)) => {
            return Err(ServiceError::invalid(
                "the Liaison-Agent header is not visible ASCII",
            ));
        }
    };
    let via = match headers.get(CLIENT_HEADER).map(|v| v.as_bytes()) {
        Some(b"cli") => crate::domain::DecisionPath::Cli,
        _ => crate::domain::DecisionPath::Api,
    };
    Ok(caller.declaring(agent).arriving_via(via))
}

/// The audit entries `q` selects as JSON lines (`application/jsonl`, one entry per line, oldest
/// first), read a page at a time while the body streams; the admin API's and the console's
/// export. A bad filter is refused before anything is sent.
pub async fn audit_lines(
    service: Service,
    caller: Caller,
    q: crate::service::AuditQuery,
) -> Result<Response, ServiceError> {
    let q = crate::service::AuditQuery {
        limit: Some(crate::service::MAX_AUDIT_PAGE),
        ..q
    };
    let first = service.audit(&caller, &q).await?;
    let pages = futures::stream::unfold(Some((first, q)), move |state| {
        let service = service.clone();
        let caller = caller.clone();
        async move {
            let (page, mut q) = state?;
            if page.is_empty() {
                return None;
            }
            let mut lines = Vec::new();
            for e in &page {
                serde_json::to_writer(&mut lines, e).ok()?;
                lines.push(b'\n');
            }
            let next = if page.len() as i64 == crate::service::MAX_AUDIT_PAGE {
                q.after = page.last().map(|e| e.seq);
                match service.audit(&caller, &q).await {
                    Ok(next) => Some((next, q)),
                    Err(e) => {
                        tracing::error!(error = %e.message, "The audit export stopped early.");
                        None
                    }
                }
            } else {
                None
            };
            Some((Ok::<_, std::io::Error>(lines), next))
        }
    });
    Ok((
        [
            (header::CONTENT_TYPE, "application/jsonl"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"liaison-audit.jsonl\"",
            ),
        ],
        axum::body::Body::from_stream(pages),
    )
        .into_response())
}

/// The authenticated caller of an HTTP request.
pub struct Authed(pub Caller);

impl FromRequestParts<Service> for Authed {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        service: &Service,
    ) -> Result<Self, Self::Rejection> {
        Ok(Authed(authenticate(service, &parts.headers).await?))
    }
}

/// A handler's answer: JSON, or the error shape.
pub type ApiResult<T> = Result<Json<T>, ApiError>;

/// A JSON request body whose rejections (bad JSON, wrong content type, wrong fields) come back in
/// the API's error shape with `invalid_input`.
pub struct Body<T>(pub T);

impl<T: serde::de::DeserializeOwned, S: Send + Sync> axum::extract::FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        // Every string of every body obeys the storable rule, whatever the request type.
        let (parts, body) = req.into_parts();
        let bytes = <axum::body::Bytes as axum::extract::FromRequest<S>>::from_request(
            axum::extract::Request::from_parts(parts.clone(), body),
            state,
        )
        .await
        .map_err(|rejection| ApiError(ServiceError::invalid(rejection.body_text())))?;
        crate::service::storable_json_text("request", &bytes).map_err(ApiError)?;
        let req = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
        match <Json<T> as axum::extract::FromRequest<S>>::from_request(req, state).await {
            Ok(Json(v)) => Ok(Body(v)),
            Err(rejection) => Err(ApiError(ServiceError::invalid(rejection.body_text()))),
        }
    }
}

/// Refuses a request whose address holds a character no backend can store (`%00`), in the API's
/// error shape, before any id in it is looked up (the admin and member APIs' layer).
pub async fn storable_address(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let address = request
        .uri()
        .path_and_query()
        .map_or("", |p| p.as_str())
        .to_owned();
    match crate::service::storable_address(&address) {
        Ok(()) => next.run(request).await,
        Err(e) => ApiError(e).into_response(),
    }
}

/// The answer to a request no route matches, on every prefix (the app's router fallback): `404`
/// in the API's error shape, before any authentication, so a typo is never reported as a missing
/// or insufficient token. A2A's own prefixes answer in their binding's shape (HTTP+JSON routes,
/// gRPC `UNIMPLEMENTED`) before this is reached.
pub async fn unknown_route(method: axum::http::Method) -> ApiError {
    ApiError(ServiceError::new(
        ErrorCode::NotFound,
        format!(
            "no {method} route here: the APIs are under /admin/v1, /api/v1, /a2a, /mcp and \
             /console (see the README)"
        ),
    ))
}

/// The HTTP status of a service error code: the one table of every HTTP front (admin, member
/// API, console, MCP's HTTP answers). A2A has its own table, per binding (`wire::errors`).
pub fn http_status(code: ErrorCode) -> u16 {
    match code {
        ErrorCode::Unauthenticated | ErrorCode::TokenExpired | ErrorCode::TokenRevoked => 401,
        ErrorCode::Forbidden | ErrorCode::DeniedByPolicy => 403,
        ErrorCode::NotFound => 404,
        ErrorCode::InvalidInput | ErrorCode::ThreadRequired | ErrorCode::CursorAhead => 400,
        ErrorCode::ThreadClosed
        | ErrorCode::AlreadyClaimed
        | ErrorCode::StaleClaim
        | ErrorCode::NotClaimable
        | ErrorCode::ApprovalPending
        | ErrorCode::ApprovalDecided
        | ErrorCode::ApprovalExpired
        | ErrorCode::LeaseHeld
        | ErrorCode::TaskTerminal
        | ErrorCode::TaskNotCancelable
        | ErrorCode::IdempotencyConflict
        | ErrorCode::KeysChanged
        | ErrorCode::SessionEnded
        | ErrorCode::AlreadyExists => 409,
        ErrorCode::CardRejected => 422,
        ErrorCode::RemoteUnreachable => 502,
        ErrorCode::TooManyWaiters
        | ErrorCode::RateLimited
        | ErrorCode::TooManyStreams
        | ErrorCode::TooManySessions
        | ErrorCode::TooManyTokens => 429,
        ErrorCode::Unavailable => 503,
        ErrorCode::Internal => 500,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for value in [
            "Bearer lsn_x",
            "bearer lsn_x",
            "BEARER lsn_x",
            "BeArEr  lsn_x ",
            "Bearer\tlsn_x",
        ] {
            assert_eq!(bearer_credential(value), Some("lsn_x"), "{value:?}");
        }
        for value in [
            "Basic lsn_x",
            "Bearer",
            "Bearer ",
            "Bearerlsn_x",
            "lsn_x",
            "Bearers lsn_x",
        ] {
            assert_eq!(bearer_credential(value), None, "{value:?}");
        }
    }

    #[test]
    fn every_code_has_a_status_in_the_http_error_ranges() {
        for code in ErrorCode::ALL {
            let status = http_status(*code);
            assert!((400..600).contains(&status), "{code}");
        }
    }
}
