"""Benchmark: the latency liaison adds to a delegation to a remote A2A agent (SPEC §8b), against
the real binary and the example remote agent (official a2a-sdk), outbound policy `auto`.

    .venv/bin/python benches/interop/bench_bridge.py [ROUNDS] [BINDING]   # LIAISON_TEST_DATABASE_URL as for the tests

Each round, an MCP agent posts a question to the remote agent and waits on its inbox (a long-poll)
for the remote's reply. Printed, p50/p90/p99/max in milliseconds:

- post -> remote receives: from the `post` call to the remote's handler seeing the message (its
  `--record` timestamp; same machine, same clock): the outbox hand-off and the A2A call.
- remote receives -> reply in the inbox: the remote's own work, its stream to liaison, the
  thread message and the long-poll's wake-up.
- direct round trip: an a2a-sdk client sending the same message straight to the remote (blocking
  SendMessage on the same binding): what the remote costs without liaison.

liaison's share of a delegation is the total minus the direct round trip.
"""

from __future__ import annotations

import datetime
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import anyio
import httpx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "interop"))
from conftest import call, connect, fresh_database, stop_server  # noqa: E402
from remote_agent import remote_agent  # noqa: E402
from test_remote_bridge import cli, launch  # noqa: E402


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def line(name, values):
    return (f"{name:<36} p50 {pct(values, 50):7.1f}  p90 {pct(values, 90):7.1f}  "
            f"p99 {pct(values, 99):7.1f}  max {max(values):7.1f}  (n={len(values)})")


async def direct(agent, binding: str, rounds: int) -> list[float]:
    """Blocking SendMessage rounds straight to the remote with the official client."""
    import grpc
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.types import Message, Part, Role, SendMessageConfiguration, SendMessageRequest

    async with httpx.AsyncClient(headers={"A2A-Version": "1.0"}, timeout=30) as http:
        card = await A2ACardResolver(http, agent.url).get_agent_card()
        config = ClientConfig(streaming=False, httpx_client=http, supported_protocol_bindings=[binding],
                              use_client_preference=True,
                              grpc_channel_factory=lambda url: grpc.aio.insecure_channel(url))
        client = ClientFactory(config).create(card)
        out = []
        for i in range(rounds):
            message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER,
                              parts=[Part(text=f"complete direct {i}")])
            request = SendMessageRequest(message=message,
                                         configuration=SendMessageConfiguration(return_immediately=False))
            t0 = time.perf_counter()
            async for _ in client.send_message(request):
                pass
            out.append((time.perf_counter() - t0) * 1000)
        return out


async def via_liaison(srv, s, agent, rounds: int) -> tuple[list[float], list[float]]:
    to_remote, to_inbox = [], []
    async with connect(srv, s["agent"]) as client:
        page = await call(client, "inbox", consumer="bench")
        cursor = page["last"]
        for i in range(rounds):
            tag = uuid.uuid4().hex[:8]
            started_wall = time.time()
            t0 = time.perf_counter()
            await call(client, "post", kind="question", channel=s["channel"], to=["helper"],
                       body=f"complete round {tag}")
            reply_at = None
            while reply_at is None:
                page = await call(client, "inbox", consumer="bench", after=cursor, wait_s=30)
                cursor = page["cursor"]
                for m in page["entries"]:
                    if m.get("author") == "helper" and m.get("kind") == "reply" and tag in m.get("body", ""):
                        reply_at = time.perf_counter()
            total = (reply_at - t0) * 1000
            received = next(r for r in agent.records() if tag in r["text"])
            received_wall = datetime.datetime.fromisoformat(received["time"]).timestamp()
            to_remote.append((received_wall - started_wall) * 1000)
            to_inbox.append(total - to_remote[-1])
    return to_remote, to_inbox


async def main(rounds: int, binding: str):
    names = {"jsonrpc": "JSONRPC", "http-json": "HTTP+JSON", "grpc": "GRPC"}
    data_dir = Path(tempfile.mkdtemp(prefix="liaison-bench-bridge-"))
    database_url, dbname = fresh_database()
    srv = launch(data_dir, database_url)
    try:
        with remote_agent(record=True) as agent:
            srv.person("alice", "Alice Martin")
            chan = "bench"
            srv.channel(chan, ["alice"])
            srv.admin("PUT", f"/admin/v1/channels/{chan}/policy", {"outbound": "auto"})
            cli(srv, "remote", "add", "helper", "--card", agent.card_url, "--channel", chan, "--binding", binding)
            s = {"channel": chan, "agent": srv.token("alice")["secret"]}
            # Warm up both paths.
            await via_liaison(srv, s, agent, 3)
            base = await direct(agent, names[binding], 3)
            to_remote, to_inbox = await via_liaison(srv, s, agent, rounds)
            base = await direct(agent, names[binding], rounds)
            total = [a + b for a, b in zip(to_remote, to_inbox)]
            backend = "PostgreSQL" if database_url else "SQLite"
            print(f"liaison bridge, {backend}, binding {binding}, {rounds} rounds, follow by stream")
            print(line("post -> remote receives (ms)", to_remote))
            print(line("remote receives -> reply in inbox", to_inbox))
            print(line("post -> reply in inbox (total)", total))
            print(line("direct a2a-sdk round trip", base))
            print(f"liaison's share at p50: {pct(total, 50) - pct(base, 50):.1f} ms "
                  f"(total {statistics.median(total):.1f} - direct {statistics.median(base):.1f})")
    finally:
        stop_server(srv, dbname)
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    b = sys.argv[2] if len(sys.argv) > 2 else "jsonrpc"
    anyio.run(main, n, b)
