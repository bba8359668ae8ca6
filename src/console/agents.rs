//! "Connect an agent" (SPEC §11): a member issues an `agent` token for herself (a name and an
//! expiry), sees it once with ready-to-paste settings for Claude Code (HTTP and stdio), Codex and
//! the hooks, with this server's real address; lists her agent tokens with their last use and the
//! long-polls waiting on them; and revokes one, which ends its MCP sessions and waiting
//! long-polls at once (the rules are the service's: `Service::issue_own_token`,
//! `Service::revoke_own_token`).

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::value::Serde;
use serde::{Deserialize, Serialize};

use super::session::{Session, form, frame, session, signed_in};
use super::{Console, Page};
use crate::service::{IssuedToken, OWN_TOKEN_MAX_DAYS, OwnTokenSpec, ServiceError};

/// The expiries the form offers, in days.
const EXPIRIES: [u64; 5] = [1, 7, 30, 90, OWN_TOKEN_MAX_DAYS];

#[derive(Serialize)]
struct TokenRow {
    id: String,
    name: String,
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
    claude_http: String,
    claude_stdio: String,
    codex: String,
    hooks: String,
}

fn issued(c: &Console, t: &IssuedToken) -> Issued {
    let url = &c.public_url;
    let secret = &t.secret;
    Issued {
        name: t.token.description.clone(),
        claude_http: format!(
            "claude mcp add --transport http liaison {url}/mcp \\\n  --header \"Authorization: Bearer {secret}\""
        ),
        claude_stdio: format!(
            "claude mcp add liaison -e LIAISON_URL={url} -e LIAISON_TOKEN={secret} -- liaison mcp --stdio"
        ),
        codex: format!(
            "# ~/.codex/config.toml, with LIAISON_TOKEN={secret} in Codex's environment\n\
             [mcp_servers.liaison]\nurl = \"{url}/mcp\"\nbearer_token_env_var = \"LIAISON_TOKEN\"\ntool_timeout_sec = 120"
        ),
        // Claude Code's settings.json: `env` is set for every session and its hooks.
        hooks: format!(
            "{{\"env\": {{\"LIAISON_URL\": \"{url}\", \"LIAISON_TOKEN\": \"{secret}\"}},\n \
             \"hooks\": {{\n  \"SessionStart\": [{{\"hooks\": [{{\"type\": \"command\", \"command\": \"liaison hook session-start --consumer claude\"}}]}}],\n  \
             \"Stop\": [{{\"hooks\": [{{\"type\": \"command\", \"command\": \"liaison hook stop --consumer claude\"}}]}}],\n  \
             \"PostToolUse\": [{{\"hooks\": [{{\"type\": \"command\", \"command\": \"liaison hook tool-use\"}}]}}],\n  \
             \"PostToolUseFailure\": [{{\"hooks\": [{{\"type\": \"command\", \"command\": \"liaison hook tool-use\"}}]}}]\n}}}}"
        ),
        secret: secret.clone(),
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

async fn render(
    c: &Console,
    s: &Session,
    just_issued: Option<Issued>,
    error: Option<String>,
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
        minijinja::context! { tokens => Serde(rows), issued => Serde(just_issued), error => error,
        expiries => EXPIRIES.to_vec(), url => c.public_url.as_ref(),
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

#[derive(Deserialize)]
pub(super) struct IssueForm {
    csrf: Option<String>,
    name: Option<String>,
    expires_in_days: Option<String>,
}

/// `POST /console/agents`: issues the token and shows it this once (the page is not cached).
pub(super) async fn issue(
    State(c): State<Console>,
    headers: HeaderMap,
    f: Result<Form<IssueForm>, FormRejection>,
) -> Result<Response, Response> {
    let (s, f) = checked(&c, &headers, f, |f: &IssueForm| f.csrf.as_deref()).await?;
    let spec = f
        .expires_in_days
        .as_deref()
        .unwrap_or_default()
        .trim()
        .parse::<u64>()
        .map_err(|_| ServiceError::invalid("expires_in_days must be a number of days"))
        .map(|days| OwnTokenSpec {
            name: f.name.clone().unwrap_or_default(),
            expires_in_days: days,
        });
    match spec {
        Ok(spec) => match c.service.issue_own_token(&s.caller, spec).await {
            Ok(t) => render(&c, &s, Some(issued(&c, &t)), None, StatusCode::OK).await,
            Err(e) => {
                let status = super::status_of(&e);
                render(&c, &s, None, Some(e.message), status).await
            }
        },
        Err(e) => render(&c, &s, None, Some(e.message), StatusCode::BAD_REQUEST).await,
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
