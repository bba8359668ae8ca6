"""A request body is read only as far as its credential allows: without a valid one, at most 64 KiB,
so nobody without credentials can make the server buffer the ~91 MiB a valid message may reach.
The answer is the binding's own authentication error, sent without waiting for the rest of the
body (which a client without credentials may never finish sending). With a valid credential a
large message is accepted."""

import base64
import json
import select
import socket
import urllib.parse
import uuid

import httpx
import pytest

from conftest import start_server, stop_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def send_params(raw_bytes: int) -> dict:
    raw = base64.b64encode(b"x" * raw_bytes).decode()
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER",
               "parts": [{"text": "see attached"}, {"raw": raw, "filename": "a.bin", "mediaType": "application/octet-stream"}]}
    return {"message": message, "configuration": {"returnImmediately": True}}


def announce_then_stall(url: str, path: str, token: str | None) -> tuple[int, dict, str]:
    """Announces a 50 MB body, sends 1 MiB of it, and reads the answer without sending the rest."""
    u = urllib.parse.urlparse(url)
    head = [f"POST {path} HTTP/1.1", f"Host: {u.netloc}", "Content-Type: application/json",
            "A2A-Version: 1.0", "Content-Length: 50000000"]
    if token:
        head.append(f"Authorization: Bearer {token}")
    with socket.create_connection((u.hostname, u.port), timeout=20) as s:
        s.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        # 1 MiB in pieces, stopping as soon as the server has answered (as a client reading the
        # early answer does): writing on after it closed would only earn a reset.
        body = b'{"jsonrpc": "2.0", "id": 7, "params": {"x": "' + b"y" * (1024 * 1024)
        for at in range(0, len(body), 16 * 1024):
            if select.select([s], [], [], 0)[0]:
                break
            try:
                s.sendall(body[at:at + 16 * 1024])
            except (BrokenPipeError, ConnectionResetError):
                break
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            assert chunk, "the server closed without answering"
            data += chunk
        header, _, rest = data.partition(b"\r\n\r\n")
        lines = header.decode().split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
        length = int(headers.get("content-length", "0"))
        while len(rest) < length:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        return status, headers, rest.decode()


async def test_without_valid_credentials_the_body_is_not_buffered_and_the_answer_is_unauthenticated():
    srv, dbname = start_server("--demo")
    try:
        demo = json.loads((srv.data_dir / "demo.json").read_text())
        partner = demo["partner"]["agent_token"]
        for token in (None, "lsn_not-a-token"):
            status, headers, body = announce_then_stall(srv.url, "/a2a/jsonrpc", token)
            assert status == 401 and headers["www-authenticate"] == "Bearer"
            assert json.loads(body)["error"]["code"] == -31401
            status, headers, body = announce_then_stall(srv.url, "/a2a/rest/message:send", token)
            assert status == 401 and headers["www-authenticate"] == "Bearer"
            assert json.loads(body)["error"]["status"] == "UNAUTHENTICATED"
        # A large message with the party's token goes through on both HTTP bindings.
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {partner}"}
        async with httpx.AsyncClient(timeout=60, headers=headers) as http:
            rpc = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": send_params(2 * 1024 * 1024)}
            r = await http.post(f"{srv.url}/a2a/jsonrpc", json=rpc)
            assert r.status_code == 200 and "result" in r.json(), r.text[:300]
            r = await http.post(f"{srv.url}/a2a/rest/message:send", json=send_params(2 * 1024 * 1024))
            assert r.status_code == 200, r.text[:300]
    finally:
        stop_server(srv, dbname)
