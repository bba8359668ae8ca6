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

use super::{Impact, ParseError, named_enum};

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

/// One classification rule. `tool` names the tool (`Bash`, `Edit`) or a prefix and `*`
/// (`mcp__github__*`); with neither `command` nor `contains` the rule gives every call of the tool
/// its impact. `command` matches a command segment that *starts* with its words (after `sudo` and
/// `NAME=value` assignments): `git push`, `kubectl`. `contains` matches a segment (or an MCP tool's
/// name and arguments) holding its words anywhere, as whole words, in any case: `DROP`, `deploy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolRule {
    pub tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    pub impact: Impact,
}

impl ToolRule {
    fn new(tool: &str, command: Option<&str>, contains: Option<&str>, impact: Impact) -> Self {
        ToolRule {
            tool: tool.to_owned(),
            command: command.map(str::to_owned),
            contains: contains.map(str::to_owned),
            impact,
        }
    }

    /// The rule as one line, for the audit log and the answer's `rule`.
    pub fn describe(&self) -> String {
        let mut s = self.tool.clone();
        if let Some(c) = &self.command {
            s.push_str(&format!(" command \"{c}\""));
        }
        if let Some(c) = &self.contains {
            s.push_str(&format!(" contains \"{c}\""));
        }
        format!("{s} → {}", self.impact)
    }

    /// Refuses a rule that could never match or would match everything by accident.
    pub fn check(&self) -> Result<(), ParseError> {
        let tool_ok = !self.tool.is_empty()
            && self.tool.len() <= 100
            && self
                .tool
                .trim_end_matches('*')
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
            && self.tool.matches('*').count() <= 1
            && (!self.tool.contains('*') || self.tool.ends_with('*'));
        if !tool_ok {
            return Err(ParseError::new(format!(
                "invalid tool rule {:?}: tool is a tool name, or a prefix followed by *",
                self.tool
            )));
        }
        for words in [&self.command, &self.contains].into_iter().flatten() {
            if words_of(words).is_empty() || words.len() > 200 {
                return Err(ParseError::new(format!(
                    "invalid tool rule for {}: {words:?} holds no word to match",
                    self.tool
                )));
            }
        }
        Ok(())
    }

    fn names(&self, tool: &str) -> bool {
        match self.tool.strip_suffix('*') {
            Some(prefix) => tool.starts_with(prefix),
            None => tool == self.tool,
        }
    }
}

/// Claude Code's (and Codex's) tools that only read.
const READ_ONLY_TOOLS: &[&str] = &[
    "Read",
    "Glob",
    "Grep",
    "LS",
    "NotebookRead",
    "WebFetch",
    "WebSearch",
    "TodoWrite",
    "Task",
    "BashOutput",
    "KillShell",
    "ExitPlanMode",
    "AskUserQuestion",
    "ListMcpResourcesTool",
    "ReadMcpResourceTool",
];

/// Tools that write files.
const EDIT_TOOLS: &[&str] = &["Edit", "Write", "MultiEdit", "NotebookEdit"];

/// Programs (and subcommands) that only read.
const READ_ONLY_COMMANDS: &[&str] = &[
    "ls",
    "cat",
    "head",
    "tail",
    "less",
    "grep",
    "rg",
    "find",
    "fd",
    "pwd",
    "echo",
    "printf",
    "wc",
    "which",
    "whoami",
    "date",
    "file",
    "stat",
    "du",
    "df",
    "tree",
    "diff",
    "sort",
    "uniq",
    "cut",
    "jq",
    "env",
    "true",
    "cd",
    "git status",
    "git log",
    "git diff",
    "git show",
    "git branch",
    "git blame",
    "git rev-parse",
    "git remote -v",
    "cargo check",
    "cargo test",
    "cargo clippy",
    "cargo build",
    "npm test",
    "pytest",
];

