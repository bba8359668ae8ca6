"""The admin pages as an admin uses them every day, in headless Chromium (Playwright, laptop and
phone sizes, screenshots in $LIAISON_TEST_ARTIFACTS), on both backends (LIAISON_TEST_DATABASE_URL):

- a retired signing key stays listed (retired, when, how, and until when it is listed), both when
  an admin retires it and when its overlap ends;
- a removed webhook's endpoint says so on the deliveries page, offers no retry, and a retry by
  the API is refused with nothing changed (it would only die again);
- everything destructive asks first (dismissed: nothing changes), and removing your own admin
  row warns specially;
- people, tokens and the audit log (newest first) search, filter and page on the server, the query
  in the address, an empty result said;
- a member's rights are changed from what she holds now; the approval deadline is entered and
  shown in minutes, hours or days; a webhook's deliveries are one click away and its events change
  without a new secret; a remote agent's card is reviewed before it is stored; display names are
  editable, a refused one coming back as typed."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.async_api import async_playwright, expect

from conftest import ARTIFACTS, CHROMIUM, LAPTOP, binary, shots, start_server, stop_server
from test_webhooks import Receiver

pytestmark = pytest.mark.anyio


@pytest.fixture
def srv():
    os.environ["LIAISON_OUTBOX__ALLOW"] = "127.0.0.1"
    try:
        server, db = start_server()
    finally:
        del os.environ["LIAISON_OUTBOX__ALLOW"]
    yield server
    stop_server(server, db)


def admin_link(srv) -> str:
    env = {**os.environ, "LIAISON_ADMIN_TOKEN": srv.admin_token}
    made = subprocess.run([str(binary()), "login-link", "admin", "--admin", "--server", srv.url],
                          capture_output=True, text=True, env=env, timeout=30)
    assert made.returncode == 0, made.stderr
    return json.loads(made.stdout)["url"]


def refused(srv, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    try:
        srv.admin(method, path, body)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
    raise AssertionError(f"{method} {path} was not refused")


class Admin:
    """A signed-in admin's browser: a laptop page, and what each confirmation asked."""

    def __init__(self, pw, srv):
        self.pw, self.srv, self.asked = pw, srv, []

    async def __aenter__(self):
        if not os.path.exists(CHROMIUM):
            pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (or set LIAISON_CHROMIUM)")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.browser = await self.pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                     args=["--no-sandbox", "--disable-dev-shm-usage"])
        self.laptop = await self.browser.new_context(viewport=LAPTOP)
        self.page = await self.laptop.new_page()
        await self.page.goto(admin_link(self.srv))
        await self.page.get_by_role("button", name="Continue as Administrator").click()
        await self.page.get_by_role("link", name="Admin", exact=True).click()
        return self

    async def __aexit__(self, *exc):
        await self.browser.close()

    def answer(self, accept: bool):
        """The next confirmation is answered so, and its question kept in `asked`."""
        async def on(dialog):
            self.asked.append(dialog.message)
            await (dialog.accept() if accept else dialog.dismiss())
        self.page.once("dialog", on)

    async def open(self, path: str):
        await self.page.goto(f"{self.srv.url}/console/admin/{path}")

    async def shots(self, path: str, name: str):
        await shots(self.browser, self.laptop, f"{self.srv.url}/console/admin/{path}", name)


