"""`liaison remote add|list|show|refresh|remove` (the real CLI) against a running server, with a
second liaison as the remote A2A agent: registration from its signed card with a bearer token and a
header read from the environment, what an internal agent's `channels`/`whoami`/`fleet` show, the key
change on refresh refused until accepted, removal, and secrets never in any output or log."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import binary, call, connect, start_server, stop_server

pytestmark = pytest.mark.anyio

BEARER = "remote-bearer-secret-4f1c9a"
HEADER = "remote-header-secret-77e0b2"


def cli(srv, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "LIAISON_ADMIN_TOKEN": srv.admin_token, **(env or {})}
    return subprocess.run([str(binary()), *args, "--server", srv.url], capture_output=True, text=True,
                          env=full, timeout=60, stdin=subprocess.DEVNULL)


def ok(srv, *args: str, env: dict | None = None) -> dict:
    r = cli(srv, *args, env=env)
    assert r.returncode == 0, r.stderr
    assert BEARER not in r.stdout and HEADER not in r.stdout
    return json.loads(r.stdout)


def fails(srv, *args: str, env: dict | None = None) -> str:
    r = cli(srv, *args, env=env)
    assert r.returncode != 0, r.stdout
    return r.stderr


@pytest.fixture
def pair():
    """The remote (a plain liaison with bob and a party), and the gateway under test (loopback
    allowed for its outbound calls, logging at debug to show no secret is logged)."""
    remote, remote_db = start_server()
    os.environ["LIAISON_OUTBOX__ALLOW"] = "127.0.0.1"
    saved_log = os.environ.get("RUST_LOG")
    os.environ["RUST_LOG"] = "debug"
    try:
        local, local_db = start_server()
    finally:
        del os.environ["LIAISON_OUTBOX__ALLOW"]
        if saved_log is None:
            del os.environ["RUST_LOG"]
        else:
            os.environ["RUST_LOG"] = saved_log
    remote.person("bob", "Bob Chen")
    party = remote.admin("POST", "/admin/v1/parties", {"id": "gw", "display_name": "The other gateway"})
    remote.channel("partners", ["bob", "gw"])
    local.person("alice", "Alice Martin")
    local.channel("team", ["alice"])
    yield remote, local, party["token"]["secret"]
    stop_server(local, local_db)
    stop_server(remote, remote_db)


async def test_a_remote_is_added_shown_refreshed_and_removed_without_showing_its_secrets(pair):
    remote, local, party_token = pair
    card = f"{remote.url}/.well-known/agent-card.json"
    env = {"HELPER_TOKEN": party_token, "HELPER_HEADER": HEADER}

    # Bad input first: nothing is registered.
    assert "HELPER_MISSING" in fails(local, "remote", "add", "helper", "--card", card, "--auth", "bearer:HELPER_MISSING")
    assert "remote_unreachable" in fails(local, "remote", "add", "helper", "--card",
                                         "http://127.0.0.1:9/.well-known/agent-card.json", env=env)
    assert "invalid_input" in fails(local, "remote", "add", "helper", "--card", card, "--binding", "smoke", env=env)
    assert ok(local, "remote", "list")["remotes"] == []

    added = ok(local, "remote", "add", "helper", "--card", card, "--auth", "bearer:HELPER_TOKEN",
               "--header", "X-Trace: env:HELPER_HEADER", "--channel", "team", "--display-name", "Helper",
               env={**env, "HELPER_TOKEN": BEARER})["remote"]
    assert added["signed"] is True and len(added["keys"]) == 1
    assert added["binding"] == "GRPC" and added["url"] == remote.url
    assert [s["id"] for s in added["skills"]] == ["ask", "request-change", "chat", "handoff"]
    assert added["credentials"] == {"auth": {"kind": "bearer"}, "headers": ["X-Trace"]}
    assert added["channels"] == ["team"] and added["display_name"] == "Helper"
    assert "already_exists" in fails(local, "remote", "add", "helper", "--card", card, env=env)

    listed = ok(local, "remote", "list")["remotes"]
    assert [r["name"] for r in listed] == ["helper"]
    shown = ok(local, "remote", "show", "helper")["remote"]
    assert shown["interfaces"][0]["binding"] == "JSONRPC"
    assert "not_found" in fails(local, "remote", "show", "nobody")

    # Alice's agent sees the remote and its skills (quoted: they are the remote's words).
    alice = local.token("alice")["secret"]
    async with connect(local, alice, agent="claude@alice:1") as mcp:
        for tool in ("channels", "whoami", "fleet"):
            result = await mcp.call_tool(tool, {})
            assert not result.is_error
            agents = result.structured_content["remote_agents"]
            assert [a["name"] for a in agents] == ["helper"], tool
            assert agents[0]["skills"][0]["name"] == "Ask the team"
            text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
            assert '"ask" "Ask the team"' in text, text
        channels = await call(mcp, "channels")
        team = next(c for c in channels["channels"] if c["name"] == "team")
        assert any(m["person"] == "helper" for m in team["members"])

    # Refresh: nothing changed; then the remote rotates its keys and the change needs an answer.
    assert ok(local, "remote", "refresh", "helper")["changed"] is False
    remote.admin("POST", "/admin/v1/keys/rotate", {"overlap_s": 3600})
    refused = fails(local, "remote", "refresh", "helper")
    assert "keys_changed" in refused and "--accept-new-keys" in refused
    assert ok(local, "remote", "show", "helper")["remote"]["keys"] == added["keys"]
    accepted = ok(local, "remote", "refresh", "helper", "--accept-new-keys")
    assert accepted["changed"] is True and len(accepted["changes"]["keys_added"]) == 1
    assert len(accepted["remote"]["keys"]) == 2

    # Removed: it leaves its channels, and the name stays taken.
    assert ok(local, "remote", "remove", "helper") == {"removed": "helper"}
    assert ok(local, "remote", "list")["remotes"] == []
    assert "not_found" in fails(local, "remote", "remove", "helper")
    assert "already_exists" in fails(local, "remote", "add", "helper", "--card", card, env=env)

    log = "".join(local.output)
    assert "Remote agent added" in log, "the log is captured"
    assert BEARER not in log and HEADER not in log and party_token not in log
