"""The admin half of the console, tried as a new admin would in headless Chromium (Playwright,
laptop and phone sizes, screenshots kept in $LIAISON_TEST_ARTIFACTS): the admin signs in with an
admin login link, adds a person and a channel with a policy (each change previewed first),
registers a webhook to a local receiver that verifies with the `standardwebhooks` package, sees a
refused delivery go dead and retries it once the receiver recovers, rotates the webhook secret
(both secrets verify during the overlap), rotates the signing key (an `a2a-sdk` client verifies
the card before, during, with its two signatures, and after the old key is retired), registers a
second liaison as a remote agent from its signed card and must accept its key change explicitly;
and finds every one of those changes in the audit log, via the console, with before and after."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import httpx
import jwt
import pytest
from a2a.client import A2ACardResolver
from a2a.utils.signing import create_signature_verifier
from playwright.async_api import async_playwright, expect
from standardwebhooks.webhooks import Webhook

from conftest import ARTIFACTS, CHROMIUM, LAPTOP, binary, shots, start_server, stop_server
from test_webhooks import Receiver

pytestmark = pytest.mark.anyio



async def card_and_keys(http, url):
    card = await A2ACardResolver(http, url).get_agent_card()
    jwks = (await http.get(f"{url}/.well-known/jwks.json")).json()
    return card, jwks


def verify(url, card, jwks) -> None:
    """Verifies the card's signatures as an a2a-sdk client does (raises when none verifies)."""
    def key_provider(kid, jku):
        for k in jwks["keys"]:
            if k["kid"] == kid:
                return jwt.PyJWK(k)
        raise jwt.PyJWKError(f"no key {kid} in this key set")

    create_signature_verifier(key_provider, ["ES256"])(card)


def kids(card) -> list[str]:
    return [jwt.get_unverified_header(f"{s.protected}..")["kid"] for s in card.signatures]


