//! The OAuth front (SPEC §7): liaison as the authorization server of its own MCP resource.
//! Decode, call the service, encode; the rules are `service::oauth` and `service::oauth_grants`.
//! The consent page itself is a console page (`console::consent`); the protected-resource
//! metadata and the `WWW-Authenticate` challenges are the MCP front's.
//!
//! | route | does |
//! |---|---|
//! | `GET /.well-known/oauth-authorization-server` | RFC 8414 metadata |
//! | `POST /oauth/register` | RFC 7591 dynamic registration (JSON), rate-limited per address |
//! | `GET /oauth/authorize` | checks the request, then sends the member to the consent page |
//! | `POST /oauth/token` | RFC 6749 §4.1.3 (code + PKCE verifier) and §6 (refresh, rotated) |
//! | `POST /oauth/revoke` | RFC 7009: either token revokes the grant |
//!
//! With `[oauth] enabled = false` every one of them is an unknown route (404). The JSON endpoints
//! answer any origin (`Access-Control-Allow-Origin: *`, no credentials): browser-based MCP
//! clients call them cross-origin, and they carry no cookie. Depends on `service`, `domain` and
//! `http`; nothing depends on it but `app`. Protocol decisions: `README.md` beside this file.

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::domain::oauth::{OAuthError, OAuthErrorCode, form_encode};
use crate::service::{AuthorizeParams, AuthorizeRefusal, ClientMetadata, Service, TokenParams};

/// Where the authorization server metadata lives (RFC 8414 §3, an issuer without a path).
pub const METADATA_PATH: &str = "/.well-known/oauth-authorization-server";
/// The console page the authorization endpoint sends the member to.
pub const CONSENT_PATH: &str = "/console/oauth/consent";
/// Largest registration request, in bytes.
const MAX_REGISTRATION_BYTES: usize = 16 * 1024;

/// The OAuth routes.
pub fn router(service: Service) -> Router {
    Router::new()
        .route(METADATA_PATH, get(metadata))
        .route("/oauth/register", post(register))
        .route("/oauth/authorize", get(authorize))
        .route("/oauth/token", post(token))
        .route("/oauth/revoke", post(revoke))
        .layer(middleware::from_fn_with_state(service.clone(), gate))
        .with_state(service)
}

/// 404 when OAuth is off; CORS for the JSON endpoints (preflights answered here).
async fn gate(State(service): State<Service>, req: Request, next: Next) -> Response {
    if !service.oauth_settings().enabled {
        return crate::http::unknown_route(req.method().clone())
            .await
            .into_response();
    }
    let cors = req.uri().path() != "/oauth/authorize";
    let mut response = if req.method() == Method::OPTIONS && cors {
        StatusCode::NO_CONTENT.into_response()
    } else {
        next.run(req).await
    };
    if cors {
        let h = response.headers_mut();
        h.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, OPTIONS"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("content-type, authorization, mcp-protocol-version"),
        );
    }
    response
}

/// An OAuth error as JSON (RFC 6749 §5.2), with `Retry-After` when it says to wait.
struct Refused(OAuthError);

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.0.code.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
        let mut response = (
            status,
            no_store(),
            axum::Json(serde_json::json!({
                "error": self.0.code.as_str(),
                "error_description": self.0.description,
            })),
        )
            .into_response();
        if let Some(s) = self.0.retry_after_s {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        response
    }
}

