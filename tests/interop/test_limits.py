"""Per-client limits on every front, against the real binary with small limits configured:

- a token beyond its rate gets HTTP 429 + Retry-After (admin, MCP, A2A HTTP+JSON), a JSON-RPC error
  with HTTP 429 + Retry-After (A2A JSON-RPC), or RESOURCE_EXHAUSTED with RetryInfo (A2A gRPC);
- a party holds at most `streams_per_party` A2A streams; a token at most `sessions_per_token` MCP
  sessions (the longest idle one is closed to make room; none idle: `too_many_sessions`);
- MCP SSE replies carry keep-alive comments;
- a credential that keeps failing to authenticate is refused before it is read, while a valid one
  from the same address is not; only many distinct bad credentials get the address refused, while
  /healthz still answers.

Nothing asserts a duration: a limit is "reached within N calls", far more than any refill allows.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import uuid

import anyio
import grpc
import httpx
import pytest
from a2a.types import GetTaskRequest, a2a_pb2_grpc
from google.rpc import error_details_pb2, status_pb2

from conftest import start_server, stop_server
from prometheus_client.openmetrics.parser import text_string_to_metric_families

pytestmark = pytest.mark.anyio

MANY = 60
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def serve_with(tmp_path, config: str):
    path = tmp_path / "liaison.toml"
    path.write_text(config)
    srv, dbname = start_server("--demo", "--config", str(path))
    demo = json.loads((srv.data_dir / "demo.json").read_text())
    return srv, dbname, demo


def send_params(text: str) -> dict:
    return {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}}


def jsonrpc(method: str, params: dict) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).encode()


def a2a_headers(token: str) -> dict:
    return {"Authorization": f"Bearer {token}", "A2A-Version": "1.0", "Content-Type": "application/json"}


async def until_refused(send, refused, limit=MANY):
    """Calls `send()` until `refused(reply)`; fails if it never is."""
    for _ in range(limit):
        reply = await send()
        if refused(reply):
            return reply
    pytest.fail(f"not refused within {limit} calls")


def assert_retry_after(response: httpx.Response):
    assert response.status_code == 429, response.text
    assert int(response.headers["retry-after"]) >= 1



def refusals(srv) -> dict[str, float]:
    """`liaison_rate_limited_total` by reason, from a scrape of the (open) `/metrics`, once this
    address may scrape again (an address refused for failed logins waits on `/metrics` too)."""
    deadline = time.monotonic() + 30
    while (r := httpx.get(f"{srv.url}/metrics", timeout=30)).status_code == 429 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert r.status_code == 200, r.text
    text = r.text
    return {
        s.labels["reason"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "liaison_rate_limited_total"
    }


async def test_a_token_beyond_its_rate_is_refused_on_every_front(tmp_path, anyio_backend):
    srv, dbname, demo = serve_with(tmp_path, """