async def test_a_retired_key_stays_listed_and_a_removed_webhook_is_not_retried(srv):
    rx = Receiver()
    try:
        async with async_playwright() as pw, Admin(pw, srv) as a:
            page = a.page
            # Keys: rotate, then retire the old key; asked first, dismissed changes nothing.
            [old] = srv.admin("GET", "/admin/v1/keys")["keys"]
            await a.open("keys")
            await page.get_by_role("button", name="Rotate").click()
            ring = page.get_by_role("table", name="Signing keys").locator("tbody tr")
            await expect(ring).to_have_count(2)
            retired = page.get_by_role("table", name="Retired keys")
            await expect(retired).to_contain_text("No key retired")
            a.answer(False)
            await page.get_by_role("button", name=f"Retire {old['kid']}").click()
            await expect(ring).to_have_count(2)
            assert "cannot be undone" in a.asked[-1] and old["kid"] in a.asked[-1]
            assert len(srv.admin("GET", "/admin/v1/keys")["keys"]) == 2, "dismissed: nothing changed"
            a.answer(True)
            await page.get_by_role("button", name=f"Retire {old['kid']}").click()
            await expect(ring).to_have_count(1)
            row = retired.locator("tbody tr", has_text=old["kid"])
            await expect(row).to_contain_text("retired by an admin")
            # Times are <time datetime="…"> (read relative to now, exact on hover).
            from datetime import datetime
            instant = datetime.fromisoformat
            created = await row.locator("td[data-label='Created'] time").get_attribute("datetime")
            assert instant(created) == instant(old["created_at"]), (created, old["created_at"])
            until = await row.locator("td[data-label='Listed until'] time").get_attribute("datetime")
            assert instant(until) > instant(old["created_at"]), until
            await expect(page.get_by_role("main")).to_contain_text("stays listed for 30 days")
            assert [k["kid"] for k in srv.admin("GET", "/admin/v1/keys")["keys"]] != [old["kid"]]
            code, body = refused(srv, "POST", f"/admin/v1/keys/{old['kid']}/retire")
            assert code == 400 and "retired already" in json.dumps(body), body
            # A rotation without overlap: the key replaced is listed as retired, its overlap ended.
            [signing] = srv.admin("GET", "/admin/v1/keys")["keys"]
            srv.admin("POST", "/admin/v1/keys/rotate", {"overlap_s": 0})
            await page.reload()
            await expect(retired.locator("tbody tr", has_text=signing["kid"])).to_contain_text("its overlap ended")
            await expect(retired.locator("tbody tr")).to_have_count(2)
            await a.shots("keys", "admin-keys-retired")

            # A webhook whose delivery died, then removed (asked first).
            rx.script = [410]
            hook = srv.admin("POST", "/admin/v1/webhooks", {"url": rx.url, "events": ["approval.pending"]})["webhook"]
            srv.admin("POST", f"/admin/v1/webhooks/{hook['id']}/test")
            rx.wait_for(1)
            endpoint = f"webhook:{hook['id']}"
            await a.open("deliveries")
            endpoints = page.get_by_role("table", name="Endpoints")
            await expect(endpoints.get_by_role("button", name=f"Retry every dead delivery of {endpoint}")).to_be_visible(timeout=30_000)
            await a.open("webhooks")
            a.answer(False)
            await page.get_by_role("button", name=f"Remove {hook['id']}").click()
            assert "cannot be enabled again" in a.asked[-1]
            await expect(page.get_by_role("list", name="Webhooks")).to_contain_text(hook["id"])
            a.answer(True)
            await page.get_by_role("button", name=f"Remove {hook['id']}").click()
            await expect(page.get_by_role("list", name="Webhooks")).not_to_contain_text(hook["id"])
            await a.open("deliveries")
            row = endpoints.locator("tr", has_text=endpoint)
            await expect(row).to_contain_text("webhook removed")
            await expect(row).not_to_contain_text("enabled")
            await expect(row.get_by_role("button")).to_have_count(0)
            deliveries = page.get_by_role("table", name="Deliveries")
            await expect(deliveries.locator("tr", has_text=endpoint).get_by_role("button")).to_have_count(0)
            await a.shots("deliveries", "admin-deliveries-removed-webhook")
        # The API refuses both retries, in words, and changes nothing.
        before = srv.admin("GET", "/admin/v1/deliveries?state=dead")["deliveries"]
        code, body = refused(srv, "POST", "/admin/v1/deliveries/retry", {"endpoint": endpoint})
        assert code == 400 and "was removed" in json.dumps(body), body
        dead = next(d for d in before if d["endpoint"] == endpoint)
        code, body = refused(srv, "POST", f"/admin/v1/deliveries/{dead['id']}/retry")
        assert code == 400 and "would die again" in json.dumps(body), body
        assert srv.admin("GET", "/admin/v1/deliveries?state=dead")["deliveries"] == before
        assert len(rx.got) == 1, "nothing was sent again"
    finally:
        rx.close()


