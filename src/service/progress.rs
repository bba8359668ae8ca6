//! Progress from the agent's own tools (SPEC §7, `liaison hook tool-use`): while an agent session
//! holds the claim on a thread, each tool that changes something adds a short note to it — the
//! tool, its target, ok or failed; never the tool's output — which the thread's console page shows
//! live and an A2A client following the task receives as a `WORKING` status update.
//!
//! **Which claim.** The note goes to a live claim held by the caller's *person* (the token's):
//! a hook can never write to another person's thread, whatever it declares. Among that person's
//! claims it takes the one held by the declared agent session (`Liaison-Agent`, `LIAISON_AGENT`)
//! when one is declared, else the newest claim. So a hook and its MCP client declaring the same
//! identity always agree; without a declaration a person working one claim at a time (the
//! common case) still gets the right thread.
//!
//! **Bounded.** The same tool on the same target with the same outcome within
//! [`COALESCE_S`] seconds is folded into the previous note (`repeats`); a thread takes at most
//! [`PER_MINUTE`] new notes a minute (`rate_limited` past that) and keeps at most [`PER_THREAD`].

use serde::{Deserialize, Serialize};

use super::{Caller, ErrorCode, Result, Service, ServiceError};
use crate::domain::{Scope, ThreadId, text};
use crate::store::{NewProgress, ProgressAdded, ProgressRecord};

/// Notes like the previous one within this many seconds are folded into it.
pub const COALESCE_S: i64 = 60;
/// Most new notes one thread takes in a minute.
pub const PER_MINUTE: i64 = 12;
/// Most notes one thread keeps.
pub const PER_THREAD: i64 = 500;
/// Longest tool name, in characters.
const MAX_TOOL_CHARS: usize = 100;
/// Longest target, in characters.
const MAX_TARGET_CHARS: usize = 200;

/// What a hook reports about one tool use.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProgressReport {
    /// The tool's name, e.g. `Edit`, `Bash`, `mcp__github__create_pull_request`.
    pub tool: String,
    /// What it acted on: a file path, a command's program name.
    #[serde(default)]
    pub target: Option<String>,
    /// `ok` or `failed`.
    pub outcome: String,
}

/// What a report did.
#[derive(Debug, Clone, Serialize)]
pub struct ProgressOutcome {
    /// `added`, `coalesced`, or `no_claim` (the session holds no claim: nothing was recorded).
    pub recorded: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<ThreadId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<ProgressRecord>,
}

/// A tool's name as hooks report it (`Edit`, `mcp__github__create_pull_request`): 1 to
/// [`MAX_TOOL_CHARS`] letters, digits and `_ - . :`. Progress notes and tool checks alike.
pub(super) fn check_tool_name(tool: &str) -> Result<()> {
    if tool.is_empty()
        || tool.chars().count() > MAX_TOOL_CHARS
        || !tool
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
    {
        return Err(ServiceError::invalid(format!(
            "tool must be a tool name of 1-{MAX_TOOL_CHARS} letters, digits and _ - . :"
        )));
    }
    Ok(())
}

impl Service {
    /// Adds a progress note to the thread the caller's session holds the claim on.
    pub async fn report_progress(
        &self,
        caller: &Caller,
        report: ProgressReport,
    ) -> Result<ProgressOutcome> {
        caller.require(Scope::Agent)?;
        // A party's agent token is refused as on every other member route, not told `no_claim`.
        caller.require_participant()?;
        let tool = report.tool.trim();
        check_tool_name(tool)?;
        let target = report
            .target
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty());
        if let Some(t) = target
            && (t.chars().count() > MAX_TARGET_CHARS
                || t.chars().any(|c| c.is_control() || text::is_line_break(c))
                || text::first_storable_violation(t).is_some())
        {
            return Err(ServiceError::invalid(format!(
                "target must be one line of at most {MAX_TARGET_CHARS} characters"
            )));
        }
        let outcome = match report.outcome.as_str() {
            "ok" => "ok",
            "failed" => "failed",
            other => {
                return Err(ServiceError::invalid(format!(
                    "outcome {} is not ok or failed",
                    text::quote(other)
                )));
            }
        };
        self.add_tool_note(caller, tool, target, outcome).await
    }

    /// Adds a note (`outcome`: `ok`, `failed`, or a tool check's `started`, `denied`,
    /// `rejected`, `expired`, `refused`) to the claim the caller's session holds; the inputs are
    /// already checked.
    pub(super) async fn add_tool_note(
        &self,
        caller: &Caller,
        tool: &str,
        target: Option<&str>,
        outcome: &'static str,
    ) -> Result<ProgressOutcome> {
        let now = self.now();
        let mut claims = self.inner.store.claims_of(caller.id(), now).await?;
        // A connection's hook reports on its own claims only (SPEC §4b): her codex's edits never
        // land in the thread her claude claimed.
        if let Some(c) = &caller.connection {
            claims.retain(|claim| claim.connection.as_deref() == Some(c.token.as_str()));
        }
        let claim = match &caller.agent {
            Some(agent) => claims.into_iter().find(|c| &c.session == agent),
            None => claims.into_iter().next(),
        };
        let Some(claim) = claim else {
            return Ok(ProgressOutcome {
                recorded: "no_claim",
                thread: None,
                note: None,
            });
        };
        let added = self
            .inner
            .store
            .add_progress(NewProgress {
                thread: claim.thread.clone(),
                person: claim.person.clone(),
                session: claim.session.clone(),
                tool: tool.to_owned(),
                target: target.map(str::to_owned),
                outcome,
                now,
                coalesce_ms: COALESCE_S * 1000,
                per_minute: PER_MINUTE,
                per_thread: PER_THREAD,
            })
            .await?;
        let (recorded, note, outbox_due) = match added {
            ProgressAdded::Added { note, outbox_due } => ("added", note, outbox_due),
            ProgressAdded::Coalesced(n) => ("coalesced", n, false),
            ProgressAdded::NoClaim => {
                return Ok(ProgressOutcome {
                    recorded: "no_claim",
                    thread: None,
                    note: None,
                });
            }
            ProgressAdded::RateLimited => {
                // The window is a minute: by then a slot is free (`Retry-After` on every front).
                return Err(ServiceError::new(
                    ErrorCode::RateLimited,
                    format!(
                        "thread {} already got {PER_MINUTE} progress notes this minute",
                        claim.thread
                    ),
                )
                .with_details(serde_json::json!({ "retry_after_s": 60 })));
            }
            ProgressAdded::Full => {
                return Err(ServiceError::new(
                    ErrorCode::RateLimited,
                    format!(
                        "thread {} keeps at most {PER_THREAD} progress notes",
                        claim.thread
                    ),
                ));
            }
        };
        if let Some(t) = self.inner.store.thread(&claim.thread).await? {
            // Every reader's console shows the note; a task's followers see a new one.
            let task = t.task.is_some() && recorded == "added";
            self.thread_changed(&t.channel, &t.id, task);
            if task {
                // The task event is pushed and sent to webhooks, when there are any.
                self.outbox_due(outbox_due);
            }
        }
        Ok(ProgressOutcome {
            recorded,
            thread: Some(claim.thread),
            note: Some(note),
        })
    }
}
