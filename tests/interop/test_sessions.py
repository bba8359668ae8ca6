"""Her session with her own agent (SPEC §4b), tried as a new user would: in Chromium (laptop and
phone) alice connects `claude-laptop` and `codex` on Connect, opens a session with `claude-laptop`
and gives a join code; the official MCP SDK, as the agent, pastes only the code from the start
prompt into `join` and waits on the session; she writes a command with a link and a selection;
the waiting long-poll returns it as her instruction with the context fenced; the agent claims, its
tool reports an edit, it asks, she answers in the panel, it replies with a structured result; her
timeline showed each step live, in order, without a reload. The agent's own `production` request
is refused; `database` switched to allowed lets the next database command through without a
confirmation; a command to `codex` with a one-minute pickup expires and leaves codex's inbox;
"End session" makes the waiting `inbox` return `session_ended` at once."""

import json
import re
import time
from pathlib import Path

import anyio
import pytest

from conftest import (ARTIFACTS, CHROMIUM, LAPTOP, call, call_error, connect, inbox_waiters, shots,
                      start_server, stop_server, until_waiting)
from test_workspace import hook

pytestmark = pytest.mark.anyio

STEPS = ["received", "read", "claimed", "tool", "question", "answer", "result"]




async def steps_of(page, thread: str) -> list[str]:
    return await page.locator(f"#cmd-{thread} .timeline li").evaluate_all(
        "items => items.map(i => i.dataset.step)")


