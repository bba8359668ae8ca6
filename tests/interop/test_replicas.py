"""The compose topology (docker/compose.yaml) without Docker: two `liaison serve` processes on one
PostgreSQL database with the same master key, each reached directly (what a proxy alternating
between replicas does; MCP stays on one replica, as the proxy's stickiness keeps it). An A2A task is
created and streamed on replica 1 with the official a2a-sdk, claimed and answered over MCP on
replica 2 with the official MCP SDK, and the stream on replica 1 sees every event.

PostgreSQL only: on SQLite replicas cannot share a database.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import anyio
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

from conftest import Server, binary, call, connect, fresh_database, stop_server

pytestmark = pytest.mark.skipif(
    not os.environ.get("LIAISON_TEST_DATABASE_URL", "").startswith("postgres"),
    reason="replicas share a PostgreSQL database; set LIAISON_TEST_DATABASE_URL=postgres://… to run",
)


def start_replica(database_url: str, master_key: str, admin_token: str | None) -> Server:
    """One `liaison serve` on port 0 with its own data directory, on the shared database."""
    data_dir = Path(tempfile.mkdtemp(prefix="liaison-replica-"))
    env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn"), "LIAISON_MASTER_KEY": master_key}
    cmd = [str(binary()), "serve", "--data-dir", str(data_dir), "--listen", "127.0.0.1:0",
           "--database-url", database_url]
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    output: list[str] = []
    url = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        output.append(line)
        if m := re.search(r"serving at (https?://\S+)", line):
            url = m.group(1)
            break
    if url is None:
        process.kill()
        raise RuntimeError("a replica did not start:\n" + "".join(output))
    threading.Thread(target=lambda: [output.append(l) for l in process.stdout], daemon=True).start()
    if admin_token is None:
        admin_token = (data_dir / "admin.token").read_text().strip()
    return Server(url, data_dir, process, admin_token, output)


@pytest.fixture
def replicas():
    database_url, dbname = fresh_database()
    master_key = secrets.token_hex(32)
    one = start_replica(database_url, master_key, None)
    # The second replica finds the database bootstrapped: no token of its own.
    two = start_replica(database_url, master_key, one.admin_token)
    assert not (two.data_dir / "admin.token").exists()
    try:
        yield one, two
    finally:
        stop_server(two, None)
        stop_server(one, dbname)


@pytest.mark.anyio
async def test_a_task_streamed_on_one_replica_is_answered_over_mcp_on_the_other(replicas):
    one, two = replicas
    # Set up on replica 1, used on replica 2: the directory is shared.
    one.person("alice", "Alice Martin")
    partner = one.admin("POST", "/admin/v1/parties", {"id": "partner", "display_name": "Partner Corp"})
    partner_token = partner["token"]["secret"]
    one.channel("partners", ["alice", "partner"])
    alice = two.token("alice")["secret"]

    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {partner_token}"}
    async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=None)) as http:
        card = await A2ACardResolver(http, one.url).get_agent_card()
        # Replica 1's card: the stream is opened on replica 1.
        address = one.url.split("://", 1)[1]
        assert all(address in i.url for i in card.supported_interfaces), card
        client = ClientFactory(ClientConfig(streaming=True, httpx_client=http,
                                            supported_protocol_bindings=["JSONRPC"])).create(card)
        message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER,
                          parts=[Part(text="Which TLS versions does the webhook endpoint accept?")])
        message.metadata.update({"skill": "handoff"})
        context = ClientCallContext(service_parameters={"authorization": f"Bearer {partner_token}"})
        events = []

        async def stream():
            async for event in client.send_message(SendMessageRequest(message=message), context=context):
                events.append(event)

        # A stream that never hears of replica 2's work would hang: bounded.
        with anyio.fail_after(90):
            async with anyio.create_task_group() as tg:
                tg.start_soon(stream)
                # Replica 2: alice's agent waits for the handoff, claims it and answers, over MCP.
                async with connect(two, alice, agent="claude@alice-laptop:1") as mcp:
                    after, thread = 0, None
                    while thread is None:
                        page = await call(mcp, "inbox", consumer="replicas", after=after, wait_s=10)
                        after = page["cursor"]
                        thread = next((e["thread"] for e in page["entries"] if e.get("kind") == "handoff"), None)
                    await call(mcp, "claim", thread=thread)
                    await call(mcp, "post", kind="reply", thread=thread, body="TLS 1.2 and 1.3")
        await client.close()

    assert events[0].WhichOneof("payload") == "task", events
    assert events[0].task.id == thread
    seen = [TaskState.Name(events[0].task.status.state)]
    artifacts = []
    for event in events[1:]:
        kind = event.WhichOneof("payload")
        if kind == "status_update":
            seen.append(TaskState.Name(event.status_update.status.state))
        elif kind == "artifact_update":
            artifacts.append(event.artifact_update.artifact.parts[0].text)
    assert seen == ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"], events
    assert artifacts == ["TLS 1.2 and 1.3"]
    # Both replicas tell the same story.
    async with connect(one, alice) as mcp:
        view = await call(mcp, "thread", thread=thread)
    assert view["thread"]["state"] == "answered", view


def member_api(server: Server, token: str, method: str, path: str, body: dict | None = None) -> dict:
    """The member API of one replica, as another application acting for alice would call it."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{server.url}{path}", data=data, method=method,
                                 headers={"Authorization": f"Bearer {token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


@pytest.mark.anyio
async def test_her_session_runs_across_replicas(replicas):
    """Her session (SPEC §4b) opened and written to on replica 2 through `/api/v1/sessions`; her agent
    joined and waiting on replica 1 over MCP: the command wakes the wait there, and ending the
    session on replica 2 ends the next wait on replica 1 with `session_ended` before its deadline."""
    from conftest import call_error, until_waiting

    one, two = replicas
    one.person("alice", "Alice Martin")
    human = two.token("alice", scopes=("human",))["secret"]
    agent = one.admin("POST", "/admin/v1/tokens", {"person": "alice", "scopes": ["agent"],
                                                   "description": "claude laptop"})["token"]
    assert agent["connection"] == "claude-laptop"
    opened = member_api(two, human, "POST", "/api/v1/sessions", {"connection": "claude-laptop"})
    session = opened["id"]
    code = member_api(two, human, "POST", f"/api/v1/sessions/{session}/code")["code"]
    async with connect(one, agent["secret"], agent="claude@laptop:1") as mcp:
        joined = (await call(mcp, "join", code=code))["joined"]
        got = {}

        async def wait():
            got["page"] = await call(mcp, "inbox", consumer=joined["consumer"], session=session,
                                     after=joined["cursor"], wait_s=30)

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await until_waiting(one, 1)
            sent = member_api(two, human, "POST", f"/api/v1/sessions/{session}/commands",
                              {"instruction": "Replace the pricing table",
                               "context": {"url": "https://example.com/pricing"}})
        [entry] = [e for e in got["page"]["entries"] if e["type"] == "message"]
        assert entry["thread"] == sent["thread"] and entry["label"]["instruction"] is True

        ended = {}

        async def wait_end():
            ended["at"] = time.monotonic()
            ended["err"], _ = await call_error(mcp, "inbox", consumer=joined["consumer"], session=session,
                                               after=got["page"]["cursor"], wait_s=30)
            ended["took"] = time.monotonic() - ended["at"]

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_end)
            await until_waiting(one, 1)
            member_api(two, human, "POST", f"/api/v1/sessions/{session}/end")
        assert ended["err"]["code"] == "session_ended", ended
        # Woken by the end, not by its 30-second deadline (a generous bound, not a timing claim).
        assert ended["took"] < 25, ended
    view = member_api(two, human, "GET", f"/api/v1/sessions/{session}")
    # Read but never claimed: ending the session withdrew it.
    assert view["state"] == "ended" and view["commands"][0]["status"] == "expired", view
    assert [s["step"] for s in view["commands"][0]["timeline"]] == ["received", "read", "expired"], view
