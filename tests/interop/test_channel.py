"""Waking a live session (SPEC §5b): `liaison mcp --stdio --channel` is a Claude Code channel. Driven
by the official MCP SDK's stdio client, as Claude Code drives it: the bridge declares
`experimental["claude/channel"]`, and alice's next session command (written through `/api/v1`, as
the console does) reaches the client as a `notifications/claude/channel` notification, carrying the
labelled text the `inbox` tool shows, without the client calling `inbox`; the agent's consumer is
left unread for the agent to drain. The same bridge without the flag declares nothing and pushes
nothing."""

import contextlib
import json
import os
import re
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.extension import NotificationBinding
from mcp.client.stdio import stdio_client
from pydantic import BaseModel

from conftest import (Server, binary, connect, eventually, fresh_database, inbox_waiters, stop_server, unique,
                      until_waiting)
from test_agent_side import helper_env
from test_own_agents import connection

pytestmark = pytest.mark.anyio

METHOD = "notifications/claude/channel"


class ChannelEvent(BaseModel):
    """The params of a Claude Code channel event."""

    content: str
    meta: dict[str, str] = {}


def member_api(server, token: str, method: str, path: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{server.url}{path}", data=data, method=method,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def unfenced(text: str) -> str:
    return re.sub(r"liaison-data [0-9a-f]{16}", "liaison-data #", text)


class Bridge:
    """One `liaison mcp --stdio` under the SDK's stdio client, with everything it pushed."""

    def __init__(self) -> None:
        self.events: list[tuple[float, ChannelEvent]] = []
        self.other: list[Any] = []
        self.arrived = anyio.Event()
        self.session: ClientSession | None = None
        self.capabilities = None

    async def on_event(self, params: ChannelEvent) -> None:
        self.events.append((time.monotonic(), params))
        self.arrived.set()

    async def on_message(self, message) -> None:
        # Every other notification the session surfaces (none is expected: no tool call runs).
        self.other.append(message)


@contextlib.asynccontextmanager
async def bridge(server, token: str, *flags: str, errlog=None):
    b = Bridge()
    params = StdioServerParameters(command=str(binary()), args=["mcp", "--stdio", *flags],
                                   env=helper_env(server, token))
    async with stdio_client(params, **({"errlog": errlog} if errlog else {})) as (read, write):
        binding = NotificationBinding(method=METHOD, params_type=ChannelEvent, handler=b.on_event)
        async with ClientSession(read, write, message_handler=b.on_message,
                                 notification_bindings=[binding]) as session:
            init = await session.initialize()
            b.session, b.capabilities = session, init.capabilities
            yield b


async def test_her_command_wakes_the_session_through_the_channel_without_an_inbox_call(server):
    alice = unique("al")
    server.person(alice, "Alice Channel")
    agent, name = connection(server, alice, "claude laptop")
    human = server.token(alice, scopes=("human",))["secret"]
    opened = member_api(server, human, "POST", "/api/v1/sessions", {"connection": name})

    waiting = inbox_waiters(server)
    async with bridge(server, agent, "--channel") as pushed, bridge(server, agent) as plain:
        assert pushed.capabilities.experimental == {"claude/channel": {}}, pushed.capabilities
        assert not (plain.capabilities.experimental or {}), plain.capabilities
        # The bridge waits by a server long-poll: once it is counted, her command must wake it.
        await until_waiting(server, waiting + 1)

        sent_at = time.monotonic()
        sent = await anyio.to_thread.run_sync(lambda: member_api(
            server, human, "POST", f"/api/v1/sessions/{opened['id']}/commands",
            {"instruction": "Replace the pricing table", "context": {"url": "https://example.com/pricing"}}))
        with anyio.fail_after(15):  # a generous deadline, not a timing claim
            await pushed.arrived.wait()
        arrived_at, event = pushed.events[0]
        print(f"\nchannel notification {1000 * (arrived_at - sent_at):.0f} ms after the command was sent")

        assert event.meta["source"] == "liaison" and event.meta["consumer"] == "agent", event.meta
        assert event.meta["kind"] == "request" and event.meta["thread"] == sent["thread"], event.meta
        assert event.meta["from"] == alice and event.meta["entry"] == "message", event.meta
        assert all(k.replace("_", "").isalnum() for k in event.meta), event.meta
        assert "Replace the pricing table" in event.content
        assert "inbox tool (consumer=\"agent\")" in event.content

        # The plain bridge, on the same connection, pushed nothing, and neither surfaced anything
        # else (a notification of a tool call would mean an `inbox` ran).
        await anyio.sleep(1)
        assert plain.events == [] and plain.other == [], (plain.events, plain.other)
        assert len(pushed.events) == 1 and pushed.other == [], (pushed.events, pushed.other)

    # Her timeline shows the command read by the connection it was pushed to (the read is
    # recorded behind the inbox answer that pushed it).
    def read():
        view = member_api(server, human, "GET", f"/api/v1/sessions/{opened['id']}")
        return view if len(view["commands"][0]["timeline"]) > 1 else None

    view = eventually("the command's read", read)
    steps = [st["step"] for st in view["commands"][0]["timeline"]]
    assert steps == ["received", "read"], view["commands"][0]["timeline"]
    assert view["commands"][0]["timeline"][1]["connection"] == name

    # The agent's own consumer was not touched: the command is still unread there, and the inbox
    # tool shows it with exactly the labelled text that was pushed.
    async with connect(server, agent) as mcp:
        result = await mcp.call_tool("inbox", {"consumer": "agent", "limit": 50})
        page = result.structured_content
        assert page["acked"] == 0 and page["unread"] >= 1, page
        [i] = [n for n, e in enumerate(page["entries"]) if e.get("thread") == sent["thread"]]
        entry = page["entries"][i]
        assert event.meta["seq"] == str(entry["seq"])
        label = entry["label"]["text"]
        assert label and label in event.content, (label, event.content)
        # The same text, but for the fence's nonce, fresh in each rendering.
        shown = unfenced(result.content[i].text)
        assert unfenced(event.content).startswith(shown), (event.content, shown)


async def test_a_negotiating_client_gets_the_handshake_the_channel_needs(server):
    """A channel is declared in `initialize`, which the stateless revision skips: the SDK's `auto`
    mode (probe, then fall back) lands on a handshake revision with `--channel`, and on the
    stateless one without it, as before."""
    token = server.token("bob")["secret"]
    for flags, handshake in ((["--channel"], True), ([], False)):
        params = StdioServerParameters(command=str(binary()), args=["mcp", "--stdio", *flags],
                                       env=helper_env(server, token))
        async with Client(params, mode="auto") as client:
            session = client.session
            assert (session.initialize_result is not None) is handshake, (flags, session.protocol_version)
            if handshake:
                assert session.server_capabilities.experimental == {"claude/channel": {}}
            else:
                assert session.protocol_version == "2026-07-28"
            assert (await client.call_tool("whoami", {})).structured_content["person"]["id"] == "bob"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(data_dir: Path, database_url: str | None, port: int, config: str = "") -> Server:
    """`liaison serve` on a data dir and an address both kept across restarts."""
    cmd = [str(binary()), "serve", "--data-dir", str(data_dir), "--listen", f"127.0.0.1:{port}"]
    if config:
        (data_dir / "test-config.toml").write_text(config)
        cmd += ["--config", str(data_dir / "test-config.toml")]
    if database_url:
        cmd += ["--database-url", database_url]
    env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    output: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        output.append(line)
        if m := re.search(r"serving at (https?://\S+)", line):
            threading.Thread(target=lambda: [output.append(l) for l in process.stdout], daemon=True).start()
            admin_token = (data_dir / "admin.token").read_text().strip()
            return Server(m.group(1), data_dir, process, admin_token, output)
    process.kill()
    raise RuntimeError("liaison did not start:\n" + "".join(output))


async def test_the_channel_rides_out_a_server_restart_with_nothing_lost_or_twice(tmp_path):
    """The server stops and comes back on the same address: the bridge logs its retries on stderr,
    reconnects by itself, and pushes the next command; what it pushed before is not pushed again."""
    data_dir = Path(tempfile.mkdtemp(prefix="liaison-channel-"))
    database_url, dbname = fresh_database()
    port = free_port()
    srv = launch(data_dir, database_url, port)
    try:
        srv.person("alice", "Alice Restart")
        agent, name = connection(srv, "alice", "claude laptop")
        human = srv.token("alice", scopes=("human",))["secret"]
        session = member_api(srv, human, "POST", "/api/v1/sessions", {"connection": name})["id"]

        def command(text: str) -> dict:
            return member_api(srv, human, "POST", f"/api/v1/sessions/{session}/commands", {"instruction": text})

        log = (tmp_path / "bridge.log").open("w+")
        async with bridge(srv, agent, "--channel", errlog=log) as pushed:
            await until_waiting(srv, 1)
            first = await anyio.to_thread.run_sync(command, "Before the restart")
            with anyio.fail_after(15):
                await pushed.arrived.wait()
            pushed.arrived = anyio.Event()

            srv.process.terminate()
            srv.process.wait(timeout=15)
            restarted = await anyio.to_thread.run_sync(launch, data_dir, database_url, port)
            srv.process, srv.url, srv.output = restarted.process, restarted.url, restarted.output
            # Sent at once: whether the bridge is back yet or not, the command is after its cursor.
            sent_at = time.monotonic()
            second = await anyio.to_thread.run_sync(command, "After the restart")
            with anyio.fail_after(60):  # its backoff is at most 30 s; a generous deadline
                await pushed.arrived.wait()
            print(f"\nafter the restart: pushed {1000 * (pushed.events[-1][0] - sent_at):.0f} ms after the command")
            await anyio.sleep(1)
            threads = [e.meta["thread"] for _, e in pushed.events]
            assert threads == [first["thread"], second["thread"]], threads
        log.seek(0)
        stderr = log.read()
        assert "liaison channel: inbox source:" in stderr and "retrying in" in stderr, stderr
        assert "liaison channel: inbox source reconnected." in stderr, stderr
    finally:
        stop_server(srv, dbname)


async def test_a_server_with_shorter_long_polls_is_waited_on_within_its_limit(tmp_path):
    """A server whose `inbox.max_wait_s` is below the bridge's 50 s refuses that wait: the bridge
    shortens its wait until the server takes it, and pushes as before."""
    data_dir = Path(tempfile.mkdtemp(prefix="liaison-channel-"))
    database_url, dbname = fresh_database()
    srv = launch(data_dir, database_url, free_port(), config="[inbox]\nmax_wait_s = 10\n")
    try:
        srv.person("alice", "Alice Short")
        agent, name = connection(srv, "alice", "claude laptop")
        human = srv.token("alice", scopes=("human",))["secret"]
        session = member_api(srv, human, "POST", "/api/v1/sessions", {"connection": name})["id"]
        log = (tmp_path / "bridge.log").open("w+")
        async with bridge(srv, agent, "--channel", errlog=log) as pushed:
            await until_waiting(srv, 1)
            sent = await anyio.to_thread.run_sync(lambda: member_api(
                srv, human, "POST", f"/api/v1/sessions/{session}/commands", {"instruction": "Short waits"}))
            with anyio.fail_after(15):
                await pushed.arrived.wait()
            assert [e.meta["thread"] for _, e in pushed.events] == [sent["thread"]]
        log.seek(0)
        assert "wait_s 50 is out of range" in log.read()
    finally:
        stop_server(srv, dbname)


async def test_her_decision_on_a_tool_call_reaches_the_live_session(server):
    """A tool call waiting for her (`database` is `confirm` by default): her "reject" with a reason
    reaches the session through the channel, so an agent whose hook stopped waiting learns it; her
    other connection's bridge hears nothing of it."""
    alice = unique("al")
    server.person(alice, "Alice Decides")
    agent, _ = connection(server, alice, "claude laptop")
    other, _ = connection(server, alice, "codex")
    human = server.token(alice, scopes=("human",))["secret"]
    waiting = inbox_waiters(server)
    async with bridge(server, agent, "--channel") as pushed, bridge(server, other, "--channel") as codex:
        # Each flagged bridge waits on its inbox and on its decisions.
        await until_waiting(server, waiting + 4)
        asked = member_api(server, agent, "POST", "/api/v1/tool-checks", {
            "event": "pre_tool_use", "tool": "Bash", "input_digest": "ab" * 32,
            "summary": {"target": "psql", "command": "psql -c 'DELETE FROM carts'"}, "wait_s": 60})
        assert asked["decision"] == "confirm", asked
        tcf = asked["confirmation"]["id"]
        sent_at = time.monotonic()
        member_api(server, human, "POST", f"/api/v1/confirmations/{tcf}/reject", {"reason": "use the staging copy"})
        with anyio.fail_after(15):  # a generous deadline, not a timing claim
            await pushed.arrived.wait()
        arrived_at, event = pushed.events[0]
        print(f"\ndecision pushed {1000 * (arrived_at - sent_at):.0f} ms after she rejected")
        assert event.meta == {"source": "liaison", "kind": "confirmation", "confirmation": tcf,
                              "state": "rejected"}, event.meta
        assert "psql -c 'DELETE FROM carts'" in event.content and "use the staging copy" in event.content
        await anyio.sleep(1)
        assert codex.events == [], codex.events
        assert len(pushed.events) == 1, pushed.events
