"""A2A conformance fixes on each binding (JSON-RPC, HTTP+JSON, gRPC), against the real binary: the
capability switches of the card answer the spec's errors in both states, a subscription follows an
interrupted task to its end, history keeps the client's messageIds, authorization and size errors
come in each binding's own shape, and the `Bearer` scheme is case-insensitive. Built on the raw
per-binding helpers of test_a2a_errors.py."""

from __future__ import annotations

import base64
import json
import re
import select
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

import grpc
import httpx
import pytest
from a2a.types import SendMessageRequest, SubscribeToTaskRequest, a2a_pb2_grpc
from google.protobuf import json_format

from conftest import ROOT, call, connect, start_server, stop_server
from test_a2a_errors import BINDINGS, GRPC, JSONRPC, UNKNOWN, World, assert_error, grpc_raw, http_send, send_params

pytestmark = pytest.mark.anyio



@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


def card_dir(tmp_path_factory, **capabilities) -> str:
    """agent-card/card.toml with its [capabilities] switches set as given."""
    text = (ROOT / "agent-card" / "card.toml").read_text()
    for name, on in capabilities.items():
        old = next(l for l in text.splitlines() if l.startswith(f"{name} = "))
        text = text.replace(old, f"{name} = {'true' if on else 'false'}")
    d = tmp_path_factory.mktemp("card")
    (d / "card.toml").write_text(text)
    return str(d)


async def world_of(srv) -> World:
    demo = json.loads((srv.data_dir / "demo.json").read_text())
    w = World(srv.url, demo["partner"]["agent_token"], demo["alice"]["agent_token"], demo["bob"]["agent_token"], "")
    w.server = srv  # for the admin API
    return w


@pytest.fixture(scope="module")
async def stock(anyio_backend, tmp_path_factory):
    """The built-in card with push notifications switched off; extended card on."""
    mp = pytest.MonkeyPatch()
    mp.setenv("LIAISON_A2A__CARD_DIR", card_dir(tmp_path_factory, push_notifications=False))
    srv, dbname = start_server("--demo")
    mp.undo()
    try:
        yield await world_of(srv)
    finally:
        stop_server(srv, dbname)


@pytest.fixture(scope="module")
async def flipped(anyio_backend, tmp_path_factory):
    """The card with both switches the other way: push notifications on, extended card off. Push
    configs point at a closed loopback port, allow-listed, so nothing leaves the machine."""
    mp = pytest.MonkeyPatch()
    mp.setenv("LIAISON_A2A__CARD_DIR", card_dir(tmp_path_factory, push_notifications=True, extended_agent_card=False))
    mp.setenv("LIAISON_OUTBOX__ALLOW", "127.0.0.1")
    srv, dbname = start_server("--demo")
    mp.undo()
    try:
        yield await world_of(srv)
    finally:
        stop_server(srv, dbname)


async def total(w: World) -> int:
    return (await w.peer(JSONRPC).call("ListTasks", {})).result["totalSize"]


# --- item 9: capability switches --------------------------------------------------------------------


PUSH_CALLS = {
    "CreateTaskPushNotificationConfig": lambda t: {"taskId": t, "id": "hook", "url": "http://127.0.0.1:9/hook"},
    "GetTaskPushNotificationConfig": lambda t: {"taskId": t, "id": "hook"},
    "ListTaskPushNotificationConfigs": lambda t: {"taskId": t},
    "DeleteTaskPushNotificationConfig": lambda t: {"taskId": t, "id": "hook"},
}


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("method", list(PUSH_CALLS))
async def test_with_push_off_every_push_call_is_push_not_supported_before_any_lookup(stock, binding, method):
    own = await stock.new_task()
    for task in (own, UNKNOWN):
        reply = await stock.peer(binding).call(method, PUSH_CALLS[method](task))
        assert_error(reply, "PUSH_NOTIFICATION_NOT_SUPPORTED")


