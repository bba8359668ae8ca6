//! The web console at `/console` (SPEC §11) and the single-use approval links (SPEC §5): pages
//! rendered on the server from the templates beside this file, one stylesheet, one small script
//! for live updates over server-sent events. Decode, call the service, encode: the rules (links,
//! sessions, CSRF, who decides) live in `service::sessions` and `service::approvals`.
//!
//! - `links`: login links, approval links (confirmation page, then a POST), and the admin routes
//!   that issue them.
//! - `session`: what the signed-in pages share (the session, the frame, form decoding).
//! - `pages`: the signed-in pages (approvals, threads, fleet, leases), decisions, logout and the
//!   event stream; `GET /console/approvals/{id}` dispatches to a link's page or the signed-in one.
//! - `compose`: writing a new thread as the person herself; `thread`: one thread, live, with its
//!   reply and close forms; `timeline`: its messages, approvals, claim and progress notes in
//!   order; `markdown`: message bodies rendered safely; `upload`: the writing forms' fields and
//!   files, and attachments served back as downloads.
//! - `activity`: a channel's weekly figures as small SVG charts with their numbers.
//! - `agents`: "connect an agent": a member's own agent tokens, with ready settings.
//! - `consent`: the OAuth consent page an MCP client's authorization request leads to.
//! - `errors`: the unknown page, a POST-only address opened with GET, and error pages that
//!   keep the navigation of a signed-in reader.
//! - `view`: the approval card both show.
//! - `refill`: every refused form shown again with everything she sent.
//! - `admin`: the admin half (people and tokens, channels, parties, remotes, webhooks,
//!   deliveries, keys, audit), for sessions opened by an admin login link.
//!
//! Every console response carries a strict Content-Security-Policy (no inline script or style, no
//! framing), `X-Frame-Options: DENY`, `Referrer-Policy: no-referrer` (link secrets sit in URLs)
//! and, except for the static files, `Cache-Control: no-store` (pages hold CSRF tokens).

mod activity;
mod admin;
mod agents;
mod compose;
mod consent;
mod errors;
mod links;
mod markdown;
mod pages;
mod personal;
mod refill;
mod session;
mod thread;
mod timeline;
mod tool_rules;
mod upload;
mod view;
mod when;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use minijinja::Environment;
use serde::Serialize;

use crate::domain::{Label, text};
use crate::service::{ErrorCode, Service, ServiceError};

/// The cookie holding a console session's secret.
const SESSION_COOKIE: &str = "liaison_session";
/// The cookie holding the CSRF token of a link's confirmation page (double submit: the form
/// carries the same token, and a cross-site form cannot send this SameSite=Strict cookie).
const FORM_COOKIE: &str = "liaison_form";

/// What every console handler shares.
#[derive(Clone)]
struct Console {
    service: Service,
    /// What links advertise (`{public_url}/console/…`).
    public_url: Arc<str>,
    /// Cookies get `Secure` when the console is served over https.
    secure: bool,
    templates: Arc<Environment<'static>>,
}

/// The console's routes and the admin routes issuing its links.
pub fn router(service: Service, public_url: &str) -> Router {
    let state = Console {
        service,
        public_url: public_url.trim_end_matches('/').into(),
        secure: public_url.starts_with("https://"),
        templates: Arc::new(templates()),
    };
    pages::routes()
        .merge(workspace_routes())
        .merge(admin::routes())
        .layer(axum::extract::DefaultBodyLimit::max(upload::MAX_FORM_BYTES))
        .layer(axum::middleware::from_fn(refill::keep))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            errors::keep_navigation,
        ))
        .layer(axum::middleware::from_fn(errors::storable_address))
        .merge(links::routes())
        .layer(axum::middleware::map_response(security_headers))
        .merge(links::admin_routes())
        // The consent page sets its own headers (its form-action admits the client's redirect).
        .merge(consent::routes())
        .with_state(state)
}

/// The member's writing, connecting and activity pages.
fn workspace_routes() -> Router<Console> {
    use axum::routing::{get, post};
    Router::new()
        .route("/console/threads/{id}", get(thread::page))
        .route(
            "/console/threads/{id}/reply",
            post(thread::reply).get(errors::form_address),
        )
        .route(
            "/console/threads/{id}/close",
            post(thread::close).get(errors::form_address),
        )
        .route("/console/activity", get(activity::page))
        .route("/console/agents", get(agents::page).post(agents::issue))
        .route(
            "/console/agents/{id}/connection",
            post(agents::update).get(errors::form_address),
        )
        .route(
            "/console/agents/{id}/revoke",
            post(agents::revoke).get(errors::form_address),
        )
        .route("/console/compose", get(compose::page).post(compose::post))
        .route(
            "/console/sessions",
            get(personal::list).post(personal::open),
        )
        .route("/console/sessions/{id}", get(personal::panel))
        .route(
            "/console/sessions/{id}/commands",
            post(personal::command).get(errors::form_address),
        )
        .route(
            "/console/sessions/{id}/code",
            post(personal::code).get(errors::form_address),
        )
        .route(
            "/console/sessions/{id}/end",
            post(personal::end).get(errors::form_address),
        )
        .route(
            "/console/sessions/{id}/answer",
            post(personal::answer).get(errors::form_address),
        )
        .route(
            "/console/sessions/{id}/rights",
            post(personal::rights).get(errors::form_address),
        )
        .route(
            "/console/sessions/{id}/decide",
            post(personal::decide).get(errors::form_address),
        )
        .route(
            "/console/tool-rules",
            get(tool_rules::page).post(tool_rules::change),
        )
        .route(
            "/console/confirmations/{id}/decide",
            post(personal::decide_confirmation).get(errors::form_address),
        )
        .route(
            "/console/messages/{id}/attachments/{n}",
            get(upload::attachment),
        )
        .route("/console/{*rest}", axum::routing::any(errors::unknown))
}

