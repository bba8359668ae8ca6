"""A2A error cases on each binding (JSON-RPC, HTTP+JSON, gRPC) against the real binary (`serve --demo`),
each checked against the spec's error table (v1.0.1, the server's default; reference/a2a.md §2.5):
the JSON-RPC code, HTTP status or gRPC status code, and the `google.rpc.ErrorInfo` (reason and domain
`a2a-protocol.org`) that every binding carries:

- JSON-RPC: HTTP 200, `{"jsonrpc": "2.0", "id", "error": {code, message, data: [ErrorInfo]}}`;
- HTTP+JSON: AIP-193 `{"error": {code, status, message, details: [ErrorInfo]}}` with the table's status;
- gRPC: the status code, and `grpc-status-details-bin` decoded as `google.rpc.Status` with the
  ErrorInfo among its details (decoded with googleapis-common-protos, installed with a2a-sdk[grpc]).

Raw httpx and grpc.aio (with the SDK's generated stub, or a raw method path for bytes) are used
rather than the SDK client, so the tests control every header and body. One server serves the whole
module; each test makes the tasks it changes.

Where the spec leaves a choice open, the test asserts what liaison does and says so in its docstring.
"""

from __future__ import annotations

import json
import urllib.parse
import uuid
from dataclasses import dataclass, field

import grpc
import httpx
import pytest
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
    a2a_pb2_grpc,
)
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2

from conftest import call, connect, start_server, stop_server

pytestmark = pytest.mark.anyio

JSONRPC, REST, GRPC = "JSONRPC", "HTTP+JSON", "GRPC"
BINDINGS = [JSONRPC, REST, GRPC]
DOMAIN = "a2a-protocol.org"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
# Well-formed (the shape of liaison's task ids) but never issued.
UNKNOWN = "thr_" + "0" * 32

S = grpc.StatusCode
# The error table (spec v1.0.1): ErrorInfo.reason -> (JSON-RPC code, HTTP status, gRPC code).
TABLE = {
    "TASK_NOT_FOUND": (-32001, 404, S.NOT_FOUND),
    "TASK_NOT_CANCELABLE": (-32002, 400, S.FAILED_PRECONDITION),
    "UNSUPPORTED_OPERATION": (-32004, 400, S.FAILED_PRECONDITION),
    "CONTENT_TYPE_NOT_SUPPORTED": (-32005, 400, S.INVALID_ARGUMENT),
    "VERSION_NOT_SUPPORTED": (-32009, 400, S.FAILED_PRECONDITION),
    "PUSH_NOTIFICATION_NOT_SUPPORTED": (-32003, 400, S.FAILED_PRECONDITION),
    # Not A2A errors (spec §3.3.2 names only HTTP and gRPC codes); JSON-RPC codes are liaison's.
    "PERMISSION_DENIED": (-31403, 403, S.PERMISSION_DENIED),
    "PAYLOAD_TOO_LARGE": (-32600, 413, S.RESOURCE_EXHAUSTED),
    # The standard JSON-RPC errors; reasons as the server's one table names them.
    "JSON_PARSE": (-32700, 400, S.INVALID_ARGUMENT),
    "INVALID_REQUEST": (-32600, 400, S.INVALID_ARGUMENT),
    "METHOD_NOT_FOUND": (-32601, 404, S.UNIMPLEMENTED),
    "INVALID_PARAMS": (-32602, 400, S.INVALID_ARGUMENT),
}

GRPC_REQUESTS = {
    "GetTask": GetTaskRequest,
    "CancelTask": CancelTaskRequest,
    "SubscribeToTask": SubscribeToTaskRequest,
    "SendMessage": SendMessageRequest,
    "ListTasks": ListTasksRequest,
    "CreateTaskPushNotificationConfig": TaskPushNotificationConfig,
    "GetTaskPushNotificationConfig": GetTaskPushNotificationConfigRequest,
    "ListTaskPushNotificationConfigs": ListTaskPushNotificationConfigsRequest,
    "DeleteTaskPushNotificationConfig": DeleteTaskPushNotificationConfigRequest,
    "GetExtendedAgentCard": GetExtendedAgentCardRequest,
}
STREAMING = {"SubscribeToTask", "SendStreamingMessage"}


# --- one call, whatever the binding -------------------------------------------------------------


