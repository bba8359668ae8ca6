"""As a new user would: `serve --demo`, then the shipped demo script has two agents hold a thread."""

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import binary, start_server, stop_server


def test_the_demo_script_holds_a_whole_thread_on_a_demo_server():
    srv, dbname = start_server("--demo")
    try:
        script = Path(__file__).with_name("demo_conversation.py")
        run = subprocess.run([sys.executable, str(script), str(srv.data_dir / "demo.json")],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stdout + run.stderr
        assert "OK: the whole thread went through liaison" in run.stdout
        assert "Data written by the agent of **Alice**" in run.stdout
        assert "Data written by the agent of **Bob**" in run.stdout
    finally:
        stop_server(srv, dbname)


def test_the_readme_demo_script_runs_both_demos_against_serve_demo():
    """scripts/demo.sh as the README tells a new user to run it: the two-agent conversation over
    MCP, then an A2A task delegated by partner and answered by alice from the CLI. It reuses this
    venv (LIAISON_DEMO_VENV) instead of creating one."""
    srv, dbname = start_server("--demo")
    try:
        script = Path(__file__).resolve().parents[2] / "scripts" / "demo.sh"
        env = {k: v for k, v in os.environ.items() if not k.startswith("LIAISON_")}
        env |= {"LIAISON_BIN": str(binary()), "LIAISON_DEMO_VENV": sys.prefix}
        run = subprocess.run([str(script), str(srv.data_dir / "demo.json")], capture_output=True, text=True,
                             timeout=300, env=env)
        out = run.stdout
        assert run.returncode == 0, out + run.stderr
        assert "OK: the whole thread went through liaison" in out
        # The partner's client saw the whole task, the answer typed at the terminal as its artifact.
        states = [re.search(r"TASK_STATE_[A-Z_]+", line)[0] for line in out.splitlines() if "TASK_STATE_" in line]
        assert states == ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"], out
        assert "artifact: The webhook endpoint accepts TLS 1.2 and TLS 1.3" in out
        assert "Session termination failed" not in out + run.stderr
        assert out.rstrip().endswith("an A2A task was answered from the command line.")
    finally:
        stop_server(srv, dbname)