def wait(predicate, what: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def servers():
    os.environ["LIAISON_OUTBOX__ALLOW"] = "127.0.0.1"
    try:
        srv, db = start_server()
        remote, remote_db = start_server()
    finally:
        del os.environ["LIAISON_OUTBOX__ALLOW"]
    yield srv, remote
    stop_server(remote, remote_db)
    stop_server(srv, db)


async def test_an_admin_runs_liaison_from_the_browser_and_every_change_is_audited(servers):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (or set LIAISON_CHROMIUM)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    srv, remote = servers
    rx = Receiver()
    base = f"{srv.url}/console/admin"
    try:
        # The admin asks the CLI for her own admin login link (a plain one opens no admin page).
        env = {**os.environ, "LIAISON_ADMIN_TOKEN": srv.admin_token}
        made = subprocess.run([str(binary()), "login-link", "admin", "--admin", "--server", srv.url],
                              capture_output=True, text=True, env=env, timeout=30)
        assert made.returncode == 0, made.stderr
        link = json.loads(made.stdout)["url"]
        assert json.loads(made.stdout)["link"]["admin"] is True
        async with async_playwright() as pw, httpx.AsyncClient(timeout=30) as http:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                               args=["--no-sandbox", "--disable-dev-shm-usage"])
            laptop = await browser.new_context(viewport=LAPTOP)
            page = await laptop.new_page()
            await page.goto(link)
            await page.get_by_role("button", name="Continue as Administrator").click()
            await page.get_by_role("link", name="Admin", exact=True).click()
            await expect(page).to_have_url(f"{base}/people")

            # A person: a bad id is refused next to its field, then the right one is added.
            await page.get_by_label("Id").fill("Dana Lee")
            await page.get_by_label("Display name").fill("Dana Lee")
            await page.get_by_role("button", name="Add", exact=True).click()
            await expect(page.get_by_role("alert")).to_contain_text("must be a slug")
            await page.get_by_label("Id").fill("dana")
            await page.get_by_role("button", name="Add", exact=True).click()
            await expect(page.get_by_role("list", name="People")).to_contain_text("Dana Lee")

            # A channel with a policy, each change previewed before it is applied.
            await page.get_by_role("link", name="Channels", exact=True).click()
            await page.get_by_label("Name").fill("launch")
            await page.get_by_label("Dana Lee (member)").check()
            await page.get_by_role("button", name="Preview").click()
            await expect(page.get_by_role("region", name="Preview")).to_contain_text("launch")
            assert srv.admin("GET", "/admin/v1/channels")["channels"] == [], "a preview changes nothing"
            await page.get_by_role("button", name="Apply").click()
            await expect(page).to_have_url(f"{base}/channels/launch")
            await page.get_by_label("code", exact=True).select_option("auto")
            await page.get_by_role("form", name="Approval policy").get_by_role("button", name="Preview").click()
            preview = page.get_by_role("region", name="Preview")
            await expect(preview.locator("pre.before")).to_contain_text('"code": "approve"')
            await expect(preview.locator("pre.after")).to_contain_text('"code": "auto"')
            await page.get_by_role("button", name="Apply").click()
            [launch] = srv.admin("GET", "/admin/v1/channels")["channels"]
            assert launch["policy"]["code"] == "auto" and launch["members"][0]["person"] == "dana"

            # A webhook to the local receiver; its secret is shown once.
            await page.get_by_role("link", name="Webhooks", exact=True).click()
            await page.get_by_label("URL").fill(rx.url)
            await page.get_by_label("message.created").check()
            await page.get_by_label("Only channel").select_option("launch")
            await page.get_by_role("button", name="Add", exact=True).click()
            first_secret = (await page.locator("#secret").text_content()).strip()
            assert first_secret.startswith("whsec_")
            [hook] = srv.admin("GET", "/admin/v1/webhooks")["webhooks"]
            assert first_secret not in json.dumps(hook)

            # The receiver refuses the test for good: the delivery is dead, and the page says so.
            rx.script = [410]
            await page.get_by_role("button", name=f"Send a test to {hook['id']}").click()
            rx.wait_for(1)
            await page.get_by_role("link", name="Deliveries", exact=True).click()
            dead = page.get_by_role("table", name="Deliveries").locator("tr", has_text="dead")
            await expect(dead).to_have_count(1, timeout=30_000)
            await shots(browser, laptop, f"{base}/deliveries", "admin-deliveries")
            # It recovers; the admin retries the dead delivery from its page.
            await dead.get_by_role("link").first.click()
            await expect(page.get_by_role("table", name="Attempts")).to_contain_text("410")
            await shots(browser, laptop, page.url, "admin-delivery")
            await page.get_by_role("button", name="Retry").click()
            rx.wait_for(2)
            assert [e["type"] for e in rx.events(first_secret)] == ["webhook.test", "webhook.test"]
            assert rx.got[0][0]["webhook-id"] == rx.got[1][0]["webhook-id"]
            await expect(page.locator(".facts")).to_contain_text("delivered", timeout=30_000)

            # Rotation with an overlap: both secrets verify what is sent meanwhile.
            await page.get_by_role("link", name="Webhooks", exact=True).click()
            await page.get_by_label(f"Overlap of {hook['id']}").select_option("24")
            await page.get_by_role("button", name=f"Rotate the secret of {hook['id']}").click()
            second_secret = (await page.locator("#secret").text_content()).strip()
            assert second_secret.startswith("whsec_") and second_secret != first_secret
            await page.get_by_role("button", name=f"Send a test to {hook['id']}").click()
            rx.wait_for(3)
            headers, body = rx.got[2]
            assert len(headers["webhook-signature"].split(" ")) == 2
            for secret in (first_secret, second_secret):
                assert Webhook(secret).verify(body, headers)["type"] == "webhook.test"
            await shots(browser, laptop, f"{base}/webhooks", "admin-webhooks")

            # The signing key: the SDK verifies the card before, during and after the rotation.
            before, jwks = await card_and_keys(http, srv.url)
            verify(srv.url, before, jwks)
            [old_kid] = kids(before)
            await page.get_by_role("link", name="Keys", exact=True).click()
            await page.get_by_role("button", name="Rotate").click()
            await expect(page.get_by_role("table", name="Signing keys").locator("tbody tr")).to_have_count(2)
            during, jwks = await card_and_keys(http, srv.url)
            assert len(kids(during)) == 2
            verify(srv.url, during, jwks)
            await shots(browser, laptop, f"{base}/keys", "admin-keys")
            page.once("dialog", lambda d: d.accept())  # retiring asks first
            await page.get_by_role("button", name=f"Retire {old_kid}").click()
            await expect(page.get_by_role("table", name="Signing keys").locator("tbody tr")).to_have_count(1)
            after, jwks = await card_and_keys(http, srv.url)
            assert old_kid not in kids(after)
            verify(srv.url, after, jwks)

            # A remote agent from its signed card; its key change waits for an explicit yes.
            await page.get_by_role("link", name="Remote agents", exact=True).click()
            await page.get_by_label("Card URL").fill(f"{remote.url}/.well-known/agent-card.json")
            await page.get_by_label("Name (the id agents address it by)").fill("helper")
            await page.get_by_role("button", name="Fetch and review the card").click()
            await expect(page.get_by_role("region", name="Card review")).to_contain_text("Ask the team")
            assert srv.admin("GET", "/admin/v1/remotes")["remotes"] == [], "reviewed, not stored yet"
            await page.get_by_role("button", name="Add helper").click()
            await expect(page.get_by_role("main")).to_contain_text("Added helper")
            [added] = srv.admin("GET", "/admin/v1/remotes")["remotes"]
            assert added["signed"] is True
            await page.goto(f"{base}/remotes/helper")
            remote.admin("POST", "/admin/v1/keys/rotate", {"overlap_s": 3600})
            await page.get_by_role("button", name="Refresh the card").click()
            preview = page.get_by_role("region", name="Preview")
            await expect(preview.get_by_role("button", name="Accept new keys")).to_be_visible()
            assert srv.admin("GET", "/admin/v1/remotes")["remotes"][0]["keys"] == added["keys"], "nothing updated"
            await shots(browser, laptop, f"{base}/remotes/helper", "admin-remote")
            await page.screenshot(path=str(ARTIFACTS / "admin-remote-keys-changed-laptop.png"), full_page=True)
            await preview.get_by_role("button", name="Accept new keys").click()
            await expect(page.get_by_role("button", name="Accept new keys")).to_have_count(0)
            assert len(srv.admin("GET", "/admin/v1/remotes")["remotes"][0]["keys"]) == 2

            # Every change is in the audit log, made by the admin via the console.
            await page.get_by_role("link", name="Audit", exact=True).click()
            await page.get_by_label("Event starts with").fill("channel.")
            await page.get_by_role("button", name="Filter").click()
            await expect(page.get_by_role("table", name="Audit entries").locator("tbody tr")).to_have_count(2)
            for name in ("people", "channels", "channels/launch", "parties", "remotes", "audit"):
                await shots(browser, laptop, f"{base}/{name}", "admin-" + name.replace("/", "-"))
            await browser.close()

        entries = srv.admin("GET", "/admin/v1/audit?actor=admin&limit=1000")["entries"]
        by_console = [e for e in entries if e.get("via") == "console"]
        events = [e["event"] for e in by_console]
        for expected in ("person.added", "channel.added", "channel.policy_changed", "webhook.added",
                         "webhook.tested", "delivery.retried", "webhook.secret_rotated", "key.rotated",
                         "key.retired", "remote.added", "remote.refreshed"):
            assert expected in events, (expected, events)
        policy = next(e for e in by_console if e["event"] == "channel.policy_changed")
        assert policy["before"]["policy"]["code"] == "approve" and policy["after"]["policy"]["code"] == "auto"
        person = next(e for e in by_console if e["event"] == "person.added")
        assert "before" not in person, "a person added was nothing before"
        assert person["after"]["display_name"] == "Dana Lee"
        text = json.dumps(entries)
        for secret in (first_secret, second_secret, srv.admin_token):
            assert secret not in text, "a secret reached the audit log"
    finally:
        rx.close()
