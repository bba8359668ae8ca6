//! Single-use links: console login links and approval links, and the admin routes issuing them.
//!
//! | route | does |
//! |---|---|
//! | `POST /admin/v1/login-links` `{"person", "expires_in_s"?}` | a login link (admins) |
//! | `POST /admin/v1/approvals/{id}/link` `{"for"?, "expires_in_s"?}` | an approval link (admins) |
//! | `GET /console/login?link=…` | "continue as …" page; uses nothing |
//! | `POST /console/login` | uses the login link, sets the session cookie |
//! | `GET /console/approvals/{id}?link=…` | the confirmation page: the exact action, two buttons |
//! | `POST /console/approvals/{id}/link` | uses the approval link: allow once, or reject with a reason |
//!
//! Opening a link (GET) never uses it, so a chat app's link preview cannot spend or decide it.
//! The page sets a SameSite=Strict cookie holding the CSRF token its form also carries; the POST
//! needs both, and the token must be the one recorded on the link.

use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;

use super::view::{Via, card};
use super::{Console, FORM_COOKIE, Page, SESSION_COOKIE, cookie, no_get_decision};
use crate::domain::tool_check::ConfirmationId;
use crate::domain::{ApprovalId, Decision, PersonId};
use crate::http::{ApiError, Body, authenticate};
use crate::service::{LINK_TTL_S, SESSION_TTL_S, ServiceError};
use crate::store::LinkKind;

pub(super) fn routes() -> Router<Console> {
    Router::new()
        .route("/console/login", axum::routing::get(login_page).post(login))
        .route(
            "/console/approvals/{id}/link",
            post(decide_by_link).get(no_get_decision),
        )
}

