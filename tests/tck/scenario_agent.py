"""The scenario agent for the A2A conformance kit (a2aproject/a2a-tck, branch 1.0-dev).

The TCK selects what the agent under test does by the prefix of the client's `messageId`
(`scenarios/core_operations.feature` and `scenarios/streaming.feature`). liaison has no agent of
its own: tasks become threads that the team's agents answer over MCP. This module is such an
agent, a plain MCP client (the official `mcp` SDK, as in tests/interop/conftest.py): it long-polls its
inbox, reads the client's messageId from each external message (liaison keeps it as the message's
idempotency key, `a2a:<messageId>`), and plays the scenario with liaison's own moves:

| TCK step                          | liaison move (what the A2A client sees)                        |
|-----------------------------------|----------------------------------------------------------------|
| status update to "working"        | `claim` the thread (WORKING)                                    |
| add/stream an artifact, complete  | `post` kind `reply` with body and attachments (artifact, COMPLETED) |
| status "input_required"           | `post` kind `question` (INPUT_REQUIRED)                         |
| reject                            | `post` kind `close`, outcome `rejected` (REJECTED)              |
| return a Message (no task)        | `post` kind `reply` as the only move, on the conversational skill `chat` (a direct answer) |
| chunked artifact (append)         | not expressible: one reply is one whole artifact                |

The kit's party defaults to the conversational skill `chat` (run_sut.py), where a reply that is
the agent's only move is the party's answer as a bare Message (SPEC §8 "Direct answers"). Every
scenario that completes a task claims it first (WORKING), as a team's agent does when it takes on
work, so its reply stays the task's answer.

Not collected by pytest (the name does not start with `test_`); `run_sut.py` starts it beside a
server. Run alone: `python scenario_agent.py --url http://127.0.0.1:8080 --token lsn_…`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import logging

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

log = logging.getLogger("tck-agent")

AGENT = "tck-agent@localhost:1"
CONSUMER = "tck"
# How long `test-resubscribe-message-id` stays WORKING: the TCK waits for 2x its 2 s streaming timeout.
RESUBSCRIBE_HOLD_S = 4.5

TEXT_ARTIFACTS = {
    "tck-stream-artifact-text": "Streamed text content",
    "tck-stream-ordering-001": "Ordered output",
    "tck-stream-001": "Stream hello from TCK",
    "tck-stream-003": "Stream task lifecycle",
    "tck-artifact-text": "Generated text content",
}
OUTPUT_TXT = {
    "type": "inline",
    "filename": "output.txt",
    "media_type": "text/plain",
    "data_base64": base64.b64encode(b"tck").decode(),
}


def client_message_id(key: str) -> str | None:
    """The client's messageId behind a party message's idempotency key: `a2a:<id>` for its first
    use, `a2a~<16 hex>.<6-digit use>:<id>` for a later message under the same id (docs/a2a-clients.md
    "Retries and messageId"); None for any other key."""
    if key.startswith("a2a:"):
        return key.removeprefix("a2a:")
    if key.startswith("a2a~") and key[20:21] == "." and key[27:28] == ":":
        return key[28:]
    return None


def plan(message_id: str) -> list[tuple]:
    """The moves for one external message, chosen by its messageId prefix (longest prefixes first,
    as `tck-artifact-file-url` starts with `tck-artifact-file`)."""
    # An empty body with attachments: the artifact is only the attachments (the TCK reads parts[0]).
    reply = lambda body, attachments=(): ("post", {"kind": "reply", "body": body, "attachments": list(attachments)})
    mid = message_id
    if mid.startswith("tck-message-response"):
        return [reply("Direct message response")]
    moves = task_plan(mid, reply)
    # A reply that should stay a task comes after a claim; a question or a close needs none.
    if any(m[0] == "post" and m[1]["kind"] == "reply" for m in moves):
        moves = [("claim",), *moves]
    return moves


def task_plan(mid: str, reply) -> list[tuple]:
    """The moves after the claim, for the scenarios that want a task."""
    if mid.startswith("tck-stream-artifact-chunked"):
        return [reply("chunk-1 chunk-2")]
    if mid.startswith("test-resubscribe-message-id"):
        return [("sleep", RESUBSCRIBE_HOLD_S), reply("Resubscribed task done")]
    if mid.startswith("tck-stream-artifact-file"):
        return [reply("", [OUTPUT_TXT])]
    for prefix, text in TEXT_ARTIFACTS.items():
        if mid.startswith(prefix):
            return [reply(text)]
    if mid.startswith("tck-stream-002"):
        return [reply("Stream completed")]
    if mid.startswith("tck-artifact-file-url"):
        url = {"type": "url", "url": "https://example.com/output.txt", "filename": "output.txt", "media_type": "text/plain"}
        return [reply("", [url])]
    if mid.startswith("tck-artifact-file"):
        return [reply("", [OUTPUT_TXT])]
    if mid.startswith("tck-artifact-data"):
        return [reply("", [{"type": "data", "data": {"key": "value", "count": 42}}])]
    if mid.startswith("tck-input-required"):
        return [("post", {"kind": "question", "body": "Input required: please send the next message."})]
    if mid.startswith("tck-reject-task"):
        return [("post", {"kind": "close", "outcome": "rejected", "body": "rejected"})]
    if mid.startswith("tck-complete-task"):
        return [reply("Hello from TCK")]
    return [reply(f"echo: {mid}")]


async def call(client, tool: str, **arguments) -> dict:
    result = await client.call_tool(tool, arguments)
    text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    if result.is_error:
        raise RuntimeError(f"{tool}: {text}")
    return result.structured_content


async def play(client, thread: str, message_id: str) -> None:
    for move in plan(message_id):
        try:
            if move[0] == "claim":
                await call(client, "claim", thread=thread)
            elif move[0] == "sleep":
                await asyncio.sleep(move[1])
            else:
                await call(client, "post", thread=thread, **move[1])
        except RuntimeError as e:
            # A canceled task, a claim refused: the client has moved on; say so and go on.
            log.warning("%s %s: %s", thread, message_id, e)
    log.info("%s %s: played", thread, message_id)


async def run(url: str, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}", "Liaison-Agent": AGENT}
    http = create_mcp_http_client(headers=headers)
    async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        me = await call(client, "whoami")
        log.info("Answering tasks as %s", me.get("person", me))
        cursor = None
        running: set[asyncio.Task] = set()
        while True:
            args = {"consumer": CONSUMER, "wait_s": 50, "limit": 100}
            if cursor is not None:
                args["after"] = cursor
            page = await call(client, "inbox", **args)
            for entry in page["entries"]:
                key = entry.get("idempotency_key") or ""
                message_id = client_message_id(key)
                if entry.get("type") != "message" or message_id is None:
                    continue
                if entry.get("kind") not in ("question", "request", "handoff", "reply", "announce"):
                    continue
                task = asyncio.create_task(play(client, entry["thread"], message_id))
                running.add(task)
                task.add_done_callback(running.discard)
            cursor = page["cursor"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="liaison's base URL (the MCP front is at /mcp)")
    parser.add_argument("--token", required=True, help="an agent token of a member in the skills' channel")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run(args.url, args.token))


if __name__ == "__main__":
    main()