@pytest.mark.parametrize("binding", BINDINGS)
async def test_with_push_off_an_inline_push_config_is_refused_and_creates_nothing(stock, binding):
    before = await total(stock)
    params = send_params("With a webhook, please")
    params["configuration"] = {"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/hook"}, "returnImmediately": True}
    assert_error(await stock.peer(binding).call("SendMessage", params), "PUSH_NOTIFICATION_NOT_SUPPORTED")
    assert await total(stock) == before


@pytest.mark.parametrize("binding", BINDINGS)
async def test_with_push_on_push_configs_are_kept_and_unknown_tasks_are_not_found(flipped, binding):
    task = await flipped.new_task()
    peer = flipped.peer(binding)
    created = await peer.call("CreateTaskPushNotificationConfig", PUSH_CALLS["CreateTaskPushNotificationConfig"](task))
    assert not created.failed, created
    got = await peer.call("GetTaskPushNotificationConfig", PUSH_CALLS["GetTaskPushNotificationConfig"](task))
    assert not got.failed and (got.result or got.body)["url"] == "http://127.0.0.1:9/hook", got
    listed = await peer.call("ListTaskPushNotificationConfigs", {"taskId": task})
    assert len((listed.result or listed.body)["configs"]) == 1, listed
    for _ in range(2):  # idempotent: the second delete succeeds too
        assert not (await peer.call("DeleteTaskPushNotificationConfig", PUSH_CALLS["DeleteTaskPushNotificationConfig"](task))).failed
    listed = await peer.call("ListTaskPushNotificationConfigs", {"taskId": task})
    assert not (listed.result or listed.body or {}).get("configs"), listed
    assert_error(await peer.call("ListTaskPushNotificationConfigs", {"taskId": UNKNOWN}), "TASK_NOT_FOUND")


@pytest.mark.parametrize("binding", BINDINGS)
async def test_the_extended_card_answers_when_on_and_is_unsupported_when_off(stock, flipped, binding):
    on = await stock.peer(binding).call("GetExtendedAgentCard", {})
    assert not on.failed, on
    assert_error(await flipped.peer(binding).call("GetExtendedAgentCard", {}), "UNSUPPORTED_OPERATION")


# --- item 8: a subscription follows an interrupted task to its end ----------------------------------


async def subscribe_all(w: World, binding: str, task: str, while_open) -> list[dict]:
    """Every event of SubscribeToTask until the stream closes (as ProtoJSON StreamResponses);
    `while_open()` runs once the first event has arrived."""
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {w.partner}"}
    events: list[dict] = []
    if binding == GRPC:
        async with grpc.aio.insecure_channel(w.peer(GRPC).target) as channel:
            stream = a2a_pb2_grpc.A2AServiceStub(channel).SubscribeToTask(
                SubscribeToTaskRequest(id=task), metadata=tuple((k.lower(), v) for k, v in headers.items()), timeout=30
            )
            async for ev in stream:
                events.append(json_format.MessageToDict(ev))
                if len(events) == 1:
                    await while_open()
        return events
    async with httpx.AsyncClient(timeout=30) as http:
        if binding == JSONRPC:
            body = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task}}
            req = http.stream("POST", f"{w.url}/a2a/jsonrpc", headers={**headers, "Content-Type": "application/json"}, json=body)
        else:
            req = http.stream("GET", f"{w.url}/a2a/rest/tasks/{task}:subscribe", headers=headers)
        async with req as r:
            async for line in r.aiter_lines():
                if line.startswith("data:"):
                    ev = json.loads(line[5:])
                    events.append(ev["result"] if binding == JSONRPC else ev)
                    if len(events) == 1:
                        await while_open()
    return events


