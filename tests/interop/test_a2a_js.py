"""A2A with a second real client: the official JavaScript SDK (`@a2a-js/sdk`, pinned in
tests/js-a2a/package.json) drives the interop scenarios against `serve --demo` on JSON-RPC,
HTTP+JSON and gRPC (tests/js-a2a/scenarios.mjs): the card's signature, the extended card, send,
get, follow-up, stream and resubscribe, list, cancel, direct answers, push configs and their
deliveries, and the errors as the SDK surfaces them. The team's side is alice's agent over MCP
(the official Python SDK, as in test_a2a.py), played here when the script asks for it.

Needs Node >= 20 and `npm ci --prefix tests/js-a2a` (scripts/test.sh runs it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import anyio
import pytest
from anyio.streams.text import TextReceiveStream

from conftest import ROOT, call, connect, start_server, stop_server

JS = ROOT / "tests" / "js-a2a"
# What marks the script's requests and report on its stdout (team.mjs).
PROTOCOL = "liaison-team "
# What each binding's run must report, in order: a check that silently did not run fails the test.
CHECKS = [
    "card resolves and its signature verifies",
    "extended card over the binding, signed",
    "send, get with history, follow-up, completion",
    "errors: unknown task, ended task, not cancelable, malformed requests",
    "a member token is refused on A2A, its task not revealed",
    "cancel (idempotent) and list with paging and a status filter",
    "stream and resubscribe see the same events in order",
    "a stream ends at INPUT_REQUIRED; a new subscription follows to the end",
    "a conversational skill answers with a Message, blocking and streaming",
    "push configs: set inline, create, get, list, delete; a private address refused",
]


def node() -> str:
    exe = shutil.which("node")
    if exe is None:
        pytest.fail("the JavaScript A2A scenarios need Node.js >= 20 (`node` on PATH)")
    major = int(subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout[1:].split(".")[0])
    if major < 20:
        pytest.fail(f"the JavaScript A2A scenarios need Node.js >= 20 (@a2a-js/sdk's engines), found {major}")
    if not (JS / "node_modules" / "@a2a-js" / "sdk").is_dir():
        pytest.fail("the JavaScript SDK is not installed: run `npm ci --prefix tests/js-a2a` (scripts/test.sh does)")
    return exe


@pytest.fixture
def push_server():
    """`serve --demo` whose outbox may deliver to loopback (the scenarios' push receiver)."""
    os.environ["LIAISON_OUTBOX__ALLOW"] = "127.0.0.1"
    try:
        srv, dbname = start_server("--demo")
    finally:
        del os.environ["LIAISON_OUTBOX__ALLOW"]
    yield srv
    stop_server(srv, dbname)


async def team(mcp, request: dict, seen: set[str]):
    """Does what the script asks of the team, as alice's agent; the answer's `result`."""
    if request["op"] == "post":
        await call(mcp, "post", kind=request["kind"], thread=request["task"], body=request["body"])
        return None
    if request["op"] == "answer_next":
        # The party's message saying `words`, in a thread not answered yet.
        with anyio.fail_after(30):
            while True:
                page = await call(mcp, "inbox", consumer="js", wait_s=5)
                await call(mcp, "inbox", consumer="js", after=page["cursor"], wait_s=0)
                entry = next((e for e in page["entries"] if e.get("type") == "message" and e.get("author") == "partner"
                              and e.get("body") == request["words"] and e["thread"] not in seen), None)
                if entry:
                    break
        seen.add(entry["thread"])
        if request["claim"]:
            await call(mcp, "claim", thread=entry["thread"])
        await call(mcp, "post", kind="reply", thread=entry["thread"], body=request["body"])
        return entry["thread"]
    raise AssertionError(f"unknown request {request}")


@pytest.mark.anyio
@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_the_javascript_sdk_drives_the_scenarios(binding, push_server):
    exe = node()
    srv = push_server
    demo = json.loads((srv.data_dir / "demo.json").read_text())
    env = {**os.environ, "LIAISON_PARTY_TOKEN": demo["partner"]["agent_token"],
           "LIAISON_MEMBER_TOKEN": demo["alice"]["agent_token"]}
    cmd = [exe, str(JS / "scenarios.mjs"), "--url", srv.url, "--binding", binding]
    report, seen, stderr, stdout = None, set(), [], []
    async with connect(srv, demo["alice"]["agent_token"], agent="claude@alice:1") as mcp:
        async with await anyio.open_process(cmd, env=env, cwd=JS) as proc:

            async def drain():
                async for chunk in TextReceiveStream(proc.stderr):
                    stderr.append(chunk)

            try:
                with anyio.fail_after(240):
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(drain)
                        buffer = ""
                        async for chunk in TextReceiveStream(proc.stdout):
                            buffer += chunk
                            while "\n" in buffer:
                                line, buffer = buffer.split("\n", 1)
                                if not line.startswith(PROTOCOL):
                                    stdout.append(line)  # the SDK's own logging
                                    continue
                                message = json.loads(line.removeprefix(PROTOCOL))
                                if message.get("done"):
                                    report = message
                                    continue
                                try:
                                    answer = {"id": message["id"], "result": await team(mcp, message, seen)}
                                except Exception as e:  # noqa: BLE001 - told to the script, which fails its check
                                    answer = {"id": message["id"], "error": f"{type(e).__name__}: {e}"}
                                await proc.stdin.send((json.dumps(answer) + "\n").encode())
                        await proc.wait()
            except TimeoutError:
                raise AssertionError(f"the JavaScript scenarios on {binding} did not end in 240 s:\n"
                                     + "".join(stderr)) from None
            finally:
                if proc.returncode is None:
                    proc.kill()  # a hung script must not hang the suite
    log = "".join(stderr) + "\n".join(stdout)
    assert proc.returncode == 0, f"the JavaScript scenarios failed on {binding}:\n{log}"
    assert report is not None and report["checks"] == CHECKS, f"{report}\n{log}"
