"""Refused console forms, tried in headless Chromium (Playwright) as a member and an admin would:
every refused form comes back with everything she typed (the same channel's form, her recipients,
kind and context, a note naming the files to attach again; a new channel's name, description and
members; a token's expiry, scopes and description; a policy with her values, not the stored
ones); a reply refused on a closed thread keeps her text and sends it, in plain words, as a new
thread referring to the closed one; a form's address opened with GET leads to its page, and tells
nothing of admin pages to anyone else (an unknown page's answer, an HTML page keeping the
navigation); text no backend can store (U+0000) is refused on every admin and console input with
nothing changed; and every page, member and admin, fits a 390 px phone with a long unbreakable
display name on it. Screenshots in $LIAISON_TEST_ARTIFACTS. Both backends
(LIAISON_TEST_DATABASE_URL)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from playwright.async_api import async_playwright, expect

from conftest import ARTIFACTS, CHROMIUM, LAPTOP, PHONE, shots, start_server, stop_server

pytestmark = pytest.mark.anyio

THREAD = re.compile(r"/console/threads/[^/]+$|/console/threads/[^/]+#")
LONG_NAME = "dominique.vandenberghe.oosterhout.longname@exampleengineeringcompany.com"


def raw(srv, method: str, path: str, body: bytes | None = None, token: str | None = None,
        content_type: str = "application/json", cookie: str | None = None) -> tuple[int, str]:
    headers = {"Content-Type": content_type}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if cookie:
        headers["Cookie"] = cookie
    req = urllib.request.Request(f"{srv.url}{path}", data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.fixture
def demo():
    srv, db = start_server("--demo")
    try:
        srv.person("dominique", LONG_NAME)
        srv.channel("ops", ["alice", "bob", "dominique"])
        yield srv, json.loads((srv.data_dir / "demo.json").read_text())
    finally:
        stop_server(srv, db)


async def signed_in(browser, srv, person: str, name: str, admin: bool = False):
    ctx = await browser.new_context(viewport=LAPTOP)
    page = await ctx.new_page()
    body = {"person": person, "admin": True} if admin else {"person": person}
    await page.goto(srv.admin("POST", "/admin/v1/login-links", body)["url"])
    await page.get_by_role("button", name=f"Continue as {name}").click()
    await expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    return ctx, page


async def test_a_refused_message_comes_back_whole_in_its_own_channel(demo, tmp_path):
    srv, _ = demo
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * (4 * 1024 * 1024 + 1))
    small = tmp_path / "notes.txt"
    small.write_text("notes")
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                           args=["--no-sandbox", "--disable-dev-shm-usage"])
        ctx, page = await signed_in(browser, srv, "alice", "Alice")
        # Written in #ops (not the first channel), with everything the form takes.
        await page.goto(f"{srv.url}/console/compose?channel=ops")
        await page.get_by_label("Request: something should be done").check()
        await page.get_by_label("Effect of a request").select_option("none")
        await page.get_by_role("checkbox", name="Bob").check()
        await page.get_by_label("Subject").fill("Rotate the staging certificates")
        await page.get_by_label("Message (Markdown)").fill("Please rotate them **today**.\nThanks")
        await page.locator("summary").click()
        await page.get_by_label("Link").fill("https://wiki.example/certs")
        await page.get_by_label("Selected text").fill("expires on Monday")
        await page.get_by_label("Files").set_input_files([str(small), str(big)])
        await page.get_by_role("button", name="Send").click()
        await expect(page.get_by_role("alert")).to_contain_text("larger than")
        # The same channel's form (Send posts there again), with everything she typed.
        await expect(page.get_by_text("Posted in #ops")).to_be_visible()
        assert await page.locator("input[name=channel]").get_attribute("value") == "ops"
        await expect(page.get_by_label("Request: something should be done")).to_be_checked()
        await expect(page.get_by_role("checkbox", name="Bob")).to_be_checked()
        await expect(page.get_by_role("checkbox", name=LONG_NAME)).not_to_be_checked()
        await expect(page.get_by_label("Subject")).to_have_value("Rotate the staging certificates")
        await expect(page.get_by_label("Message (Markdown)")).to_have_value("Please rotate them **today**.\nThanks")
        await expect(page.get_by_label("Link")).to_have_value("https://wiki.example/certs")
        await expect(page.get_by_label("Selected text")).to_have_value("expires on Monday")
        await expect(page.get_by_text("Attach again: notes.txt, big.bin")).to_be_visible()
        await page.screenshot(path=str(ARTIFACTS / "compose-refused-laptop.png"), full_page=True)
        # Sent again without the large file: posted in #ops to bob.
        await page.get_by_label("Files").set_input_files([str(small)])
        await page.get_by_role("button", name="Send").click()
        await expect(page).to_have_url(THREAD)
        await expect(page.locator("main")).to_contain_text("#ops")
        await browser.close()


async def test_a_reply_refused_on_a_closed_thread_keeps_her_text_and_continues_in_a_new_thread(demo):
    srv, d = demo
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                           args=["--no-sandbox", "--disable-dev-shm-usage"])
        ctx, page = await signed_in(browser, srv, "alice", "Alice")
        await page.goto(f"{srv.url}/console/compose?channel=demo")
        await page.get_by_label("Subject").fill("Where is the release checklist?")
        await page.get_by_label("Message (Markdown)").fill("Link please")
        await page.get_by_role("button", name="Send").click()
        await expect(page).to_have_url(THREAD)
        thread_url = page.url.split("#")[0]
        thread = thread_url.rsplit("/", 1)[1]
        # She types a reply while the thread is closed elsewhere.
        await page.get_by_label("Reply as yourself").fill("Found it myself: docs/release.md")
        other = await ctx.new_page()
        await other.goto(thread_url)
        await other.get_by_role("button", name="Close").click()
        await page.get_by_role("button", name="Reply").click()
        alert = page.get_by_role("alert")
        await expect(alert).to_contain_text("closed before your answer was sent")
        await expect(alert).not_to_contain_text("refers_to")
        kept = page.get_by_label("Your text, as a new question")
        await expect(kept).to_have_value("Found it myself: docs/release.md")
        await page.screenshot(path=str(ARTIFACTS / "thread-closed-refused-laptop.png"), full_page=True)
        # The closed thread also offers Write, prefilled to refer to it.
        link = page.get_by_role("link", name="write a new thread referring to this one")
        href = await link.get_attribute("href")
        await page.get_by_role("button", name="Send as a new thread").click()
        await expect(page).to_have_url(re.compile(r"/console/threads/(?!" + re.escape(thread) + r")[^/#]+"))
        new_thread = page.url.split("#")[0].rsplit("/", 1)[1]
        seen = srv.admin("GET", f"/api/v1/threads/{new_thread}", token=d["alice"]["human_token"])
        first = seen["messages"][0]
        first = first.get("message", first)
        assert first.get("refers_to"), first
        await page.goto(f"{srv.url}{href}")
        await expect(page.get_by_text("A new thread referring to")).to_be_visible()
        await expect(page.get_by_role("link", name="Where is the release checklist?")).to_be_visible()
        await shots(browser, ctx, f"{srv.url}{href}", "compose-refers")
        await browser.close()


async def test_a_live_update_arriving_while_she_types_never_takes_her_text(demo):
    """The live swap's race, made certain: the page's refresh is already on its way (its answer
    held back) when she starts typing a reason in a card of the live part; the answer lands while
    her text is in the field. Her text stays; the swap waits until she is done (the field empty and
    left), then shows what changed."""
    import asyncio
    srv, d = demo
    bob = srv.token("bob")["secret"]

    def request(body: str) -> None:
        srv.admin("POST", "/api/v1/messages", {"kind": "request", "channel": "ops", "impact": "code",
                                               "to": ["alice"], "body": body}, token=bob)

    request("Deploy the release branch")
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                           args=["--no-sandbox", "--disable-dev-shm-usage"])
        ctx, page = await signed_in(browser, srv, "alice", "Alice")
        url = f"{srv.url}/console/approvals"
        await page.goto(url)
        await expect(page.locator("#live-status")).to_have_text("live", timeout=10_000)
        await expect(page.locator("#live")).to_contain_text("Deploy the release branch")
        await page.evaluate("window.__sameDocument = true")
        held, release = asyncio.Event(), asyncio.Event()

        async def hold(route):
            if route.request.resource_type == "fetch":
                held.set()
                await release.wait()
            await route.continue_()

        await page.route(url, hold)
        # A second request: the stream says "change", the refresh leaves and is held.
        request("Rotate the database password")
        await asyncio.wait_for(held.wait(), 10)
        reason = page.locator("#live textarea").first
        await reason.fill("Not before the freeze ends")
        await page.locator("h1").click()  # she looks away: the field is left, not empty
        release.set()
        await page.wait_for_timeout(500)
        await expect(reason).to_have_value("Not before the freeze ends")
        await expect(page.locator("#live")).not_to_contain_text("Rotate the database password")
        # Done with it (emptied and left): the swap that waited now shows the second request.
        await page.unroute(url)
        await reason.fill("")
        await page.locator("h1").click()
        await expect(page.locator("#live")).to_contain_text("Rotate the database password")
        assert await page.evaluate("window.__sameDocument === true"), "the page was reloaded"
        await browser.close()


async def connected_row(page, srv, what: str, name: str):
    """Connects an agent of hers named `name` on the agents page, opens the page again with its
    live stream connected, and returns the connection's row."""
    await page.goto(f"{srv.url}/console/agents")
    await page.get_by_label("What it is").fill(what)
    await page.locator("#connection").fill(name)
    await page.get_by_role("button", name="Connect an agent").click()
    await page.goto(f"{srv.url}/console/agents")
    await expect(page.locator("#live-status")).to_have_text("live", timeout=10_000)
    return page.locator(".token").filter(has_text=f"alice/{name}")


