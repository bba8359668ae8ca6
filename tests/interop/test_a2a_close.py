"""A task the team ends with a `close` (outcome done) and words: the close's text and attachments are
the final status message of COMPLETED, the same on every binding, in the stream, in GetTask and in the
push to the party's receiver (official `a2a-sdk` client; the agent on the official MCP SDK)."""

from __future__ import annotations

import base64
import json
import os

import anyio
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientCallContext, ClientFactory
from a2a.types import GetTaskRequest, SendMessageConfiguration, SendMessageRequest, TaskPushNotificationConfig, TaskState

from conftest import call, connect, start_server, stop_server
from test_a2a import client_config, user_message
from test_a2a_push import Receiver, deduplicated, state_of

pytestmark = pytest.mark.anyio

WORDS = "Fixed: the webhook endpoint now accepts TLS 1.3. Closing."
NOTE = b"rotation log\n"


@pytest.fixture
def push_server():
    os.environ["LIAISON_OUTBOX__ALLOW"] = "127.0.0.1"
    try:
        srv, dbname = start_server("--demo")
    finally:
        del os.environ["LIAISON_OUTBOX__ALLOW"]
    yield srv
    stop_server(srv, dbname)


def closing_message(parts) -> tuple[str, list]:
    """The text of a status message's parts, and its other parts."""
    texts = [p.text for p in parts if p.WhichOneof("content") == "text"]
    return "\n\n".join(texts), [p for p in parts if p.WhichOneof("content") != "text"]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_a_close_s_words_are_the_final_status_message_everywhere(push_server, binding):
    srv = push_server
    demo = json.loads((srv.data_dir / "demo.json").read_text())
    partner, alice = demo["partner"]["agent_token"], demo["alice"]["agent_token"]
    rx = Receiver()
    try:
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {partner}"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            card = await A2ACardResolver(http, srv.url).get_agent_card()
            client = ClientFactory(client_config(binding, http, partner, streaming=True)).create(card)
            push = TaskPushNotificationConfig(url=rx.url, token="tok-close")
            req = SendMessageRequest(
                message=user_message("Does the webhook endpoint accept TLS 1.3?"),
                configuration=SendMessageConfiguration(task_push_notification_config=push),
            )
            auth = ClientCallContext(service_parameters={"authorization": f"Bearer {partner}"})
            streamed = []

            async def follow():
                async for ev in client.send_message(req, context=auth):
                    streamed.append(ev)

            async with anyio.create_task_group() as tg:
                tg.start_soon(follow)
                with anyio.fail_after(20):
                    while not streamed:
                        await anyio.sleep(0.05)
                task_id = streamed[0].task.id
                async with connect(srv, alice) as mcp:
                    await call(
                        mcp, "post", kind="close", thread=task_id, outcome="done", body=WORDS,
                        attachments=[{"type": "inline", "filename": "log.txt", "media_type": "text/plain",
                                      "data_base64": base64.b64encode(NOTE).decode()}],
                    )

            last = streamed[-1]
            assert last.WhichOneof("payload") == "status_update"
            status = last.status_update.status
            assert status.state == TaskState.TASK_STATE_COMPLETED
            text, others = closing_message(status.message.parts)
            assert text == WORDS and [p.raw for p in others] == [NOTE], status
            got = await client.get_task(GetTaskRequest(id=task_id))
            assert got.status.state == TaskState.TASK_STATE_COMPLETED
            assert closing_message(got.status.message.parts)[0] == WORDS
            assert got.status.message.message_id == status.message.message_id
            assert len(got.artifacts) == 0, "a close is not a reply: no artifact"
            await client.close()

        rx.wait_for(lambda got: any(state_of(b) == "TASK_STATE_COMPLETED" for _, b in got), "the COMPLETED push")
        final = [json.loads(b) for _, b in deduplicated(rx.got) if state_of(b) == "TASK_STATE_COMPLETED"]
        message = final[-1]["statusUpdate"]["status"]["message"]
        assert message["parts"][0]["text"] == WORDS
        assert base64.b64decode(message["parts"][1]["raw"]) == NOTE
    finally:
        rx.close()
