"""Two agents hold a whole thread through a `liaison serve --demo` server, with the official MCP
Python SDK, as a new user would try it:

    liaison serve --demo                         # in one terminal
    python tests/interop/demo_conversation.py [liaison-data/demo.json]

Alice's agent asks, Bob's agent (waiting in a long-poll) answers, Alice follows up, Bob answers,
Alice closes. Each step prints what the agent sees. Exits non-zero if anything goes wrong.
"""

import json
import sys
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def agent(url, token, name):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}", "Liaison-Agent": name})
    return http, Client(streamable_http_client(url, http_client=http), mode="legacy")


async def call(client, tool, **arguments):
    result = await client.call_tool(tool, arguments)
    text = "\n".join(c.text for c in result.content if c.type == "text")
    if result.is_error:
        raise SystemExit(f"{tool} failed: {text}")
    return result.structured_content, text


def show(who, text):
    print(f"--- {who} sees:\n{text}\n")


async def main(demo_file):
    demo = json.loads(Path(demo_file).read_text())
    url, channel = demo["mcp_url"], demo["channel"]
    a_http, a_client = await agent(url, demo["alice"]["agent_token"], "demo-script@alice:1")
    b_http, b_client = await agent(url, demo["bob"]["agent_token"], "demo-script@bob:1")
    async with a_http, b_http, a_client as alice, b_client as bob:
        page, _ = await call(bob, "inbox", consumer="demo-script")
        b_cursor = page["last"]
        page, _ = await call(alice, "inbox", consumer="demo-script")
        a_cursor = page["last"]

        async def bob_reads():
            nonlocal b_cursor
            page, text = await call(bob, "inbox", consumer="demo-script", after=b_cursor, wait_s=30)
            b_cursor = page["cursor"]
            show("Bob's agent", text)
            return page["entries"][-1]

        async def alice_reads():
            nonlocal a_cursor
            page, text = await call(alice, "inbox", consumer="demo-script", after=a_cursor, wait_s=30)
            a_cursor = page["cursor"]
            show("Alice's agent", text)
            return page["entries"][-1]

        asked, _ = await call(alice, "post", kind="question", channel=channel, subject="Phone numbers",
                              body="Which column holds customers' phone numbers?")
        thread = asked["thread"]
        print(f"Alice's agent asked in {thread}: state {asked['thread_state']}\n")
        await bob_reads()
        r, _ = await call(bob, "post", kind="reply", thread=thread, body="`contacts.phone_e164`, E.164 format.")
        print(f"Bob's agent replied: state {r['thread_state']}\n")
        await alice_reads()
        r, _ = await call(alice, "post", kind="question", thread=thread, body="Is it ever null?")
        print(f"Alice's agent followed up: state {r['thread_state']}\n")
        await bob_reads()
        r, _ = await call(bob, "post", kind="reply", thread=thread, body="Yes, for about 3% of rows.")
        print(f"Bob's agent replied: state {r['thread_state']}\n")
        await alice_reads()
        r, _ = await call(alice, "post", kind="close", thread=thread, body="Thanks, that settles it.")
        print(f"Alice's agent closed the thread: state {r['thread_state']}\n")
        view, _ = await call(bob, "thread", thread=thread)
        kinds = [m["kind"] for m in view["messages"]]
        assert kinds == ["question", "reply", "question", "reply", "close"], kinds
        assert view["thread"]["state"] == "closed"
        print("OK: the whole thread went through liaison:", " -> ".join(kinds))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else "liaison-data/demo.json")