def swap_now(srv, d) -> None:
    """A change of hers elsewhere: her pages' live streams say so."""
    srv.admin("POST", "/api/v1/messages", {"kind": "announce", "channel": "ops", "body": "Swap now"},
              token=d["alice"]["human_token"])


async def test_a_live_update_keeps_open_what_she_opened(demo):
    """Every page load is followed by a live refresh (the stream's "catch up" on connecting), and
    any change brings another: a swap must not close the settings she just opened (the
    connection's "Rename or change rights"), or her next click lands on nothing. Made certain: the
    old live part is marked, she opens the settings, and the swap is awaited (the mark gone)."""
    srv, d = demo
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                           args=["--no-sandbox", "--disable-dev-shm-usage"])
        ctx, page = await signed_in(browser, srv, "alice", "Alice")
        row = await connected_row(page, srv, "Claude Code on the laptop", "laptop")
        await page.evaluate("document.getElementById('live').dataset.old = '1'")
        await row.locator("summary").click()
        # Another change: the stream says so and the page refreshes its live part.
        swap_now(srv, d)
        await expect(page.locator("#live[data-old]")).to_have_count(0, timeout=15_000)
        await expect(row.locator("details")).to_have_attribute("open", "")
        await row.locator('select[name="rights_database"]').select_option("allowed", timeout=5_000)
        await browser.close()


