"""The documentation as a reader meets it: every relative link and #anchor of README.md and
docs/**/*.md resolves (GitHub's heading slugs), and the commands of docs/getting-started.md marked
`<!-- checked: getting-started -->` run exactly as written, in order, in a fresh directory laid out
like a fresh clone (the server on a free port through LIAISON_LISTEN, `liaison` on PATH being
LIAISON_BIN); every `liaison …` command in the guides' shell blocks names a subcommand and flags
the binary's `--help` lists; and every output a guide shows after `$ liaison …` is what that
command prints on a demo server."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT, binary

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CHECKED = re.compile(r"^<!-- checked: getting-started( serve)? -->\s*$")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, with their numbers, inline code blanked."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, re.sub(r"`[^`]*`", lambda m: " " * len(m[0]), line)))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: the rendered text (code, links and emphasis marks
    gone), lower case, punctuation but `-` and `_` dropped, each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    text = re.sub(r"(\*\*|__|\*)", "", text)
    return "".join(c for c in text.strip().lower() if c.isalnum() or c in "-_ ").replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor GitHub gives the page: one per heading, repeats numbered -1, -2, …"""
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line)
        if m:
            base = slug(m[2])
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(files: list[Path], root: Path = ROOT) -> list[str]:
    broken = []
    for page in files:
        for number, line in prose_lines(page.read_text()):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                    continue
                where = f"{page.relative_to(root)}:{number}: {target}"
                file_part, _, anchor = target.partition("#")
                dest = (page.parent / file_part).resolve() if file_part else page
                if not dest.exists():
                    broken.append(f"{where} (no such file)")
                    continue
                if not dest.is_relative_to(root):
                    broken.append(f"{where} (outside the repository)")
                    continue
                if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    broken.append(f"{where} (no heading #{anchor} in {dest.relative_to(root)})")
    return broken


def test_every_relative_link_and_anchor_of_the_docs_resolves():
    files = pages()
    assert len(files) > 10, files
    broken = broken_links(files)
    assert not broken, "broken links:\n  " + "\n  ".join(broken)


def test_the_link_check_finds_a_broken_file_an_anchor_and_a_repeated_heading(tmp_path):
    """The checker itself can fail: a missing file and a missing anchor are reported, the second
    of two equal headings is `-1`, and a link inside a code block is not a link."""
    (tmp_path / "other.md").write_text("# Title\n\n## Same\n\n## Same\n\n## `liaison token issue`\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#same-1) [ok](other.md#liaison-token-issue) [self](#a-page)\n"
        "# A page\n[gone](nothere.md) [bad](other.md#same-2)\n```\n[code](nothere.md)\n```\n"
    )
    broken = broken_links([page], root=tmp_path)
    assert broken == [
        "page.md:3: nothere.md (no such file)",
        "page.md:3: other.md#same-2 (no heading #same-2 in other.md)",
    ], broken


def checked_blocks() -> list[tuple[bool, str]]:
    """The marked blocks of docs/getting-started.md: (runs in the background, the commands)."""
    lines = (ROOT / "docs" / "getting-started.md").read_text().splitlines()
    blocks = []
    for i, line in enumerate(lines):
        m = CHECKED.match(line)
        if not m:
            continue
        assert lines[i + 1].strip() == "```sh", f"line {i + 2}: a checked mark must stand right above a ```sh block"
        end = next(j for j in range(i + 2, len(lines)) if lines[j].strip() == "```")
        blocks.append((bool(m[1]), "\n".join(lines[i + 2 : end])))
    return blocks


def fresh_clone(into: Path) -> None:
    """The repository as a new user has it: its files, without build output, data or venvs."""
    skip = {".git", "target", "liaison-data", ".venv", "tests"}
    for entry in ROOT.iterdir():
        if entry.name not in skip:
            (into / entry.name).symlink_to(entry)
    # tests/ is copied shallowly so no artifacts or caches of earlier runs come along.
    (into / "tests").mkdir()
    for entry in (ROOT / "tests").iterdir():
        if entry.name not in {"artifacts", "__pycache__"}:
            (into / "tests" / entry.name).symlink_to(entry)