@dataclass
class Reply:
    """One answer, normalised: `status` is the HTTP status (JSON bindings) or the gRPC code;
    `details` the error's detail objects as ProtoJSON `Any` dicts (each with `@type`)."""

    binding: str
    status: object
    content_type: str = ""
    body: dict | None = None
    text: str = ""
    grpc_message: str = ""
    grpc_status: status_pb2.Status | None = None
    result: dict | None = None
    details: list[dict] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        if self.binding == GRPC:
            return self.status != S.OK
        if self.binding == JSONRPC:
            return self.body is not None and "error" in self.body
        return self.status >= 400

    def canonical(self, replace: dict[str, str]) -> str:
        """The whole answer as text, with the given substrings replaced (to compare two answers
        that may differ only in an id)."""
        if self.binding == GRPC:
            status = None
            if self.grpc_status is not None:
                status = json_format.MessageToDict(self.grpc_status, preserving_proto_field_name=True)
                status["details"] = self.details
            text = json.dumps([self.status.name, self.grpc_message, status], sort_keys=True)
        else:
            text = json.dumps([self.status, self.content_type, self.text])
        for old, new in replace.items():
            text = text.replace(old, new)
        return text


def any_to_dict(detail) -> dict:
    """A `google.protobuf.Any` from status details as ProtoJSON, ErrorInfo decoded."""
    if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
        info = error_details_pb2.ErrorInfo()
        detail.Unpack(info)
        return {"@type": detail.type_url, **json_format.MessageToDict(info)}
    return {"@type": detail.type_url}


def grpc_reply(error: grpc.aio.AioRpcError) -> Reply:
    status = None
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
    details = [any_to_dict(d) for d in status.details] if status is not None else []
    return Reply(GRPC, error.code(), grpc_message=error.details() or "", grpc_status=status, details=details)


def http_reply(binding: str, status: int, content_type: str, text: str) -> Reply:
    try:
        body = json.loads(text) if text else None
    except ValueError:
        body = None
    reply = Reply(binding, status, content_type=content_type, body=body, text=text)
    if isinstance(body, dict):
        if binding == JSONRPC:
            reply.result = body.get("result")
            reply.details = (body.get("error") or {}).get("data") or []
        elif "error" in body:
            reply.details = body["error"].get("details") or []
        else:
            reply.result = body
    return reply


class Peer:
    """A caller of one binding: builds the binding's request for an A2A method, sends it with the
    headers (or metadata) asked for, and returns a normalised [`Reply`]."""

    def __init__(self, base: str, binding: str, token: str | None):
        self.base = base
        self.binding = binding
        self.token = token
        self.target = urllib.parse.urlsplit(base).netloc
        # The authentication scheme as sent (RFC 9110: case-insensitive).
        self.scheme = "Bearer"

    def headers(self, version: str | None, token: str | None) -> dict[str, str]:
        h = {}
        if version is not None:
            h["A2A-Version"] = version
        if token:
            h["Authorization"] = f"{self.scheme} {token}"
        return h

    async def call(self, method: str, params: dict | None = None, *, version: str | None = "1.0", rpc_id=1) -> Reply:
        params = params or {}
        if self.binding == JSONRPC:
            body = {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}
            return await http_send(
                JSONRPC, "POST", f"{self.base}/a2a/jsonrpc",
                {**self.headers(version, self.token), "Content-Type": "application/json"},
                json.dumps(body).encode(),
            )
        if self.binding == REST:
            verb, path, query, body = rest_route(method, params)
            url = f"{self.base}/a2a/rest{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
            headers = self.headers(version, self.token)
            content = None
            if body is not None:
                headers["Content-Type"] = "application/json"
                content = json.dumps(body).encode()
            return await http_send(REST, verb, url, headers, content)
        metadata = tuple(self.headers(version, self.token).items())
        metadata = tuple((k.lower(), v) for k, v in metadata)
        return await grpc_send(self.target, method, params, metadata)