async def test_a_live_update_never_undoes_a_choice_she_has_not_sent(demo):
    """She changes a connection's right in its settings and looks away before saving (the field
    no longer has focus); a change elsewhere refreshes the page's live part. The swap waits: her
    choice stays, and Save stores it. (A swap had put the stored value back under her, and Save
    then saved that: the rights she chose were silently not applied.)"""
    srv, d = demo
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                           args=["--no-sandbox", "--disable-dev-shm-usage"])
        ctx, page = await signed_in(browser, srv, "alice", "Alice")
        row = await connected_row(page, srv, "Codex on the desktop", "desk")
        await row.locator("summary").click()
        database = row.locator('select[name="rights_database"]')
        stored = await database.input_value()
        chosen = "off" if stored != "off" else "allowed"
        await database.select_option(chosen)
        await page.locator("h1").click()  # she looks away: the choice is made, not yet saved
        await page.evaluate("document.getElementById('live').dataset.old = '1'")
        swap_now(srv, d)
        await page.wait_for_timeout(1_500)
        await expect(page.locator("#live[data-old]")).to_have_count(1)
        await expect(database).to_have_value(chosen)
        await row.get_by_role("button", name="Save").click()
        saved = page.locator(".token").filter(has_text="alice/desk").locator(".rights-summary")
        await expect(saved).to_contain_text(f"database {chosen}")
        await browser.close()


