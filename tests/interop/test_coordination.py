"""Claims, presence, fleet and leases through MCP."""

import json

import anyio
import httpx
import pytest

from conftest import MODES, call, call_error, connect, eventually, inbox_waiters, unique, until_waiting
from test_conversation import drain
from test_limits import in_session, mcp_session

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", MODES)
async def test_two_sessions_race_to_claim_and_exactly_one_wins(server, tokens, mode):
    async with connect(server, tokens["alice"], mode) as alice, \
            connect(server, tokens["bob"], mode, agent="claude@bobmac:1") as one, \
            connect(server, tokens["bob"], mode, agent="codex@bobmac:2") as two:
        req = await call(alice, "post", kind="request", channel="demo", impact="none", body="Rotate the logs.")
        results = {}

        async def race(name, client):
            results[name] = await client.call_tool("claim", {"thread": req["thread"]})

        async with anyio.create_task_group() as tg:
            tg.start_soon(race, "one", one)
            tg.start_soon(race, "two", two)
        winners = [n for n, r in results.items() if not r.is_error]
        assert len(winners) == 1, results
        loser = results["two" if winners == ["one"] else "one"]
        error = loser.structured_content["error"]
        assert error["code"] == "already_claimed"
        holder = error["details"]["holder"]
        assert holder["person"] == "bob"
        assert holder["session"] == ("claude@bobmac:1" if winners == ["one"] else "codex@bobmac:2")
        assert holder["session"] in loser.content[0].text

        # The winner renews and releases; then the other session can claim.
        winner = one if winners == ["one"] else two
        other = two if winner is one else one
        await call(winner, "claim", thread=req["thread"], action="renew", lease_s=60)
        released = await call(winner, "claim", thread=req["thread"], action="release")
        assert released["claim"] is None
        got = await call(other, "claim", thread=req["thread"])
        assert got["claim"]["thread"] == req["thread"]


async def test_a_stale_fencing_token_is_refused_after_another_session_took_the_claim(server, tokens):
    async with connect(server, tokens["alice"]) as alice, \
            connect(server, tokens["bob"], agent="claude@bobmac:31") as one, \
            connect(server, tokens["bob"], agent="codex@bobmac:32") as two:
        req = await call(alice, "post", kind="request", channel="demo", impact="none", body="Fence me.")
        thread = req["thread"]
        first = (await call(one, "claim", thread=thread, lease_s=1))["claim"]
        token = first["fencing_token"]
        assert token >= 1
        renewed = await one.call_tool("claim", {"thread": thread, "action": "renew", "lease_s": 1,
                                               "fencing_token": token})
        assert not renewed.is_error
        assert renewed.structured_content["claim"]["fencing_token"] == token
        assert f"fencing token {token}" in renewed.content[0].text
        await call(one, "post", kind="announce", thread=thread, body="On it.", fencing_token=token)

        await anyio.sleep(1.3)  # The lease runs out; the other session claims.
        second = (await call(two, "claim", thread=thread))["claim"]
        assert second["fencing_token"] > token
        before = await call(alice, "thread", thread=thread)

        err, text = await call_error(one, "post", kind="reply", thread=thread, body="Done (late).",
                                     fencing_token=token)
        assert err["code"] == "stale_claim"
        assert err["details"]["holder"]["session"] == "codex@bobmac:32"
        assert err["details"]["holder"]["fencing_token"] == second["fencing_token"]
        assert "codex@bobmac:32" in text
        after = await call(alice, "thread", thread=thread)
        assert len(after["messages"]) == len(before["messages"])
        assert after["claim"]["session"] == "codex@bobmac:32"

        err, _ = await call_error(one, "claim", thread=thread, action="renew", fencing_token=token)
        assert err["code"] == "stale_claim"
        err, _ = await call_error(two, "post", kind="announce", thread=thread, body="?",
                                  fencing_token=second["fencing_token"] + 5)
        assert err["code"] == "invalid_input"
        await call(two, "post", kind="reply", thread=thread, body="Done.",
                   fencing_token=second["fencing_token"])


async def test_sessions_without_a_declared_identity_are_told_apart(server, tokens):
    async with connect(server, tokens["alice"]) as alice, connect(server, tokens["bob"]) as one, \
            connect(server, tokens["bob"]) as two:
        me = await call(one, "whoami")
        assert me["agent"]["source"] == "derived" and me["agent"]["self_declared"] is True
        declared = await call(one, "whoami", agent="claude@bobmac:42")
        assert declared["agent"] == {"identity": "claude@bobmac:42", "source": "argument", "self_declared": True}
        req = await call(alice, "post", kind="handoff", channel="demo", body="Take the migration.")
        first = await call(one, "claim", thread=req["thread"])
        err, _ = await call_error(two, "claim", thread=req["thread"])
        assert err["code"] == "already_claimed"
        assert err["details"]["holder"]["session"] == first["claim"]["session"]