def test_the_getting_started_commands_run_as_written():
    blocks = checked_blocks()
    assert [bg for bg, _ in blocks] == [False, True, False], "the page's checked blocks changed: update this test"
    work = Path(tempfile.mkdtemp(prefix="liaison-docs-"))
    bindir = work / ".bin"
    bindir.mkdir()
    (bindir / "liaison").symlink_to(binary())
    clone = work / "liaison"
    clone.mkdir()
    fresh_clone(clone)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIAISON_")}
    env |= {
        "PATH": f"{bindir}{os.pathsep}{env['PATH']}",
        "LIAISON_LISTEN": "127.0.0.1:0",
        # The demo script would create .venv with the SDKs; this test's venv has them already.
        "LIAISON_DEMO_VENV": sys.prefix,
        "RUST_LOG": "warn",
    }
    server = None
    outputs = []
    try:
        for background, commands in blocks:
            if background:
                server = subprocess.Popen(["bash", "-c", commands], cwd=clone, env=env, text=True,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          start_new_session=True)
                demo = clone / "liaison-data" / "demo.json"
                deadline = time.monotonic() + 60
                while not demo.exists() and server.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert demo.exists(), f"`{commands}` wrote no liaison-data/demo.json"
                time.sleep(0.2)  # written before the listener serves? ask it.
                url = json.loads(demo.read_text())["url"]
                with urllib.request.urlopen(f"{url}/healthz", timeout=10) as r:
                    assert r.status == 200
                continue
            run = subprocess.run(["bash", "-euo", "pipefail", "-c", commands], cwd=clone, env=env,
                                 capture_output=True, text=True, timeout=300)
            outputs.append(run.stdout)
            assert run.returncode == 0, f"`{commands}` failed ({run.returncode}):\n{run.stdout}\n{run.stderr}"
        assert outputs[0].startswith("liaison "), outputs[0]
        # The demo ends as the page says it does.
        assert "OK: two agents talked over MCP, and an A2A task was answered from the command line." in outputs[1]
    finally:
        if server is not None and server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        shutil.rmtree(work, ignore_errors=True)


SHELL_FENCE = re.compile(r"^\s*```(sh|bash|shell|console)\s*$")


def shell_commands(path: Path) -> list[tuple[int, list[str]]]:
    """Each `liaison …` command of the page's shell blocks (continuation lines joined, comments
    dropped, `[…]`/`|` of a synopsis dropped), with its line number, as words after `liaison`;
    also one run by another program (`… -- liaison mcp --stdio`)."""
    import shlex
    out, fenced, pending, start = [], False, "", 0
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not fenced:
            fenced = bool(SHELL_FENCE.match(line))
            continue
        if FENCE.match(line):
            fenced = False
            continue
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        text, pending = re.sub(r"(^|\s)#.*$", "", pending + line), ""
        text = text.replace("[", " ").replace("]", " ").replace("|", " ")
        try:
            words = shlex.split(text)
        except ValueError:
            words = text.split()
        for i, word in enumerate(words):
            if word == "liaison" and (i == 0 or words[i - 1] in {"--", "&&", ";", "$"}):
                rest = words[i + 1:]
                for stop, w in enumerate(rest):
                    if w in {"&&", ";", "||"}:
                        rest = rest[:stop]
                        break
                out.append((start, rest))
    return out


