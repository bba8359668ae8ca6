//! The settings that connect an agent's client to liaison (SPEC §5b): Claude Code over HTTP and
//! over stdio (with the `claude/channel` wake-up), Codex's MCP server, and every hook for Claude
//! Code's `settings.json` and Codex's `hooks.json`, with their matchers and timeouts. One
//! generator for everyone who shows or writes them: the console's Connect page and a session's
//! panel paste [`snippets`] (text), `liaison connect` merges the structured pieces into the
//! client's own files. Pure: no rule, no I/O.

use serde::Serialize;
use serde_json::{Value, json};

/// How long the tool-check hooks may wait for her decision, in seconds: the `timeout` the client
/// gives the hook, and the `--timeout` the hook answers before.
pub const CHECK_TIMEOUT_S: u64 = 600;

/// The tools the pre-tool-use check runs for: everything that may change something (reads never
/// need her: they are `none`, allowed unless she turned `none` off). `apply_patch` is how Codex
/// edits files.
pub const CHECKED_TOOLS: &str = "Edit|Write|MultiEdit|NotebookEdit|Bash|apply_patch|mcp__.*";

/// The name the MCP server is registered under in every client's settings.
pub const SERVER_NAME: &str = "liaison";

/// Codex's tool timeout, in seconds: above the 50 s long-poll of `inbox`.
pub const CODEX_TOOL_TIMEOUT_S: i64 = 120;

/// The settings as text to paste.
#[derive(Debug, Serialize)]
pub struct Snippets {
    pub claude_http: String,
    pub claude_stdio: String,
    /// The stdio bridge with `--channel`, and the flag Claude Code is launched with.
    pub claude_channel: String,
    pub codex: String,
    /// Claude Code's `settings.json`: env and every hook.
    pub hooks: String,
    /// Codex's `~/.codex/hooks.json`.
    pub codex_hooks: String,
}

/// Every hook, by event, as Claude Code's `settings.json` holds them under `hooks`; the hooks
/// read with the inbox consumer `consumer`.
pub fn claude_hooks(consumer: &str) -> Value {
    let command = |c: String| json!({ "type": "command", "command": c });
    let checked = |c: &str| {
        json!([{ "matcher": CHECKED_TOOLS, "hooks": [{
            "type": "command",
            "command": format!("liaison hook {c} --timeout {CHECK_TIMEOUT_S}"),
            "timeout": CHECK_TIMEOUT_S,
        }]}])
    };
    json!({
        "SessionStart": [{ "hooks": [command(format!("liaison hook session-start --consumer {consumer}"))] }],
        "Stop": [{ "hooks": [command(format!("liaison hook stop --consumer {consumer}"))] }],
        "PreToolUse": checked("pre-tool-use"),
        "PermissionRequest": checked("permission-request"),
        "PostToolUse": [{ "hooks": [command("liaison hook tool-use".to_owned())] }],
        "PostToolUseFailure": [{ "hooks": [command("liaison hook tool-use".to_owned())] }],
    })
}

/// The hooks of Codex's `hooks.json` (under `hooks`): Claude Code's but `PostToolUseFailure`,
/// which Codex does not have (its `PostToolUse` reports both outcomes).
pub fn codex_hooks(consumer: &str) -> Value {
    let mut hooks = claude_hooks(consumer);
    if let Some(h) = hooks.as_object_mut() {
        h.remove("PostToolUseFailure");
    }
    hooks
}

/// The environment the hooks and the stdio bridge read: the server, the token, the consumer.
pub fn environment(url: &str, token: &str, consumer: &str) -> Value {
    json!({ "LIAISON_SERVER": url, "LIAISON_TOKEN": token, "LIAISON_CONSUMER": consumer })
}

/// The entry of `.mcp.json`'s `mcpServers` for a team's shared file: the server over HTTP, the
/// token from each member's own `LIAISON_TOKEN` (Claude Code expands `${…}` in `.mcp.json`), so
/// the file holds no secret and can be committed.
pub fn mcp_json_server(url: &str) -> Value {
    json!({
        "type": "http",
        "url": format!("{url}/mcp"),
        "headers": { "Authorization": "Bearer ${LIAISON_TOKEN}" },
    })
}

