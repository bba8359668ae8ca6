"""Starts a system under test for the A2A conformance kit: `liaison serve --demo` on a fresh data
directory (or a server you already run, with --url and --token) and the scenario agent answering
its tasks, then prints how to run the TCK against it. Stops both on Ctrl-C.

    python tests/tck/run_sut.py [--port 9999] [--spec-version 1.0.0] [--binary PATH]
    python tests/tck/run_sut.py --url http://127.0.0.1:8080 --token lsn_…   # agent only

Not collected by pytest (the name does not start with `test_`): the TCK is not on PyPI and cannot
run in CI. docs/conformance.md records the results and the commands.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import scenario_agent

ROOT = Path(__file__).resolve().parents[2]


def default_binary() -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "liaison"


def start_liaison(binary: Path, port: int, spec_version: str, data_dir: Path) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "LIAISON_A2A__SPEC_VERSION": spec_version, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
    cmd = [str(binary), "serve", "--demo", "--data-dir", str(data_dir), "--listen", f"127.0.0.1:{port}"]
    # From the repository, so the server reads its agent-card/ (the skills the kit is routed to).
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    for line in process.stdout:
        sys.stdout.write(line)
        m = re.search(r"serving at (https?://\S+)", line)
        if m:
            threading.Thread(target=lambda: [sys.stdout.write(l) for l in process.stdout], daemon=True).start()
            return process, m.group(1)
    raise SystemExit("liaison did not start")


def add_tck_party(binary: Path, url: str, data_dir: Path) -> str:
    """Adds the party the kit calls as: in the demo's `partners` channel, its default skill the
    conversational `chat` (the kit names no skill, and its DM-MSG-001 wants a direct answer; every
    other scenario's agent claims first, so those stay tasks). Returns its bearer token."""
    out = subprocess.run(
        [str(binary), "party", "add", "tck", "--name", "A2A TCK", "--default-skill", "chat",
         "--channel", "partners", "--server", url, "--data-dir", str(data_dir)],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out)["token"]["secret"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=9999)
    parser.add_argument("--spec-version", default="1.0.0", help="[a2a] spec_version (the TCK 1.0-dev checks 1.0.0)")
    parser.add_argument("--binary", type=Path, default=default_binary())
    parser.add_argument("--url", help="use this running server instead of starting one")
    parser.add_argument("--token", help="with --url: an agent token of a member of the skills' channel")
    args = parser.parse_args()
    # SIGTERM stops the server too, as Ctrl-C does.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx2").setLevel(logging.WARNING)

    process, data_dir = None, None
    try:
        if args.url:
            if not args.token:
                parser.error("--url needs --token")
            url, token = args.url.rstrip("/"), args.token
        else:
            data_dir = Path(tempfile.mkdtemp(prefix="liaison-tck-"))
            process, url = start_liaison(args.binary, args.port, args.spec_version, data_dir)
            demo = json.loads((data_dir / "demo.json").read_text())
            token = demo["alice"]["agent_token"]
            party_token = add_tck_party(args.binary, url, data_dir)
            print(
                "\nRun the TCK (a2aproject/a2a-tck, branch 1.0-dev) in its own checkout and venv, calling as\n"
                "the party `tck` (default skill `chat`; tck_auth.py adds its bearer token to every request):\n"
                f"  export PYTHONPATH={Path(__file__).resolve().parent} A2A_TCK_TOKEN={party_token}\n"
                f"  python run_tck.py --sut-host {url} --transport jsonrpc -- -p tck_auth   # also grpc, http_json\n"
            )
        asyncio.run(scenario_agent.run(url, token))
    except KeyboardInterrupt:
        pass
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=15)
        if data_dir is not None:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
