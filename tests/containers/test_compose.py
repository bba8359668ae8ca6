"""docker/compose.yaml as it runs: PostgreSQL, two liaison replicas and nginx, reached only through
the proxy, with the official a2a-sdk and MCP SDK. scripts/container-test.sh brings the topology up
and runs this module; run alone it skips.

Which replica served a request is read from the replicas' own access logs (`caller=<person>` on
each request line), so the test can tell that the A2A stream and the MCP agent were on different
replicas, and stop the one holding the stream.

Environment (set by scripts/container-test.sh):
  LIAISON_CT_URL          the proxy, e.g. http://127.0.0.1:41234
  LIAISON_CT_ADMIN_TOKEN  the bootstrap admin token a replica kept
  LIAISON_CT_COMPOSE      the compose command line (`docker-compose -p liaison -f docker/compose.yaml`)
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import anyio
import httpx
import jwt
import pytest
from a2a.client import A2ACardResolver, ClientCallContext, ClientFactory
from a2a.types import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.signing import create_signature_verifier

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "interop"))
from conftest import call, connect  # noqa: E402  (the interop suite's MCP client helpers)
from test_a2a import client_config  # noqa: E402  (its a2a-sdk client settings, gRPC metadata included)

URL = os.environ.get("LIAISON_CT_URL", "")
ADMIN = os.environ.get("LIAISON_CT_ADMIN_TOKEN", "")
COMPOSE = shlex.split(os.environ.get("LIAISON_CT_COMPOSE", ""))
REPLICAS = ("liaison-a", "liaison-b")

pytestmark = pytest.mark.skipif(
    not (URL and ADMIN and COMPOSE),
    reason="the compose topology is brought up by scripts/container-test.sh, which runs this module",
)


@pytest.fixture
def anyio_backend():
    return "asyncio"


def admin(method: str, path: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(
        f"{URL}{path}",
        data=json.dumps(body).encode() if body is not None else None,
        method=method,
        headers={"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=15) as r:
        return json.loads(r.read())


def compose(*args: str, timeout: float = 120) -> str:
    done = subprocess.run([*COMPOSE, *args], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{args}: {done.stderr}"
    return done.stdout


def exec_until_it_succeeds(service: str, *command: str, within: float) -> None:
    """Runs `command` in `service` until it exits 0, for at most `within` seconds. An attempt that
    hangs counts as a failed one: podman's `exec` into a container just restarted, or into the
    proxy while a replica's name does not resolve yet, has been seen to hang (CI), not fail."""
    deadline = time.monotonic() + within
    while True:
        try:
            done = subprocess.run([*COMPOSE, "exec", "-T", service, *command],
                                  capture_output=True, text=True, timeout=10)
            if done.returncode == 0:
                return
            why = done.stderr
        except subprocess.TimeoutExpired:
            why = "the attempt hung for 10 s"
        assert time.monotonic() < deadline, f"{service}: {' '.join(command)} did not succeed: {why}"
        time.sleep(1)


def lines_of(caller: str) -> dict[str, int]:
    """How many access-log lines each replica has written for requests of `caller`."""
    return {r: compose("logs", "--no-color", r).count(f"caller={caller}") for r in REPLICAS}


def address_of(service: str) -> str:
    container = compose("ps", "-q", service).strip()
    done = subprocess.run(["podman", "inspect", container, "--format",
                           "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}"],
                          capture_output=True, text=True, timeout=30)
    return done.stdout.strip()


def a2a_client(card, http, token: str, binding: str, streaming: bool):
    return ClientFactory(client_config(binding, http, token, streaming)).create(card)


def message(text: str) -> Message:
    m = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    m.metadata.update({"skill": "handoff"})
    return m


class World:
    def __init__(self) -> None:
        suffix = uuid.uuid4().hex[:6]
        self.member, self.party = f"ada{suffix}", f"partner{suffix}"
        admin("POST", "/admin/v1/persons", {"id": self.member, "display_name": "Ada Lovelace"})
        created = admin("POST", "/admin/v1/parties", {"id": self.party, "display_name": "Partner Corp"})
        self.party_token = created["token"]["secret"]
        # The card's `handoff` skill routes to the channel `partners` (agent-card/card.toml).
        admin("POST", "/admin/v1/channels", {"name": "partners", "members": [self.member, self.party]})
        self.member_token = admin("POST", "/admin/v1/tokens", {"person": self.member, "scopes": ["agent"]})["token"]["secret"]

    def http(self) -> httpx.AsyncClient:
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {self.party_token}"}
        return httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=None))


