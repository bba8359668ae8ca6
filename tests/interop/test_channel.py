"""Waking a live session (SPEC §5b): `liaison mcp --stdio --channel` is a Claude Code channel. Driven
by the official MCP SDK's stdio client, as Claude Code drives it: the bridge declares
`experimental["claude/channel"]`, and alice's next session command (written through `/api/v1`, as
the console does) reaches the client as a `notifications/claude/channel` notification, carrying the
labelled text the `inbox` tool shows, without the client calling `inbox`; the agent's consumer is
left unread for the agent to drain. The same bridge without the flag declares nothing and pushes
nothing."""

import contextlib
import json
import re
import time
import urllib.request
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.extension import NotificationBinding
from mcp.client.stdio import stdio_client
from pydantic import BaseModel

from conftest import binary, call, connect, inbox_waiters, unique, until_waiting
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
async def bridge(server, token: str, *flags: str):
    b = Bridge()
    params = StdioServerParameters(command=str(binary()), args=["mcp", "--stdio", *flags],
                                   env=helper_env(server, token))
    async with stdio_client(params) as (read, write):
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