async def test_times_read_as_people_read_them_relative_local_and_exact_on_hover(demo):
    """Every time a page prints is a <time>: without script "YYYY-MM-DD HH:MM UTC"; in a browser
    in Tokyo, relative to now with the exact local time (and the UTC instant) on hover, on member
    and admin pages, the deliveries list included."""
    srv, d = demo
    posted = srv.admin("POST", "/api/v1/messages", {"kind": "announce", "channel": "ops",
                                                    "body": "Release at noon"},
                       token=d["alice"]["human_token"])
    srv.admin("POST", "/admin/v1/webhooks", {"url": "https://hooks.invalid/liaison",
                                             "events": ["message.created"]})
    srv.admin("POST", "/api/v1/messages", {"kind": "announce", "channel": "ops", "body": "Again"},
              token=d["alice"]["human_token"])
    url = f"{srv.url}/console/threads/{posted['thread']}"
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                           args=["--no-sandbox", "--disable-dev-shm-usage"])
        async def in_tokyo(body: dict, name: str):
            ctx = await browser.new_context(viewport=LAPTOP, timezone_id="Asia/Tokyo", locale="en-US")
            page = await ctx.new_page()
            await page.goto(srv.admin("POST", "/admin/v1/login-links", body)["url"])
            await page.get_by_role("button", name=f"Continue as {name}").click()
            await expect(page.get_by_role("button", name="Sign out")).to_be_visible()
            return page

        page = await in_tokyo({"person": "alice"}, "Alice")
        # What the server wrote, before any script ran.
        served = await (await page.request.get(url)).text()
        assert re.search(r'<time datetime="[0-9T:.\-]+Z" title="[^"]+">20\d\d-\d\d-\d\d \d\d:\d\d UTC</time>',
                         served), served[:2000]
        assert not re.search(r">20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d", served), "a raw timestamp is printed"
        await page.goto(url)
        first = page.locator("main time").first
        await expect(first).to_have_text(re.compile(r"^(just now|1 minute ago)$"))
        hover = await first.get_attribute("title")
        assert "Japan Standard Time" in hover or "GMT+9" in hover, hover
        assert hover.endswith("Z)"), hover
        # Admin pages too, and the deliveries list has a time per delivery.
        page = await in_tokyo({"person": "admin", "admin": True}, "Administrator")
        await page.goto(f"{srv.url}/console/admin/deliveries")
        when = page.locator("td[data-label=When]").first
        await expect(when).to_contain_text("queued")
        await expect(when.locator("time").first).to_have_text(re.compile(r"just now|ago|in "))
        await page.goto(f"{srv.url}/console/admin/people")
        await expect(page.locator("main time").first).to_have_attribute(
            "title", re.compile(r"(Japan Standard Time|GMT\+9)"))
        await page.screenshot(path=str(ARTIFACTS / "times-admin-people-laptop.png"), full_page=True)
        await browser.close()


async def test_form_addresses_and_unknown_pages_tell_nothing_and_keep_the_navigation(demo):
    srv, _ = demo
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                           args=["--no-sandbox", "--disable-dev-shm-usage"])
        # Signed out: an admin form's address, a member form's address and an unknown page all
        # answer the sign-in page.
        anon = await (await browser.new_context(viewport=LAPTOP)).new_page()
        bodies = []
        for path in ("/console/admin/tokens", "/console/threads/x/reply", "/console/no-such-page"):
            r = await anon.goto(f"{srv.url}{path}")
            assert r.status == 401, (path, r.status)
            bodies.append(await anon.locator("main").inner_text())
        assert bodies[0] == bodies[1] == bodies[2]
        # A member: an admin form's address is exactly an unknown page, in HTML, navigation kept.
        ctx, page = await signed_in(browser, srv, "alice", "Alice")
        answers = []
        for path in ("/console/admin/tokens", "/console/admin/keys/k1/retire", "/console/admin/people",
                     "/console/no-such-page"):
            r = await page.goto(f"{srv.url}{path}")
            assert r.status == 404 and "text/html" in r.headers["content-type"], (path, r.status)
            await expect(page.get_by_role("link", name="Threads")).to_be_visible()
            answers.append(await page.locator("main").inner_text())
        assert len(set(answers)) == 1, answers
        assert "admin" not in answers[0].lower()
        await page.screenshot(path=str(ARTIFACTS / "not-found-laptop.png"), full_page=True)
        # Her own form's address leads to the page holding the form.
        await page.goto(f"{srv.url}/console/compose?channel=demo")
        await page.get_by_label("Message (Markdown)").fill("hello")
        await page.get_by_role("button", name="Send").click()
        await expect(page).to_have_url(THREAD)
        thread_url = page.url.split("#")[0]
        await page.goto(f"{thread_url}/reply")
        await expect(page).to_have_url(thread_url)
        await page.goto(f"{srv.url}/console/agents/x/revoke")
        await expect(page).to_have_url(f"{srv.url}/console/agents")
        # An error page keeps the navigation too.
        r = await page.goto(f"{srv.url}/console/threads/th_nope")
        assert r.status == 404
        await expect(page.get_by_role("link", name="Write")).to_be_visible()
        # An admin is led to the page holding the form.
        actx, admin = await signed_in(browser, srv, "admin", "Administrator", admin=True)
        await admin.goto(f"{srv.url}/console/admin/tokens")
        await expect(admin).to_have_url(f"{srv.url}/console/admin/people")
        await admin.goto(f"{srv.url}/console/admin/channels/ops/policy")
        await expect(admin).to_have_url(f"{srv.url}/console/admin/channels/ops")
        await browser.close()


