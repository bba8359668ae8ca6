"""Approvals over the real clients: an MCP agent's claim waits for a human; the human decides with
the CLI (a token of scope `human`) or, where the channel opts in, through the agent's own MCP client
(elicitation); agent and admin-only tokens cannot decide."""

import contextlib
import os
import subprocess

import anyio
import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import binary, call, call_error, connect, deadline_witness, inbox_waiters, unique, until_waiting
from test_conversation import drain

pytestmark = pytest.mark.anyio


def cli(server, token: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LIAISON_TOKEN": token, "LIAISON_ADMIN_TOKEN": token}
    return subprocess.run([str(binary()), *args, "--server", server.url], capture_output=True, text=True,
                          env=env, timeout=30)


def setup_channel(server, policy: dict | None = None) -> str:
    name = unique("appr")
    server.channel(name, ["alice", "bob"])
    if policy is not None:
        server.admin("PUT", f"/admin/v1/channels/{name}/policy", policy)
    return name


async def test_a_claim_waits_until_a_human_allows_it_with_the_cli(server, tokens):
    chan = setup_channel(server)
    bob_human = server.token("bob", scopes=("human",))["secret"]
    consumer = unique("appr")
    async with connect(server, tokens["alice"]) as alice, connect(server, tokens["bob"], agent="codex@b:1") as bob:
        cursor = await drain(bob, consumer)
        posted = await call(alice, "post", kind="request", channel=chan, impact="code",
                            body="Bump the TLS library to 0.23")
        err, text = await call_error(bob, "claim", thread=posted["thread"])
        assert err["code"] == "approval_pending" and "Bob Chen" in text
        approval = err["details"]["approval"]
        assert approval["state"] == "pending" and len(approval["fingerprint"]) == 64
        # The inbox entry of the request shows the approval state.
        page = await call(bob, "inbox", consumer=consumer, after=cursor)
        entry = page["entries"][0]
        assert entry["approval"]["state"] == "pending" and entry["approval"]["id"] == approval["id"]
        cursor = page["cursor"]

        # Agent and admin-only credentials cannot decide.
        for token in (tokens["bob"], server.admin_token):
            r = cli(server, token, "approvals", "allow", approval["id"])
            assert r.returncode != 0 and "forbidden" in r.stderr, r.stderr
        # Alice asked; to her the approval does not exist.
        alice_human = server.token("alice", scopes=("human",))["secret"]
        r = cli(server, alice_human, "approvals", "show", approval["id"])
        assert r.returncode != 0 and "not_found" in r.stderr

        shown = cli(server, bob_human, "approvals", "show", approval["id"])
        assert shown.returncode == 0 and approval["fingerprint"] in shown.stdout
        assert "Bump the TLS library" in shown.stdout

        woke = {}

        async def wait():
            woke["page"] = await call(bob, "inbox", consumer=consumer, after=cursor, wait_s=30)

        with deadline_witness(server, wait_s=30) as witness:
            waiting = inbox_waiters(server)
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await until_waiting(server, waiting + 1)
                r = await anyio.to_thread.run_sync(lambda: cli(server, bob_human, "approvals", "allow", approval["id"]))
                assert r.returncode == 0, r.stderr
            assert not witness.ended.is_set(), "the long-poll ended at its deadline, not at the decision"
        assert not woke["page"]["timed_out"]
        notice = woke["page"]["entries"][0]
        assert notice["type"] == "notice" and notice["notice"]["type"] == "approval_decided"

        again = cli(server, bob_human, "approvals", "reject", approval["id"], "--reason", "late")
        assert again.returncode != 0 and "approval_decided" in again.stderr and "Bob Chen" in again.stderr
        claimed = await call(bob, "claim", thread=posted["thread"])
        assert claimed["claim"]["session"] == "codex@b:1"
        thread = await call(bob, "thread", thread=posted["thread"])
        assert thread["approvals"][0]["state"] == "consumed"

    audit = server.admin("GET", f"/admin/v1/audit?subject={approval['id']}")["entries"]
    mine = [e for e in audit if e.get("approval") == approval["id"]]
    assert [e["event"] for e in mine] == ["created", "decided", "consumed"]
    assert mine[1]["via"] == "cli" and mine[1]["actor"] == "bob"


@contextlib.asynccontextmanager
async def eliciting_client(server, token: str, answer, mode: str = "legacy"):
    async def on_elicit(ctx, params):
        return answer(params)

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}", "Liaison-Agent": "claude@b:2"})
    async with http:
        async with Client(streamable_http_client(server.mcp_url, http_client=http), mode=mode,
                          elicitation_callback=on_elicit) as client:
            yield client


async def test_a_channel_may_let_the_approvers_client_ask_its_human(server, tokens):
    chan = setup_channel(server, {"approval_via_elicitation": True})
    asked = []

    def wrong(params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "allow", "confirm": "00000000"})

    def right(params):
        asked.append(params.message)
        fingerprint = params.message.split("Fingerprint ")[1].split(".")[0]
        return types.ElicitResult(action="accept", content={"decision": "allow", "confirm": fingerprint[:8]})

    async with connect(server, tokens["alice"]) as alice:
        posted = await call(alice, "post", kind="request", channel=chan, impact="database",
                            body="Add an index on contacts.phone")
        async with eliciting_client(server, tokens["bob"], wrong) as bob:
            err, _ = await call_error(bob, "claim", thread=posted["thread"])
            assert err["code"] == "invalid_input"
            assert "Add an index" in asked[0] and "Alice Martin" in asked[0]
        async with connect(server, tokens["bob"], mode="2026-07-28", agent="claude@b:3") as stateless:
            err, _ = await call_error(stateless, "claim", thread=posted["thread"])
            assert err["code"] == "approval_pending", "a client without the capability is not asked"
        async with eliciting_client(server, tokens["bob"], right) as bob:
            claimed = await call(bob, "claim", thread=posted["thread"])
            assert claimed["claim"]["thread"] == posted["thread"]
    audit = server.admin("GET", f"/admin/v1/audit?subject={posted['thread']}&event=decided")["entries"]
    decided = [e for e in audit if e.get("thread") == posted["thread"] and e["event"] == "decided"]
    assert len(decided) == 1 and decided[0]["via"] == "elicitation"


