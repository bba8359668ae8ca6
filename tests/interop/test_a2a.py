"""A2A over JSON-RPC and HTTP+JSON with the official `a2a-sdk` client against `serve --demo`: the card's signature
verifies with the SDK's verifier against our JWKS, the external party delegates a task, an internal
agent answers it through MCP, and the party sees SUBMITTED -> INPUT_REQUIRED -> WORKING -> COMPLETED
with the reply as the artifact. Lives beside the MCP tests to share their server fixtures."""

from __future__ import annotations

import json
import uuid

import grpc
import httpx
import jwt
import pytest
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.signing import create_signature_verifier

from conftest import call, connect, start_server, stop_server


class _Metadata(grpc.aio.UnaryUnaryClientInterceptor):
    """Adds the bearer token and A2A-Version to unary gRPC calls (this interceptor does not reach
    the SDK's streaming calls, which take the token through a ClientCallContext instead)."""

    def __init__(self, token: str):
        self.extra = (("authorization", f"Bearer {token}"), ("a2a-version", "1.0"))

    def _details(self, details):
        metadata = tuple(details.metadata or ()) + self.extra
        return details._replace(metadata=metadata)

    async def intercept_unary_unary(self, continuation, details, request):
        return await continuation(self._details(details), request)


def client_config(binding: str, http, token: str, streaming: bool) -> ClientConfig:
    return ClientConfig(
        streaming=streaming,
        httpx_client=http,
        supported_protocol_bindings=[binding],
        grpc_channel_factory=lambda url: grpc.aio.insecure_channel(url, interceptors=[_Metadata(token)]),
    )


def user_message(text: str, task_id: str | None = None) -> Message:
    m = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    if task_id:
        m.task_id = task_id
    return m


async def send(client, message: Message):
    """Sends without blocking and returns the task the server answered with."""
    req = SendMessageRequest(message=message, configuration=SendMessageConfiguration(return_immediately=True))
    tasks = [ev.task async for ev in client.send_message(req) if ev.WhichOneof("payload") == "task"]
    assert len(tasks) == 1, tasks
    return tasks[0]


@pytest.mark.anyio
@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_a_party_delegates_a_task_that_an_mcp_agent_answers(binding):
    srv, dbname = start_server("--demo")
    try:
        demo = json.loads((srv.data_dir / "demo.json").read_text())
        partner, alice = demo["partner"]["agent_token"], demo["alice"]["agent_token"]
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {partner}"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            card = await A2ACardResolver(http, srv.url).get_agent_card()
            jwks = (await http.get(f"{srv.url}/.well-known/jwks.json")).json()

            def key_provider(kid, jku):
                assert jku == f"{srv.url}/.well-known/jwks.json"
                return next(jwt.PyJWK(k) for k in jwks["keys"] if k["kid"] == kid)

            verify = create_signature_verifier(key_provider, ["ES256"])
            verify(card)
            tampered = type(card)()
            tampered.CopyFrom(card)
            tampered.name = "Evil Corp"
            with pytest.raises(Exception):
                verify(tampered)
            assert [i.protocol_binding for i in card.supported_interfaces] == ["JSONRPC", "HTTP+JSON", "GRPC"]

            config = client_config(binding, http, partner, streaming=False)
            client = ClientFactory(config).create(card)
            task = await send(client, user_message("Which TLS versions does the webhook endpoint accept?"))
            assert task.status.state == TaskState.TASK_STATE_SUBMITTED
            task_id = task.id

            async with connect(srv, alice) as mcp:
                await call(mcp, "post", kind="question", thread=task_id, body="Production or staging?")
            got = await client.get_task(GetTaskRequest(id=task_id))
            assert got.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            assert got.status.message.parts[0].text == "Production or staging?"

            answered = await send(client, user_message("Production", task_id=task_id))
            assert answered.status.state == TaskState.TASK_STATE_WORKING

            async with connect(srv, alice) as mcp:
                await call(mcp, "post", kind="reply", thread=task_id, body="TLS 1.2 and 1.3")
            done = await client.get_task(GetTaskRequest(id=task_id, history_length=2))
            assert done.status.state == TaskState.TASK_STATE_COMPLETED
            assert [p.text for a in done.artifacts for p in a.parts] == ["TLS 1.2 and 1.3"]
            assert len(done.history) == 2

            # A message to a completed task, and canceling it, are refused; unknown ids look unknown.
            with pytest.raises(Exception, match="(?i)ended|completed|unsupported"):
                await send(client, user_message("thanks", task_id=task_id))
            with pytest.raises(Exception, match="(?i)cancel"):
                await client.cancel_task(CancelTaskRequest(id=task_id))
            with pytest.raises(Exception, match="(?i)not found|no task"):
                await client.get_task(GetTaskRequest(id="thr_" + "0" * 32))

            # A second task is canceled (twice: idempotent); the listing puts it first (newest
            # status), counts both and pages by token.
            other = await send(client, user_message("Never mind this one"))
            for _ in range(2):
                canceled = await client.cancel_task(CancelTaskRequest(id=other.id))
                assert canceled.status.state == TaskState.TASK_STATE_CANCELED
            listing = await client.list_tasks(ListTasksRequest())
            assert [t.id for t in listing.tasks] == [other.id, task_id]
            assert listing.total_size == 2
            first = await client.list_tasks(ListTasksRequest(page_size=1))
            assert [t.id for t in first.tasks] == [other.id] and first.next_page_token
            second = await client.list_tasks(ListTasksRequest(page_size=1, page_token=first.next_page_token))
            assert [t.id for t in second.tasks] == [task_id] and not second.next_page_token
            only_done = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED))
            assert [t.id for t in only_done.tasks] == [task_id]
            await client.close()
    finally:
        stop_server(srv, dbname)