def state_of(ev: dict) -> str | None:
    if "task" in ev:
        return ev["task"]["status"]["state"]
    if "statusUpdate" in ev:
        return ev["statusUpdate"]["status"]["state"]
    return None


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_subscription_to_an_input_required_task_follows_it_to_completion(stock, binding):
    task = await stock.new_task()
    async with connect(stock, stock.alice) as mcp:
        await call(mcp, "post", kind="question", thread=task, body="Production or staging?")

        async def answer_and_reply():
            params = send_params("Staging", task_id=task)
            params["configuration"] = {"returnImmediately": True}
            assert not (await stock.peer(JSONRPC).call("SendMessage", params)).failed
            await call(mcp, "post", kind="reply", thread=task, body="Done on staging")

        events = await subscribe_all(stock, binding, task, answer_and_reply)
    states = [state_of(e) for e in events if state_of(e)]
    assert states[0] == "TASK_STATE_INPUT_REQUIRED", states
    assert states[-1] == "TASK_STATE_COMPLETED", states
    assert "TASK_STATE_WORKING" in states, states


# --- item 11: history keeps the client's messageIds -------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_history_shows_the_partys_messages_under_its_own_message_ids(stock, binding):
    opening = send_params("Which TLS versions?")
    opening["configuration"] = {"returnImmediately": True}
    task = (await stock.peer(JSONRPC).call("SendMessage", opening)).result["task"]["id"]
    async with connect(stock, stock.alice) as mcp:
        await call(mcp, "post", kind="reply", thread=task, body="1.2 and 1.3")
    got = await stock.peer(binding).call("GetTask", {"id": task})
    history = (got.result or got.body)["history"]
    assert [(m["role"], m["messageId"]) for m in history][0] == ("ROLE_USER", opening["message"]["messageId"])
    assert history[1]["role"] == "ROLE_AGENT" and history[1]["messageId"].startswith("msg_"), history


