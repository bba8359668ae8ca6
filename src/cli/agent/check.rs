//! `liaison hook pre-tool-use` and `liaison hook permission-request` (SPEC §5b): before a tool
//! runs, ask the server whether it may, and answer Claude Code (or Codex, which reads the same
//! JSON) with its verdict.
//!
//! What leaves the machine: the tool's name, the SHA-256 of its input's RFC 8785 canonical JSON,
//! and a summary — an edited file's path (relative to the working directory), a shell command line
//! or an MCP tool's arguments with everything that looks like a secret masked
//! ([`mask_secrets`]), cut at 2,000 characters. Never a file's content.
//!
//! The answers, on stdout:
//! - `PreToolUse`: `{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision":
//!   "allow" | "deny" | "ask", "permissionDecisionReason": …}}`;
//! - `PermissionRequest`: `{"hookSpecificOutput": {"hookEventName": "PermissionRequest",
//!   "decision": {"behavior": "allow"}}}` or `{"behavior": "deny", "message": …}`; for "ask"
//!   nothing is printed, so the client shows its own dialog.
//!
//! When the server says `confirm` the hook keeps asking (each read a long-poll of up to 50 s)
//! until she decides or its own time is up: `--timeout`, the hook's timeout in the client's
//! settings, less a margin so the answer is printed before the client gives up on the hook. A
//! server that cannot be reached, or answers with a server error, gives `ask` (her own local
//! prompt), never `allow`; a credential the server refuses, or a flood it refuses, gives `deny`.

use std::time::Duration;

use serde_json::{Value, json};

use super::client::Remote;
use crate::domain::tool_check::{
    CheckEvent, MAX_COMMAND_CHARS, MAX_TARGET_CHARS, ToolSummary, input_digest, mask_secrets,
};

/// What the hook tells the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    Allow(String),
    Deny(String),
    /// The client asks its user as usual.
    Ask(String),
}

/// How much earlier than its timeout the hook answers.
const MARGIN: Duration = Duration::from_secs(10);

/// The tool, its input and the summary the server reads, from a hook's input.
pub(crate) fn summary_of(input: &Value) -> Option<(String, ToolSummary)> {
    let tool = input["tool_name"].as_str()?.to_owned();
    let args = &input["tool_input"];
    let cwd = input["cwd"].as_str().unwrap_or_default();
    let cut = |s: String| -> (String, bool) {
        if s.chars().count() > MAX_COMMAND_CHARS {
            (s.chars().take(MAX_COMMAND_CHARS).collect(), true)
        } else {
            (s, false)
        }
    };
    let mut summary = ToolSummary::default();
    match tool.as_str() {
        "Edit" | "Write" | "MultiEdit" | "NotebookEdit" | "Read" | "NotebookRead" => {
            if let Some(path) = args["file_path"]
                .as_str()
                .or_else(|| args["notebook_path"].as_str())
            {
                summary.target = Some(super::relative(path, cwd));
            }
        }
        "Bash" => {
            let command = args["command"].as_str().unwrap_or_default();
            summary.target = Some(super::program(command));
            let (c, truncated) = cut(mask_secrets(command));
            summary.command = Some(c);
            summary.truncated = truncated;
        }
        // Codex's edits: the files the patch names, never its content.
        "apply_patch" => {
            let patch = args["command"].as_str().unwrap_or_default();
            summary.target = Some(mask_secrets(&super::patch_targets(patch, cwd)));
        }
        name if name.starts_with("mcp__") => {
            summary.target = name.split("__").nth(1).map(str::to_owned);
            if args.as_object().is_some_and(|o| !o.is_empty()) {
                let (c, truncated) = cut(mask_secrets(&args.to_string()));
                summary.command = Some(c);
                summary.truncated = truncated;
            }
        }
        _ => {
            for key in ["file_path", "path", "url", "pattern"] {
                if let Some(v) = args[key].as_str() {
                    summary.target = Some(mask_secrets(v));
                    break;
                }
            }
        }
    }
    if let Some(t) = &summary.target
        && t.chars().count() > MAX_TARGET_CHARS
    {
        summary.target = Some(t.chars().take(MAX_TARGET_CHARS).collect());
    }
    Some((tool, summary))
}

