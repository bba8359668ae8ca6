"""OAuth clients for admins (SPEC §7), in headless Chromium at laptop and phone size and on the
command line: two clients register themselves (RFC 7591) with names and redirect URIs of their own
choosing; the admin's console page lists them as DCR with what they declared marked self-declared,
escaped, and asks before removing one; `liaison oauth clients list` shows the same (table and
--json) and `remove` takes the other away; a removed client can no longer start a sign-in."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest
from playwright.async_api import async_playwright, expect

from conftest import ARTIFACTS, CHROMIUM, LAPTOP, binary, shots, start_server, stop_server

pytestmark = pytest.mark.anyio

CALLBACK = "http://127.0.0.1:47998/callback"


def cli(srv, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LIAISON_ADMIN_TOKEN": srv.admin_token}
    return subprocess.run([str(binary()), *args, "--server", srv.url],
                          capture_output=True, text=True, env=env, timeout=30)


async def test_an_admin_lists_and_removes_oauth_clients_in_the_console_and_the_cli():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (or set LIAISON_CHROMIUM)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    srv, dbname = start_server()
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            ids = {}
            for name in ["Claude <b>web</b>", "Night build"]:
                r = await http.post(f"{srv.url}/oauth/register", json={
                    "client_name": name, "redirect_uris": [CALLBACK, "https://app.example/a-very-long/callback/path/that/wraps"]})
                assert r.status_code == 201, r.text
                ids[name] = r.json()["client_id"]

        made = cli(srv, "login-link", "admin", "--admin")
        assert made.returncode == 0, made.stderr
        link = json.loads(made.stdout)["url"]
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                               args=["--no-sandbox", "--disable-dev-shm-usage"])
            laptop = await browser.new_context(viewport=LAPTOP)
            page = await laptop.new_page()
            await page.goto(link)
            await page.get_by_role("button", name="Continue as Administrator").click()
            await page.get_by_role("link", name="Admin", exact=True).click()
            await page.get_by_role("link", name="OAuth clients", exact=True).click()
            await expect(page).to_have_url(f"{srv.url}/console/admin/oauth")
            rows = page.get_by_role("list", name="OAuth clients")
            await expect(rows).to_contain_text("Claude <b>web</b>")
            assert await page.locator("main b", has_text="web").count() == 0, "a client's name is text, never markup"
            await expect(rows).to_contain_text("Night build")
            await expect(rows).to_contain_text("DCR")
            await expect(rows).to_contain_text("self-declared")
            await expect(rows).to_contain_text(CALLBACK)
            await expect(rows).to_contain_text("0 live grants")
            await shots(browser, laptop, page.url, "admin-oauth-clients")

            # Removing asks first: dismissed, nothing changes; accepted, the client is gone.
            page.once("dialog", lambda d: d.dismiss())
            await page.get_by_role("button", name="Remove OAuth client Night build").click()
            await expect(rows).to_contain_text("Night build")
            assert len(srv.admin("GET", "/admin/v1/oauth/clients")["clients"]) == 2
            page.once("dialog", lambda d: d.accept())
            await page.get_by_role("button", name="Remove OAuth client Night build").click()
            await expect(rows).not_to_contain_text("Night build")
            await expect(rows).to_contain_text("Claude <b>web</b>")
            await browser.close()

        listed = cli(srv, "oauth", "clients", "list")
        assert listed.returncode == 0, listed.stderr
        assert "NAME (SELF-DECLARED)" in listed.stdout and "DCR" in listed.stdout, listed.stdout
        assert ids["Claude <b>web</b>"] in listed.stdout and ids["Night build"] not in listed.stdout
        as_json = json.loads(cli(srv, "oauth", "clients", "list", "--json").stdout)
        assert [c["id"] for c in as_json["clients"]] == [ids["Claude <b>web</b>"]]
        assert as_json["clients"][0]["live_grants"] == 0
        removed = cli(srv, "oauth", "clients", "remove", ids["Claude <b>web</b>"])
        assert removed.returncode == 0, removed.stderr
        again = cli(srv, "oauth", "clients", "remove", ids["Claude <b>web</b>"])
        assert again.returncode != 0 and "no OAuth client" in again.stderr, again.stderr
        assert srv.admin("GET", "/admin/v1/oauth/clients")["clients"] == []
        # A removed client cannot start a sign-in.
        async with httpx.AsyncClient(timeout=30) as http:
            r = await http.get(f"{srv.url}/oauth/authorize", params={
                "client_id": ids["Night build"], "redirect_uri": CALLBACK, "response_type": "code",
                "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "code_challenge_method": "S256"})
            assert r.status_code == 400, r.text
    finally:
        stop_server(srv, dbname)
