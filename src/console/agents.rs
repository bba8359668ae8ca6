//! "Connect an agent" (SPEC §2, §4b, §11): a member issues an `agent` token for herself — a
//! *connection* with a name she chooses (`claude-laptop`, addressed as `alice/claude-laptop`),
//! rights per impact and an expiry — and sees it once with ready-to-paste settings for Claude Code
//! (HTTP and stdio), Codex and the hooks, with this server's real address; lists her connections
//! with their rights, last use and the long-polls waiting on them; renames one or changes its
//! rights; and revokes one, which ends its MCP sessions and waiting long-polls at once (the rules
//! are the service's: `Service::issue_own_token`, `Service::update_own_connection`,
//! `Service::revoke_own_token`). A refused form comes back with everything she typed.

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::value::Serde;
use serde::{Deserialize, Serialize};

use super::session::{Session, form, frame, session, signed_in};
use super::{Console, Page};
use crate::domain::{ConnectionRights, ConnectionSlug, Impact, RightLevel};
use crate::service::{
    ConnectionUpdate, IssuedToken, OWN_TOKEN_MAX_DAYS, OwnTokenSpec, ServiceError,
};

/// The expiries the form offers, in days.
const EXPIRIES: [u64; 5] = [1, 7, 30, 90, OWN_TOKEN_MAX_DAYS];

#[derive(Serialize)]
struct TokenRow {
    id: String,
    name: String,
    /// The connection's name, and the address others use (`alice/claude-laptop`).
    connection: Option<String>,
    address: Option<String>,
    /// Per impact, in `Impact::ALL` order: (impact, level).
    rights: Vec<(&'static str, &'static str)>,
    created_at: String,
    expires_at: Option<String>,
    last_used_at: Option<String>,
    revoked_at: Option<String>,
    waiting: usize,
    live: bool,
}

/// What a just-issued token's panel shows: the secret, once, and the settings using it.
#[derive(Serialize)]
struct Issued {
    name: String,
    secret: String,
    #[serde(flatten)]
    snippets: crate::domain::client_settings::Snippets,
}

fn issued(c: &Console, t: &IssuedToken) -> Issued {
    let name = t
        .token
        .connection
        .as_ref()
        .map_or_else(|| t.token.description.clone(), |n| n.to_string());
    // The hooks read with a consumer named after the connection (one cursor per agent).
    let consumer = t
        .token
        .connection
        .as_ref()
        .map_or_else(|| "agent".to_owned(), |n| n.to_string());
    Issued {
        name,
        snippets: crate::domain::client_settings::snippets(&c.public_url, &t.secret, &consumer),
        secret: t.secret.clone(),
    }
}

/// `GET /console/agents`.
pub(super) async fn page(
    State(c): State<Console>,
    headers: HeaderMap,
) -> Result<Response, Response> {
    let s = signed_in(&c, &headers).await?;
    render(&c, &s, None, None, StatusCode::OK).await
}