[limits]
agent = { per_s = 1, burst = 3 }
external = { per_s = 1, burst = 3 }
admin = { per_s = 1, burst = 3 }
""")
    try:
        partner, alice = demo["partner"]["agent_token"], demo["alice"]["agent_token"]
        async with httpx.AsyncClient(timeout=30) as http:
            # A2A JSON-RPC: the error object of the binding, HTTP 429, Retry-After.
            r = await until_refused(
                lambda: http.post(f"{srv.url}/a2a/jsonrpc", headers=a2a_headers(partner),
                                  content=jsonrpc("ListTasks", {})),
                lambda r: r.status_code != 200,
            )
            assert_retry_after(r)
            body = r.json()
            assert body["jsonrpc"] == "2.0" and body["id"] == 7
            assert body["error"]["code"] == -32000
            info = body["error"]["data"][0]
            assert info["reason"] == "RESOURCE_EXHAUSTED"
            assert int(info["metadata"]["retryAfterSeconds"]) >= 1
            # A2A HTTP+JSON, same token: AIP-193 with RESOURCE_EXHAUSTED.
            r = await until_refused(
                lambda: http.get(f"{srv.url}/a2a/rest/tasks", headers=a2a_headers(partner)),
                lambda r: r.status_code != 200,
            )
            assert_retry_after(r)
            assert r.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
            assert r.json()["error"]["code"] == 429
            # MCP, an agent token: the API's JSON error.
            r = await until_refused(
                lambda: http.post(srv.mcp_url, headers={**MCP_HEADERS, "Authorization": f"Bearer {alice}"},
                                  content=json.dumps(INITIALIZE)),
                lambda r: r.status_code != 200,
            )
            assert_retry_after(r)
            assert r.json()["error"]["code"] == "rate_limited"
        # A2A gRPC: RESOURCE_EXHAUSTED with ErrorInfo and RetryInfo.
        target = urllib.parse.urlsplit(srv.url).netloc
        async with grpc.aio.insecure_channel(target) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            metadata = (("authorization", f"Bearer {partner}"), ("a2a-version", "1.0"))

            async def get_task():
                try:
                    await stub.GetTask(GetTaskRequest(id="thr_" + "0" * 32), metadata=metadata)
                except grpc.aio.AioRpcError as e:
                    return e
                return None

            error = await until_refused(get_task, lambda e: e is not None and e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED)
            status = next(status_pb2.Status.FromString(v) for k, v in error.trailing_metadata() if k == "grpc-status-details-bin")
            kinds = {d.type_url.rsplit("/", 1)[1]: d for d in status.details}
            retry = error_details_pb2.RetryInfo()
            kinds["google.rpc.RetryInfo"].Unpack(retry)
            assert retry.retry_delay.seconds >= 1
            assert "google.rpc.ErrorInfo" in kinds
        # The admin API (last: it is this server's only admin token).
        async with httpx.AsyncClient(timeout=30) as http:
            r = await until_refused(
                lambda: http.get(f"{srv.url}/admin/v1/persons", headers={"Authorization": f"Bearer {srv.admin_token}"}),
                lambda r: r.status_code != 200,
            )
            assert_retry_after(r)
            assert r.json()["error"]["code"] == "rate_limited"
        # Every refusal was counted, by the class of the token refused (JSON-RPC, HTTP+JSON and
        # gRPC for the party; MCP for the agent; the admin API), and none as a failed login.
        counted = refusals(srv)
        assert counted["external"] >= 3 and counted["agent"] >= 1 and counted["admin"] >= 1, counted
        assert counted["human"] == 0 and counted["auth_failures"] == 0, counted
        assert counted["auth_failures_address"] == 0, counted
    finally:
        stop_server(srv, dbname)


@pytest.fixture(scope="module")
def bounded(tmp_path_factory):
    srv, dbname, demo = serve_with(tmp_path_factory.mktemp("bounded"), """
[limits]
streams_per_party = 2
[mcp]
sessions_per_token = 2
sse_keep_alive_s = 1
""")
    yield srv, demo
    stop_server(srv, dbname)


async def test_a_party_holds_at_most_its_streams_and_a_closed_one_frees_its_place(bounded, anyio_backend):
    srv, demo = bounded
    headers = a2a_headers(demo["partner"]["agent_token"])
    rest = f"{srv.url}/a2a/rest/message:stream"
    async with httpx.AsyncClient(timeout=30) as http:
        async with http.stream("POST", rest, headers=headers, json=send_params("one")) as first:
            assert first.status_code == 200
            async with http.stream("POST", rest, headers=headers, json=send_params("two")) as second:
                assert second.status_code == 200
                third = await http.post(rest, headers=headers, json=send_params("three"))
                assert third.status_code == 429, third.text
                assert third.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
                assert "at most 2" in third.json()["error"]["message"]
                rpc = await http.post(f"{srv.url}/a2a/jsonrpc", headers=headers,
                                      content=jsonrpc("SendStreamingMessage", send_params("four")))
                assert rpc.status_code == 429
                assert rpc.json()["error"]["code"] == -32000
        # Both streams closed: their places are free again (the server notices the close).
        for _ in range(MANY):
            async with http.stream("POST", rest, headers=headers, json=send_params("again")) as again:
                if again.status_code == 200:
                    break
            await anyio.sleep(0.1)
        else:
            pytest.fail("a closed stream never gave its place back")


async def mcp_session(http, url, token) -> httpx.Response:
    return await http.post(url, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"}, content=json.dumps(INITIALIZE))


def in_session(token: str, session: str) -> dict:
    return {**MCP_HEADERS, "Authorization": f"Bearer {token}", "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}


async def test_a_token_holds_at_most_its_mcp_sessions_and_streams_keep_alive(bounded, anyio_backend):
    srv, demo = bounded
    token = demo["bob"]["agent_token"]
    async with httpx.AsyncClient(timeout=30) as http:
        ids = []
        for _ in range(3):
            r = await mcp_session(http, srv.mcp_url, token)
            assert r.status_code == 200, r.text
            ids.append(r.headers["mcp-session-id"])
            done = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert (await http.post(srv.mcp_url, headers=in_session(token, ids[-1]), content=done)).status_code == 202
        # The third session closed the first (idle the longest).
        listed = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert (await http.post(srv.mcp_url, headers=in_session(token, ids[0]), content=listed)).status_code == 404
        assert (await http.post(srv.mcp_url, headers=in_session(token, ids[2]), content=listed)).status_code == 200
        # Another token cannot use this token's session.
        other = demo["alice"]["agent_token"]
        assert (await http.post(srv.mcp_url, headers=in_session(other, ids[2]), content=listed)).status_code == 404

        # Both live sessions busy with a long-poll: a new session is refused, nothing is closed.
        peek = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                           "params": {"name": "inbox", "arguments": {"consumer": "limits"}}})
        r = await http.post(srv.mcp_url, headers=in_session(token, ids[2]), content=peek)
        page = next(json.loads(l[5:]) for l in r.text.splitlines() if l.startswith("data:") and '"result"' in l)
        last = page["result"]["structuredContent"]["last"]
        wait = json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                           "params": {"name": "inbox", "arguments": {"consumer": "limits", "after": last, "wait_s": 4}}})
        async with http.stream("POST", srv.mcp_url, headers=in_session(token, ids[1]), content=wait) as one:
            async with http.stream("POST", srv.mcp_url, headers=in_session(token, ids[2]), content=wait) as two:
                assert one.status_code == 200 and two.status_code == 200
                refused = await mcp_session(http, srv.mcp_url, token)
                assert refused.status_code == 429, refused.text
                assert refused.json()["error"]["code"] == "too_many_sessions"
                # The long-poll's SSE reply carries keep-alive comments before its result.
                comments = 0
                async for line in one.aiter_lines():
                    if line.startswith(":"):
                        comments += 1
                    if line.startswith("data:") and '"result"' in line:
                        break
                assert comments >= 1
        assert (await http.post(srv.mcp_url, headers=in_session(token, ids[1]), content=listed)).status_code == 200


async def test_failed_authentications_cost_the_failing_credential_and_only_a_spray_the_address(tmp_path, anyio_backend):
    srv, dbname, demo = serve_with(tmp_path, """