def rest_route(method: str, params: dict) -> tuple[str, str, dict, dict | None]:
    """(verb, path under /a2a/rest, query, JSON body) of a method in the HTTP+JSON binding."""
    p = dict(params)
    quoted = lambda v: urllib.parse.quote(v, safe="")  # noqa: E731
    if method == "GetTask":
        return "GET", f"/tasks/{quoted(p.pop('id'))}", p, None
    if method == "CancelTask":
        return "POST", f"/tasks/{quoted(p.pop('id'))}:cancel", {}, p
    if method == "SubscribeToTask":
        return "GET", f"/tasks/{quoted(p.pop('id'))}:subscribe", {}, None
    if method == "SendMessage":
        return "POST", "/message:send", {}, p
    if method == "ListTasks":
        return "GET", "/tasks", p, None
    if method == "CreateTaskPushNotificationConfig":
        return "POST", f"/tasks/{quoted(p.pop('taskId'))}/pushNotificationConfigs", {}, p
    if method == "ListTaskPushNotificationConfigs":
        return "GET", f"/tasks/{quoted(p.pop('taskId'))}/pushNotificationConfigs", p, None
    if method in ("GetTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig"):
        verb = "GET" if method.startswith("Get") else "DELETE"
        return verb, f"/tasks/{quoted(p.pop('taskId'))}/pushNotificationConfigs/{quoted(p.pop('id'))}", {}, None
    if method == "GetExtendedAgentCard":
        return "GET", "/extendedAgentCard", {}, None
    raise ValueError(method)


async def http_send(binding: str, verb: str, url: str, headers: dict, content: bytes | None,
                    timeout: float = 15) -> Reply:
    """Sends one request; an SSE answer is read up to its first event only."""
    async with httpx.AsyncClient(timeout=timeout) as http:
        async with http.stream(verb, url, headers=headers, content=content) as r:
            ctype = r.headers.get("content-type", "")
            if ctype.startswith("text/event-stream"):
                async for line in r.aiter_lines():
                    if line.startswith("data:"):
                        return http_reply(binding, r.status_code, ctype, line[5:].strip())
                return http_reply(binding, r.status_code, ctype, "")
            return http_reply(binding, r.status_code, ctype, (await r.aread()).decode())


async def grpc_send(target: str, method: str, params: dict, metadata) -> Reply:
    request = json_format.ParseDict(params, GRPC_REQUESTS[method]())
    async with grpc.aio.insecure_channel(target) as channel:
        rpc = getattr(a2a_pb2_grpc.A2AServiceStub(channel), method)
        try:
            if method in STREAMING:
                stream = rpc(request, metadata=metadata, timeout=15)
                first = await stream.read()
                stream.cancel()
                result = None if first is grpc.aio.EOF else json_format.MessageToDict(first)
            else:
                result = json_format.MessageToDict(await rpc(request, metadata=metadata, timeout=15))
        except grpc.aio.AioRpcError as e:
            return grpc_reply(e)
    return Reply(GRPC, S.OK, result=result)


async def grpc_raw(target: str, method: str, payload: bytes, metadata, timeout: float = 15) -> Reply:
    """A unary call whose request body is `payload` as is (no serialiser); the answer's bytes are
    not decoded."""
    async with grpc.aio.insecure_channel(target) as channel:
        rpc = channel.unary_unary(f"/lf.a2a.v1.A2AService/{method}", request_serializer=None, response_deserializer=None)
        try:
            await rpc(payload, metadata=metadata, timeout=timeout)
        except grpc.aio.AioRpcError as e:
            return grpc_reply(e)
    return Reply(GRPC, S.OK)


def assert_error(reply: Reply, reason: str, rpc_id=1) -> dict:
    """The reply is the table's error for `reason` in its binding's shape; returns its ErrorInfo."""
    jsonrpc_code, http_status, grpc_code = TABLE[reason]
    assert reply.failed, f"expected {reason}, got {reply}"
    if reply.binding == JSONRPC:
        # JSON-RPC errors travel with HTTP 200 (what a2a-sdk does; the spec does not fix it).
        assert reply.status == 200, reply
        assert reply.content_type.startswith("application/json"), reply
        body = reply.body
        assert body["jsonrpc"] == "2.0" and "result" not in body, body
        assert body["id"] == rpc_id, body
        error = body["error"]
        assert error["code"] == jsonrpc_code, body
        assert isinstance(error["message"], str) and error["message"], body
        assert isinstance(error["data"], list), body
    elif reply.binding == REST:
        assert reply.status == http_status, reply
        assert reply.content_type.startswith("application/json"), reply
        error = reply.body["error"]
        assert error["code"] == http_status, reply.body
        assert error["status"] == grpc_code.name, reply.body
        assert isinstance(error["message"], str) and error["message"], reply.body
        assert isinstance(error["details"], list), reply.body
    else:
        assert reply.status == grpc_code, reply
        assert reply.grpc_message, reply
        assert reply.grpc_status is not None, f"no grpc-status-details-bin: {reply}"
        assert reply.grpc_status.code == grpc_code.value[0], reply
        assert reply.grpc_status.message == reply.grpc_message, reply
    infos = [d for d in reply.details if d.get("@type") == ERROR_INFO]
    assert len(infos) == 1, f"one ErrorInfo expected: {reply}"
    info = infos[0]
    assert info["reason"] == reason, reply
    assert info["domain"] == DOMAIN, reply
    return info


