"""OpenTelemetry traces, received by an OTLP/HTTP receiver of the test's own (protobuf, decoded with
the official `opentelemetry-proto` package) from `serve --demo` with `[telemetry] otlp_endpoint`:

- one delegated task (the official `a2a-sdk` client sending a `traceparent`, an MCP agent on the
  official `mcp` SDK claiming and replying in requests of its own, the push to the client's
  receiver) arrives as **one connected trace**: every span of it descends from the client's span,
  the agent's claim and reply are in it (linked to the MCP requests they ran in), and the push
  receiver gets a `traceparent` naming the outbox attempt's span;
- an incoming `traceparent` is continued on each A2A binding (JSON-RPC, HTTP+JSON, gRPC), on MCP,
  on `/admin/v1` and on `/api/v1`; a malformed one starts a new trace instead;
- with no endpoint configured nothing is exported and outgoing pushes carry no `traceparent`.
"""

from __future__ import annotations

import http.server
import json
import os
import secrets
import threading
import time
import urllib.parse
import uuid

import grpc
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
    a2a_pb2_grpc,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from conftest import call, connect, start_server, stop_server
from test_a2a_push import Receiver, completed, state_of


class Collector:
    """An OTLP/HTTP trace receiver on 127.0.0.1:0: keeps every span it is sent."""

    def __init__(self):
        self.spans: list[dict] = []
        self.requests = 0
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                ok = self.path == "/v1/traces" and self.headers.get("Content-Type") == "application/x-protobuf"
                if ok:
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    collector.requests += 1
                    for rs in request.resource_spans:
                        resource = {a.key: a.value.string_value for a in rs.resource.attributes}
                        for ss in rs.scope_spans:
                            for s in ss.spans:
                                collector.spans.append({
                                    "trace": s.trace_id.hex(),
                                    "id": s.span_id.hex(),
                                    "parent": s.parent_span_id.hex(),
                                    "name": s.name,
                                    "kind": s.kind,
                                    "attributes": {a.key: a.value for a in s.attributes},
                                    "links": [(l.trace_id.hex(), l.span_id.hex()) for l in s.links],
                                    "service": resource.get("service.name"),
                                })
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def trace(self, trace_id: str) -> list[dict]:
        return [s for s in self.spans if s["trace"] == trace_id]

    def wait_for(self, predicate, what: str, timeout: float = 20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.05)
        names = sorted({(s["trace"][:8], s["name"]) for s in self.spans})
        raise AssertionError(f"timed out waiting for {what}; spans seen: {names}")

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def traceparent() -> tuple[str, str, str]:
    """A new client-side context: (header value, trace id, span id)."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def server_span(spans: list[dict], trace_id: str, parent: str) -> dict | None:
    """The server span (kind SERVER = 2) that continued the client's context."""
    return next((s for s in spans if s["trace"] == trace_id and s["parent"] == parent and s["kind"] == 2), None)


@pytest.fixture
def traced():
    collector = Collector()
    saved = {k: os.environ.get(k) for k in ("LIAISON_OUTBOX__ALLOW", "LIAISON_TELEMETRY__OTLP_ENDPOINT",
                                            "OTEL_BSP_SCHEDULE_DELAY", "RUST_LOG")}
    os.environ["LIAISON_OUTBOX__ALLOW"] = "127.0.0.1"
    # liaison's INFO lines, the access log among them, to find the trace id on them.
    os.environ["RUST_LOG"] = "warn,liaison=info"
    os.environ["LIAISON_TELEMETRY__OTLP_ENDPOINT"] = collector.url
    os.environ["OTEL_BSP_SCHEDULE_DELAY"] = "50"
    try:
        srv, dbname = start_server("--demo")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    yield srv, collector
    stop_server(srv, dbname)
    collector.close()


def user_message(text: str) -> Message:
    return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])


