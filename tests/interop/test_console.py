"""The web console and the single-use approval link in a real browser: Playwright for Python driving
Debian's chromium against `serve --demo`. A partner's A2A client (official `a2a-sdk`) delegates
`request-change` tasks and follows them; alice signs in with a login link, sees each approval appear
without reloading, allows one (alice's MCP agent, long-polling its inbox, wakes, claims and replies:
the task COMPLETES) and rejects another with a reason (the task ends REJECTED with it); bob decides a
third through an approval link. Screenshots of the approvals page at laptop and phone sizes go to
$LIAISON_TEST_ARTIFACTS (default tests/artifacts/), with the measured click-to-wake-up time.

Environment: LIAISON_CHROMIUM, the browser (default /usr/bin/chromium, Debian's `chromium`)."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path

import anyio
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientFactory
from a2a.types import GetTaskRequest, SubscribeToTaskRequest, TaskState
from playwright.async_api import async_playwright, expect

from conftest import ROOT, call, connect, inbox_waiters, start_server, stop_server, until_waiting
from test_a2a import client_config, send, user_message

CHROMIUM = os.environ.get("LIAISON_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("LIAISON_TEST_ARTIFACTS", ROOT / "tests" / "artifacts"))
LAPTOP = {"width": 1366, "height": 800}
PHONE = {"width": 390, "height": 844}


def change_request(text: str):
    m = user_message(text)
    m.metadata.update({"skill": "request-change"})
    return m


def pending_approval(srv, human_token: str, thread: str) -> dict:
    """The pending approval of `thread`, as a human who may decide it sees it (/api/v1)."""
    req = urllib.request.Request(f"{srv.url}/api/v1/approvals?pending=true",
                                 headers={"Authorization": f"Bearer {human_token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        approvals = json.loads(r.read())["approvals"]
    return next(a for a in approvals if a["thread"] == thread)


def approval_state(srv, human_token: str, approval_id: str) -> str:
    req = urllib.request.Request(f"{srv.url}/api/v1/approvals/{approval_id}",
                                 headers={"Authorization": f"Bearer {human_token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())["approval"]["state"]


def state_of(event):
    kind = event.WhichOneof("payload")
    if kind == "task":
        return event.task.status.state
    if kind == "status_update":
        return event.status_update.status.state
    return None


@pytest.mark.anyio
async def test_a_human_decides_in_the_console_and_the_waiting_agents_proceed():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (or set LIAISON_CHROMIUM)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    srv, dbname = start_server("--demo")
    try:
        demo = json.loads((srv.data_dir / "demo.json").read_text())
        partner, alice_agent = demo["partner"]["agent_token"], demo["alice"]["agent_token"]
        login_url = srv.admin("POST", "/admin/v1/login-links", {"person": "alice"})["url"]
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {partner}"}
        async with httpx.AsyncClient(headers=headers, timeout=60) as http, async_playwright() as pw:
            card = await A2ACardResolver(http, srv.url).get_agent_card()
            client = ClientFactory(client_config("JSONRPC", http, partner, streaming=False)).create(card)
            follower = ClientFactory(client_config("JSONRPC", http, partner, streaming=True)).create(card)
            browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                               args=["--no-sandbox", "--disable-dev-shm-usage"])
            laptop = await browser.new_context(viewport=LAPTOP)
            page = await laptop.new_page()

            # Sign in with the single-use link: a confirmation, then the approvals page.
            await page.goto(login_url)
            await page.get_by_role("button", name="Continue as Alice").click()
            # Nothing waits for her yet: signing in lands where her work is, her threads.
            await expect(page).to_have_url(f"{srv.url}/console/threads")
            await page.goto(f"{srv.url}/console/approvals")
            await expect(page.locator("h1")).to_contain_text("Pending approvals")
            await expect(page.locator("#live-status")).to_have_text("live", timeout=10_000)
            await page.evaluate("window.__sameDocument = true")
            # The link is spent.
            replay = await (await browser.new_context()).new_page()
            await replay.goto(login_url)
            await expect(replay.locator("h1")).to_contain_text("cannot be used")

            # The partner delegates a change and follows the task; the approval appears live.
            task = await send(client, change_request("Please bump the TLS library in the webhook service."))
            assert task.status.state == TaskState.TASK_STATE_SUBMITTED
            states = []

            async def follow(task_id):
                async for ev in follower.subscribe(SubscribeToTaskRequest(id=task_id)):
                    if (s := state_of(ev)) is not None:
                        states.append(s)

            approval = pending_approval(srv, demo["alice"]["human_token"], task.id)
            card_el = page.locator(f"#{approval['id']}")
            await expect(card_el).to_be_visible(timeout=10_000)
            assert await page.evaluate("window.__sameDocument === true"), "the page was reloaded"
            # With a decision waiting for her, the console's front door is Approvals.
            landing = await laptop.new_page()
            await landing.goto(f"{srv.url}/console")
            await expect(landing).to_have_url(f"{srv.url}/console/approvals")
            await landing.close()
            await expect(card_el).to_contain_text(approval["fingerprint"])
            await expect(card_el).to_contain_text("Please bump the TLS library")
            await expect(card_el).to_contain_text("impact: code")
            await page.screenshot(path=str(ARTIFACTS / "approvals-laptop.png"), full_page=True)
            phone = await browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True,
                                              device_scale_factor=2, storage_state=await laptop.storage_state())
            phone_page = await phone.new_page()
            await phone_page.goto(f"{srv.url}/console/approvals")
            await expect(phone_page.locator(f"#{approval['id']}")).to_be_visible()
            await phone_page.screenshot(path=str(ARTIFACTS / "approvals-phone.png"), full_page=True)

            async with connect(srv, alice_agent, agent="claude@alice-laptop:1") as agent:
                first = await call(agent, "inbox", consumer="claude")
                outcome = {}

                async def wait_for_notice():
                    page_ = await call(agent, "inbox", consumer="claude", after=first["cursor"], wait_s=30)
                    outcome["woke"] = time.monotonic()
                    outcome["page"] = page_

                waiting = inbox_waiters(srv)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(follow, task.id)
                    tg.start_soon(wait_for_notice)
                    await until_waiting(srv, waiting + 1)
                    clicked = time.monotonic()
                    await card_el.get_by_role("button", name="Allow once").click()
                    with anyio.fail_after(20):
                        while "woke" not in outcome:
                            await anyio.sleep(0.005)
                    wake_ms = (outcome["woke"] - clicked) * 1000
                    await expect(page.locator(".notice")).to_contain_text(f"Allowed {approval['id']} once")
                    await expect(page.locator(f"#{approval['id']}")).to_have_count(0)
                    notices = [e for e in outcome["page"]["entries"] if "approval_decided" in json.dumps(e)]
                    assert notices, outcome["page"]

                    # The agent claims (consuming the approval) and replies: the task completes.
                    await call(agent, "claim", thread=task.id)
                    await call(agent, "post", kind="reply", thread=task.id, body="Bumped to 0.23.5; PR #42.")
                    with anyio.fail_after(20):
                        while TaskState.TASK_STATE_COMPLETED not in states:
                            await anyio.sleep(0.05)
                    tg.cancel_scope.cancel()
            done = await client.get_task(GetTaskRequest(id=task.id))
            assert done.status.state == TaskState.TASK_STATE_COMPLETED
            assert TaskState.TASK_STATE_SUBMITTED in states
            (ARTIFACTS / "wakeup.txt").write_text(
                f"console 'Allow once' click -> MCP inbox long-poll returned approval_decided: {wake_ms:.1f} ms\n")
            print(f"click -> wake-up: {wake_ms:.1f} ms")

            # A second task is rejected with a reason; the client sees REJECTED with it.
            other = await send(client, change_request("Please drop the audit log table."))
            rejected = pending_approval(srv, demo["alice"]["human_token"], other.id)
            other_card = page.locator(f"#{rejected['id']}")
            await expect(other_card).to_be_visible(timeout=10_000)
            # Every request the page sends from now on, in the order sent.
            sent = []
            page.on("request", lambda r: sent.append((r.method, r.url, r.post_data or "")))
            reason = other_card.get_by_label("Reason")
            await other_card.get_by_role("button", name="Reject").click()
            # The browser refuses an empty reason (required): nothing was sent (a submission would
            # have started its request before the click returned), and the field says why.
            assert not [r for r in sent if r[0] == "POST"], sent
            assert await reason.evaluate("el => el.validity.valueMissing"), "an empty reason passed validation"
            await expect(other_card).to_be_visible()
            await reason.fill("The audit log is append-only by design.")
            await other_card.get_by_role("button", name="Reject").click()
            await expect(page.locator(".notice")).to_contain_text(f"Rejected {rejected['id']}")
            # The one decision sent is the second click's, with its reason: the first sent nothing.
            posts = [(url, data) for (method, url, data) in sent if method == "POST"]
            assert len(posts) == 1 and "append-only" in posts[0][1], posts
            assert approval_state(srv, demo["alice"]["human_token"], rejected["id"]) == "rejected"
            ended = await client.get_task(GetTaskRequest(id=other.id))
            assert ended.status.state == TaskState.TASK_STATE_REJECTED
            assert "The audit log is append-only by design." in ended.status.message.parts[0].text

            # A third is decided by bob through a single-use approval link, without a session.
            third = await send(client, change_request("Please rotate the staging database password."))
            decided = pending_approval(srv, demo["bob"]["human_token"], third.id)
            link = srv.admin("POST", f"/admin/v1/approvals/{decided['id']}/link", {"for": "bob"})
            assert link["link"]["person"] == "bob"
            stranger = await browser.new_context(viewport=PHONE, is_mobile=True)
            link_page = await stranger.new_page()
            await link_page.goto(link["url"])
            await expect(link_page.locator("h1")).to_contain_text("Decide this request")
            await expect(link_page.locator(f"#{decided['id']}")).to_contain_text(decided["fingerprint"])
            await expect(link_page.locator(f"#{decided['id']}")).to_contain_text("rotate the staging database")
            await link_page.screenshot(path=str(ARTIFACTS / "approval-link-phone.png"), full_page=True)
            # Opening it decided nothing.
            assert pending_approval(srv, demo["bob"]["human_token"], third.id)["state"] == "pending"
            await link_page.get_by_role("button", name="Allow once").click()
            await expect(link_page.locator("h1")).to_have_text("Allowed once")
            await link_page.goto(link["url"])
            await expect(link_page.locator("body")).to_contain_text("already used")
            assert all(a["thread"] != third.id for a in
                       json.loads(urllib.request.urlopen(urllib.request.Request(
                           f"{srv.url}/api/v1/approvals?pending=true",
                           headers={"Authorization": f"Bearer {demo['bob']['human_token']}"})).read())["approvals"])
            # The audit log names each path.
            audit = srv.admin("GET", "/admin/v1/audit?event=decided")
            vias = [e.get("via") for e in audit["entries"] if e["event"] == "decided"]
            assert vias == ["console", "console", "link"], audit

            await browser.close()
            await client.close()
            await follower.close()
    finally:
        stop_server(srv, dbname)