# --- the server and its tasks --------------------------------------------------------------------


@pytest.fixture(scope="module")
def anyio_backend():
    # Module scope, so that the module's one server can be an async fixture.
    return "asyncio"


@dataclass
class World:
    url: str
    partner: str
    alice: str
    rival: str
    # A task of the second party, `rival`, that `partner` must not see.
    foreign: str

    def peer(self, binding: str, token: str | None = None) -> Peer:
        return Peer(self.url, binding, token or self.partner)

    async def new_task(self, token: str | None = None, text: str = "Is the staging database up?") -> str:
        """A new task (not waiting for an answer) of the party with `token` (default partner)."""
        reply = await self.peer(JSONRPC, token).call("SendMessage", send_params(text))
        assert not reply.failed, reply
        return reply.result["task"]["id"]

    async def completed_task(self) -> str:
        """A partner task that alice answered over MCP (`post kind=reply`), so it is COMPLETED."""
        task = await self.new_task()
        async with connect(self, self.alice) as mcp:
            await call(mcp, "post", kind="reply", thread=task, body="Yes, it is up.")
        assert await self.state(task) == "TASK_STATE_COMPLETED"
        return task

    async def canceled_task(self) -> str:
        task = await self.new_task()
        reply = await self.peer(JSONRPC).call("CancelTask", {"id": task})
        assert reply.result["status"]["state"] == "TASK_STATE_CANCELED", reply
        return task

    async def task(self, task: str, token: str | None = None) -> dict:
        reply = await self.peer(JSONRPC, token).call("GetTask", {"id": task})
        assert not reply.failed, reply
        return reply.result

    async def state(self, task: str, token: str | None = None) -> str:
        return (await self.task(task, token))["status"]["state"]

    @property
    def mcp_url(self) -> str:  # what conftest.connect reads
        return f"{self.url}/mcp"


def send_params(text: str, task_id: str | None = None) -> dict:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id:
        message["taskId"] = task_id
    return {"message": message, "configuration": {"returnImmediately": True}}


@pytest.fixture(scope="module")
async def world(anyio_backend):
    srv, dbname = start_server("--demo")
    try:
        demo = json.loads((srv.data_dir / "demo.json").read_text())
        # A second external party, as `liaison party add` makes it, sharing the partners channel.
        rival = srv.admin("POST", "/admin/v1/parties", {"id": "rival", "display_name": "Rival Ltd"})["token"]["secret"]
        srv.admin("POST", "/admin/v1/channels/partners/members", {"add": ["rival"]})
        w = World(srv.url, demo["partner"]["agent_token"], demo["alice"]["agent_token"], rival, foreign="")
        w.foreign = await w.new_task(rival, "Rival's private question")
        yield w
    finally:
        stop_server(srv, dbname)


# --- 1. unknown task ids --------------------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("method", ["GetTask", "CancelTask", "SubscribeToTask"])
@pytest.mark.parametrize("task_id", [UNKNOWN, "nope"], ids=["well-formed", "malformed"])
async def test_an_unknown_task_id_is_task_not_found(world, binding, method, task_id):
    """An id never issued is TaskNotFound, whether or not it has the shape of liaison's ids (a
    malformed id is answered as unknown rather than InvalidParams: it cannot be the caller's task)."""
    reply = await world.peer(binding).call(method, {"id": task_id})
    assert_error(reply, "TASK_NOT_FOUND")


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_message_to_an_unknown_task_is_task_not_found(world, binding):
    reply = await world.peer(binding).call("SendMessage", send_params("hello?", task_id=UNKNOWN))
    assert_error(reply, "TASK_NOT_FOUND")