fn templates() -> Environment<'static> {
    let mut env = Environment::new();
    for (name, source) in [
        ("base.html", include_str!("templates/base.html")),
        ("approval.html", include_str!("templates/approval.html")),
        ("approvals.html", include_str!("templates/approvals.html")),
        ("link.html", include_str!("templates/link.html")),
        ("login.html", include_str!("templates/login.html")),
        ("message.html", include_str!("templates/message.html")),
        ("threads.html", include_str!("templates/threads.html")),
        ("thread.html", include_str!("templates/thread.html")),
        ("fleet.html", include_str!("templates/fleet.html")),
        ("leases.html", include_str!("templates/leases.html")),
        ("compose.html", include_str!("templates/compose.html")),
        ("consent.html", include_str!("templates/consent.html")),
        ("agents.html", include_str!("templates/agents.html")),
        ("activity.html", include_str!("templates/activity.html")),
        ("sessions.html", include_str!("templates/sessions.html")),
        ("session.html", include_str!("templates/session.html")),
        (
            "confirmation.html",
            include_str!("templates/confirmation.html"),
        ),
        (
            "confirmation_link.html",
            include_str!("templates/confirmation_link.html"),
        ),
        ("snippets.html", include_str!("templates/snippets.html")),
        ("tool_rules.html", include_str!("templates/tool_rules.html")),
        ("admin/nav.html", include_str!("templates/admin/nav.html")),
        (
            "admin/person_choice.html",
            include_str!("templates/admin/person_choice.html"),
        ),
        (
            "admin/preview.html",
            include_str!("templates/admin/preview.html"),
        ),
        (
            "admin/people.html",
            include_str!("templates/admin/people.html"),
        ),
        (
            "admin/channels.html",
            include_str!("templates/admin/channels.html"),
        ),
        (
            "admin/channel.html",
            include_str!("templates/admin/channel.html"),
        ),
        (
            "admin/parties.html",
            include_str!("templates/admin/parties.html"),
        ),
        (
            "admin/oauth.html",
            include_str!("templates/admin/oauth.html"),
        ),
        (
            "admin/remotes.html",
            include_str!("templates/admin/remotes.html"),
        ),
        (
            "admin/remote.html",
            include_str!("templates/admin/remote.html"),
        ),
        (
            "admin/remote_offers.html",
            include_str!("templates/admin/remote_offers.html"),
        ),
        ("admin/keys.html", include_str!("templates/admin/keys.html")),
        (
            "admin/audit.html",
            include_str!("templates/admin/audit.html"),
        ),
        (
            "admin/webhooks.html",
            include_str!("templates/admin/webhooks.html"),
        ),
        (
            "admin/deliveries.html",
            include_str!("templates/admin/deliveries.html"),
        ),
        (
            "admin/delivery.html",
            include_str!("templates/admin/delivery.html"),
        ),
    ] {
        env.add_template(name, source)
            .expect("the console's templates are valid");
    }
    env.add_filter("when", when::when);
    env
}

async fn security_headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

impl Console {
    fn render(
        &self,
        name: &str,
        context: impl Into<minijinja::Value>,
    ) -> Result<Html<String>, Page> {
        self.templates
            .get_template(name)
            .and_then(|t| t.render(context))
            .map(Html)
            .map_err(|e| {
                tracing::error!(template = name, error = %e, "Could not render a console page.");
                Page::from(ServiceError::new(
                    ErrorCode::Internal,
                    "the page could not be rendered",
                ))
            })
    }

    /// `Set-Cookie` for `name`, readable by the server only, sent only from console pages.
    fn cookie(&self, name: &str, value: &str, path: &str, max_age_s: u64) -> HeaderValue {
        let secure = if self.secure { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{name}={value}; Path={path}; Max-Age={max_age_s}; HttpOnly; SameSite=Strict{secure}"
        ))
        .expect("cookie values are URL-safe")
    }
}

/// The value of cookie `name` in the request, if any.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

