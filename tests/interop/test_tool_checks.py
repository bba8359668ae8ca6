"""Her agent's own tool calls confirmed by her (SPEC §5b), tried as a new user would: in Chromium
alice connects `claude-laptop`, sets its production right to `confirm` in a session's settings, and
her agent (the official MCP SDK) joins and claims her command. The real `liaison hook pre-tool-use`
binary, fed Claude Code's documented hook JSON on stdin (this test acting as Claude Code):

- an `Edit` is allowed at once, and its start and completion show in the panel;
- `Bash git push origin main` appears in her panel while the hook process is still waiting; she
  clicks "Allow once" and the hook prints `allow`;
- the identical call again needs a new confirmation; she rejects it with a reason and the hook
  prints `deny` with it;
- one nobody decides is denied at its deadline;
- the agent's own token cannot decide;
- stopping the server mid-wait makes the hook print `ask`.

The panel is shot at laptop and phone size with a confirmation waiting."""

import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import ARTIFACTS, CHROMIUM, LAPTOP, binary, call, connect, shots, start_server, stop_server

pytestmark = pytest.mark.anyio

AGENT = "claude@laptop:1"


def hook_env(srv, token: str) -> dict:
    return {**os.environ, "LIAISON_URL": srv.url, "LIAISON_TOKEN": token, "LIAISON_AGENT": AGENT}


def start_hook(srv, token: str, payload: dict, *args: str, event: str = "pre-tool-use") -> subprocess.Popen:
    """`liaison hook pre-tool-use` as Claude Code runs it: the hook input on stdin."""
    p = subprocess.Popen([str(binary()), "hook", event, *args], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=hook_env(srv, token))
    p.stdin.write(json.dumps(payload))
    p.stdin.close()
    return p


def answer(p: subprocess.Popen, timeout: float = 60) -> dict:
    out = p.stdout.read() if p.wait(timeout=timeout) is not None else ""
    assert p.returncode == 0, (p.returncode, out, p.stderr.read())
    return json.loads(out)["hookSpecificOutput"]


def pre_tool_use(tool: str, tool_input: dict) -> dict:
    return {"session_id": "s1", "transcript_path": "/tmp/t.jsonl", "cwd": "/srv/site",
            "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": tool,
            "tool_input": tool_input, "tool_use_id": "toolu_01"}


PUSH = pre_tool_use("Bash", {"command": "git push origin main", "description": "Push the fix"})