@pytest.mark.parametrize("tenant", ["acme", "tasks-eu", "message"])
@pytest.mark.parametrize("method", ["GetTask", "CancelTask", "SubscribeToTask"])
async def test_an_unknown_task_under_a_tenant_prefix_is_task_not_found(world, tenant, method):
    """The HTTP+JSON routes also exist under `/{tenant}`; the tenant is an opaque string (liaison
    has one tenant per deployment and ignores it), so any tenant answers as the plain route does,
    even one that begins like a route (`tasks-eu`, `message`)."""
    verb, path, _, body = rest_route(method, {"id": UNKNOWN})
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {world.partner}"}
    content = None
    if body is not None:
        headers["Content-Type"] = "application/json"
        content = json.dumps(body).encode()
    plain = await http_send(REST, verb, f"{world.url}/a2a/rest{path}", headers, content)
    tenanted = await http_send(REST, verb, f"{world.url}/a2a/rest/{tenant}{path}", headers, content)
    assert_error(tenanted, "TASK_NOT_FOUND")
    assert tenanted.canonical({}) == plain.canonical({})


# --- 2. another party's task ----------------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("method", ["GetTask", "CancelTask", "SubscribeToTask", "SendMessage"])
async def test_a_foreign_task_is_answered_exactly_like_an_unknown_one(world, binding, method):
    """`partner` asking for `rival`'s task gets, byte for byte apart from the id, the answer to an
    id that was never issued; and nothing changes for `rival`."""
    peer = world.peer(binding)

    def params(task_id):
        if method == "SendMessage":
            # The same messageId both times, so the two bodies can be compared.
            p = send_params("Let me in", task_id=task_id)
            p["message"]["messageId"] = "probe-1"
            return p
        return {"id": task_id}

    before = await world.task(world.foreign, world.rival)
    foreign = await peer.call(method, params(world.foreign), rpc_id=9)
    unknown = await peer.call(method, params(UNKNOWN), rpc_id=9)
    assert_error(foreign, "TASK_NOT_FOUND", rpc_id=9)
    assert foreign.canonical({world.foreign: UNKNOWN}) == unknown.canonical({})
    after = await world.task(world.foreign, world.rival)
    assert after == before


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_foreign_task_is_not_listed(world, binding):
    reply = await world.peer(binding).call("ListTasks", {"pageSize": 100})
    assert not reply.failed, reply
    assert world.foreign not in [t["id"] for t in reply.result.get("tasks", [])]


# --- 3. and 4. ended tasks ------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def ended(world):
    return {"completed": await world.completed_task(), "canceled": await world.canceled_task()}


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("state", ["completed", "canceled"])
async def test_a_message_to_an_ended_task_is_unsupported_operation(world, ended, binding, state):
    """SPEC §8 and the digest §7: a message to a terminal task is UnsupportedOperation (-32004 /
    400 / FAILED_PRECONDITION), and the task is left as it was."""
    task = ended[state]
    before = await world.task(task)
    reply = await world.peer(binding).call("SendMessage", send_params("One more thing", task_id=task))
    assert_error(reply, "UNSUPPORTED_OPERATION")
    assert await world.task(task) == before


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("state", ["completed", "canceled"])
async def test_subscribing_to_an_ended_task_is_unsupported_operation(world, ended, binding, state):
    """Digest §7: SubscribeToTask on a terminal task is UnsupportedOperation."""
    reply = await world.peer(binding).call("SubscribeToTask", {"id": ended[state]})
    assert_error(reply, "UNSUPPORTED_OPERATION")


async def test_rest_subscribe_by_post_answers_as_by_get(world, ended):
    """The proto routes SubscribeToTask as GET, the spec text as POST; both are served, alike."""
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {world.partner}"}
    for task, reason in [(UNKNOWN, "TASK_NOT_FOUND"), (ended["completed"], "UNSUPPORTED_OPERATION")]:
        url = f"{world.url}/a2a/rest/tasks/{task}:subscribe"
        by_get = await http_send(REST, "GET", url, headers, None)
        by_post = await http_send(REST, "POST", url, headers, None)
        assert_error(by_post, reason)
        assert by_post.canonical({}) == by_get.canonical({})


