"""Direct answers (SPEC §8) seen with the official `a2a-sdk` on every binding: on the conversational
skill `chat`, a single reply of the team within the blocking wait comes back as a bare Message, from
SendMessage and as the only item of SendStreamingMessage; a reply after a claim, and a send that asks
for pushes, come back as the task."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientCallContext, ClientFactory
from a2a.types import (
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
)

from conftest import call, connect, start_server, stop_server
from test_a2a import client_config, user_message

pytestmark = pytest.mark.anyio

DIRECT_ANSWERS = "urn:liaison:a2a:direct-answers:v1"


def chat(text: str):
    m = user_message(text)
    m.metadata.update({"skill": "chat"})
    return m


async def answer(srv, alice: str, claim: bool, body: str) -> str:
    """Alice's agent waits for the party's new task and answers it (claiming it first or not)."""
    async with connect(srv, alice, agent="claude@alice:1") as mcp:
        with anyio.fail_after(30):
            while True:
                page = await call(mcp, "inbox", consumer="direct", wait_s=5)
                entry = next((e for e in page["entries"] if e.get("type") == "message"
                              and e.get("author") == "partner"), None)
                await call(mcp, "inbox", consumer="direct", after=page["cursor"], wait_s=0)
                if entry:
                    break
        if claim:
            await call(mcp, "claim", thread=entry["thread"])
        await call(mcp, "post", kind="reply", thread=entry["thread"], body=body)
        return entry["thread"]


async def exchange(srv, alice: str, partner: str, client, message, claim: bool, body: str, config=None):
    """Sends `message` blocking while alice answers; the events the client received."""
    events = []
    # gRPC streams carry the party's token as call metadata.
    auth = ClientCallContext(service_parameters={"authorization": f"Bearer {partner}"})

    async def send():
        req = SendMessageRequest(message=message, configuration=config or SendMessageConfiguration())
        async for ev in client.send_message(req, context=auth):
            events.append(ev)

    async with anyio.create_task_group() as tg:
        tg.start_soon(send)
        await answer(srv, alice, claim, body)
    return events


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_a_single_reply_on_a_conversational_skill_is_a_message_on_every_binding(binding):
    srv, dbname = start_server("--demo")
    try:
        demo = json.loads((srv.data_dir / "demo.json").read_text())
        partner, alice = demo["partner"]["agent_token"], demo["alice"]["agent_token"]
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {partner}"}
        async with httpx.AsyncClient(headers=headers, timeout=60) as http:
            card = await A2ACardResolver(http, srv.url).get_agent_card()
            declared = {e.uri: e for e in card.capabilities.extensions}
            assert list(declared[DIRECT_ANSWERS].params["skills"]) == ["chat"]
            for streaming in (False, True):
                client = ClientFactory(client_config(binding, http, partner, streaming=streaming)).create(card)
                # Answered at once: a Message, of no task, in the task's context.
                question = chat("Is staging up?")
                events = await exchange(srv, alice, partner, client, question, claim=False, body="Yes")
                assert [ev.WhichOneof("payload") for ev in events] == ["message"], events
                message = events[0].message
                assert [p.text for p in message.parts] == ["Yes"]
                assert message.role == 2 and not message.task_id and message.context_id  # ROLE_AGENT
                # A retry after a lost answer gets the same answer, at once.
                auth = ClientCallContext(service_parameters={"authorization": f"Bearer {partner}"})
                retry = [ev async for ev in client.send_message(SendMessageRequest(message=question), context=auth)]
                assert [ev.message.message_id for ev in retry] == [message.message_id], retry
                # Claimed first: the task, completed with the reply as its artifact.
                events = await exchange(srv, alice, partner, client, chat("Upgrade staging"), claim=True, body="Done")
                kinds = [ev.WhichOneof("payload") for ev in events]
                assert "message" not in kinds and kinds[0] == "task", kinds
                # Not conversational: the task, however it is answered.
                ask = user_message("Is prod up?")
                events = await exchange(srv, alice, partner, client, ask, claim=False, body="Yes")
                assert "message" not in [ev.WhichOneof("payload") for ev in events]
                await client.close()
            # Pushes follow a task: a send that configures one is answered with the task.
            client = ClientFactory(client_config(binding, http, partner, streaming=False)).create(card)
            push = TaskPushNotificationConfig(url="https://partner.invalid/hook", token="t")
            config = SendMessageConfiguration(task_push_notification_config=push)
            events = await exchange(srv, alice, partner, client, chat("Ping"), claim=False, body="Pong", config=config)
            assert [ev.WhichOneof("payload") for ev in events] == ["task"], events
            assert events[0].task.status.state == 3  # TASK_STATE_COMPLETED
            await client.close()
    finally:
        stop_server(srv, dbname)