/// What a refused form had in it, shown again with the reason next to it.
#[derive(Serialize, Default)]
struct Refused {
    /// The token the refused form was about (none: the issue form).
    token: Option<String>,
    error: String,
    name: String,
    connection: String,
    expires_in_days: String,
    rights: Vec<(&'static str, String)>,
}

async fn render(
    c: &Console,
    s: &Session,
    just_issued: Option<Issued>,
    refused: Option<Refused>,
    status: StatusCode,
) -> Result<Response, Response> {
    let tokens = c
        .service
        .own_tokens(&s.caller)
        .await
        .map_err(|e| Page::from(e).with(c, true).into_response())?;
    let rows: Vec<TokenRow> = tokens
        .into_iter()
        .map(|t| TokenRow {
            address: t
                .token
                .connection
                .as_ref()
                .map(|n| format!("{}/{n}", s.caller.id())),
            connection: t.token.connection.as_ref().map(|n| n.to_string()),
            rights: rights_rows(&t.token.rights.unwrap_or_default()),
            name: t.token.description.clone(),
            created_at: t.token.created_at.to_string(),
            expires_at: t.token.expires_at.map(|e| e.to_string()),
            last_used_at: t.token.last_used_at.map(|e| e.to_string()),
            revoked_at: t.token.revoked_at.map(|e| e.to_string()),
            waiting: t.waiting,
            live: t.live,
            id: t.token.id,
        })
        .collect();
    c.render(
        "agents.html",
        minijinja::context! { tokens => Serde(rows), issued => Serde(just_issued),
        refused => Serde(refused), person => s.caller.id().as_str(), expiries => EXPIRIES.to_vec(), url => c.public_url.as_ref(),
        oauth => c.service.oauth_settings().enabled,
        defaults => Serde(rights_rows(&ConnectionRights::default())),
        levels => RightLevel::ALL.iter().map(|l| l.as_str()).collect::<Vec<_>>(),
        ..Serde(frame(s, "agents")) },
    )
    .map(|html| (status, html).into_response())
    .map_err(IntoResponse::into_response)
}

/// A form of this page from a signed-in session carrying its CSRF token (`csrf` reads it), or
/// the page saying why not; nothing is changed on a refusal.
async fn checked<T>(
    c: &Console,
    headers: &HeaderMap,
    f: Result<Form<T>, FormRejection>,
    csrf: impl Fn(&T) -> Option<&str>,
) -> Result<(Session, T), Response> {
    let back = |e: ServiceError| Page::from(e).with(c, true).into_response();
    let s = session(c, headers).await.map_err(back)?;
    let f = form(f).map_err(back)?;
    c.service
        .check_console_csrf(&s.secret, csrf(&f))
        .map_err(back)?;
    Ok((s, f))
}

/// The rights as the page lists them.
fn rights_rows(r: &ConnectionRights) -> Vec<(&'static str, &'static str)> {
    Impact::ALL
        .iter()
        .map(|i| (i.as_str(), r.level(*i).as_str()))
        .collect()
}

/// The rights fields of a form (`rights_none`, `rights_code`, …) and its `preset`: `strict`
/// replaces them with the strict preset; a missing field keeps the default.
#[derive(Deserialize, Default)]
pub(super) struct RightsFields {
    preset: Option<String>,
    rights_none: Option<String>,
    rights_code: Option<String>,
    rights_database: Option<String>,
    rights_production: Option<String>,
}

impl RightsFields {
    pub(super) fn typed(&self) -> Vec<(&'static str, String)> {
        let r = [
            &self.rights_none,
            &self.rights_code,
            &self.rights_database,
            &self.rights_production,
        ];
        Impact::ALL
            .iter()
            .zip(r)
            .map(|(i, v)| (i.as_str(), v.clone().unwrap_or_default()))
            .collect()
    }

    pub(super) fn parse(&self) -> Result<Option<ConnectionRights>, ServiceError> {
        match self.preset.as_deref().map(str::trim) {
            Some("strict") => return Ok(Some(ConnectionRights::strict())),
            None | Some("") | Some("custom") => {}
            Some(other) => {
                return Err(ServiceError::invalid(format!(
                    "unknown preset {:?}: strict or custom",
                    other
                )));
            }
        }
        let mut rights = ConnectionRights::default();
        let mut any = false;
        for (impact, value) in Impact::ALL.iter().zip(self.typed()) {
            let value = value.1.trim().to_owned();
            if value.is_empty() {
                continue;
            }
            let level = value
                .parse::<RightLevel>()
                .map_err(|e| ServiceError::invalid(format!("rights for {impact}: {}", e.0)))?;
            rights.set(*impact, level);
            any = true;
        }
        Ok(any.then_some(rights))
    }
}

#[derive(Deserialize)]
pub(super) struct IssueForm {
    csrf: Option<String>,
    name: Option<String>,
    connection: Option<String>,
    expires_in_days: Option<String>,
    #[serde(flatten)]
    rights: RightsFields,
}

/// The connection name a form gave (none when left empty: the service derives one).
fn slug(field: Option<&str>) -> Result<Option<ConnectionSlug>, ServiceError> {
    match field.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => ConnectionSlug::parse(v)
            .map(Some)
            .map_err(|e| ServiceError::invalid(e.0)),
    }
}