async def test_destructive_changes_ask_first_and_your_own_row_warns(srv):
    srv.person("dana", "Dana Lee")
    token = srv.token("dana")
    srv.admin("POST", "/admin/v1/parties", {"id": "partner", "display_name": "Partner Inc"})
    async with async_playwright() as pw, Admin(pw, srv) as a:
        page = a.page
        await a.open("people")
        people = page.get_by_role("list", name="People")
        # Dismissed: nobody is removed.
        a.answer(False)
        await page.get_by_role("button", name="Remove dana").click()
        assert "Remove Dana Lee (dana)?" in a.asked[-1] and "never reused" in a.asked[-1]
        await expect(people).to_contain_text("Dana Lee")
        # Her own row warns that she signs herself out.
        a.answer(False)
        await page.get_by_role("button", name="Remove admin").click()
        assert "Remove yourself" in a.asked[-1] and "signed out" in a.asked[-1], a.asked[-1]
        await expect(people).to_contain_text("(you)")
        # A token revoked only once she says yes.
        a.answer(False)
        await page.get_by_role("button", name=f"Revoke {token['id']}").click()
        assert "Revoke token" in a.asked[-1] and "dana" in a.asked[-1]
        live = [t for t in srv.admin("GET", "/admin/v1/tokens")["tokens"] if t["id"] == token["id"]]
        assert "revoked_at" not in live[0]
        a.answer(True)
        await page.get_by_role("button", name=f"Revoke {token['id']}").click()
        await expect(page.get_by_role("list", name="Tokens").locator("li", has_text=token["id"])).to_contain_text("revoked")
        a.answer(True)
        await page.get_by_role("button", name="Remove dana").click()
        await expect(people).not_to_contain_text("Dana Lee")
        # A party, likewise.
        await a.open("parties")
        a.answer(False)
        await page.get_by_role("button", name="Remove party partner").click()
        assert "Remove party Partner Inc" in a.asked[-1]
        await expect(page.get_by_role("list", name="Parties")).to_contain_text("Partner Inc")
        a.answer(True)
        await page.get_by_role("button", name="Remove party partner").click()
        await expect(page.get_by_role("list", name="Parties")).not_to_contain_text("Partner Inc")
    persons = [p["id"] for p in srv.admin("GET", "/admin/v1/persons")["persons"]]
    assert "dana" not in persons and "partner" not in persons and "admin" in persons


