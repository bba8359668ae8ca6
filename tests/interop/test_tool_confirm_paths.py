"""Her own tool rules, and her "allow once" from a chat notification (SPEC §5b), tried as a new user
would in Chromium with the real `liaison hook pre-tool-use` binary fed Claude Code's hook JSON:

- on the console's Tool rules page alice adds a rule (`Bash`, command starts with `make release`,
  production); a refused rule comes back with what she typed and the error by it;
- her connection confirms production, so `make release VERSION=2` now waits for her, where before
  her rule it ran at once;
- her `approval.pending` webhook (a chat notification) carries the exact action and a single-use
  link; opened on her phone, not signed in, it shows the action with "Allow once"; her click makes
  the waiting hook print `allow`; the link then works no more.

The Tool rules page and the link page are shot at laptop and phone size."""

import json
import os

import pytest

from conftest import ARTIFACTS, CHROMIUM, LAPTOP, PHONE, shots, start_server, stop_server
from test_tool_checks import answer, pre_tool_use, start_hook
from test_webhooks import Receiver, cli

pytestmark = pytest.mark.anyio

RELEASE = pre_tool_use("Bash", {"command": "make release VERSION=2", "description": "Release 2"})


async def fits(page, viewport: dict, where: str) -> None:
    wide = await page.evaluate("document.documentElement.scrollWidth")
    assert wide <= viewport["width"], f"{where}: {wide} px wide in a {viewport['width']} px viewport"


async def test_her_rules_and_a_chat_link_decide_her_agents_call():
    from playwright.async_api import async_playwright, expect

    assert os.path.exists(CHROMIUM), f"{CHROMIUM} is missing: apt-get install chromium"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    os.environ["LIAISON_OUTBOX__ALLOW"] = "127.0.0.1"
    try:
        srv, dbname = start_server("--demo")
    finally:
        del os.environ["LIAISON_OUTBOX__ALLOW"]
    rx = Receiver()
    try:
        cli(srv, "webhook", "add", rx.url, "--events", "approval.pending", "--person", "alice")
        login_url = srv.admin("POST", "/admin/v1/login-links", {"person": "alice"})["url"]
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                               args=["--no-sandbox", "--disable-dev-shm-usage"])
            laptop = await browser.new_context(viewport=LAPTOP)
            page = await laptop.new_page()
            await page.goto(login_url)
            await page.get_by_role("button", name="Continue as Alice").click()
            # A connection whose production actions she confirms one by one.
            await page.goto(f"{srv.url}/console/agents")
            await page.get_by_label("What it is").fill("Claude Code on my laptop")
            await page.locator("#connection").fill("claude-laptop")
            await page.locator("#rights-production").select_option("confirm")
            await page.get_by_role("button", name="Connect an agent").click()
            claude = (await page.locator("#secret").text_content()).strip()

            # Before her rule: `make release` is a command no rule names (code), allowed at once.
            out = answer(start_hook(srv, claude, RELEASE), timeout=30)
            assert out["permissionDecision"] == "allow", out

            await page.get_by_role("link", name="your tool rules").click()
            await expect(page.locator("h1")).to_have_text("Tool rules")
            # A refused rule keeps what she typed, with the reason by the form.
            await page.get_by_label("Tool", exact=True).fill("Ba*sh")
            await page.get_by_label("Matches").select_option("command")
            await page.get_by_label("Words").fill("make release")
            await page.get_by_label("Impact").select_option("production")
            await page.get_by_role("button", name="Add the rule").click()
            await expect(page.locator(".field-error")).to_contain_text("prefix followed by *")
            await expect(page.get_by_label("Tool", exact=True)).to_have_value("Ba*sh")
            await expect(page.get_by_label("Words")).to_have_value("make release")
            await expect(page.get_by_label("Matches")).to_have_value("command")
            await page.get_by_label("Tool", exact=True).fill("Bash")
            await page.get_by_role("button", name="Add the rule").click()
            rows = page.locator("table.rules tbody tr")
            await expect(rows).to_have_count(1)
            await expect(rows.first).to_contain_text("command starts with make release")
            await expect(rows.first).to_contain_text("production")
            await shots(browser, laptop, f"{srv.url}/console/tool-rules", "tool-rules")

            # Now the same call waits for her, and her chat hears of it with a link.
            hook = start_hook(srv, claude, RELEASE)
            rx.wait_for(1)
            event = json.loads(rx.got[0][1])
            data = event["data"]
            assert event["type"] == "approval.pending", event
            assert data["subject"] == "tool_call" and data["approval_id"].startswith("tcf_"), data
            assert data["summary"]["command"] == "make release VERSION=2", data
            assert data["approvers"] == ["alice"], data
            link = data["approval_link"]["url"]
            assert hook.poll() is None, "the hook waits for her"

            # Seen at laptop size first: each opening of the link mints its page's form token, so
            # the form of the page opened last (her phone's) is the one that can use it.
            wide = await (await browser.new_context(viewport=LAPTOP)).new_page()
            await wide.goto(link)
            await expect(wide.locator(".confirmation pre.action")).to_have_text("make release VERSION=2")
            await wide.screenshot(path=str(ARTIFACTS / "tool-confirmation-link-laptop.png"), full_page=True)

            # Opened where the notification is read: her phone, not signed in.
            phone = await browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True,
                                              device_scale_factor=2)
            mobile = await phone.new_page()
            await mobile.goto(link)
            card = mobile.locator(".confirmation")
            await expect(card.locator("pre.action")).to_have_text("make release VERSION=2")
            await expect(mobile.locator("main")).to_contain_text("deciding as Alice")
            await fits(mobile, PHONE, "the link page on a phone")
            await mobile.screenshot(path=str(ARTIFACTS / "tool-confirmation-link-phone.png"), full_page=True)
            await card.get_by_role("button", name="Allow once").click()
            await expect(mobile.locator("h1")).to_have_text("Allowed once")
            out = answer(hook, timeout=30)
            assert out["permissionDecision"] == "allow", out
            # Used once: the link decides nothing more.
            response = await mobile.goto(link)
            assert response.status == 401, response.status
            await expect(mobile.locator("main")).to_contain_text("already used")
            await browser.close()
    finally:
        rx.close()
        stop_server(srv, dbname)