@pytest.mark.parametrize("binding", BINDINGS)
async def test_canceling_a_completed_task_is_task_not_cancelable(world, ended, binding):
    task = ended["completed"]
    reply = await world.peer(binding).call("CancelTask", {"id": task})
    assert_error(reply, "TASK_NOT_CANCELABLE")
    assert await world.state(task) == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize("binding", BINDINGS)
async def test_canceling_a_canceled_task_again_returns_it(world, ended, binding):
    """Not an error: CancelTask is idempotent (digest §7), so a second cancel returns the task."""
    reply = await world.peer(binding).call("CancelTask", {"id": ended["canceled"]})
    assert not reply.failed, reply
    assert reply.result["status"]["state"] == "TASK_STATE_CANCELED"


# --- 5. A2A-Version ------------------------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("version", [None, "", "0.3", "2.0", "1.1", "99.0"], ids=["missing", "empty", "0.3", "2.0", "1.1", "99.0"])
async def test_a_missing_or_unsupported_version_is_version_not_supported(world, binding, version):
    """Missing or empty means 0.3 (spec §3.2.6), which this 1.0 interface refuses; so are 2.0 and
    99.0. `1.1` is refused too: the card declares protocolVersion 1.0 only (a2a-sdk is laxer and
    accepts any 1.x; the spec only says the server MUST use the requested Major.Minor's semantics).
    On every binding the version is checked before authentication and before the task is looked up."""
    reply = await world.peer(binding).call("GetTask", {"id": UNKNOWN}, version=version)
    info = assert_error(reply, "VERSION_NOT_SUPPORTED")
    # liaison's own ErrorInfo metadata: what was asked for and what is served.
    assert info["metadata"] == {"requestedVersion": version or "0.3", "supportedVersions": "1.0"}


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("version", ["1.0", "1.0.0", "1.0.3"])
async def test_version_1_0_with_or_without_a_patch_number_is_served(world, binding, version):
    """A patch number MUST NOT affect negotiation (spec §3.2.6): past the version check, the
    unknown id is what is wrong."""
    reply = await world.peer(binding).call("GetTask", {"id": UNKNOWN}, version=version)
    assert_error(reply, "TASK_NOT_FOUND")


@pytest.mark.parametrize("binding", [JSONRPC, REST])
async def test_the_version_may_come_as_a_query_parameter(world, binding):
    """Clients MAY send `?A2A-Version=1.0` instead of the header (spec §3.2.6); a header, when
    both are sent, wins (liaison's choice)."""
    auth = {"Authorization": f"Bearer {world.partner}"}
    if binding == JSONRPC:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": UNKNOWN}}).encode()
        send = lambda query, extra: http_send(  # noqa: E731
            JSONRPC, "POST", f"{world.url}/a2a/jsonrpc?{query}", {**auth, **extra, "Content-Type": "application/json"}, body
        )
    else:
        send = lambda query, extra: http_send(REST, "GET", f"{world.url}/a2a/rest/tasks/{UNKNOWN}?{query}", {**auth, **extra}, None)  # noqa: E731
    assert_error(await send("A2A-Version=1.0", {}), "TASK_NOT_FOUND")
    assert_error(await send("A2A-Version=0.3", {}), "VERSION_NOT_SUPPORTED")
    assert_error(await send("A2A-Version=1.0", {"A2A-Version": "2.0"}), "VERSION_NOT_SUPPORTED")


# --- 6. content types ----------------------------------------------------------------------------


def jsonrpc_body(method: str = "GetTask", params: dict | None = None, rpc_id=1) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params or {"id": UNKNOWN}}).encode()


@pytest.mark.parametrize("binding", [JSONRPC, REST])
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml", None])
async def test_a_wrong_content_type_is_content_type_not_supported(world, binding, content_type):
    """A JSON body under another media type (or none) is ContentTypeNotSupported (-32005 / 400 /
    INVALID_ARGUMENT). On JSON-RPC liaison refuses it before reading the body, so the error's id is
    null even though the body holds one (the JSON-RPC spec allows null when the id was not read)."""
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {world.partner}"}
    if content_type:
        headers["Content-Type"] = content_type
    if binding == JSONRPC:
        reply = await http_send(JSONRPC, "POST", f"{world.url}/a2a/jsonrpc", headers, jsonrpc_body(rpc_id=5))
        assert_error(reply, "CONTENT_TYPE_NOT_SUPPORTED", rpc_id=None)
    else:
        body = json.dumps(send_params("Plain text?")).encode()
        reply = await http_send(REST, "POST", f"{world.url}/a2a/rest/message:send", headers, body)
        assert_error(reply, "CONTENT_TYPE_NOT_SUPPORTED")


