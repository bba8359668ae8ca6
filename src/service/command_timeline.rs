//! A command's lifecycle as its person sees it (SPEC §4b): the steps read from the command's
//! thread (delivered, read by each connection, claimed, the tool calls and confirmations, the
//! questions, answers and results) and where the command stands. The sessions themselves, the
//! join codes and the writing of commands are `personal.rs`'s.

use serde::Serialize;

use super::{Caller, Result, Service};
use crate::domain::personal::CommandContext;
use crate::domain::tool_check::ConfirmationState;
use crate::domain::{
    ApprovalId, ApprovalState, Attachment, ConnectionSlug, Impact, Kind, MessageId, ReplyResult,
    ResultStatus, ThreadId, ThreadState, Timestamp, WrittenBy, text,
};
use crate::store::{CommandRecord, ThreadRecord};

/// One step of a command's lifecycle.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub at: Timestamp,
    /// `received`, `read`, `claimed`, `tool`, `question`, `answer`, `status`,
    /// `confirmation_needed`, `allowed`, `rejected`, `result`, `error`, `closed`, `expired`.
    pub step: &'static str,
    pub text: String,
    /// The connection it is about, when one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection: Option<ConnectionSlug>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<MessageId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalId>,
    /// A result's structured content.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<ReplyResult>,
}

/// One command with its lifecycle.
#[derive(Debug, Clone, Serialize)]
pub struct CommandView {
    pub thread: ThreadId,
    pub subject: String,
    pub instruction: String,
    pub impact: Impact,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<CommandContext>,
    /// Where it stands: `waiting` (delivered, nobody read it), `read`, `confirmation_needed`,
    /// `working`, `question` (her agent asks her), `done`, `failed`, `expired`, `closed`.
    pub status: &'static str,
    pub pickup_by: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claimed_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expired_at: Option<Timestamp>,
    /// The approval waiting for her "allow once", while one does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_approval: Option<ApprovalId>,
    pub timeline: Vec<Step>,
}

impl Service {
    /// One command's lifecycle, from its thread as she sees it.
    pub(super) async fn command_view(
        &self,
        caller: &Caller,
        c: CommandRecord,
        t: ThreadRecord,
    ) -> Result<CommandView> {
        let view = self.thread(caller, &t.id, None, Some(100)).await?;
        let mut names = ConnectionNames::default();
        let mut steps = Vec::new();
        let opener = view.messages.first();
        let instruction = opener
            .map(|m| m.message.message.body.clone())
            .unwrap_or_default();
        let impact = opener
            .and_then(|m| m.message.message.impact)
            .unwrap_or(Impact::None);
        let context = opener.and_then(|m| context_of(&m.message.message.attachments));
        if let Some(m) = opener {
            steps.push(Step {
                at: m.message.message.created_at,
                step: "received",
                text: "delivered to your agent's inbox".into(),
                connection: None,
                message: Some(m.message.message.id.clone()),
                approval: None,
                result: None,
            });
            // The first read by each connection.
            let mut seen: Vec<String> = Vec::new();
            for r in &m.receipts {
                for cr in &r.consumers {
                    let (Some(conn), Some(at)) = (&cr.connection, cr.read_at) else {
                        continue;
                    };
                    if seen.contains(&conn.to_string()) {
                        continue;
                    }
                    seen.push(conn.to_string());
                    steps.push(Step {
                        at,
                        step: "read",
                        text: format!("by {conn}"),
                        connection: Some(conn.clone()),
                        message: None,
                        approval: None,
                        result: None,
                    });
                }
            }
        }
        let mut pending_approval = None;
        for a in &view.approvals {
            steps.push(Step {
                at: a.created_at,
                step: "confirmation_needed",
                text: format!("impact {}: allow it once or reject it", a.impact),
                connection: None,
                message: None,
                approval: Some(a.id.clone()),
                result: None,
            });
            match (a.state, a.decided_at) {
                (ApprovalState::Pending, _) => pending_approval = Some(a.id.clone()),
                (ApprovalState::Rejected, Some(at)) => steps.push(Step {
                    at,
                    step: "rejected",
                    text: a.reason.as_deref().map_or_else(
                        || "by you".to_owned(),
                        |r| format!("by you: {}", text::one_line(r)),
                    ),
                    connection: None,
                    message: None,
                    approval: Some(a.id.clone()),
                    result: None,
                }),
                (ApprovalState::Expired, _) => steps.push(Step {
                    at: a.expires_at,
                    step: "rejected",
                    text: "nobody decided in time".into(),
                    connection: None,
                    message: None,
                    approval: Some(a.id.clone()),
                    result: None,
                }),
                (_, Some(at)) => steps.push(Step {
                    at,
                    step: "allowed",
                    text: "once, by you".into(),
                    connection: None,
                    message: None,
                    approval: Some(a.id.clone()),
                    result: None,
                }),
                (_, None) => {}
            }
        }
        if let Some(at) = c.claimed_at {
            let holder = match &c.claimed_by {
                Some(token) => names.get(self, token).await?,
                None => None,
            };
            steps.push(Step {
                at,
                step: "claimed",
                text: match &holder {
                    Some(h) => format!("by {h}"),
                    None => "by an agent".into(),
                },
                connection: holder,
                message: None,
                approval: None,
                result: None,
            });
        }
        for p in &view.progress {
            let target = p
                .target
                .as_deref()
                .map(|t| format!(" {t}"))
                .unwrap_or_default();
            let repeats = if p.repeats > 1 {
                format!(" (×{})", p.repeats)
            } else {
                String::new()
            };
            steps.push(Step {
                at: p.updated_at,
                step: "tool",
                text: format!("{}{target}: {}{repeats}", p.tool, p.outcome),
                connection: None,
                message: None,
                approval: None,
                result: None,
            });
        }
        // Her agent's own tool calls she confirms (SPEC §5b), made for this command.
        let mut tool_pending = false;
        for tc in self
            .inner
            .store
            .confirmations_for_thread(caller.id(), t.id.as_str())
            .await?
        {
            let action = format!("{} ({})", tc.summary.line(&tc.tool), tc.impact);
            let by = tc
                .connection
                .as_deref()
                .and_then(|n| ConnectionSlug::parse(n).ok());
            steps.push(Step {
                at: tc.created_at,
                step: "confirmation_needed",
                text: format!("{action}: allow it once or reject it"),
                connection: by.clone(),
                message: None,
                approval: None,
                result: None,
            });
            let decided = |step: &'static str, at: Timestamp, text: String| Step {
                at,
                step,
                text,
                connection: by.clone(),
                message: None,
                approval: None,
                result: None,
            };
            match (tc.state, tc.decided_at) {
                (ConfirmationState::Pending, _) if tc.expires_at > self.now() => {
                    tool_pending = true;
                }
                (ConfirmationState::Allowed | ConfirmationState::Consumed, Some(at)) => {
                    steps.push(decided("allowed", at, format!("{action}: once, by you")));
                }
                (ConfirmationState::Rejected, Some(at)) => steps.push(decided(
                    "rejected",
                    at,
                    match &tc.reason {
                        Some(r) => format!("{action}: by you: {}", text::one_line(r)),
                        None => format!("{action}: by you"),
                    },
                )),
                _ => steps.push(decided(
                    "rejected",
                    tc.expires_at,
                    format!("{action}: nobody decided in time"),
                )),
            }
        }
        for m in view.messages.iter().skip(1) {
            let msg = &m.message.message;
            let by = match &msg.connection {
                Some(token) => names.get(self, token).await?,
                None => None,
            };
            let (step, text) = match (msg.kind, msg.written_by, &msg.result) {
                (Kind::Question, WrittenBy::Agent, _) => ("question", msg.body.clone()),
                (Kind::Reply, WrittenBy::Agent, Some(r)) if r.status == ResultStatus::Failed => {
                    ("error", msg.body.clone())
                }
                (Kind::Reply, WrittenBy::Agent, _) => ("result", msg.body.clone()),
                (Kind::Close, _, _) if msg.outcome == Some(crate::domain::Outcome::Failed) => {
                    ("error", msg.body.clone())
                }
                (Kind::Close, _, _) => ("closed", msg.body.clone()),
                (_, WrittenBy::Human, _) => ("answer", msg.body.clone()),
                _ => ("status", msg.body.clone()),
            };
            steps.push(Step {
                at: msg.created_at,
                step,
                text,
                connection: by,
                message: Some(msg.id.clone()),
                approval: None,
                result: msg.result.clone(),
            });
        }
        if let Some(at) = c.expired_at {
            steps.push(Step {
                at,
                step: "expired",
                text: "nobody picked it up in time: withdrawn from every inbox".into(),
                connection: None,
                message: None,
                approval: None,
                result: None,
            });
        }
        // In time order; steps at the same moment keep the order they were added in.
        steps.sort_by_key(|s| s.at);
        let status = status_of(&c, &t, &steps, pending_approval.is_some() || tool_pending);
        Ok(CommandView {
            thread: t.id,
            subject: t.subject,
            instruction,
            impact,
            context,
            status,
            pickup_by: c.pickup_by,
            claimed_at: c.claimed_at,
            expired_at: c.expired_at,
            pending_approval,
            timeline: steps,
        })
    }
}

