"""`liaison connect claude-code|codex` as a member runs it: one command issues a token for a new
connection (her `human` token, through /api/v1/connections) and writes the client's settings,
keeping whatever else the files hold; a second run changes nothing and says so; an unreadable file
stops it before anything is issued or written. Then the real clients read what it wrote:
`claude mcp get liaison` in the project and `codex mcp get liaison` with its home, when the npm
CLIs are installed (`npm install @anthropic-ai/claude-code @openai/codex`; found on PATH or in
LIAISON_NPM_BIN, default /tmp/cc/node_modules/.bin) — those two tests skip, saying so, otherwise.

Also here, the CLI items of issue 48 that need a running server: `approvals show` prints the
request, requester and fingerprint (and still shows a `tcf_` confirmation), `thread` shows
progress notes, and the old `LIAISON_URL` still reaches the server."""

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import binary, unique

NPM_BIN = Path(os.environ.get("LIAISON_NPM_BIN", "/tmp/cc/node_modules/.bin"))


def run(server, token, *args, cwd=None, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("LIAISON_") and k != "CODEX_HOME"}
    e["LIAISON_SERVER"] = server.url
    if token is not None:
        e["LIAISON_TOKEN"] = token
    e.update(env or {})
    return subprocess.run([str(binary()), *args], capture_output=True, text=True, env=e, cwd=cwd, timeout=60)


def ok(r):
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def connections(server, human):
    return server.admin("GET", "/api/v1/connections", token=human)["connections"]


@pytest.fixture(scope="module")
def member(server):
    pid = unique("m").replace("_", "-")[:30]
    server.person(pid, "Member " + pid)
    return pid, server.token(pid, scopes=("human",))["secret"]


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_claude_code_settings_are_written_merged_and_left_alone_the_second_time(server, member, tmp_path):
    pid, human = member
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.json").write_text(json.dumps({
        "model": "opus",
        "permissions": {"allow": ["Bash(cargo test:*)"]},
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "./my-stop-check"}]}]},
    }))
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"github": {"type": "http", "url": "https://gh.example/mcp"}}}))
    before = len(connections(server, human))

    out = ok(run(server, human, "connect", "claude-code", "--dir", str(project)))
    assert "updated" in out and ".claude/settings.json" in out and "created" in out, out
    assert f"Issued a token for the connection {pid}/claude-code" in out, out
    assert len(connections(server, human)) == before + 1

    mcp = json.loads((project / ".mcp.json").read_text())
    assert mcp["mcpServers"]["github"]["url"] == "https://gh.example/mcp"
    assert mcp["mcpServers"]["liaison"] == {"type": "http", "url": server.mcp_url,
                                            "headers": {"Authorization": "Bearer ${LIAISON_TOKEN}"}}
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    assert settings["model"] == "opus" and settings["permissions"] == {"allow": ["Bash(cargo test:*)"]}
    stop = [h["command"] for g in settings["hooks"]["Stop"] for h in g["hooks"]]
    assert stop == ["./my-stop-check", "liaison hook stop --consumer claude-code"], stop
    for event in ("SessionStart", "PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure"):
        assert event in settings["hooks"], event
    assert "apply_patch" in settings["hooks"]["PreToolUse"][0]["matcher"]
    local_path = project / ".claude" / "settings.local.json"
    local = json.loads(local_path.read_text())
    assert local["env"]["LIAISON_SERVER"] == server.url and local["env"]["LIAISON_CONSUMER"] == "claude-code"
    assert local["enabledMcpjsonServers"] == ["liaison"]
    assert stat.S_IMODE(local_path.stat().st_mode) == 0o600
    # The written token is a working agent token of that connection.
    secret = local["env"]["LIAISON_TOKEN"]
    view = json.loads(ok(run(server, secret, "inbox", "--consumer", "claude-code", "--limit", "1", "--json")))
    assert "entries" in view

    # Twice: nothing written, no token issued, and it says so.
    files = snapshot(project)
    again = ok(run(server, human, "connect", "claude-code", "--dir", str(project)))
    assert "nothing changed" in again and "Issued" not in again, again
    assert snapshot(project) == files
    assert len(connections(server, human)) == before + 1