/// Commands that reach production.
const PRODUCTION_COMMANDS: &[&str] = &[
    "git push",
    "kubectl",
    "helm",
    "terraform apply",
    "terraform destroy",
    "tofu apply",
    "pulumi up",
    "docker push",
    "podman push",
    "npm publish",
    "cargo publish",
    "gh release",
    "gh pr merge",
    "aws",
    "gcloud",
    "az",
    "flyctl deploy",
    "vercel",
    "ansible-playbook",
];

/// Commands that reach a database.
const DATABASE_COMMANDS: &[&str] = &[
    "psql",
    "mysql",
    "mariadb",
    "mongosh",
    "mongo",
    "redis-cli",
    "sqlite3",
    "pg_restore",
    "pg_dump",
];

/// Words that mark a segment (or an MCP call) anywhere in it.
const DATABASE_WORDS: &[&str] = &[
    "DROP TABLE",
    "DROP DATABASE",
    "DROP SCHEMA",
    "DELETE FROM",
    "TRUNCATE",
    "ALTER TABLE",
];
const PRODUCTION_WORDS: &[&str] = &["deploy"];

/// The rules liaison starts with; `[[tool_rules]]` in the configuration add to them.
pub fn default_rules() -> Vec<ToolRule> {
    let mut rules = Vec::new();
    for t in READ_ONLY_TOOLS {
        rules.push(ToolRule::new(t, None, None, Impact::None));
    }
    for t in EDIT_TOOLS {
        rules.push(ToolRule::new(t, None, None, Impact::Code));
    }
    // liaison's own tools: posting is checked by the server's own rules (§4b), not here.
    rules.push(ToolRule::new("mcp__liaison__*", None, None, Impact::None));
    for c in READ_ONLY_COMMANDS {
        rules.push(ToolRule::new("Bash", Some(c), None, Impact::None));
    }
    for c in PRODUCTION_COMMANDS {
        rules.push(ToolRule::new("Bash", Some(c), None, Impact::Production));
    }
    for c in DATABASE_COMMANDS {
        rules.push(ToolRule::new("Bash", Some(c), None, Impact::Database));
    }
    for w in DATABASE_WORDS {
        rules.push(ToolRule::new("Bash", None, Some(w), Impact::Database));
        rules.push(ToolRule::new("mcp__*", None, Some(w), Impact::Database));
    }
    // A deploy script, whatever its path: `./scripts/deploy.sh`, `deploy-prod`.
    rules.push(ToolRule::new(
        "Bash",
        Some("deploy*"),
        None,
        Impact::Production,
    ));
    for w in PRODUCTION_WORDS {
        rules.push(ToolRule::new("mcp__*", None, Some(w), Impact::Production));
    }
    rules
}

/// What [`classify`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    pub impact: Impact,
    /// The rule that decided, in words (`Bash command "git push" → production`, `fallback`).
    pub rule: String,
}

fn stricter(a: Classified, b: Classified) -> Classified {
    if b.impact > a.impact { b } else { a }
}

