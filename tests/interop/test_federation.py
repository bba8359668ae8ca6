"""Two liaisons federated both ways, as two organisations run them: each registers the other as a
remote agent (`liaison remote add`) and as a party (`liaison party add --channel`), each named by
`[a2a] card_name`. Through liaison's envelope extension (SPEC §4), a request's kind and impact cross
the hop and meet the receiver's own approval even without a skill named, an unmatched effect is
strengthened rather than lost, and a reply's structured result comes back whole; a close's words
reach the other side; malformed extension data is ignored with a warning."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import anyio
import httpx
import pytest

from conftest import Server, binary, call, connect, fresh_database, stop_server, unique
from test_remote_bridge import by, launch, rstate, wait_thread

pytestmark = pytest.mark.anyio

EXTENSION = "urn:liaison:a2a:envelope:v1"


def cli(srv: Server, *args: str, token: str | None = None, env: dict | None = None) -> dict:
    environ = {**os.environ, "LIAISON_ADMIN_TOKEN": srv.admin_token, **(env or {})}
    if token:
        environ["LIAISON_TOKEN"] = token
    r = subprocess.run([str(binary()), *args, "--server", srv.url], capture_output=True, text=True,
                       env=environ, timeout=60)
    assert r.returncode == 0, f"{args}: {r.stderr}"
    return json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}


@pytest.fixture
def pair():
    made = []
    try:
        servers = {}
        for name in ("Team A", "Team B"):
            data_dir = Path(tempfile.mkdtemp(prefix="liaison-federation-"))
            database_url, dbname = fresh_database()
            srv = launch(data_dir, database_url, f'[a2a]\ncard_name = "{name}"\n')
            made.append((srv, dbname))
            servers[name] = srv
        a, b = servers["Team A"], servers["Team B"]
        a.person("alice", "Alice Martin")
        b.person("bob", "Bob Chen")
        # Each side: its own partners channel for the other liaison's tasks, and an outside channel
        # from which its agents delegate to the other (sending needs no approval here).
        for srv, member, peer, peer_srv in ((a, "alice", "team-b", b), (b, "bob", "team-a", a)):
            srv.channel("partners", [member])
            srv.channel("outside", [member])
            srv.admin("PUT", "/admin/v1/channels/outside/policy", {"outbound": "auto"})
        for srv, party_id, remote_id, peer_srv in ((a, "peer-a", "team-b", b), (b, "peer-b", "team-a", a)):
            # The peer registers this side as a party in its partners channel, with its token...
            party = cli(peer_srv, "party", "add", party_id, "--name", "Federated peer", "--channel", "partners")
            assert party["channels"] == ["partners"] and "warning" not in party
            # ...which this side presents when it calls the peer, registered as a remote agent.
            cli(srv, "remote", "add", remote_id, "--card", f"{peer_srv.url}/.well-known/agent-card.json",
                "--channel", "outside", "--auth", "bearer:PEER_TOKEN", env={"PEER_TOKEN": party["token"]["secret"]})
        yield a, b
    finally:
        for srv, dbname in made:
            stop_server(srv, dbname)


async def next_message(client, consumer: str, kind: str, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    cursor = 0
    while time.monotonic() < deadline:
        page = await call(client, "inbox", consumer=consumer, after=cursor, wait_s=2)
        cursor = page["cursor"]
        for e in page["entries"]:
            if e.get("type") == "message" and e["kind"] == kind:
                return e
    raise AssertionError(f"no {kind} arrived")


async def test_kind_impact_and_result_cross_between_two_liaisons_both_ways(pair):
    a, b = pair
    alice, alice_human = a.token("alice")["secret"], a.token("alice", scopes=("human",))["secret"]
    bob, bob_human = b.token("bob")["secret"], b.token("bob", scopes=("human",))["secret"]
    card = httpx.get(f"{b.url}/.well-known/agent-card.json").json()
    assert card["name"] == "Team B"
    # The envelope first; then the approval data and the direct answers of its conversational skill.
    assert [e["uri"] for e in card["capabilities"]["extensions"]][0] == EXTENSION

    # A -> B: a request with impact code, no skill named. B's side opens it as a request with that
    # impact (its request-change skill), so B's own approval applies before any work.
    async with connect(a, alice) as at_a, connect(b, bob) as at_b:
        posted = await call(at_a, "post", kind="request", impact="code", channel="outside", to=["team-b"],
                            body="Please bump rustls in the webhook service.")
        # A's own envelope first: a request with an effect leaves only once A's human allows it.
        cli(a, "approvals", "allow", posted["approval"], token=alice_human)
        entry = await next_message(at_b, unique("bob"), "request")
        assert entry["impact"] == "code" and entry["author"] == "peer-a"
        assert entry["approval"]["state"] == "pending"
        cli(b, "approvals", "allow", entry["approval"]["id"], token=bob_human)
        await call(at_b, "claim", thread=entry["thread"])
        result = {"status": "done", "summary": "Bumped rustls to the latest patch.", "changed": ["Cargo.lock"]}
        await call(at_b, "post", kind="reply", thread=entry["thread"], body="Done, see the result.", result=result)
        view = await wait_thread(at_a, posted["thread"], lambda v: rstate(v) == "completed")
        replies = [m for m in by(view, "team-b") if m["kind"] == "reply"]
        assert len(replies) == 1, json.dumps(view["messages"], indent=1)[:3000] + "".join(a.output[-20:])
        reply = replies[0]
        assert reply["result"]["summary"] == result["summary"] and reply["result"]["changed"] == ["Cargo.lock"]
        assert "Done, see the result." in reply["body"]
        assert [x for x in reply["attachments"] if x["type"] == "data"] == [], "the result is not an attachment too"
        assert "remote agent **Team B**" in reply["label"]["text"]

    # B -> A: a request with impact database; A has no skill for that effect, so its default route
    # is strengthened (never weakened) into a request with it, and needs A's approval. A's agent
    # ends it with a close whose words reach B's thread.
    async with connect(a, alice) as at_a, connect(b, bob) as at_b:
        posted = await call(at_b, "post", kind="request", impact="database", channel="outside", to=["team-a"],
                            body="Please add an index on orders.created_at.")
        cli(b, "approvals", "allow", posted["approval"], token=bob_human)
        entry = await next_message(at_a, unique("alice"), "request")
        assert entry["impact"] == "database" and entry["approval"]["state"] == "pending"
        cli(a, "approvals", "allow", entry["approval"]["id"], token=alice_human)
        await call(at_a, "claim", thread=entry["thread"])
        await call(at_a, "post", kind="close", outcome="done", thread=entry["thread"],
                   body="Index created; the query now takes 3 ms.")
        view = await wait_thread(at_b, posted["thread"], lambda v: rstate(v) == "completed")
        answer = by(view, "team-a")[-1]
        assert "Index created; the query now takes 3 ms." in answer["body"], answer

        # A question crosses as a question, with no approval.
        posted = await call(at_b, "post", kind="question", channel="outside", to=["team-a"], body="Staging or prod?")
        entry = await next_message(at_a, unique("alice2"), "question")
        assert entry["body"] == "Staging or prod?" and "approval" not in entry


async def test_malformed_envelope_data_is_ignored_with_a_warning(pair):
    a, b = pair
    party = cli(b, "party", "add", "probe", "--name", "Probe", "--channel", "partners")
    token = party["token"]["secret"]
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}
    for bad in ({"kind": "order"}, "request", {"kind": "request"}, {"kind": "question", "impact": "code"}):
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "hello"}],
                   "metadata": {EXTENSION: bad}}
        r = httpx.post(f"{b.url}/a2a/jsonrpc", headers=headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": message, "configuration": {"returnImmediately": True}}})
        task = r.json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_SUBMITTED", r.text
    bob = b.token("bob")["secret"]
    async with connect(b, bob) as at_b:
        page = await call(at_b, "inbox", consumer=unique("probe"))
        kinds = {e["kind"] for e in page["entries"] if e.get("author") == "probe"}
        assert kinds == {"question"}, "the default skill applies"
    await anyio.sleep(0.5)
    assert sum("Ignored malformed liaison envelope" in line for line in b.output) == 4, "".join(b.output[-20:])