async def test_without_the_channel_opting_in_nobody_is_asked(server, tokens):
    chan = setup_channel(server)
    asked = []

    def answer(params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "allow", "confirm": "x"})

    async with connect(server, tokens["alice"]) as alice:
        posted = await call(alice, "post", kind="request", channel=chan, impact="code", body="Refactor")
        async with eliciting_client(server, tokens["bob"], answer) as bob:
            err, _ = await call_error(bob, "claim", thread=posted["thread"])
            assert err["code"] == "approval_pending" and asked == []


async def test_a_stateless_client_is_asked_through_the_input_required_retry(server, tokens):
    chan = setup_channel(server, {"approval_via_elicitation": True})
    asked = []

    def right(params):
        asked.append(params.message)
        fingerprint = params.message.split("Fingerprint ")[1].split(".")[0]
        return types.ElicitResult(action="accept", content={"decision": "allow", "confirm": fingerprint[:8]})

    async with connect(server, tokens["alice"]) as alice:
        posted = await call(alice, "post", kind="request", channel=chan, impact="code", body="Rename a column")
        async with eliciting_client(server, tokens["bob"], right, mode="2026-07-28") as bob:
            claimed = await call(bob, "claim", thread=posted["thread"])
            assert claimed["claim"]["thread"] == posted["thread"] and len(asked) == 1
    audit = server.admin("GET", f"/admin/v1/audit?subject={posted['thread']}&event=decided")["entries"]
    decided = [e for e in audit if e.get("thread") == posted["thread"] and e["event"] == "decided"]
    assert len(decided) == 1 and decided[0]["via"] == "elicitation"


def test_a_request_state_that_was_not_sealed_for_the_caller_decides_nothing(server, tokens):
    """The retry round with a forged requestState (or one sealed for another token) is refused."""
    import json as _json
    import urllib.request

    chan = setup_channel(server, {"approval_via_elicitation": True})
    alice_post = {
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "post", "arguments": {"kind": "request", "channel": chan, "impact": "code", "body": "x"},
                   "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": {}}},
    }

    def rpc(token: str, body: dict) -> dict:
        req = urllib.request.Request(server.mcp_url, data=_json.dumps(body).encode(), method="POST", headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call", "Mcp-Name": body["params"]["name"], "Liaison-Agent": "claude@b:9",
        })
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read().decode()
        data = [l[5:] for l in text.splitlines() if l.startswith("data:") and l[5:].strip()]
        return _json.loads(data[-1] if data else text)

    thread = rpc(tokens["alice"], alice_post)["result"]["structuredContent"]["thread"]
    claim = {
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "claim", "arguments": {"thread": thread},
                   "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}},
    }
    first = rpc(tokens["bob"], claim)["result"]
    assert first["resultType"] == "input_required" and first["requestState"]
    fingerprint = first["inputRequests"]["approval"]["params"]["message"].split("Fingerprint ")[1].split(".")[0]
    answer = {"approval": {"action": "accept", "content": {"decision": "allow", "confirm": fingerprint[:8]}}}
    for state, token in ((first["requestState"][:-4] + "AAAA", tokens["bob"]),
                         (first["requestState"], server.token("bob")["secret"])):
        retry = _json.loads(_json.dumps(claim))
        retry["params"]["inputResponses"] = answer
        retry["params"]["requestState"] = state
        result = rpc(token, retry)["result"]
        assert result["isError"] and result["structuredContent"]["error"]["code"] == "invalid_input", result
    page = server.admin("GET", f"/admin/v1/audit?subject={thread}")["entries"]
    assert [e for e in page if e.get("thread") == thread and e["event"] == "created"], page
    assert not [e for e in page if e.get("thread") == thread and e["event"] == "decided"]


async def test_the_approval_link_is_marked_for_the_human_not_the_model(server, tokens):
    """A request that waits for approval returns the link to decide it as content for the person
    (MCP `annotations.audience: ["user"]`) and under `_meta` `dev.liaison/for_user`, read with the
    official SDK; a post that needs nothing carries neither."""
    chan = setup_channel(server)
    async with connect(server, tokens["alice"]) as alice:
        result = await alice.call_tool("post", {"kind": "request", "channel": chan, "impact": "code",
                                                "body": "Rotate the staging certificate"})
        assert not result.is_error, result
        approval = result.structured_content["approval"]
        hint = (result.meta or {})["dev.liaison/for_user"]
        assert hint["url"] == f"{server.url}/console/approvals/{approval}", hint
        for_user = [c for c in result.content
                    if c.annotations is not None and c.annotations.audience == ["user"]]
        assert len(for_user) == 1 and hint["url"] in for_user[0].text, result.content
        # The model's own text says what happened, without the link.
        model = [c for c in result.content if c.annotations is None]
        assert model and all(hint["url"] not in c.text for c in model), model
        plain = await alice.call_tool("post", {"kind": "announce", "channel": chan, "body": "FYI"})
        assert "dev.liaison/for_user" not in (plain.meta or {})
        assert all(c.annotations is None for c in plain.content)
