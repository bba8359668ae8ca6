//! Checking an agent's own tool calls (SPEC §5b): what a call's impact is, by rules, and the
//! confirmation a human gives once for exactly one call. Pure: no I/O.
//!
//! **What the server sees of a call.** The hook (`liaison hook pre-tool-use`, `… permission-request`)
//! sends the tool's name, the SHA-256 of the RFC 8785 canonical JSON of its input, and a short
//! [`ToolSummary`] — a file path, or a command line with everything that looks like a secret masked
//! ([`mask_secrets`]). The input itself never leaves the machine. The server masks the summary again
//! (a hook of another version, or a hand-made call, cannot get a secret stored), classifies it and
//! binds any confirmation to the digest *and* the summary ([`fingerprint`]): a decision a human
//! gave for what she read can only ever allow a call whose input has that digest and reads that way.
//!
//! **Impact by rules** ([`classify`]). A shell command is split into its segments (`&&`, `||`, `;`,
//! `|`, `&`, line breaks, `$(`, backquotes); each segment takes the strictest impact of the rules
//! it matches, or the tool's fallback when it matches none, and the command takes the strictest of
//! its segments — so `ls && git push` is as strict as `git push`, and a rule marking `ls` read-only
//! never relaxes what follows it. A segment that writes a file through a redirection (`>`) is at
//! least `code`. Rules only add strictness among themselves; the fallback of a tool no rule names
//! is `code` (it may change something), of a read-only tool `none`.

use serde::{Deserialize, Serialize};

use super::{ParseError, named_enum};

mod rules;
mod secrets;

pub use rules::{Classified, ToolRule, classify, default_rules};
pub use secrets::mask_secrets;

named_enum! {
    /// Which hook asked.
    pub enum CheckEvent ("hook event") {
        /// Claude Code's `PreToolUse`: before every tool call.
        PreToolUse = "pre_tool_use",
        /// `PermissionRequest`: when the client would ask its user.
        PermissionRequest = "permission_request",
    }
}

named_enum! {
    /// Where a confirmation of one tool call stands.
    ///
    /// ```text
    /// pending ──allow once──▶ allowed ──the waiting hook reads it──▶ consumed
    ///    │ └──reject──▶ rejected
    ///    └──deadline──▶ expired
    /// ```
    pub enum ConfirmationState ("confirmation state") {
        Pending = "pending",
        Allowed = "allowed",
        Rejected = "rejected",
        Expired = "expired",
        Consumed = "consumed",
    }
}

/// A confirmation of one tool call: `tcf_` and a UUIDv7.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ConfirmationId(String);

impl ConfirmationId {
    pub fn generate() -> Self {
        Self(format!("tcf_{}", uuid::Uuid::now_v7().simple()))
    }

    /// `tcf_` and 32 hex digits; anything else is refused.
    pub fn parse(s: impl Into<String>) -> Result<Self, ParseError> {
        let s = s.into();
        let ok = s
            .strip_prefix("tcf_")
            .is_some_and(|r| r.len() == 32 && r.bytes().all(|b| b.is_ascii_hexdigit()));
        if ok {
            Ok(Self(s))
        } else {
            Err(ParseError::new(format!(
                "invalid confirmation id {s:?}: expected tcf_<32 hex digits>"
            )))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ConfirmationId {
    type Error = ParseError;
    fn try_from(s: String) -> Result<Self, ParseError> {
        Self::parse(s)
    }
}

impl From<ConfirmationId> for String {
    fn from(id: ConfirmationId) -> String {
        id.0
    }
}

impl std::fmt::Display for ConfirmationId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Longest command line a summary carries, in characters; the hook cuts a longer one and says so
/// (`truncated`), and such a shell command is classified `production`: what was not read cannot
/// be known to be harmless. (Another tool's cut arguments are classified on what was read: its
/// name decides most.)
pub const MAX_COMMAND_CHARS: usize = 2_000;
/// Longest target (a path, a program), in characters.
pub const MAX_TARGET_CHARS: usize = 300;

/// What the server reads of a call: never its input, only this.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSummary {
    /// A file path (edits), a command's program, an MCP tool's server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// A shell command line, or an MCP tool's arguments as compact JSON, secrets masked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The hook cut `command` at [`MAX_COMMAND_CHARS`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

impl ToolSummary {
    /// The summary with every secret-looking part masked (again), for storing and showing.
    pub fn masked(&self) -> ToolSummary {
        ToolSummary {
            target: self.target.as_deref().map(mask_secrets),
            command: self.command.as_deref().map(mask_secrets),
            truncated: self.truncated,
        }
    }

    /// One line a human reads: `Bash: git push origin main`, `Edit: src/lib.rs`.
    pub fn line(&self, tool: &str) -> String {
        match (&self.command, &self.target) {
            (Some(c), _) => format!("{tool}: {c}{}", if self.truncated { " …" } else { "" }),
            (None, Some(t)) => format!("{tool}: {t}"),
            (None, None) => tool.to_owned(),
        }
    }
}

/// The fingerprint a confirmation is bound to: SHA-256 (hex) over the canonical JSON of the
/// connection (the token's id), the claimed command's thread (if any), the tool, the input's
/// digest and the masked summary.
pub fn fingerprint(
    connection: &str,
    thread: Option<&str>,
    tool: &str,
    input_digest: &str,
    summary: &ToolSummary,
) -> String {
    let action = serde_json::json!({
        "connection": connection,
        "thread": thread,
        "tool": tool,
        "input": input_digest,
        "summary": summary,
    });
    let bytes = serde_json_canonicalizer::to_vec(&action).expect("plain JSON canonicalises");
    super::sha256_hex(&bytes)
}

/// The digest a hook sends for a tool's input: SHA-256 (hex) of its RFC 8785 canonical JSON.
pub fn input_digest(input: &serde_json::Value) -> String {
    let bytes = serde_json_canonicalizer::to_vec(input).expect("plain JSON canonicalises");
    super::sha256_hex(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_covers_every_part() {
        let s = ToolSummary {
            command: Some("git push".into()),
            ..Default::default()
        };
        let base = fingerprint("tok", Some("thr"), "Bash", "d1", &s);
        assert_eq!(base, fingerprint("tok", Some("thr"), "Bash", "d1", &s));
        assert_ne!(base, fingerprint("tok2", Some("thr"), "Bash", "d1", &s));
        assert_ne!(base, fingerprint("tok", None, "Bash", "d1", &s));
        assert_ne!(base, fingerprint("tok", Some("thr"), "Edit", "d1", &s));
        assert_ne!(base, fingerprint("tok", Some("thr"), "Bash", "d2", &s));
        let other = ToolSummary {
            command: Some("git status".into()),
            ..Default::default()
        };
        assert_ne!(base, fingerprint("tok", Some("thr"), "Bash", "d1", &other));
    }
}
