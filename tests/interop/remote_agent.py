"""Starts the example remote A2A agent (`examples/remote_agent.py`, on a2a-sdk) for tests: a real
external agent serving JSON-RPC, HTTP+JSON and gRPC with a signed card (see that file's docstring
for its flags and behaviours). Not a test file; import it:

    from remote_agent import remote_agent, remote_agent_fixture

    def test_x():
        with remote_agent("--no-streaming") as agent:
            agent.card_url, agent.grpc, agent.records()   # received messages, when recording

    agent = remote_agent_fixture("--token", "s3cret", scope="module")   # a pytest fixture

Each agent gets a temporary directory holding its record file (`--record`, on unless
record=False) and its signing key (`--key`, unless the flags name one), removed afterwards.
`agent.restart(...)` stops it and starts it again on the same ports (e.g. with another key, to
rotate it); `agent.stop()` terminates it (then kills it after a grace period).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "remote_agent.py"
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 10


def python() -> str:
    """The repository's .venv interpreter when there is one, else the one running the tests."""
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


@dataclass
class RemoteAgent:
    flags: tuple[str, ...]
    workdir: Path
    record_path: Path | None
    key_path: Path | None
    process: subprocess.Popen | None = None
    info: dict = field(default_factory=dict)
    output: list[str] = field(default_factory=list)

    # What the agent printed when ready.
    @property
    def url(self) -> str:
        return self.info["url"]

    @property
    def card_url(self) -> str:
        return self.info["card_url"]

    @property
    def jwks_url(self) -> str:
        return self.info["jwks_url"]

    @property
    def jsonrpc_url(self) -> str:
        return self.info["jsonrpc"]

    @property
    def rest_url(self) -> str:
        return self.info["rest"]

    @property
    def grpc(self) -> str:
        """host:port of the gRPC binding."""
        return self.info["grpc"]

    @property
    def kid(self) -> str:
        return self.info["kid"]

    def records(self) -> list[dict]:
        """The messages the agent received so far (one dict per `--record` line)."""
        if self.record_path is None or not self.record_path.exists():
            return []
        lines = self.record_path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def logs(self) -> str:
        return "".join(self.output)

    def start(self, ports: tuple[int, int] | None = None) -> None:
        cmd = [python(), "-u", str(SCRIPT), *self.flags]
        if ports:
            cmd += ["--port", str(ports[0]), "--grpc-port", str(ports[1])]
        if self.record_path is not None:
            cmd += ["--record", str(self.record_path)]
        if self.key_path is not None and "--key" not in self.flags:
            cmd += ["--key", str(self.key_path)]
        self.output.append(f"$ {' '.join(cmd)}\n")
        self.process = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ}
        )
        # Drain stderr (the agent's log) so it never blocks on a full pipe; keep it for failures.
        threading.Thread(target=self._drain, args=(self.process.stderr,), daemon=True).start()
        line = self._readline_with_timeout(START_TIMEOUT_S)
        if not line:
            self.stop()
            raise RuntimeError(f"the remote agent did not start:\n{self.logs()}")
        self.info = json.loads(line)

    def _drain(self, stream) -> None:
        for line in stream:
            self.output.append(line)

    def _readline_with_timeout(self, timeout: float) -> str:
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        return result[0] if result else ""

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=STOP_TIMEOUT_S)
        for stream in (self.process.stdout,):
            with contextlib.suppress(Exception):
                stream.close()
        self.process = None

    def restart(self, *flags: str, key_path: Path | str | None = None) -> None:
        """Stops the agent and starts it again on the same ports, with `flags` instead of the
        original ones when given, and `key_path` as its key when given (a new file = a new key)."""
        ports = (int(self.url.rsplit(":", 1)[1]), int(self.grpc.rsplit(":", 1)[1]))
        self.stop()
        if flags:
            self.flags = tuple(flags)
        if key_path is not None:
            self.key_path = Path(key_path)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                self.start(ports)
                return
            except RuntimeError:
                # The old listener may linger for a moment; try again until the deadline.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


@contextlib.contextmanager
def remote_agent(*flags: str, record: bool = True) -> Iterator[RemoteAgent]:
    """Runs `examples/remote_agent.py FLAGS` on free ports for the duration of the block."""
    workdir = Path(tempfile.mkdtemp(prefix="remote-agent-"))
    key_path = None if "--key" in flags else workdir / "key.pem"
    agent = RemoteAgent(
        flags=tuple(flags),
        workdir=workdir,
        record_path=workdir / "received.jsonl" if record else None,
        key_path=key_path,
    )
    try:
        agent.start()
        yield agent
    finally:
        agent.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def remote_agent_fixture(*flags: str, scope: str = "function", record: bool = True):
    """A pytest fixture running the remote agent with `flags`:

    agent = remote_agent_fixture("--no-push", scope="module")
    def test_x(agent): ...
    """

    @pytest.fixture(scope=scope)
    def fixture():
        with remote_agent(*flags, record=record) as agent:
            yield agent

    return fixture
