"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in package.json
with the Node >= 22 it needs, both from npm) against liaison's `/mcp`, for both protocol revisions
it knows (2025-06-18 and 2025-11-25). Run by scripts/test.sh:

    LIAISON_BIN=target/debug/liaison .venv/bin/python tests/mcp_conformance/run.py

Starts `liaison serve --demo` on a fresh data directory and `auth_proxy.py` in front of it (the
suite sends no credentials). Each scenario runs in its own suite process: the suite never ends its
sessions, and one process running them all would pass liaison's cap on concurrent sessions per
token. Scenarios that cannot apply are in expected-failures.yml, each with why; the run fails on
any other failure and on a listed scenario that passes. Exit status 0 only when all is as expected.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
REVISIONS = ("2025-06-18", "2025-11-25")


def tools_dir() -> Path:
    """Where the suite is installed: beside the cargo target, so a fresh clone installs it once.
    Resolved: npm takes a prefix reached through a symbolic link for a link to another package,
    and `npm ci` then refuses the lock as out of sync ("Missing: mcp-conformance@ from lock file")."""
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")).resolve()
    return target / "mcp-conformance"


def install(tools: Path) -> Path:
    """Installs package.json's pins exactly as package-lock.json resolves them (`npm ci`), unless
    that very lock is installed already."""
    bin_dir = tools / "node_modules" / ".bin"
    files = ("package.json", "package-lock.json")
    current = all((tools / f).exists() and (tools / f).read_bytes() == (HERE / f).read_bytes() for f in files)
    if not current or not (bin_dir / "conformance").exists():
        tools.mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copyfile(HERE / f, tools / f)
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--prefix", str(tools)], check=True)
    return bin_dir


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_liaison(data_dir: Path) -> tuple[subprocess.Popen, str]:
    binary = os.environ.get("LIAISON_BIN") or str(tools_dir().parent / "debug" / "liaison")
    port = free_port()
    cmd = [binary, "serve", "--demo", "--data-dir", str(data_dir), "--listen", f"127.0.0.1:{port}"]
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    for line in process.stdout:
        m = re.search(r"serving at (https?://\S+)", line)
        if m:
            return process, m.group(1)
    raise SystemExit("liaison did not start")


def start_proxy(upstream: str, token: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, str(HERE / "auth_proxy.py"), "--upstream", upstream, "--token", token, "--port", str(port)]
    process = subprocess.Popen(cmd)
    for _ in range(100):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return process, f"http://127.0.0.1:{port}/mcp"
        time.sleep(0.1)
    raise SystemExit("the proxy did not start")


def scenarios(bin_dir: Path, env: dict) -> dict[str, list[str]]:
    """Each server scenario with the protocol revisions it applies to, as the suite lists them."""
    out = subprocess.run([str(bin_dir / "conformance"), "list"], check=True, capture_output=True, text=True, env=env)
    found, server = {}, False
    for line in out.stdout.splitlines():
        if line.startswith("Server scenarios"):
            server = True
        elif line.startswith("Client scenarios"):
            server = False
        elif server and (m := re.match(r"\s+- (\S+) \[([^\]]*)\]", line)):
            found[m.group(1)] = m.group(2).split(",")
    return found


def main() -> int:
    bin_dir = install(tools_dir())
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    data_dir = Path(tempfile.mkdtemp(prefix="liaison-mcp-conformance-"))
    liaison = proxy = None
    results, failed = [], []
    try:
        liaison, url = start_liaison(data_dir)
        token = json.loads((data_dir / "demo.json").read_text())["alice"]["agent_token"]
        proxy, mcp_url = start_proxy(url, token)
        for name, revisions in scenarios(bin_dir, env).items():
            for revision in REVISIONS:
                if revision not in revisions:
                    continue
                out_dir = data_dir / "results"
                cmd = [str(bin_dir / "conformance"), "server", "--url", mcp_url, "--scenario", name,
                       "--spec-version", revision, "--expected-failures", str(HERE / "expected-failures.yml"),
                       "-o", str(out_dir)]
                run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
                ok = run.returncode == 0
                results.append((name, revision, ok))
                if not ok:
                    failed.append(name)
                    sys.stdout.write(run.stdout[-4000:] + run.stderr[-2000:])
                print(f"{'ok  ' if ok else 'FAIL'} {revision} {name}", flush=True)
    finally:
        for process in (proxy, liaison):
            if process is not None:
                process.terminate()
                process.wait(timeout=15)
        shutil.rmtree(data_dir, ignore_errors=True)
    print(f"MCP conformance: {len(results) - len(failed)} of {len(results)} scenario runs as expected"
          f" (passing, or listed in expected-failures.yml)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