@pytest.mark.parametrize("binding", [JSONRPC, REST])
@pytest.mark.parametrize(
    "content_type", ["application/json", "application/a2a+json", "application/json; charset=utf-8", "Application/A2A+JSON"]
)
async def test_both_json_media_types_are_accepted(world, binding, content_type):
    """`application/json` (v1.0.0, the TCK) and `application/a2a+json` (v1.0.1) are both accepted,
    with parameters and in any case: past the content check, the unknown id is what is wrong."""
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {world.partner}", "Content-Type": content_type}
    if binding == JSONRPC:
        reply = await http_send(JSONRPC, "POST", f"{world.url}/a2a/jsonrpc", headers, jsonrpc_body())
    else:
        reply = await http_send(REST, "POST", f"{world.url}/a2a/rest/tasks/{UNKNOWN}:cancel", headers, b"{}")
    assert_error(reply, "TASK_NOT_FOUND")


# --- 7. ListTasks page size ----------------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("page_size", [0, 101, -1])
async def test_a_page_size_out_of_1_to_100_is_invalid_params(world, binding, page_size):
    reply = await world.peer(binding).call("ListTasks", {"pageSize": page_size})
    assert_error(reply, "INVALID_PARAMS")


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("page_size", [1, 100, None])
async def test_a_page_size_of_1_to_100_or_none_is_served(world, binding, page_size):
    reply = await world.peer(binding).call("ListTasks", {} if page_size is None else {"pageSize": page_size})
    assert not reply.failed, reply
    # The page size answered is the one asked for, or the default of 50.
    assert reply.result.get("pageSize") == (page_size or 50)


# --- 8. malformed bodies -------------------------------------------------------------------------


MALFORMED_JSON = [b"{nope", b'{"jsonrpc": "2.0", "id": 1,', b"\xff\xfe", b""]


@pytest.mark.parametrize("body", MALFORMED_JSON, ids=["garbage", "truncated", "not-utf8", "empty"])
async def test_malformed_json_on_jsonrpc_is_a_parse_error(world, body):
    """-32700 with id null (the id cannot be read), HTTP 200, ErrorInfo reason JSON_PARSE."""
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {world.partner}", "Content-Type": "application/json"}
    reply = await http_send(JSONRPC, "POST", f"{world.url}/a2a/jsonrpc", headers, body)
    assert_error(reply, "JSON_PARSE", rpc_id=None)


@pytest.mark.parametrize("route", ["message:send", f"tasks/{UNKNOWN}:cancel"])
@pytest.mark.parametrize("body", MALFORMED_JSON[:3], ids=["garbage", "truncated", "not-utf8"])
async def test_malformed_json_on_rest_is_400_json_parse(world, route, body):
    """HTTP+JSON: 400 INVALID_ARGUMENT with ErrorInfo reason JSON_PARSE (the table's row for a
    body that is not JSON); the body is read before the task is looked up."""
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {world.partner}", "Content-Type": "application/json"}
    reply = await http_send(REST, "POST", f"{world.url}/a2a/rest/{route}", headers, body)
    assert_error(reply, "JSON_PARSE")