def test_an_unreadable_settings_file_stops_everything_before_a_token_is_issued(server, member, tmp_path):
    _, human = member
    project = tmp_path / "broken"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.json").write_text('{"hooks": {,}')
    before = len(connections(server, human))
    r = run(server, human, "connect", "claude-code", "--dir", str(project), "--name", "broken-one")
    assert r.returncode != 0
    assert "not valid JSON" in r.stderr and "nothing was changed" in r.stderr, r.stderr
    assert sorted(p.name for p in project.rglob("*")) == [".claude", "settings.json"]
    assert len(connections(server, human)) == before
    home = tmp_path / "codex-broken"
    home.mkdir()
    (home / "config.toml").write_text("[mcp_servers\n")
    r = run(server, human, "connect", "codex", "--codex-home", str(home), "--name", "broken-two")
    assert r.returncode != 0 and "not valid TOML" in r.stderr, r.stderr
    assert len(connections(server, human)) == before
    # Without a human token nothing is issued either.
    r = run(server, None, "connect", "claude-code", "--dir", str(tmp_path))
    assert r.returncode != 0 and "LIAISON_TOKEN" in r.stderr, r.stderr


def test_codex_settings_keep_the_users_comments_and_a_second_run_changes_nothing(server, member, tmp_path):
    pid, human = member
    home = tmp_path / "codex-home"
    home.mkdir()
    mine = '# my Codex settings\nmodel = "o3"  # the model I use\n\n[mcp_servers.github]\ncommand = "gh-mcp"\n'
    (home / "config.toml").write_text(mine)
    out = ok(run(server, human, "connect", "codex", "--codex-home", str(home)))
    assert f"{pid}/codex" in out and "export LIAISON_TOKEN=lsn_" in out, out
    config = (home / "config.toml").read_text()
    assert config.startswith(mine), config
    assert f'[mcp_servers.liaison]\nurl = "{server.mcp_url}"\nbearer_token_env_var = "LIAISON_TOKEN"\ntool_timeout_sec = 120' in config
    hooks = json.loads((home / "hooks.json").read_text())["hooks"]
    assert "PostToolUseFailure" not in hooks and "PermissionRequest" in hooks
    files = snapshot(home)
    count = len(connections(server, human))
    again = ok(run(server, human, "connect", "codex", "--codex-home", str(home)))
    assert "nothing changed" in again, again
    assert snapshot(home) == files and len(connections(server, human)) == count