async def test_refused_admin_forms_keep_her_values(demo):
    srv, _ = demo
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                           args=["--no-sandbox", "--disable-dev-shm-usage"])
        ctx, page = await signed_in(browser, srv, "admin", "Administrator", admin=True)
        base = f"{srv.url}/console/admin"
        # A new channel with a name that is not a slug.
        await page.goto(f"{base}/channels")
        await page.get_by_label("Name", exact=True).fill("Launch Plans")
        await page.get_by_label("Description").fill("Everything about the launch")
        await page.get_by_label("Bob (member)").check()
        await page.get_by_role("button", name="Preview").click()
        await expect(page.get_by_role("region", name="Preview")).to_contain_text("slug")
        await expect(page.get_by_label("Name", exact=True)).to_have_value("Launch Plans")
        await expect(page.get_by_label("Description")).to_have_value("Everything about the launch")
        await expect(page.get_by_label("Bob (member)")).to_be_checked()
        await expect(page.get_by_label("Alice (member)")).not_to_be_checked()
        # A token with too long a description: expiry, scopes, person and description kept.
        await page.goto(f"{base}/people")
        form = page.get_by_role("form", name="Issue a token")
        await form.get_by_label("For").select_option("bob")
        await form.get_by_label("agent").check()
        await form.get_by_label("human").check()
        await form.get_by_label("Expires after").select_option("7")
        await page.evaluate("document.getElementById('token-description').removeAttribute('maxlength')")
        await form.get_by_label("Description").fill("d" * 501)
        await form.get_by_role("button", name="Issue").click()
        form = page.get_by_role("form", name="Issue a token")
        await expect(form.get_by_role("alert")).to_contain_text("longer than 500")
        await expect(form.get_by_label("For")).to_have_value("bob")
        await expect(form.get_by_label("agent")).to_be_checked()
        await expect(form.get_by_label("human")).to_be_checked()
        await expect(form.get_by_label("admin", exact=True)).not_to_be_checked()
        await expect(form.get_by_label("Expires after")).to_have_value("7")
        await expect(form.get_by_label("Description")).to_have_value("d" * 501)
        # A policy with a deadline that is not a number: her values, not the stored ones.
        await page.goto(f"{base}/channels/ops")
        policy = page.get_by_role("form", name="Approval policy")
        await policy.get_by_label("code", exact=True).select_option("auto")
        await policy.get_by_label("Approval deadline", exact=True).fill("tomorrow")
        await policy.get_by_role("button", name="Preview").click()
        policy = page.get_by_role("form", name="Approval policy")
        await expect(page.get_by_role("region", name="Preview")).to_contain_text("whole number of")
        await expect(policy.get_by_label("code", exact=True)).to_have_value("auto")
        await expect(policy.get_by_label("Approval deadline", exact=True)).to_have_value("tomorrow")
        await page.screenshot(path=str(ARTIFACTS / "admin-policy-refused-laptop.png"), full_page=True)
        assert [c for c in srv.admin("GET", "/admin/v1/channels")["channels"]
                if c["name"] == "ops"][0]["policy"]["code"] == "approve"
        await browser.close()