/// The impact of one call of `tool` summarised as `summary`, by `rules` (see the module's docs).
pub fn classify(rules: &[ToolRule], tool: &str, summary: &ToolSummary) -> Classified {
    if summary.truncated && tool == "Bash" {
        return Classified {
            impact: Impact::Production,
            rule: format!(
                "the command is longer than liaison reads ({MAX_COMMAND_CHARS} characters)"
            ),
        };
    }
    let named: Vec<&ToolRule> = rules.iter().filter(|r| r.names(tool)).collect();
    let fallback = Classified {
        impact: Impact::Code,
        rule: format!("{tool}: no rule names it, so it may change something → code"),
    };
    // Rules for the whole tool (no words): the strictest decides the tool's own level.
    let whole = named
        .iter()
        .filter(|r| r.command.is_none() && r.contains.is_none())
        .map(|r| Classified {
            impact: r.impact,
            rule: r.describe(),
        })
        .reduce(stricter);
    let shell = tool == "Bash";
    if !shell {
        // Any other tool: its own level (or the fallback), raised by words in its name or input.
        let text = format!("{tool} {}", summary.command.as_deref().unwrap_or_default());
        let words = words_of(&text);
        let mut found = whole.unwrap_or(fallback);
        if tool.starts_with("mcp__") && !tool.starts_with("mcp__liaison__") {
            let action = tool.rsplit("__").next().unwrap_or(tool);
            if found.impact == Impact::Code && reads_by_name(action) {
                found = Classified {
                    impact: Impact::None,
                    rule: format!("{tool}: named like a read → none"),
                };
            }
        }
        for r in named.iter().filter(|r| r.contains.is_some()) {
            if contains_words(&words, r.contains.as_deref().unwrap_or_default()) {
                found = stricter(
                    found,
                    Classified {
                        impact: r.impact,
                        rule: r.describe(),
                    },
                );
            }
        }
        return found;
    }
    let Some(command) = summary.command.as_deref().filter(|c| !c.trim().is_empty()) else {
        return whole.unwrap_or(fallback);
    };
    let mut overall: Option<Classified> = None;
    for segment in segments(command) {
        let words = words_of(&segment);
        let leading = leading_words(&segment);
        if leading.is_empty() {
            continue;
        }
        let mut matched: Option<Classified> = None;
        for r in &named {
            let hit = match (&r.command, &r.contains) {
                (Some(c), _) => starts_with_words(&leading, c),
                (None, Some(w)) => contains_words(&words, w),
                (None, None) => false,
            };
            if hit {
                let c = Classified {
                    impact: r.impact,
                    rule: r.describe(),
                };
                matched = Some(match matched {
                    Some(m) => stricter(m, c),
                    None => c,
                });
            }
        }
        let mut seg = matched.unwrap_or_else(|| Classified {
            impact: Impact::Code,
            rule: format!(
                "Bash: {} matches no rule, so it may change something → code",
                leading.first().map(String::as_str).unwrap_or("the command")
            ),
        });
        if writes_a_file(&segment) && seg.impact < Impact::Code {
            seg = Classified {
                impact: Impact::Code,
                rule: "Bash: the command writes a file (>) → code".to_owned(),
            };
        }
        overall = Some(match overall {
            Some(o) => stricter(o, seg),
            None => seg,
        });
    }
    overall.unwrap_or(fallback)
}

/// An MCP tool named like a read (`get_…`, `list_…`, …).
fn reads_by_name(action: &str) -> bool {
    [
        "get", "list", "read", "search", "fetch", "query", "find", "show", "describe",
    ]
    .iter()
    .any(|p| action == *p || action.starts_with(&format!("{p}_")))
}

/// The segments of a command line: the parts run one after another or in a pipeline.
fn segments(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = command.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let split = match c {
            ';' | '|' | '&' | '`' | '(' | ')' | '{' | '}' => true,
            '$' if chars.get(i + 1) == Some(&'(') => true,
            c if super::text::is_line_break(c) => true,
            _ => false,
        };
        // `2>&1` and `&>` are redirections, not separators.
        let redirect = c == '&' && (i > 0 && chars[i - 1] == '>' || chars.get(i + 1) == Some(&'>'));
        if split && !redirect {
            out.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
        i += 1;
    }
    out.push(current);
    out.into_iter().filter(|s| !s.trim().is_empty()).collect()
}

/// Whether a segment redirects output into a file (`>`, `>>`), other than `/dev/null` or
/// another descriptor.
fn writes_a_file(segment: &str) -> bool {
    let mut rest = segment;
    while let Some(at) = rest.find('>') {
        let after = rest[at + 1..].trim_start_matches('>').trim_start();
        if !(after.starts_with("/dev/null") || after.starts_with('&') || after.is_empty()) {
            return true;
        }
        rest = &rest[at + 1..];
    }
    false
}

