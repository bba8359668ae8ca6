//! The admin half of the console (SPEC §11, issue 26): people and tokens, channels, parties,
//! remote agents, webhooks, deliveries, keys and the audit log, for a session opened by an
//! admin login link. Decode, call the service, encode, as `/admin/v1` and the CLI do: every rule
//! (and every audit entry) is the service's.
//!
//! **Who gets in.** A console session reaches these pages only when an admin login link opened
//! it (`liaison login-link PERSON --admin`, issued only to a person holding a live `admin` token)
//! and only while that person still holds one; the pages then act with scope `admin` alone
//! (`Service::console_admin`), so an admin page can never decide an approval, and no agent or
//! party credential can open a console session at all. Any other reader gets the answer of an
//! unknown console page (`errors::not_found`: the 404 page, or the sign-in page without a
//! session).
//!
//! **Forms.** Every change is a POST carrying the session's CSRF token, refused with the reason
//! next to its form and nothing changed; a secret (a token, a link, a webhook secret) is shown
//! once on the page that made it, never again. A channel change is shown first (before → after,
//! or the service's refusal) and applied only by a second, explicit POST.

mod audit;
mod channels;
mod deliveries;
mod keys;
mod oauth;
mod parties;
mod people;
mod remote;
mod remotes;
mod webhooks;

use axum::Router;
use axum::extract::Form;
use axum::extract::rejection::FormRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Serialize;

use super::session::{Session, form, frame, session, signed_in};
use super::{Console, Page};
use crate::service::{Caller, ServiceError};

/// The admin pages' routes.
pub(super) fn routes() -> Router<Console> {
    use axum::routing::get;
    Router::new()
        .route(
            "/console/admin",
            get(|| async { Redirect::to("/console/admin/people") }),
        )
        .merge(people::routes())
        .merge(channels::routes())
        .merge(parties::routes())
        .merge(oauth::routes())
        .merge(remotes::routes())
        .merge(remote::routes())
        .merge(webhooks::routes())
        .merge(deliveries::routes())
        .merge(keys::routes())
        .merge(audit::routes())
        .route("/console/admin/events", get(events))
}

/// How often the admin event stream says "change" when nothing woke it: attempts finish and
/// retries fall due on their own.
const TICK: std::time::Duration = std::time::Duration::from_secs(5);

/// Server-sent events for the outbox pages: `change` when deliveries fall due, and every
/// [`TICK`]. Ends at shutdown, as soon as the session ends (sign-out, expiry, its person
/// removed), and when a directory change leaves the session no longer an admin's.
async fn events(
    axum::extract::State(c): axum::extract::State<Console>,
    headers: HeaderMap,
) -> Result<Response, Response> {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let a = admin(&c, &headers).await?;
    let hold = c
        .service
        .hold_credential(&a.caller)
        .await
        .map_err(fail(&c))?;
    let changes = c.service.outbox_changes(&a.caller).map_err(fail(&c))?;
    let directory = c.service.directory_changes();
    let stream = futures::stream::unfold(
        (c, a.s.secret, changes, directory),
        |(c, secret, mut changes, mut directory)| async move {
            tokio::select! {
                () = changes.woken() => {}
                () = directory.woken() => {}
                () = tokio::time::sleep(TICK) => {}
                () = c.service.stopping() => return None,
            }
            let (member, record) = c.service.console_caller(&secret).await.ok()?;
            c.service.console_admin(&member, &record).await.ok()?;
            let event = Event::default().event("change").data("changed");
            Some((
                Ok::<_, std::convert::Infallible>(event),
                (c, secret, changes, directory),
            ))
        },
    );
    Ok(Sse::new(hold.bound(stream, |_| None))
        .keep_alive(KeepAlive::new().interval(std::time::Duration::from_secs(15)))
        .into_response())
}

/// Most people a form offers to pick from. With more in the directory, the form takes a typed
/// id instead (offered from the first of them as the browser's suggestions), so no page holds a
/// drop-down of the whole directory; the service refuses an unknown id with its reason.
pub(super) const PERSON_CHOICES: i64 = 200;

