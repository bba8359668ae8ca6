"""Benchmark: end-to-end latency from one agent's `post` to another agent's waiting `inbox` long-poll
returning it, both over MCP (official Python SDK, legacy sessions), against the real binary.

    python benches/interop/bench_wakeup.py [ROUNDS]        # LIAISON_TEST_DATABASE_URL as for the tests

Prints p50/p90/p99/max of: the post call alone, and post start -> long-poll return.

`LIAISON_BENCH_SERVER_CPUS=1 LIAISON_BENCH_CLIENT_CPUS=0` pins the server (every thread of it, once
started) and this client to those CPUs, as the other benchmarks do (docs/performance.md).
"""

import os
import statistics
import sys
import time

import anyio

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "interop"))
from conftest import call, connect, start_server, stop_server  # noqa: E402


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


async def bench(server, alice_token, bob_token, rounds):
    post_ms, wake_ms = [], []
    async with connect(server, alice_token) as alice, connect(server, bob_token) as bob:
        page = await call(bob, "inbox", consumer="bench")
        cursor = page["last"]
        for i in range(rounds):
            woke = anyio.Event()
            result = {}

            async def wait():
                result["page"] = await call(bob, "inbox", consumer="bench", after=cursor, wait_s=30)
                result["at"] = time.perf_counter()
                woke.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await anyio.sleep(0.02)  # let the long-poll reach the server and subscribe
                started = time.perf_counter()
                await call(alice, "post", kind="announce", channel="bench", body=f"ping {i}")
                post_ms.append((time.perf_counter() - started) * 1000)
                await woke.wait()
            wake_ms.append((result["at"] - started) * 1000)
            assert len(result["page"]["entries"]) == 1
            cursor = result["page"]["cursor"]
    return post_ms, wake_ms


def cpus(name):
    value = os.environ.get(name, "")
    return {int(c) for c in value.split(",") if c.strip()}


def pin(pid, to):
    """Pins every thread of `pid` to the CPUs `to` (threads it starts later inherit it)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(tid), to)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    client_cpus, server_cpus = cpus("LIAISON_BENCH_CLIENT_CPUS"), cpus("LIAISON_BENCH_SERVER_CPUS")
    server, dbname = start_server()
    if server_cpus:
        pin(server.process.pid, server_cpus)
    if client_cpus:
        os.sched_setaffinity(0, client_cpus)
    try:
        server.person("alice", "Alice")
        server.person("bob", "Bob")
        server.channel("bench", ["alice", "bob"])
        a, b = server.token("alice")["secret"], server.token("bob")["secret"]
        post_ms, wake_ms = anyio.run(bench, server, a, b, rounds)
        backend = "postgres" if os.environ.get("LIAISON_TEST_DATABASE_URL", "").startswith("postgres") else "sqlite"
        print(f"{rounds} rounds on {backend}")
        for name, v in (("post call", post_ms), ("post -> wake-up", wake_ms)):
            print(f"  {name:16} p50 {pct(v, 50):6.1f} ms  p90 {pct(v, 90):6.1f} ms  "
                  f"p99 {pct(v, 99):6.1f} ms  max {max(v):6.1f} ms  mean {statistics.mean(v):6.1f} ms")
    finally:
        stop_server(server, dbname)


if __name__ == "__main__":
    main()