async def test_text_no_backend_can_store_is_refused_on_every_admin_and_console_input(demo):
    srv, _ = demo
    hooks_before = srv.admin("GET", "/admin/v1/webhooks")["webhooks"]
    # Admin API: a body (any field), an address.
    for method, path, body in (
        ("POST", "/admin/v1/webhooks", {"url": "https://hooks.example/\u0000x", "events": ["message.created"]}),
        ("POST", "/admin/v1/persons", {"id": "zed", "display_name": "Zed\u0000"}),
        ("POST", "/admin/v1/channels", {"name": "zz", "description": "a\u0000b", "members": []}),
        ("POST", "/admin/v1/tokens", {"person": "bob", "scopes": ["agent"], "description": "\u0000"}),
        ("DELETE", "/admin/v1/webhooks/wh%00x", None),
        ("DELETE", "/admin/v1/tokens/%00", None),
        ("POST", "/admin/v1/deliveries/retry", {"endpoint": "https://x.example/\u0000"}),
    ):
        status, text = raw(srv, method, path, json.dumps(body).encode() if body is not None else None,
                           token=srv.admin_token)
        assert status == 400, (path, status, text)
        assert json.loads(text)["error"]["code"] == "invalid_input", text
        assert "U+0000" in text, text
    assert srv.admin("GET", "/admin/v1/webhooks")["webhooks"] == hooks_before
    assert all(p["id"] != "zed" for p in srv.admin("GET", "/admin/v1/persons")["persons"])
    # Console: a form's field and an address, as an admin's session sends them.
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                           args=["--no-sandbox", "--disable-dev-shm-usage"])
        ctx, page = await signed_in(browser, srv, "admin", "Administrator", admin=True)
        await page.goto(f"{srv.url}/console/admin/webhooks")
        csrf = await page.locator("input[name=csrf]").first.get_attribute("value")
        r = await page.request.post(f"{srv.url}/console/admin/webhooks", form={
            "csrf": csrf, "url": "https://hooks.example/\u0000", "message.created": "on"})
        assert r.status == 400 and "U+0000" in await r.text(), r.status
        r = await page.request.post(f"{srv.url}/console/admin/people", form={
            "csrf": csrf, "id": "zed", "display_name": "Zed\u0000"})
        assert r.status == 400 and "U+0000" in await r.text()
        r = await page.request.get(f"{srv.url}/console/admin/channels/%00")
        assert r.status == 400 and "U+0000" in await r.text()
        await browser.close()
    assert srv.admin("GET", "/admin/v1/webhooks")["webhooks"] == hooks_before
    assert all(p["id"] != "zed" for p in srv.admin("GET", "/admin/v1/persons")["persons"])


async def test_every_page_fits_a_phone_with_a_long_name_on_it(demo):
    srv, _ = demo
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                           args=["--no-sandbox", "--disable-dev-shm-usage"])
        ctx, page = await signed_in(browser, srv, "dominique", LONG_NAME)
        await page.goto(f"{srv.url}/console/compose?channel=ops")
        await page.get_by_label("Message (Markdown)").fill("hello from a long name")
        await page.get_by_role("button", name="Send").click()
        await expect(page).to_have_url(THREAD)
        thread = page.url.split("#")[0]
        for path, name in (("/console/approvals", "long-approvals"), ("/console/compose?channel=ops", "long-compose"),
                           ("/console/threads", "long-threads"), (thread[len(srv.url):], "long-thread"),
                           ("/console/agents", "long-agents"), ("/console/activity", "long-activity"),
                           ("/console/fleet", "long-fleet"), ("/console/leases", "long-leases"),
                           ("/console/sessions", "long-sessions")):
            await shots(browser, ctx, f"{srv.url}{path}", name)
        # Alice sees the long name as a recipient, an author and a receipt.
        alice, _ = await signed_in(browser, srv, "alice", "Alice")
        for path, name in (("/console/compose?channel=ops", "long-alice-compose"),
                           ("/console/threads?channel=ops", "long-alice-threads"),
                           (thread[len(srv.url):], "long-alice-thread")):
            await shots(browser, alice, f"{srv.url}{path}", name)
        actx, admin = await signed_in(browser, srv, "admin", "Administrator", admin=True)
        for section in ("people", "channels", "channels/ops", "parties", "remotes", "webhooks",
                        "deliveries", "keys", "audit"):
            await shots(browser, actx, f"{srv.url}/console/admin/{section}", f"long-admin-{section.replace('/', '-')}")
        await browser.close()