@pytest.mark.anyio
async def test_one_delegated_task_is_one_connected_trace_from_the_client_to_its_push_receiver(traced):
    srv, collector = traced
    demo = json.loads((srv.data_dir / "demo.json").read_text())
    partner, alice = demo["partner"]["agent_token"], demo["alice"]["agent_token"]
    header, trace_id, client_span = traceparent()
    rx = Receiver()
    try:
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {partner}",
                   "traceparent": header, "tracestate": "client=1"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            card = await A2ACardResolver(http, srv.url).get_agent_card()
            config = ClientConfig(streaming=False, httpx_client=http, supported_protocol_bindings=["JSONRPC"])
            client = ClientFactory(config).create(card)
            push = TaskPushNotificationConfig(url=rx.url, token="tok-" + uuid.uuid4().hex)
            req = SendMessageRequest(
                message=user_message("Which TLS versions does the webhook endpoint accept?"),
                configuration=SendMessageConfiguration(return_immediately=True, task_push_notification_config=push),
            )
            tasks = [ev.task async for ev in client.send_message(req) if ev.WhichOneof("payload") == "task"]
            task_id = tasks[0].id
            await client.close()

        # The agent works in MCP requests of its own, which carry no trace context.
        async with connect(srv, alice) as mcp:
            await call(mcp, "claim", thread=task_id)
            await call(mcp, "post", kind="reply", thread=task_id, body="TLS 1.2 and 1.3")
        rx.wait_for(completed, "the COMPLETED push")
    finally:
        rx.close()

    # Every push carries the trace: its parent is an outbox attempt's span of the client's trace.
    final = next(h for h, b in rx.got if state_of(b) == "TASK_STATE_COMPLETED")
    version, pushed_trace, pushed_parent, flags = final["traceparent"].split("-")
    assert (version, pushed_trace, flags) == ("00", trace_id, "01")

    def arrived():
        ids = {s["id"] for s in collector.trace(trace_id)}
        return pushed_parent in ids
    collector.wait_for(arrived, "the outbox attempt's span")
    # Everything, late spans included: a stopped server has ended every span and sent them all
    # (its exporter's shutdown flushes) before it exits.
    srv.process.terminate()
    assert srv.process.wait(timeout=30) == 0, "".join(srv.output[-20:])
    spans = collector.trace(trace_id)
    by_id = {s["id"]: s for s in spans}
    assert by_id[pushed_parent]["name"] == "outbox.attempt"
    assert all(s["service"] == "liaison" for s in spans)

    # Connected: every span's parent is the client's span or another span of the trace.
    orphans = [(s["name"], s["parent"]) for s in spans if s["parent"] != client_span and s["parent"] not in by_id]
    assert orphans == [], orphans

    def chain(span):
        names = [span["name"]]
        while span["parent"] in by_id:
            span = by_id[span["parent"]]
            names.append(span["name"])
        return names, span["parent"]

    # The client's card read and its SendMessage are both children of its span.
    requests = {(s["name"], s["attributes"]["http.route"].string_value)
                for s in spans if s["parent"] == client_span and s["kind"] == 2}
    assert ("POST", "/a2a/jsonrpc") in requests, requests
    names = {s["name"] for s in spans}
    for expected in ("service.send_task_message", "store.commit", "service.claim", "service.post", "outbox.attempt"):
        assert expected in names, (expected, sorted(names))
    # The store commit says how many writes its group commit carried.
    commits = [s for s in spans if s["name"] == "store.commit"]
    assert all(s["attributes"]["liaison.group_size"].int_value >= 1 for s in commits)

    # The reply descends from the task's intake, not from the agent's request, and links to it.
    reply = next(s for s in spans if s["name"] == "service.post")
    names, top = chain(reply)
    assert top == client_span and "service.send_task_message" in names, names
    assert len(reply["links"]) == 1
    link_trace, link_span = reply["links"][0]
    assert link_trace != trace_id
    mcp_request = next(s for s in collector.spans if s["id"] == link_span)
    assert mcp_request["kind"] == 2 and mcp_request["attributes"]["http.route"].string_value == "/mcp"
    # The COMPLETED push's attempt descends from the reply.
    names, top = chain(by_id[pushed_parent])
    assert "service.post" in names and top == client_span, names