async def test_people_tokens_and_the_audit_log_search_and_page_on_the_server(srv):
    for i in range(60):
        srv.person(f"user-{i:02d}", f"User {i:02d}")
    srv.person("zeta", "Zoë Zeta")
    srv.admin("POST", "/admin/v1/tokens", {"person": "zeta", "scopes": ["agent"], "description": "zeta's laptop"})
    revoked = srv.token("user-07")
    srv.admin("DELETE", f"/admin/v1/tokens/{revoked['id']}")
    async with async_playwright() as pw, Admin(pw, srv) as a:
        page = a.page
        await a.open("people")
        people = page.get_by_role("list", name="People").locator("li")
        await expect(people).to_have_count(50)
        await expect(page.get_by_role("navigation", name="Pages of people")).to_contain_text("page 1")
        await page.get_by_role("navigation", name="Pages of people").get_by_role("link", name="Next").click()
        assert parse_qs(urlparse(page.url).query)["page"] == ["2"]
        await expect(people).to_have_count(12)  # admin, 60 users, zeta: 62, by id
        await expect(people.last).to_contain_text("zeta")
        await page.get_by_role("navigation", name="Pages of people").get_by_role("link", name="Previous").click()
        await expect(people).to_have_count(50)
        # A search, any case, kept in the address and in the field.
        await page.get_by_role("searchbox", name="Search people").fill("ZOË")
        await page.get_by_role("button", name="Search").first.click()
        assert parse_qs(urlparse(page.url).query)["q"] == ["ZOË"]
        await expect(people).to_have_count(1)
        await expect(people).to_contain_text("Zoë Zeta")
        await expect(page.get_by_role("searchbox", name="Search people")).to_have_value("ZOË")
        await page.reload()
        await expect(people).to_have_count(1)
        await page.get_by_role("searchbox", name="Search people").fill("50%_")
        await page.get_by_role("button", name="Search").first.click()
        await expect(people).to_have_count(1)
        await expect(people).to_contain_text("No one matches this search.")
        # Tokens: newest first, filtered by state and text.
        await a.open("people?state=revoked")
        tokens = page.get_by_role("list", name="Tokens").locator("li")
        await expect(tokens).to_have_count(1)
        await expect(tokens).to_contain_text(revoked["id"])
        await page.get_by_role("searchbox", name="Search tokens").fill("laptop")
        await page.get_by_label("State").select_option("live")
        await page.get_by_role("form", name="Search tokens").get_by_role("button", name="Search").click()
        query = parse_qs(urlparse(page.url).query)
        assert query["tq"] == ["laptop"] and query["state"] == ["live"], page.url
        await expect(tokens).to_have_count(1)
        await expect(tokens).to_contain_text("zeta's laptop")
        await page.get_by_role("searchbox", name="Search tokens").fill("nothing-like-this")
        await page.get_by_role("form", name="Search tokens").get_by_role("button", name="Search").click()
        await expect(tokens).to_contain_text("No token matches this search.")
        await a.shots("people?q=user-1&tq=nothing-like-this", "admin-people-search")
        # A page number that is not one: refused in words, with the page kept.
        response = await page.goto(f"{srv.url}/console/admin/people?page=abc")
        assert response.status == 400
        await expect(page.get_by_role("alert")).to_contain_text("page must be a page number")
        response = await page.goto(f"{srv.url}/console/admin/people?kind=robot")
        assert response.status == 400
        await expect(page.get_by_role("alert")).to_contain_text("kind must be member, external or remote")

        # The audit log: newest first, a page of 50, older pages by link, the filter kept.
        await a.open("audit")
        rows = page.get_by_role("table", name="Audit entries").locator("tbody tr")
        await expect(rows).to_have_count(50)
        seqs = [int(s) for s in await rows.locator("td[data-label='#']").all_text_contents()]
        assert seqs == sorted(seqs, reverse=True), seqs
        await expect(rows.first).to_contain_text("link.admin_login_issued")  # her sign-in, the newest
        await page.get_by_role("link", name="Older").click()
        older = [int(s) for s in await rows.locator("td[data-label='#']").all_text_contents()]
        assert older and max(older) < min(seqs) and older == sorted(older, reverse=True)
        await page.get_by_role("link", name="Newest").click()
        await expect(rows.first).to_contain_text("link.admin_login_issued")
        await page.get_by_label("Event starts with").fill("token.")
        await page.get_by_role("button", name="Filter").click()
        assert parse_qs(urlparse(page.url).query)["event"] == ["token."]
        events = await rows.locator("td[data-label='Event'] code").all_text_contents()
        assert events[0] == "token.revoked" and all(e.startswith("token.") for e in events), events
        await page.get_by_label("Event starts with").fill("nothing.")
        await page.get_by_role("button", name="Filter").click()
        await expect(rows).to_contain_text("No entry matches this filter.")
        await a.shots("audit", "admin-audit-newest")


