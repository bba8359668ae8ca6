//! "Sessions" (SPEC §4b, §11): a member's rooms with her own agents. The list opens one (with one
//! of her connections, or any of her agents); the panel writes commands with their context (a
//! link, a selection, the page or surface, when it was captured) and a pickup deadline, shows one
//! live timeline per command (received, read by which connection, assigned, tools, confirmation
//! with "allow once" and "reject", questions answered inline, result, error, expired), gives the
//! join code with its start prompt, and ends the session. The rules are `service::personal`'s;
//! a refused form comes back with everything she typed and the reason by its field.

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::value::Serde;
use serde::{Deserialize, Serialize};

use super::session::{Session, form, frame, session, signed_in};
use super::{Console, Page};
use crate::domain::personal::{CommandContext, DEFAULT_COMMAND_TTL_S, SessionId};
use crate::domain::tool_check::ConfirmationId;
use crate::domain::{
    ApprovalId, ConnectionSlug, Decision, DecisionPath, Impact, Kind, ThreadId, text,
};
use crate::service::{
    CommandSpec, ConfirmationDecision, JoinCode, PostRequest, ServiceError, SessionSpec,
};

/// The pickup deadlines the panel offers, in minutes.
const EXPIRIES_MIN: [i64; 6] = [1, 5, 10, 30, 60, 1440];

/// What a refused form had in it, with the reason and the field it is about.
#[derive(Serialize, Default)]
struct Refused {
    /// Which form: `open`, `command`, `answer:<thread>`, `decide:<approval>`.
    form: String,
    /// The field the reason is about (`instruction`, `context_url`, …), when one.
    field: Option<&'static str>,
    error: String,
    values: std::collections::BTreeMap<String, String>,
}

impl Refused {
    fn new(form: impl Into<String>, e: &ServiceError, values: &[(&str, Option<&str>)]) -> Self {
        Refused {
            form: form.into(),
            field: field_of(&e.message),
            error: e.message.clone(),
            values: values
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.unwrap_or_default().to_owned()))
                .collect(),
        }
    }
}

/// The field a refusal is about, from the service's message (which names it).
fn field_of(message: &str) -> Option<&'static str> {
    let m = message.to_ascii_lowercase();
    [
        ("context.url", "context_url"),
        ("context.selection", "context_text"),
        ("context.surface", "context_surface"),
        ("context.captured_at", "context_captured_at"),
        ("expires_in_s", "expires_in"),
        ("impact", "impact"),
        ("title", "title"),
        ("connection", "connection"),
        ("subject", "subject"),
        ("body", "instruction"),
        ("reason", "reason"),
    ]
    .into_iter()
    .find(|(needle, _)| m.contains(needle))
    .map(|(_, field)| field)
}

/// A form of these pages from a signed-in session carrying its CSRF token, or the page saying why
/// not; nothing is changed on a refusal.
async fn checked<T: HasCsrf>(
    c: &Console,
    headers: &HeaderMap,
    f: Result<Form<T>, FormRejection>,
) -> Result<(Session, T), Response> {
    let back = |e: ServiceError| Page::from(e).with(c, true).into_response();
    let s = session(c, headers).await.map_err(back)?;
    let f = form(f).map_err(back)?;
    c.service
        .check_console_csrf(&s.secret, f.csrf())
        .map_err(back)?;
    Ok((s, f))
}

trait HasCsrf {
    fn csrf(&self) -> Option<&str>;
}

fn session_id(id: &str) -> Result<SessionId, ServiceError> {
    SessionId::parse(id).map_err(|_| ServiceError::not_found("session", id))
}

/// `GET /console/sessions`: her sessions and the form to open one.
pub(super) async fn list(
    State(c): State<Console>,
    headers: HeaderMap,
) -> Result<Response, Response> {
    let s = signed_in(&c, &headers).await?;
    render_list(&c, &s, None, StatusCode::OK).await
}

async fn render_list(
    c: &Console,
    s: &Session,
    refused: Option<Refused>,
    status: StatusCode,
) -> Result<Response, Response> {
    let fail = |e: ServiceError| Page::from(e).with(c, true).into_response();
    let sessions = c.service.sessions(&s.caller).await.map_err(fail)?;
    let connections = live_connections(c, s).await.map_err(fail)?;
    c.render(
        "sessions.html",
        minijinja::context! { sessions => Serde(sessions), connections => connections,
        refused => Serde(refused), ..Serde(frame(s, "sessions")) },
    )
    .map(|html| (status, html).into_response())
    .map_err(IntoResponse::into_response)
}