async def test_claim_next_takes_the_oldest_waiting_request(server, tokens):
    async with connect(server, tokens["alice"]) as alice, connect(server, tokens["bob"], agent="claude@b:9") as bob:
        # Earlier tests may have left claimable threads: take them all first.
        while not (await bob.call_tool("claim", {"thread": "next"})).is_error:
            pass
        req = await call(alice, "post", kind="request", channel="demo", impact="none", body="Next one.")
        got = await call(bob, "claim", thread="next")
        assert got["claim"]["thread"] == req["thread"]
        err, text = await call_error(bob, "claim", thread="next")
        assert err["code"] == "not_found" and "no open request" in text


async def test_a_claim_of_next_answers_with_the_task_to_do(server):
    """`claim` of `next` (waiting or not) answers with the thread it took, as the `thread` tool
    shows it: the agent reads its task in the claim's answer, labelled and fenced like any
    message, without another call. A renewal of a given thread answers the claim alone."""
    asker, worker, channel = unique("asker"), unique("worker"), unique("ct")
    server.person(asker, "Asker")
    server.person(worker, "Worker")
    server.channel(channel, [asker, worker])
    async with connect(server, server.token(asker)["secret"]) as them, \
            connect(server, server.token(worker)["secret"], agent="codex@w:1") as agent:
        first = await call(them, "post", kind="request", channel=channel, impact="none",
                           body="Rename the build step to compile.")
        result = await agent.call_tool("claim", {"thread": "next"})
        assert not result.is_error
        got = result.structured_content
        assert got["claim"]["thread"] == first["thread"]
        assert got["thread"]["thread"]["id"] == first["thread"]
        assert [m["body"] for m in got["thread"]["messages"]] == ["Rename the build step to compile."]
        text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
        assert "fencing token" in text and "Rename the build step to compile." in text
        assert f"request {first['message']}" in text, text

        got = {}

        async def wait():
            got["claim"] = await call(agent, "claim", thread="next", wait_s=30)

        before = inbox_waiters(server)
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await until_waiting(server, before + 1)
            second = await call(them, "post", kind="request", channel=channel, impact="none",
                                body="And the test step to check.")
        assert got["claim"]["claim"]["thread"] == second["thread"]
        assert [m["body"] for m in got["claim"]["thread"]["messages"]] == ["And the test step to check."]

        renewed = await call(agent, "claim", thread=second["thread"])
        assert renewed["claim"]["fencing_token"] == got["claim"]["claim"]["fencing_token"]
        assert "thread" not in renewed


async def test_a_cancelled_claim_wait_ends_and_never_takes_the_next_task(server):
    """A `claim` of `next` waiting for work ends when its client cancels the call (the official
    SDK sends `notifications/cancelled`): it no longer counts as a waiting long-poll, and the next
    task goes to the claimer still waiting, not to the abandoned wait (which, waiting longest,
    would have been handed it first and held it for no one until its lease ended)."""
    asker, worker, channel = unique("asker"), unique("worker"), unique("cw")
    server.person(asker, "Asker")
    server.person(worker, "Worker")
    server.channel(channel, [asker, worker])
    first, second = server.token(worker)["secret"], server.token(worker)["secret"]
    async with connect(server, server.token(asker)["secret"]) as them, \
            connect(server, first, agent="codex@w:1") as abandoned, connect(server, second, agent="codex@w:2") as kept:
        before = inbox_waiters(server)
        async with anyio.create_task_group() as tg:
            tg.start_soon(abandoned.call_tool, "claim", {"thread": "next", "wait_s": 40})
            await until_waiting(server, before + 1)
            tg.cancel_scope.cancel()
        # The server ended the wait (without the cancellation it would wait its 40 s).
        await anyio.to_thread.run_sync(
            lambda: eventually("the cancelled claim wait ended", lambda: inbox_waiters(server) == before, 20))
        got = {}

        async def wait():
            got["claim"] = await call(kept, "claim", thread="next", wait_s=40)

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await until_waiting(server, before + 1)
            req = await call(them, "post", kind="request", channel=channel, impact="none", body="Take this one.")
        assert got["claim"]["claim"]["thread"] == req["thread"]


