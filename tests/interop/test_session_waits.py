"""The waits answered beside rmcp (`src/mcp/waits.rs`: `inbox` and `claim` of `next` with `wait_s`),
spoken to over raw HTTP: the same answer and progress as through rmcp, `notifications/cancelled`,
the session's end, and a session that only long-polls staying open past rmcp's idle limit. The
official SDK's tests of the same calls (`test_inbox.py`, `test_coordination.py`) go this way too."""

import json

import anyio
import httpx
import pytest

from conftest import call, connect, inbox_waiters, stop_server, unique, until_waiting
from test_conversation import drain
from test_limits import in_session, mcp_session, serve_with

pytestmark = pytest.mark.anyio

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
INITIALIZED = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})


def inbox_call(request_id, arguments: dict, meta: dict | None = None, tool: str = "inbox") -> str:
    params = {"name": tool, "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})


async def open_session(http, url, token) -> dict:
    """A legacy MCP session, initialized: the headers of its requests."""
    opened = await mcp_session(http, url, token)
    assert opened.status_code == 200, opened.text
    headers = in_session(token, opened.headers["mcp-session-id"])
    assert (await http.post(url, headers=headers, content=INITIALIZED)).status_code == 202
    return headers


async def drained(server, token, prefix) -> tuple[str, int]:
    """A new consumer of `token`'s inbox with everything so far acknowledged, and its cursor."""
    consumer = unique(prefix)
    async with connect(server, token) as client:
        return consumer, await drain(client, consumer)


async def messages_of(response, event_ids: list | None = None) -> list[dict]:
    """The JSON-RPC messages of an SSE response, in order (priming events and comments left out);
    the events' ids go to `event_ids`."""
    out = []
    async for line in response.aiter_lines():
        if line.startswith("data:") and line[5:].strip():
            out.append(json.loads(line[5:]))
        elif line.startswith("id:") and event_ids is not None:
            event_ids.append(line[3:].strip())
    return out


async def test_a_wait_answered_beside_rmcp_is_answered_and_reported_as_rmcp_does(server, tokens):
    """A waiting call is answered beside rmcp (its `_meta` may hold a client's own keys); one
    whose `_meta` carries trace context still goes through rmcp. Side by side, their progress
    notifications and their answers are the same messages."""
    consumer, cursor = await drained(server, tokens["bob"], "beside")
    arguments = {"consumer": consumer, "after": cursor, "wait_s": 6}
    got, ids = {}, {"beside": [], "rmcp": []}
    async with httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, server.mcp_url, tokens["bob"])

        async def ask(name, request_id, meta):
            body = inbox_call(request_id, arguments, meta)
            async with http.stream("POST", server.mcp_url, headers=headers, content=body) as r:
                assert r.status_code == 200
                got[name] = await messages_of(r, ids[name])

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "beside", 5, {"progressToken": "p", "claudecode/toolUseId": "toolu_1"})
            tg.start_soon(ask, "rmcp", 6, {"progressToken": "p", "traceparent": TRACEPARENT})
    beside, rmcp = got["beside"], got["rmcp"]
    # Which way each went: rmcp's events carry ids (it can resume them); the answers beside it not.
    assert ids["beside"] == [] and ids["rmcp"], ids
    # A 6 s wait reports once, at 5 s, then answers: timed out, nothing, the loop's end.
    assert [m.get("method") for m in beside] == ["notifications/progress", None]
    assert (beside[1].pop("id"), rmcp[1].pop("id")) == (5, 6)
    assert beside == rmcp
    assert beside[0]["params"] == {"progressToken": "p", "progress": 5.0, "total": 6.0,
                                   "message": "Waiting (5 of 6 s)."}
    result = beside[1]["result"]
    assert "resultType" not in result
    assert result["structuredContent"]["timed_out"] is True
    assert result["_meta"]["dev.liaison/loop"] == "end"


async def test_a_claim_wait_beside_rmcp_hands_over_the_task_as_rmcp_does(server):
    """A `claim` of `next` that waits is answered beside rmcp; with trace context in its `_meta`,
    through rmcp. Each is handed the task posted while it waits, and both answers have the same
    shape: the claim, and the thread with its messages."""
    asker, worker, channel = unique("asker"), unique("worker"), unique("cb")
    server.person(asker, "Asker")
    server.person(worker, "Worker")
    server.channel(channel, [asker, worker])
    token = server.token(worker)["secret"]
    answers, ids = {}, {"beside": [], "rmcp": []}
    async with httpx.AsyncClient(timeout=60) as http, connect(server, server.token(asker)["secret"]) as them:
        headers = await open_session(http, server.mcp_url, token)
        for name, meta in (("beside", {"progressToken": 3}), ("rmcp", {"progressToken": 3, "traceparent": TRACEPARENT})):
            before = inbox_waiters(server)
            body = inbox_call(3, {"thread": "next", "wait_s": 30, "lease_s": 120}, meta, tool="claim")
            async with http.stream("POST", server.mcp_url, headers=headers, content=body) as waiting:
                assert waiting.status_code == 200
                await until_waiting(server, before + 1)
                req = await call(them, "post", kind="request", channel=channel, impact="none", body=f"Task {name}.")
                with anyio.fail_after(20):
                    [answer] = [m for m in await messages_of(waiting, ids[name]) if "id" in m]
            result = answer["result"]
            assert result.get("isError") is not True, result
            claimed = result["structuredContent"]
            assert claimed["claim"]["thread"] == req["thread"]
            assert [m["body"] for m in claimed["thread"]["messages"]] == [f"Task {name}."]
            answers[name] = result
    shape = lambda r: (sorted(r), sorted(r["structuredContent"]), sorted(r["structuredContent"]["claim"]),
                       sorted(r["structuredContent"]["thread"]), len(r["content"]))
    assert shape(answers["beside"]) == shape(answers["rmcp"])
    assert ids["beside"] == [] and ids["rmcp"], ids


