//! People and tokens: list, add and remove people; issue a token with scopes and an expiry
//! (its secret shown once, with a copy button); list every token with its last use; revoke one
//! (its MCP sessions and long-polls end at once, as the member's own page does); issue a login
//! link, plain or admin; rename a person. Both lists search, filter and page on the server
//! (people by id, tokens newest first), the query kept in the page's address. The rules are
//! `Service::add_person`, `search_persons`, `search_tokens`, `rename_person`, `issue_token`,
//! `revoke_token`, `remove_person`, `issue_login_link` and `issue_admin_login_link`.

use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Router, routing::MethodRouter};
use minijinja::value::Serde;
use serde::{Deserialize, Serialize};

use super::{
    Admin, CsrfOnly, Outcome, admin, admin_form, admin_frame, done, field, person_choices, rendered,
};
use crate::console::{Console, Page, status_of};
use crate::domain::{PersonId, PersonKind, Scope, Scopes};
use crate::service::{ListQuery, ServiceError, TokenSpec};

/// The expiries the token form offers, in days (0: never).
const EXPIRIES: [u64; 6] = [1, 7, 30, 90, 365, 0];
/// Rows per page of each list.
const PAGE: i64 = 50;

pub(super) fn routes() -> Router<Console> {
    Router::new()
        .route("/console/admin/people", get(page).post(add_person))
        .route(
            "/console/admin/people/{id}/remove",
            post_only(remove_person),
        )
        .route("/console/admin/people/{id}/name", post_only(rename_person))
        .route("/console/admin/tokens", post_only(issue_token))
        .route("/console/admin/tokens/{id}/revoke", post_only(revoke_token))
        .route("/console/admin/links", post_only(issue_link))
}

/// A POST route whose GET changes nothing: an admin is led to the page holding the form, anyone
/// else gets the unknown page's answer.
pub(super) fn post_only<H, T>(handler: H) -> MethodRouter<Console>
where
    H: axum::handler::Handler<T, Console>,
    T: 'static,
{
    post(handler).get(crate::console::errors::admin_form_address)
}

#[derive(Serialize)]
struct PersonRow {
    id: String,
    name: String,
    kind: String,
    created_at: String,
}

#[derive(Serialize)]
struct TokenRow {
    id: String,
    person: String,
    scopes: String,
    description: String,
    created_at: String,
    expires_at: Option<String>,
    last_used_at: Option<String>,
    revoked_at: Option<String>,
    live: bool,
}

/// The lists' search, as the page's address carries it: people by `q`, `kind` and `page`;
/// tokens by `tq`, `state` and `tpage`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
struct Lists {
    q: Option<String>,
    kind: Option<String>,
    page: Option<String>,
    tq: Option<String>,
    state: Option<String>,
    tpage: Option<String>,
}

impl Lists {
    /// The address of this search with `key` set to `value` (a page of one list).
    fn href(&self, key: &str, value: i64) -> String {
        let mut parts = Vec::new();
        for (k, v) in [
            ("q", &self.q),
            ("kind", &self.kind),
            ("page", &self.page),
            ("tq", &self.tq),
            ("state", &self.state),
            ("tpage", &self.tpage),
        ] {
            if k == key {
                continue;
            }
            if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
                parts.push(format!("{k}={}", crate::domain::text::percent_encode(v)));
            }
        }
        if value > 1 {
            parts.push(format!("{key}={value}"));
        }
        if parts.is_empty() {
            "/console/admin/people".to_owned()
        } else {
            format!("/console/admin/people?{}", parts.join("&"))
        }
    }
}

/// A list's page number as sent (1 when absent), or why it is refused.
fn page_number(raw: &Option<String>, what: &str) -> Result<i64, ServiceError> {
    match field(raw) {
        None => Ok(1),
        Some(p) => p.parse().map_err(|_| {
            ServiceError::invalid(format!(
                "{what} must be a page number, not {}",
                crate::domain::text::quote(&p)
            ))
        }),
    }
}

