"""The README's A2A example as a new user runs it: `serve --demo`, then `examples/a2a_delegate.py
--demo <data dir>/demo.json` delegates a task over each binding while an MCP agent of the team
(alice, through the official `mcp` SDK) claims it (skill `handoff`: a claimable thread), announces, asks a question, gets the answer and
replies with text, a file and data. The script must verify the card, follow SUBMITTED → WORKING →
INPUT_REQUIRED → WORKING → COMPLETED, print the three artifact parts and exit 0."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from pathlib import Path

import pytest

from conftest import call, connect, start_server, stop_server

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "a2a_delegate.py"
REPORT = b"%PDF-1.4 tls report\n"


async def next_entry(client, after: int, kind: str):
    """Waits for the next inbox entry of `kind` (acknowledging what came before)."""
    for _ in range(20):
        page = await call(client, "inbox", consumer="example-test", after=after, wait_s=10)
        for entry in page["entries"]:
            if entry.get("kind") == kind:
                return entry, page["cursor"]
        after = page["cursor"]
    raise AssertionError(f"no {kind} arrived")


async def team_answers(srv, alice: str):
    async with connect(srv, alice, agent="claude@alice-laptop:1") as mcp:
        page = await call(mcp, "inbox", consumer="example-test")
        task, cursor = await next_entry(mcp, page["acked"], "handoff")
        thread = task["thread"]
        await call(mcp, "claim", thread=thread)
        await call(mcp, "post", kind="announce", thread=thread, body="Looking into it")
        await call(mcp, "post", kind="question", thread=thread, body="Production or staging?")
        answer, cursor = await next_entry(mcp, cursor, "reply")
        assert answer["body"] == "Production"
        await call(
            mcp,
            "post",
            kind="reply",
            thread=thread,
            body="TLS 1.2 and 1.3",
            attachments=[
                {"type": "inline", "filename": "tls.pdf", "media_type": "application/pdf", "data_base64": base64.b64encode(REPORT).decode()},
                {"type": "data", "data": {"min": "1.2", "max": "1.3"}},
            ],
        )
        return thread


@pytest.mark.anyio
@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_the_readme_example_delegates_a_task_an_mcp_agent_answers(binding):
    srv, dbname = start_server("--demo")
    try:
        demo = json.loads((srv.data_dir / "demo.json").read_text())
        script = await asyncio.create_subprocess_exec(
            sys.executable, str(EXAMPLE), "--demo", str(srv.data_dir / "demo.json"), "--binding", binding,
            "--skill", "handoff", "--answer", "Production", "Which TLS versions does the webhook endpoint accept?",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        thread = await asyncio.wait_for(team_answers(srv, demo["alice"]["agent_token"]), 60)
        out, _ = await asyncio.wait_for(script.communicate(), 60)
        text = out.decode()
        assert script.returncode == 0, text
        lines = [line.strip() for line in text.splitlines()]
        assert lines[0] == "card: liaison 0.1.0 (signature verified), skills: ask, request-change, chat, handoff", text
        assert lines[1:] == [
            f"task {thread}: TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",  # claimed
            "TASK_STATE_WORKING: Looking into it",  # the announce
            "TASK_STATE_INPUT_REQUIRED: Production or staging?",
            # The answer goes in the same task; its stream starts with the task snapshot.
            f"task {thread}: TASK_STATE_WORKING",
            "artifact: TLS 1.2 and 1.3",
            f"artifact: [file tls.pdf application/pdf, {len(REPORT)} bytes]",
            'artifact: [data {"max": "1.3", "min": "1.2"}]',
            "TASK_STATE_COMPLETED",
        ], text
    finally:
        stop_server(srv, dbname)
