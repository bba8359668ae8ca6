//! "Tool rules" (SPEC §5b, the rules are `Service::tool_rules`'s): the rules she adds to the
//! configured ones, which give her agents' tool calls an impact (then her connections' rights
//! decide: allowed, confirm, off). She adds one (a tool, optionally the words its command starts
//! with or holds, and the impact) or removes one; the configured rules are listed read-only so
//! she sees what already applies. A refused form comes back with what she typed.

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::value::Serde;
use serde::Deserialize;

use super::session::{Session, form, frame, session, signed_in};
use super::{Console, Page};
use crate::domain::Impact;
use crate::domain::tool_check::ToolRule;
use crate::service::{MAX_PERSON_RULES, ServiceError};

/// A refused form and what she typed.
#[derive(serde::Serialize, Default)]
struct Refused {
    error: String,
    tool: String,
    matching: String,
    words: String,
    impact: String,
}

/// `GET /console/tool-rules`.
pub(super) async fn page(
    State(c): State<Console>,
    headers: HeaderMap,
) -> Result<Response, Response> {
    let s = signed_in(&c, &headers).await?;
    render(&c, &s, None, StatusCode::OK).await
}

async fn render(
    c: &Console,
    s: &Session,
    refused: Option<Refused>,
    status: StatusCode,
) -> Result<Response, Response> {
    let fail = |e: ServiceError| Page::from(e).with(c, true).into_response();
    let mine = c.service.tool_rules(&s.caller).await.map_err(fail)?;
    let configured = c.service.configured_tool_rules();
    c.render(
        "tool_rules.html",
        minijinja::context! {
            mine => Serde(&mine),
            configured => Serde(configured),
            impacts => Impact::ALL.iter().map(|i| i.as_str()).collect::<Vec<_>>(),
            refused => Serde(refused),
            max => MAX_PERSON_RULES,
            ..Serde(frame(s, "agents"))
        },
    )
    .map(|html| (status, html).into_response())
    .map_err(IntoResponse::into_response)
}

#[derive(Deserialize)]
pub(super) struct RuleForm {
    csrf: Option<String>,
    /// `add` or `remove`.
    action: Option<String>,
    tool: Option<String>,
    /// `any` (the whole tool), `command` (starts with), `contains` (holds the words).
    matching: Option<String>,
    words: Option<String>,
    impact: Option<String>,
    /// The rule to remove: its position (1-based) in her list.
    index: Option<usize>,
}

/// `POST /console/tool-rules`: adds a rule, or removes one.
pub(super) async fn change(
    State(c): State<Console>,
    headers: HeaderMap,
    f: Result<Form<RuleForm>, FormRejection>,
) -> Result<Response, Response> {
    let back = |e: ServiceError| Page::from(e).with(&c, true).into_response();
    let s = session(&c, &headers).await.map_err(back)?;
    let f = form(f).map_err(back)?;
    c.service
        .check_console_csrf(&s.secret, f.csrf.as_deref())
        .map_err(back)?;
    let changed = async {
        let mut rules = c.service.tool_rules(&s.caller).await?;
        match f.action.as_deref() {
            Some("add") => rules.push(typed_rule(&f)?),
            Some("remove") => {
                let at = f
                    .index
                    .filter(|i| (1..=rules.len()).contains(i))
                    .ok_or_else(|| {
                        ServiceError::invalid(
                            "that rule is no longer in your list (changed in another tab?); nothing changed",
                        )
                    })?;
                rules.remove(at - 1);
            }
            _ => {
                return Err(ServiceError::invalid(
                    "the form must say action=add or action=remove; nothing changed",
                ));
            }
        }
        c.service.set_tool_rules(&s.caller, rules).await
    }
    .await;
    match changed {
        Ok(_) => Ok(Redirect::to("/console/tool-rules").into_response()),
        Err(e) => {
            let refused = Refused {
                error: e.message.clone(),
                tool: f.tool.clone().unwrap_or_default(),
                matching: f.matching.clone().unwrap_or_default(),
                words: f.words.clone().unwrap_or_default(),
                impact: f.impact.clone().unwrap_or_default(),
            };
            render(&c, &s, Some(refused), super::status_of(&e)).await
        }
    }
}

/// The rule the add form describes.
fn typed_rule(f: &RuleForm) -> Result<ToolRule, ServiceError> {
    let tool = f.tool.as_deref().unwrap_or_default().trim().to_owned();
    let words = f
        .words
        .as_deref()
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .map(str::to_owned);
    let (command, contains) = match (f.matching.as_deref(), words) {
        (Some("any") | None, None) => (None, None),
        (Some("any") | None, Some(_)) => {
            return Err(ServiceError::invalid(
                "words are given but the rule matches the whole tool: choose \"command starts with\" or \"holds the words\"",
            ));
        }
        (Some("command"), Some(w)) => (Some(w), None),
        (Some("contains"), Some(w)) => (None, Some(w)),
        (Some("command" | "contains"), None) => {
            return Err(ServiceError::invalid("give the words the rule matches"));
        }
        (Some(other), _) => {
            return Err(ServiceError::invalid(format!(
                "unknown match {other:?}: any, command or contains"
            )));
        }
    };
    let impact = f.impact.as_deref().unwrap_or_default();
    let impact = impact.parse::<Impact>().map_err(|_| {
        ServiceError::invalid(format!(
            "impact {impact:?} is not one of none, code, database, production"
        ))
    })?;
    Ok(ToolRule {
        tool,
        command,
        contains,
        impact,
    })
}