/// The HTTP status of a service refusal, as every front answers it.
fn status_of(e: &ServiceError) -> StatusCode {
    StatusCode::from_u16(crate::http::http_status(e.code))
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// An error shown as a page: status, title and the service's message.
struct Page {
    status: StatusCode,
    title: &'static str,
    error: ServiceError,
    /// Whether the reader is signed in (for the "back" link).
    back: bool,
    templates: Option<Arc<Environment<'static>>>,
}

impl From<ServiceError> for Page {
    fn from(error: ServiceError) -> Self {
        let status = status_of(&error);
        let title = match error.code {
            ErrorCode::Unauthenticated | ErrorCode::TokenExpired | ErrorCode::TokenRevoked => {
                "This link or session cannot be used"
            }
            ErrorCode::Forbidden => "Not allowed",
            ErrorCode::NotFound => "Not found",
            ErrorCode::InvalidInput => "Something is missing",
            ErrorCode::ApprovalDecided | ErrorCode::ApprovalExpired => "Already settled",
            _ if status.is_server_error() => "Something went wrong",
            _ => "Not done",
        };
        Page {
            status,
            title,
            error,
            back: false,
            templates: None,
        }
    }
}

impl Page {
    fn with(mut self, console: &Console, back: bool) -> Self {
        self.templates = Some(console.templates.clone());
        self.back = back;
        self
    }

    fn method_not_allowed() -> Self {
        Page {
            status: StatusCode::METHOD_NOT_ALLOWED,
            title: "Decisions need a POST",
            error: ServiceError::invalid(
                "a decision is made with a button on the confirmation page (a POST), never by \
                 opening an address; nothing was changed",
            ),
            back: false,
            templates: None,
        }
    }
}

impl IntoResponse for Page {
    fn into_response(self) -> Response {
        let context = minijinja::context! {
            title => self.title,
            message => self.error.message.clone(),
            code => self.error.code.as_str(),
            tone => "error",
            back => self.back.then_some("/console"),
        };
        let env = self.templates.unwrap_or_else(|| Arc::new(templates()));
        let body = env
            .get_template("message.html")
            .and_then(|t| t.render(context))
            .unwrap_or_else(|_| "liaison: the error page could not be rendered".to_owned());
        let mut response = (self.status, Html(body)).into_response();
        response.extensions_mut().insert(errors::Shown {
            title: self.title,
            message: self.error.message,
            code: self.error.code.as_str(),
        });
        if self.status == StatusCode::METHOD_NOT_ALLOWED {
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
        }
        response
    }
}

/// One span of a label: the author's name is shown strong, the rest as text.
#[derive(Debug, Serialize)]
struct LabelPart {
    text: String,
    strong: bool,
}

/// The label's sentence in spans: its `**…**` marks the author's name; no other markup is kept.
fn label_parts(label: &Label) -> Vec<LabelPart> {
    text::one_line(&label.text)
        .split("**")
        .enumerate()
        .filter(|(_, t)| !t.is_empty())
        .map(|(i, t)| LabelPart {
            text: t.replace('*', ""),
            strong: i % 2 == 1,
        })
        .collect()
}

/// A GET on a decision route: refused, nothing changes.
async fn no_get_decision(axum::extract::State(c): axum::extract::State<Console>) -> Page {
    Page::method_not_allowed().with(&c, false)
}

/// The address of a login link: the page that signs its person in.
pub fn login_link_url(public_url: &str, secret: &str) -> String {
    format!("{public_url}/console/login?link={secret}")
}

/// The address of an approval link: the page that shows the exact action and decides it once.
pub fn approval_link_url(public_url: &str, id: &str, secret: &str) -> String {
    format!("{public_url}/console/approvals/{id}?link={secret}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Impact, LabelLanguage};

    #[test]
    fn labels_keep_the_author_strong_and_drop_markdown() {
        let label = Label::new("Alice Martin", Some(Impact::Code), LabelLanguage::En);
        let parts = label_parts(&label);
        assert_eq!(parts[0].text, "Data written by the agent of ");
        assert!(!parts[0].strong);
        assert_eq!(parts[1].text, "Alice Martin");
        assert!(parts[1].strong);
        assert!(parts.iter().all(|p| !p.text.contains('*')));
        assert!(parts[2].text.ends_with("(Requested effect: code.)"));
    }

    #[test]
    fn cookies_are_found_by_exact_name() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("x_liaison_session=no; liaison_session=yes"),
        );
        assert_eq!(cookie(&h, SESSION_COOKIE), Some("yes"));
        assert_eq!(cookie(&h, FORM_COOKIE), None);
    }

    #[test]
    fn every_template_renders_escaping_what_it_is_given() {
        let env = templates();
        let html = env
            .get_template("message.html")
            .unwrap()
            .render(minijinja::context! { title => "t", message => "<script>alert(1)</script>" })
            .unwrap();
        assert!(html.contains("&lt;script&gt;") && !html.contains("<script>alert"));
    }
}
