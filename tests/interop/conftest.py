"""Fixtures for the MCP interop tests: the real `liaison` binary on a fresh data directory (and, when
LIAISON_TEST_DATABASE_URL names a PostgreSQL server, a fresh database on it), people and tokens set
up through the admin HTTP API, and MCP clients from the official Python SDK (`mcp` on PyPI).

Environment:
  LIAISON_BIN                 the binary (default: $CARGO_TARGET_DIR/debug/liaison, else target/debug/liaison)
  LIAISON_TEST_DATABASE_URL   unset or sqlite: SQLite in the data directory; postgres://…: a new
                              database named liaison_mcp_<random> is created on that server per run
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

ROOT = Path(__file__).resolve().parents[2]
# The protocol eras the tests run in: the legacy handshake (what Claude Code 2.1 speaks) and the
# stateless 2026-07-28 revision.
MODES = ["legacy", "2026-07-28"]


@pytest.fixture
def anyio_backend():
    return "asyncio"


def binary() -> Path:
    if os.environ.get("LIAISON_BIN"):
        return Path(os.environ["LIAISON_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "liaison"


def postgres_base(url: str) -> str:
    """postgres://user@host:port/db?x -> postgres://user@host:port"""
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{rest.split('/', 1)[0]}"


def fresh_database() -> tuple[str | None, str | None]:
    """The database URL to serve from, and the name of a database to drop afterwards."""
    url = os.environ.get("LIAISON_TEST_DATABASE_URL", "")
    if not url.startswith("postgres"):
        return None, None
    name = f"liaison_mcp_{uuid.uuid4().hex[:12]}"
    base = postgres_base(url)
    subprocess.run(["psql", f"{base}/postgres", "-qc", f"CREATE DATABASE {name}"], check=True)
    return f"{base}/{name}", name


