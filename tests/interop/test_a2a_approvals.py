"""The approval envelope seen from outside, with the official `a2a-sdk` on every binding: a
`request-change` task stays SUBMITTED with "Awaiting approval by …" until a human of the team
decides, and its status message carries the approval as data under `urn:liaison:a2a:approval:v1`
(state, approvalId, approvers, decidedBy); allowed, an MCP agent claims and completes it; rejected, it ends TASK_STATE_REJECTED with
the reason, in GetTask and in a subscription alike."""

from __future__ import annotations

import json
import urllib.request

import anyio
import httpx
import pytest
from google.protobuf import json_format
from a2a.client import A2ACardResolver, ClientCallContext, ClientFactory
from a2a.types import GetTaskRequest, SubscribeToTaskRequest, TaskState

from conftest import call, call_error, connect, start_server, stop_server
from test_a2a import client_config, send, user_message

pytestmark = pytest.mark.anyio


def api(srv, method: str, path: str, token: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{srv.url}{path}", data=data, method=method,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


APPROVAL = "urn:liaison:a2a:approval:v1"


def approval_data(status) -> dict:
    """The approval data of a status message (a2a-sdk gives metadata as a protobuf Struct)."""
    assert APPROVAL in status.message.extensions, status
    return json.loads(json_format.MessageToJson(status.message.metadata))[APPROVAL]


def change(text: str):
    m = user_message(text)
    m.metadata.update({"skill": "request-change"})
    return m


def pending_approval(srv, human: str, task_id: str) -> dict:
    page = api(srv, "GET", "/api/v1/approvals?pending=true", human)
    return next(a for a in page["approvals"] if a["thread"] == task_id)


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_a_change_waits_for_a_human_and_is_completed_or_rejected(binding):
    srv, dbname = start_server("--demo")
    try:
        demo = json.loads((srv.data_dir / "demo.json").read_text())
        partner = demo["partner"]["agent_token"]
        alice, alice_human = demo["alice"]["agent_token"], demo["alice"]["human_token"]
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {partner}"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            card = await A2ACardResolver(http, srv.url).get_agent_card()
            client = ClientFactory(client_config(binding, http, partner, streaming=False)).create(card)
            streaming = ClientFactory(client_config(binding, http, partner, streaming=True)).create(card)
            auth = ClientCallContext(service_parameters={"authorization": f"Bearer {partner}"})

            # 1. Allowed: the subscription sees the approval, the work and the completion.
            task = await send(client, change("Bump the TLS library in the webhook service."))
            assert task.status.state == TaskState.TASK_STATE_SUBMITTED
            assert task.status.message.parts[0].text.startswith("Awaiting approval by ")
            got = await client.get_task(GetTaskRequest(id=task.id))
            assert "Alice" in got.status.message.parts[0].text
            pending = approval_data(got.status)
            assert pending["state"] == "pending" and "Alice" in pending["approvers"]
            assert pending["approvalId"] == pending_approval(srv, alice_human, task.id)["id"]
            assert "decidedBy" not in pending and approval_data(task.status)["state"] == "pending"
            declared = [e.uri for e in card.capabilities.extensions]
            assert APPROVAL in declared
            async with connect(srv, alice, agent="claude@alice:1") as mcp:
                err, _ = await call_error(mcp, "claim", thread=task.id)
                assert err["code"] == "approval_pending"

            events = []

            async def follow():
                async for ev in streaming.subscribe(SubscribeToTaskRequest(id=task.id), context=auth):
                    events.append(ev)

            async with anyio.create_task_group() as tg:
                tg.start_soon(follow)
                with anyio.fail_after(20):
                    while not events:
                        await anyio.sleep(0.05)
                approval = pending_approval(srv, alice_human, task.id)
                api(srv, "POST", f"/api/v1/approvals/{approval['id']}/allow", alice_human, {})
                with anyio.fail_after(20):
                    while len(events) < 2:
                        await anyio.sleep(0.05)
                async with connect(srv, alice, agent="claude@alice:1") as mcp:
                    await call(mcp, "claim", thread=task.id)
                    await call(mcp, "post", kind="reply", thread=task.id, body="Done: 0.23.1")
            statuses = [(TaskState.Name(ev.status_update.status.state),
                         ev.status_update.status.message.parts[0].text if ev.status_update.status.message.parts else "")
                        for ev in events[1:] if ev.WhichOneof("payload") == "status_update"]
            assert statuses[0][0] == "TASK_STATE_SUBMITTED" and statuses[0][1].startswith("Approved by Alice")
            approved = approval_data(next(ev.status_update.status for ev in events[1:]
                                          if ev.WhichOneof("payload") == "status_update"))
            assert approved["state"] in ("approved", "consumed") and approved["decidedBy"] == "Alice"
            assert [s for s, _ in statuses[1:]] == ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]

            # 2. Rejected: the task ends REJECTED with the reason.
            task = await send(client, change("Drop the audit table."))
            approval = pending_approval(srv, alice_human, task.id)
            api(srv, "POST", f"/api/v1/approvals/{approval['id']}/reject", alice_human,
                {"reason": "We never drop audit data"})
            got = await client.get_task(GetTaskRequest(id=task.id))
            assert got.status.state == TaskState.TASK_STATE_REJECTED
            assert "We never drop audit data" in got.status.message.parts[0].text
            rejected = approval_data(got.status)
            assert rejected["state"] == "rejected" and rejected["decidedBy"] == "Alice"
            await client.close()
            await streaming.close()
    finally:
        stop_server(srv, dbname)
