"""Instructions per A2A intake: `liaison serve --demo` under callgrind, its counters zeroed after a
warm-up of intakes and dumped after a fixed number more, the total divided by that number.

    python benches/interop/count_intake.py BINARY [INTAKES] [IN_FLIGHT]    # 2,000 at 16 by default

An intake is the partner's JSON-RPC `SendMessage` with `returnImmediately` over keep-alive
connections, each answer checked for `TASK_STATE_SUBMITTED` (as `../shared/bench/` measures it).
Counted, not timed: the figure does not depend on the machine's load, only on the code and on
how the writer batches (16 in flight under callgrind fill every batch). Compare builds with this
one client in one session; other clients send other headers and count differently. SQLite only.
Needs valgrind (`callgrind_control`, `callgrind_annotate`).
"""

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

WARM_UP = 320


def send(url, token, count, in_flight, tag):
    """`count` intakes, `in_flight` at a time; the number of answers that were not SUBMITTED."""
    target = urllib.parse.urlparse(url)
    lock = threading.Lock()
    left = [count]
    bad = [0]

    def worker(w):
        conn = http.client.HTTPConnection(target.hostname, target.port)
        i = 0
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
            i += 1
            body = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "SendMessage",
                    "params": {
                        "message": {
                            "role": "ROLE_USER",
                            "messageId": f"{tag}-{w}-{i}",
                            "parts": [{"text": "hello from a2a bench"}],
                        },
                        "configuration": {"returnImmediately": True},
                    },
                }
            )
            conn.request(
                "POST",
                target.path,
                body,
                {
                    "Content-Type": "application/json",
                    "A2A-Version": "1.0",
                    "Authorization": f"Bearer {token}",
                },
            )
            answer = conn.getresponse()
            text = answer.read()
            if answer.status != 200 or b"TASK_STATE_SUBMITTED" not in text:
                with lock:
                    bad[0] += 1

    workers = [threading.Thread(target=worker, args=(w,)) for w in range(in_flight)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return bad[0]


def free_port():
    """A port nothing listens on now (the server binds it a moment later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    binary = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    in_flight = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    data = tempfile.mkdtemp(prefix="liaison-count-")
    out = os.path.join(data, "callgrind.out")
    env = dict(os.environ, LIAISON_LIMITS__EXTERNAL__PER_S="0", LIAISON_LIMITS__EXTERNAL__BURST="0")
    port = free_port()
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary, "serve", "--demo",
         "--data-dir", data, "--listen", f"127.0.0.1:{port}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 600
        while True:
            try:
                card = json.load(urllib.request.urlopen(f"{base}/.well-known/agent-card.json"))
                if os.path.exists(os.path.join(data, "demo.json")):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the server did not start under callgrind")
            time.sleep(1)
        with open(os.path.join(data, "demo.json")) as f:
            token = json.load(f)["partner"]["agent_token"]
        url = next(i["url"] for i in card["supportedInterfaces"] if i["protocolBinding"] == "JSONRPC")
        if send(url, token, WARM_UP, in_flight, "warm"):
            raise SystemExit("an intake of the warm-up was not SUBMITTED")
        subprocess.run(["callgrind_control", "-z", str(server.pid)], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        if send(url, token, count, in_flight, "count"):
            raise SystemExit("an intake was not SUBMITTED")
        subprocess.run(["callgrind_control", "-d", str(server.pid)], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    finally:
        server.terminate()
        server.wait()
    summary = subprocess.run(["callgrind_annotate", f"{out}.1"], check=True, capture_output=True, text=True).stdout
    total = int(re.search(r"([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", summary).group(1).replace(",", ""))
    print(f"{total:,} instructions for {count:,} intakes: {total / count:,.0f} per intake ({out}.1)")


if __name__ == "__main__":
    main()
