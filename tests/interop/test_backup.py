"""Backup and restore of a live server: `liaison backup` under a steady write load, which goes on
with not one write failed even while the backup stands paused at any point of its run, `liaison
restore` into a new data directory, and a second server on it that holds every write acknowledged
before the backup began and serves a card that verifies with the same keys (the official a2a-sdk
verifier). On PostgreSQL, the same with pg_dump and pg_restore into a new database.

Bad input is refused and changes nothing: a backup into a non-empty directory, a restore over an
existing database.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import httpx
import pytest

from conftest import Server, binary, drop_database, postgres_base, start_server, stop_server
from test_keys import fetch, verifier

pytestmark = pytest.mark.anyio

ON_POSTGRES = os.environ.get("LIAISON_TEST_DATABASE_URL", "").startswith("postgres")


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary()), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


class Writer:
    """Adds persons through the admin API from four threads; remembers each one whose POST answered
    200, and every one that did not (an HTTP error, no answer): a backup must neither fail nor hold
    up the live server's writes."""

    def __init__(self, srv):
        self.srv = srv
        self.acked: list[str] = []
        self.failed: list[str] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.loop, daemon=True) for _ in range(4)]

    def loop(self) -> None:
        while not self.stop.is_set():
            pid = f"p{uuid.uuid4().hex[:10]}"
            try:
                self.srv.person(pid, "Load")
            except urllib.error.HTTPError as e:
                if e.code == 429:
                    # The admin token's own rate limit (four writers never pause): not the
                    # backup's doing. Wait as told and write again; nothing was written.
                    self.stop.wait(float(e.headers.get("Retry-After") or 1))
                    continue
                with self.lock:
                    self.failed.append(f"{pid}: {e!r}")
                continue
            except (urllib.error.URLError, OSError) as e:
                with self.lock:
                    self.failed.append(f"{pid}: {e!r}")
                continue
            with self.lock:
                self.acked.append(pid)

    def snapshot(self, what: str = "") -> list[str]:
        with self.lock:
            assert not self.failed, f"{len(self.failed)} writes failed{what}, e.g. {self.failed[:3]}"
            return list(self.acked)

    def until(self, n: int, what: str, timeout: float = 30.0) -> None:
        """Returns once `n` writes are acknowledged, none failed. The timeout only keeps writes
        that never go through from hanging the suite."""
        deadline = time.monotonic() + timeout
        while (done := len(self.snapshot(" " + what))) < n:
            assert time.monotonic() < deadline, f"{done} of {n} writes acknowledged after {timeout} s {what}"
            time.sleep(0.005)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)


def writes_go_on_beside(process: subprocess.Popen, writer: Writer) -> int:
    """Until `process` (a backup) exits: lets it run a moment, pauses it (SIGSTOP) wherever it
    is, and requires five more writes to be acknowledged while it stands still, none failing;
    then lets it go on (SIGCONT). A backup that holds up the live server's writes while it runs
    is caught standing there, the writes stopped behind it; the moments only spread the pauses
    over its run, and nothing depends on their length. Returns the rounds."""
    rounds = 0
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=0.005)
            return rounds
        os.kill(process.pid, signal.SIGSTOP)
        try:
            writer.until(len(writer.snapshot()) + 5, f"while the backup stood still (round {rounds})")
        finally:
            os.kill(process.pid, signal.SIGCONT)
        rounds += 1


def persons(srv) -> set[str]:
    return {p["id"] for p in srv.admin("GET", "/admin/v1/persons")["persons"]}


async def card_and_keys(srv):
    async with httpx.AsyncClient(timeout=30) as http:
        card, jwks = await fetch(http, srv.url)
    verifier(srv.url, jwks)(card)
    return card, sorted(k["kid"] for k in jwks["keys"]), jwks


def serve(data_dir: Path, database_url: str | None = None):
    """A server on an existing data directory (start_server makes a fresh one)."""
    exe = binary()
    cmd = [str(exe), "serve", "--data-dir", str(data_dir), "--listen", "127.0.0.1:0"]
    if database_url:
        cmd += ["--database-url", database_url]
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "RUST_LOG": "warn"})
    output: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        output.append(line)
        if m := re.search(r"serving at (https?://\S+)", line):
            threading.Thread(target=lambda: [output.append(l) for l in process.stdout], daemon=True).start()
            token = (data_dir / "admin.token").read_text().strip()
            return Server(m.group(1), data_dir, process, token, output)
    process.kill()
    raise RuntimeError("liaison did not start:\n" + "".join(output))


