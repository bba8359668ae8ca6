//! What every signed-in console page shares: the session behind a request (or the sign-in page
//! saying why there is none), the layout's frame, a form's decoding, the channel tabs and a
//! subject as a one-line title. The pages' modules stand on this one; it imports none of them.

use axum::extract::Form;
use axum::extract::rejection::FormRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::{Console, Page, SESSION_COOKIE, cookie};
use crate::service::{Caller, ServiceError, session_csrf};

/// A signed-in request: the person, and the session's secret and CSRF token.
pub(super) struct Session {
    pub caller: Caller,
    pub secret: String,
    pub csrf: String,
    /// The session record: whether an admin login link opened it.
    pub record: crate::store::SessionRecord,
}

pub(super) async fn session(c: &Console, headers: &HeaderMap) -> Result<Session, ServiceError> {
    let secret = cookie(headers, SESSION_COOKIE).unwrap_or_default();
    let (caller, record) = c.service.console_caller(secret).await?;
    Ok(Session {
        caller,
        secret: secret.to_owned(),
        csrf: session_csrf(secret),
        record,
    })
}

/// A page's session, or (401) the sign-in page saying why there is none.
pub(super) async fn signed_in(c: &Console, headers: &HeaderMap) -> Result<Session, Response> {
    match session(c, headers).await {
        Ok(s) => Ok(s),
        Err(e) if crate::http::http_status(e.code) == 401 => {
            let page = c.render(
                "login.html",
                minijinja::context! { message => e.message, title => "Sign in" },
            );
            Err(match page {
                Ok(html) => (StatusCode::UNAUTHORIZED, html).into_response(),
                Err(p) => p.into_response(),
            })
        }
        Err(e) => Err(Page::from(e).with(c, false).into_response()),
    }
}

/// What every signed-in page's layout needs.
#[derive(Serialize)]
pub(super) struct Frame<'a> {
    me: &'a str,
    csrf: &'a str,
    page: &'static str,
    live: bool,
    /// Show the admin pages' tab (the session was opened by an admin login link).
    admin: bool,
}

pub(super) fn frame<'a>(s: &'a Session, page: &'static str) -> Frame<'a> {
    Frame {
        me: &s.caller.person.display_name,
        csrf: &s.csrf,
        page,
        live: true,
        admin: s.record.admin,
    }
}

pub(super) fn form<T>(form: Result<Form<T>, FormRejection>) -> Result<T, ServiceError> {
    form.map(|Form(f)| f).map_err(|e| {
        ServiceError::invalid(format!(
            "the request is not a form this page sends ({}); nothing was changed",
            e.body_text()
        ))
    })
}

/// The names of the channels the session's person can read (a page's channel tabs).
pub(super) async fn channel_names(c: &Console, s: &Session) -> Result<Vec<String>, Response> {
    Ok(c.service
        .channels(&s.caller)
        .await
        .map_err(|e| Page::from(e).with(c, true).into_response())?
        .into_iter()
        .map(|ch| ch.name.to_string())
        .collect())
}

pub(super) fn subject(s: &str) -> String {
    if s.trim().is_empty() {
        "(no subject)".to_owned()
    } else {
        crate::domain::text::one_line(s)
    }
}
