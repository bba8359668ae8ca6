"""The example remote agent (`examples/remote_agent.py`), which liaison's outbound tests delegate to,
exercised with the official a2a-sdk client over JSON-RPC, HTTP+JSON and gRPC: its signed card
verifies (with the SDK's verifier and with an independent RFC 8785 + ECDSA check) and fails once
tampered; each behaviour (complete, ask, auth, reject, fail, slow, wait, big) ends in the state it
promises; subscription, cancel and push notifications work; --no-streaming, --no-push, --token,
--header-check, --bindings, --key and --record do what they say. No database involved."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import grpc
import httpx
import jwt
import pytest
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.types import (
    AuthenticationInfo,
    CancelTaskRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.signing import create_signature_verifier
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from google.protobuf.json_format import MessageToDict

from remote_agent import remote_agent, remote_agent_fixture

BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]
WAIT_S = 30  # generous upper bound for anything to happen; never a timing assertion
S = TaskState

agent = remote_agent_fixture(scope="module")


# ---------------------------------------------------------------------------------------------
# Helpers


def b64url_decode(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def b64url(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def jcs(value) -> str:
    """RFC 8785 canonical JSON, enough for Agent Cards (no floats with fractions)."""
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: k.encode("utf-16-be"))
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + jcs(value[k]) for k in keys) + "}"
    if isinstance(value, list):
        return "[" + ",".join(jcs(v) for v in value) + "]"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        assert value.is_integer(), value
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def verify_independently(card_json: dict, jwks: dict) -> None:
    """Checks one signature of the card as served: ES256 over JCS(card without signatures), with
    `cryptography` alone. Raises on a bad signature."""
    signature = card_json["signatures"][0]
    header = json.loads(b64url_decode(signature["protected"]))
    jwk = next(k for k in jwks["keys"] if k["kid"] == header["kid"])
    public_key = jwt.PyJWK(jwk).key
    unsigned = {k: v for k, v in card_json.items() if k != "signatures"}
    signing_input = (signature["protected"] + "." + b64url(jcs(unsigned).encode())).encode()
    raw = b64url_decode(signature["signature"])
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public_key.verify(der, signing_input, ec.ECDSA(hashes.SHA256()))


def client_for(card, binding: str, http: httpx.AsyncClient, streaming: bool = True):
    config = ClientConfig(
        streaming=streaming,
        httpx_client=http,
        supported_protocol_bindings=[binding],
        use_client_preference=True,
        grpc_channel_factory=lambda url: grpc.aio.insecure_channel(
            url, options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)]
        ),
    )
    return ClientFactory(config).create(card)


def http_client(headers: dict | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(headers={"A2A-Version": "1.0", **(headers or {})}, timeout=httpx.Timeout(WAIT_S))


def message(text: str, task_id: str | None = None, context_id: str | None = None) -> Message:
    m = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    if task_id:
        m.task_id = task_id
    if context_id:
        m.context_id = context_id
    return m


async def send(client, msg: Message, *, immediately=False, push=None, context=None) -> list:
    """All StreamResponses of one SendMessage (one `task` when the client does not stream)."""
    config = SendMessageConfiguration(return_immediately=immediately)
    if push is not None:
        config.task_push_notification_config.CopyFrom(push)
    request = SendMessageRequest(message=msg, configuration=config)
    with anyio.fail_after(WAIT_S):
        return [ev async for ev in client.send_message(request, context=context)]


def final_task(events):
    tasks = [ev.task for ev in events if ev.WhichOneof("payload") == "task"]
    assert tasks, events
    return tasks[-1]


def states(events) -> list:
    out = []
    for ev in events:
        kind = ev.WhichOneof("payload")
        if kind == "task":
            out.append(ev.task.status.state)
        elif kind == "status_update":
            out.append(ev.status_update.status.state)
    return out


def text_of(msg) -> str:
    return "\n".join(p.text for p in msg.parts if p.WhichOneof("content") == "text")


async def fetch_card(agent, http):
    return await A2ACardResolver(http, agent.url).get_agent_card()


class Receiver:
    """A local HTTP server that records the push notifications POSTed to it."""

    def __init__(self):
        self.requests: list[tuple[str, dict, bytes]] = []
        self.cond = threading.Condition()
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with outer.cond:
                    outer.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    outer.cond.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/push"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def events_for(self, task_id: str) -> list[tuple[dict, dict, bytes]]:
        out = []
        for _, headers, body in list(self.requests):
            event = json.loads(body)
            inner = next(iter(event.values()))
            if inner.get("id") == task_id or inner.get("taskId") == task_id:
                out.append((event, headers, body))
        return out

    async def wait_until_final(self, task_id: str, final: str = "TASK_STATE_COMPLETED"):
        def done():
            for event, _, _ in self.events_for(task_id):
                inner = next(iter(event.values()))
                if inner.get("status", {}).get("state") == final:
                    return True
            return False

        with anyio.fail_after(WAIT_S):
            while not done():
                await anyio.sleep(0.05)
        return self.events_for(task_id)


# ---------------------------------------------------------------------------------------------
# The card


@pytest.mark.anyio
async def test_the_card_is_signed_and_verifies_with_the_sdk_and_independently(agent):
    async with http_client() as http:
        card = await fetch_card(agent, http)
        card_json = (await http.get(agent.card_url)).json()
        jwks = (await http.get(agent.jwks_url)).json()

    assert [i.protocol_binding for i in card.supported_interfaces] == ["GRPC", "JSONRPC", "HTTP+JSON"]
    assert card.supported_interfaces[0].url == agent.grpc
    assert card.capabilities.streaming and card.capabilities.push_notifications
    assert {"research", "translate"} <= {s.id for s in card.skills}
    assert all(s.name and s.description and s.tags for s in card.skills)

    assert len(card.signatures) == 1
    header = json.loads(b64url_decode(card.signatures[0].protected))
    assert header == {"alg": "ES256", "kid": agent.kid, "typ": "JOSE", "jku": agent.jwks_url}
    assert agent.jwks_url.startswith(agent.url + "/")

    seen = []

    def key_provider(kid, jku):
        seen.append((kid, jku))
        return next(jwt.PyJWK(k) for k in jwks["keys"] if k["kid"] == kid)

    verify = create_signature_verifier(key_provider, ["ES256"])
    verify(card)
    assert seen == [(agent.kid, agent.jwks_url)]
    verify_independently(card_json, jwks)

    # Tampering with any signed field breaks both checks.
    tampered = type(card)()
    tampered.CopyFrom(card)
    tampered.skills[0].description = "Also wires money"
    with pytest.raises(Exception):
        verify(tampered)
    tampered_json = json.loads(json.dumps(card_json))
    tampered_json["supportedInterfaces"][1]["url"] = "http://evil.example/a2a/jsonrpc"
    with pytest.raises(Exception):
        verify_independently(tampered_json, jwks)


@pytest.mark.anyio
async def test_bindings_flag_orders_the_card_and_unsigned_serves_no_signature():
    with remote_agent("--bindings", "http-json,jsonrpc", "--unsigned", "--no-push", "--no-streaming") as a:
        async with http_client() as http:
            card_json = (await http.get(a.card_url)).json()
            assert (await http.get(a.jwks_url)).status_code == 200
    assert [i["protocolBinding"] for i in card_json["supportedInterfaces"]] == ["HTTP+JSON", "JSONRPC"]
    assert "signatures" not in card_json
    assert card_json["capabilities"] == {"streaming": False, "pushNotifications": False}


@pytest.mark.anyio
async def test_bad_signature_and_foreign_jku_flags_give_cards_that_clients_must_refuse():
    with remote_agent("--bad-signature", "--jku", "https://keys.example/jwks.json") as a:
        async with http_client() as http:
            card = await fetch_card(a, http)
            card_json = (await http.get(a.card_url)).json()
            jwks = (await http.get(a.jwks_url)).json()
    header = json.loads(b64url_decode(card.signatures[0].protected))
    assert header["jku"] == "https://keys.example/jwks.json" and header["kid"] == a.kid
    verify = create_signature_verifier(lambda kid, jku: jwt.PyJWK(jwks["keys"][0]), ["ES256"])
    with pytest.raises(Exception):
        verify(card)
    with pytest.raises(Exception):
        verify_independently(card_json, jwks)


@pytest.mark.anyio
async def test_a_key_file_keeps_the_kid_across_restarts_and_another_key_rotates_it(tmp_path):
    key = tmp_path / "first.pem"
    with remote_agent("--key", str(key)) as a:
        first_kid = a.kid
        assert key.exists() and (key.stat().st_mode & 0o777) == 0o600
        a.restart("--key", str(key))
        assert a.kid == first_kid
        a.restart("--key", str(tmp_path / "second.pem"))
        assert a.kid != first_kid
        async with http_client() as http:
            card_json = (await http.get(a.card_url)).json()
            jwks = (await http.get(a.jwks_url)).json()
        assert [k["kid"] for k in jwks["keys"]] == [a.kid]
        assert json.loads(b64url_decode(card_json["signatures"][0]["protected"]))["kid"] == a.kid
        verify_independently(card_json, jwks)


# ---------------------------------------------------------------------------------------------
# Behaviours, over each binding


@pytest.mark.anyio
@pytest.mark.parametrize("binding", BINDINGS)
async def test_complete_returns_artifacts_of_every_part_kind(agent, binding):
    async with http_client() as http:
        client = client_for(await fetch_card(agent, http), binding, http, streaming=False)
        context_id = str(uuid.uuid4())
        msg = message("complete Which TLS versions?", context_id=context_id)
        task = final_task(await send(client, msg))
        assert task.status.state == S.TASK_STATE_COMPLETED
        assert task.context_id == context_id
        parts = {a.name: a.parts[0] for a in task.artifacts}
        assert parts["echo"].text == "You said: complete Which TLS versions?"
        assert parts["report"].raw == b"Report for: complete Which TLS versions?\n"
        assert (parts["report"].filename, parts["report"].media_type) == ("report.txt", "text/plain")
        assert parts["link"].url == agent.url + "/files/report.txt"
        assert MessageToDict(parts["data"].data)["echo"] == "complete Which TLS versions?"
        assert {p.WhichOneof("content") for p in parts.values()} == {"text", "raw", "url", "data"}
        linked = await http.get(parts["link"].url)
        assert linked.status_code == 200 and linked.text

        got = await client.get_task(GetTaskRequest(id=task.id))
        assert got.status.state == S.TASK_STATE_COMPLETED and len(got.artifacts) == 4
        await client.close()

    received = [r for r in agent.records() if r["messageId"] == msg.message_id]
    assert len(received) == 1
    assert received[0]["binding"] == binding
    assert received[0]["taskId"] == task.id and received[0]["contextId"] == context_id
    assert received[0]["newTask"] is True and received[0]["text"] == "complete Which TLS versions?"
    assert received[0]["parts"] == [{"kind": "text", "chars": len("complete Which TLS versions?")}]


@pytest.mark.anyio
@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("word,interrupted", [("ask", S.TASK_STATE_INPUT_REQUIRED), ("auth", S.TASK_STATE_AUTH_REQUIRED)])
async def test_ask_and_auth_wait_for_the_next_message_on_the_same_task(agent, binding, word, interrupted):
    async with http_client() as http:
        client = client_for(await fetch_card(agent, http), binding, http, streaming=False)
        first = final_task(await send(client, message(f"{word} Translate 'good morning'")))
        assert first.status.state == interrupted
        assert text_of(first.status.message)

        answer = message("Into French", task_id=first.id)
        done = final_task(await send(client, answer))
        assert done.id == first.id and done.context_id == first.context_id
        assert done.status.state == S.TASK_STATE_COMPLETED
        quoted = [p.text for a in done.artifacts for p in a.parts]
        assert any('You answered: "Into French"' in t for t in quoted), quoted
        await client.close()

    received = [r for r in agent.records() if r["taskId"] == first.id]
    assert [r["newTask"] for r in received] == [True, False]
    assert received[1]["messageId"] == answer.message_id


@pytest.mark.anyio
@pytest.mark.parametrize("binding", BINDINGS)
async def test_reject_and_fail_end_the_task_with_a_reason(agent, binding):
    async with http_client() as http:
        client = client_for(await fetch_card(agent, http), binding, http, streaming=False)
        rejected = final_task(await send(client, message("reject please")))
        assert rejected.status.state == S.TASK_STATE_REJECTED
        assert "Rejected" in text_of(rejected.status.message)
        failed = final_task(await send(client, message("fail please")))
        assert failed.status.state == S.TASK_STATE_FAILED
        assert "Failed" in text_of(failed.status.message)
        # An ended task takes no further message.
        with pytest.raises(Exception, match="(?i)terminal|unsupported"):
            await send(client, message("anything", task_id=failed.id))
        await client.close()
    refused = [r for r in agent.records() if r["taskId"] == failed.id and not r["newTask"]]
    assert len(refused) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("binding", BINDINGS)
async def test_slow_streams_three_working_updates_then_completes(agent, binding):
    async with http_client() as http:
        client = client_for(await fetch_card(agent, http), binding, http, streaming=True)
        msg = message("slow Summarize the incident review")
        events = await send(client, msg)
        await client.close()
    (received,) = [r for r in agent.records() if r["messageId"] == msg.message_id]
    assert received["binding"] == binding and received["taskId"] == events[0].task.id
    assert events[0].WhichOneof("payload") == "task"
    updates = [ev.status_update.status for ev in events if ev.WhichOneof("payload") == "status_update"]
    working = [text_of(s.message) for s in updates if s.state == S.TASK_STATE_WORKING]
    assert working == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    assert updates[-1].state == S.TASK_STATE_COMPLETED
    artifacts = [ev.artifact_update.artifact for ev in events if ev.WhichOneof("payload") == "artifact_update"]
    assert [a.name for a in artifacts] == ["summary"]


@pytest.mark.anyio
@pytest.mark.parametrize("binding", BINDINGS)
async def test_wait_is_followed_by_subscription_and_ends_canceled(agent, binding):
    async with http_client() as http:
        card = await fetch_card(agent, http)
        # A streaming send of `wait` would stream until canceled: create the task without blocking.
        blocking = client_for(card, binding, http, streaming=False)
        created = final_task(await send(blocking, message("wait for me"), immediately=True))
        await blocking.close()
        client = client_for(card, binding, http, streaming=True)
        task_id = created.id

        subscribed = []
        first_event = anyio.Event()

        async def follow():
            request = SubscribeToTaskRequest(id=task_id)
            async for ev in client.subscribe(request):
                subscribed.append(ev)
                first_event.set()

        with anyio.fail_after(WAIT_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(follow)
                await first_event.wait()
                # The snapshot comes first; wait until the task works before canceling it.
                while (await client.get_task(GetTaskRequest(id=task_id))).status.state != S.TASK_STATE_WORKING:
                    await anyio.sleep(0.05)
                canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
                assert canceled.status.state == S.TASK_STATE_CANCELED
        # The subscription has ended, on the cancellation.
        assert subscribed[0].WhichOneof("payload") == "task" and subscribed[0].task.id == task_id
        assert states(subscribed)[-1] == S.TASK_STATE_CANCELED
        got = await client.get_task(GetTaskRequest(id=task_id))
        assert got.status.state == S.TASK_STATE_CANCELED
        with pytest.raises(Exception, match="(?i)cancel"):
            await client.cancel_task(CancelTaskRequest(id=task_id))
        await client.close()


@pytest.mark.anyio
@pytest.mark.parametrize("binding", BINDINGS)
async def test_cancel_ends_a_task_waiting_for_input(agent, binding):
    async with http_client() as http:
        client = client_for(await fetch_card(agent, http), binding, http, streaming=False)
        asked = final_task(await send(client, message("ask something")))
        assert asked.status.state == S.TASK_STATE_INPUT_REQUIRED
        canceled = await client.cancel_task(CancelTaskRequest(id=asked.id))
        assert canceled.status.state == S.TASK_STATE_CANCELED
        await client.close()


@pytest.mark.anyio
@pytest.mark.parametrize("binding", BINDINGS)
async def test_big_returns_a_ten_mebibyte_artifact(agent, binding):
    async with http_client() as http:
        client = client_for(await fetch_card(agent, http), binding, http, streaming=False)
        task = final_task(await send(client, message("big")))
        small = final_task(await send(client, message("big 1")))
        await client.close()
    assert task.status.state == S.TASK_STATE_COMPLETED
    (artifact,) = task.artifacts
    assert len(artifact.parts[0].raw) == 10 * 1024 * 1024
    assert (artifact.parts[0].filename, artifact.parts[0].media_type) == ("big.bin", "application/octet-stream")
    assert len(small.artifacts[0].parts[0].raw) == 1024 * 1024


# ---------------------------------------------------------------------------------------------
# Push notifications


def check_push_jwt(agent, jwks, headers, body: bytes, receiver_url: str, task_id: str) -> dict:
    token = headers["authorization"].removeprefix("Bearer ")
    kid = jwt.get_unverified_header(token)["kid"]
    key = next(jwt.PyJWK(k) for k in jwks["keys"] if k["kid"] == kid)
    claims = jwt.decode(token, key=key, algorithms=["ES256"], audience=receiver_url, issuer=agent.url)
    assert claims["taskId"] == task_id
    assert claims["request_body_sha256"] == hashlib.sha256(body).hexdigest()
    assert claims["jti"] and claims["exp"] > claims["iat"]
    return claims


@pytest.mark.anyio
@pytest.mark.parametrize("binding", BINDINGS)
async def test_push_notifications_reach_the_receiver_with_the_token_and_a_jwt(agent, binding):
    receiver = Receiver()
    try:
        async with http_client() as http:
            client = client_for(await fetch_card(agent, http), binding, http, streaming=False)
            jwks = (await http.get(agent.jwks_url)).json()

            # Inline in SendMessage.
            inline = TaskPushNotificationConfig(url=receiver.url, token="tok-inline")
            task = final_task(await send(client, message("complete pushed"), push=inline))
            pushed = await receiver.wait_until_final(task.id)
            kinds = [next(iter(e)) for e, _, _ in pushed]
            assert kinds[0] == "task" and "artifactUpdate" in kinds and "statusUpdate" in kinds
            for _, headers, body in pushed:
                assert headers["x-a2a-notification-token"] == "tok-inline"
                assert headers["content-type"].startswith("application/json")
                check_push_jwt(agent, jwks, headers, body, receiver.url, task.id)
            jtis = {jwt.decode(h["authorization"][7:], options={"verify_signature": False})["jti"] for _, h, _ in pushed}
            assert len(jtis) == len(pushed)

            # Through CreateTaskPushNotificationConfig, on a task waiting for input, with the
            # config's own credentials: those are sent instead of a JWT.
            asked = final_task(await send(client, message("ask who")))
            config = TaskPushNotificationConfig(
                task_id=asked.id,
                id="cfg-1",
                url=receiver.url,
                token="tok-rpc",
                authentication=AuthenticationInfo(scheme="Bearer", credentials="receiver-secret"),
            )
            created = await client.create_task_push_notification_config(config)
            assert created.url == receiver.url
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=asked.id, id="cfg-1")
            )
            assert got.token == "tok-rpc"
            await send(client, message("staging", task_id=asked.id))
            pushed = await receiver.wait_until_final(asked.id)
            for _, headers, _ in pushed:
                assert headers["x-a2a-notification-token"] == "tok-rpc"
                assert headers["authorization"] == "Bearer receiver-secret"
            await client.close()
    finally:
        receiver.close()


@pytest.mark.anyio
async def test_forged_push_jwts_do_not_verify_and_off_sends_none():
    for mode in ("forged", "off"):
        receiver = Receiver()
        try:
            with remote_agent("--push-jwt", mode) as a:
                async with http_client() as http:
                    client = client_for(await fetch_card(a, http), "JSONRPC", http, streaming=False)
                    jwks = (await http.get(a.jwks_url)).json()
                    push = TaskPushNotificationConfig(url=receiver.url, token="t")
                    task = final_task(await send(client, message("complete"), push=push))
                    pushed = await receiver.wait_until_final(task.id)
                    await client.close()
            for _, headers, body in pushed:
                assert headers["x-a2a-notification-token"] == "t"
                if mode == "off":
                    assert "authorization" not in headers
                else:
                    with pytest.raises(jwt.InvalidSignatureError):
                        check_push_jwt(a, jwks, headers, body, receiver.url, task.id)
        finally:
            receiver.close()


# ---------------------------------------------------------------------------------------------
# Capabilities turned off, credentials required


def force_capabilities(card):
    """A copy of the card claiming streaming and push, so the SDK client attempts them."""
    forced = type(card)()
    forced.CopyFrom(card)
    forced.capabilities.streaming = True
    forced.capabilities.push_notifications = True
    return forced


@pytest.mark.anyio
async def test_no_streaming_and_no_push_are_refused_on_every_binding():
    with remote_agent("--no-streaming", "--no-push") as a:
        async with http_client() as http:
            card = await fetch_card(a, http)
            assert not card.capabilities.streaming and not card.capabilities.push_notifications
            for binding in BINDINGS:
                plain = client_for(card, binding, http, streaming=True)
                # The SDK client falls back to a blocking send when the card says no streaming.
                task = final_task(await send(plain, message("complete")))
                assert task.status.state == S.TASK_STATE_COMPLETED
                await plain.close()

                forced = client_for(force_capabilities(card), binding, http, streaming=True)
                streamed = message("complete streamed")
                with pytest.raises(Exception, match="(?i)stream"):
                    await send(forced, streamed)
                plain_client = client_for(card, binding, http, streaming=False)
                waiting = final_task(await send(plain_client, message("ask")))
                with pytest.raises(Exception, match="(?i)stream"):
                    with anyio.fail_after(WAIT_S):
                        [ev async for ev in forced.subscribe(SubscribeToTaskRequest(id=waiting.id))]
                with pytest.raises(Exception, match="(?i)push"):
                    await forced.create_task_push_notification_config(
                        TaskPushNotificationConfig(task_id=waiting.id, url="http://127.0.0.1:9/x")
                    )
                inline = message("complete inline push")
                push = TaskPushNotificationConfig(url="http://127.0.0.1:9/x")
                with pytest.raises(Exception, match="(?i)push"):
                    await send(plain_client, inline, push=push)
                await forced.close()
                await plain_client.close()

                records = {r["messageId"]: r for r in a.records()}
                assert records[streamed.message_id]["refused"] == "UnsupportedOperationError"
                assert records[inline.message_id]["refused"] == "PushNotificationNotSupportedError"
                assert records[inline.message_id]["binding"] == binding


@pytest.mark.anyio
async def test_token_and_header_are_required_on_every_binding():
    secret, header = "s3cret-token", ("X-Team", "blue")
    with remote_agent("--token", secret, "--header-check", f"{header[0]}: {header[1]}") as a:
        async with http_client() as http:
            card = await fetch_card(a, http)  # the card stays public
            assert set(card.security_schemes) == {"bearer", "header"}
            assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
            assert card.security_schemes["header"].api_key_security_scheme.name == "X-Team"
            good = ClientCallContext(service_parameters={"Authorization": f"Bearer {secret}", header[0]: header[1]})
            no_token = ClientCallContext(service_parameters={header[0]: header[1]})
            wrong_header = ClientCallContext(service_parameters={"Authorization": f"Bearer {secret}", header[0]: "red"})
            for binding in BINDINGS:
                client = client_for(card, binding, http, streaming=False)
                for bad in (None, no_token, wrong_header):
                    with pytest.raises(Exception, match="(?i)401|unauthenticated|bearer|header"):
                        await send(client, message("complete"), context=bad)
                task = final_task(await send(client, message("complete"), context=good))
                assert task.status.state == S.TASK_STATE_COMPLETED
                with pytest.raises(Exception, match="(?i)401|unauthenticated|bearer"):
                    await client.get_task(GetTaskRequest(id=task.id))
                await client.close()
            # The plain HTTP answer: 401 with a challenge, on both HTTP bindings.
            for url in (a.jsonrpc_url, a.rest_url + "/tasks/x"):
                r = await http.post(url, json={}) if url == a.jsonrpc_url else await http.get(url)
                assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        # Refused calls never reached the handler: only the accepted ones are recorded.
        assert len(a.records()) == len(BINDINGS)