/// `POST /console/agents`: issues the token and shows it this once (the page is not cached).
pub(super) async fn issue(
    State(c): State<Console>,
    headers: HeaderMap,
    f: Result<Form<IssueForm>, FormRejection>,
) -> Result<Response, Response> {
    let (s, f) = checked(&c, &headers, f, |f: &IssueForm| f.csrf.as_deref()).await?;
    let spec = (|| {
        let days = f
            .expires_in_days
            .as_deref()
            .unwrap_or_default()
            .trim()
            .parse::<u64>()
            .map_err(|_| ServiceError::invalid("expires_in_days must be a number of days"))?;
        Ok::<_, ServiceError>(OwnTokenSpec {
            name: f.name.clone().unwrap_or_default(),
            expires_in_days: days,
            connection: slug(f.connection.as_deref())?,
            rights: f.rights.parse()?,
        })
    })();
    let result = match spec {
        Ok(spec) => c.service.issue_own_token(&s.caller, spec).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(t) => render(&c, &s, Some(issued(&c, &t)), None, StatusCode::OK).await,
        Err(e) => {
            let refused = Refused {
                token: None,
                error: e.message.clone(),
                name: f.name.clone().unwrap_or_default(),
                connection: f.connection.clone().unwrap_or_default(),
                expires_in_days: f.expires_in_days.clone().unwrap_or_default(),
                rights: f.rights.typed(),
            };
            render(&c, &s, None, Some(refused), super::status_of(&e)).await
        }
    }
}

#[derive(Deserialize)]
pub(super) struct ConnectionForm {
    csrf: Option<String>,
    connection: Option<String>,
    #[serde(flatten)]
    rights: RightsFields,
}

/// `POST /console/agents/{id}/connection`: renames one of her connections, or changes its
/// rights (audited; the next action follows them).
pub(super) async fn update(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
    f: Result<Form<ConnectionForm>, FormRejection>,
) -> Result<Response, Response> {
    let (s, f) = checked(&c, &headers, f, |f: &ConnectionForm| f.csrf.as_deref()).await?;
    let update = (|| {
        Ok::<_, ServiceError>(ConnectionUpdate {
            name: slug(f.connection.as_deref())?,
            rights: f.rights.parse()?,
        })
    })();
    let result = match update {
        Ok(update) => {
            c.service
                .update_own_connection(&s.caller, &id, update)
                .await
        }
        Err(e) => Err(e),
    };
    match result {
        Ok(_) => Ok(Redirect::to("/console/agents").into_response()),
        Err(e) => {
            let refused = Refused {
                token: Some(id),
                error: e.message.clone(),
                connection: f.connection.clone().unwrap_or_default(),
                rights: f.rights.typed(),
                ..Refused::default()
            };
            render(&c, &s, None, Some(refused), super::status_of(&e)).await
        }
    }
}

#[derive(Deserialize)]
pub(super) struct RevokeForm {
    csrf: Option<String>,
}

/// `POST /console/agents/{id}/revoke`.
pub(super) async fn revoke(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(id): Path<String>,
    f: Result<Form<RevokeForm>, FormRejection>,
) -> Result<Response, Response> {
    let (s, _) = checked(&c, &headers, f, |f: &RevokeForm| f.csrf.as_deref()).await?;
    c.service
        .revoke_own_token(&s.caller, &id)
        .await
        .map_err(|e| Page::from(e).with(&c, true).into_response())?;
    Ok(Redirect::to("/console/agents").into_response())
}