async def test_rights_deadlines_webhook_events_remote_review_and_names(srv):
    rx = Receiver()
    remote, remote_db = start_server()
    try:
        srv.person("dana", "Dana Lee")
        srv.person("eli", "Eli Park")
        srv.admin("POST", "/admin/v1/channels", {"name": "launch", "members": ["eli"]})
        srv.admin("POST", "/admin/v1/channels/launch/members",
                  {"add": ["dana"], "rights": ["read", "post"]})
        async with async_playwright() as pw, Admin(pw, srv) as a:
            page = a.page
            # The rights editor starts from what Dana holds now.
            await a.open("channels/launch")
            await page.get_by_label("Change the rights of dana").click()
            rights = page.get_by_role("form", name="Rights of dana")
            for right, held in (("read", True), ("post", True), ("request", False), ("approve", False)):
                box = rights.get_by_label(right)
                await (expect(box).to_be_checked() if held else expect(box).not_to_be_checked())
            await rights.get_by_label("request").check()
            await rights.get_by_role("button", name="Preview").click()
            await page.get_by_role("region", name="Preview").get_by_role("button", name="Apply").click()
            [launch] = srv.admin("GET", "/admin/v1/channels")["channels"]
            dana = next(m for m in launch["members"] if m["person"] == "dana")
            assert sorted(dana["rights"]) == ["post", "read", "request"], dana
            # The approval deadline in human units: a day is shown as 1 day; 2 hours is stored
            # as 7200 seconds and shown as 2 hours.
            policy = page.get_by_role("form", name="Approval policy")
            await expect(policy.get_by_label("Approval deadline", exact=True)).to_have_value("1")
            await expect(policy.get_by_label("Unit of the approval deadline")).to_have_value("days")
            await policy.get_by_label("Approval deadline", exact=True).fill("2")
            await policy.get_by_label("Unit of the approval deadline").select_option("hours")
            await policy.get_by_role("button", name="Preview").click()
            await page.get_by_role("region", name="Preview").get_by_role("button", name="Apply").click()
            [launch] = srv.admin("GET", "/admin/v1/channels")["channels"]
            assert launch["policy"]["approval_ttl_s"] == 7200, launch["policy"]
            await expect(policy.get_by_label("Approval deadline", exact=True)).to_have_value("2")
            await expect(policy.get_by_label("Unit of the approval deadline")).to_have_value("hours")
            # Refused: her value and unit come back, nothing changed.
            await policy.get_by_label("Approval deadline", exact=True).fill("1.5")
            await policy.get_by_label("Unit of the approval deadline").select_option("days")
            await policy.get_by_role("button", name="Preview").click()
            await expect(page.get_by_role("alert")).to_contain_text("whole number of days")
            await expect(policy.get_by_label("Approval deadline", exact=True)).to_have_value("1.5")
            await expect(policy.get_by_label("Unit of the approval deadline")).to_have_value("days")
            assert srv.admin("GET", "/admin/v1/channels")["channels"][0]["policy"]["approval_ttl_s"] == 7200
            await a.shots("channels/launch", "admin-channel-rights")

            # A webhook's events change; its secret stays; its deliveries are one click away.
            await a.open("webhooks")
            await page.get_by_label("URL").fill(rx.url)
            await page.get_by_role("form", name="Add a webhook").get_by_label("message.created").check()
            await page.get_by_role("button", name="Add", exact=True).click()
            secret = (await page.locator("#secret").text_content()).strip()
            [hook] = srv.admin("GET", "/admin/v1/webhooks")["webhooks"]
            await page.get_by_label(f"Change the events of {hook['id']}").click()
            events = page.get_by_role("form", name=f"Events of {hook['id']}")
            await expect(events.get_by_label("message.created")).to_be_checked()
            await events.get_by_label("message.created").uncheck()
            await events.get_by_role("button", name="Save events").click()
            await expect(page.get_by_role("alert")).to_contain_text("name at least one event")
            await expect(page.get_by_role("form", name=f"Events of {hook['id']}").get_by_label("message.created")).not_to_be_checked()
            events = page.get_by_role("form", name=f"Events of {hook['id']}")
            await events.get_by_label("approval.pending").check()
            await events.get_by_label("task.updated").check()
            await events.get_by_role("button", name="Save events").click()
            await expect(page.get_by_role("list", name="Webhooks")).to_contain_text("approval.pending, task.updated")
            [hook] = srv.admin("GET", "/admin/v1/webhooks")["webhooks"]
            assert hook["events"] == ["approval.pending", "task.updated"], hook
            await page.get_by_role("button", name=f"Send a test to {hook['id']}").click()
            rx.wait_for(1)
            assert [e["type"] for e in rx.events(secret)] == ["webhook.test"], "the secret did not change"
            await a.shots("webhooks", "admin-webhooks-events")
            await page.get_by_role("link", name=f"Deliveries of {hook['id']}").click()
            assert parse_qs(urlparse(page.url).query)["endpoint"] == [f"webhook:{hook['id']}"]
            await expect(page.get_by_role("table", name="Deliveries").locator("tbody tr", has_text="webhook.test")).to_have_count(1)

            # A remote agent's card is reviewed before anything is stored.
            await a.open("remotes")
            await page.get_by_label("Card URL").fill(f"{remote.url}/.well-known/agent-card.json")
            await page.get_by_label("Name (the id agents address it by)").fill("helper")
            await page.get_by_label("launch").check()
            await page.get_by_role("button", name="Fetch and review the card").click()
            review = page.get_by_role("region", name="Card review")
            await expect(review).to_contain_text("signed")
            await expect(review).to_contain_text("addressed as helper")
            await expect(review.get_by_role("table", name="Interfaces")).to_contain_text("JSONRPC")
            await expect(review.get_by_role("list", name="Skills")).to_contain_text("Ask the team")
            await expect(review).to_contain_text("launch")
            assert srv.admin("GET", "/admin/v1/remotes")["remotes"] == [], "a review stores nothing"
            await expect(page.get_by_label("Name (the id agents address it by)")).to_have_value("helper")
            await expect(page.get_by_label("launch")).to_be_checked()
            await page.screenshot(path=str(ARTIFACTS / "admin-remote-review-laptop.png"), full_page=True)
            await page.set_viewport_size({"width": 390, "height": 844})
            wide = await page.evaluate("document.documentElement.scrollWidth")
            assert wide <= 390, f"the review is {wide} px wide on a phone"
            await page.screenshot(path=str(ARTIFACTS / "admin-remote-review-phone.png"), full_page=True)
            await page.set_viewport_size(LAPTOP)
            await page.get_by_role("button", name="Add helper").click()
            await expect(page).to_have_url(f"{srv.url}/console/admin/remotes")
            await expect(page.get_by_role("main")).to_contain_text("Added helper")
            [added] = srv.admin("GET", "/admin/v1/remotes")["remotes"]
            assert added["signed"] is True and added["channels"] == ["launch"]

            # Display names: a refused one comes back as typed; an accepted one shows at once.
            await a.open("people")
            await page.get_by_label("Rename dana").click()
            name = page.get_by_label("New name of dana")
            await expect(name).to_have_value("Dana Lee")
            await name.fill("\u200b \u200b")  # nothing visible
            await page.get_by_role("form", name="Renaming dana").get_by_role("button", name="Save").click()
            await expect(page.get_by_role("alert")).to_contain_text("display_name must be one line")
            await expect(page.get_by_label("New name of dana")).to_have_value("\u200b \u200b")
            await page.get_by_label("New name of dana").fill("Dana Q. Lee")
            await page.get_by_role("form", name="Renaming dana").get_by_role("button", name="Save").click()
            await expect(page.get_by_role("list", name="People")).to_contain_text("Dana Q. Lee")
            dana = next(p for p in srv.admin("GET", "/admin/v1/persons")["persons"] if p["id"] == "dana")
            assert dana["display_name"] == "Dana Q. Lee"
            await a.shots("people", "admin-people-rename")
            await a.shots("remotes", "admin-remotes-added")
        entries = srv.admin("GET", "/admin/v1/audit?actor=admin&limit=1000")["entries"]
        events = {e["event"]: e for e in entries if e.get("via") == "console"}
        assert events["person.renamed"]["before"]["display_name"] == "Dana Lee"
        assert events["person.renamed"]["after"]["display_name"] == "Dana Q. Lee"
        assert events["webhook.events_changed"]["after"] == {"events": ["approval.pending", "task.updated"]}
        assert secret not in json.dumps(entries)
    finally:
        rx.close()
        stop_server(remote, remote_db)