/// Asks the server and waits for her decision when it says `confirm`, until `timeout` (less
/// [`MARGIN`]) has passed.
pub(crate) async fn decide(
    remote: anyhow::Result<Remote>,
    input: &Value,
    event: CheckEvent,
    timeout: Duration,
) -> Answer {
    let Some((tool, summary)) = summary_of(input) else {
        return Answer::Ask("liaison: the hook input names no tool".to_owned());
    };
    let remote = match remote {
        Ok(r) => r,
        Err(e) => return Answer::Ask(format!("liaison: cannot check this call ({e:#})")),
    };
    let started = tokio::time::Instant::now();
    let budget = timeout.saturating_sub(MARGIN).max(Duration::from_secs(1));
    let deadline = started + budget;
    let body = json!({
        "event": event.as_str(),
        "tool": tool,
        "input_digest": input_digest(&input["tool_input"]),
        "summary": summary,
        "wait_s": budget.as_secs().max(1),
    });
    let mut answer = remote
        .send_api("/api/v1/tool-checks", Some(&body), Duration::from_secs(30))
        .await;
    loop {
        let value = match answer {
            Err(e) => {
                return Answer::Ask(format!(
                    "liaison could not be reached ({e:#}); decide yourself"
                ));
            }
            Ok((status, v)) if status.is_server_error() => {
                return Answer::Ask(format!(
                    "liaison answered {status}: {}; decide yourself",
                    v["error"]["message"].as_str().unwrap_or("no message")
                ));
            }
            Ok((status, v)) if status.is_client_error() => {
                let message = v["error"]["message"].as_str().unwrap_or("no message");
                let code = v["error"]["code"].as_str().unwrap_or_default();
                // A credential it refuses, or too many waiting: the call does not run. Anything
                // else (a hook and server that disagree on the request): her own prompt.
                return match code {
                    "unauthenticated" | "token_revoked" | "token_expired" | "forbidden"
                    | "too_many_waiters" | "rate_limited" => {
                        Answer::Deny(format!("liaison refused the check ({code}): {message}"))
                    }
                    _ => Answer::Ask(format!("liaison refused the check ({code}): {message}")),
                };
            }
            Ok((_, v)) => v,
        };
        let reason = value["reason"].as_str().unwrap_or_default().to_owned();
        match value["decision"].as_str() {
            Some("allow") => return Answer::Allow(reason),
            Some("deny") => return Answer::Deny(reason),
            Some("confirm") => {}
            _ => return Answer::Ask("liaison gave no verdict; decide yourself".to_owned()),
        }
        let Some(id) = value["confirmation"]["id"].as_str() else {
            return Answer::Ask("liaison gave no confirmation to wait on".to_owned());
        };
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Answer::Deny(
                "liaison: no human decided in time, so the call is denied; ask again only if it is still needed"
                    .to_owned(),
            );
        }
        // Whole seconds, rounded up: a wait of 0 would answer at once and spin until the deadline.
        let wait = ((deadline - now).as_millis().div_ceil(1000) as u64).clamp(1, 50);
        eprintln!("{reason}");
        answer = remote
            .send_api(
                &format!("/api/v1/tool-checks/{id}?wait_s={wait}"),
                None,
                Duration::from_secs(wait + 30),
            )
            .await;
    }
}

/// What the hook prints for `answer` (nothing: the client asks its user).
pub(crate) fn render(event: CheckEvent, answer: &Answer) -> Option<Value> {
    match event {
        CheckEvent::PreToolUse => {
            let (decision, reason) = match answer {
                Answer::Allow(r) => ("allow", r),
                Answer::Deny(r) => ("deny", r),
                Answer::Ask(r) => ("ask", r),
            };
            Some(json!({
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": decision,
                    "permissionDecisionReason": reason,
                }
            }))
        }
        CheckEvent::PermissionRequest => {
            let decision = match answer {
                Answer::Allow(_) => json!({ "behavior": "allow" }),
                Answer::Deny(r) => json!({ "behavior": "deny", "message": r }),
                Answer::Ask(_) => return None,
            };
            Some(json!({
                "hookSpecificOutput": { "hookEventName": "PermissionRequest", "decision": decision }
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_carries_no_secret_and_no_content() {
        let input = json!({
            "tool_name": "Bash",
            "cwd": "/repo",
            "tool_input": {"command": "PGPASSWORD=hunter2 psql -h db -c 'DELETE FROM users'"}
        });
        let (tool, s) = summary_of(&input).unwrap();
        assert_eq!(tool, "Bash");
        assert_eq!(s.target.as_deref(), Some("psql"));
        let c = s.command.unwrap();
        assert!(!c.contains("hunter2"), "{c}");
        assert!(c.contains("DELETE FROM users"));
        let edit = json!({
            "tool_name": "Write",
            "cwd": "/repo",
            "tool_input": {"file_path": "/repo/src/a.rs", "content": "API_KEY=sk-live-1234567890"}
        });
        let (_, s) = summary_of(&edit).unwrap();
        assert_eq!(s.target.as_deref(), Some("src/a.rs"));
        assert_eq!(s.command, None);
        let patch = json!({
            "tool_name": "apply_patch",
            "cwd": "/repo",
            "tool_input": {"command": "*** Begin Patch\n*** Update File: src/a.rs\n+API_KEY=sk-live-1234567890\n*** End Patch"}
        });
        let (_, s) = summary_of(&patch).unwrap();
        assert_eq!(s.target.as_deref(), Some("src/a.rs"));
        assert_eq!(s.command, None);
        let long = json!({"tool_name": "Bash", "tool_input": {"command": "x".repeat(3000)}});
        let (_, s) = summary_of(&long).unwrap();
        assert!(s.truncated);
        assert_eq!(s.command.unwrap().chars().count(), MAX_COMMAND_CHARS);
    }

    #[test]
    fn answers_in_each_hook_format() {
        let pre = render(CheckEvent::PreToolUse, &Answer::Deny("no".into())).unwrap();
        assert_eq!(pre["hookSpecificOutput"]["permissionDecision"], "deny");
        assert_eq!(pre["hookSpecificOutput"]["permissionDecisionReason"], "no");
        let perm = render(CheckEvent::PermissionRequest, &Answer::Allow("ok".into())).unwrap();
        assert_eq!(perm["hookSpecificOutput"]["decision"]["behavior"], "allow");
        assert!(render(CheckEvent::PermissionRequest, &Answer::Ask("x".into())).is_none());
    }
}
