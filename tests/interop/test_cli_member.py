"""The member commands of the CLI (`liaison inbox|thread|post|claim` with a person's own token)
against a running server: the same service calls as the MCP tools, rendered with the same labels
and body fences; bad input is refused with a clear message and changes nothing. A lease that runs
out (a stale fencing token refused naming the holder) is tried on the service's manual clock
instead of by sleeping here: tests/api/claims.rs runs these same commands against /api/v1 there."""

import json
import os
import subprocess

from conftest import binary, unique


def cli(server, token: str | None, *args: str, stdin: str | None = None,
        agent: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIAISON_")}
    env["LIAISON_SERVER"] = server.url
    if token is not None:
        env["LIAISON_TOKEN"] = token
    if agent is not None:
        env["LIAISON_AGENT"] = agent
    return subprocess.run([str(binary()), *args], capture_output=True, text=True, env=env,
                          input=stdin, timeout=30)


def ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_a_request_is_answered_from_the_command_line(server, tokens):
    chan = unique("cli")
    server.channel(chan, ["alice", "bob"])
    consumer = unique("c")
    # Bob's consumer starts after everything already in his inbox.
    first = json.loads(ok(cli(server, tokens["bob"], "inbox", "--consumer", consumer, "--limit", "100", "--json")))
    cursor = first["last"]

    posted = json.loads(ok(cli(server, tokens["alice"], "post", "--kind", "request", "--impact", "none",
                               "--channel", chan, "--subject", "Rotate the logs", "--json",
                               "Please rotate\nthe logs")))
    thread = posted["thread"]
    assert posted["recipients"] == ["bob"]

    text = ok(cli(server, tokens["bob"], "inbox", "--consumer", consumer, "--after", str(cursor)))
    # The MCP rendering: the server's label first, the body behind the fence's prefix.
    assert "Data written by the agent of" in text and "Alice Martin" in text
    assert "<<<liaison-data " in text and "\u2502 Please rotate\n\u2502 the logs" in text
    assert f"thread {thread}" in text and "Inbox: 1 entry above." in text

    claimed = ok(cli(server, tokens["bob"], "claim", "next", agent="codex@bob-laptop:7"))
    assert f"hold thread {thread}" in claimed and '"codex@bob-laptop:7"' in claimed
    shown = ok(cli(server, tokens["bob"], "thread", thread))
    assert shown.startswith(f"Thread {thread} in channel {chan}: subject \"Rotate the logs\"")
    assert "state open" in shown and "Claimed by bob" in shown

    reply = ok(cli(server, tokens["bob"], "post", "--kind", "reply", "--thread", thread, "-",
                   stdin="Done: rotated.\n", agent="codex@bob-laptop:7"))
    assert f"in thread {thread}" in reply and "the thread is answered" in reply
    view = json.loads(ok(cli(server, tokens["alice"], "thread", thread, "--json")))
    assert [m["body"] for m in view["messages"]] == ["Please rotate\nthe logs", "Done: rotated.\n"]
    assert view["thread"]["state"] == "answered" and "claim" not in view


def test_a_claim_is_held_by_the_cli_identity_until_released(server, tokens):
    chan = unique("cli")
    server.channel(chan, ["alice", "bob"])
    posted = json.loads(ok(cli(server, tokens["alice"], "post", "--kind", "handoff", "--channel", chan,
                               "--json", "Take over the migration")))
    thread = posted["thread"]
    ok(cli(server, tokens["bob"], "claim", thread, "--lease", "10m"))
    # Another session of Bob's is refused while the CLI's identity holds it.
    r = cli(server, tokens["bob"], "claim", thread, agent="claude@elsewhere:1")
    assert r.returncode != 0 and "already_claimed" in r.stderr, r.stderr
    assert "Claim released." in ok(cli(server, tokens["bob"], "claim", thread, "--release"))
    assert "hold thread" in ok(cli(server, tokens["bob"], "claim", thread, agent="claude@elsewhere:1"))


def test_an_empty_wait_says_nothing_came(server, tokens):
    consumer = unique("c")
    page = json.loads(ok(cli(server, tokens["carol"], "inbox", "--consumer", consumer, "--json")))
    text = ok(cli(server, tokens["carol"], "inbox", "--consumer", consumer, "--after", str(page["cursor"]),
                  "--wait", "1s"))
    assert text.strip() == "Inbox: nothing new during the wait. Nothing more is expected this turn."


def test_bad_input_is_refused_clearly_and_changes_nothing(server, tokens):
    chan = unique("cli")
    server.channel(chan, ["alice", "bob"])
    posted = json.loads(ok(cli(server, tokens["alice"], "post", "--kind", "question", "--channel", chan,
                               "--json", "Which port?")))
    thread = posted["thread"]

    r = cli(server, None, "inbox")
    assert r.returncode != 0 and "LIAISON_TOKEN" in r.stderr
    r = cli(server, tokens["bob"], "post", "--kind", "shout", "--thread", thread, "x")
    assert r.returncode != 0 and "announce" in r.stderr and "close" in r.stderr
    r = cli(server, tokens["bob"], "inbox", "--wait", "5 minutes")
    assert r.returncode != 0 and "30s, 10m, 24h" in r.stderr
    r = cli(server, tokens["bob"], "post", "--kind", "request", "--thread", thread, "Do it")
    assert r.returncode != 0 and "invalid_input" in r.stderr and "impact" in r.stderr, r.stderr
    r = cli(server, tokens["bob"], "thread", "thr_nope")
    assert r.returncode != 0 and "invalid_input" in r.stderr
    r = cli(server, tokens["carol"], "thread", thread)
    assert r.returncode != 0 and "not_found" in r.stderr, r.stderr
    r = cli(server, tokens["bob"], "claim", "next", "--release")
    assert r.returncode != 0 and "thread id" in r.stderr
    r = cli(server, tokens["carol"], "post", "--kind", "reply", "--thread", thread, "Me too")
    assert r.returncode != 0

    view = json.loads(ok(cli(server, tokens["alice"], "thread", thread, "--json")))
    assert view["thread"]["message_count"] == 1 and view["thread"]["state"] == "open"


def test_activity_across_channels_and_since_a_date(server):
    """`liaison activity`: a fresh member's two channels counted together and alone, totals since
    today, a table by default and the API's JSON with --json; a channel she is not in, a bad date
    and a bad week count are refused clearly."""
    import datetime
    dana, eve = unique("dana"), unique("eve")
    server.person(dana, "Dana Activity")
    server.person(eve, "Eve Activity")
    dana_token = server.token(dana)["secret"]
    eve_token = server.token(eve)["secret"]
    first, second, elsewhere = unique("act"), unique("act"), unique("act")
    server.channel(first, [dana, eve])
    server.channel(second, [dana, eve])
    server.channel(elsewhere, [eve, "alice"])
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()

    asked = json.loads(ok(cli(server, dana_token, "post", "--kind", "question", "--channel", first,
                              "--json", "Which port?")))
    ok(cli(server, eve_token, "post", "--kind", "reply", "--thread", asked["thread"], "8443"))
    ok(cli(server, dana_token, "post", "--kind", "question", "--channel", second, "Which host?"))
    ok(cli(server, eve_token, "post", "--kind", "announce", "--channel", elsewhere, "Not hers"))

    both = json.loads(ok(cli(server, dana_token, "activity", "--since", today, "--json")))
    assert both["scope"] == "all_channels" and "channel" not in both, both
    assert both["channels"] == sorted([first, second]), both
    assert both["since"] == f"{today}T00:00:00.000Z", both
    totals = both["totals"]
    assert (totals["opened"], totals["answered"], totals["closed"]) == (2, 1, 0), totals
    assert isinstance(totals["first_reply_p50_s"], int) and totals["first_reply_p50_s"] >= 0, totals
    assert sum(w["opened"] for w in both["weeks"]) == 2, both
    one = json.loads(ok(cli(server, dana_token, "activity", "--channel", first, "--since", today,
                            "--weeks", "3", "--json")))
    assert one["scope"] == "channel" and one["channel"] == first and len(one["weeks"]) == 3, one
    assert (one["totals"]["opened"], one["totals"]["answered"]) == (1, 1), one

    table = ok(cli(server, dana_token, "activity", "--since", today))
    lines = table.splitlines()
    assert lines[0].startswith(f"Activity of all your channels ({', '.join(sorted([first, second]))})"), table
    assert lines[1].split()[:3] == ["WEEK", "OF", "OPENED"], table
    assert lines[-1].split()[:5] == ["since", today, "2", "1", "0"], table

    for args, says in [(["--channel", elsewhere], "not_found"),
                       (["--channel", unique("nope")], "not_found"),
                       (["--since", "2026-13-01"], "since"),
                       (["--since", "2001-01-01"], "366 days"),
                       (["--weeks", "0"], "weeks"),
                       (["--weeks", "27"], "weeks")]:
        r = cli(server, dana_token, "activity", *args)
        assert r.returncode != 0 and says in r.stderr, (args, r.stderr)
        assert ("invalid_input" in r.stderr) or says == "not_found", (args, r.stderr)
    r = cli(server, None, "activity")
    assert r.returncode != 0 and "LIAISON_TOKEN" in r.stderr