[limits]
auth_failures = { per_s = 1, burst = 5 }
auth_failures_per_address = { per_s = 1, burst = 30 }
""")
    try:
        good = a2a_headers(demo["partner"]["agent_token"])
        bad = a2a_headers("lsn_wrong")
        admin = {"Authorization": f"Bearer {srv.admin_token}"}
        async with httpx.AsyncClient(timeout=30) as http:
            r = await until_refused(
                lambda: http.post(f"{srv.url}/a2a/jsonrpc", headers=bad, content=jsonrpc("ListTasks", {})),
                lambda r: r.status_code == 429,
            )
            # The bad token waits, in each front's shape, before it is read.
            assert_retry_after(r)
            assert r.json()["error"]["code"] == -32000
            r = await http.get(f"{srv.url}/a2a/rest/tasks", headers=bad)
            assert_retry_after(r)
            assert r.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
            # A valid token from the same address does not, nor the admin's.
            r = await http.post(f"{srv.url}/a2a/jsonrpc", headers=good, content=jsonrpc("ListTasks", {}))
            assert r.status_code == 200 and "result" in r.json(), r.text
            assert (await http.get(f"{srv.url}/a2a/rest/tasks", headers=good)).status_code == 200
            assert (await http.get(f"{srv.url}/admin/v1/persons", headers=admin)).status_code == 200

            # Many distinct bad tokens from the address: the backstop refuses the address.
            sprayed = iter(range(MANY * 10))
            await until_refused(
                lambda: http.post(f"{srv.url}/a2a/jsonrpc", headers=a2a_headers(f"lsn_sprayed_{next(sprayed)}"),
                                  content=jsonrpc("ListTasks", {})),
                lambda r: r.status_code == 429,
                limit=MANY * 10,
            )
            # Now even a valid token from this address waits, in each front's shape.
            r = await http.post(f"{srv.url}/a2a/jsonrpc", headers=good, content=jsonrpc("ListTasks", {}))
            assert_retry_after(r)
            assert r.json()["error"]["code"] == -32000
            r = await http.get(f"{srv.url}/a2a/rest/tasks", headers=good)
            assert_retry_after(r)
            assert r.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
            r = await http.get(f"{srv.url}/admin/v1/persons", headers=admin)
            assert_retry_after(r)
            assert r.json()["error"]["code"] == "rate_limited"
            # Health checks are never refused.
            assert (await http.get(f"{srv.url}/healthz")).status_code == 200
        # The bad token's refusals count as auth_failures; the address's (the three refusals of a
        # valid token above, and the spray's first 429) as auth_failures_address.
        counted = refusals(srv)
        assert counted["auth_failures"] >= 2 and counted["auth_failures_address"] >= 4, counted
        assert counted["external"] == 0, counted
    finally:
        stop_server(srv, dbname)