WRONG_SHAPES = [
    {"message": {"messageId": "m", "role": "ROLE_USER", "parts": "not a list"}},
    {"message": "not an object"},
    {"message": {"messageId": "m", "role": "ROLE_NOBODY", "parts": [{"text": "x"}]}},
    {"configuration": {"historyLength": "many"}, "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}},
]


@pytest.mark.parametrize("binding", [JSONRPC, REST])
@pytest.mark.parametrize("params", WRONG_SHAPES, ids=["parts", "message", "role", "historyLength"])
async def test_json_of_the_wrong_shape_is_invalid_params(world, binding, params):
    """Valid JSON that is not a SendMessageRequest is InvalidParams (-32602 / 400 INVALID_PARAMS) on
    both JSON bindings alike, not a parse error: the body parsed, its fields did not."""
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {world.partner}", "Content-Type": "application/json"}
    if binding == JSONRPC:
        reply = await http_send(JSONRPC, "POST", f"{world.url}/a2a/jsonrpc", headers, jsonrpc_body("SendMessage", params))
    else:
        reply = await http_send(REST, "POST", f"{world.url}/a2a/rest/message:send", headers, json.dumps(params).encode())
    assert_error(reply, "INVALID_PARAMS")


@pytest.mark.parametrize(
    "body, reason, rpc_id",
    [
        (b"[]", "INVALID_REQUEST", None),
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}]', "INVALID_REQUEST", None),
        (b'{"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "x"}}', "INVALID_REQUEST", None),
        (b'{"jsonrpc": "1.0", "id": 3, "method": "GetTask"}', "INVALID_REQUEST", 3),
        (b'{"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"id": "x"}}', "METHOD_NOT_FOUND", 3),
        (b'{"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": ["x"]}', "INVALID_PARAMS", 3),
    ],
    ids=["empty-batch", "batch", "no-id", "jsonrpc-1.0", "0.3-method", "params-array"],
)
async def test_json_that_is_not_a_request_gets_the_standard_jsonrpc_codes(world, body, reason, rpc_id):
    """Batches are refused (liaison's choice: every A2A method has a result, none is batched), as
    is a request without an id (liaison answers it rather than treating it as a notification)."""
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {world.partner}", "Content-Type": "application/json"}
    reply = await http_send(JSONRPC, "POST", f"{world.url}/a2a/jsonrpc", headers, body)
    assert_error(reply, reason, rpc_id=rpc_id)


MALFORMED_PROTOBUF = [
    b"\xff\xff\xff\xff",  # a field key that is not a valid varint
    b"\x12\x02\xff\xfe",  # id (field 2, a string) that is not UTF-8
    b"\x12\x10abc",  # id whose length runs past the end of the body
]


@pytest.mark.parametrize("method", ["GetTask", "SendMessage"])
@pytest.mark.parametrize("payload", MALFORMED_PROTOBUF, ids=["bad-varint", "not-utf8", "truncated"])
async def test_a_malformed_protobuf_body_is_invalid_argument(world, method, payload):
    """A gRPC request body that is not the method's protobuf is bad input (SPEC §14: malformed
    protobuf gets a clear error with details): INVALID_ARGUMENT with an ErrorInfo in the status
    details. The reason chosen is INVALID_REQUEST (the table has no protobuf-parse row; JSON_PARSE
    names JSON)."""
    metadata = (("a2a-version", "1.0"), ("authorization", f"Bearer {world.partner}"))
    reply = await grpc_raw(Peer(world.url, GRPC, None).target, method, payload, metadata)
    assert_error(reply, "INVALID_REQUEST")


async def test_a_well_formed_protobuf_body_passes_the_raw_path(world):
    """The raw-bytes path above is sound: the same call with a valid GetTaskRequest reaches the
    service (and the unknown id is what is wrong)."""
    metadata = (("a2a-version", "1.0"), ("authorization", f"Bearer {world.partner}"))
    payload = GetTaskRequest(id=UNKNOWN).SerializeToString()
    reply = await grpc_raw(Peer(world.url, GRPC, None).target, "GetTask", payload, metadata)
    assert_error(reply, "TASK_NOT_FOUND")


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("token", [None, "lsn_unknown", "a.b.c"], ids=["none", "unknown", "jwt-shaped"])
async def test_a_missing_or_unknown_credential_is_unauthenticated(world, binding, token):
    """Not an A2A error: HTTP 401 on the JSON bindings (the REST body's code and status say 401
    UNAUTHENTICATED too), gRPC UNAUTHENTICATED. Nothing is created."""
    peer = Peer(world.url, binding, None)
    peer.token = token
    before = await world.peer(JSONRPC).call("ListTasks", {})
    reply = await peer.call("SendMessage", send_params("sneaking in"))
    if binding == GRPC:
        assert reply.status == S.UNAUTHENTICATED, reply
    else:
        assert reply.status == 401, reply
        if binding == REST:
            assert reply.body["error"]["code"] == 401 and reply.body["error"]["status"] == "UNAUTHENTICATED", reply
            assert reply.body["error"]["details"][0]["reason"] == "UNAUTHENTICATED", reply
    after = await world.peer(JSONRPC).call("ListTasks", {})
    assert after.result["totalSize"] == before.result["totalSize"]