@pytest.mark.anyio
async def test_jsonrpc_refuses_a_missing_version_a_bad_token_and_malformed_json():
    srv, dbname = start_server("--demo")
    try:
        demo = json.loads((srv.data_dir / "demo.json").read_text())
        url = f"{srv.url}/a2a/jsonrpc"
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
        auth = {"Authorization": f"Bearer {demo['partner']['agent_token']}"}
        async with httpx.AsyncClient(timeout=10) as http:
            r = await http.post(url, json=body, headers=auth)
            assert r.json()["error"]["data"][0]["reason"] == "VERSION_NOT_SUPPORTED"
            r = await http.post(url + "/", json=body, headers={**auth, "A2A-Version": "1.0"})
            assert r.json()["error"]["data"][0]["reason"] == "TASK_NOT_FOUND"
            r = await http.post(url, json=body, headers={"A2A-Version": "1.0", "Authorization": "Bearer lsn_bad"})
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
            r = await http.post(url, content=b"{nope", headers={**auth, "A2A-Version": "1.0", "Content-Type": "application/json"})
            assert r.json()["error"]["code"] == -32700
            r = await http.post(url, content=b"{}", headers={**auth, "A2A-Version": "1.0", "Content-Type": "text/plain"})
            assert r.json()["error"]["data"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
            # A member's token cannot use the A2A interface, not even for a task that exists: refused
            # as forbidden, not answered as an unknown task.
            send = {"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {
                "message": {"messageId": "m-member-check", "role": "ROLE_USER", "parts": [{"text": "Hello?"}]},
                "configuration": {"returnImmediately": True}}}
            r = await http.post(url, json=send, headers={**auth, "A2A-Version": "1.0"})
            task = r.json()["result"]["task"]["id"]
            mine = {**body, "params": {"id": task}}
            r = await http.post(url, json=mine, headers={**auth, "A2A-Version": "1.0"})
            assert r.json()["result"]["id"] == task, r.text
            member = {"Authorization": f"Bearer {demo['alice']['agent_token']}", "A2A-Version": "1.0"}
            for method, params in (("GetTask", {"id": task}), ("ListTasks", {})):
                r = await http.post(url, json={**body, "method": method, "params": params}, headers=member)
                error = r.json()["error"]
                assert error["code"] == -31403 and error["data"][0]["reason"] == "PERMISSION_DENIED", r.text
                assert task not in r.text
    finally:
        stop_server(srv, dbname)


@pytest.mark.anyio
@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_stream_and_subscribe_see_the_same_events_in_order(binding):
    srv, dbname = start_server("--demo")
    try:
        demo = json.loads((srv.data_dir / "demo.json").read_text())
        partner, alice = demo["partner"]["agent_token"], demo["alice"]["agent_token"]
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {partner}"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            card = await A2ACardResolver(http, srv.url).get_agent_card()
            config = client_config(binding, http, partner, streaming=True)
            client = ClientFactory(config).create(card)
            req = SendMessageRequest(message=user_message("Please summarise the outage."))
            # The SDK's own way to send the token as gRPC metadata (HTTP bindings use the headers).
            auth = ClientCallContext(service_parameters={"authorization": f"Bearer {partner}"})
            streamed, subscribed = [], []

            async def follow_stream():
                async for ev in client.send_message(req, context=auth):
                    streamed.append(ev)

            async def follow_subscription(task_id):
                async for ev in client.subscribe(SubscribeToTaskRequest(id=task_id), context=auth):
                    subscribed.append(ev)

            import anyio

            async with anyio.create_task_group() as tg:
                tg.start_soon(follow_stream)
                with anyio.fail_after(20):
                    while not streamed:
                        await anyio.sleep(0.05)
                task_id = streamed[0].task.id
                tg.start_soon(follow_subscription, task_id)
                with anyio.fail_after(20):
                    while not subscribed:
                        await anyio.sleep(0.05)
                async with connect(srv, alice) as mcp:
                    await call(mcp, "post", kind="announce", thread=task_id, body="On it")
                    await call(mcp, "post", kind="reply", thread=task_id, body="Disk full on db-2")

            def shape(events):
                out = []
                for ev in events[1:]:
                    kind = ev.WhichOneof("payload")
                    if kind == "status_update":
                        out.append(("status", TaskState.Name(ev.status_update.status.state)))
                    elif kind == "artifact_update":
                        out.append(("artifact", ev.artifact_update.artifact.parts[0].text))
                return out

            expected = [("status", "TASK_STATE_WORKING"), ("artifact", "Disk full on db-2"), ("status", "TASK_STATE_COMPLETED")]
            assert streamed[0].WhichOneof("payload") == "task"
            assert subscribed[0].WhichOneof("payload") == "task"
            assert shape(streamed) == expected
            assert shape(subscribed) == expected
            await client.close()
    finally:
        stop_server(srv, dbname)