/// One list as the page shows it: its rows, the refusal of its search, and its pages' addresses.
#[derive(Serialize)]
struct Shown<T> {
    rows: Vec<T>,
    error: Option<String>,
    searched: bool,
    page: i64,
    previous: Option<String>,
    next: Option<String>,
}

async fn page(
    State(c): State<Console>,
    headers: HeaderMap,
    q: Result<Query<Lists>, QueryRejection>,
) -> Result<Response, Response> {
    let a = admin(&c, &headers).await?;
    let (lists, status) = match q {
        Ok(Query(q)) => (q, StatusCode::OK),
        Err(_) => (Lists::default(), StatusCode::BAD_REQUEST),
    };
    render_with(&c, &a, Outcome::default(), status, &lists).await
}

async fn render(
    c: &Console,
    a: &Admin,
    outcome: Outcome,
    status: StatusCode,
) -> Result<Response, Response> {
    render_with(c, a, outcome, status, &Lists::default()).await
}

/// One list's page for `lists`: its rows mapped by `row`, or its search's refusal.
fn shown<R, T>(
    found: Result<crate::service::Listed<R>, ServiceError>,
    lists: &Lists,
    key: &str,
    page: i64,
    searched: bool,
    row: impl Fn(R) -> T,
) -> Shown<T> {
    match found {
        Ok(l) => Shown {
            rows: l.items.into_iter().map(row).collect(),
            error: None,
            searched,
            page,
            previous: (page > 1).then(|| lists.href(key, page - 1)),
            next: l.more.then(|| lists.href(key, page + 1)),
        },
        Err(e) => Shown {
            rows: Vec::new(),
            error: Some(e.message),
            searched,
            page: 1,
            previous: None,
            next: None,
        },
    }
}

async fn render_with(
    c: &Console,
    a: &Admin,
    outcome: Outcome,
    mut status: StatusCode,
    lists: &Lists,
) -> Result<Response, Response> {
    let now = c.service.clock_now();
    // Whom a token or a link can be for (the forms' choices, bounded).
    let choices = person_choices(c, a).await?;
    let person_page = page_number(&lists.page, "page");
    let asked = ListQuery {
        text: lists.q.clone(),
        filter: lists.kind.clone(),
        page: *person_page.as_ref().unwrap_or(&1),
        per_page: PAGE,
    };
    let found = match person_page {
        Ok(_) => c.service.search_persons(&a.caller, &asked).await,
        Err(e) => Err(e),
    };
    let searched = field(&lists.q).is_some() || field(&lists.kind).is_some();
    let persons = shown(found, lists, "page", asked.page, searched, person_row);
    let token_page = page_number(&lists.tpage, "tpage");
    let asked = ListQuery {
        text: lists.tq.clone(),
        filter: lists.state.clone(),
        page: *token_page.as_ref().unwrap_or(&1),
        per_page: PAGE,
    };
    let found = match token_page {
        Ok(_) => c.service.search_tokens(&a.caller, &asked).await,
        Err(e) => Err(e),
    };
    let searched = field(&lists.tq).is_some() || field(&lists.state).is_some();
    let tokens = shown(found, lists, "tpage", asked.page, searched, |t| TokenRow {
        live: t.revoked_at.is_none() && t.expires_at.is_none_or(|e| e > now),
        id: t.id,
        person: t.person.to_string(),
        scopes: t.scopes.to_string(),
        description: t.description,
        created_at: t.created_at.to_string(),
        expires_at: t.expires_at.map(|e| e.to_string()),
        last_used_at: t.last_used_at.map(|e| e.to_string()),
        revoked_at: t.revoked_at.map(|e| e.to_string()),
    });
    if status == StatusCode::OK && (persons.error.is_some() || tokens.error.is_some()) {
        status = StatusCode::BAD_REQUEST;
    }
    rendered(
        c,
        "admin/people.html",
        minijinja::context! {
            persons => Serde(&persons),
            holders => Serde(&choices.of_kinds(&["member", "external"])),
            members => Serde(&choices.of_kinds(&["member"])),
            tokens => Serde(&tokens), lists => Serde(lists),
            kinds => ["member", "external", "remote"], states => ["live", "expired", "revoked"],
            outcome => Serde(&outcome), expiries => EXPIRIES.to_vec(),
            self_id => a.caller.id().as_str(),
            ..Serde(admin_frame(a, "people"))
        },
        status,
    )
    .await
}