def npm_cli(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidate = NPM_BIN / name
    return str(candidate) if candidate.exists() else None


def test_claude_code_reads_what_connect_wrote(server, member, tmp_path):
    claude = npm_cli("claude")
    if claude is None:
        pytest.skip("the claude CLI is not installed (npm install @anthropic-ai/claude-code; LIAISON_NPM_BIN)")
    _, human = member
    project = tmp_path / "cc-project"
    project.mkdir()
    ok(run(server, human, "connect", "claude-code", "--dir", str(project), "--name", "cc-real"))
    # Claude Code applies a project's settings once she trusted the folder (its first-run
    # dialog): recorded here as Claude Code records it. `${LIAISON_TOKEN}` of .mcp.json comes
    # from the environment Claude Code starts in (the export line connect prints), not from the
    # settings' env: without it Claude Code cannot connect.
    token = json.loads((project / ".claude" / "settings.local.json").read_text())["env"]["LIAISON_TOKEN"]
    home = tmp_path / "home"
    home.mkdir()
    (home / ".claude.json").write_text(json.dumps(
        {"projects": {str(project.resolve()): {"hasTrustDialogAccepted": True, "allowedTools": []}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIAISON_")}
    env.update({"HOME": str(home), "DISABLE_AUTOUPDATER": "1", "LIAISON_TOKEN": token})
    r = subprocess.run([claude, "mcp", "get", "liaison"], cwd=project, capture_output=True, text=True,
                       env=env, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "Project config (shared via .mcp.json)" in out and f"URL: {server.mcp_url}" in out, out
    assert "Bearer ${LIAISON_TOKEN}" in out, out
    assert "Connected" in out and "Failed" not in out, out

    # --claude-mcp-add: Claude Code's own local settings hold the token; twice changes nothing.
    other = tmp_path / "cc-add"
    other.mkdir()
    path_env = {"PATH": f"{Path(claude).parent}:{os.environ.get('PATH', '')}", "HOME": str(home)}
    out = ok(run(server, human, "connect", "claude-code", "--claude-mcp-add", "--name", "cc-add",
                 cwd=other, env=path_env))
    assert "ran          claude mcp add" in out, out
    env.pop("LIAISON_TOKEN")
    r = subprocess.run([claude, "mcp", "get", "liaison"], cwd=other, capture_output=True, text=True,
                       env=env, timeout=120)
    assert "Local config" in r.stdout and "Connected" in r.stdout, r.stdout + r.stderr
    again = ok(run(server, human, "connect", "claude-code", "--claude-mcp-add", "--name", "cc-add",
                   cwd=other, env=path_env))
    assert "nothing changed" in again, again


def test_codex_reads_what_connect_wrote(server, member, tmp_path):
    codex = npm_cli("codex")
    if codex is None:
        pytest.skip("the codex CLI is not installed (npm install @openai/codex; LIAISON_NPM_BIN)")
    _, human = member
    home = tmp_path / "codex-real"
    home.mkdir()
    ok(run(server, human, "connect", "codex", "--codex-home", str(home), "--name", "codex-real"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIAISON_")}
    env["CODEX_HOME"] = str(home)
    r = subprocess.run([codex, "mcp", "get", "liaison", "--json"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    got = json.loads(r.stdout)
    assert got["enabled"] is True and got["tool_timeout_sec"] == 120, got
    assert got["transport"]["url"] == server.mcp_url, got
    assert got["transport"]["bearer_token_env_var"] == "LIAISON_TOKEN", got


def test_approvals_show_prints_the_request_requester_and_fingerprint(server, tokens):
    chan = unique("apr")
    server.channel(chan, ["alice", "bob"])
    human = server.token("bob", scopes=("human",))["secret"]
    posted = json.loads(ok(run(server, tokens["alice"], "post", "--kind", "request", "--impact", "production",
                               "--channel", chan, "--subject", "Deploy", "--json", "Deploy v2\nto production")))
    pending = json.loads(ok(run(server, human, "approvals", "list", "--pending", "--json")))
    [approval] = [a for a in pending["approvals"] if a["thread"] == posted["thread"]]
    text = ok(run(server, human, "approvals", "show", approval["id"]))
    assert text.startswith(f"Approval {approval['id']}: pending (a request with impact production)"), text
    assert "Requested by:  Alice Martin (alice)" in text
    assert "Approvers:" in text and "(bob)" in text
    assert f"Fingerprint:   {approval['fingerprint']}" in text
    assert "  | Deploy v2\n  | to production" in text and "subject: \"Deploy\"" in text
    as_json = json.loads(ok(run(server, human, "approvals", "show", approval["id"], "--json")))
    assert as_json["approval"]["fingerprint"] == approval["fingerprint"]
    # Unknown and malformed ids look the same.
    for bad in ("apr_00000000000000000000000000000000", "tcf_00000000000000000000000000000000", "nope"):
        r = run(server, human, "approvals", "show", bad)
        assert r.returncode != 0 and "not_found" in r.stderr, (bad, r.stderr)


def test_thread_shows_progress_notes_and_the_old_url_variable_still_works(server, tokens):
    chan = unique("prg")
    server.channel(chan, ["alice", "bob"])
    posted = json.loads(ok(run(server, tokens["alice"], "post", "--kind", "request", "--impact", "none",
                               "--channel", chan, "--json", "Tidy the notes")))
    thread = posted["thread"]
    agent = "codex@bob-box:1"
    ok(run(server, tokens["bob"], "claim", thread, env={"LIAISON_AGENT": agent}))
    hook_input = json.dumps({"hook_event_name": "PostToolUse", "cwd": "/repo", "tool_name": "apply_patch",
                             "tool_input": {"command": "*** Begin Patch\n*** Update File: notes/a.md\n+x\n*** End Patch"}})
    # The hook with the old variable only: LIAISON_URL still names the server.
    e = {k: v for k, v in os.environ.items() if not k.startswith("LIAISON_")}
    e.update({"LIAISON_URL": server.url, "LIAISON_TOKEN": tokens["bob"], "LIAISON_AGENT": agent})
    r = subprocess.run([str(binary()), "hook", "tool-use"], input=hook_input, capture_output=True, text=True,
                       env=e, timeout=30)
    assert r.returncode == 0 and r.stdout == "", r.stderr
    text = ok(run(server, tokens["alice"], "thread", thread))
    assert "Progress notes of the claim holders' tools" in text, text
    assert 'bob: "apply_patch" on "notes/a.md": ok' in text, text
