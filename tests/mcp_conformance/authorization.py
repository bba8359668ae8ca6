"""The official MCP conformance suite's authorization-server scenarios
(`conformance authorization`: `authorization-server-metadata-endpoint` and
`authorization-code-grant`, pinned in authorization/package.json) against liaison as the
authorization server of its own /mcp. Run by scripts/test.sh:

    LIAISON_BIN=target/debug/liaison .venv/bin/python tests/mcp_conformance/authorization.py

How the consent step is driven: the suite registers nothing itself, so this script registers a
public client (RFC 7591) with the suite's callback `http://127.0.0.1:<port>/callback`, starts the
suite with that client id and liaison's /mcp as the resource, reads the authorization URL the suite
prints ("Access the following URL in your browser…"), and plays the member in Chromium
(Playwright): her login link, "Continue as Alice", the URL, "Allow" on the consent page. The
browser then lands on the suite's callback, and the suite exchanges the code (PKCE) itself.
Exit status 0 only when every check passes.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import free_port, start_liaison, tools_dir  # noqa: E402

HERE = Path(__file__).resolve().parent / "authorization"
CHROMIUM = os.environ.get("LIAISON_CHROMIUM", "/usr/bin/chromium")


def install() -> Path:
    """`npm ci` of authorization/'s lock beside the cargo target, unless that lock is installed."""
    tools = tools_dir().parent / "mcp-conformance-authorization"
    bin_dir = tools / "node_modules" / ".bin"
    files = ("package.json", "package-lock.json")
    current = all((tools / f).exists() and (tools / f).read_bytes() == (HERE / f).read_bytes() for f in files)
    if not current or not (bin_dir / "conformance").exists():
        tools.mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copyfile(HERE / f, tools / f)
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--prefix", str(tools)], check=True)
    return bin_dir


def call(url: str, method: str = "GET", body: dict | None = None, token: str | None = None) -> dict:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method, headers=headers),
                                timeout=10) as r:
        return json.loads(r.read())


async def consent(login_url: str, authorize_url: str) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                           args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = await browser.new_page()
        await page.goto(login_url)
        await page.get_by_role("button", name="Continue as Alice").click()
        await page.goto(authorize_url)
        await page.get_by_role("button", name="Allow").click()
        await page.wait_for_url(re.compile(r"http://127\.0\.0\.1:\d+/callback\?.*"))
        await browser.close()


def main() -> int:
    bin_dir = install()
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    data_dir = Path(tempfile.mkdtemp(prefix="liaison-oauth-conformance-"))
    liaison = suite = None
    try:
        liaison, url = start_liaison(data_dir)
        admin = (data_dir / "admin.token").read_text().strip()
        port = free_port()
        client = call(f"{url}/oauth/register", "POST", {
            "client_name": "MCP conformance suite", "redirect_uris": [f"http://127.0.0.1:{port}/callback"]})
        login = call(f"{url}/admin/v1/login-links", "POST", {"person": "alice"}, token=admin)["url"]
        cmd = [str(bin_dir / "conformance"), "authorization", "--url", url, "--client-id", client["client_id"],
               "--resource", f"{url}/mcp", "--port", str(port)]
        suite = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        output = []
        for line in suite.stdout:
            output.append(line)
            if line.startswith(f"{url}/oauth/authorize?"):
                asyncio.run(consent(login, line.strip()))
                break
        output.extend(suite.stdout)
        suite.wait(timeout=120)
        text = "".join(output)
        sys.stdout.write(text)
        total = re.search(r"Total: (\d+) passed, (\d+) failed", text)
        ok = total is not None and int(total.group(1)) > 0 and total.group(2) == "0" and suite.returncode == 0
        print(f"MCP authorization conformance: {'all checks pass' if ok else 'FAILED'}")
        return 0 if ok else 1
    finally:
        for process in (suite, liaison):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=15)
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
