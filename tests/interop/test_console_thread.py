"""A thread and the Write page as a member reads them (SPEC §11 "for every page"), in headless
Chromium at laptop and phone size, screenshots kept in $LIAISON_TEST_ARTIFACTS:

- one timeline: the request, its approval (who decided; the fingerprint behind "Details"), the
  claim and the tool notes in the order they happened, among the messages;
- Markdown rendered, and rendered safely: hostile bodies (script, event attributes, raw HTML,
  `javascript:` and `data:` links, remote images) run nothing, load nothing and keep the strict CSP;
  links carry rel="noopener noreferrer nofollow";
- agents named by their connection (`claude-laptop`), not by what they declared; her own words
  without the warning written for agents' messages;
- Write: "Effect" only for a request, "tick no one" said plainly, a message of files alone sent.

Both backends (LIAISON_TEST_DATABASE_URL for PostgreSQL)."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
from playwright.async_api import async_playwright, expect

from conftest import ARTIFACTS, CHROMIUM, LAPTOP, call, connect, shots, unique

pytestmark = pytest.mark.anyio

HOSTILE = """Plan: **bump** the `TLS` library.

- [docs](https://docs.example/tls "The docs")
- [click](javascript:window.__xss=1)
- [data](data:text/html;base64,PHNjcmlwdD53aW5kb3cuX194c3M9MTwvc2NyaXB0Pg==)
- ![tracker](https://tracker.example/pixel.png)

<script>window.__xss = 1</script>
<img src=x onerror="window.__xss=1">
<a href="javascript:window.__xss=1" onclick="window.__xss=1">raw link</a>
<b onmouseover="window.__xss=1">hover</b>
<style>body { display: none }</style>
<iframe src="https://evil.example/"></iframe>
"""


def api(url: str, token: str, method: str, path: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{url}{path}", data=data, method=method,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def connection(server, person: str, description: str) -> tuple[str, str]:
    t = server.admin("POST", "/admin/v1/tokens", {"person": person, "scopes": ["agent"],
                                                 "description": description})["token"]
    return t["secret"], t["connection"]


async def test_one_timeline_markdown_rendered_safely_and_agents_by_connection(server):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (or set LIAISON_CHROMIUM)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    channel = unique("tl")
    server.channel(channel, ["alice", "bob"])
    alice_secret, alice_conn = connection(server, "alice", "claude laptop")
    bob_secret, bob_conn = connection(server, "bob", "codex desk")
    bob_human = server.token("bob", scopes=("human",))["secret"]
    loads, xss_dialogs = [], []

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                           args=["--no-sandbox", "--disable-dev-shm-usage"])
        ctx = await browser.new_context(viewport=LAPTOP)
        page = await ctx.new_page()
        page.on("request", lambda r: loads.append(r.url))
        page.on("dialog", lambda d: xss_dialogs.append(d.message))
        link = server.admin("POST", "/admin/v1/login-links", {"person": "alice"})["url"]
        await page.goto(link)
        await page.get_by_role("button", name=re.compile("^Continue as")).click()
        await page.wait_for_url(re.compile("/console/"))

        # Her agent (a connection named "claude-laptop", declaring something else) asks bob.
        async with connect(server, alice_secret, agent="mcp@mcp:290b68d5-aaaa") as agent:
            posted = await call(agent, "post", kind="request", channel=channel, to=["bob"], impact="code",
                                subject="Bump TLS", body=HOSTILE)
        thread = posted["thread"]
        [approval] = [a for a in api(server.url, bob_human, "GET", "/api/v1/approvals?pending=true")["approvals"]
                      if a["thread"] == thread]
        api(server.url, bob_human, "POST", f"/api/v1/approvals/{approval['id']}/allow", {})
        async with connect(server, bob_secret, agent="mcp@mcp:11111111-bbbb") as bob:
            await call(bob, "claim", thread=thread)
            from test_workspace import hook
            hook(server, bob_secret, "mcp@mcp:11111111-bbbb", {
                "hook_event_name": "PostToolUse", "cwd": "/srv", "tool_name": "Edit",
                "tool_input": {"file_path": "/srv/Cargo.toml", "old_string": "a", "new_string": "b"},
                "tool_response": {"success": True}})

            url = f"{server.url}/console/threads/{thread}"
            await page.goto(url)
            # One timeline, in order: request, approval, claim, note.
            entries = page.locator(".timeline > li")
            kinds = [(await li.get_attribute("class")).split()[1] for li in await entries.all()]
            assert kinds == ["message", "approval", "claim", "note"], kinds
            await expect(entries.nth(2)).to_contain_text(f"Bob Chen's agent {bob_conn}")
            await expect(entries.nth(3)).to_contain_text("Edit Cargo.toml: ok")
            await shots(browser, ctx, url, "thread-claimed")
            # The reply ends the claim (the thread is answered) and follows the note, live.
            await call(bob, "post", kind="reply", thread=thread, body="Done: *0.23.1* is in.")
            await expect(entries.last.locator(".body em")).to_have_text("0.23.1")
        approval_line = entries.nth(1)
        await expect(approval_line).to_contain_text("approved by Bob Chen")
        fingerprint = approval_line.locator(".fingerprint")
        await expect(fingerprint).to_be_hidden()
        await approval_line.get_by_text("Details").click()
        await expect(fingerprint).to_have_text(approval["fingerprint"])

        # Agents by connection name; what they declared only on hover.
        request = entries.nth(0)
        await expect(request.locator(".card-head")).to_contain_text(f"agent {alice_conn}")
        assert "290b68d5" not in (await request.locator(".card-head").inner_text())
        assert "11111111" not in await page.locator(".timeline").inner_text()
        await expect(request.locator(".label")).to_be_visible()

        # Markdown, safely.
        body = request.locator(".body")
        await expect(body.locator("strong")).to_have_text("bump")
        docs = body.get_by_role("link", name="docs")
        await expect(docs).to_have_attribute("href", "https://docs.example/tls")
        await expect(docs).to_have_attribute("rel", "noopener noreferrer nofollow")
        for name in ("click", "data", "raw link"):
            await expect(body.get_by_role("link", name=name)).to_have_count(0)
        await expect(body.locator("script, img, iframe, style, [onerror], [onclick], [onmouseover]")).to_have_count(0)
        await expect(body).to_contain_text("<script>window.__xss = 1</script>")
        await expect(body.get_by_role("link", name="image: tracker")).to_have_attribute(
            "href", "https://tracker.example/pixel.png")
        await body.get_by_text("hover").first.hover()
        assert await page.evaluate("window.__xss === undefined")
        assert not xss_dialogs
        assert not [u for u in loads if not u.startswith(server.url)], loads
        await shots(browser, ctx, url, "thread-timeline")

        # Her own words carry no warning; her reply is Markdown too.
        await page.get_by_label("Reply as yourself").fill("Thanks, **merged**.")
        await page.get_by_role("button", name="Reply").click()
        mine = page.locator(".timeline > li.message").last
        await expect(mine.locator(".body strong")).to_have_text("merged")
        await expect(mine.locator(".label")).to_have_count(0)
        await expect(mine).to_contain_text("in person")

        # Write: the effect only for a request; "tick no one" said plainly; files alone.
        await page.goto(f"{server.url}/console/compose?channel={channel}")
        effect = page.get_by_label("Effect of a request")
        await page.get_by_label("Question: you expect an answer").check()
        await expect(effect).to_be_hidden()
        await page.get_by_label("Request: something should be done").check()
        await expect(effect).to_be_visible()
        await expect(page.locator("#to-hint")).to_have_text(f"Tick no one to write to everyone else in #{channel}.")
        await shots(browser, ctx, f"{server.url}/console/compose?channel={channel}", "compose")
        await page.get_by_label("Handoff: they take the work over").check()
        await expect(effect).to_be_hidden()
        await page.get_by_label("Subject").fill("The new logo")
        await page.get_by_label("Files").set_input_files(
            files=[{"name": "logo.svg", "mimeType": "image/svg+xml", "buffer": b"<svg xmlns='http://www.w3.org/2000/svg'/>"}])
        await page.get_by_role("button", name="Send").click()
        await expect(page.locator("h1")).to_have_text("The new logo")
        files_only = page.locator(".timeline > li.message").first
        await expect(files_only.get_by_role("link", name="logo.svg")).to_be_visible()
        # Nothing at all is still refused, in plain words next to the field, nothing posted.
        await page.goto(f"{server.url}/console/compose?channel={channel}")
        await page.get_by_label("Subject").fill("Empty")
        await page.get_by_role("button", name="Send").click()
        await expect(page.locator(".field-error")).to_contain_text("body is empty")
        await expect(page.get_by_label("Subject")).to_have_value("Empty")
        await browser.close()
