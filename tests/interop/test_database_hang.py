"""A database that hangs costs a request its deadline, not the length of the hang (`[database]`):
every binding answers `unavailable` (retryable) and `/readyz` answers 503, each within a bound, and
everything works again once the database does.

- PostgreSQL: liaison reaches the server through a TCP relay that, when told, stops passing bytes
  while keeping every connection open (and accepting new ones): what a hung server, a stalled
  network or a frozen cluster looks like to a client. The server itself is never stopped.
- SQLite: another process holds the database's write lock (as a backup or a shell can), so every
  write waits on SQLite's busy timeout.

The deadlines are configured at 1 s. Each request must be answered within `BOUND` (8 s): a server
that waits as long as the hang (the relay holds forever) fails, and so does one that ignores the
configured deadlines (the default statement deadline alone is 10 s). Nothing asserts a duration.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import threading
import time
import urllib.parse
import uuid

import grpc
import httpx
import pytest
from a2a.types import Message, Part, Role, SendMessageConfiguration, SendMessageRequest, a2a_pb2_grpc

from conftest import fresh_database, start_server, stop_server

pytestmark = pytest.mark.anyio

BOUND = 8.0
CONFIG = """
[database]
connect_timeout_s = 1
acquire_timeout_s = 1
statement_timeout_s = 1
ready_timeout_s = 1
"""
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}


class Relay:
    """A TCP relay to `target` that can stop passing bytes: while stopped it still accepts
    connections and keeps every one open, but holds whatever either side sends."""

    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self.flowing = threading.Event()
        self.flowing.set()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def stop(self):
        self.flowing.clear()

    def resume(self):
        self.flowing.set()

    def close(self):
        self.flowing.set()
        self.listener.close()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket):
        try:
            while data := src.recv(65536):
                # Stopped: the bytes are held, neither passed nor dropped, and nothing is closed.
                self.flowing.wait()
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def send_params(text: str) -> dict:
    return {
        "message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]},
        "configuration": {"returnImmediately": True},
    }


def mcp_error_code(r: httpx.Response) -> str | None:
    """The `unavailable` of an MCP answer: the API's JSON error (the bearer check could not read the
    token), or a tool error's code (the tool could not read or write)."""
    if r.status_code != 200:
        return r.json()["error"]["code"]
    text = r.text
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        text = next(l[5:] for l in text.splitlines() if l.startswith("data:") and '"result"' in l)
    result = json.loads(text)["result"]
    assert result["isError"], result
    return result["structuredContent"]["error"]["code"]


class Bindings:
    """One request of each front, each answered within BOUND (else the test fails)."""

    def __init__(self, srv, demo, mcp_session: str):
        self.srv, self.demo, self.session = srv, demo, mcp_session
        self.alice = demo["alice"]["agent_token"]
        self.partner = demo["partner"]["agent_token"]

    async def bounded(self, name: str, call):
        try:
            return await asyncio.wait_for(call, BOUND)
        except asyncio.TimeoutError:
            pytest.fail(f"{name}: no answer within {BOUND} s")

    async def all_unavailable(self, http: httpx.AsyncClient, writes_only: bool):
        srv = self.srv
        a2a = {"Authorization": f"Bearer {self.partner}", "A2A-Version": "1.0"}
        member = {"Authorization": f"Bearer {self.alice}"}
        post = {"kind": "question", "channel": "demo", "body": "Still there?"}
        mcp_post = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "post", "arguments": {"kind": "announce", "channel": "demo", "body": "hi"}}}
        calls = {
            "/api/v1 post": http.post(f"{srv.url}/api/v1/messages", headers=member, json=post),
            "A2A JSON-RPC SendMessage": http.post(
                f"{srv.url}/a2a/jsonrpc", headers=a2a,
                json={"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": send_params("hello")}),
            "A2A HTTP+JSON SendMessage": http.post(
                f"{srv.url}/a2a/rest/message:send", headers=a2a, json=send_params("hello")),
            "MCP post": http.post(
                srv.mcp_url, content=json.dumps(mcp_post),
                headers={**MCP_HEADERS, "Authorization": f"Bearer {self.alice}",
                         "Mcp-Session-Id": self.session, "MCP-Protocol-Version": "2025-11-25"}),
        }
        if not writes_only:
            calls["/api/v1 inbox"] = http.get(f"{srv.url}/api/v1/inbox?consumer=hang", headers=member)
            calls["admin persons"] = http.get(f"{srv.url}/admin/v1/persons",
                                              headers={"Authorization": f"Bearer {srv.admin_token}"})
        names = list(calls)
        answers = dict(zip(names, await asyncio.gather(*(self.bounded(n, calls[n]) for n in names))))
        for name in ("/api/v1 post", "/api/v1 inbox", "admin persons"):
            if name in answers:
                r = answers[name]
                assert r.status_code == 503, (name, r.status_code, r.text)
                assert r.json()["error"]["code"] == "unavailable", (name, r.text)
        error = answers["A2A JSON-RPC SendMessage"].json()["error"]
        assert error["code"] == -31503 and error["data"][0]["reason"] == "UNAVAILABLE", error
        r = answers["A2A HTTP+JSON SendMessage"]
        assert r.status_code == 503 and r.json()["error"]["status"] == "UNAVAILABLE", r.text
        assert mcp_error_code(answers["MCP post"]) == "unavailable", answers["MCP post"].text
        # Not ready, said within its own deadline: the writes above failed (or still wait).
        r = await self.bounded("/readyz", http.get(f"{srv.url}/readyz"))
        assert r.status_code == 503, r.text

        target = urllib.parse.urlsplit(srv.url).netloc
        async with grpc.aio.insecure_channel(target) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            req = SendMessageRequest(
                message=Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="hello")]),
                configuration=SendMessageConfiguration(return_immediately=True),
            )
            metadata = (("authorization", f"Bearer {self.partner}"), ("a2a-version", "1.0"))
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await self.bounded("A2A gRPC SendMessage", stub.SendMessage(req, metadata=metadata))
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, refused.value

    async def all_work(self, http: httpx.AsyncClient):
        """Once the database answers again: ready, and a write on each front succeeds."""
        deadline = time.monotonic() + 60
        while (await http.get(f"{self.srv.url}/readyz")).status_code != 200:
            # The writer is healthy again with its first commit: any write makes one.
            await http.post(f"{self.srv.url}/api/v1/messages", headers={"Authorization": f"Bearer {self.alice}"},
                            json={"kind": "announce", "channel": "demo", "body": "back?"})
            assert time.monotonic() < deadline, "never ready again"
            await asyncio.sleep(0.2)
        r = await http.post(f"{self.srv.url}/api/v1/messages", headers={"Authorization": f"Bearer {self.alice}"},
                            json={"kind": "question", "channel": "demo", "body": "Back?"})
        assert r.status_code == 200, r.text
        r = await http.post(f"{self.srv.url}/a2a/rest/message:send",
                            headers={"Authorization": f"Bearer {self.partner}", "A2A-Version": "1.0"},
                            json=send_params("back"))
        assert r.status_code == 200, r.text