/// Where a command stands, from its record, its thread and its steps.
fn status_of(c: &CommandRecord, t: &ThreadRecord, steps: &[Step], pending: bool) -> &'static str {
    if c.expired_at.is_some() {
        return "expired";
    }
    let last_message = steps
        .iter()
        .rev()
        .find(|s| s.message.is_some() && s.step != "received")
        .map(|s| s.step);
    match (&t.state, last_message) {
        (ThreadState::Closed { outcome }, _) if *outcome == crate::domain::Outcome::Failed => {
            "failed"
        }
        (ThreadState::Closed { .. }, Some("error")) => "failed",
        (ThreadState::Closed { .. }, Some("result")) => "done",
        (ThreadState::Closed { .. }, _) => "closed",
        (_, Some("error")) => "failed",
        (ThreadState::Answered, Some("result")) => "done",
        (ThreadState::Open { .. }, Some("question")) => "question",
        _ if pending => "confirmation_needed",
        _ if c.claimed_at.is_some() => "working",
        _ if steps.iter().any(|s| s.step == "read") => "read",
        _ => "waiting",
    }
}

/// The context attachment of a command: `{"context": {...}}` as JSON data, the form the console's
/// compose page uses too.
pub(crate) fn context_attachment(c: &CommandContext) -> Attachment {
    Attachment::Data {
        data: serde_json::json!({ "context": c }),
    }
}

/// The context a command carries, read back from its attachment.
fn context_of(attachments: &[Attachment]) -> Option<CommandContext> {
    attachments.iter().find_map(|a| match a {
        Attachment::Data { data } => data
            .get("context")
            .and_then(|c| serde_json::from_value(c.clone()).ok()),
        _ => None,
    })
}

/// Connection names by token id, looked up once per view.
#[derive(Default)]
struct ConnectionNames(std::collections::HashMap<String, Option<ConnectionSlug>>);

impl ConnectionNames {
    async fn get(&mut self, service: &Service, token: &str) -> Result<Option<ConnectionSlug>> {
        if let Some(n) = self.0.get(token) {
            return Ok(n.clone());
        }
        let n = service.connection_name(token).await?;
        self.0.insert(token.to_owned(), n.clone());
        Ok(n)
    }
}
