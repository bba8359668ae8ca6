"""The console as the humans' workspace, tried as a new user would in headless Chromium (Playwright,
laptop and phone sizes, screenshots kept in $LIAISON_TEST_ARTIFACTS): alice signs in, connects a new
agent from the "Connect" page (the MCP client gets only what the page shows), writes "Replace the
pricing table" to bob with a file; bob's agent (the official `mcp` SDK) long-polls, reads it as
written by alice in person, claims it and replies with a structured result; alice's thread page
shows the reply, its result and bob's receipt without a reload. Then alice revokes her token: her
agent's waiting long-poll ends at once with `token_revoked`, and the next call is refused."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import anyio
import httpx
import pytest
from playwright.async_api import async_playwright, expect

from conftest import (ARTIFACTS, CHROMIUM, LAPTOP, binary, call, connect, deadline_witness, inbox_waiters, shots,
                      start_server, stop_server, until_waiting)



def hook(srv, token: str, agent: str, payload: dict) -> None:
    """Runs `liaison hook tool-use` as Claude Code would: the hook input on stdin, exit 0, silent."""
    env = {**os.environ, "LIAISON_URL": srv.url, "LIAISON_TOKEN": token, "LIAISON_AGENT": agent}
    done = subprocess.run([str(binary()), "hook", "tool-use"], input=json.dumps(payload), text=True,
                          capture_output=True, env=env, timeout=30)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == "", done


@pytest.mark.anyio
async def test_alice_connects_an_agent_writes_to_bob_watches_the_answer_and_revokes():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (or set LIAISON_CHROMIUM)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    srv, dbname = start_server("--demo")
    try:
        demo = json.loads((srv.data_dir / "demo.json").read_text())
        login_url = srv.admin("POST", "/admin/v1/login-links", {"person": "alice"})["url"]
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                               args=["--no-sandbox", "--disable-dev-shm-usage"])
            laptop = await browser.new_context(viewport=LAPTOP)
            page = await laptop.new_page()
            await page.goto(login_url)
            await page.get_by_role("button", name="Continue as Alice").click()
            # Nothing to decide and no session yet: signing in lands on her threads.
            await expect(page).to_have_url(f"{srv.url}/console/threads")

            # Connect an agent: the token and the settings are shown once.
            await page.get_by_role("link", name="Connect").click()
            await page.get_by_label("What it is").fill("claude on alice-laptop")
            await page.locator("#connection").fill("alice-laptop")
            await page.get_by_label("Expires after").select_option("7")
            await page.get_by_role("button", name="Connect an agent").click()
            secret = (await page.locator("#secret").text_content()).strip()
            http_settings = await page.locator("#claude-http").text_content()
            await page.screenshot(path=str(ARTIFACTS / "connect-issued-laptop.png"), full_page=True)
            # What the page shows is what the client needs: the real URL and the header.
            mcp_url = re.search(r"(http://\S+/mcp)", http_settings).group(1)
            header = re.search(r'"Authorization: Bearer (\S+)"', http_settings).group(1)
            assert mcp_url == srv.mcp_url and header == secret
            assert srv.url in await page.locator("#codex").text_content()
            hooks = json.loads(await page.locator("#hooks").text_content())
            assert hooks["env"] == {"LIAISON_SERVER": srv.url, "LIAISON_TOKEN": secret,
                                    "LIAISON_CONSUMER": "alice-laptop"}
            assert "liaison hook stop --consumer alice-laptop" in json.dumps(hooks["hooks"]["Stop"])
            assert "liaison hook tool-use" in json.dumps(hooks["hooks"]["PostToolUse"])
            # The tool checks (SPEC §5b): every tool that may change something, waiting up to 10 min.
            [pre] = hooks["hooks"]["PreToolUse"]
            assert pre["hooks"][0]["command"] == "liaison hook pre-tool-use --timeout 600"
            assert pre["hooks"][0]["timeout"] == 600 and "Bash" in pre["matcher"]
            assert "permission-request" in json.dumps(hooks["hooks"]["PermissionRequest"])
            channel = await page.locator("#claude-channel").text_content()
            assert "liaison mcp --stdio --channel" in channel and secret in channel
            codex_hooks = json.loads((await page.locator("#codex-hooks").text_content()).split("\n", 1)[1])
            assert "pre-tool-use" in json.dumps(codex_hooks["hooks"]["PreToolUse"])
            # Reloading does not show the secret again.
            await page.goto(f"{srv.url}/console/agents")
            await expect(page.locator("#secret")).to_have_count(0)
            await expect(page.locator(".token").first).to_contain_text("claude on alice-laptop")
            await expect(page.locator(".token").first).to_contain_text("never used")

            async with connect(srv, secret, agent="claude@alice-laptop:1") as mine:
                me = await call(mine, "whoami")
                assert me["person"]["id"] == "alice"
                await page.reload()
                await expect(page.locator(".token").first).to_contain_text("last used")

                # Write to bob, with a file and context.
                await page.get_by_role("link", name="Write").click()
                await page.get_by_label("Request: something should be done").check()
                await page.get_by_label("Effect of a request").select_option("none")
                await page.locator('input[name="to"][value="bob"]').check()
                await page.get_by_label("Subject").fill("Replace the pricing table")
                await page.get_by_label("Message (Markdown)").fill("Replace the pricing table with the attached one.")
                await page.get_by_label("Files").set_input_files(
                    files=[{"name": "pricing.csv", "mimeType": "text/csv", "buffer": b"plan,eur\npro,12\n"}])
                await page.screenshot(path=str(ARTIFACTS / "compose-laptop.png"), full_page=True)
                await page.get_by_role("button", name="Send").click()
                await expect(page.locator("h1")).to_have_text("Replace the pricing table")
                thread_url = page.url
                thread = thread_url.rsplit("/", 1)[1]
                await expect(page.locator("#live-status")).to_have_text("live", timeout=10_000)
                await page.evaluate("window.__sameDocument = true")
                first = page.locator(".message").first
                await expect(first).to_contain_text("in person")
                await expect(first.locator(".receipts")).to_contain_text("Bob: delivered")
                await expect(first.get_by_role("link", name="pricing.csv")).to_be_visible()

                # bob's agent reads it, labelled as alice's own words, claims it and replies.
                async with connect(srv, demo["bob"]["agent_token"], agent="claude@bob-desk:1") as bob:
                    got = await call(bob, "inbox", consumer="claude", wait_s=5)
                    entry = next(e for e in got["entries"] if e.get("thread") == thread)
                    assert entry["label"]["text"].startswith("Data written by **Alice** in person")
                    await expect(first.locator(".receipts")).to_contain_text("read", timeout=10_000)
                    await call(bob, "claim", thread=thread)
                    # Her page names bob's agent by its connection; what it declared shows on hover.
                    claim = page.locator(".timeline .event.claim")
                    await expect(claim).to_contain_text("Bob's agent", timeout=10_000)
                    await expect(claim.locator(".connection")).to_have_attribute(
                        "title", re.compile("claude@bob-desk:1"))
                    # bob's Claude Code hook reports two tool uses; alice sees them live.
                    hook(srv, demo["bob"]["agent_token"], "claude@bob-desk:1", {
                        "hook_event_name": "PostToolUse", "cwd": "/work/site", "tool_name": "Edit",
                        "tool_input": {"file_path": "/work/site/pricing.md", "old_string": "old", "new_string": "new"},
                        "tool_response": {"success": True}})
                    hook(srv, demo["bob"]["agent_token"], "claude@bob-desk:1", {
                        "hook_event_name": "PostToolUse", "cwd": "/work/site", "tool_name": "Bash",
                        "tool_input": {"command": "npm run build -- --token=SECRET"}, "tool_response": {}})
                    notes = page.locator(".timeline .event.note")
                    await expect(notes).to_have_count(2, timeout=10_000)
                    await expect(notes.nth(0)).to_contain_text("Edit pricing.md: ok")
                    await expect(notes.nth(1)).to_contain_text("Bash npm: ok")
                    assert "SECRET" not in await page.content()
                    # The agent asks; alice answers from the console; the agent's long-poll gets it.
                    await call(bob, "post", kind="question", thread=thread, body="EUR or USD prices?")
                    await expect(page.locator(".message").nth(1)).to_contain_text("EUR or USD prices?", timeout=10_000)
                    await call(bob, "inbox", consumer="claude", after=got["cursor"])
                    mark = await call(bob, "inbox", consumer="claude")
                    answer = {}

                    async def wait_for_answer():
                        answer["page"] = await call(bob, "inbox", consumer="claude", after=mark["cursor"], wait_s=30)

                    # The poll waits (subscribed) before she clicks, and it ends while a witness due
                    # before its deadline still waits: the console's post woke it, not a re-read at
                    # its deadline.
                    with deadline_witness(srv, wait_s=30) as witness:
                        waiting = inbox_waiters(srv)
                        async with anyio.create_task_group() as tg:
                            tg.start_soon(wait_for_answer)
                            await until_waiting(srv, waiting + 1)
                            await page.get_by_label("Reply as yourself").fill("EUR, as in the attached file.")
                            await page.get_by_role("button", name="Reply").click()
                            await expect(page.locator(".message").nth(2)).to_contain_text("EUR, as in the attached file.")
                        assert not witness.ended.is_set(), "bob's long-poll ended at its deadline, not at alice's reply"
                    assert not answer["page"]["timed_out"]
                    entry = answer["page"]["entries"][0]
                    assert entry["thread"] == thread and entry["kind"] == "reply"
                    assert entry["label"]["text"].startswith("Data written by **Alice** in person")
                    got = answer["page"]
                    await page.evaluate("window.__sameDocument = true")
                    await call(bob, "post", kind="reply", thread=thread, body="Replaced; see the PR.",
                               result={"status": "done", "summary": "Replaced the pricing table",
                                       "changed": ["site/pricing.md"],
                                       "checks": [{"name": "site build", "outcome": "passed"}],
                                       "links": [{"url": "https://git.example.com/pr/42", "title": "PR 42"}]})
                    await call(bob, "inbox", consumer="claude", after=got["cursor"])
                    # The agent side sees the same receipts and result (MCP `thread`).
                    seen = await call(bob, "thread", thread=thread)
                    receipts = seen["messages"][0]["receipts"]
                    assert receipts[0]["person"] == "bob", receipts
                    assert receipts[0]["consumers"][0]["consumer"] == "claude"
                    assert "acked_at" in receipts[0]["consumers"][0]
                    assert seen["messages"][0]["written_by"] == "human"
                    assert seen["messages"][3]["result"]["checks"] == [{"name": "site build", "outcome": "passed"}]
                reply = page.locator(".message").nth(3)
                await expect(reply).to_contain_text("Replaced; see the PR.", timeout=10_000)
                await expect(reply.locator(".result")).to_contain_text("Replaced the pricing table")
                await expect(reply.locator(".result")).to_contain_text("site build: passed")
                await expect(first.locator(".receipts")).to_contain_text("acknowledged")
                assert await page.evaluate("window.__sameDocument === true"), "the page was reloaded"
                await page.screenshot(path=str(ARTIFACTS / "thread-laptop.png"), full_page=True)
                await shots(browser, laptop, thread_url, "thread")
                # Activity: this week's row counts alice's thread, answered; the chart is drawn.
                await page.get_by_role("link", name="Activity").click()
                await page.get_by_role("link", name="#demo").click()
                row = page.locator("#chart-threads tbody tr").last
                await expect(row.locator("td")).to_have_text(["1", "1", "0"])
                await expect(page.locator("#chart-threads svg rect")).to_have_count(2)
                await expect(page.locator("#chart-first-reply tbody tr").last.locator("td").first).to_contain_text(" s")
                await shots(browser, laptop, f"{srv.url}/console/activity?channel=demo", "activity")
                # All her channels together, with the totals since a date as each table's last line.
                await page.get_by_role("link", name="All my channels").click()
                await expect(page.get_by_role("link", name="All my channels")).to_have_attribute(
                    "aria-current", "page")
                await expect(page.locator("#chart-threads tfoot th")).to_contain_text("since ")
                await expect(page.locator("#chart-threads tbody tr").last.locator("td").first).not_to_have_text("0")
                await shots(browser, laptop, f"{srv.url}/console/activity?scope=all", "activity-all")
                await page.goto(thread_url)
                await shots(browser, laptop, f"{srv.url}/console/compose?channel=demo", "compose")

                # A refused answer shows its reason by the form and posts nothing.
                await page.get_by_label("Reply as yourself").fill("\u0000")
                await page.get_by_role("button", name="Reply").click()
                await expect(page.locator(".answer .field-error")).to_be_visible()
                await page.goto(thread_url)
                await expect(page.locator(".message")).to_have_count(4)

                # Revoke: her agent's waiting long-poll ends at once.
                outcome = {}
                # Her agent reads what is there (bob's reply), then waits for more.
                drained = await call(mine, "inbox", consumer="claude", limit=100)
                assert any(e.get("thread") == thread for e in drained["entries"])

                async def wait():
                    r = await mine.call_tool("inbox", {"consumer": "claude", "wait_s": 40,
                                                       "after": drained["cursor"]})
                    outcome["result"] = r

                async with anyio.create_task_group() as tg:
                    tg.start_soon(wait)
                    row = page.locator(".token").filter(has_text="claude on alice-laptop")
                    # The signal that the poll waits: the page counts it (a start publishes
                    # nothing, so the page is asked again until it shows).
                    with anyio.fail_after(20):
                        while True:
                            await page.goto(f"{srv.url}/console/agents")
                            if "1 long-poll(s) waiting" in (await row.text_content() or ""):
                                break
                            await anyio.sleep(0.05)
                    await shots(browser, laptop, f"{srv.url}/console/agents", "connect")
                    await row.get_by_role("button", name="Revoke").click()
                    with anyio.fail_after(20):
                        while "result" not in outcome:
                            await anyio.sleep(0.02)
                r = outcome["result"]
                assert r.is_error and r.structured_content["error"]["code"] == "token_revoked", r
                await expect(page.locator(".token").filter(has_text="claude on alice-laptop")).to_contain_text("revoked")
            # A new connection with the old code is refused: 401, `token_revoked`.
            async with httpx.AsyncClient(timeout=10) as http:
                refused = await http.post(srv.mcp_url, headers={
                    "Authorization": f"Bearer {secret}", "Accept": "application/json, text/event-stream",
                    "Content-Type": "application/json"}, json={
                    "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                        "protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"}}})
            assert refused.status_code == 401, refused.text
            assert "token_revoked" in refused.text, refused.text
            await browser.close()
    finally:
        stop_server(srv, dbname)


@pytest.mark.anyio
async def test_an_a2a_client_following_a_task_sees_the_agents_progress_as_working_updates():
    from a2a.client import A2ACardResolver, ClientFactory
    from a2a.types import GetTaskRequest, SubscribeToTaskRequest, TaskState
    from google.protobuf import json_format
    from test_a2a import client_config, send, user_message

    srv, dbname = start_server("--demo")
    try:
        demo = json.loads((srv.data_dir / "demo.json").read_text())
        partner = demo["partner"]["agent_token"]
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {partner}"}
        async with httpx.AsyncClient(headers=headers, timeout=60) as http:
            card = await A2ACardResolver(http, srv.url).get_agent_card()
            client = ClientFactory(client_config("JSONRPC", http, partner, streaming=False)).create(card)
            follower = ClientFactory(client_config("JSONRPC", http, partner, streaming=True)).create(card)
            m = user_message("Please rotate the staging certificate.")
            m.metadata.update({"skill": "handoff"})
            task = await send(client, m)
            updates = []
            subscribed = anyio.Event()

            async def follow():
                async for ev in follower.subscribe(SubscribeToTaskRequest(id=task.id)):
                    # The stream opens with the task as it stands: from then on nothing is missed.
                    subscribed.set()
                    if ev.WhichOneof("payload") == "status_update":
                        st = ev.status_update.status
                        text = " ".join(p.text for p in st.message.parts) if st.HasField("message") else ""
                        updates.append((st.state, text))

            async with connect(srv, demo["alice"]["agent_token"], agent="claude@alice-laptop:1") as agent, \
                    anyio.create_task_group() as tg:
                tg.start_soon(follow)
                with anyio.fail_after(10):
                    await subscribed.wait()
                await call(agent, "claim", thread=task.id)
                hook(srv, demo["alice"]["agent_token"], "claude@alice-laptop:1", {
                    "hook_event_name": "PostToolUse", "cwd": "/srv", "tool_name": "Write",
                    "tool_input": {"file_path": "/srv/certs/staging.pem", "content": "-----BEGIN PRIVATE KEY-----"}})
                hook(srv, demo["alice"]["agent_token"], "claude@alice-laptop:1", {
                    "hook_event_name": "PostToolUseFailure", "cwd": "/srv", "tool_name": "Bash",
                    "tool_input": {"command": "systemctl reload nginx"}, "error": "exit 1"})
                with anyio.fail_after(20):
                    while sum("Progress:" in t for _, t in updates) < 2:
                        await anyio.sleep(0.05)
                tg.cancel_scope.cancel()
            progress = [(s_, t) for s_, t in updates if "Progress:" in t]
            assert progress == [
                (TaskState.TASK_STATE_WORKING, "Progress: Write certs/staging.pem: ok"),
                (TaskState.TASK_STATE_WORKING, "Progress: Bash systemctl: failed"),
            ], updates
            assert not any("PRIVATE KEY" in t for _, t in updates)
            # The reply's structured result reaches the client as a data part of its artifact.
            async with connect(srv, demo["alice"]["agent_token"], agent="claude@alice-laptop:1") as agent:
                await call(agent, "post", kind="reply", thread=task.id, body="Rotated; nginx reloaded by hand.",
                           result={"status": "partial", "summary": "Certificate rotated, reload failed once",
                                   "checks": [{"name": "nginx -t", "outcome": "passed"}]})
            done = await client.get_task(GetTaskRequest(id=task.id))
            assert done.status.state == TaskState.TASK_STATE_COMPLETED
            parts = done.artifacts[-1].parts
            assert parts[0].text == "Rotated; nginx reloaded by hand."
            data = [p for p in parts if p.media_type == "application/vnd.liaison.result+json"]
            assert len(data) == 1, parts
            result = json_format.MessageToDict(data[0].data)
            assert result["status"] == "partial" and result["checks"][0]["outcome"] == "passed", result
            await client.close()
            await follower.close()
    finally:
        stop_server(srv, dbname)