fn no_store() -> [(header::HeaderName, &'static str); 2] {
    [
        (header::CACHE_CONTROL, "no-store"),
        (header::PRAGMA, "no-cache"),
    ]
}

/// RFC 8414 metadata: the endpoints, and what this server offers (the MCP authorization
/// specification's requirements: S256, public clients, metadata documents).
async fn metadata(State(service): State<Service>) -> Response {
    let settings = service.oauth_settings();
    let base = settings.base();
    let doc = serde_json::json!({
        "issuer": settings.issuer,
        "authorization_endpoint": format!("{base}/oauth/authorize"),
        "token_endpoint": format!("{base}/oauth/token"),
        "registration_endpoint": format!("{base}/oauth/register"),
        "revocation_endpoint": format!("{base}/oauth/revoke"),
        "scopes_supported": ["agent"],
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "client_id_metadata_document_supported": true,
        // Every redirect back to the client carries `iss` (RFC 9207), but the metadata does not
        // advertise it: the official Python SDK then demands `iss` and compares it with the
        // issuer it renders with a `/` added to a root URL, which an RFC 8414 issuer never is,
        // so advertising it would shut that SDK's clients out (src/oauth/README.md).
        "service_documentation": format!("{base}/console/agents"),
    });
    let mut response = axum::Json(doc).into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    response
}

async fn register(State(service): State<Service>, req: Request) -> Response {
    let from = req
        .extensions()
        .get::<crate::net::ClientAddr>()
        .map_or(std::net::IpAddr::from([0, 0, 0, 0]), |c| c.0.ip());
    let body = match axum::body::to_bytes(req.into_body(), MAX_REGISTRATION_BYTES).await {
        Ok(b) => b,
        Err(_) => {
            return Refused(OAuthError::new(
                OAuthErrorCode::InvalidClientMetadata,
                format!("a registration is at most {MAX_REGISTRATION_BYTES} bytes of JSON"),
            ))
            .into_response();
        }
    };
    let metadata = match parse_metadata(&body) {
        Ok(m) => m,
        Err(e) => return Refused(e).into_response(),
    };
    match service.oauth_register(from, metadata).await {
        Ok(answer) => (StatusCode::CREATED, no_store(), axum::Json(answer)).into_response(),
        Err(e) => Refused(e).into_response(),
    }
}

fn parse_metadata(body: &Bytes) -> Result<ClientMetadata, OAuthError> {
    serde_json::from_slice(body).map_err(|e| {
        OAuthError::new(
            OAuthErrorCode::InvalidClientMetadata,
            format!("the registration is not client metadata as JSON: {e}"),
        )
    })
}

/// Checks the request and sends the member to the consent page with the same parameters; a
/// refusal goes back to the client's redirect URI, or is shown when that cannot be trusted.
async fn authorize(
    State(service): State<Service>,
    q: Result<Query<AuthorizeParams>, QueryRejection>,
) -> Response {
    let params = match q {
        Ok(Query(p)) => p,
        Err(e) => {
            return shown(OAuthError::request(format!(
                "the authorization request's parameters cannot be read ({}); each appears at most once",
                e.body_text()
            )));
        }
    };
    match service.oauth_authorization(&params).await {
        Ok(_) => Redirect::to(&consent_url(&params)).into_response(),
        Err(AuthorizeRefusal::Redirect(to)) => Redirect::to(&to).into_response(),
        Err(AuthorizeRefusal::Shown(e)) => shown(e),
    }
}

/// The consent page's address for these parameters.
pub fn consent_url(p: &AuthorizeParams) -> String {
    let fields = [
        ("response_type", &p.response_type),
        ("client_id", &p.client_id),
        ("redirect_uri", &p.redirect_uri),
        ("code_challenge", &p.code_challenge),
        ("code_challenge_method", &p.code_challenge_method),
        ("state", &p.state),
        ("scope", &p.scope),
        ("resource", &p.resource),
    ];
    let query: Vec<String> = fields
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={}", form_encode(v))))
        .collect();
    format!("{CONSENT_PATH}?{}", query.join("&"))
}

/// A refusal the member sees (the client cannot be sent one): a small page, not frameable.
fn shown(e: OAuthError) -> Response {
    let escape = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Cannot connect</title>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"></head><body>\
         <h1>This app cannot connect</h1><p>{}</p><p><code>{}</code></p></body></html>",
        escape(&e.description),
        e.code.as_str()
    );
    let mut response = (StatusCode::BAD_REQUEST, Html(html)).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The token endpoint. A client secret is never issued; `Authorization: Basic` naming the client
/// is read for its `client_id` only.
async fn token(
    State(service): State<Service>,
    headers: HeaderMap,
    form: Result<Form<TokenParams>, FormRejection>,
) -> Response {
    let mut params = match form {
        Ok(Form(p)) => p,
        Err(e) => {
            return Refused(OAuthError::request(format!(
                "the token request is not a form (application/x-www-form-urlencoded): {}",
                e.body_text()
            )))
            .into_response();
        }
    };
    if params.client_id.is_none() {
        params.client_id = basic_client_id(&headers);
    }
    match service.oauth_token(params).await {
        Ok(answer) => (StatusCode::OK, no_store(), axum::Json(answer)).into_response(),
        Err(e) => Refused(e).into_response(),
    }
}

/// The client id of an `Authorization: Basic` header (a client that authenticates so, with the
/// empty secret it was never given).
fn basic_client_id(headers: &HeaderMap) -> Option<String> {
    use base64::Engine as _;
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let encoded = value
        .strip_prefix("Basic ")
        .or_else(|| value.strip_prefix("basic "))?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let id = text.split(':').next()?;
    Some(percent_decode(id)).filter(|s| !s.is_empty())
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[derive(Deserialize)]
struct RevokeParams {
    token: Option<String>,
    #[allow(dead_code)]
    token_type_hint: Option<String>,
    client_id: Option<String>,
}

/// RFC 7009: 200 whether or not the token was known.
async fn revoke(
    State(service): State<Service>,
    headers: HeaderMap,
    form: Result<Form<RevokeParams>, FormRejection>,
) -> Response {
    let params = match form {
        Ok(Form(p)) => p,
        Err(e) => {
            return Refused(OAuthError::request(format!(
                "the revocation request is not a form: {}",
                e.body_text()
            )))
            .into_response();
        }
    };
    let Some(token) = params.token.filter(|t| !t.is_empty() && t.len() <= 500) else {
        return Refused(OAuthError::request("token is required")).into_response();
    };
    let client = params.client_id.or_else(|| basic_client_id(&headers));
    match service.oauth_revoke(&token, client.as_deref()).await {
        Ok(()) => (StatusCode::OK, no_store()).into_response(),
        Err(e) => Refused(e).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consent_urls_carry_every_parameter_encoded() {
        let p = AuthorizeParams {
            client_id: Some("ocl_1".into()),
            redirect_uri: Some("http://127.0.0.1:5/cb?a=b".into()),
            state: Some("x y&z".into()),
            ..Default::default()
        };
        assert_eq!(
            consent_url(&p),
            "/console/oauth/consent?client_id=ocl_1&redirect_uri=http%3A%2F%2F127.0.0.1%3A5%2Fcb%3Fa%3Db&state=x%20y%26z"
        );
    }

    #[test]
    fn a_basic_header_names_the_client() {
        use base64::Engine as _;
        let mut h = HeaderMap::new();
        let v = base64::engine::general_purpose::STANDARD.encode("ocl_a%2Bb:");
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Basic {v}")).unwrap(),
        );
        assert_eq!(basic_client_id(&h).as_deref(), Some("ocl_a+b"));
    }
}