async fn live_connections(c: &Console, s: &Session) -> Result<Vec<String>, ServiceError> {
    Ok(c.service
        .own_tokens(&s.caller)
        .await?
        .into_iter()
        .filter(|t| t.live)
        .filter_map(|t| t.token.connection.map(|n| n.to_string()))
        .collect())
}

#[derive(Deserialize)]
pub(super) struct OpenForm {
    csrf: Option<String>,
    connection: Option<String>,
    title: Option<String>,
}

impl HasCsrf for OpenForm {
    fn csrf(&self) -> Option<&str> {
        self.csrf.as_deref()
    }
}

/// `POST /console/sessions`: opens a session, then shows its panel.
pub(super) async fn open(
    State(c): State<Console>,
    headers: HeaderMap,
    f: Result<Form<OpenForm>, FormRejection>,
) -> Result<Response, Response> {
    let (s, f) = checked(&c, &headers, f).await?;
    let spec = match f.connection.as_deref().map(str::trim) {
        None | Some("") | Some("*") => Ok(None),
        Some(name) => ConnectionSlug::parse(name)
            .map(Some)
            .map_err(|_| ServiceError::not_found("connection", name)),
    }
    .map(|connection| SessionSpec {
        connection,
        title: f.title.clone(),
    });
    let opened = match spec {
        Ok(spec) => c.service.open_session(&s.caller, spec).await,
        Err(e) => Err(e),
    };
    match opened {
        Ok(view) => {
            Ok(Redirect::to(&format!("/console/sessions/{}", view.session.id)).into_response())
        }
        Err(e) => {
            let status = super::status_of(&e);
            let refused = Refused::new(
                "open",
                &e,
                &[
                    ("connection", f.connection.as_deref()),
                    ("title", f.title.as_deref()),
                ],
            );
            render_list(&c, &s, Some(refused), status).await
        }
    }
}