async def test_with_more_people_than_a_form_lists_its_person_is_typed(srv):
    """Past 200 people no form carries a drop-down of the whole directory: the token, login
    link, webhook, new channel and new member forms take a typed id (the first 200 offered as
    suggestions); a typed id works as a chosen one did, an unknown one is refused in words with
    what was typed kept, and nothing is made."""
    async with async_playwright() as pw, Admin(pw, srv) as a:
        page = a.page
        await a.open("people")
        # Few people: the forms choose from a drop-down.
        assert await page.locator("select#token-person").count() == 1
        for i in range(201):
            srv.person(f"p-{i:03d}", f"Person {i:03d}")
        await a.open("people")
        for field in ("token-person", "link-person"):
            assert await page.locator(f"select#{field}").count() == 0, field
            hints = page.locator(f"#{field}-choices option")
            assert await hints.count() == 200, field
        # The last person is past the suggestions, and a typed id issues her token all the same.
        form = page.get_by_role("form", name="Issue a token")
        await form.get_by_label("For").fill("p-200")
        await form.get_by_label("agent").check()
        await form.get_by_label("Description").fill("typed id")
        await form.get_by_role("button", name="Issue").click()
        await expect(page.locator("main")).to_contain_text("for p-200")
        tokens = srv.admin("GET", "/admin/v1/tokens")
        assert any(t["person"] == "p-200" and t["description"] == "typed id" for t in tokens["tokens"]), tokens
        before = len(tokens["tokens"])
        # An id nobody holds: refused next to the form, what was typed kept, no token.
        form = page.get_by_role("form", name="Issue a token")
        await form.get_by_label("For").fill("nobody-here")
        await form.get_by_label("Description").fill("kept")
        await form.get_by_role("button", name="Issue").click()
        form = page.get_by_role("form", name="Issue a token")
        await expect(form.get_by_role("alert")).to_be_visible()
        await expect(form.get_by_label("For")).to_have_value("nobody-here")
        await expect(form.get_by_label("Description")).to_have_value("kept")
        assert len(srv.admin("GET", "/admin/v1/tokens")["tokens"]) == before

        # A new channel's members and a new member, typed.
        await a.open("channels")
        assert await page.locator("input[name^='member-']").count() == 0
        new = page.get_by_role("form", name="Add a channel")
        await new.get_by_label("Name").fill("crowd")
        await new.get_by_label("Their ids, separated by commas").fill("p-199, p-200")
        await new.get_by_role("button", name="Preview").click()
        await page.get_by_role("button", name="Apply").click()
        await expect(page).to_have_url(f"{srv.url}/console/admin/channels/crowd")
        members = page.get_by_role("table", name="Members")
        await expect(members).to_contain_text("Person 199")
        await expect(members).to_contain_text("Person 200")
        add = page.get_by_role("form", name="Add or change a member")
        assert await add.locator("select#member-add").count() == 0
        await add.get_by_label("Person").fill("p-150")
        await add.get_by_role("button", name="Preview").click()
        await page.get_by_role("button", name="Apply").click()
        await expect(page.get_by_role("table", name="Members")).to_contain_text("Person 150")
        await a.shots("channels/crowd", "admin-channel-typed-member")

        # A webhook's person filter, typed or left empty for anyone.
        await a.open("webhooks")
        assert await page.locator("select#webhook-person").count() == 0
        await expect(page.locator("#webhook-person")).to_have_attribute("placeholder", "anyone: leave empty")
        await a.shots("people", "admin-people-typed-person")