class McpServer:
    """What the interop suite's `connect` needs of a server: the MCP URL."""

    mcp_url = f"{URL}/mcp"


@pytest.fixture(scope="module")
def world() -> World:
    return World()


@pytest.mark.anyio
async def test_the_card_through_the_proxy_verifies_with_the_keys_both_replicas_share(world):
    async with world.http() as http:
        jwks = (await http.get(f"{URL}/.well-known/jwks.json")).json()

        def key_provider(kid, jku):
            return next(jwt.PyJWK(k) for k in jwks["keys"] if k["kid"] == kid)

        verify = create_signature_verifier(key_provider, ["ES256"])
        # Round robin: consecutive fetches come from both replicas; each verifies, and they agree
        # (on all but the signature's bytes: ES256 signatures are randomized) with one ETag and
        # one Last-Modified, so a cache in front of either revalidates against both.
        cards, validators = [], set()
        for _ in range(4):
            response = await http.get(f"{URL}/.well-known/agent-card.json")
            response.raise_for_status()
            validators.add((response.headers["etag"], response.headers["last-modified"]))
            cards.append(await A2ACardResolver(http, URL).get_agent_card())
        assert len(validators) == 1, validators
        for card in cards:
            verify(card)
        protected = {tuple(s.protected for s in c.signatures) for c in cards}
        assert len(protected) == 1, protected
        for card in cards:
            del card.signatures[:]
        assert len({c.SerializeToString(deterministic=True) for c in cards}) == 1
        host = URL.split("://", 1)[1]
        assert [i.protocol_binding for i in cards[0].supported_interfaces] == ["JSONRPC", "HTTP+JSON", "GRPC"]
        assert all(host in i.url for i in cards[0].supported_interfaces), cards[0].supported_interfaces


@pytest.mark.anyio
@pytest.mark.parametrize("binding", ["GRPC", "HTTP+JSON"])
async def test_a2a_bindings_through_the_proxy(world, binding):
    """gRPC passes nginx as h2c (grpc_pass); HTTP+JSON as plain proxying."""
    async with world.http() as http:
        card = await A2ACardResolver(http, URL).get_agent_card()
        client = a2a_client(card, http, world.party_token, binding, streaming=False)
        request = SendMessageRequest(message=message(f"Over {binding}: which TLS versions?"),
                                     configuration=SendMessageConfiguration(return_immediately=True))
        tasks = [e.task async for e in client.send_message(request) if e.WhichOneof("payload") == "task"]
        assert len(tasks) == 1 and tasks[0].status.state == TaskState.TASK_STATE_SUBMITTED, tasks
        # Twice, so that round robin sends one of them to each replica.
        for _ in range(2):
            got = await client.get_task(GetTaskRequest(id=tasks[0].id))
            assert got.id == tasks[0].id and got.status.state == TaskState.TASK_STATE_SUBMITTED
        await client.close()


@pytest.mark.anyio
async def test_an_mcp_session_sticks_to_one_replica(world):
    before = lines_of(world.member)
    async with connect(McpServer, world.member_token, agent="claude@ada-laptop:1") as mcp:
        for _ in range(6):
            await call(mcp, "inbox", consumer="sticky", wait_s=0)
    grew = {r: n - before[r] for r, n in lines_of(world.member).items()}
    # The handshake and the six calls: all on one replica.
    assert sorted(grew.values())[0] == 0 and sorted(grew.values())[1] >= 6, grew


