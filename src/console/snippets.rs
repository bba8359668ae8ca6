//! The settings a member pastes to connect an agent (Connect, once with the token's secret, and a
//! session's panel, with a placeholder): Claude Code over HTTP and over stdio (with the
//! `claude/channel` wake-up), Codex's MCP server, and every hook for Claude Code's `settings.json`
//! and Codex's `hooks.json`, with their matchers and timeouts (SPEC §5b). Pure text: no rule.

use serde::Serialize;
use serde_json::json;

/// How long the tool-check hooks may wait for her decision, in seconds: the `timeout` the client
/// gives the hook, and the `--timeout` the hook answers before.
pub(super) const CHECK_TIMEOUT_S: u64 = 600;

/// The tools the pre-tool-use check runs for: everything that may change something (reads never
/// need her: they are `none`, allowed unless she turned `none` off).
const CHECKED_TOOLS: &str = "Edit|Write|MultiEdit|NotebookEdit|Bash|mcp__.*";

#[derive(Serialize)]
pub(super) struct Snippets {
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

/// The snippets for the server at `url` with `token` (the secret, or a placeholder) and the
/// inbox consumer `consumer` the hooks read with.
pub(super) fn snippets(url: &str, token: &str, consumer: &str) -> Snippets {
    let command = |c: String| json!({ "type": "command", "command": c });
    let checked = |c: &str| {
        json!([{ "matcher": CHECKED_TOOLS, "hooks": [{
            "type": "command",
            "command": format!("liaison hook {c} --timeout {CHECK_TIMEOUT_S}"),
            "timeout": CHECK_TIMEOUT_S,
        }]}])
    };
    let hooks = json!({
        "SessionStart": [{ "hooks": [command(format!("liaison hook session-start --consumer {consumer}"))] }],
        "Stop": [{ "hooks": [command(format!("liaison hook stop --consumer {consumer}"))] }],
        "PreToolUse": checked("pre-tool-use"),
        "PermissionRequest": checked("permission-request"),
        "PostToolUse": [{ "hooks": [command("liaison hook tool-use".to_owned())] }],
        "PostToolUseFailure": [{ "hooks": [command("liaison hook tool-use".to_owned())] }],
    });
    let claude_settings = json!({
        "env": { "LIAISON_URL": url, "LIAISON_TOKEN": token, "LIAISON_CONSUMER": consumer },
        "hooks": hooks,
    });
    // Codex has no PostToolUseFailure: PostToolUse reports both outcomes.
    let mut codex_hooks = hooks.clone();
    if let Some(h) = codex_hooks.as_object_mut() {
        h.remove("PostToolUseFailure");
    }
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
    Snippets {
        claude_http: format!(
            "claude mcp add --transport http liaison {url}/mcp \\\n  --header \"Authorization: Bearer {token}\""
        ),
        claude_stdio: format!(
            "claude mcp add liaison -e LIAISON_URL={url} -e LIAISON_TOKEN={token} -- liaison mcp --stdio"
        ),
        claude_channel: format!(
            "claude mcp add liaison-live -e LIAISON_URL={url} -e LIAISON_TOKEN={token} \\\n  -e LIAISON_CONSUMER={consumer} -- liaison mcp --stdio --channel\n\
             claude --dangerously-load-development-channels server:liaison-live"
        ),
        codex: format!(
            "# ~/.codex/config.toml, with LIAISON_TOKEN={token} in Codex's environment\n\
             [mcp_servers.liaison]\nurl = \"{url}/mcp\"\nbearer_token_env_var = \"LIAISON_TOKEN\"\ntool_timeout_sec = 120"
        ),
        hooks: pretty(&claude_settings),
        codex_hooks: format!(
            "# ~/.codex/hooks.json (LIAISON_URL, LIAISON_TOKEN and LIAISON_CONSUMER={consumer} in Codex's environment; trust them with /hooks)\n{}",
            pretty(&json!({ "hooks": codex_hooks }))
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
        assert_eq!(pre["hooks"][0]["timeout"], CHECK_TIMEOUT_S);
        assert_eq!(
            pre["hooks"][0]["command"],
            "liaison hook pre-tool-use --timeout 600"
        );
        assert_eq!(v["env"]["LIAISON_TOKEN"], "lsn_x");
        let codex = s.codex_hooks.split_once('\n').unwrap().1;
        let c: serde_json::Value = serde_json::from_str(codex).unwrap();
        assert!(c["hooks"]["PostToolUseFailure"].is_null());
        assert!(c["hooks"]["PermissionRequest"].is_array());
    }
}