/// A text's words, lower-cased: runs of letters, digits and `-` (so `--release` is not
/// `release`, and `mcp__vercel__deploy` holds `deploy`).
fn words_of(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '-'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// A segment's words from its program on: `sudo`, `env`-style `NAME=value` assignments and
/// quotes skipped; a program given as a path is its file name (`/usr/bin/git` is `git`,
/// `./deploy.sh` is `deploy.sh`).
fn leading_words(segment: &str) -> Vec<String> {
    let mut words = segment
        .split_whitespace()
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .skip_while(|w| {
            *w == "sudo" || *w == "exec" || *w == "time" || *w == "nohup" || {
                let name = w.split('=').next().unwrap_or_default();
                w.contains('=')
                    && !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            }
        })
        .map(str::to_lowercase)
        .collect::<Vec<_>>();
    if let Some(first) = words.first_mut()
        && let Some(name) = first.rsplit('/').next()
    {
        *first = name.to_owned();
    }
    words
}

/// Whether a segment's leading words are `command`'s; its last word may end with `*` (a prefix).
fn starts_with_words(leading: &[String], command: &str) -> bool {
    let want: Vec<String> = command.split_whitespace().map(str::to_lowercase).collect();
    if want.is_empty() || leading.len() < want.len() {
        return false;
    }
    want.iter()
        .zip(leading)
        .all(|(w, l)| match w.strip_suffix('*') {
            Some(prefix) => l.starts_with(prefix),
            None => w == l,
        })
}

fn contains_words(words: &[String], phrase: &str) -> bool {
    let want = words_of(phrase);
    !want.is_empty() && words.windows(want.len()).any(|w| w == want.as_slice())
}

/// Names that say their value is a secret.
const SECRET_NAMES: &[&str] = &[
    "token",
    "secret",
    "passw",
    "pwd",
    "apikey",
    "api_key",
    "api-key",
    "auth",
    "credential",
    "private",
    "access_key",
    "access-key",
    "session",
    "cookie",
];

/// Prefixes of well-known credentials.
const SECRET_PREFIXES: &[&str] = &[
    "sk-",
    "sk_",
    "pk_live",
    "rk_",
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "github_pat_",
    "glpat-",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "akia",
    "asia",
    "lsn_",
    "eyj",
    "npm_",
    "hf_",
];

const MASK: &str = "***";

fn secret_name(name: &str) -> bool {
    let n = name
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_ascii_lowercase();
    !n.is_empty() && SECRET_NAMES.iter().any(|s| n.contains(s))
}

/// A value that looks like a credential: a well-known prefix, or a long run of letters and digits
/// mixing upper case, lower case and digits (a git commit id, all lower-case hex, is not one).
fn secret_value(value: &str) -> bool {
    let v = value.trim_matches(|c: char| matches!(c, '"' | '\'' | ',' | ';' | ')' | '(' | '}'));
    let lower = v.to_ascii_lowercase();
    if v.len() >= 8 && SECRET_PREFIXES.iter().any(|p| lower.starts_with(p)) {
        return true;
    }
    let token_chars = v
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '_' | '-' | '.'));
    token_chars
        && v.len() >= 24
        && v.chars().any(|c| c.is_ascii_uppercase())
        && v.chars().any(|c| c.is_ascii_lowercase())
        && v.chars().any(|c| c.is_ascii_digit())
}

