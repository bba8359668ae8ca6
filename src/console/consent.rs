//! The OAuth consent page (SPEC §7): where `/oauth/authorize` sends the member. Signed in with
//! the console's own sign-in, she sees the app's name and where it will send her back (both
//! marked self-declared), names the connection and picks its rights (Connect's choices), then
//! allows or denies. The rules are the service's (`Service::oauth_authorization`,
//! `Service::oauth_consent`).
//!
//! Safety: the form carries the session's CSRF token (and the session cookie is SameSite=Strict),
//! and a MAC over the request's parameters and that token (`Service::oauth_binding`), so what is
//! granted is exactly what the page showed, to the session it showed it to. The page cannot be
//! framed (`frame-ancestors 'none'`, `X-Frame-Options: DENY`). Its `form-action` admits the
//! client's redirect URI's origin besides `'self'`, because the answer to the form is a redirect
//! there (browsers apply the form page's `form-action` to the form's redirects).
//!
//! Arriving from another site (the app sent her here), a browser withholds SameSite=Strict
//! cookies; a signed-in member would look signed out. A request without a session whose
//! `Sec-Fetch-Site` is `cross-site` is therefore answered with a page that reloads itself from
//! this site at once (a same-site navigation, which carries the cookie).

use axum::Router;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use super::agents::RightsFields;
use super::session::{Session, form, session};
use super::{Console, Page};
use crate::domain::oauth::redirect_origin;
use crate::domain::{ConnectionRights, ConnectionSlug, Impact, RightLevel};
use crate::service::{
    AuthorizationRequest, AuthorizeParams, AuthorizeRefusal, Consent, ConsentError, ServiceError,
    slug_from,
};

/// The page's address.
const PATH: &str = "/console/oauth/consent";

pub(super) fn routes() -> Router<Console> {
    Router::new().route(PATH, get(page).post(decide))
}

/// The console's headers, with `form-action` also admitting `also` (the client's redirect).
fn headers(mut response: Response, also: Option<&str>) -> Response {
    let action = match also {
        Some(origin) if !origin.is_empty() => format!("'self' {origin}"),
        _ => "'self'".to_owned(),
    };
    let csp = format!(
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
         connect-src 'self'; form-action {action}; frame-ancestors 'none'; base-uri 'none'"
    );
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&csp) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A 303 to `to` (the client), allowed by the page's `form-action`.
fn back_to(to: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    headers(response, Some(&redirect_origin(to)))
}

fn refused(c: &Console, e: ServiceError) -> Response {
    headers(Page::from(e).with(c, true).into_response(), None)
}

/// An authorization refusal as the member meets it.
fn refusal(c: &Console, r: AuthorizeRefusal) -> Response {
    match r {
        AuthorizeRefusal::Redirect(to) => back_to(&to),
        AuthorizeRefusal::Shown(e) => refused(
            c,
            ServiceError::invalid(format!(
                "this app's request cannot be accepted ({}): {}",
                e.code, e.description
            )),
        ),
    }
}

/// The parameters as hidden fields, in a fixed order.
fn fields(p: &AuthorizeParams) -> Vec<(&'static str, String)> {
    [
        ("response_type", &p.response_type),
        ("client_id", &p.client_id),
        ("redirect_uri", &p.redirect_uri),
        ("code_challenge", &p.code_challenge),
        ("code_challenge_method", &p.code_challenge_method),
        ("state", &p.state),
        ("scope", &p.scope),
        ("resource", &p.resource),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.clone().map(|v| (k, v)))
    .collect()
}

fn rights_rows(r: &ConnectionRights) -> Vec<(&'static str, &'static str)> {
    Impact::ALL
        .iter()
        .map(|i| (i.as_str(), r.level(*i).as_str()))
        .collect()
}

/// What the page shows again after a refused choice.
struct Chosen {
    connection: String,
    rights: ConnectionRights,
    error: Option<String>,
}

fn render(
    c: &Console,
    s: &Session,
    p: &AuthorizeParams,
    request: &AuthorizationRequest,
    chosen: Chosen,
    status: StatusCode,
) -> Response {
    let binding = match c.service.oauth_binding(&s.csrf, p) {
        Ok(b) => b,
        Err(e) => return refused(c, e),
    };
    let page = c.render(
        "consent.html",
        minijinja::context! {
            me => s.caller.person.display_name.as_str(),
            csrf => s.csrf.as_str(),
            page => "agents",
            live => false,
            admin => s.record.admin,
            person => s.caller.id().as_str(),
            client_name => request.client.name.as_str(),
            client_id => request.client.id.as_str(),
            document => request.client.kind == "metadata_document",
            redirect_uri => request.redirect_uri.as_str(),
            resource => request.resource.as_str(),
            params => fields(p),
            binding => binding,
            connection => chosen.connection,
            rights => rights_rows(&chosen.rights),
            levels => RightLevel::ALL.iter().map(|l| l.as_str()).collect::<Vec<_>>(),
            error => chosen.error,
        },
    );
    // The form's answer redirects to the client: the policy of the page holding the form is
    // the one the browser applies to that redirect.
    let origin = redirect_origin(&request.redirect_uri);
    match page {
        Ok(html) => headers((status, html).into_response(), Some(&origin)),
        Err(p) => headers(p.into_response(), None),
    }
}