# --- item 13: authorization, sizes, the Bearer scheme -----------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_member_token_and_a_party_in_no_channel_are_permission_denied(stock, binding):
    # stock.rival is bob's agent token here: a member, not an external party.
    assert_error(await stock.peer(binding, stock.rival).call("ListTasks", {}), "PERMISSION_DENIED")
    loner = stock.server.admin("POST", "/admin/v1/parties", {"id": f"loner-{binding.lower()[:4]}", "display_name": "Loner"})
    before = await total(stock)
    refused = await stock.peer(binding, loner["token"]["secret"]).call("SendMessage", send_params("Hello?"))
    assert_error(refused, "PERMISSION_DENIED")
    assert await total(stock) == before


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "BeArEr"])
async def test_the_bearer_scheme_is_case_insensitive(stock, binding, scheme):
    peer = stock.peer(binding)
    peer.scheme = scheme
    reply = await peer.call("ListTasks", {})
    assert not reply.failed, reply


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_file_part_of_1_6_mb_is_taken_on_every_binding(stock, binding):
    data = bytes(range(256)) * (1_600_000 // 256)
    params = send_params("See the attached log")
    params["message"]["parts"].append({"raw": base64.b64encode(data).decode(), "filename": "log.bin", "mediaType": "application/octet-stream"})
    params["configuration"] = {"returnImmediately": True}
    reply = await stock.peer(binding).call("SendMessage", params)
    assert not reply.failed, reply.text[:300] if reply.text else reply
    task = (reply.result or reply.body)["task"]["id"]
    got = await stock.peer(JSONRPC).call("GetTask", {"id": task})
    assert base64.b64decode(got.result["history"][0]["parts"][1]["raw"]) == data


@dataclass
class SizeLimit:
    """The request-size limit as the server states it when it refuses a request: the limit and the
    message limits it is meant to cover."""

    request_bytes: int
    attachments: int
    attachment_bytes: int
    body_bytes: int

    @property
    def largest_message_parts(self) -> int:
        """The bytes of the largest valid message's contents as JSON carries them: its body
        JSON-escaped at worst (6 bytes a byte, `\\u0001`) and every attachment base64-encoded.
        The envelope (ids, roles, metadata) comes on top."""
        return 6 * self.body_bytes + self.attachments * ((self.attachment_bytes + 2) // 3 * 4)


def stated_size_limit(url: str, token: str) -> SizeLimit:
    """Announces a 1 GiB JSON-RPC request with the party's token and sends it until the server
    answers: its PayloadTooLarge states the limit (nothing here copies it from the source)."""
    u = urlsplit(url)
    head = (f"POST /a2a/jsonrpc HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Type: application/json\r\n"
            f"A2A-Version: 1.0\r\nAuthorization: Bearer {token}\r\nContent-Length: {2**30}\r\n\r\n")
    chunk = b" " * 2**20
    with socket.create_connection((u.hostname, u.port), timeout=30) as s:
        s.sendall(head.encode())
        for _ in range(2**10):
            if select.select([s], [], [], 0)[0]:
                break
            try:
                s.sendall(chunk)
            except OSError:  # the server answered and stopped reading
                break
        data = b""
        while b"\r\n\r\n" not in data:
            got = s.recv(65536)
            assert got, "closed without an answer"
            data += got
        header, _, body = data.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)content-length: *(\d+)", header).group(1))
        while len(body) < length:
            got = s.recv(65536)
            assert got, "closed mid-answer"
            body += got
    message = json.loads(body)["error"]["message"]
    m = re.search(r"larger than (\d+) bytes.*at most (\d+) attachments of (\d+) bytes and a body of (\d+) bytes",
                  message)
    assert m, message
    return SizeLimit(*(int(g) for g in m.groups()))


@pytest.fixture(scope="module")
def size_limit(stock) -> SizeLimit:
    limit = stated_size_limit(stock.url, stock.partner)
    # The limit covers the largest valid message (a limit cut below it refuses valid messages).
    assert limit.request_bytes >= limit.largest_message_parts, limit
    return limit


def varint(n: int) -> bytes:
    out = b""
    while True:
        low, n = n & 0x7F, n >> 7
        if not n:
            return out + bytes([low])
        out += bytes([low | 0x80])


def sized_send(binding: str, size: int) -> bytes:
    """A valid SendMessage (returning at once) of exactly `size` bytes in the binding's encoding:
    JSON padded with trailing whitespace, protobuf padded with an unknown field (skipped by the
    decoder as the encoding says)."""
    params = send_params("A request as large as allowed")
    params["configuration"] = {"returnImmediately": True}
    if binding == GRPC:
        base = json_format.ParseDict(params, SendMessageRequest()).SerializeToString()
        tag = varint(999 << 3 | 2)  # field 999, length-delimited
        n = size - len(base) - len(tag) - 4
        assert len(varint(n)) == 4, "the padding's length is a 4-byte varint"
        out = base + tag + varint(n) + b"\0" * n
    else:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params} if binding == JSONRPC else params
        text = json.dumps(body).encode()
        out = text + b" " * (size - len(text))
    assert len(out) == size
    return out


async def send_sized(stock, binding: str, payload: bytes):
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {stock.partner}", "Content-Type": "application/json"}
    if binding == GRPC:
        metadata = tuple((k.lower(), v) for k, v in headers.items() if k != "Content-Type")
        return await grpc_raw(stock.peer(GRPC).target, "SendMessage", payload, metadata, timeout=120)
    url = f"{stock.url}/a2a/jsonrpc" if binding == JSONRPC else f"{stock.url}/a2a/rest/message:send"
    return await http_send(binding, "POST", url, headers, payload, timeout=120)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_request_of_the_stated_limit_is_taken_and_one_byte_more_is_payload_too_large(stock, size_limit,
                                                                                               binding):
    before = await total(stock)
    taken = await send_sized(stock, binding, sized_send(binding, size_limit.request_bytes))
    assert not taken.failed, taken.text[:300] if taken.text else taken
    assert await total(stock) == before + 1
    refused = await send_sized(stock, binding, sized_send(binding, size_limit.request_bytes + 1))
    assert_error(refused, "PAYLOAD_TOO_LARGE", rpc_id=None)
    assert await total(stock) == before + 1