def test_people_and_tokens_search_and_page_from_the_api_and_the_cli(srv):
    """The console's searches are the API's and the CLI's too: `q`, a kind or state and `page` on
    `/admin/v1/persons` and `/admin/v1/tokens`, `--search`, `--kind`/`--state` and `--page` on
    `person list` and `token list`, the table ending with the next page's flag while more follow.
    Every bad search is refused in words; without a search the lists answer whole, as before."""
    for i in range(60):
        srv.person(f"user-{i:02d}", f"User {i:02d}")
    first = srv.admin("GET", "/admin/v1/persons?q=USER-")
    assert [p["id"] for p in first["persons"]] == [f"user-{i:02d}" for i in range(50)]
    assert first["page"] == 1 and first["next_page"] == 2
    second = srv.admin("GET", "/admin/v1/persons?q=user-&page=2")
    assert len(second["persons"]) == 10 and second["next_page"] is None
    assert len(srv.admin("GET", "/admin/v1/persons")["persons"]) >= 61  # whole, unpaged
    assert srv.admin("GET", "/admin/v1/persons?kind=member&per_page=5")["next_page"] == 2
    revoked = srv.token("user-07")
    srv.admin("DELETE", f"/admin/v1/tokens/{revoked['id']}")
    found = srv.admin("GET", "/admin/v1/tokens?state=revoked")
    assert [t["id"] for t in found["tokens"]] == [revoked["id"]] and found["next_page"] is None
    for path, words in [
        ("/admin/v1/persons?page=abc", "page"),
        ("/admin/v1/persons?page=0", "page must be 1-1000"),
        ("/admin/v1/persons?per_page=500", "a page holds 1-200 rows"),
        ("/admin/v1/persons?kind=robot", "kind must be member, external or remote"),
        ("/admin/v1/persons?state=live", "people are searched by q, kind and page"),
        ("/admin/v1/persons?color=red", "color"),
        ("/admin/v1/persons?q=a%0Ab", "one line"),
        ("/admin/v1/tokens?state=lost", "state must be live, expired or revoked"),
        ("/admin/v1/tokens?person=user-07&q=x", "not both"),
        ("/admin/v1/tokens?kind=member", "tokens are searched by q, state and page"),
    ]:
        status, body = refused(srv, "GET", path)
        assert status == 400 and words in body["error"]["message"], (path, body)

    env = {**os.environ, "LIAISON_ADMIN_TOKEN": srv.admin_token}

    def cli(*args):
        return subprocess.run([str(binary()), *args, "--server", srv.url], capture_output=True, text=True,
                              env=env, timeout=30)

    listed = cli("person", "list", "--search", "user-")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.strip().splitlines()
    assert lines[0].startswith("ID") and len(lines) == 52 and lines[-1] == "(more: --page 2)", listed.stdout
    listed = cli("person", "list", "--search", "user-", "--page", "2")
    assert listed.returncode == 0 and "(more" not in listed.stdout and "user-59" in listed.stdout, listed.stdout
    listed = cli("person", "list", "--kind", "robot")
    assert listed.returncode != 0 and "kind must be member, external or remote" in listed.stderr, listed.stderr
    listed = cli("token", "list", "--state", "revoked")
    assert listed.returncode == 0 and revoked["id"] in listed.stdout and "(more" not in listed.stdout, listed.stdout
    listed = cli("token", "list", "--person", "user-07", "--search", "x")
    assert listed.returncode != 0 and "cannot be used with" in listed.stderr, listed.stderr
    listed = cli("person", "list")
    assert listed.returncode == 0 and "user-59" in listed.stdout and "(more" not in listed.stdout
