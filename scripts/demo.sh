#!/usr/bin/env bash
# The demo, against a running `liaison serve --demo`:
#   1. two agents (alice's and bob's, official MCP Python SDK) hold a whole thread;
#   2. an outside agent (partner, official A2A Python SDK) delegates a task over A2A, and alice
#      answers it from the terminal with the member commands (liaison inbox, claim, post);
#      the partner sees SUBMITTED -> WORKING -> COMPLETED with the answer as an artifact.
#
#   scripts/demo.sh [DEMO_JSON]     default: liaison-data/demo.json (where `serve --demo` writes it)
#
# Creates the Python venv it needs when missing (python3 >= 3.11 with venv): .venv in the
# repository, or LIAISON_DEMO_VENV. The liaison binary: LIAISON_BIN, else `liaison` on PATH
# (cargo install --path .), else target/release/liaison or target/debug/liaison.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
demo=${1:-liaison-data/demo.json}
if [ ! -f "$demo" ] && [ -z "${1:-}" ] && [ -f "$root/liaison-data/demo.json" ]; then
  demo=$root/liaison-data/demo.json
fi
if [ ! -f "$demo" ]; then
  echo "demo.sh: no $demo. Start the server first, in another terminal:" >&2
  echo "  liaison serve --demo        (or: cargo run --release -- serve --demo)" >&2
  echo "and pass the demo.json path it prints." >&2
  exit 2
fi
demo=$(cd "$(dirname "$demo")" && pwd)/$(basename "$demo")

# The liaison binary.
bin=${LIAISON_BIN:-}
if [ -z "$bin" ]; then
  target=${CARGO_TARGET_DIR:-$root/target}
  for candidate in "$(command -v liaison || true)" "$target/release/liaison" "$target/debug/liaison"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then bin=$candidate; break; fi
  done
fi
if [ -z "$bin" ]; then
  echo "demo.sh: no liaison binary: run 'cargo install --path .' (or 'cargo build --release'), or set LIAISON_BIN" >&2
  exit 2
fi

# The venv, with the SDK versions the tests pin (tests/requirements.txt).
venv=${LIAISON_DEMO_VENV:-$root/.venv}
python=${PYTHON:-python3}
if ! "$venv/bin/python" -c 'import mcp, a2a, httpx, jwt, grpc' 2>/dev/null; then
  if [ ! -x "$venv/bin/python" ]; then
    if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "demo.sh: needs Python >= 3.11 as $python (set PYTHON=python3.12, for example)" >&2
      exit 2
    fi
    echo "Creating the Python venv $venv ..."
    "$python" -m venv "$venv" || {
      echo "demo.sh: '$python -m venv' failed; on Debian/Ubuntu: sudo apt install python3-venv" >&2
      exit 2
    }
  fi
  echo "Installing the official MCP and A2A Python SDKs into $venv ..."
  mapfile -t packages < <(grep -E '^(mcp|a2a-sdk|httpx|PyJWT)' "$root/tests/requirements.txt")
  "$venv/bin/pip" install -q "${packages[@]}"
fi
py=$venv/bin/python

field() { "$py" -c 'import json,sys; v=json.load(open(sys.argv[1])); [v := v[k] for k in sys.argv[2].split(".")]; print(v)' "$demo" "$1"; }
url=$(field url)
if ! "$bin" healthcheck "$url" 2>/dev/null; then
  echo "demo.sh: the server of $demo ($url) does not answer; is 'liaison serve --demo' running?" >&2
  exit 2
fi

echo "== 1. Two agents talk over MCP (alice's and bob's, official MCP SDK)"
"$py" "$root/tests/interop/demo_conversation.py" "$demo"

echo
echo "== 2. partner delegates a task over A2A; alice answers it from the terminal"
export LIAISON_SERVER=$url
LIAISON_TOKEN=$(field alice.agent_token)
export LIAISON_TOKEN
export LIAISON_AGENT=demo-sh@$(hostname | tr -cd 'A-Za-z0-9.-' | cut -c1-40):$$
consumer=demo.sh
# Start after whatever is already in alice's inbox.
cursor=0
while :; do
  page=$("$bin" inbox --consumer "$consumer" --after "$cursor" --limit 100 --json)
  cursor=$(printf '%s' "$page" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["cursor"])')
  [ "$(printf '%s' "$page" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["more"])')" = True ] || break
done

log=$(mktemp)
trap 'rm -f "$log"' EXIT
question="Which TLS versions does the webhook endpoint accept?"
"$py" "$root/examples/a2a_delegate.py" --demo "$demo" --skill handoff --answer "TLS 1.2 and 1.3" \
  "$question" >"$log" 2>&1 &
delegate=$!

# alice's side: wait for the partner's handoff, claim it, answer it.
thread=
for _ in $(seq 1 12); do
  page=$("$bin" inbox --consumer "$consumer" --after "$cursor" --wait 10s --json)
  cursor=$(printf '%s' "$page" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["cursor"])')
  thread=$(printf '%s' "$page" | "$py" -c '
import json, sys
for e in json.load(sys.stdin)["entries"]:
    if e.get("author") == "partner" and e.get("kind") == "handoff":
        print(e["thread"]); break')
  [ -n "$thread" ] && break
  kill -0 "$delegate" 2>/dev/null || break
done
if [ -z "$thread" ]; then
  echo "demo.sh: the partner's task never reached alice's inbox; the A2A client said:" >&2
  cat "$log" >&2
  kill "$delegate" 2>/dev/null || true
  exit 1
fi
echo "\$ liaison inbox --consumer $consumer --wait 10s      # alice sees the partner's handoff"
echo "\$ liaison claim $thread"
"$bin" claim "$thread"
echo "\$ liaison post --kind reply --thread $thread \"…\""
"$bin" post --kind reply --thread "$thread" \
  "The webhook endpoint accepts TLS 1.2 and TLS 1.3; TLS 1.0 and 1.1 are refused."

status=0
wait "$delegate" || status=$?
echo
echo "What partner's A2A client saw:"
sed 's/^/  /' "$log"
if [ "$status" -ne 0 ]; then
  echo "demo.sh: the A2A task did not complete" >&2
  exit 1
fi
echo
echo "OK: two agents talked over MCP, and an A2A task was answered from the command line."