async def test_a_cancelled_wait_ends_at_once_without_an_answer_and_acknowledges_nothing(server, tokens):
    consumer, cursor = await drained(server, tokens["bob"], "cancel")
    async with httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, server.mcp_url, tokens["bob"])
        other = await open_session(http, server.mcp_url, tokens["bob"])
        before = inbox_waiters(server)
        body = inbox_call(7, {"consumer": consumer, "after": cursor, "wait_s": 40}, {"progressToken": 1})
        async with http.stream("POST", server.mcp_url, headers=headers, content=body) as waiting:
            assert waiting.status_code == 200
            await until_waiting(server, before + 1)
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": 7, "reason": "the person stopped"}}
            # Another session naming the same request id cancels nothing of this one.
            assert (await http.post(server.mcp_url, headers=other, content=json.dumps(cancel))).status_code == 202
            await anyio.sleep(0.3)
            assert inbox_waiters(server) == before + 1
            assert (await http.post(server.mcp_url, headers=headers, content=json.dumps(cancel))).status_code == 202
            with anyio.fail_after(10):
                messages = await messages_of(waiting)
        assert not [m for m in messages if "result" in m or "error" in m], messages
        assert inbox_waiters(server) == before
    async with connect(server, tokens["alice"]) as alice:
        posted = await call(alice, "post", kind="announce", channel="demo", body="after the cancel")
    async with connect(server, tokens["bob"]) as bob:
        page = await call(bob, "inbox", consumer=consumer)
        assert page["acked"] == cursor
        assert [e["id"] for e in page["entries"]] == [posted["message"]]


async def test_a_wait_ends_with_its_session_answering_that_it_was_cancelled(server, tokens):
    consumer, cursor = await drained(server, tokens["bob"], "ended")
    async with httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, server.mcp_url, tokens["bob"])
        before = inbox_waiters(server)
        body = inbox_call("w", {"consumer": consumer, "after": cursor, "wait_s": 40})
        async with http.stream("POST", server.mcp_url, headers=headers, content=body) as waiting:
            assert waiting.status_code == 200
            await until_waiting(server, before + 1)
            ended = await http.delete(server.mcp_url, headers=headers)
            assert ended.status_code in (200, 204), ended.text
            with anyio.fail_after(5):
                messages = await messages_of(waiting)
        assert inbox_waiters(server) == before
        [answer] = messages
        assert answer["id"] == "w" and answer["result"]["isError"] is True
        assert "cancelled" in answer["result"]["content"][0]["text"]
        # The session is gone for every later call.
        listed = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/list"})
        assert (await http.post(server.mcp_url, headers=headers, content=listed)).status_code == 404


@pytest.mark.parametrize("tool", ["inbox", "claim"])
async def test_a_revoked_credential_ends_its_waits_beside_rmcp(server, tool):
    """A wait answered beside rmcp ends when its credential is revoked, answering
    `token_revoked` (hang guards only, no timing); the service ends it on every replica
    (`tests/api/credential_end.rs`)."""
    issued = server.token("bob")
    consumer, cursor = await drained(server, issued["secret"], "revoked")
    arguments = ({"consumer": consumer, "after": cursor, "wait_s": 40} if tool == "inbox"
                 else {"thread": "next", "wait_s": 40})
    async with httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, server.mcp_url, issued["secret"])
        before = inbox_waiters(server)
        ids = []
        body = inbox_call(4, arguments, {"progressToken": 4}, tool=tool)
        async with http.stream("POST", server.mcp_url, headers=headers, content=body) as waiting:
            assert waiting.status_code == 200
            await until_waiting(server, before + 1)
            server.admin("DELETE", f"/admin/v1/tokens/{issued['id']}")
            with anyio.fail_after(10):
                messages = await messages_of(waiting, ids)
        assert ids == [], "this wait went through rmcp, not beside it"
        [answer] = [m for m in messages if "id" in m]
        assert answer["result"]["isError"] is True
        assert answer["result"]["structuredContent"]["error"]["code"] == "token_revoked"
        assert inbox_waiters(server) == before


async def test_a_session_that_only_long_polls_outlives_rmcps_idle_limit(tmp_path_factory):
    """rmcp closes a session after `mcp.session_idle_s` without a message it saw, and the waits
    answered beside it are not among them: each tells rmcp's session it is in use."""
    srv, dbname, demo = serve_with(tmp_path_factory.mktemp("idle"), """
[inbox]
max_wait_s = 2
[mcp]
session_idle_s = 3
""")
    try:
        token = demo["bob"]["agent_token"]
        consumer, cursor = await drained(srv, token, "idle")
        async with httpx.AsyncClient(timeout=30) as http:
            headers = await open_session(http, srv.mcp_url, token)
            # Four full waits of 2 s: 8 s, well past the 3 s rmcp allows without a message.
            for i in range(4):
                body = inbox_call(i + 2, {"consumer": consumer, "after": cursor, "wait_s": 2})
                async with http.stream("POST", srv.mcp_url, headers=headers, content=body) as r:
                    assert r.status_code == 200, f"poll {i}: the session was closed"
                    [answer] = [m for m in await messages_of(r) if "result" in m]
                    assert answer["result"]["structuredContent"]["timed_out"] is True
            listed = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/list"})
            assert (await http.post(srv.mcp_url, headers=headers, content=listed)).status_code == 200
            # Without any message, rmcp's limit still closes it.
            await anyio.sleep(4.5)
            assert (await http.post(srv.mcp_url, headers=headers, content=listed)).status_code == 404
    finally:
        stop_server(srv, dbname)
