//! Pages that are not there, and error pages that keep their navigation.
//!
//! - An unknown console address answers an HTML "not found" page: with the console's navigation
//!   for a signed-in reader, the sign-in page for anyone else. An admin page asked for by anyone
//!   but a signed-in admin gets exactly that answer, so a member cannot tell admin routes exist.
//! - A form's POST-only address opened with GET (a bookmark, a reload after a redirect, a typed
//!   address) leads a reader who may use the form to the page that holds it (303); anyone else
//!   gets the unknown page's answer. Nothing changes on a GET.
//! - Every error page of a signed-in reader keeps the navigation: a refusal rendered without the
//!   session at hand is rendered again here, with the session's frame.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use minijinja::value::Serde;

use super::session::{frame, session, signed_in};
use super::{Console, SESSION_COOKIE, cookie};

/// What an error page showed (kept in the response's extensions).
#[derive(Clone, Debug)]
pub(super) struct Shown {
    pub title: &'static str,
    pub message: String,
    pub code: &'static str,
}

/// The answer to an address that is not a page for this reader: the sign-in page when signed
/// out, else a 404 page with the navigation. It never says which address was asked for.
pub(super) async fn not_found(c: &Console, headers: &HeaderMap) -> Response {
    if let Some(page) = anonymous(c, headers) {
        return page;
    }
    let s = match signed_in(c, headers).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let page = c.render(
        "message.html",
        minijinja::context! {
            title => "Not found",
            message => "There is no page at this address. The links above lead to every page of the console.",
            tone => "error",
            ..Serde(frame(&s, ""))
        },
    );
    match page {
        Ok(html) => (StatusCode::NOT_FOUND, html).into_response(),
        Err(p) => p.into_response(),
    }
}

/// No session cookie at all: the sign-in page, without an authentication attempt (which would
/// count against the address as a failed one).
fn anonymous(c: &Console, headers: &HeaderMap) -> Option<Response> {
    if cookie(headers, SESSION_COOKIE).is_some_and(|v| !v.is_empty()) {
        return None;
    }
    Some(
        match c.render(
            "login.html",
            minijinja::context! {
                title => "Sign in",
                message => "Sign in with the login link an admin gave you (`liaison login-link`).",
            },
        ) {
            Ok(html) => (StatusCode::UNAUTHORIZED, html).into_response(),
            Err(p) => p.into_response(),
        },
    )
}

/// Any method on an unknown `/console/…` address.
pub(super) async fn unknown(State(c): State<Console>, headers: HeaderMap) -> Response {
    not_found(&c, &headers).await
}

/// `GET` on a member form's POST-only address: signed in, to the page holding the form.
pub(super) async fn form_address(
    State(c): State<Console>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Some(page) = anonymous(&c, &headers) {
        return page;
    }
    match signed_in(&c, &headers).await {
        Ok(_) => Redirect::to(&holder(uri.path())).into_response(),
        Err(page) => page,
    }
}

/// `GET` on an admin form's POST-only address: an admin goes to the page holding the form,
/// anyone else gets the unknown page's answer.
pub(super) async fn admin_form_address(
    State(c): State<Console>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let admin = match session(&c, &headers).await {
        Ok(s) => c.service.console_admin(&s.caller, &s.record).await.is_ok(),
        Err(_) => false,
    };
    if admin {
        Redirect::to(&holder(uri.path())).into_response()
    } else {
        not_found(&c, &headers).await
    }
}

/// The page that holds the form posting to `path`.
fn holder(path: &str) -> String {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let to = match segments.as_slice() {
        ["console", "admin", "tokens" | "links", ..] => "/console/admin/people".to_owned(),
        [
            "console",
            "admin",
            s @ ("people" | "keys" | "webhooks" | "parties"),
            ..,
        ] => {
            format!("/console/admin/{s}")
        }
        ["console", "admin", "deliveries", "retry-endpoint"] => "/console/admin/deliveries".into(),
        ["console", "agents", ..] => "/console/agents".to_owned(),
        // Her agents' confirmations are decided on the approvals page.
        ["console", "confirmations", ..] => "/console/approvals".to_owned(),
        [rest @ .., _] if rest.len() >= 2 => format!("/{}", rest.join("/")),
        _ => "/console".to_owned(),
    };
    // Only ever a console page of this server.
    if to.starts_with("/console") && !to.contains("//") && !to.contains('\\') {
        to
    } else {
        "/console".to_owned()
    }
}

/// Refuses a console address holding a character no backend can store (`%00`), before any
/// id in it is looked up.
pub(super) async fn storable_address(request: Request, next: Next) -> Response {
    let address = request
        .uri()
        .path_and_query()
        .map_or("", |p| p.as_str())
        .to_owned();
    match crate::service::storable_address(&address) {
        Ok(()) => next.run(request).await,
        Err(e) => super::Page::from(e).into_response(),
    }
}

/// Error pages of a signed-in reader, rendered again with the navigation. Nothing is looked up
/// (a second authentication per refusal would count against the session's rate): the links
/// are the same for every member, the sign-out form's token is derived from the cookie, and a
/// stale cookie only gets links that lead to the sign-in page.
pub(super) async fn keep_navigation(
    State(c): State<Console>,
    request: Request,
    next: Next,
) -> Response {
    let secret = cookie(request.headers(), SESSION_COOKIE)
        .filter(|v| !v.is_empty())
        .map(str::to_owned);
    let response = next.run(request).await;
    let (Some(shown), Some(secret)) = (response.extensions().get::<Shown>().cloned(), secret)
    else {
        return response;
    };
    let Ok(Html(body)) = c.render(
        "message.html",
        minijinja::context! {
            title => shown.title, message => shown.message, code => shown.code,
            tone => "error", back => "/console/approvals",
            nav => true, csrf => crate::service::session_csrf(&secret),
        },
    ) else {
        return response;
    };
    let (mut parts, _) = response.into_parts();
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(body))
}

#[cfg(test)]
mod tests {
    use super::holder;

    #[test]
    fn a_forms_address_leads_to_the_page_holding_the_form() {
        for (post, page) in [
            ("/console/threads/t1/reply", "/console/threads/t1"),
            ("/console/sessions/s1/commands", "/console/sessions/s1"),
            ("/console/agents/k1/revoke", "/console/agents"),
            ("/console/confirmations/c1/decide", "/console/approvals"),
            ("/console/admin/tokens", "/console/admin/people"),
            ("/console/admin/tokens/x/revoke", "/console/admin/people"),
            ("/console/admin/people/bob/remove", "/console/admin/people"),
            ("/console/admin/keys/k/retire", "/console/admin/keys"),
            (
                "/console/admin/channels/ops/policy",
                "/console/admin/channels/ops",
            ),
            (
                "/console/admin/remotes/r/refresh",
                "/console/admin/remotes/r",
            ),
            (
                "/console/admin/deliveries/d1/retry",
                "/console/admin/deliveries/d1",
            ),
            (
                "/console/admin/deliveries/retry-endpoint",
                "/console/admin/deliveries",
            ),
        ] {
            assert_eq!(holder(post), page, "{post}");
        }
        assert_eq!(holder("/console/threads//evil.example/reply"), "/console");
    }
}