/// The people a form offers (never the server's own person), and whether that is all of them.
#[derive(Serialize)]
pub(super) struct PersonChoices {
    pub people: Vec<Choice>,
    pub complete: bool,
}

/// One person a form offers: id, display name and kind.
#[derive(Serialize)]
pub(super) struct Choice {
    pub id: String,
    pub name: String,
    pub kind: String,
}

impl PersonChoices {
    /// The same choices, of the given kinds only.
    pub(super) fn of_kinds(&self, kinds: &[&str]) -> PersonChoices {
        PersonChoices {
            people: self
                .people
                .iter()
                .filter(|p| kinds.contains(&p.kind.as_str()))
                .map(|p| Choice {
                    id: p.id.clone(),
                    name: p.name.clone(),
                    kind: p.kind.clone(),
                })
                .collect(),
            complete: self.complete,
        }
    }
}

/// The first [`PERSON_CHOICES`] people of the directory, by id, for a form's choice of person.
pub(super) async fn person_choices(c: &Console, a: &Admin) -> Result<PersonChoices, Response> {
    let asked = crate::service::ListQuery {
        text: None,
        filter: None,
        page: 1,
        per_page: PERSON_CHOICES,
    };
    let found = c
        .service
        .search_persons(&a.caller, &asked)
        .await
        .map_err(fail(c))?;
    Ok(PersonChoices {
        people: found
            .items
            .into_iter()
            .map(|p| Choice {
                id: p.id.to_string(),
                name: p.display_name,
                kind: p.kind.to_string(),
            })
            .collect(),
        complete: !found.more,
    })
}

/// A signed-in admin: the console session and its admin caller.
pub(super) struct Admin {
    pub s: Session,
    pub caller: Caller,
}

/// The answer to a reader who is not a signed-in admin: exactly an unknown page's.
async fn hidden(c: &Console, headers: &HeaderMap) -> Response {
    crate::console::errors::not_found(c, headers).await
}

/// A page's admin, or the sign-in page (no session), or an unknown route's 404 (any other
/// session).
pub(super) async fn admin(c: &Console, headers: &HeaderMap) -> Result<Admin, Response> {
    let s = signed_in(c, headers).await?;
    match c.service.console_admin(&s.caller, &s.record).await {
        Ok(caller) => Ok(Admin { s, caller }),
        Err(_) => Err(hidden(c, headers).await),
    }
}

/// A form of an admin page: from an admin's session, carrying its CSRF token; or the answer
/// saying why not (nothing is changed).
pub(super) async fn admin_form<T: HasCsrf>(
    c: &Console,
    headers: &HeaderMap,
    f: Result<Form<T>, FormRejection>,
) -> Result<(Admin, T), Response> {
    let s = match session(c, headers).await {
        Ok(s) => s,
        Err(_) => return Err(hidden(c, headers).await),
    };
    let Ok(caller) = c.service.console_admin(&s.caller, &s.record).await else {
        return Err(hidden(c, headers).await);
    };
    let back = fail(c);
    let f = form(f).map_err(back)?;
    c.service
        .check_console_csrf(&s.secret, f.csrf())
        .map_err(back)?;
    Ok((Admin { s, caller }, f))
}

/// A form that carries the page's CSRF token.
pub(super) trait HasCsrf {
    fn csrf(&self) -> Option<&str>;
}

/// Implements [`HasCsrf`] for forms whose token is their `csrf: Option<String>` field.
macro_rules! csrf_field {
    ($($form:ty),+ $(,)?) => {$(
        impl $crate::console::admin::HasCsrf for $form {
            fn csrf(&self) -> Option<&str> {
                self.csrf.as_deref()
            }
        }
    )+};
}
pub(super) use csrf_field;

/// A form with nothing but its CSRF token (a row's button).
#[derive(serde::Deserialize)]
pub(super) struct CsrfOnly {
    csrf: Option<String>,
}

csrf_field!(CsrfOnly);

