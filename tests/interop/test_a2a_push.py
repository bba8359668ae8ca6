"""A2A push notifications with the official `a2a-sdk` client against `serve --demo` (loopback
allow-listed for the outbox): a config given inline with SendMessage receives every event of the
task in order while the client is not connected, each POST carrying a JWT that PyJWT verifies
against /.well-known/jwks.json with the claims it should have; a config created later through the
CRUD RPC with its own authentication gets `Authorization: <scheme> <credentials>` instead; the
card says pushNotifications: true; a private literal address is refused when stored."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import subprocess
import threading
import time
import uuid

import httpx
import jwt
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    AuthenticationInfo,
    ListTaskPushNotificationConfigsRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
)

from conftest import binary, call, connect, start_server, stop_server


class Receiver:
    """A webhook receiver on 127.0.0.1:0 that records every POST (headers, raw body)."""

    def __init__(self):
        self.got: list[tuple[dict, bytes]] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.got.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/push"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, predicate, what: str, timeout: float = 30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self.got):
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; got {len(self.got)} requests")

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def state_of(body: bytes) -> str:
    event = json.loads(body)
    if "artifactUpdate" in event:
        return "artifact"
    return event["statusUpdate"]["status"]["state"]


def completed(got) -> bool:
    return any(state_of(b) == "TASK_STATE_COMPLETED" for _, b in got)


def deduplicated(got):
    """One entry per event id: what a receiver that deduplicates on it, as the README says, keeps."""
    seen, out = set(), []
    for headers, body in got:
        key = headers["x-liaison-event-id"]
        if key not in seen:
            seen.add(key)
            out.append((headers, body))
    return out


def user_message(text: str, task_id: str | None = None) -> Message:
    m = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    if task_id:
        m.task_id = task_id
    return m


@pytest.fixture
def push_server():
    os.environ["LIAISON_OUTBOX__ALLOW"] = "127.0.0.1"
    try:
        srv, dbname = start_server("--demo")
    finally:
        del os.environ["LIAISON_OUTBOX__ALLOW"]
    yield srv
    stop_server(srv, dbname)


@pytest.mark.anyio
async def test_push_delivers_every_task_event_in_order_with_a_verifiable_jwt(push_server):
    srv = push_server
    demo = json.loads((srv.data_dir / "demo.json").read_text())
    partner, alice = demo["partner"]["agent_token"], demo["alice"]["agent_token"]
    rx = Receiver()
    try:
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {partner}"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            card = await A2ACardResolver(http, srv.url).get_agent_card()
            assert card.capabilities.push_notifications is True
            jwks = (await http.get(f"{srv.url}/.well-known/jwks.json")).json()
            config = ClientConfig(streaming=False, httpx_client=http, supported_protocol_bindings=["JSONRPC"])
            client = ClientFactory(config).create(card)

            push = TaskPushNotificationConfig(url=rx.url, token="tok-" + uuid.uuid4().hex)
            req = SendMessageRequest(
                message=user_message("Which TLS versions does the webhook endpoint accept?"),
                configuration=SendMessageConfiguration(return_immediately=True, task_push_notification_config=push),
            )
            tasks = [ev.task async for ev in client.send_message(req) if ev.WhichOneof("payload") == "task"]
            task_id = tasks[0].id

            # A private literal address is refused when stored, and nothing changes.
            with pytest.raises(Exception, match="(?i)address|invalid"):
                await client.create_task_push_notification_config(
                    TaskPushNotificationConfig(task_id=task_id, url="http://10.1.2.3/hook")
                )
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task_id)
            )
            assert [c.url for c in listed.configs] == [rx.url]

            # The party is not connected while the team works: push carries the events.
            async with connect(srv, alice) as mcp:
                await call(mcp, "post", kind="question", thread=task_id, body="Production or staging?")
            async for _ in client.send_message(
                SendMessageRequest(
                    message=user_message("Production", task_id=task_id),
                    configuration=SendMessageConfiguration(return_immediately=True),
                )
            ):
                pass
            async with connect(srv, alice) as mcp:
                await call(mcp, "post", kind="reply", thread=task_id, body="TLS 1.2 and 1.3")
            rx.wait_for(completed, "the COMPLETED event")
            await client.close()

        events = deduplicated(rx.got)
        assert [state_of(b) for _, b in events] == [
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_INPUT_REQUIRED",
            "TASK_STATE_WORKING",
            "artifact",
            "TASK_STATE_COMPLETED",
        ]
        for headers, body in events:
            assert headers["x-a2a-notification-token"] == push.token
            assert headers["content-type"] == "application/json"
            token = headers["authorization"].removeprefix("Bearer ")
            kid = jwt.get_unverified_header(token)["kid"]
            key = next(jwt.PyJWK(k) for k in jwks["keys"] if k["kid"] == kid)
            claims = jwt.decode(token, key, algorithms=["ES256"], audience=rx.url, issuer=srv.url)
            assert claims["taskId"] == task_id
            assert claims["request_body_sha256"] == hashlib.sha256(body).hexdigest()
            assert claims["exp"] > claims["iat"] and claims["jti"]
            event = json.loads(body)
            payload = event.get("statusUpdate") or event.get("artifactUpdate")
            assert payload["taskId"] == task_id
        artifact = json.loads(events[3][1])["artifactUpdate"]["artifact"]
        assert artifact["parts"][0]["text"] == "TLS 1.2 and 1.3"
    finally:
        rx.close()


@pytest.mark.anyio
async def test_a_config_created_later_uses_its_own_authentication(push_server):
    srv = push_server
    demo = json.loads((srv.data_dir / "demo.json").read_text())
    partner, alice = demo["partner"]["agent_token"], demo["alice"]["agent_token"]
    rx = Receiver()
    try:
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {partner}"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            card = await A2ACardResolver(http, srv.url).get_agent_card()
            config = ClientConfig(streaming=False, httpx_client=http, supported_protocol_bindings=["HTTP+JSON"])
            client = ClientFactory(config).create(card)
            req = SendMessageRequest(
                message=user_message("Ping?"), configuration=SendMessageConfiguration(return_immediately=True)
            )
            tasks = [ev.task async for ev in client.send_message(req) if ev.WhichOneof("payload") == "task"]
            task_id = tasks[0].id
            await client.create_task_push_notification_config(
                TaskPushNotificationConfig(
                    task_id=task_id,
                    url=rx.url,
                    authentication=AuthenticationInfo(scheme="Bearer", credentials="receiver-secret"),
                )
            )
            async with connect(srv, alice) as mcp:
                await call(mcp, "post", kind="reply", thread=task_id, body="Pong")
            rx.wait_for(completed, "the COMPLETED event")
            await client.close()
        events = deduplicated(rx.got)
        # The config's creation replays what happened before it (SUBMITTED), then the rest.
        assert [state_of(b) for _, b in events] == ["TASK_STATE_SUBMITTED", "artifact", "TASK_STATE_COMPLETED"]
        assert all(h["authorization"] == "Bearer receiver-secret" for h, _ in events)
        assert all("x-a2a-notification-token" not in h for h, _ in events)
    finally:
        rx.close()


@pytest.mark.anyio
async def test_after_a_rotation_push_jwts_are_signed_by_the_new_key(push_server):
    srv = push_server
    demo = json.loads((srv.data_dir / "demo.json").read_text())
    partner = demo["partner"]["agent_token"]
    env = {**os.environ, "LIAISON_ADMIN_TOKEN": srv.admin_token}
    r = subprocess.run([str(binary()), "keys", "rotate", "--server", srv.url], capture_output=True, text=True,
                       env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    new_kid = json.loads(r.stdout)["rotated_to"]["kid"]
    rx = Receiver()
    try:
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {partner}"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            card = await A2ACardResolver(http, srv.url).get_agent_card()
            client = ClientFactory(
                ClientConfig(streaming=False, httpx_client=http, supported_protocol_bindings=["JSONRPC"])
            ).create(card)
            push = TaskPushNotificationConfig(url=rx.url)
            req = SendMessageRequest(
                message=user_message("Is the rotation done?"),
                configuration=SendMessageConfiguration(return_immediately=True, task_push_notification_config=push),
            )
            [task] = [ev.task async for ev in client.send_message(req) if ev.WhichOneof("payload") == "task"]
            rx.wait_for(lambda got: len(got) >= 1, "the SUBMITTED event")
            jwks = (await http.get(f"{srv.url}/.well-known/jwks.json")).json()
            await client.close()
        headers, body = rx.got[0]
        token = headers["authorization"].removeprefix("Bearer ")
        assert jwt.get_unverified_header(token)["kid"] == new_kid
        key = next(jwt.PyJWK(k) for k in jwks["keys"] if k["kid"] == new_kid)
        claims = jwt.decode(token, key, algorithms=["ES256"], audience=rx.url, issuer=srv.url)
        assert claims["taskId"] == task.id
        assert claims["request_body_sha256"] == hashlib.sha256(body).hexdigest()
    finally:
        rx.close()
    # `keys list` prints the ring, then, once the old key is retired, the retired key apart.
    old_kid = next(k["kid"] for k in srv.admin("GET", "/admin/v1/keys")["keys"] if k["kid"] != new_kid)
    r = subprocess.run([str(binary()), "keys", "retire", old_kid, "--server", srv.url], capture_output=True,
                       text=True, env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(binary()), "keys", "list", "--server", srv.url], capture_output=True, text=True,
                       env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    ring, retired = r.stdout.split("\n\n")
    assert new_kid in ring and old_kid not in ring, r.stdout
    assert retired.startswith("RETIRED KID"), r.stdout
    assert old_kid in retired and "by an admin" in retired, r.stdout