async def test_a_claim_wait_ends_with_its_session_and_never_takes_a_task_for_it(server):
    """A client that ends its MCP session (`DELETE`) while its `claim` of `next` waits, without
    cancelling the call first (a client exiting), takes nothing: the wait ends with the session
    and the next task goes to the claimer still waiting. rmcp lets a closed session's calls run on
    for seconds to drain their answers; a claim in that time took the task for a client that
    could no longer be told, and held it until its lease ended."""
    asker, worker, channel = unique("asker"), unique("worker"), unique("cs")
    server.person(asker, "Asker")
    server.person(worker, "Worker")
    server.channel(channel, [asker, worker])
    leaving, staying = server.token(worker)["secret"], server.token(worker)["secret"]
    claim = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "claim", "arguments": {"thread": "next", "wait_s": 40}}})
    initialized = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    async with httpx.AsyncClient(timeout=60) as http, connect(server, server.token(asker)["secret"]) as them, \
            connect(server, staying, agent="codex@w:2") as kept:
        opened = await mcp_session(http, server.mcp_url, leaving)
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        headers = in_session(leaving, session)
        assert (await http.post(server.mcp_url, headers=headers, content=initialized)).status_code == 202
        before = inbox_waiters(server)
        async with http.stream("POST", server.mcp_url, headers=headers, content=claim) as abandoned:
            assert abandoned.status_code == 200
            # The leaving session waits first, so it would be the one handed the next task.
            await until_waiting(server, before + 1)
            got = {}

            async def wait():
                got["claim"] = await call(kept, "claim", thread="next", wait_s=20)

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await until_waiting(server, before + 2)
                ended = await http.delete(server.mcp_url, headers=headers)
                assert ended.status_code in (200, 204), ended.text
                # The session's wait ended with it, before rmcp's drain would have ended it.
                await anyio.to_thread.run_sync(lambda: eventually(
                    "the ended session's claim wait ended", lambda: inbox_waiters(server) == before + 1, 2))
                req = await call(them, "post", kind="request", channel=channel, impact="none", body="Take this one.")
        # Had the leaving session taken it, this wait would have ended with nothing to claim.
        assert got["claim"]["claim"]["thread"] == req["thread"]


async def test_presence_fleet_and_leases_with_force(server, tokens):
    resource = f"repo:{unique('bridge')}"
    async with connect(server, tokens["alice"], agent="claude@alicemac:1") as alice, \
            connect(server, tokens["bob"], agent="codex@bobmac:7") as bob:
        p = await call(alice, "presence_set", transition="working", task="Fixing the bridge", ttl_s=60)
        assert p["presence"]["agent"] == "claude@alicemac:1"
        fleet = await call(bob, "fleet")
        assert any(e["person"] == "alice" and e["task"] == "Fixing the bridge" for e in fleet["fleet"])

        await call(alice, "lease_acquire", resource=resource, ttl_s=300)
        err, text = await call_error(bob, "lease_acquire", resource=resource)
        assert err["code"] == "lease_held" and "alice" in text and "force" in text
        alice_cursor = await drain(alice, "leases")
        taken = await call(bob, "lease_acquire", resource=resource, force=True)
        assert taken["lease"]["person"] == "bob"
        page = await call(alice, "inbox", consumer="leases", after=alice_cursor, wait_s=5)
        assert page["entries"] and page["entries"][0]["type"] == "notice"
        leases = await call(alice, "leases")
        held = [l for l in leases["leases"] if l["resource"] == resource]
        assert [l["person"] for l in held] == ["bob"]
        await call(bob, "lease_release", resource=resource)
        err, _ = await call_error(bob, "lease_release", resource=resource)
        assert err["code"] == "invalid_input"


async def test_list_tools_paginate_with_cursors(server, tokens):
    for i in range(3):
        server.channel(unique("page"), ["alice", "bob"])
    async with connect(server, tokens["alice"]) as alice:
        seen, cursor = [], None
        while True:
            args = {"limit": 2} if cursor is None else {"limit": 2, "cursor": cursor}
            page = await call(alice, "channels", **args)
            seen += [c["name"] for c in page["channels"]]
            cursor = page.get("next_cursor")
            if cursor is None:
                break
        assert len(seen) == len(set(seen)) >= 4
        err, _ = await call_error(alice, "channels", cursor="bogus")
        assert err["code"] == "invalid_input"