/// The `[mcp_servers.liaison]` table of Codex's `config.toml`, as JSON (`url`,
/// `bearer_token_env_var`, `tool_timeout_sec`).
pub fn codex_server(url: &str) -> Value {
    json!({
        "url": format!("{url}/mcp"),
        "bearer_token_env_var": "LIAISON_TOKEN",
        "tool_timeout_sec": CODEX_TOOL_TIMEOUT_S,
    })
}

/// The snippets for the server at `url` with `token` (the secret, or a placeholder) and the
/// inbox consumer `consumer` the hooks read with.
pub fn snippets(url: &str, token: &str, consumer: &str) -> Snippets {
    let claude_settings = json!({
        "env": environment(url, token, consumer),
        "hooks": claude_hooks(consumer),
    });
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let codex = codex_server(url);
    Snippets {
        claude_http: format!(
            "claude mcp add --transport http {SERVER_NAME} {url}/mcp \\\n  --header \"Authorization: Bearer {token}\""
        ),
        claude_stdio: format!(
            "claude mcp add {SERVER_NAME} -e LIAISON_SERVER={url} -e LIAISON_TOKEN={token} -- liaison mcp --stdio"
        ),
        claude_channel: format!(
            "claude mcp add liaison-live -e LIAISON_SERVER={url} -e LIAISON_TOKEN={token} \\\n  -e LIAISON_CONSUMER={consumer} -- liaison mcp --stdio --channel\n\
             claude --dangerously-load-development-channels server:liaison-live"
        ),
        codex: format!(
            "# ~/.codex/config.toml, with LIAISON_TOKEN={token} in Codex's environment\n\
             [mcp_servers.{SERVER_NAME}]\nurl = {}\nbearer_token_env_var = {}\ntool_timeout_sec = {}",
            codex["url"], codex["bearer_token_env_var"], codex["tool_timeout_sec"]
        ),
        hooks: pretty(&claude_settings),
        codex_hooks: format!(
            "# ~/.codex/hooks.json (LIAISON_SERVER, LIAISON_TOKEN and LIAISON_CONSUMER={consumer} in Codex's environment; trust them with /hooks)\n{}",
            pretty(&json!({ "hooks": codex_hooks(consumer) }))
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hook_is_in_the_settings_with_its_matcher_and_timeout() {
        let s = snippets("https://liaison.example", "lsn_x", "claude");
        let v: serde_json::Value = serde_json::from_str(&s.hooks).unwrap();
        for event in [
            "SessionStart",
            "Stop",
            "PreToolUse",
            "PermissionRequest",
            "PostToolUse",
            "PostToolUseFailure",
        ] {
            assert!(v["hooks"][event].is_array(), "{event}");
        }
        let pre = &v["hooks"]["PreToolUse"][0];
        assert_eq!(pre["matcher"], CHECKED_TOOLS);
        assert!(CHECKED_TOOLS.split('|').any(|t| t == "apply_patch"));
        assert_eq!(pre["hooks"][0]["timeout"], CHECK_TIMEOUT_S);
        assert_eq!(
            pre["hooks"][0]["command"],
            "liaison hook pre-tool-use --timeout 600"
        );
        assert_eq!(v["env"]["LIAISON_TOKEN"], "lsn_x");
        assert_eq!(v["env"]["LIAISON_SERVER"], "https://liaison.example");
        let codex = s.codex_hooks.split_once('\n').unwrap().1;
        let c: serde_json::Value = serde_json::from_str(codex).unwrap();
        assert!(c["hooks"]["PostToolUseFailure"].is_null());
        assert!(c["hooks"]["PermissionRequest"].is_array());
    }

    #[test]
    fn the_codex_table_is_valid_toml_with_the_url_quoted() {
        let s = snippets("https://liaison.example", "lsn_x", "codex");
        let toml_text = s.codex.split_once('\n').unwrap().1;
        let table: toml::Table = toml::from_str(toml_text).unwrap();
        let server = &table["mcp_servers"]["liaison"];
        assert_eq!(server["url"].as_str(), Some("https://liaison.example/mcp"));
        assert_eq!(server["tool_timeout_sec"].as_integer(), Some(120));
    }
}