/// `text` with everything that looks like a secret replaced by `***`: values of names that say
/// "token", "secret", "password"… (`NAME=…`, `--name …`, `"name": "…"`), a URL's password,
/// the word after `Bearer` / `Basic`, well-known credential prefixes (`sk-`, `ghp_`, `AKIA`,
/// `lsn_`, JWTs…) and long mixed-case runs of letters and digits. Line breaks become spaces: a
/// summary is one line.
pub fn mask_secrets(text: &str) -> String {
    let one_line: String = text
        .chars()
        .map(|c| {
            if super::text::is_line_break(c) || c.is_control() {
                ' '
            } else {
                c
            }
        })
        .collect();
    let mut out: Vec<String> = Vec::new();
    let mut mask_next = false;
    // Words end at spaces and at commas (compact JSON has no spaces: `{"api_key":"…","q":1}`).
    let mut pieces = Vec::new();
    let mut start = 0;
    for (i, c) in one_line.char_indices() {
        if c == ' ' || c == ',' {
            pieces.push(&one_line[start..i]);
            pieces.push(&one_line[i..i + 1]);
            start = i + 1;
        }
    }
    pieces.push(&one_line[start..]);
    for word in pieces {
        if word == " " || word == "," {
            out.push(word.to_owned());
            continue;
        }
        if mask_next && !word.is_empty() {
            let lower = word
                .trim_matches(|c| c == '"' || c == '\'')
                .to_ascii_lowercase();
            if matches!(lower.as_str(), "bearer" | "basic" | "token") {
                // `Authorization: Bearer …`: the secret is the word after the scheme.
                out.push(word.to_owned());
                continue;
            }
            let closing: String = word
                .chars()
                .rev()
                .take_while(|c| matches!(c, '"' | '\'' | ',' | '}' | ')'))
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            out.push(format!("{MASK}{closing}"));
            mask_next = false;
            continue;
        }
        out.push(mask_word(word, &mut mask_next));
    }
    out.concat()
}

