"""The agent-side helpers of the binary: `mcp --stdio`, `hook session-start`, `hook stop`, `watch`."""

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from conftest import MODES, binary, call, connect, deadline_witness, inbox_waiters, unique, until_waiting, wait_for_waiters
from test_conversation import TOOLS, drain


def helper_env(server, token, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIAISON_")}
    env.update({"LIAISON_URL": server.url, "LIAISON_TOKEN": token, "RUST_LOG": "warn"}, **extra)
    return env


@contextlib.asynccontextmanager
async def stdio_client(server, token, mode):
    params = StdioServerParameters(command=str(binary()), args=["mcp", "--stdio"], env=helper_env(server, token))
    async with Client(params, mode=mode) as client:
        yield client


def hook(server, token, which, consumer, stdin=""):
    return subprocess.run(
        [str(binary()), "hook", which, "--consumer", consumer],
        input=stdin, capture_output=True, text=True, timeout=30, env=helper_env(server, token),
    )


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_stdio_serves_the_same_tools_and_wakes_a_long_poll(server, tokens, mode):
    consumer = unique("stdio")
    async with stdio_client(server, tokens["bob"], mode) as bob, connect(server, tokens["alice"]) as alice:
        assert {t.name for t in (await bob.list_tools()).tools} == TOOLS
        me = await call(bob, "whoami")
        assert me["person"]["id"] == "bob" and me["agent"]["identity"].startswith("stdio@")
        cursor = await drain(bob, consumer)
        outcome = {}

        async def wait():
            outcome["page"] = await call(bob, "inbox", consumer=consumer, after=cursor, wait_s=20)

        with deadline_witness(server, wait_s=20) as witness:
            waiting = inbox_waiters(server)
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await until_waiting(server, waiting + 1)
                posted = await call(alice, "post", kind="question", channel="demo", body="via stdio?")
            assert not witness.ended.is_set(), "the long-poll ended at its deadline, not at the post"
        assert not outcome["page"]["timed_out"]
        assert [e["id"] for e in outcome["page"]["entries"]] == [posted["message"]]
        reply = await call(bob, "post", kind="reply", thread=posted["thread"], body="yes")
        assert reply["thread_state"] == "answered"
        failed = await bob.call_tool("thread", {"thread": "thr_" + "f" * 32})
        assert failed.is_error and "not_found" in failed.content[0].text


@pytest.mark.anyio
async def test_the_stop_hook_blocks_while_mail_is_unread(server, tokens):
    consumer = unique("stop")
    async with connect(server, tokens["alice"]) as alice, connect(server, tokens["bob"]) as bob:
        cursor = await drain(bob, consumer)
        done = hook(server, tokens["bob"], "stop", consumer, json.dumps({"stop_hook_active": False}))
        assert done.returncode == 0, done.stderr
        await call(alice, "post", kind="question", channel="demo", body="still there?")
        blocked = hook(server, tokens["bob"], "stop", consumer, json.dumps({"session_id": "x"}))
        assert blocked.returncode == 2
        assert len(blocked.stderr.strip().splitlines()) == 1 and "1 unread" in blocked.stderr
        again = hook(server, tokens["bob"], "stop", consumer, json.dumps({"stop_hook_active": True}))
        assert again.returncode == 0
        page = await call(bob, "inbox", consumer=consumer, after=cursor)
        await call(bob, "inbox", consumer=consumer, after=page["cursor"])
        assert hook(server, tokens["bob"], "stop", consumer).returncode == 0


@pytest.mark.anyio
async def test_the_session_start_hook_prints_context_json(server, tokens):
    consumer = unique("start")
    async with connect(server, tokens["alice"], agent="claude@alicemac:5") as alice, \
            connect(server, tokens["bob"]) as bob:
        await drain(bob, consumer)
        await call(alice, "presence_set", transition="working", task="Reviewing the bridge")
        asked = await call(alice, "post", kind="question", channel="demo", body="Can you review PR 12?")
        out = hook(server, tokens["bob"], "session-start", consumer, json.dumps({"source": "startup"}))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = doc["hookSpecificOutput"]["additionalContext"]
    assert "Bob Chen" in context and f'consumer "{consumer}"' in context
    assert "Unread inbox entries: 1." in context
    assert asked["thread"] in context and "Alice Martin" in context
    assert "claude@alicemac:5" in context and "Reviewing the bridge" in context


def test_watch_runs_its_command_once_per_burst(server, tokens, tmp_path):
    consumer = unique("watch")
    runs = tmp_path / "runs"
    runs.mkdir()
    # Written whole, then renamed: a run's file appears with its summary in it (a file that
    # `cat` is still writing would be read empty).
    script = f'cat > "{runs}/.partial-$$" && mv "{runs}/.partial-$$" "{runs}/run-$(date +%s%N).txt"'
    idle = inbox_waiters(server)
    watch = subprocess.Popen(
        [str(binary()), "watch", "--consumer", consumer, "--debounce-ms", "700", "--wait-s", "20",
         "--", "sh", "-c", script],
        stderr=subprocess.PIPE, text=True, env=helper_env(server, tokens["bob"]),
    )
    try:
        assert "waiting for entries" in watch.stderr.readline()
        wait_for_waiters(server, idle + 1)
        for i in range(3):
            server_post(server, tokens["alice"], f"burst {i}")
        wait_for(lambda: len(list(runs.glob("run-*"))) >= 1)
        # Back in its long-poll: the burst is behind it, and any other run for it came before.
        wait_for_waiters(server, idle + 1)
        files = sorted(runs.glob("run-*"))
        assert len(files) == 1
        summary = files[0].read_text()
        assert "3 new inbox entries" in summary and "Alice Martin" in summary and "burst 2" in summary
        server_post(server, tokens["alice"], "later")
        wait_for(lambda: len(list(runs.glob("run-*"))) >= 2)
        assert "1 new inbox entry" in sorted(runs.glob("run-*"))[-1].read_text()
    finally:
        watch.terminate()
        watch.wait(timeout=10)


def server_post(server, token, body):
    async def go():
        async with connect(server, token) as c:
            await call(c, "post", kind="announce", channel="demo", body=body)

    anyio.run(go)


def wait_for(condition, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_a_misconfigured_stop_hook_never_blocks_the_agent(server):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIAISON_")}
    no_token = subprocess.run([str(binary()), "hook", "stop"], input="{}", capture_output=True, text=True,
                              timeout=30, env={**env, "LIAISON_URL": server.url})
    assert no_token.returncode == 1 and "LIAISON_TOKEN" in no_token.stderr
    down = subprocess.run([str(binary()), "hook", "stop"], input="{}", capture_output=True, text=True,
                          timeout=30, env={**env, "LIAISON_URL": "http://127.0.0.1:9", "LIAISON_TOKEN": "lsn_x"})
    assert down.returncode == 0 and "could not check" in down.stderr
