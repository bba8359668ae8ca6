"""As a new user would: `serve --demo`, then the shipped demo script has two agents hold a thread."""

import subprocess
import sys
from pathlib import Path

from conftest import start_server, stop_server


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