def wrong_commands(files: list[Path], root: Path = ROOT) -> tuple[int, list[str]]:
    """How many `liaison …` commands the pages' shell blocks hold, and each that names a
    subcommand that does not exist or a flag its `--help` does not list."""
    helps: dict[tuple[str, ...], str | None] = {}

    def help_of(path: tuple[str, ...]) -> str | None:
        if path not in helps:
            run = subprocess.run([str(binary()), *path, "--help"], capture_output=True, text=True,
                                 timeout=30, env={"PATH": os.environ["PATH"]})
            helps[path] = run.stdout if run.returncode == 0 else None
        return helps[path]

    wrong, seen = [], 0
    for page in files:
        for number, words in shell_commands(page):
            seen += 1
            where = f"{page.relative_to(root)}:{number}: liaison {' '.join(words)}"
            path: tuple[str, ...] = ()
            for w in words:
                if not re.fullmatch(r"[a-z][a-z0-9-]*", w) or help_of((*path, w)) is None:
                    break
                path = (*path, w)
            text = help_of(path)
            if text is None:
                wrong.append(f"{where} (`liaison {' '.join(path)} --help` fails)")
                continue
            if not path and words and not words[0].startswith("-"):
                wrong.append(f"{where} (no subcommand `{words[0]}`)")
                continue
            for w in words[len(path):]:
                flag = w.split("=", 1)[0]
                if re.fullmatch(r"--[a-z][a-z0-9-]*", flag) and not re.search(
                        rf"(^|[\s,]){re.escape(flag)}([\s=,<\[]|$)", text, re.M):
                    wrong.append(f"{where} ({flag} is not an option of `liaison {' '.join(path)}`)")
    return seen, wrong


def test_every_liaison_command_in_the_docs_names_real_subcommands_and_flags():
    """Every `liaison …` command in a shell block of README.md and the guides (the generated
    reference aside) names a subcommand that exists and only flags its `--help` lists: the docs and
    the binary say the same thing. A documented command that changed is named with its line."""
    guides = [p for p in pages() if "reference" not in p.relative_to(ROOT).parts]
    seen, wrong = wrong_commands(guides)
    assert seen > 30, f"only {seen} documented commands found: the parser lost them"
    assert not wrong, "\n".join(wrong)


def test_the_command_check_finds_a_wrong_subcommand_and_a_wrong_flag(tmp_path):
    page = tmp_path / "guide.md"
    page.write_text("```sh\nliaison inbox --wait 30s   # fine\nliaison inboxes\n"
                    "liaison post --kind announce \\\n  --colour red \"Hi\"\n"
                    "claude mcp add x -- liaison mcp --stdio\n```\n")
    seen, wrong = wrong_commands([page], tmp_path)
    assert seen == 4, seen
    assert len(wrong) == 2, wrong
    assert "guide.md:3" in wrong[0] and "inboxes" in wrong[0], wrong
    assert "guide.md:4" in wrong[1] and "--colour" in wrong[1], wrong


def shown_outputs(path: Path) -> list[tuple[int, str, list[str]]]:
    """Each ```text block of the page that starts with `$ liaison …`: its line, the command
    and the output the page shows."""
    out, lines = [], path.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "```text" and i + 1 < len(lines) and lines[i + 1].startswith("$ liaison "):
            shown = []
            for rest in lines[i + 2:]:
                if FENCE.match(rest):
                    break
                shown.append(rest)
            out.append((i + 2, lines[i + 1][2:], shown))
    return out


def test_every_output_a_guide_shows_is_what_the_command_prints_on_a_demo_server():
    """A guide that shows `$ liaison …` and its output shows what that command really prints on
    a fresh `serve --demo` (columns compared without their padding)."""
    import shlex
    from conftest import start_server, stop_server
    blocks = [(p, *b) for p in pages() if "reference" not in p.relative_to(ROOT).parts
              for b in shown_outputs(p)]
    assert blocks, "no guide shows a command's output any more: drop this test or the parser lost them"
    srv, db = start_server("--demo")
    try:
        env = {"PATH": os.environ["PATH"], "LIAISON_SERVER": srv.url,
               "LIAISON_ADMIN_TOKEN": srv.admin_token}
        squeeze = lambda text: [" ".join(line.split()) for line in text if line.strip()]
        for page, number, command, shown in blocks:
            run = subprocess.run([str(binary()), *shlex.split(command)[1:]], capture_output=True,
                                 text=True, timeout=30, env=env)
            where = f"{page.relative_to(ROOT)}:{number}: {command}"
            assert run.returncode == 0, f"{where} failed: {run.stderr}"
            assert squeeze(run.stdout.splitlines()) == squeeze(shown), \
                f"{where}: the page shows\n" + "\n".join(shown) + "\nthe command prints\n" + run.stdout
    finally:
        stop_server(srv, db)