async def test_she_directs_her_agent_live_from_a_session(tmp_path):
    from playwright.async_api import async_playwright, expect

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (or set LIAISON_CHROMIUM)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    srv, dbname = start_server("--demo")
    try:
        login_url = srv.admin("POST", "/admin/v1/login-links", {"person": "alice"})["url"]
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                               args=["--no-sandbox", "--disable-dev-shm-usage"])
            laptop = await browser.new_context(viewport=LAPTOP)
            page = await laptop.new_page()
            page.on("dialog", lambda dialog: dialog.accept())
            await page.goto(login_url)
            await page.get_by_role("button", name="Continue as Alice").click()

            # Connect: claude-laptop with the default rights, and codex.
            secrets = {}
            for what, name in (("Claude Code on my laptop", "claude-laptop"), ("Codex", "codex")):
                await page.goto(f"{srv.url}/console/agents")
                await page.get_by_label("What it is").fill(what)
                await page.locator("#connection").fill(name)
                await page.get_by_role("button", name="Connect an agent").click()
                secrets[name] = (await page.locator("#secret").text_content()).strip()

            # A session with codex first, and a command it has one minute to pick up.
            await page.goto(f"{srv.url}/console/sessions")
            await page.get_by_label("With").select_option("codex")
            await page.get_by_label("Title (optional)").fill("Codex chores")
            await page.get_by_role("button", name="Open a session").click()
            codex_session = page.url
            await page.get_by_label("Command").fill("Rotate the nginx logs")
            await page.get_by_label("Pick up within").select_option(label="1 minute")
            await page.get_by_role("button", name="Send command").click()
            await expect(page.locator(".command .badge").first).to_have_text("waiting")
            expiring = (await page.locator(".command").first.get_attribute("id")).removeprefix("cmd-")

            # A session with claude-laptop; a refused title keeps what she typed.
            await page.goto(f"{srv.url}/console/sessions")
            await page.get_by_label("With").select_option("claude-laptop")
            await page.get_by_label("Title (optional)").fill("Pricing\u2028page")
            await page.get_by_role("button", name="Open a session").click()
            await expect(page.locator("#open-error")).to_contain_text("one line")
            await expect(page.get_by_label("With")).to_have_value("claude-laptop")
            await page.get_by_label("Title (optional)").fill("Pricing page")
            await page.get_by_role("button", name="Open a session").click()
            await expect(page.locator("h1")).to_have_text("Pricing page")
            panel = page.url
            # With a session open (and nothing to decide), the console's front door is Sessions.
            landing = await laptop.new_page()
            await landing.goto(f"{srv.url}/console")
            await expect(landing).to_have_url(f"{srv.url}/console/sessions")
            await landing.close()
            await page.get_by_role("button", name="Give a join code").click()
            prompt = (await page.locator("#start-prompt").text_content()).strip()
            code = re.search(r"\blj-[0-9a-z]{4}-[0-9a-z]{4}-[0-9a-z]{4}\b", prompt).group(0)
            await page.goto(panel)
            await page.evaluate("window.__sameDocument = true")

            claude = secrets["claude-laptop"]
            agent = "claude@laptop:1"
            async with connect(srv, claude, agent=agent) as mcp:
                joined = (await call(mcp, "join", code=code))["joined"]
                assert joined["session"]["with"] == "alice/claude-laptop"
                session, consumer = joined["session"]["id"], joined["consumer"]
                err, _ = await call_error(mcp, "join", code=code)
                assert err["code"] == "not_found", "a code works once"
                await expect(page.locator("#live .session-settings")).to_contain_text("claude-laptop")

                # Her command wakes the agent's waiting long-poll.
                got = {}

                async def wait():
                    got["page"] = await call(mcp, "inbox", consumer=consumer, session=session,
                                             after=joined["cursor"], wait_s=30)
                    got["at"] = time.monotonic()

                before = inbox_waiters(srv)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(wait)
                    await until_waiting(srv, before + 1)
                    await page.get_by_label("Command").fill("Replace the pricing table")
                    await page.locator("summary", has_text="Context").click()
                    await page.get_by_label("Link").fill("https://example.com/pricing")
                    await page.get_by_label("Selection").fill("| pro | 20 € |")
                    await page.get_by_label("Page or surface").fill("pricing page")
                    await page.get_by_label("Impact").select_option("code")
                    sent_at = time.monotonic()
                    await page.get_by_role("button", name="Send command").click()
                (ARTIFACTS / "session-wakeup.txt").write_text(
                    f"console 'Send command' -> waiting MCP inbox(session) returned: "
                    f"{(got['at'] - sent_at) * 1000:.1f} ms\n")
                [entry] = [e for e in got["page"]["entries"] if e["type"] == "message"]
                assert entry["label"]["instruction"] is True, entry["label"]
                assert entry["body"].endswith("Replace the pricing table") or \
                    "Replace the pricing table" in json.dumps(entry)
                assert "pricing page" in json.dumps(entry["attachments"]), entry
                thread = entry["thread"]
                cmd = page.locator(f"#cmd-{thread}")
                await expect(cmd.locator(".badge").first).to_have_text("read")

                # It works: claims, a tool edits, it asks; she answers in the panel.
                claim = (await call(mcp, "claim", thread=thread))["claim"]
                await expect(cmd.locator(".badge").first).to_have_text("working")
                # The real `liaison hook tool-use`, fed Claude Code's PostToolUse JSON.
                hook(srv, claude, agent, {
                    "hook_event_name": "PostToolUse", "cwd": "/srv/site", "tool_name": "Edit",
                    "tool_input": {"file_path": "/srv/site/pricing.html", "old_string": "20 €",
                                   "new_string": "25 €"}})
                await expect(cmd.locator(".timeline")).to_contain_text("Edit pricing.html: ok")
                await call(mcp, "post", kind="question", thread=thread,
                           body="Keep the old prices as a footnote?")
                await expect(cmd.locator(".badge").first).to_have_text("question")
                await cmd.get_by_label("Your answer").fill("No, drop them.")
                await cmd.get_by_role("button", name="Answer").click()
                # Her answer is committed once her panel shows it (a click returns before the form's
                # POST is answered, which under load can take longer than the agent's wait).
                await expect(page.locator(f"#cmd-{thread} .timeline")).to_contain_text(
                    "No, drop them.", timeout=30_000)
                answered = await call(mcp, "inbox", consumer=consumer, session=session,
                                      after=got["page"]["cursor"], wait_s=10)
                assert any("No, drop them." in json.dumps(e) for e in answered["entries"]), answered
                await call(mcp, "post", kind="reply", thread=thread, body="Replaced; old prices dropped.",
                           fencing_token=claim["fencing_token"],
                           result={"status": "done", "summary": "Pricing table replaced",
                                   "changed": ["site/pricing.html"]})
                await page.goto(panel)
                cmd = page.locator(f"#cmd-{thread}")
                await expect(cmd.locator(".badge").first).to_have_text("done")
                assert await steps_of(page, thread) == STEPS
                await expect(cmd.locator(".timeline")).to_contain_text("Pricing table replaced")
                await page.evaluate("window.__sameDocument = true")

                # Her agent's own production request is refused by its rights.
                err, _ = await call_error(mcp, "post", kind="request", channel="@alice", to=["alice"],
                                          impact="production", body="Deploy the pricing page")
                assert err["code"] == "denied_by_policy", err
                # Database asks her first; switched to allowed, the next one goes straight through.
                await page.get_by_label("Command").fill("Add an index on prices")
                await page.get_by_label("Impact").select_option("database")
                await page.get_by_role("button", name="Send command").click()
                await expect(page.locator(".command").last.locator(".badge").first).to_have_text(
                    "confirmation needed")
                await expect(page.locator(".command").last.get_by_role("button", name="Allow once")).to_be_visible()
                # From the session's own settings (the same change as on Connect).
                await page.locator("#session-rights-database").select_option("allowed")
                await page.get_by_role("button", name="Save rights").click()
                await expect(page.locator("#session-rights-database")).to_have_value("allowed")
                await page.goto(f"{srv.url}/console/agents")
                await expect(page.locator(".token", has_text="alice/claude-laptop").locator(
                    ".rights-summary")).to_contain_text("database allowed")
                await page.goto(panel)
                await page.get_by_label("Command").fill("Add an index on names")
                await page.get_by_label("Impact").select_option("database")
                await page.get_by_role("button", name="Send command").click()
                await expect(page.locator(".command").last.locator(".badge").first).to_have_text("waiting")
                await shots(browser, laptop, panel, "session")
                await shots(browser, laptop, f"{srv.url}/console/sessions", "sessions")

                # "End session": the agent's waiting inbox returns session_ended at once.
                ended = {}
                # Read what is there (the two database commands), then wait for more.
                drained = await call(mcp, "inbox", consumer=consumer, session=session, limit=100)

                async def wait_end():
                    err, _ = await call_error(mcp, "inbox", consumer=consumer, session=session,
                                              after=drained["cursor"], wait_s=30)
                    ended["err"] = err

                before = inbox_waiters(srv)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(wait_end)
                    await until_waiting(srv, before + 1)
                    await page.get_by_role("button", name="End session").click()
                assert ended["err"]["code"] == "session_ended", ended
                # Nothing more can happen in this session: the result says the loop may end.
                over = await mcp.call_tool("inbox", {"consumer": consumer, "session": session})
                assert over.is_error and (over.meta or {}).get("dev.liaison/loop") == "end", over
                await expect(page.locator("main")).to_contain_text("ended")

            # The codex command nobody picked up: expired, and gone from codex's inbox.
            await page.goto(codex_session)
            await expect(page.locator(f"#cmd-{expiring} .badge").first).to_have_text("expired", timeout=90_000)
            async with connect(srv, secrets["codex"], agent="codex@laptop:2") as codex:
                page_ = await call(codex, "inbox", consumer="main", limit=50)
                assert all(e.get("thread") != expiring for e in page_["entries"]), page_
                err, _ = await call_error(codex, "claim", thread=expiring)
                assert err["code"] == "not_claimable"
            await page.screenshot(path=str(ARTIFACTS / "session-expired-laptop.png"), full_page=True)
            await browser.close()
    finally:
        stop_server(srv, dbname)