fn mask_word(word: &str, mask_next: &mut bool) -> String {
    if word.is_empty() {
        return String::new();
    }
    let bare = word.trim_matches(|c: char| matches!(c, '"' | '\'' | ',' | '{' | '}'));
    let lower = bare.to_ascii_lowercase();
    if matches!(lower.as_str(), "bearer" | "basic" | "token") {
        *mask_next = true;
        return word.to_owned();
    }
    // `--password secret`, `-H 'Authorization: …'` (its value follows)
    if (bare.starts_with("--") || lower.ends_with(':')) && !bare.contains('=') && secret_name(bare)
    {
        *mask_next = true;
        return word.to_owned();
    }
    // A URL's password: scheme://user:password@host
    if let Some(scheme) = word.find("://") {
        let rest = &word[scheme + 3..];
        if let Some(at) = rest.find('@') {
            let userinfo = &rest[..at];
            if let Some(colon) = userinfo.find(':') {
                return format!(
                    "{}{}:{MASK}{}",
                    &word[..scheme + 3],
                    &userinfo[..colon],
                    &rest[at..]
                );
            }
        }
        return word.to_owned();
    }
    // NAME=value, --name=value, "name":"value", name: value
    if let Some(at) = word.find(['=', ':']) {
        let (name, value) = (&word[..at], &word[at + 1..]);
        if secret_name(name) && !value.is_empty() {
            let closing: String = value
                .chars()
                .rev()
                .take_while(|c| matches!(c, '"' | '\'' | ',' | '}'))
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let opening: String = value
                .chars()
                .take_while(|c| matches!(c, '"' | '\''))
                .collect();
            return format!("{name}{}{opening}{MASK}{closing}", &word[at..at + 1]);
        }
        if secret_name(name) && value.is_empty() {
            *mask_next = true;
            return word.to_owned();
        }
        if secret_value(value) {
            return format!("{name}{}{MASK}", &word[at..at + 1]);
        }
    }
    if secret_value(bare) {
        return word.replace(bare, MASK);
    }
    word.to_owned()
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

    fn bash(c: &str) -> Impact {
        classify(
            &default_rules(),
            "Bash",
            &ToolSummary {
                command: Some(c.to_owned()),
                ..Default::default()
            },
        )
        .impact
    }

    #[test]
    fn shell_commands_take_the_strictest_of_their_segments() {
        assert_eq!(bash("ls -la"), Impact::None);
        assert_eq!(bash("git status && git diff"), Impact::None);
        assert_eq!(bash("git push origin main"), Impact::Production);
        assert_eq!(bash("ls && git push"), Impact::Production);
        assert_eq!(
            bash("cd repo; GIT_SSH=x sudo git push -f"),
            Impact::Production
        );
        assert_eq!(bash("/usr/bin/kubectl apply -f x.yaml"), Impact::Production);
        assert_eq!(bash("echo $(git push)"), Impact::Production);
        assert_eq!(bash("psql -c 'select 1'"), Impact::Database);
        assert_eq!(bash("cat dump.sql | sqlite3 app.db"), Impact::Database);
        assert_eq!(bash("echo 'DROP TABLE users' > x.sql"), Impact::Database);
        assert_eq!(bash("./scripts/deploy.sh staging"), Impact::Production);
        assert_eq!(bash("rm -rf build"), Impact::Code);
        assert_eq!(bash("echo hi > notes.txt"), Impact::Code);
        assert_eq!(bash("echo hi 2>&1 >/dev/null"), Impact::None);
        assert_eq!(bash("ls\u{2028}git push"), Impact::Production);
        let long = ToolSummary {
            command: Some("ls".into()),
            truncated: true,
            ..Default::default()
        };
        assert_eq!(
            classify(&default_rules(), "Bash", &long).impact,
            Impact::Production
        );
    }

    #[test]
    fn other_tools_by_name_and_words() {
        let c = |tool: &str, cmd: Option<&str>| {
            classify(
                &default_rules(),
                tool,
                &ToolSummary {
                    command: cmd.map(str::to_owned),
                    ..Default::default()
                },
            )
            .impact
        };
        assert_eq!(c("Read", None), Impact::None);
        assert_eq!(c("Edit", None), Impact::Code);
        assert_eq!(c("SomethingNew", None), Impact::Code);
        assert_eq!(c("mcp__github__list_issues", None), Impact::None);
        assert_eq!(c("mcp__github__create_issue", None), Impact::Code);
        assert_eq!(c("mcp__vercel__deploy", None), Impact::Production);
        assert_eq!(
            c("mcp__db__run", Some(r#"{"sql":"DROP TABLE x"}"#)),
            Impact::Database
        );
        assert_eq!(c("mcp__liaison__post", None), Impact::None);
    }

    #[test]
    fn configured_rules_only_add_strictness() {
        let mut rules = default_rules();
        rules.push(ToolRule::new(
            "Bash",
            Some("make"),
            None,
            Impact::Production,
        ));
        rules.push(ToolRule::new("Bash", Some("git push"), None, Impact::None));
        let s = ToolSummary {
            command: Some("make release && git push".into()),
            ..Default::default()
        };
        assert_eq!(classify(&rules, "Bash", &s).impact, Impact::Production);
        assert!(
            ToolRule::new("Ba*sh", None, None, Impact::None)
                .check()
                .is_err()
        );
        assert!(
            ToolRule::new("Bash", Some("  "), None, Impact::None)
                .check()
                .is_err()
        );
    }

    #[test]
    fn secrets_are_masked_in_every_shape() {
        let cases = [
            (
                "GITHUB_TOKEN=ghp_abcdef123456 git push",
                "GITHUB_TOKEN=*** git push",
            ),
            (
                "mysql --password hunter2 -u root",
                "mysql --password *** -u root",
            ),
            ("mysql --password=hunter2", "mysql --password=***"),
            (
                "curl -H 'Authorization: Bearer abc.def' https://x",
                "curl -H 'Authorization: Bearer ***' https://x",
            ),
            (
                "psql postgres://app:s3cret@db/prod",
                "psql postgres://app:***@db/prod",
            ),
            (
                r#"{"api_key":"AbCdEf1234567890XyZ12345","q":"x"}"#,
                r#"{"api_key":"***","q":"x"}"#,
            ),
            ("export K=AKIAABCDEFGHIJKLMNOP", "export K=***"),
            ("echo wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY1", "echo ***"),
            (
                "git checkout 3f2a9c1d4e5b6a7f8091a2b3c4d5e6f708192a3b",
                "git checkout 3f2a9c1d4e5b6a7f8091a2b3c4d5e6f708192a3b",
            ),
            ("line one\nTOKEN=abc", "line one TOKEN=***"),
        ];
        for (input, want) in cases {
            assert_eq!(mask_secrets(input), want, "{input}");
        }
    }

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