def post(srv, path: str, token: str) -> tuple[int, dict]:
    request = urllib.request.Request(f"{srv.url}{path}", data=b"{}", method="POST",
                                     headers={"Authorization": f"Bearer {token}",
                                              "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


async def test_she_confirms_her_agents_actions_while_the_call_waits(tmp_path):
    from playwright.async_api import async_playwright, expect

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (or set LIAISON_CHROMIUM)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    srv, dbname = start_server("--demo")
    stopped = False
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
            await page.goto(f"{srv.url}/console/agents")
            await page.get_by_label("What it is").fill("Claude Code on my laptop")
            await page.locator("#connection").fill("claude-laptop")
            await page.get_by_role("button", name="Connect an agent").click()
            claude = (await page.locator("#secret").text_content()).strip()

            await page.goto(f"{srv.url}/console/sessions")
            await page.get_by_label("With").select_option("claude-laptop")
            await page.get_by_label("Title (optional)").fill("Ship the fix")
            await page.get_by_role("button", name="Open a session").click()
            panel = page.url
            # Production: confirm each action (the default is off).
            await page.locator("#session-rights-production").select_option("confirm")
            await page.get_by_role("button", name="Save rights").click()
            await expect(page.locator("#session-rights-production")).to_have_value("confirm")
            await page.get_by_role("button", name="Give a join code").click()
            prompt = (await page.locator("#start-prompt").text_content()).strip()
            code = re.search(r"\blj-[0-9a-z]{4}-[0-9a-z]{4}-[0-9a-z]{4}\b", prompt).group(0)
            await page.goto(panel)

            async with connect(srv, claude, agent=AGENT) as mcp:
                joined = (await call(mcp, "join", code=code))["joined"]
                await page.get_by_label("Command").fill("Fix the pricing typo and push it")
                await page.get_by_role("button", name="Send command").click()
                first = await call(mcp, "inbox", consumer=joined["consumer"],
                                   session=joined["session"]["id"], after=joined["cursor"], wait_s=10)
                [entry] = [e for e in first["entries"] if e["type"] == "message"]
                thread = entry["thread"]
                await call(mcp, "claim", thread=thread)
                cmd = page.locator(f"#cmd-{thread}")
                await expect(cmd.locator(".badge").first).to_have_text("working")
                await page.evaluate("window.__sameDocument = true")

                # An edit under the default rights: allowed at once; started, then done, live.
                edit = pre_tool_use("Edit", {"file_path": "/srv/site/pricing.html",
                                             "old_string": "20 €", "new_string": "25 €"})
                out = answer(start_hook(srv, claude, edit), timeout=30)
                assert out["hookEventName"] == "PreToolUse"
                assert out["permissionDecision"] == "allow", out
                await expect(cmd.locator(".timeline")).to_contain_text("Edit pricing.html: started")
                done = subprocess.run([str(binary()), "hook", "tool-use"],
                                      input=json.dumps({**edit, "hook_event_name": "PostToolUse",
                                                        "tool_response": {"success": True}}),
                                      text=True, capture_output=True, env=hook_env(srv, claude), timeout=30)
                assert done.returncode == 0, done
                await expect(cmd.locator(".timeline")).to_contain_text("Edit pricing.html: ok")
                # The same through PermissionRequest: Claude Code's decision object.
                perm = start_hook(srv, claude, {**edit, "hook_event_name": "PermissionRequest"},
                                  event="permission-request")
                assert answer(perm, timeout=30)["decision"] == {"behavior": "allow"}

                # git push: her panel shows it while the hook still waits; "Allow once" → allow.
                hook = start_hook(srv, claude, PUSH)
                card = page.locator(".confirmation")
                await expect(card).to_have_count(1)
                await expect(card.locator("pre.action")).to_have_text("git push origin main")
                await expect(cmd.locator(".badge").first).to_have_text("confirmation needed")
                assert hook.poll() is None, "the hook waits for her"
                assert await page.evaluate("window.__sameDocument === true"), "shown live, no reload"
                first_id = await card.get_attribute("data-confirmation")
                clicked = time.monotonic()
                await card.get_by_role("button", name="Allow once").click()
                out = answer(hook, timeout=30)
                latency = time.monotonic() - clicked
                assert out["permissionDecision"] == "allow", out
                (ARTIFACTS / "tool-confirm-latency.txt").write_text(
                    f"'Allow once' clicked -> waiting hook printed allow: {latency * 1000:.0f} ms\n")
                await expect(page.locator(".confirmation")).to_have_count(0)
                await expect(cmd.locator(".timeline")).to_contain_text("git push origin main (production): once, by you")

                # The identical call again needs a new confirmation: rejected with a reason.
                hook = start_hook(srv, claude, PUSH)
                card = page.locator(".confirmation")
                await expect(card).to_have_count(1)
                assert await card.get_attribute("data-confirmation") != first_id
                await card.get_by_label("Reason to reject (your agent reads it)").fill("run the tests first")
                await card.get_by_role("button", name="Reject").click()
                out = answer(hook, timeout=30)
                assert out["permissionDecision"] == "deny", out
                assert "run the tests first" in out["permissionDecisionReason"], out
                await expect(cmd.locator(".timeline")).to_contain_text("Bash git: rejected")

                # From a terminal: `liaison approvals allow tcf_…` with her own human token.
                demo = json.loads((srv.data_dir / "demo.json").read_text())
                hook = start_hook(srv, claude, pre_tool_use("Bash", {"command": "docker push registry/api:1.2"}))
                card = page.locator(".confirmation")
                await expect(card).to_have_count(1)
                pending = await card.get_attribute("data-confirmation")
                shown = subprocess.run([str(binary()), "approvals", "show", pending, "--server", srv.url],
                                       env={**os.environ, "LIAISON_TOKEN": demo["alice"]["human_token"]},
                                       text=True, capture_output=True, timeout=30)
                assert shown.returncode == 0 and "docker push registry/api:1.2" in shown.stdout, shown
                decided = subprocess.run([str(binary()), "approvals", "allow", pending, "--server", srv.url],
                                         env={**os.environ, "LIAISON_TOKEN": demo["alice"]["human_token"]},
                                         text=True, capture_output=True, timeout=30)
                assert decided.returncode == 0, decided
                assert answer(hook, timeout=30)["permissionDecision"] == "allow"

                # One nobody decides: denied at its deadline (a 12 s hook timeout leaves 2 s).
                hook = start_hook(srv, claude, pre_tool_use("Bash", {"command": "helm upgrade api ./chart"}),
                                  "--timeout", "12")
                await expect(page.locator(".confirmation")).to_have_count(1)
                out = answer(hook, timeout=30)
                assert out["permissionDecision"] == "deny", out
                assert "no human decided in time" in out["permissionDecisionReason"], out
                await expect(page.locator(".confirmation")).to_have_count(0)

            # The agent's own token cannot decide; the page is shot with one waiting.
            hook = start_hook(srv, claude, pre_tool_use("Bash", {"command": "kubectl rollout restart deploy/api"}))
            card = page.locator(".confirmation")
            await expect(card).to_have_count(1)
            pending = await card.get_attribute("data-confirmation")
            status, body = post(srv, f"/api/v1/confirmations/{pending}/allow", claude)
            assert status == 403 and body["error"]["code"] == "forbidden", (status, body)
            status, body = post(srv, f"/api/v1/approvals/{pending}/allow", claude)
            assert status == 403, (status, body)
            await shots(browser, laptop, panel, "tool-confirmation")
            await shots(browser, laptop, f"{srv.url}/console/approvals", "tool-confirmation-approvals")
            assert hook.poll() is None, "still waiting: nobody allowed it"

            # The server stops mid-wait: the hook answers ask, never allow.
            stop_server(srv, dbname)
            stopped = True
            out = answer(hook, timeout=60)
            assert out["permissionDecision"] == "ask", out
            await browser.close()
    finally:
        if not stopped:
            stop_server(srv, dbname)