@dataclass
class Server:
    url: str
    data_dir: Path
    process: subprocess.Popen
    admin_token: str
    output: list[str] = field(default_factory=list)
    # The [metrics] token the server was configured with, if any.
    metrics_token: str | None = None

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"

    def admin(self, method: str, path: str, body: dict | None = None, token: str | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"{self.url}{path}",
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {token or self.admin_token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def person(self, pid: str, name: str) -> None:
        self.admin("POST", "/admin/v1/persons", {"id": pid, "display_name": name})

    def token(self, pid: str, scopes=("agent",), expires_in_s: int | None = None) -> dict:
        body = {"person": pid, "scopes": list(scopes)}
        if expires_in_s is not None:
            body["expires_in_s"] = expires_in_s
        return self.admin("POST", "/admin/v1/tokens", body)["token"]

    def channel(self, name: str, members: list[str]) -> None:
        self.admin("POST", "/admin/v1/channels", {"name": name, "members": members})


def start_server(*extra_args: str, database: tuple[str | None, str | None] | None = None) -> tuple[Server, str | None]:
    """`database`: the URL to serve from and the database to drop afterwards, when the test made
    them itself (default: [`fresh_database`])."""
    exe = binary()
    if not exe.exists():
        pytest.exit(f"{exe} does not exist: run `cargo build` first (or set LIAISON_BIN)", returncode=2)
    data_dir = Path(tempfile.mkdtemp(prefix="liaison-mcp-"))
    database_url, dbname = database if database is not None else fresh_database()
    cmd = [str(exe), "serve", "--data-dir", str(data_dir), "--listen", "127.0.0.1:0", *extra_args]
    if database_url:
        cmd += ["--database-url", database_url]
    env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    output: list[str] = []
    url = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        output.append(line)
        m = re.search(r"serving at (https?://\S+)", line)
        if m:
            url = m.group(1)
            break
    if url is None:
        # A server that refuses to start (some tests expect it) leaves neither its data nor its
        # database behind.
        process.kill()
        process.wait()
        shutil.rmtree(data_dir, ignore_errors=True)
        drop_database(dbname)
        raise RuntimeError("liaison did not start:\n" + "".join(output))
    # Keep draining the output so the server never blocks on a full pipe.
    threading.Thread(target=lambda: [output.append(l) for l in process.stdout], daemon=True).start()
    admin_token = (data_dir / "admin.token").read_text().strip()
    return Server(url, data_dir, process, admin_token, output), dbname


@pytest.fixture(scope="session")
def server():
    srv, dbname = start_server()
    srv.person("alice", "Alice Martin")
    srv.person("bob", "Bob Chen")
    srv.person("carol", "Carol Outsider")
    srv.channel("demo", ["alice", "bob"])
    yield srv
    stop_server(srv, dbname)


def stop_server(srv: Server, dbname: str | None) -> None:
    """Stops the server (if still running), removes its data and drops its database. Fails when
    the server refused a statement of its own for reading a whole table that grows with history
    (debug builds check every statement's plan: `src/store/db/scans.rs`)."""
    if srv.process.poll() is None:
        srv.process.terminate()
        try:
            srv.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            srv.process.kill()
    shutil.rmtree(srv.data_dir, ignore_errors=True)
    drop_database(dbname)
    scans = [line for line in list(srv.output) if "grows with the server's history" in line]
    if scans:
        pytest.fail("the server read a whole growing table:\n" + "".join(scans[:5]))


def drop_database(dbname: str | None) -> None:
    """Drops a database [`fresh_database`] created (nothing on SQLite)."""
    if dbname:
        admin_url = postgres_base(os.environ["LIAISON_TEST_DATABASE_URL"]) + "/postgres"
        subprocess.run(["psql", admin_url, "-qc", f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)"], check=False)


@pytest.fixture(scope="session")
def tokens(server):
    """One agent token per person, issued once."""
    return {p: server.token(p)["secret"] for p in ("alice", "bob", "carol")}


@dataclass
class Exchange:
    """One HTTP response the MCP client received (the SDK turns some into a generic error)."""

    method: str
    status: int
    headers: dict[str, str]
    body: bytes


@contextlib.asynccontextmanager
async def connect(server: Server, token: str | None, mode: str = "legacy", agent: str | None = None,
                  exchanges: list[Exchange] | None = None):
    """An MCP client; with `exchanges`, every HTTP response it receives is appended there (the
    body only of error responses: a success may be a stream)."""
    headers = {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if agent:
        headers["Liaison-Agent"] = agent
    http = create_mcp_http_client(headers=headers)
    if exchanges is not None:
        async def record(response):
            body = await response.aread() if response.status_code >= 400 else b""
            exchanges.append(Exchange(response.request.method, response.status_code,
                                      {k.lower(): v for k, v in response.headers.items()}, body))

        http.event_hooks = {**http.event_hooks, "response": [*http.event_hooks.get("response", []), record]}
    async with http:
        async with Client(streamable_http_client(server.mcp_url, http_client=http), mode=mode) as client:
            yield client


async def call(client, tool: str, **arguments):
    """Calls a tool and returns its structured content; fails the test on a tool error."""
    result = await client.call_tool(tool, arguments)
    text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    assert not result.is_error, f"{tool} failed: {text}"
    return result.structured_content


async def call_error(client, tool: str, **arguments):
    """Calls a tool that must fail; returns (error structure, text)."""
    result = await client.call_tool(tool, arguments)
    text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    assert result.is_error, f"{tool} should have failed: {text}"
    return result.structured_content["error"], text


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --- long-polls: "it is waiting" and "it ended before its deadline" ---------------------------------


def inbox_waiters(server: Server) -> int:
    """The `liaison_inbox_waiters` gauge on /metrics: long-polls waiting now, all people. The server
    counts a long-poll only once it has subscribed to its wake-ups."""
    headers = {"Authorization": f"Bearer {server.metrics_token}"} if server.metrics_token else {}
    req = urllib.request.Request(f"{server.url}/metrics", headers=headers)
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read().decode()
    m = re.search(r"^liaison_inbox_waiters (\S+)$", text, re.M)
    assert m, "no liaison_inbox_waiters gauge on /metrics"
    return int(float(m.group(1)))


def wait_for_waiters(server: Server, n: int, timeout: float = 30.0) -> None:
    """Returns once at least `n` long-polls wait: a post made after this must wake the one the
    caller started (made before, the poll's first read would find it and the wake-up would go
    untested). The timeout only keeps a poll that never waits from hanging the suite."""
    deadline = time.monotonic() + timeout
    while (seen := inbox_waiters(server)) < n:
        assert time.monotonic() < deadline, f"{seen} of {n} long-polls waiting after {timeout} s"
        time.sleep(0.01)


async def until_waiting(server: Server, n: int, timeout: float = 30.0) -> None:
    """[`wait_for_waiters`] for async tests."""
    await anyio.to_thread.run_sync(wait_for_waiters, server, n, timeout)


def eventually(what: str, attempt, timeout: float = 30.0):
    """Calls `attempt` until it returns something true, and returns that. For what the server
    writes behind an answer (the "read" of a receipt: with its next write, or 50 ms later when
    none comes). The timeout only keeps a write that never lands from hanging the suite."""
    deadline = time.monotonic() + timeout
    while not (got := attempt()):
        assert time.monotonic() < deadline, f"{what}: not after {timeout} s"
        time.sleep(0.01)
    return got


@dataclass
class Witness:
    """A long-poll nothing will wake (see [`deadline_witness`]); `ended` is set when it returns."""

    ended: threading.Event
    wait_s: int


@contextlib.contextmanager
def deadline_witness(server: Server, wait_s: int):
    """A long-poll of `wait_s` seconds by a new person whom nobody writes to, waiting on entry. A
    poll under test started inside the block with at most the same `wait_s` has a later deadline,
    so it ends while the witness still waits only if something other than its deadline ended it:
    `assert not witness.ended.is_set()` proves a wake-up without timing anything. On exit the
    witness's connection is closed and the server counts it no more."""
    pid = unique("witness")
    server.person(pid, "Deadline Witness")
    token = server.token(pid)["secret"]
    before = inbox_waiters(server)
    u = urlsplit(server.url)
    sock = socket.create_connection((u.hostname, u.port), timeout=wait_s + 60)
    sock.sendall((f"GET /api/v1/inbox?consumer=witness&wait_s={wait_s} HTTP/1.1\r\nHost: {u.netloc}\r\n"
                  f"Authorization: Bearer {token}\r\nConnection: close\r\n\r\n").encode())
    ended = threading.Event()

    def read():
        try:
            while sock.recv(65536):
                pass
        except OSError:
            pass
        ended.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        wait_for_waiters(server, before + 1)
        yield Witness(ended, wait_s)
    finally:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
        deadline = time.monotonic() + 30
        while inbox_waiters(server) > before and time.monotonic() < deadline:
            time.sleep(0.01)


# The console's browser tests: Debian's chromium, and where their screenshots go.
CHROMIUM = os.environ.get("LIAISON_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("LIAISON_TEST_ARTIFACTS", ROOT / "tests" / "artifacts"))
LAPTOP = {"width": 1366, "height": 800}
PHONE = {"width": 390, "height": 844}


async def shots(browser, laptop_ctx, url: str, name: str) -> None:
    """The page at `url` at laptop and phone size, full page, as `{name}-laptop.png` and
    `{name}-phone.png` in ARTIFACTS. At both sizes it must be the page asked for, signed in (not the
    sign-in page: a 200 with the session's "Sign out"), with the same heading, and it must fit the
    width it is shown at: nothing wider than the viewport, so a phone never scrolls sideways."""
    from playwright.async_api import TimeoutError as PlaywrightTimeoutError
    phone = await browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True,
                                      device_scale_factor=2, storage_state=await laptop_ctx.storage_state())
    headings = []
    try:
        for size, ctx, viewport in (("laptop", laptop_ctx, LAPTOP), ("phone", phone, PHONE)):
            page = await ctx.new_page()
            response = await page.goto(url)
            where = f"{name}-{size} ({url})"
            assert response is not None and response.status == 200, f"{where}: {response and response.status}"
            assert page.url == url, f"{where}: landed on {page.url}"
            try:
                await page.get_by_role("button", name="Sign out").wait_for(state="visible")
            except PlaywrightTimeoutError:
                shown = await page.locator("h1").all_text_contents()
                raise AssertionError(f"{where}: not signed in (no 'Sign out' shown); headings {shown}") from None
            headings.append(await page.locator("main h1").first.text_content())
            wide = await page.evaluate("document.documentElement.scrollWidth")
            assert wide <= viewport["width"], f"{where}: {wide} px wide in a {viewport['width']} px viewport"
            await page.screenshot(path=str(ARTIFACTS / f"{name}-{size}.png"), full_page=True)
            await page.close()
    finally:
        await phone.close()
    assert headings[0] and headings[0] == headings[1], f"{name}: headings {headings}"
