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

            codes: list[tuple[str, str | None, str | None]] = []
            opened: list[str] = []

            async def redirect_handler(url: str) -> None:
                opened.append(url)
                if len(opened) > 1:
                    raise RuntimeError("asked to authorize again")
                # The client's loopback callback: Chromium lands there after the consent.
                async def callback(route):
                    q = parse_qs(urlparse(route.request.url).query)
                    # The redirect names its issuer (RFC 9207), checked here: the SDK's own check
                    # compares it with the metadata's issuer rendered with a '/' added (a root
                    # URL), which no RFC 8414 issuer matches, so it is not handed to the SDK.
                    codes.append((q["code"][0], q.get("state", [None])[0], q.get("iss", [None])[0]))
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
                code, state, iss = codes[-1]
                assert iss == srv.url, iss
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


def https_documents(tmp_path, port_holder: dict):
    """An https server on 127.0.0.1 with a throwaway CA (its file is returned for the server's
    trust store, `SSL_CERT_FILE`): a valid Client ID Metadata Document, one too large, one too
    slow, one naming another client_id."""
    import http.server
    import json as _json
    import ssl
    import subprocess
    import threading

    ca_key, ca, key, csr, cert = (tmp_path / n for n in ("ca.key", "ca.pem", "leaf.key", "leaf.csr", "leaf.pem"))
    ext = tmp_path / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca),
        "-days", "1", "-subj", "/CN=liaison test CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
        "-out", str(cert), "-days", "1", "-extfile", str(ext))

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            base = f"https://127.0.0.1:{port_holder['port']}"
            doc = {"client_id": f"{base}{self.path}", "client_name": "Metadata document app",
                   "redirect_uris": [CALLBACK], "grant_types": ["authorization_code", "refresh_token"],
                   "response_types": ["code"], "token_endpoint_auth_method": "none"}
            if self.path == "/big.json":
                doc["padding"] = "x" * 6000
            if self.path == "/other.json":
                doc["client_id"] = f"{base}/client.json"
            if self.path == "/slow.json":
                import time as _t
                _t.sleep(5)
            body = _json.dumps(doc).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port_holder["port"] = httpd.server_address[1]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert), str(key))
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, ca


async def test_a_client_id_metadata_document_client_connects_and_bad_documents_are_refused(tmp_path):
    import os

    from mcp import Client
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
    from playwright.async_api import async_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (or set LIAISON_CHROMIUM)")
    port = {}
    httpd, ca = https_documents(tmp_path, port)
    base = f"https://127.0.0.1:{port['port']}"
    env = {"SSL_CERT_FILE": str(ca), "LIAISON_OUTBOX__ALLOW": "127.0.0.1", "LIAISON_OUTBOX__TIMEOUT_S": "2"}
    os.environ.update(env)
    try:
        srv, dbname = start_server()
    finally:
        for k in env:
            del os.environ[k]
    try:
        srv.person("alice", "Alice Martin")
        # Too large, too slow, or naming another client: refused on a page, nothing granted.
        for doc, why in (("big.json", "larger than"), ("slow.json", "could not be read"),
                         ("other.json", "not its own URL")):
            resp = httpx.get(f"{srv.url}/oauth/authorize", params={
                "response_type": "code", "client_id": f"{base}/{doc}", "redirect_uri": CALLBACK,
                "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
                "code_challenge_method": "S256", "state": "s"}, timeout=30)
            assert resp.status_code == 400, (doc, resp.text)
            assert "invalid_client" in resp.text and why in resp.text, (doc, resp.text)

        login_url = srv.admin("POST", "/admin/v1/login-links", {"person": "alice"})["url"]
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                               args=["--no-sandbox", "--disable-dev-shm-usage"])
            page = await (await browser.new_context(viewport=LAPTOP)).new_page()
            await page.goto(login_url)
            await page.get_by_role("button", name="Continue as Alice").click()
            codes = []

            async def redirect_handler(url: str) -> None:
                async def callback(route):
                    q = parse_qs(urlparse(route.request.url).query)
                    assert q.get("iss") == [srv.url], q
                    codes.append(AuthorizationCodeResult(code=q["code"][0], state=q.get("state", [None])[0]))
                    await route.fulfill(status=200, body="ok")

                await page.route(f"{CALLBACK}**", callback)
                await page.goto(url)
                await page.get_by_text("its metadata document").wait_for()
                await page.get_by_text("Metadata document app").first.wait_for()
                await page.get_by_role("button", name="Allow").click()
                await page.wait_for_url(f"{CALLBACK}**")

            async def callback_handler():
                return codes[-1]

            provider = OAuthClientProvider(
                server_url=srv.mcp_url,
                client_metadata=OAuthClientMetadata(client_name="ignored", redirect_uris=[CALLBACK],
                                                    token_endpoint_auth_method="none"),
                storage=Memory(),
                redirect_handler=redirect_handler,
                callback_handler=callback_handler,
                client_metadata_url=f"{base}/client.json",
            )
            async with create_mcp_http_client(auth=provider) as http:
                async with Client(streamable_http_client(srv.mcp_url, http_client=http), mode="legacy") as client:
                    me = (await client.call_tool("whoami", {})).structured_content
                    assert me["person"]["id"] == "alice", me
            assert provider.context.client_info.client_id == f"{base}/client.json"
            await browser.close()
        clients = srv.admin("GET", "/admin/v1/oauth/clients")["clients"]
        assert [c["kind"] for c in clients] == ["metadata_document"], clients
    finally:
        stop_server(srv, dbname)
        httpd.shutdown()
