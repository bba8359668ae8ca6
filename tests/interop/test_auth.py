"""Bearer authentication on /mcp: refused before any MCP session exists, with a challenge that points
at the protected-resource metadata."""

import json
import time
import urllib.error
import urllib.request

import anyio
import pytest

from conftest import call, connect

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}


def post_mcp(server, token=None, extra=None):
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    headers.update(extra or {})
    req = urllib.request.Request(server.mcp_url, data=json.dumps(INITIALIZE).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def assert_refused(server, token, status=401, code=None):
    got, headers, body = post_mcp(server, token)
    assert got == status, body
    assert "mcp-session-id" not in {k.lower() for k in headers}
    challenge = headers.get("WWW-Authenticate") or headers.get("www-authenticate")
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{server.url}/.well-known/oauth-protected-resource"' in challenge
    if code:
        assert json.loads(body)["error"]["code"] == code
    return challenge


def test_missing_unknown_revoked_and_expired_tokens_get_401_before_any_session(server):
    assert_refused(server, None, code="unauthenticated")
    assert_refused(server, "lsn_not-a-real-token", code="unauthenticated")

    revoked = server.token("alice")
    server.admin("DELETE", f"/admin/v1/tokens/{revoked['id']}")
    challenge = assert_refused(server, revoked["secret"], code="token_revoked")
    assert 'error="invalid_token"' in challenge

    expiring = server.token("alice", expires_in_s=1)
    time.sleep(2.1)
    assert_refused(server, expiring["secret"], code="token_expired")


def test_an_admin_only_token_gets_403_and_an_agent_token_cannot_reach_admin_routes(server, tokens):
    admin_only = server.token("alice", scopes=("admin",))
    challenge = assert_refused(server, admin_only["secret"], status=403, code="forbidden")
    assert 'error="insufficient_scope"' in challenge
    with pytest.raises(urllib.error.HTTPError) as e:
        server.admin("GET", "/admin/v1/persons", token=tokens["alice"])
    assert e.value.code == 403


def test_a_valid_token_opens_a_session_and_the_metadata_is_public(server, tokens):
    status, headers, _ = post_mcp(server, tokens["alice"])
    assert status == 200
    assert any(k.lower() == "mcp-session-id" for k in headers)
    with urllib.request.urlopen(f"{server.url}/.well-known/oauth-protected-resource", timeout=10) as r:
        doc = json.loads(r.read())
    assert doc["resource"] == server.mcp_url
    assert doc["bearer_methods_supported"] == ["header"]


def test_foreign_hosts_and_origins_are_refused(server, tokens):
    status, _, _ = post_mcp(server, tokens["alice"], {"Host": "evil.example.com"})
    assert status == 403
    status, _, _ = post_mcp(server, tokens["alice"], {"Origin": "https://evil.example.com"})
    assert status == 403
    status, _, _ = post_mcp(server, tokens["alice"], {"Origin": server.url})
    assert status == 200


@pytest.mark.anyio
async def test_a_person_outside_a_channel_sees_no_trace_of_it(server, tokens):
    async with connect(server, tokens["carol"]) as carol:
        me = await call(carol, "whoami")
        assert me["channels"] == []
        result = await carol.call_tool("post", {"kind": "question", "channel": "demo", "body": "hi?"})
        assert result.is_error and result.structured_content["error"]["code"] == "not_found"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_token_revoked_mid_session_is_refused_on_its_next_request(server, mode):
    issued = server.token("alice")
    exchanges = []
    async with connect(server, issued["secret"], mode, exchanges=exchanges) as alice:
        assert (await call(alice, "whoami"))["person"]["id"] == "alice"
        assert all(e.status < 400 for e in exchanges), exchanges
        server.admin("DELETE", f"/admin/v1/tokens/{issued['id']}")
        seen = len(exchanges)
        with anyio.fail_after(20):
            try:
                result = await alice.call_tool("whoami", {})
            except Exception:  # the SDK may raise on the HTTP error; what the server said is below
                result = None
        answered = exchanges[seen:]
    # The next request was refused by the HTTP layer as the revoked token it carried: 401 with the
    # Bearer challenge and token_revoked, not an error of another kind (a crash, a 5xx, a reset).
    assert result is None or result.is_error, result
    posts = [e for e in answered if e.method == "POST"]
    assert posts, answered
    refused = posts[0]
    assert refused.status == 401, refused
    assert 'error="invalid_token"' in refused.headers["www-authenticate"], refused
    assert json.loads(refused.body)["error"]["code"] == "token_revoked", refused


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_long_poll_of_a_token_that_expires_ends_and_hands_it_nothing_later(server, tokens, mode):
    # bob's token expires 2 s from now while his agent long-polls; alice posts after that.
    issued = server.token("bob", expires_in_s=2)
    async with connect(server, issued["secret"], mode) as bob, connect(server, tokens["alice"]) as alice:
        consumer = f"expiry-{mode}"
        # Caught up first, whatever earlier tests left for bob: the poll below must wait.
        drained = await call(bob, "inbox", consumer=consumer, wait_s=0)
        drained = await call(bob, "inbox", consumer=consumer, after=drained["last"], limit=1)
        drained["cursor"] = drained["last"]
        result = {}

        async def poll():
            result["r"] = await bob.call_tool("inbox", {"consumer": consumer, "after": drained["cursor"],
                                                        "wait_s": 30})

        with anyio.fail_after(25):
            async with anyio.create_task_group() as tg:
                tg.start_soon(poll)
                await anyio.sleep(3)  # past the expiry: the point is what comes after it
                body = f"after bob's token expired ({mode})"
                await call(alice, "post", kind="announce", channel="demo", body=body)
    r = result["r"]
    text = "\n".join(c.text for c in r.content if getattr(c, "type", "") == "text")
    assert body not in text, "an expired token's long-poll received an entry posted after its expiry"
    assert r.is_error and r.structured_content["error"]["code"] == "token_expired", text
