//! Impact by rules (SPEC §5b): the built-in and configured classification rules, and how a call
//! is classified by them — a shell command segment by segment, the strictest impact winning.

use serde::{Deserialize, Serialize};

use super::{MAX_COMMAND_CHARS, ToolSummary};
use crate::domain::{Impact, ParseError};

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
            c if crate::domain::text::is_line_break(c) => true,
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
}