@pytest.mark.skipif(ON_POSTGRES, reason="liaison backup is for SQLite; PostgreSQL is tested with pg_dump below")
async def test_a_backup_under_write_load_restores_every_acknowledged_write_and_the_same_keys():
    srv, dbname = start_server()
    restored = None
    work = Path(tempfile.mkdtemp(prefix="liaison-backup-"))
    try:
        card, kids, jwks = await card_and_keys(srv)
        with Writer(srv) as writer:
            while len(writer.snapshot()) < 50:
                time.sleep(0.01)
            acked_before = writer.snapshot()
            backup = subprocess.Popen([str(binary()), "backup", str(work / "b"), "--data-dir", str(srv.data_dir)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            rounds = writes_go_on_beside(backup, writer)
            out, err = backup.communicate(timeout=120)
            assert backup.returncode == 0, err
            # The load goes on after it, and not one write failed (`snapshot` checks).
            writer.until(len(writer.snapshot()) + 20, "after the backup")
        print(f"{len(acked_before)} writes acknowledged before the backup; it was paused {rounds} times "
              f"with the writes going on")
        assert "Backed up" in err + out and "master.key" in err + out
        assert sorted(p.name for p in (work / "b").iterdir()) == ["admin.token", "liaison.db", "master.key"]
        assert oct((work / "b" / "master.key").stat().st_mode & 0o777) == "0o600"
        assert oct((work / "b" / "liaison.db").stat().st_mode & 0o777) == "0o600"

        # Refused, changing nothing: a backup into a directory that holds something.
        again = run("backup", str(work / "b"), "--data-dir", str(srv.data_dir))
        assert again.returncode != 0 and "not empty" in again.stderr, again.stderr

        r = run("restore", str(work / "b"), "--data-dir", str(work / "new"))
        assert r.returncode == 0, r.stderr
        # Refused, changing nothing: a restore over an existing database.
        before = (work / "new" / "liaison.db").read_bytes()
        over = run("restore", str(work / "b"), "--data-dir", str(work / "new"))
        assert over.returncode != 0 and "exists" in over.stderr, over.stderr
        assert (work / "new" / "liaison.db").read_bytes() == before

        srv.process.terminate()
        srv.process.wait(timeout=30)
        restored = serve(work / "new")
        held = persons(restored)
        missing = [p for p in acked_before if p not in held]
        assert not missing, f"{len(missing)} acknowledged writes missing, e.g. {missing[:3]}"
        # The card verifies with the same keys as before the backup.
        card2, kids2, _ = await card_and_keys(restored)
        assert kids2 == kids
        verifier(restored.url, jwks)(card2)
        # And the restored server takes writes.
        restored.person("after-restore", "After")
        assert "after-restore" in persons(restored)
    finally:
        if restored is not None:
            stop_server(restored, None)
        stop_server(srv, dbname)
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.skipif(not ON_POSTGRES, reason="PostgreSQL only")
async def test_liaison_backup_refuses_postgresql_and_pg_dump_restores_a_server_with_the_same_keys():
    srv, dbname = start_server()
    restored, copy = None, f"liaison_restored_{uuid.uuid4().hex[:10]}"
    base = postgres_base(os.environ["LIAISON_TEST_DATABASE_URL"])
    work = Path(tempfile.mkdtemp(prefix="liaison-pgdump-"))
    try:
        _, kids, jwks = await card_and_keys(srv)
        r = run("backup", str(work / "b"), "--data-dir", str(srv.data_dir), "--database-url", f"{base}/{dbname}")
        assert r.returncode != 0 and "pg_dump" in r.stderr, r.stderr
        assert not (work / "b").exists()
        with Writer(srv) as writer:
            while len(writer.snapshot()) < 50:
                time.sleep(0.01)
            acked_before = writer.snapshot()
            dump = subprocess.Popen(["pg_dump", "-Fc", "-d", f"{base}/{dbname}", "-f", str(work / "l.dump")])
            writes_go_on_beside(dump, writer)
            assert dump.wait(timeout=120) == 0
            writer.until(len(writer.snapshot()) + 20, "after the dump")
        subprocess.run(["psql", f"{base}/postgres", "-qc", f"CREATE DATABASE {copy}"], check=True)
        subprocess.run(["pg_restore", "--no-owner", "-d", f"{base}/{copy}", str(work / "l.dump")], check=True)
        # The new server's data directory holds only the master key (the database is elsewhere).
        (work / "new").mkdir(mode=0o700)
        shutil.copy2(srv.data_dir / "master.key", work / "new" / "master.key")
        shutil.copy2(srv.data_dir / "admin.token", work / "new" / "admin.token")
        srv.process.terminate()
        srv.process.wait(timeout=30)
        restored = serve(work / "new", f"{base}/{copy}")
        held = persons(restored)
        assert not [p for p in acked_before if p not in held]
        card2, kids2, _ = await card_and_keys(restored)
        assert kids2 == kids
        verifier(restored.url, jwks)(card2)
    finally:
        if restored is not None:
            stop_server(restored, None)
        stop_server(srv, dbname)
        drop_database(copy)
        shutil.rmtree(work, ignore_errors=True)