fn person_row(p: crate::store::PersonRecord) -> PersonRow {
    PersonRow {
        id: p.id.to_string(),
        name: p.display_name,
        kind: p.kind.to_string(),
        created_at: p.created_at.to_string(),
    }
}

/// The page again with `form`'s refusal next to it and the values sent.
async fn refused(
    c: &Console,
    a: &Admin,
    form: &'static str,
    e: ServiceError,
    values: &[(&'static str, Option<String>)],
) -> Result<Response, Response> {
    let outcome = Outcome::refused(form, &e, values);
    render(c, a, outcome, status_of(&e)).await
}

fn person_id(raw: &Option<String>, what: &str) -> Result<PersonId, ServiceError> {
    let raw = field(raw).unwrap_or_default();
    PersonId::parse(raw.clone()).map_err(|_| {
        ServiceError::invalid(format!(
            "{what} must be a slug: lowercase letters, digits and -, e.g. alice (got {})",
            crate::domain::text::quote(&raw)
        ))
    })
}

#[derive(Deserialize)]
struct PersonForm {
    csrf: Option<String>,
    id: Option<String>,
    display_name: Option<String>,
}

/// `POST /console/admin/people`: adds a member.
async fn add_person(
    State(c): State<Console>,
    headers: HeaderMap,
    f: Result<Form<PersonForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, f) = admin_form(&c, &headers, f).await?;
    let added = match person_id(&f.id, "id") {
        Ok(id) => {
            c.service
                .add_person(
                    &a.caller,
                    id,
                    PersonKind::Member,
                    f.display_name.clone().unwrap_or_default(),
                )
                .await
        }
        Err(e) => Err(e),
    };
    match added {
        Ok(_) => done("/console/admin/people").await,
        Err(e) => {
            let values = [("id", f.id), ("display_name", f.display_name)];
            refused(&c, &a, "person", e, &values).await
        }
    }
}

/// `POST /console/admin/people/{id}/remove`.
async fn remove_person(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
    f: Result<Form<CsrfOnly>, FormRejection>,
) -> Result<Response, Response> {
    let (a, _) = admin_form(&c, &headers, f).await?;
    let id = PersonId::parse(id).map_err(|_| {
        Page::from(ServiceError::not_found("person", "?"))
            .with(&c, true)
            .into_response()
    })?;
    match c.service.remove_person(&a.caller, &id).await {
        Ok(()) => done("/console/admin/people").await,
        Err(e) => refused(&c, &a, "row", e, &[]).await,
    }
}

#[derive(Deserialize)]
struct NameForm {
    csrf: Option<String>,
    display_name: Option<String>,
}

/// `POST /console/admin/people/{id}/name`: another display name, shown from now on.
async fn rename_person(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
    f: Result<Form<NameForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, f) = admin_form(&c, &headers, f).await?;
    let renamed = match PersonId::parse(id.clone()) {
        Ok(p) => {
            c.service
                .rename_person(&a.caller, &p, f.display_name.as_deref().unwrap_or_default())
                .await
        }
        Err(_) => Err(ServiceError::not_found(
            "person",
            crate::domain::text::quote(&id),
        )),
    };
    match renamed {
        Ok(_) => done("/console/admin/people").await,
        Err(e) => {
            let mut outcome = Outcome::refused("name", &e, &[("display_name", f.display_name)]);
            outcome.values.insert("person", id);
            render(&c, &a, outcome, status_of(&e)).await
        }
    }
}