@pytest.mark.anyio
async def test_a_stream_survives_its_replica_stopping_while_mcp_answers_on_the_other(world):
    async with connect(McpServer, world.member_token, agent="claude@ada-laptop:2") as mcp:
        # Which replica this session (and every /mcp request from this address) is on.
        before = lines_of(world.member)
        await call(mcp, "inbox", consumer="stream", wait_s=0)
        after = lines_of(world.member)
        mcp_replica = next(r for r in REPLICAS if after[r] > before[r])
        other = next(r for r in REPLICAS if r != mcp_replica)

        async with world.http() as http:
            card = await A2ACardResolver(http, URL).get_agent_card()
            context = ClientCallContext(service_parameters={"authorization": f"Bearer {world.party_token}"})
            # Open SendStreamingMessage until round robin puts it on the replica without the MCP
            # session (the one this test then stops).
            for attempt in range(6):
                client = a2a_client(card, http, world.party_token, "JSONRPC", streaming=True)
                before = lines_of(world.party)
                stream = client.send_message(SendMessageRequest(message=message("Rotate the webhook secret?")),
                                             context=context).__aiter__()
                first = await stream.__anext__()
                assert first.WhichOneof("payload") == "task", first
                task_id = first.task.id
                after = lines_of(world.party)
                if after[other] > before[other]:
                    break
                await stream.aclose()
                await client.close()
            else:
                pytest.fail("round robin never sent the stream to the other replica")

            # The agent claims on its replica: the stream on the other sees WORKING.
            with anyio.fail_after(30):
                while True:
                    page = await call(mcp, "inbox", consumer="stream", wait_s=10)
                    if any(e.get("thread") == task_id for e in page["entries"]):
                        break
            await call(mcp, "claim", thread=task_id)
            with anyio.fail_after(30):
                while True:
                    event = await stream.__anext__()
                    if (event.WhichOneof("payload") == "status_update"
                            and event.status_update.status.state == TaskState.TASK_STATE_WORKING):
                        break

            # The stream's replica stops mid-stream: the stream ends (or breaks) without COMPLETED.
            address_before = address_of(other)
            compose("stop", "-t", "10", other)
            seen = []
            with anyio.fail_after(30):
                try:
                    async for event in stream:
                        seen.append(event)
                except Exception:
                    pass
            assert not any(e.WhichOneof("payload") == "status_update"
                           and e.status_update.status.state == TaskState.TASK_STATE_COMPLETED for e in seen)
            await client.close()

            # The client resubscribes through the proxy (now to the replica left), the agent answers.
            client = a2a_client(card, http, world.party_token, "JSONRPC", streaming=True)
            events = []

            async def follow():
                async for e in client.subscribe(SubscribeToTaskRequest(id=task_id), context=context):
                    events.append(e)

            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(follow)
                    # Until the resubscription has its first event (the task as it stands).
                    while not events:
                        await anyio.sleep(0.05)
                    await call(mcp, "post", kind="reply", thread=task_id, body="Done: rotated, 24 h overlap")
            await client.close()

    assert events[0].WhichOneof("payload") == "task" and events[0].task.id == task_id, events
    assert events[0].task.status.state == TaskState.TASK_STATE_WORKING, events[0]
    states = [TaskState.Name(e.status_update.status.state) for e in events if e.WhichOneof("payload") == "status_update"]
    artifacts = [p.text for e in events if e.WhichOneof("payload") == "artifact_update"
                 for p in e.artifact_update.artifact.parts]
    assert states[-1] == "TASK_STATE_COMPLETED", events
    assert artifacts == ["Done: rotated, 24 h overlap"], events

    # The stopped replica comes back and tells the same story. nginx resolved the replicas' names
    # when it started; a replica that comes back on another address is reached again once nginx
    # reloads (docs/containers.md).
    compose("start", other)
    exec_until_it_succeeds(other, "liaison", "healthcheck", within=60)
    address_after = address_of(other)
    # The network's DNS may not answer for the restarted replica's name yet: nginx then refuses
    # the reload ("host not found in upstream") and keeps its old configuration. Until it takes.
    exec_until_it_succeeds("proxy", "nginx", "-s", "reload", within=60)
    async with world.http() as http:
        card = await A2ACardResolver(http, URL).get_agent_card()
        client = a2a_client(card, http, world.party_token, "JSONRPC", streaming=False)
        # Until the proxy sends one to the restarted replica.
        before = lines_of(world.party)[other]
        with anyio.fail_after(60):
            while lines_of(world.party)[other] == before:
                got = await client.get_task(GetTaskRequest(id=task_id))
                assert got.status.state == TaskState.TASK_STATE_COMPLETED, got
                await anyio.sleep(0.5)
        await client.close()
    print(f"{other}: {address_before} before the stop, {address_after} after the start")