/// `GET /console/sessions/{id}`: the panel.
pub(super) async fn panel(
    State(c): State<Console>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Response> {
    let s = signed_in(&c, &headers).await?;
    let id = session_id(&id).map_err(|e| Page::from(e).with(&c, true).into_response())?;
    render_panel(&c, &s, &id, None, None, StatusCode::OK).await
}

async fn render_panel(
    c: &Console,
    s: &Session,
    id: &SessionId,
    code: Option<JoinCode>,
    refused: Option<Refused>,
    status: StatusCode,
) -> Result<Response, Response> {
    let fail = |e: ServiceError| Page::from(e).with(c, true).into_response();
    let view = c.service.session(&s.caller, id).await.map_err(fail)?;
    // Her connection's rights, for the settings.
    let rights = match &view.session.with {
        crate::domain::Address::Connection(_, name) => c
            .service
            .own_tokens(&s.caller)
            .await
            .map_err(fail)?
            .into_iter()
            .find(|t| t.live && t.token.connection.as_ref() == Some(name))
            .map(|t| {
                let r = t.token.rights.unwrap_or_default();
                Impact::ALL
                    .iter()
                    .map(|i| (i.as_str(), r.level(*i).as_str()))
                    .collect::<Vec<_>>()
            }),
        crate::domain::Address::Person(_) => None,
    };
    // The settings to paste, with a placeholder where the token goes (its secret was shown once).
    let (token, consumer) = match &view.session.with {
        crate::domain::Address::Connection(_, name) => {
            (format!("<your {name} token>"), name.to_string())
        }
        crate::domain::Address::Person(_) => {
            ("<your agent's token>".to_owned(), "agent".to_owned())
        }
    };
    let snippets = crate::domain::client_settings::snippets(&c.public_url, &token, &consumer);
    let expiries: Vec<_> = EXPIRIES_MIN
        .iter()
        .map(|m| {
            let text = match m {
                1 => "1 minute".to_owned(),
                60 => "1 hour".to_owned(),
                1440 => "1 day".to_owned(),
                m => format!("{m} minutes"),
            };
            minijinja::context! { value => m * 60, text => text }
        })
        .collect();
    c.render(
        "session.html",
        minijinja::context! { s => Serde(&view), code => Serde(code), refused => Serde(refused),
        rights => rights, expiries => expiries, snippets => Serde(&snippets), default_expiry => DEFAULT_COMMAND_TTL_S,
        levels => crate::domain::RightLevel::ALL.iter().map(|l| l.as_str()).collect::<Vec<_>>(),
        impacts => Impact::ALL.iter().map(|i| i.as_str()).collect::<Vec<_>>(),
        form_key => super::compose::new_form_key(),
        ..Serde(frame(s, "sessions")) },
    )
    .map(|html| (status, html).into_response())
    .map_err(IntoResponse::into_response)
}

#[derive(Deserialize)]
pub(super) struct CommandForm {
    csrf: Option<String>,
    form_key: Option<String>,
    instruction: Option<String>,
    impact: Option<String>,
    expires_in: Option<String>,
    context_url: Option<String>,
    context_text: Option<String>,
    context_surface: Option<String>,
    context_captured_at: Option<String>,
}

impl HasCsrf for CommandForm {
    fn csrf(&self) -> Option<&str> {
        self.csrf.as_deref()
    }
}

fn filled(v: &Option<String>) -> Option<String> {
    v.as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

impl CommandForm {
    fn spec(&self) -> Result<CommandSpec, ServiceError> {
        let impact = match filled(&self.impact) {
            Some(i) => Some(i.parse::<Impact>()?),
            None => None,
        };
        let expires_in_s = match filled(&self.expires_in) {
            Some(v) => Some(v.parse::<i64>().map_err(|_| {
                ServiceError::invalid(format!("expires_in_s {v:?} is not a number of seconds"))
            })?),
            None => None,
        };
        let context = CommandContext {
            url: filled(&self.context_url),
            selection: self
                .context_text
                .as_deref()
                .filter(|t| !t.trim().is_empty())
                .map(|t| text::normalize_line_breaks(t).into_owned()),
            surface: filled(&self.context_surface),
            captured_at: filled(&self.context_captured_at),
        };
        Ok(CommandSpec {
            instruction: self.instruction.clone().unwrap_or_default(),
            subject: None,
            impact,
            context: Some(context),
            expires_in_s,
            attachments: Vec::new(),
            idempotency_key: filled(&self.form_key),
        })
    }
}

/// `POST /console/sessions/{id}/commands`: writes a command, then shows the panel.
pub(super) async fn command(
    State(c): State<Console>,
    Path(id): Path<String>,
    headers: HeaderMap,
    f: Result<Form<CommandForm>, FormRejection>,
) -> Result<Response, Response> {
    let (s, f) = checked(&c, &headers, f).await?;
    let id = session_id(&id).map_err(|e| Page::from(e).with(&c, true).into_response())?;
    let sent = match f.spec() {
        Ok(spec) => c.service.command(&s.caller, &id, spec).await,
        Err(e) => Err(e),
    };
    match sent {
        Ok(r) => {
            Ok(Redirect::to(&format!("/console/sessions/{id}#cmd-{}", r.thread)).into_response())
        }
        Err(e) => {
            let status = super::status_of(&e);
            let refused = Refused::new(
                "command",
                &e,
                &[
                    ("instruction", f.instruction.as_deref()),
                    ("impact", f.impact.as_deref()),
                    ("expires_in", f.expires_in.as_deref()),
                    ("context_url", f.context_url.as_deref()),
                    ("context_text", f.context_text.as_deref()),
                    ("context_surface", f.context_surface.as_deref()),
                    ("context_captured_at", f.context_captured_at.as_deref()),
                ],
            );
            render_panel(&c, &s, &id, None, Some(refused), status).await
        }
    }
}

#[derive(Deserialize)]
pub(super) struct PlainForm {
    csrf: Option<String>,
}

impl HasCsrf for PlainForm {
    fn csrf(&self) -> Option<&str> {
        self.csrf.as_deref()
    }
}

/// `POST /console/sessions/{id}/code`: a new join code, shown this once with its start prompt.
pub(super) async fn code(
    State(c): State<Console>,
    Path(id): Path<String>,
    headers: HeaderMap,
    f: Result<Form<PlainForm>, FormRejection>,
) -> Result<Response, Response> {
    let (s, _) = checked(&c, &headers, f).await?;
    let id = session_id(&id).map_err(|e| Page::from(e).with(&c, true).into_response())?;
    let code = c
        .service
        .new_join_code(&s.caller, &id)
        .await
        .map_err(|e| Page::from(e).with(&c, true).into_response())?;
    render_panel(&c, &s, &id, Some(code), None, StatusCode::OK).await
}

/// `POST /console/sessions/{id}/end`: ends the session at once.
pub(super) async fn end(
    State(c): State<Console>,
    Path(id): Path<String>,
    headers: HeaderMap,
    f: Result<Form<PlainForm>, FormRejection>,
) -> Result<Response, Response> {
    let (s, _) = checked(&c, &headers, f).await?;
    let id = session_id(&id).map_err(|e| Page::from(e).with(&c, true).into_response())?;
    c.service
        .end_session(&s.caller, &id)
        .await
        .map_err(|e| Page::from(e).with(&c, true).into_response())?;
    Ok(Redirect::to(&format!("/console/sessions/{id}")).into_response())
}

#[derive(Deserialize)]
pub(super) struct AnswerForm {
    csrf: Option<String>,
    form_key: Option<String>,
    thread: Option<String>,
    body: Option<String>,
}

impl HasCsrf for AnswerForm {
    fn csrf(&self) -> Option<&str> {
        self.csrf.as_deref()
    }
}

/// `POST /console/sessions/{id}/answer`: her answer to her agent's question, in the command's
/// thread.
pub(super) async fn answer(
    State(c): State<Console>,
    Path(id): Path<String>,
    headers: HeaderMap,
    f: Result<Form<AnswerForm>, FormRejection>,
) -> Result<Response, Response> {
    let (s, f) = checked(&c, &headers, f).await?;
    let id = session_id(&id).map_err(|e| Page::from(e).with(&c, true).into_response())?;
    let thread_field = f.thread.clone().unwrap_or_default();
    let posted = match ThreadId::parse(thread_field.as_str()) {
        Ok(thread) => {
            // Only a command of this session is answered from its panel.
            let view = c.service.session(&s.caller, &id).await;
            match view {
                Ok(v) if v.commands.iter().any(|c| c.thread == thread) => {
                    let req = PostRequest {
                        kind: Some(Kind::Reply),
                        thread: Some(thread.clone()),
                        body: f.body.clone().unwrap_or_default(),
                        idempotency_key: filled(&f.form_key).map(|k| format!("{k}-{thread}")),
                        ..Default::default()
                    };
                    c.service.post(&s.caller, req).await.map(|_| thread)
                }
                Ok(_) => Err(ServiceError::not_found("command", &thread)),
                Err(e) => Err(e),
            }
        }
        Err(_) => Err(ServiceError::not_found("command", &thread_field)),
    };
    match posted {
        Ok(thread) => {
            Ok(Redirect::to(&format!("/console/sessions/{id}#cmd-{thread}")).into_response())
        }
        Err(e) => {
            let status = super::status_of(&e);
            let refused = Refused::new(
                format!("answer:{thread_field}"),
                &e,
                &[("body", f.body.as_deref())],
            );
            render_panel(&c, &s, &id, None, Some(refused), status).await
        }
    }
}

#[derive(Deserialize)]
pub(super) struct DecideForm {
    csrf: Option<String>,
    approval: Option<String>,
    decision: Option<String>,
    reason: Option<String>,
}

impl HasCsrf for DecideForm {
    fn csrf(&self) -> Option<&str> {
        self.csrf.as_deref()
    }
}

/// `POST /console/sessions/{id}/decide`: "allow once" or "reject" for a command's confirmation,
/// from the panel (the same decision as on Approvals).
pub(super) async fn decide(
    State(c): State<Console>,
    Path(id): Path<String>,
    headers: HeaderMap,
    f: Result<Form<DecideForm>, FormRejection>,
) -> Result<Response, Response> {
    let (s, f) = checked(&c, &headers, f).await?;
    let id = session_id(&id).map_err(|e| Page::from(e).with(&c, true).into_response())?;
    let approval_field = f.approval.clone().unwrap_or_default();
    let decided = async {
        let approval = ApprovalId::parse(approval_field.as_str())
            .map_err(|_| ServiceError::not_found("approval", &approval_field))?;
        let decision = match f.decision.as_deref() {
            Some("allow") => Decision::Allow,
            Some("reject") => Decision::Reject,
            other => {
                return Err(ServiceError::invalid(format!(
                    "decision {:?} is not allow or reject",
                    other.unwrap_or_default()
                )));
            }
        };
        let reason = filled(&f.reason);
        c.service
            .decide(
                &s.caller,
                &approval,
                decision,
                reason,
                DecisionPath::Console,
            )
            .await
    }
    .await;
    match decided {
        Ok(_) => Ok(Redirect::to(&format!("/console/sessions/{id}")).into_response()),
        Err(e) => {
            let status = super::status_of(&e);
            let refused = Refused::new(
                format!("decide:{approval_field}"),
                &e,
                &[("reason", f.reason.as_deref())],
            );
            render_panel(&c, &s, &id, None, Some(refused), status).await
        }
    }
}

#[derive(Deserialize)]
pub(super) struct ConfirmationForm {
    csrf: Option<String>,
    /// The session panel it was decided from (back to it), else Approvals.
    session: Option<String>,
    decision: Option<String>,
    reason: Option<String>,
}

impl HasCsrf for ConfirmationForm {
    fn csrf(&self) -> Option<&str> {
        self.csrf.as_deref()
    }
}

/// `POST /console/confirmations/{id}/decide`: "allow once" or "reject" for one of her agents'
/// tool calls (SPEC §5b), from her session panel or Approvals, while the agent's hook waits.
pub(super) async fn decide_confirmation(
    State(c): State<Console>,
    Path(id): Path<String>,
    headers: HeaderMap,
    f: Result<Form<ConfirmationForm>, FormRejection>,
) -> Result<Response, Response> {
    let (s, f) = checked(&c, &headers, f).await?;
    let panel = f.session.as_deref().and_then(|p| SessionId::parse(p).ok());
    let back = match &panel {
        Some(session) => format!("/console/sessions/{session}"),
        None => "/console/approvals".to_owned(),
    };
    let decided = async {
        let confirmation = ConfirmationId::parse(id.as_str())
            .map_err(|_| ServiceError::not_found("confirmation", &id))?;
        let decision = match f.decision.as_deref() {
            Some("allow") => Decision::Allow,
            Some("reject") => Decision::Reject,
            other => {
                return Err(ServiceError::invalid(format!(
                    "decision {:?} is not allow or reject",
                    other.unwrap_or_default()
                )));
            }
        };
        let caller = s.caller.clone().arriving_via(DecisionPath::Console);
        c.service
            .decide_tool_confirmation(
                &caller,
                &confirmation,
                decision,
                ConfirmationDecision {
                    reason: filled(&f.reason),
                },
            )
            .await
    }
    .await;
    match (decided, panel) {
        (Ok(_), _) => Ok(Redirect::to(&back).into_response()),
        // From her session panel: the panel again, the reason where it was refused.
        (Err(e), Some(panel)) => {
            let status = super::status_of(&e);
            let refused = Refused::new(
                format!("confirm:{id}"),
                &e,
                &[("reason", f.reason.as_deref())],
            );
            render_panel(&c, &s, &panel, None, Some(refused), status).await
        }
        (Err(e), None) => Err(Page::from(e).with(&c, true).into_response()),
    }
}

#[derive(Deserialize)]
pub(super) struct RightsForm {
    csrf: Option<String>,
    #[serde(flatten)]
    rights: super::agents::RightsFields,
}

impl HasCsrf for RightsForm {
    fn csrf(&self) -> Option<&str> {
        self.csrf.as_deref()
    }
}

/// `POST /console/sessions/{id}/rights`: the rights of the session's connection, from its
/// settings (the same change as on Connect, audited there); they apply to the next action.
pub(super) async fn rights(
    State(c): State<Console>,
    Path(id): Path<String>,
    headers: HeaderMap,
    f: Result<Form<RightsForm>, FormRejection>,
) -> Result<Response, Response> {
    let (s, f) = checked(&c, &headers, f).await?;
    let id = session_id(&id).map_err(|e| Page::from(e).with(&c, true).into_response())?;
    let changed = async {
        let view = c.service.session(&s.caller, &id).await?;
        let crate::domain::Address::Connection(_, name) = &view.session.with else {
            return Err(ServiceError::invalid(
                "this session is with any of your agents: change each one's rights on Connect",
            ));
        };
        let token = c
            .service
            .own_tokens(&s.caller)
            .await?
            .into_iter()
            .find(|t| t.live && t.token.connection.as_ref() == Some(name))
            .ok_or_else(|| ServiceError::not_found("connection", name))?;
        let rights = f
            .rights
            .parse()?
            .ok_or_else(|| ServiceError::invalid("choose a right for each impact, or a preset"))?;
        c.service
            .update_own_connection(
                &s.caller,
                &token.token.id,
                crate::service::ConnectionUpdate {
                    name: None,
                    rights: Some(rights),
                },
            )
            .await
    }
    .await;
    match changed {
        Ok(_) => Ok(Redirect::to(&format!("/console/sessions/{id}#settings")).into_response()),
        Err(e) => {
            let status = super::status_of(&e);
            let mut refused = Refused::new("rights", &e, &[]);
            for (impact, value) in f.rights.typed() {
                refused.values.insert(format!("rights_{impact}"), value);
            }
            render_panel(&c, &s, &id, None, Some(refused), status).await
        }
    }
}