/// `GET /console/oauth/consent?…`: the request, checked, and the form.
async fn page(
    State(c): State<Console>,
    request_headers: HeaderMap,
    q: Result<Query<AuthorizeParams>, QueryRejection>,
) -> Response {
    let p = match q {
        Ok(Query(p)) => p,
        Err(e) => {
            return refused(
                &c,
                ServiceError::invalid(format!(
                    "the app's request cannot be read ({}); start again from the app",
                    e.body_text()
                )),
            );
        }
    };
    let s = match session(&c, &request_headers).await {
        Ok(s) => s,
        Err(e) if crate::http::http_status(e.code) == 401 => {
            return signed_out(&c, &request_headers, &p, e);
        }
        Err(e) => return refused(&c, e),
    };
    let request = match c.service.oauth_authorization(&p).await {
        Ok(r) => r,
        Err(r) => return refusal(&c, r),
    };
    let chosen = Chosen {
        connection: slug_from(&request.client.name).to_string(),
        rights: ConnectionRights::default(),
        error: None,
    };
    render(&c, &s, &p, &request, chosen, StatusCode::OK)
}

/// No session: from another site, reload from this one (the cookie comes then); else the
/// sign-in page, saying to come back.
fn signed_out(
    c: &Console,
    request_headers: &HeaderMap,
    p: &AuthorizeParams,
    e: ServiceError,
) -> Response {
    let here = {
        let query: Vec<String> = fields(p)
            .into_iter()
            .map(|(k, v)| format!("{k}={}", crate::domain::oauth::form_encode(&v)))
            .collect();
        format!("{PATH}?{}", query.join("&"))
    };
    let cross_site = request_headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes() == b"cross-site");
    if cross_site {
        let escaped = here.replace('&', "&amp;").replace('"', "&quot;");
        let html = format!(
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta http-equiv=\"refresh\" content=\"0;url={escaped}\"><title>liaison</title></head>\
             <body><p><a href=\"{escaped}\">Continue to liaison</a></p></body></html>"
        );
        return headers(Html(html).into_response(), None);
    }
    let page = c.render(
        "login.html",
        minijinja::context! {
            title => "Sign in",
            message => format!(
                "{} Sign in to the console with your login link, then open this page again to \
                 allow the app: {}{here}",
                e.message, c.public_url
            ),
        },
    );
    match page {
        Ok(html) => headers((StatusCode::UNAUTHORIZED, html).into_response(), None),
        Err(p) => headers(p.into_response(), None),
    }
}

#[derive(Deserialize)]
struct DecisionForm {
    csrf: Option<String>,
    binding: Option<String>,
    decision: Option<String>,
    connection: Option<String>,
    #[serde(flatten)]
    rights: RightsFields,
    #[serde(flatten)]
    params: AuthorizeParams,
}

/// `POST /console/oauth/consent`: her decision on the request the page showed.
async fn decide(
    State(c): State<Console>,
    request_headers: HeaderMap,
    f: Result<Form<DecisionForm>, FormRejection>,
) -> Response {
    let s = match session(&c, &request_headers).await {
        Ok(s) => s,
        Err(e) => return refused(&c, e),
    };
    let f = match form(f) {
        Ok(f) => f,
        Err(e) => return refused(&c, e),
    };
    if let Err(e) = c.service.check_console_csrf(&s.secret, f.csrf.as_deref()) {
        return refused(&c, e);
    }
    let bound = c
        .service
        .oauth_binding(&s.csrf, &f.params)
        .is_ok_and(|b| f.binding.as_deref().is_some_and(|given| given == b));
    if !bound {
        return refused(
            &c,
            ServiceError::invalid(
                "this form does not match the request it was shown for; nothing was granted. \
                 Start again from the app",
            ),
        );
    }
    let choice = (|| {
        let connection = match f.connection.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(v) => Some(ConnectionSlug::parse(v).map_err(|e| ServiceError::invalid(e.0))?),
        };
        let rights = f.rights.parse()?.unwrap_or_default();
        Ok::<_, ServiceError>((connection, rights))
    })();
    let consent = match f.decision.as_deref() {
        Some("deny") => Ok(Consent::Deny),
        Some("allow") => choice.map(|(connection, rights)| Consent::Allow { connection, rights }),
        _ => Err(ServiceError::invalid("choose Allow or Deny")),
    };
    let result = match consent {
        Ok(consent) => c.service.oauth_consent(&s.caller, &f.params, consent).await,
        Err(e) => Err(ConsentError::Choice(e)),
    };
    match result {
        Ok(to) => back_to(&to),
        Err(ConsentError::Request(r)) => refusal(&c, r),
        Err(ConsentError::Choice(e)) => {
            let request = match c.service.oauth_authorization(&f.params).await {
                Ok(r) => r,
                Err(r) => return refusal(&c, r),
            };
            let chosen = Chosen {
                connection: f.connection.clone().unwrap_or_default(),
                rights: f.rights.parse().ok().flatten().unwrap_or_default(),
                error: Some(e.message.clone()),
            };
            render(&c, &s, &f.params, &request, chosen, super::status_of(&e))
        }
    }
}