pub(super) fn admin_routes() -> Router<Console> {
    Router::new()
        .route("/admin/v1/login-links", post(issue_login_link))
        .route("/admin/v1/approvals/{id}/link", post(issue_approval_link))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoginLinkRequest {
    person: PersonId,
    /// A link to an admin console session (the person must hold a live admin token).
    #[serde(default)]
    admin: bool,
    expires_in_s: Option<u64>,
}

async fn issue_login_link(
    State(c): State<Console>,
    headers: HeaderMap,
    Body(body): Body<LoginLinkRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let admin = authenticate(&c.service, &headers).await?;
    let issued = if body.admin {
        c.service
            .issue_admin_login_link(&admin, &body.person, body.expires_in_s)
            .await?
    } else {
        c.service
            .issue_login_link(&admin, &body.person, body.expires_in_s)
            .await?
    };
    let url = super::login_link_url(&c.public_url, &issued.secret);
    Ok(Json(serde_json::json!({ "link": issued.link, "url": url })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApprovalLinkRequest {
    /// The approver the link decides as; default: the approval's first approver.
    #[serde(rename = "for")]
    person: Option<PersonId>,
    expires_in_s: Option<u64>,
}

async fn issue_approval_link(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Body(body): Body<ApprovalLinkRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let admin = authenticate(&c.service, &headers).await?;
    let id = ApprovalId::parse(&id).map_err(|_| ServiceError::not_found("approval", &id))?;
    let issued = c
        .service
        .issue_approval_link(&admin, &id, body.person.as_ref(), body.expires_in_s)
        .await?;
    let url = super::approval_link_url(&c.public_url, id.as_str(), &issued.secret);
    Ok(Json(serde_json::json!({ "link": issued.link, "url": url })))
}

#[derive(Deserialize, Default)]
pub(super) struct LinkQuery {
    pub(super) link: Option<String>,
    signed_out: Option<String>,
}

/// The login page: with a link, "continue as …"; without, how to get one.
async fn login_page(
    State(c): State<Console>,
    q: Result<Query<LinkQuery>, QueryRejection>,
) -> Result<Response, Page> {
    let q = q.map(|q| q.0).unwrap_or_default();
    let Some(secret) = q.link else {
        let notice = q.signed_out.map(|_| "You are signed out.");
        return c
            .render(
                "login.html",
                minijinja::context! {
                    notice => notice,
                    message => "Open the single-use login link an admin gave you.",
                },
            )
            .map(IntoResponse::into_response);
    };
    let page = |e: ServiceError| Page::from(e).with(&c, false);
    let (link, csrf) = c
        .service
        .open_link(LinkKind::Login, &secret, None)
        .await
        .map_err(page)?;
    let person = c.service.link_caller(&link).await.map_err(page)?;
    let html = c.render(
        "login.html",
        minijinja::context! {
            link => secret, form_csrf => csrf.as_str(),
            person => person.person.display_name,
            expires_at => link.expires_at.to_string(),
        },
    )?;
    let mut response = html.into_response();
    response.headers_mut().append(
        header::SET_COOKIE,
        c.cookie(FORM_COOKIE, &csrf, "/console/login", LINK_TTL_S),
    );
    Ok(response)
}

#[derive(Deserialize)]
struct LinkForm {
    link: Option<String>,
    csrf: Option<String>,
    decision: Option<String>,
    reason: Option<String>,
}

fn link_form(f: Result<Form<LinkForm>, FormRejection>) -> Result<LinkForm, ServiceError> {
    f.map(|Form(f)| f).map_err(|e| {
        ServiceError::invalid(format!(
            "the request is not the form of a link's page ({}); nothing was changed",
            e.body_text()
        ))
    })
}

/// Uses a login link and opens a session.
async fn login(
    State(c): State<Console>,
    headers: HeaderMap,
    f: Result<Form<LinkForm>, FormRejection>,
) -> Result<Response, Page> {
    let page = |e: ServiceError| Page::from(e).with(&c, false);
    let f = link_form(f).map_err(page)?;
    let opened = c
        .service
        .console_login(
            f.link.as_deref().unwrap_or_default(),
            f.csrf.as_deref().unwrap_or_default(),
            cookie(&headers, FORM_COOKIE),
        )
        .await
        .map_err(page)?;
    let mut response = Redirect::to("/console").into_response();
    let h = response.headers_mut();
    h.append(
        header::SET_COOKIE,
        c.cookie(SESSION_COOKIE, &opened.secret, "/console", SESSION_TTL_S),
    );
    h.append(
        header::SET_COOKIE,
        c.cookie(FORM_COOKIE, "", "/console/login", 0),
    );
    Ok(response)
}

pub(super) async fn link_page(
    c: &Console,
    id: &str,
    secret: &str,
) -> Result<Response, ServiceError> {
    if let Ok(id) = ConfirmationId::parse(id) {
        return confirmation_link_page(c, &id, secret).await;
    }
    // A malformed id cannot be the id of this link.
    let id = ApprovalId::parse(id).map_err(|_| {
        ServiceError::new(
            crate::service::ErrorCode::Unauthenticated,
            "this link is not valid",
        )
    })?;
    let (link, csrf) = c
        .service
        .open_link(LinkKind::Approval, secret, Some(id.as_str()))
        .await?;
    let caller = c.service.link_caller(&link).await?;
    let view = c.service.approval(&caller, &id).await?;
    let card = card(
        c,
        &view,
        Via::Link {
            secret,
            csrf: &csrf,
        },
    );
    let html = c
        .render(
            "link.html",
            minijinja::context! {
                a => minijinja::value::Serde(card),
                person => caller.person.display_name.as_str(),
                link_expires_at => link.expires_at.to_string(),
            },
        )
        .map_err(|p| p.error)?;
    let mut response = html.into_response();
    response.headers_mut().append(
        header::SET_COOKIE,
        c.cookie(
            FORM_COOKIE,
            &csrf,
            &format!("/console/approvals/{id}"),
            LINK_TTL_S,
        ),
    );
    Ok(response)
}

/// A tool confirmation's link page (SPEC §5b): the exact action her agent waits to run, with
/// "Allow once" and "Reject", deciding as the link's person.
async fn confirmation_link_page(
    c: &Console,
    id: &ConfirmationId,
    secret: &str,
) -> Result<Response, ServiceError> {
    let opened = c.service.open_confirmation_link(id, secret).await?;
    let html = c
        .render(
            "confirmation_link.html",
            minijinja::context! {
                t => minijinja::value::Serde(&opened.confirmation),
                person => opened.caller.person.display_name.as_str(),
                link => secret,
                csrf => opened.csrf.as_str(),
                link_expires_at => opened.link.expires_at.to_string(),
            },
        )
        .map_err(|p| p.error)?;
    let mut response = html.into_response();
    response.headers_mut().append(
        header::SET_COOKIE,
        c.cookie(
            FORM_COOKIE,
            &opened.csrf,
            &format!("/console/approvals/{id}"),
            LINK_TTL_S,
        ),
    );
    Ok(response)
}

/// Uses an approval link (or a tool confirmation's): allow once, or reject with a reason.
async fn decide_by_link(
    State(c): State<Console>,
    Path(id): Path<String>,
    headers: HeaderMap,
    f: Result<Form<LinkForm>, FormRejection>,
) -> Result<Response, Page> {
    let page = |e: ServiceError| Page::from(e).with(&c, false);
    let f = link_form(f).map_err(page)?;
    let decision = match f.decision.as_deref() {
        Some("allow") => Decision::Allow,
        Some("reject") => Decision::Reject,
        _ => {
            return Err(page(ServiceError::invalid(
                "the form must say decision=allow or decision=reject; nothing was changed",
            )));
        }
    };
    if let Ok(id) = ConfirmationId::parse(id.as_str()) {
        let record = c
            .service
            .decide_confirmation_by_link(
                &id,
                f.link.as_deref().unwrap_or_default(),
                f.csrf.as_deref().unwrap_or_default(),
                cookie(&headers, FORM_COOKIE),
                decision,
                f.reason.filter(|r| !r.trim().is_empty()),
            )
            .await
            .map_err(page)?;
        let (title, message) = match decision {
            Decision::Allow => (
                "Allowed once",
                format!(
                    "Your agent may run {} once: its waiting call goes ahead now. This link is now used.",
                    record.tool
                ),
            ),
            Decision::Reject => (
                "Rejected",
                format!(
                    "Your agent's {} call is refused, and it reads your reason. This link is now used.",
                    record.tool
                ),
            ),
        };
        return used_link_page(&c, id.as_str(), title, &message);
    }
    let id = ApprovalId::parse(&id).map_err(|_| {
        page(ServiceError::new(
            crate::service::ErrorCode::Unauthenticated,
            "this link is not valid",
        ))
    })?;
    let record = c
        .service
        .decide_by_link(
            &id,
            f.link.as_deref().unwrap_or_default(),
            f.csrf.as_deref().unwrap_or_default(),
            cookie(&headers, FORM_COOKIE),
            decision,
            f.reason,
        )
        .await
        .map_err(page)?;
    let (title, message) = match decision {
        Decision::Allow => (
            "Allowed once",
            format!(
                "Approval {} is allowed: the first claim by an agent starts the work. This link is now used.",
                record.id
            ),
        ),
        Decision::Reject => (
            "Rejected",
            format!(
                "Approval {} is rejected: the thread is closed and the requester is told your reason. This link is now used.",
                record.id
            ),
        ),
    };
    used_link_page(&c, id.as_str(), title, &message)
}

/// The page after a link was used: what happened, and its form cookie cleared.
fn used_link_page(c: &Console, id: &str, title: &str, message: &str) -> Result<Response, Page> {
    let html = c.render(
        "message.html",
        minijinja::context! { title => title, message => message, tone => "done" },
    )?;
    let mut response = html.into_response();
    response.headers_mut().append(
        header::SET_COOKIE,
        c.cookie(FORM_COOKIE, "", &format!("/console/approvals/{id}"), 0),
    );
    Ok(response)
}
