//! People and tokens: list, add and remove people; issue a token with scopes and an expiry
//! (its secret shown once, with a copy button); list every token with its last use; revoke one
//! (its MCP sessions and long-polls end at once, as the member's own page does); issue a login
//! link, plain or admin. The rules are `Service::add_person`, `issue_token`, `revoke_token`,
//! `remove_person`, `issue_login_link` and `issue_admin_login_link`.

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Router, routing::MethodRouter};
use minijinja::value::Serde;
use serde::{Deserialize, Serialize};

use super::{
    Admin, CsrfOnly, Outcome, admin, admin_form, admin_frame, done, fail, field, rendered,
};
use crate::console::{Console, Page, status_of};
use crate::domain::{PersonId, PersonKind, Scope, Scopes};
use crate::service::{ServiceError, TokenSpec};

/// The expiries the token form offers, in days (0: never).
const EXPIRIES: [u64; 6] = [1, 7, 30, 90, 365, 0];

pub(super) fn routes() -> Router<Console> {
    Router::new()
        .route("/console/admin/people", get(page).post(add_person))
        .route(
            "/console/admin/people/{id}/remove",
            post_only(remove_person),
        )
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

async fn page(State(c): State<Console>, headers: HeaderMap) -> Result<Response, Response> {
    let a = admin(&c, &headers).await?;
    render(&c, &a, Outcome::default(), StatusCode::OK).await
}

async fn render(
    c: &Console,
    a: &Admin,
    outcome: Outcome,
    status: StatusCode,
) -> Result<Response, Response> {
    let fail = fail(c);
    let now = c.service.clock_now();
    let persons: Vec<PersonRow> = c
        .service
        .list_persons(&a.caller)
        .await
        .map_err(fail)?
        .into_iter()
        .filter(|p| p.id.as_str() != crate::domain::SERVER_PERSON)
        .map(|p| PersonRow {
            id: p.id.to_string(),
            name: p.display_name,
            kind: p.kind.to_string(),
            created_at: p.created_at.to_string(),
        })
        .collect();
    let mut tokens: Vec<TokenRow> = c
        .service
        .list_tokens(&a.caller, None)
        .await
        .map_err(fail)?
        .into_iter()
        .map(|t| TokenRow {
            live: t.revoked_at.is_none() && t.expires_at.is_none_or(|e| e > now),
            id: t.id,
            person: t.person.to_string(),
            scopes: t.scopes.to_string(),
            description: t.description,
            created_at: t.created_at.to_string(),
            expires_at: t.expires_at.map(|e| e.to_string()),
            last_used_at: t.last_used_at.map(|e| e.to_string()),
            revoked_at: t.revoked_at.map(|e| e.to_string()),
        })
        .collect();
    // Live tokens first, newest first within each.
    tokens.sort_by(|x, y| y.live.cmp(&x.live).then(y.created_at.cmp(&x.created_at)));
    let members: Vec<&PersonRow> = persons.iter().filter(|p| p.kind == "member").collect();
    rendered(
        c,
        "admin/people.html",
        minijinja::context! {
            persons => Serde(&persons), members => Serde(&members), tokens => Serde(&tokens),
            outcome => Serde(&outcome), expiries => EXPIRIES.to_vec(),
            ..Serde(admin_frame(a, "people"))
        },
        status,
    )
    .await
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

super::csrf_field!(PersonForm, TokenForm, LinkForm);