@pytest.mark.anyio
async def test_every_front_continues_an_incoming_traceparent(traced):
    srv, collector = traced
    demo = json.loads((srv.data_dir / "demo.json").read_text())
    partner, alice = demo["partner"]["agent_token"], demo["alice"]["agent_token"]
    a2a = {"A2A-Version": "1.0", "Authorization": f"Bearer {partner}"}
    sent: dict[str, tuple[str, str]] = {}

    async with httpx.AsyncClient(timeout=15) as http:
        async def with_context(front: str, method: str, url: str, headers: dict, **kw):
            header, trace_id, span_id = traceparent()
            sent[front] = (trace_id, span_id)
            r = await http.request(method, url, headers={**headers, "traceparent": header}, **kw)
            assert r.status_code < 500, (front, r.status_code, r.text)
            return r

        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                "params": {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER",
                                       "parts": [{"text": "traced over JSON-RPC"}]},
                           "configuration": {"returnImmediately": True}}}
        r = await with_context("jsonrpc", "POST", f"{srv.url}/a2a/jsonrpc", a2a, json=body)
        task_id = r.json()["result"]["task"]["id"]
        await with_context("rest", "GET", f"{srv.url}/a2a/rest/tasks/{urllib.parse.quote(task_id)}", a2a)
        await with_context("admin", "GET", f"{srv.url}/admin/v1/persons",
                           {"Authorization": f"Bearer {srv.admin_token}"})
        await with_context("api", "GET", f"{srv.url}/api/v1/inbox", {"Authorization": f"Bearer {alice}"})
        # MCP: the initialize request of a streamable HTTP session.
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "trace-test", "version": "1"}}}
        await with_context("mcp", "POST", srv.mcp_url,
                           {"Authorization": f"Bearer {alice}", "Accept": "application/json, text/event-stream"},
                           json=init)
        # A malformed traceparent, or one naming no trace (all zeros), starts a new trace rather
        # than failing or being continued; the request is traced all the same (below).
        malformed = {
            "a2a": (f"/a2a/rest/tasks/{urllib.parse.quote(task_id)}", a2a, "00-zz-not-a-context"),
            "admin": ("/admin/v1/channels", {"Authorization": f"Bearer {srv.admin_token}"},
                      f"00-{'0' * 32}-{secrets.token_hex(8)}-01"),
        }
        for path, headers, bad in malformed.values():
            r = await http.get(f"{srv.url}{path}", headers={**headers, "traceparent": bad})
            assert r.status_code == 200, (path, r.status_code, r.text)

    header, trace_id, span_id = traceparent()
    sent["grpc"] = (trace_id, span_id)
    target = urllib.parse.urlparse(srv.url).netloc
    async with grpc.aio.insecure_channel(target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        metadata = (("a2a-version", "1.0"), ("authorization", f"Bearer {partner}"), ("traceparent", header))
        task = await stub.GetTask(GetTaskRequest(id=task_id), metadata=metadata, timeout=15)
        assert task.id == task_id

    for front, (trace_id, span_id) in sent.items():
        collector.wait_for(lambda: server_span(collector.spans, trace_id, span_id) is not None,
                           f"the {front} request's span continuing the client's context")
    grpc_span = server_span(collector.spans, *sent["grpc"])
    assert grpc_span["attributes"]["liaison.front"].string_value == "a2a"
    assert grpc_span["attributes"]["rpc.method"].string_value == "GetTask"
    assert grpc_span["attributes"]["rpc.service"].string_value == "lf.a2a.v1.A2AService"
    assert server_span(collector.spans, *sent["mcp"])["attributes"]["liaison.front"].string_value == "mcp"
    # Each malformed context's request is the root of a trace of its own: a server span at its path
    # in none of the traces sent, with no parent.
    ours = {trace_id for trace_id, _ in sent.values()}
    for front, (path, _, bad) in malformed.items():
        def fresh():
            return [s for s in collector.spans if s["kind"] == 2 and s["trace"] not in ours
                    and s["attributes"].get("url.path") and s["attributes"]["url.path"].string_value == path]
        collector.wait_for(lambda: fresh(), f"the span of the {front} request with traceparent {bad!r}")
        [root] = fresh()
        assert root["parent"] == "" and root["trace"] != "0" * 32, (front, root)
    # Each request's access log line carries the trace id it continued (lines at INFO are
    # written behind, within milliseconds).
    for front, (trace_id, _) in sent.items():
        deadline = time.monotonic() + 5
        while True:
            lines = [l for l in srv.output if f"trace_id={trace_id}" in l]
            if any("liaison::access" in l for l in lines) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert any("liaison::access" in l for l in lines), (front, lines)


@pytest.mark.anyio
async def test_without_an_endpoint_nothing_is_traced_and_pushes_carry_no_context():
    os.environ["LIAISON_OUTBOX__ALLOW"] = "127.0.0.1"
    try:
        srv, dbname = start_server("--demo")
    finally:
        del os.environ["LIAISON_OUTBOX__ALLOW"]
    rx = Receiver()
    try:
        demo = json.loads((srv.data_dir / "demo.json").read_text())
        partner, alice = demo["partner"]["agent_token"], demo["alice"]["agent_token"]
        header, _, _ = traceparent()
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {partner}", "traceparent": header}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            card = await A2ACardResolver(http, srv.url).get_agent_card()
            client = ClientFactory(ClientConfig(streaming=False, httpx_client=http,
                                                supported_protocol_bindings=["JSONRPC"])).create(card)
            req = SendMessageRequest(
                message=user_message("untraced"),
                configuration=SendMessageConfiguration(
                    return_immediately=True,
                    task_push_notification_config=TaskPushNotificationConfig(url=rx.url, token="t")),
            )
            tasks = [ev.task async for ev in client.send_message(req) if ev.WhichOneof("payload") == "task"]
            await client.close()
        async with connect(srv, alice) as mcp:
            await call(mcp, "post", kind="reply", thread=tasks[0].id, body="done")
        rx.wait_for(completed, "the COMPLETED push")
        assert all("traceparent" not in h for h, _ in rx.got)
    finally:
        rx.close()
        stop_server(srv, dbname)