async def serve(tmp_path, database=None):
    path = tmp_path / "liaison.toml"
    path.write_text(CONFIG)
    srv, dbname = start_server("--demo", "--config", str(path), database=database)
    demo = json.loads((srv.data_dir / "demo.json").read_text())
    async with httpx.AsyncClient(timeout=30) as http:
        r = await http.post(srv.mcp_url, content=json.dumps(INITIALIZE),
                            headers={**MCP_HEADERS, "Authorization": f"Bearer {demo['alice']['agent_token']}"})
        assert r.status_code == 200, r.text
        session = r.headers["mcp-session-id"]
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        r = await http.post(srv.mcp_url, content=json.dumps(done),
                            headers={**MCP_HEADERS, "Authorization": f"Bearer {demo['alice']['agent_token']}",
                                     "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
        assert r.status_code == 202, r.text
    return srv, dbname, Bindings(srv, demo, session)


def on_postgres() -> bool:
    return os.environ.get("LIAISON_TEST_DATABASE_URL", "").startswith("postgres")


@pytest.mark.skipif(not on_postgres(), reason="a PostgreSQL server behind a relay (LIAISON_TEST_DATABASE_URL)")
async def test_a_postgresql_server_that_stops_answering_costs_each_request_its_deadline(tmp_path, anyio_backend):
    url, dbname = fresh_database()
    parts = urllib.parse.urlsplit(url)
    relay = Relay(parts.hostname or "127.0.0.1", parts.port or 5432)
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0] + "@" if len(netloc) == 2 else ""
    relayed = parts._replace(netloc=f"{user}127.0.0.1:{relay.port}").geturl()
    srv, dbname, bindings = await serve(tmp_path, database=(relayed, dbname))
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            assert (await http.get(f"{srv.url}/readyz")).status_code == 200
            relay.stop()
            # Twice: the second round finds the connections the first one gave up on closed, and
            # opens new ones, which hang too.
            for _ in range(2):
                await bindings.all_unavailable(http, writes_only=False)
            relay.resume()
            await bindings.all_work(http)
    finally:
        relay.close()
        stop_server(srv, dbname)


@pytest.mark.skipif(on_postgres(), reason="SQLite's busy waits (the PostgreSQL pass has the relay)")
async def test_a_sqlite_lock_held_elsewhere_costs_each_write_its_deadline(tmp_path, anyio_backend):
    srv, dbname, bindings = await serve(tmp_path)
    holder = sqlite3.connect(srv.data_dir / "liaison.db", timeout=30, isolation_level=None)
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            assert (await http.get(f"{srv.url}/readyz")).status_code == 200
            holder.execute("BEGIN EXCLUSIVE")
            await bindings.all_unavailable(http, writes_only=True)
            holder.execute("ROLLBACK")
            await bindings.all_work(http)
    finally:
        holder.close()
        stop_server(srv, dbname)
