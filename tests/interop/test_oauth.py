"""OAuth 2.1 for MCP clients (SPEC §7), tried as a new user would: the official MCP Python SDK's
`OAuthClientProvider`, given nothing but `…/mcp`, discovers liaison as the authorization server,
registers itself, and opens the authorization URL; Chromium (Playwright), signed in as alice with
her login link, shows the consent page (laptop and phone screenshots), where she names the
connection and picks its rights, and allows. The SDK gets tokens, lists and calls tools as that
connection, refreshes after its short-lived access token expires, and is cut off at once — a
waiting long-poll included — when alice revokes the grant on Connect."""

from pathlib import Path
from urllib.parse import parse_qs, urlparse

import anyio
import httpx
import pytest

from conftest import ARTIFACTS, CHROMIUM, LAPTOP, shots, start_server, stop_server

pytestmark = pytest.mark.anyio

CALLBACK = "http://127.0.0.1:47999/callback"


class Memory:
    """The SDK's token storage, in memory."""

    def __init__(self):
        self.tokens = None
        self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, info):
        self.client = info


async def test_a_client_given_only_the_url_signs_in_with_consent_and_is_cut_off_by_revocation():
    from mcp import Client
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
    from playwright.async_api import async_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (or set LIAISON_CHROMIUM)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    import os
    os.environ["LIAISON_OAUTH__ACCESS_TOKEN_TTL_S"] = "4"
    try:
        srv, dbname = start_server()
    finally:
        del os.environ["LIAISON_OAUTH__ACCESS_TOKEN_TTL_S"]
    try:
        srv.person("alice", "Alice Martin")
        srv.channel("demo", ["alice"])
        login_url = srv.admin("POST", "/admin/v1/login-links", {"person": "alice"})["url"]
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                               args=["--no-sandbox", "--disable-dev-shm-usage"])
            laptop = await browser.new_context(viewport=LAPTOP)
            page = await laptop.new_page()
            page.on("dialog", lambda dialog: dialog.accept())
            await page.goto(login_url)
            await page.get_by_role("button", name="Continue as Alice").click()

            codes: list[tuple[str, str | None]] = []
            opened: list[str] = []

            async def redirect_handler(url: str) -> None:
                opened.append(url)
                if len(opened) > 1:
                    raise RuntimeError("asked to authorize again")
                # The client's loopback callback: Chromium lands there after the consent.
                async def callback(route):
                    q = parse_qs(urlparse(route.request.url).query)
                    codes.append((q["code"][0], q.get("state", [None])[0]))
                    await route.fulfill(status=200, body="You can close this window.")

                await page.route(f"{CALLBACK}**", callback)
                await page.goto(url)
                consent = page.url
                assert "/console/oauth/consent?" in consent, consent
                await page.get_by_text("self-declared").first.wait_for()
                await shots(browser, laptop, consent, "oauth-consent")
                await page.locator("#connection").fill("claude-web")
                await page.locator("#rights-database").select_option("off")
                await page.get_by_role("button", name="Allow").click()
                await page.wait_for_url(f"{CALLBACK}**")

            async def callback_handler():
                code, state = codes[-1]
                return AuthorizationCodeResult(code=code, state=state)

            provider = OAuthClientProvider(
                server_url=srv.mcp_url,
                client_metadata=OAuthClientMetadata(
                    client_name="SDK test client",
                    redirect_uris=[CALLBACK],
                    grant_types=["authorization_code", "refresh_token"],
                    response_types=["code"],
                    token_endpoint_auth_method="none",
                ),
                storage=Memory(),
                redirect_handler=redirect_handler,
                callback_handler=callback_handler,
            )
            async with create_mcp_http_client(auth=provider) as http:
                async with Client(streamable_http_client(srv.mcp_url, http_client=http), mode="legacy") as client:
                    tools = await client.list_tools()
                    assert "inbox" in {t.name for t in tools.tools}
                    me = (await client.call_tool("whoami", {})).structured_content
                    assert me["person"]["id"] == "alice", me
                    assert opened and len(opened) == 1
                    first = provider.context.current_tokens.access_token

                    # The access token lives 4 s here: the SDK refreshes, and goes on.
                    await anyio.sleep(5)
                    again = await client.call_tool("whoami", {})
                    assert not again.is_error
                    assert provider.context.current_tokens.access_token != first
                    assert len(opened) == 1, "refreshed, not authorized again"

                    # She sees the grant on Connect, and revokes it while a long-poll waits.
                    await page.goto(f"{srv.url}/console/agents")
                    row = page.locator("li.token", has_text="claude-web")
                    await row.get_by_text("SDK test client (OAuth client)").wait_for()
                    await row.get_by_text("database off").first.wait_for()

                    result = {}

                    async def wait_inbox():
                        try:
                            result["r"] = await client.call_tool(
                                "inbox", {"consumer": "claude", "wait_s": 40})
                        except Exception as e:  # the session closing is an answer too
                            result["e"] = e

                    with anyio.fail_after(30):
                        async with anyio.create_task_group() as tg:
                            tg.start_soon(wait_inbox)
                            await anyio.sleep(1)
                            await row.get_by_role("button", name="Revoke").click()
                    assert result, "the waiting long-poll ended with the grant"
                    r = result.get("r")
                    if r is not None:
                        assert r.is_error, r
                        assert "token_revoked" in str(r.structured_content), r
            # Its tokens no longer work, and refreshing is refused.
            tokens = provider.context.current_tokens
            resp = httpx.post(srv.mcp_url, headers={"Authorization": f"Bearer {tokens.access_token}",
                                                    "Content-Type": "application/json"}, json={})
            assert resp.status_code == 401
            assert "invalid_token" in resp.headers["www-authenticate"]
            resp = httpx.post(f"{srv.url}/oauth/token", data={
                "grant_type": "refresh_token", "refresh_token": tokens.refresh_token,
                "client_id": provider.context.client_info.client_id})
            assert resp.status_code == 400 and resp.json()["error"] == "invalid_grant"
            audit = srv.admin("GET", "/admin/v1/audit")
            events = [e["event"] for e in audit["entries"]]
            assert "oauth.granted" in events and "token.revoked" in events, events
            await browser.close()
    finally:
        stop_server(srv, dbname)
