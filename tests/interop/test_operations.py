"""Operating a running server: `/metrics` parsed by the reference Prometheus/OpenMetrics parser
with its counters and gauges moving, the optional scrape token, and the access log (route
templates and caller ids, never tokens; no colour codes when stderr is not a terminal)."""

import json
import os
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from conftest import deadline_witness, start_server, stop_server, unique, wait_for_waiters

METRICS_TOKEN = "scrape-" + "x" * 24


@pytest.fixture(scope="module")
def ops_server():
    config = Path(tempfile.mkdtemp(prefix="liaison-ops-")) / "liaison.toml"
    config.write_text(f'[metrics]\ntoken = "{METRICS_TOKEN}"\n')
    previous = os.environ.get("RUST_LOG")
    os.environ["RUST_LOG"] = "warn,liaison=info"
    try:
        srv, dbname = start_server("--config", str(config))
    finally:
        if previous is None:
            os.environ.pop("RUST_LOG")
        else:
            os.environ["RUST_LOG"] = previous
    srv.metrics_token = METRICS_TOKEN
    srv.person("alice", "Alice Martin")
    srv.person("bob", "Bob Chen")
    yield srv
    stop_server(srv, dbname)


def http(server, method: str, path: str, token: str | None = None, body: dict | None = None):
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(f"{server.url}{path}", data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def scrape(server) -> dict:
    """Every sample as {(name, frozenset(labels)): value}, parsed by the reference parser."""
    status, headers, text = http(server, "GET", "/metrics", METRICS_TOKEN)
    assert status == 200, text
    assert headers["Content-Type"].startswith("application/openmetrics-text")
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_metrics_need_the_configured_token(ops_server):
    for token in (None, "wrong", METRICS_TOKEN + "x"):
        status, headers, _ = http(ops_server, "GET", "/metrics", token)
        assert status == 401 and headers["WWW-Authenticate"] == "Bearer"


def test_request_counters_and_latencies_move(ops_server):
    alice = ops_server.token("alice")["secret"]
    labels = dict(front="api", method="GET", route="/api/v1/inbox")
    before = scrape(ops_server)
    for _ in range(3):
        assert http(ops_server, "GET", "/api/v1/inbox?consumer=ops", alice)[0] == 200
    assert http(ops_server, "GET", "/api/v1/inbox?consumer=ops&nope=1", alice)[0] == 400
    after = scrape(ops_server)
    ok = "liaison_http_requests_total"
    assert value(after, ok, **labels, outcome="ok") - value(before, ok, **labels, outcome="ok") == 3
    assert value(after, ok, **labels, outcome="client_error") - value(
        before, ok, **labels, outcome="client_error") == 1
    count = "liaison_http_request_duration_seconds_count"
    assert value(after, count, **labels) - value(before, count, **labels) == 4


def test_requests_are_counted_by_route_template_never_by_path_with_ids(ops_server):
    chan = unique("ops")
    ops_server.channel(chan, ["alice", "bob"])
    alice = ops_server.token("alice")["secret"]
    status, _, body = http(ops_server, "POST", "/api/v1/messages", alice,
                           {"kind": "announce", "channel": chan, "body": "a thread to read"})
    assert status == 200, body
    thread = json.loads(body)["thread"]
    template = dict(front="api", method="GET", route="/api/v1/threads/{id}")
    before = scrape(ops_server)
    # A thread that exists and one that does not: two paths with ids, one route.
    assert http(ops_server, "GET", f"/api/v1/threads/{thread}", alice)[0] == 200
    assert http(ops_server, "GET", "/api/v1/threads/thr_" + "0" * 32, alice)[0] == 404
    after = scrape(ops_server)
    ok = "liaison_http_requests_total"
    assert value(after, ok, **template, outcome="ok") - value(before, ok, **template, outcome="ok") == 1
    assert value(after, ok, **template, outcome="client_error") - value(
        before, ok, **template, outcome="client_error") == 1
    count = "liaison_http_request_duration_seconds_count"
    assert value(after, count, **template) - value(before, count, **template) == 2
    labels = {v for (_, ls) in after for (_, v) in ls}
    assert not any("thr_" in v for v in labels), sorted(v for v in labels if "thr_" in v)


def test_writes_move_the_group_commit_metrics_and_approvals_the_gauge(ops_server):
    chan = unique("ops")
    ops_server.channel(chan, ["alice", "bob"])
    alice = ops_server.token("alice")["secret"]
    before = scrape(ops_server)
    status, _, body = http(ops_server, "POST", "/api/v1/messages", alice,
                           {"kind": "request", "channel": chan, "impact": "code", "body": "Deploy"})
    assert status == 200, body
    thread = json.loads(body)["thread"]
    bob = ops_server.token("bob")["secret"]
    status, _, body = http(ops_server, "POST", "/api/v1/claims", bob,
                           {"thread": thread, "agent": "codex@b:1"})
    assert status == 409 and "approval_pending" in body, body
    after = scrape(ops_server)
    commits = "liaison_store_group_commits_total"
    assert value(after, commits, outcome="ok") > value(before, commits, outcome="ok")
    jobs = "liaison_store_group_commit_jobs_count"
    assert value(after, jobs) > value(before, jobs)
    assert value(after, "liaison_store_group_commit_duration_seconds_count") > 0
    pending = "liaison_approvals_pending"
    assert value(after, pending) == value(before, pending) + 1
    assert value(after, "liaison_db_pool_connections") >= 1


def test_posts_threads_and_decisions_move_their_counters_exactly(ops_server):
    chan = unique("ops")
    ops_server.channel(chan, ["alice", "bob"])
    alice = ops_server.token("alice")["secret"]
    bob = ops_server.token("bob")["secret"]
    bob_human = ops_server.token("bob", scopes=("human",))["secret"]

    def post(token, **body):
        status, _, text = http(ops_server, "POST", "/api/v1/messages", token, body)
        assert status == 200, text
        return json.loads(text)

    before = scrape(ops_server)
    asked = post(alice, kind="question", channel=chan, body="Which port?", idempotency_key="q-1")
    # The same post again (its idempotency key) creates nothing, and counts nothing.
    assert post(alice, kind="question", channel=chan, body="Which port?",
                idempotency_key="q-1")["message"] == asked["message"]
    post(bob, kind="reply", thread=asked["thread"], body="8443")
    post(alice, kind="close", thread=asked["thread"], body="", outcome="done")
    for decision in ("allow", "reject"):
        asked = post(alice, kind="request", channel=chan, impact="code", body=f"Deploy ({decision})")
        status, _, text = http(ops_server, "POST", f"/api/v1/approvals/{asked['approval']}/{decision}",
                               bob_human, {"reason": "not today"} if decision == "reject" else None)
        assert status == 200, text
    after = scrape(ops_server)

    def moved(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    posted = "liaison_messages_posted_total"
    # The rejection's close is the server's own, counted with the others.
    assert {k: moved(posted, kind=k) for k in ("question", "reply", "close", "request", "announce")} == {
        "question": 1, "reply": 1, "close": 2, "request": 2, "announce": 0}
    assert moved("liaison_threads_opened_total") == 3
    closed = "liaison_threads_closed_total"
    assert {o: moved(closed, outcome=o) for o in ("done", "rejected", "failed", "canceled")} == {
        "done": 1, "rejected": 1, "failed": 0, "canceled": 0}
    decisions = "liaison_approval_decisions_total"
    assert {o: moved(decisions, outcome=o) for o in ("allowed", "rejected", "expired")} == {
        "allowed": 1, "rejected": 1, "expired": 0}


def test_a_waiting_long_poll_shows_as_a_waiter(ops_server):
    carol = unique("w")
    ops_server.person(carol, "Carol Waiter")
    token = ops_server.token(carol)["secret"]
    chan = unique("ops")
    ops_server.channel(chan, ["alice", carol])
    alice = ops_server.token("alice")["secret"]
    answer = {}

    def poll():
        answer["got"] = http(ops_server, "GET", "/api/v1/inbox?consumer=w&wait_s=20", token)

    with deadline_witness(ops_server, wait_s=20) as witness:
        waiting = value(scrape(ops_server), "liaison_inbox_waiters")
        thread = threading.Thread(target=poll, daemon=True)
        thread.start()
        wait_for_waiters(ops_server, waiting + 1)
        assert value(scrape(ops_server), "liaison_inbox_waiters") == waiting + 1
        # A message for the waiting person ends the wait: before its deadline, which comes after
        # the witness's (started earlier with the same wait_s).
        status, _, body = http(ops_server, "POST", "/api/v1/messages", alice,
                               {"kind": "announce", "channel": chan, "body": "hi"})
        assert status == 200, body
        thread.join(60)
        assert not witness.ended.is_set(), "the poll ended at its deadline, not at the message"
    status, _, body = answer["got"]
    page = json.loads(body)
    assert status == 200 and not page["timed_out"], body
    assert [e["body"] for e in page["entries"]] == ["hi"], body


def test_the_access_log_names_routes_and_callers_never_tokens(ops_server):
    # A person of this test's own, so that its lines are told from the earlier tests' (access log
    # lines are written behind, up to 2 ms after the answer: docs/operators.md).
    who = unique("logger")
    ops_server.person(who, "Log Reader")
    secret = ops_server.token(who)["secret"]
    http(ops_server, "GET", "/api/v1/inbox?consumer=log", secret)
    http(ops_server, "GET", "/api/v1/threads/thr_nope", secret)
    deadline = time.monotonic() + 10
    lines: list[str] = []
    while time.monotonic() < deadline:
        lines = [l for l in ops_server.output if "liaison::access" in l and f"caller={who}" in l]
        if any("/api/v1/threads/{id}" in l for l in lines):
            break
        time.sleep(0.1)
    log = "".join(ops_server.output)
    inbox = [l for l in lines if "route=/api/v1/inbox" in l]
    assert len(inbox) == 1 and "status=200" in inbox[0] and "latency_ms=" in inbox[0], lines
    assert any("route=/api/v1/threads/{id}" in l and "status=400" in l for l in lines), lines
    # In the order they were answered.
    assert lines.index(inbox[0]) < next(i for i, l in enumerate(lines) if "/api/v1/threads/{id}" in l)
    assert secret not in log and METRICS_TOKEN not in log
    assert "\x1b[" not in log


UNKNOWN = ["/nope", "/admin/v1/typo", "/admin/v1/persons/x/y", "/api/v1/typo", "/api/nope",
           "/a2a/jsonrpc/x", "/mcp/x", "/mcp/sse", "/.well-known/nope", "/metricsx"]


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_unknown_routes_answer_404_on_every_prefix_whatever_the_token(ops_server, method):
    agent = ops_server.token("alice")["secret"]
    human = ops_server.token("alice", scopes=("human",))["secret"]
    for token in (None, "not-a-token", agent, human, ops_server.admin_token):
        for path in UNKNOWN:
            status, _, body = http(ops_server, method, path, token, {} if method == "POST" else None)
            assert status == 404, (path, token, body)
            assert json.loads(body)["error"]["code"] == "not_found", (path, body)
    # The console is for people: an unknown page there is an HTML page, never JSON. Without a
    # console session (a bearer token is not one) it is the sign-in page, the same answer as for
    # a page that exists, so it tells nobody which console addresses exist.
    for token in (None, "not-a-token", agent, human, ops_server.admin_token):
        status, _, body = http(ops_server, method, "/console/nope", token, {} if method == "POST" else None)
        assert status == 401 and "<!doctype html>" in body and "login-link" in body, (token, status, body[:200])
    # The A2A HTTP+JSON binding answers in its own shape.
    status, _, body = http(ops_server, method, "/a2a/rest/nope", agent)
    assert status == 404 and "NOT_FOUND" in body, body