/// A secret a page shows once, and what it is.
#[derive(Serialize)]
pub(super) struct Secret {
    pub what: String,
    pub secret: String,
}

/// What a page shows beside its lists: a secret just made, a notice, or a form's refusal with
/// the values sent (never a secret).
#[derive(Default, Serialize)]
pub(super) struct Outcome {
    pub shown: Option<Secret>,
    pub notice: Option<String>,
    /// Which form was refused (the page names its forms), and why.
    pub form: Option<&'static str>,
    pub error: Option<String>,
    pub values: std::collections::HashMap<&'static str, String>,
}

impl Outcome {
    /// A secret made this once.
    pub(super) fn secret(what: String, secret: String) -> Self {
        Outcome {
            shown: Some(Secret { what, secret }),
            ..Outcome::default()
        }
    }

    /// `form`'s refusal `e`, with the values sent.
    pub(super) fn refused(
        form: &'static str,
        e: &ServiceError,
        values: &[(&'static str, Option<String>)],
    ) -> Self {
        Outcome {
            form: Some(form),
            error: Some(e.message.clone()),
            values: values
                .iter()
                .filter_map(|(k, v)| v.clone().map(|v| (*k, v)))
                .collect(),
            ..Outcome::default()
        }
    }
}

/// The admin pages' layout context: the console's frame, the admin tab, and which admin page.
#[derive(Serialize)]
pub(super) struct AdminFrame<'a> {
    #[serde(flatten)]
    frame: super::session::Frame<'a>,
    section: &'static str,
    live_source: Option<&'static str>,
}

pub(super) fn admin_frame<'a>(a: &'a Admin, section: &'static str) -> AdminFrame<'a> {
    AdminFrame {
        frame: frame(&a.s, "admin"),
        section,
        live_source: None,
    }
}

impl AdminFrame<'_> {
    /// Live updates from `source` instead of the person's inbox.
    pub(super) fn live_from(mut self, source: &'static str) -> Self {
        self.live_source = Some(source);
        self
    }
}

/// The error page of a refusal on an admin page (with the way back).
pub(super) fn fail(c: &Console) -> impl Fn(ServiceError) -> Response + Copy + '_ {
    move |e| Page::from(e).with(c, true).into_response()
}

/// A rendered admin page with `status`, or the error page.
pub(super) async fn rendered(
    c: &Console,
    name: &str,
    context: minijinja::Value,
    status: StatusCode,
) -> Result<Response, Response> {
    c.render(name, context)
        .map(|html| (status, html).into_response())
        .map_err(IntoResponse::into_response)
}

/// After a change: back to `to` (303, so a reload does not send the form again).
pub(super) async fn done(to: &str) -> Result<Response, Response> {
    Ok(Redirect::to(to).into_response())
}

/// A form field's text, trimmed; none when empty.
pub(super) fn field(v: &Option<String>) -> Option<String> {
    v.as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// A JSON value as an audit entry or a preview shows it: indented, keys in order.
pub(super) fn pretty(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    /// Every admin form whose button is a danger (removes, revokes, retires) asks first: its
    /// `<form>` carries `data-confirm`, or its button ends with "…" because a preview comes
    /// before anything changes.
    #[test]
    fn every_destructive_admin_form_asks_first() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/console/templates/admin");
        let mut forms = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let html = std::fs::read_to_string(&path).unwrap();
            for (i, _) in html.match_indices("<form") {
                let end = html[i..].find("</form>").map_or(html.len(), |e| i + e);
                let form = &html[i..end];
                let Some(danger) = form.find("class=\"danger\"") else {
                    continue;
                };
                forms += 1;
                let tag = &form[..form.find('>').unwrap()];
                let label = &form[danger..];
                let label = &label[label.find('>').unwrap() + 1..label.find("</button>").unwrap()];
                assert!(
                    tag.contains("data-confirm=\"") || label.ends_with('…'),
                    "{}: a destructive form that does not ask first: {tag}",
                    path.display()
                );
            }
        }
        assert!(forms >= 7, "only {forms} destructive forms found");
    }
}
