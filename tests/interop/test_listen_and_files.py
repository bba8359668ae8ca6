"""Start-up safety: the data directory is private (0700) and the secrets and the SQLite database
are 0600; a port already in use fails the start before anything is created (no bootstrap token
is left unprinted); listening on every address without a public URL warns and never advertises
0.0.0.0 in the Agent Card."""

import json
import os
import re
import socket
import stat
import subprocess
import tempfile
import urllib.request
from pathlib import Path

from conftest import binary


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def serve(data_dir: Path, listen: str, *extra: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIAISON_")}
    env["RUST_LOG"] = "warn,liaison=info"
    return subprocess.Popen([str(binary()), "serve", "--data-dir", str(data_dir), "--listen", listen, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def wait_serving(p: subprocess.Popen) -> tuple[str, list[str]]:
    lines = []
    for line in p.stdout:
        lines.append(line)
        m = re.search(r"serving at (\S+) \(listening on (\S+)\)", line)
        if m:
            return m.group(2), lines
    raise AssertionError("did not start:\n" + "".join(lines))


def stop(p: subprocess.Popen) -> str:
    p.terminate()
    out, _ = p.communicate(timeout=20)
    return out


def test_the_data_directory_is_private_and_secrets_are_owner_only():
    data_dir = Path(tempfile.mkdtemp(prefix="liaison-files-")) / "nested" / "data"
    p = serve(data_dir, "127.0.0.1:0")
    try:
        wait_serving(p)
        assert mode(data_dir) == 0o700
        for name in ("admin.token", "master.key", "liaison.db"):
            assert mode(data_dir / name) == 0o600, name
    finally:
        stop(p)


def test_a_port_in_use_fails_before_anything_is_created():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        data_dir = Path(tempfile.mkdtemp(prefix="liaison-bind-")) / "data"
        r = subprocess.run([str(binary()), "serve", "--data-dir", str(data_dir), "--listen", f"127.0.0.1:{port}"],
                           capture_output=True, text=True, timeout=30,
                           env={k: v for k, v in os.environ.items() if not k.startswith("LIAISON_")})
    assert r.returncode != 0 and f"Could not listen on 127.0.0.1:{port}" in r.stderr, r.stderr
    assert not (data_dir / "admin.token").exists() and not (data_dir / "liaison.db").exists()
    assert "bootstrap admin token" not in r.stdout


def test_listening_on_every_address_without_a_public_url_warns_and_never_advertises_it():
    data_dir = Path(tempfile.mkdtemp(prefix="liaison-any-"))
    p = serve(data_dir, "0.0.0.0:0")
    try:
        bound, lines = wait_serving(p)
        port = bound.rsplit(":", 1)[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/.well-known/agent-card.json", timeout=10) as r:
            card = r.read().decode()
        assert "0.0.0.0" not in card
        assert f"127.0.0.1:{port}" in json.loads(card)["supportedInterfaces"][0]["url"]
    finally:
        out = stop(p)
    log = "".join(lines) + out
    assert "--public-url" in log and "WARN" in log, log


def test_an_explicit_public_url_is_what_the_card_advertises():
    data_dir = Path(tempfile.mkdtemp(prefix="liaison-pub-"))
    p = serve(data_dir, "0.0.0.0:0", "--public-url", "https://liaison.example.com")
    try:
        bound, lines = wait_serving(p)
        port = bound.rsplit(":", 1)[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/.well-known/agent-card.json", timeout=10) as r:
            card = json.loads(r.read())
        assert card["supportedInterfaces"][0]["url"].startswith("https://liaison.example.com/")
    finally:
        out = stop(p)
    assert "--public-url" not in "".join(lines) + out