#[derive(Deserialize)]
struct TokenForm {
    csrf: Option<String>,
    person: Option<String>,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    human: Option<String>,
    #[serde(default)]
    admin: Option<String>,
    expires_in_days: Option<String>,
    description: Option<String>,
}

fn token_spec(f: &TokenForm) -> Result<TokenSpec, ServiceError> {
    let person = person_id(&f.person, "person")?;
    let mut scopes = Scopes::default();
    for (on, scope) in [
        (&f.agent, Scope::Agent),
        (&f.human, Scope::Human),
        (&f.admin, Scope::Admin),
    ] {
        if on.is_some() {
            scopes = scopes.with(scope);
        }
    }
    let days: u64 = field(&f.expires_in_days)
        .unwrap_or_else(|| "0".into())
        .parse()
        .map_err(|_| ServiceError::invalid("expires_in_days must be a number of days"))?;
    Ok(TokenSpec {
        person,
        scopes,
        expires_in_s: (days > 0).then(|| days.saturating_mul(86_400)),
        description: f.description.clone().unwrap_or_default(),
    })
}

/// `POST /console/admin/tokens`: issues the token and shows its secret this once.
async fn issue_token(
    State(c): State<Console>,
    headers: HeaderMap,
    f: Result<Form<TokenForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, f) = admin_form(&c, &headers, f).await?;
    let issued = match token_spec(&f) {
        Ok(spec) => c.service.issue_token(&a.caller, spec).await,
        Err(e) => Err(e),
    };
    match issued {
        Ok(t) => {
            let outcome = Outcome::secret(
                format!(
                    "Token {} for {} ({})",
                    t.token.id, t.token.person, t.token.scopes
                ),
                t.secret,
            );
            render(&c, &a, outcome, StatusCode::OK).await
        }
        Err(e) => {
            let values = [
                ("person", f.person),
                ("description", f.description),
                ("expires_in_days", f.expires_in_days),
            ];
            refused(&c, &a, "token", e, &values).await
        }
    }
}

/// `POST /console/admin/tokens/{id}/revoke`.
async fn revoke_token(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
    f: Result<Form<CsrfOnly>, FormRejection>,
) -> Result<Response, Response> {
    let (a, _) = admin_form(&c, &headers, f).await?;
    match c.service.revoke_token(&a.caller, &id).await {
        Ok(()) => done("/console/admin/people").await,
        Err(e) => refused(&c, &a, "row", e, &[]).await,
    }
}

#[derive(Deserialize)]
struct LinkForm {
    csrf: Option<String>,
    person: Option<String>,
    admin: Option<String>,
}

/// `POST /console/admin/links`: a login link (plain or admin), shown this once.
async fn issue_link(
    State(c): State<Console>,
    headers: HeaderMap,
    f: Result<Form<LinkForm>, FormRejection>,
) -> Result<Response, Response> {
    let (a, f) = admin_form(&c, &headers, f).await?;
    let admin_link = f.admin.is_some();
    let issued = match person_id(&f.person, "person") {
        Ok(p) if admin_link => c.service.issue_admin_login_link(&a.caller, &p, None).await,
        Ok(p) => c.service.issue_login_link(&a.caller, &p, None).await,
        Err(e) => Err(e),
    };
    match issued {
        Ok(l) => {
            let outcome = Outcome::secret(
                format!(
                    "{} login link for {} (single use, until {})",
                    if admin_link { "Admin" } else { "A" },
                    l.link.person,
                    l.link.expires_at
                ),
                crate::console::login_link_url(&c.public_url, &l.secret),
            );
            render(&c, &a, outcome, StatusCode::OK).await
        }
        Err(e) => refused(&c, &a, "link", e, &[("person", f.person)]).await,
    }
}

super::csrf_field!(PersonForm, NameForm, TokenForm, LinkForm);
