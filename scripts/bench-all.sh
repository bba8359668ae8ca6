#!/usr/bin/env bash
# The figures of docs/performance.md in one run, one command after the other, each line of the
# table from its own command (A, C, D, E, F there), with the SDK peers of the shared harness in the
# same session. Run it on an idle machine of two cores or more: the server on CPU 1, the load on
# CPU 0. Every output goes to $OUT (default target/bench-all), one file per command.
#
# Before: the shipped build and the benches built with the release profile, the shared harness
# set up, PostgreSQL reachable at $PG (trust auth):
#   cargo build --profile dist
#   cargo bench --profile release --no-run --bench roundtrip --bench fleet --bench mcp
#   ../shared/bench/setup.sh
#
# STEPS picks commands (default: intake roundtrip roundtrip-inbox fleet mcp pywake), e.g.
# STEPS="intake fleet". roundtrip has the claimers wait in `claim` (one handed each task),
# roundtrip-inbox in `inbox` (all woken for each task, as on issue 49's day), inbound cells only.
set -u
cd "$(dirname "$0")/.."
TARGET=${CARGO_TARGET_DIR:-target}
BIN=${BIN:-$TARGET/dist/liaison}
HARNESS=${HARNESS:-../shared/bench}
OUT=${OUT:-$TARGET/bench-all}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
STEPS=${STEPS:-intake roundtrip roundtrip-inbox fleet mcp pywake}
export BENCH_ENV=${BENCH_ENV:-${TMPDIR:-/tmp}/a2a-bench}
mkdir -p "$OUT"
BIN=$(realpath "$BIN")

log() { echo "=== $(date +%T) $*" | tee -a "$OUT/steps.log"; }
# The newest executable of bench $1 built with the release profile.
bench_exe() { find "$TARGET/release/deps" -maxdepth 1 -type f -executable -name "$1-*" -printf '%T@ %p\n' | sort -rn | head -1 | cut -d' ' -f2; }
wait_http() { for _ in $(seq 1 200); do curl -sf "$1" > /dev/null && return 0; sleep 0.1; done; return 1; }

# Command A for liaison: the demo server on CPU 1, the partner's intakes at 1 and 64 in flight.
liaison_intake() { # name round [database url]
  local name=$1 round=$2 db=${3:-} data
  data=$(mktemp -d)
  local extra=()
  [ -n "$db" ] && extra=(--database-url "$db")
  # The demo party's rate limit (2,000 requests/s) lifted, or the load measures 429s.
  LIAISON_LIMITS__EXTERNAL__PER_S=0 LIAISON_LIMITS__EXTERNAL__BURST=0 \
    taskset -c 1 "$BIN" serve --demo --data-dir "$data" --listen 127.0.0.1:8080 "${extra[@]}" \
    > "$OUT/intake-$name-$round.server.log" 2>&1 &
  local pid=$!
  if wait_http http://127.0.0.1:8080/.well-known/agent-card.json; then
    local token
    token=$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["partner"]["agent_token"])' "$data/demo.json")
    python3 "$HARNESS/jsonrpc_load.py" http://127.0.0.1:8080 --pid $pid --intake "$token" --stream-probe 0 \
      --levels 1,64 --duration 8 --json-out "$OUT/intake-$name-$round.json" --label "liaison-$name" \
      > "$OUT/intake-$name-$round.txt" 2>&1
  else
    log "liaison ($name) did not start: $OUT/intake-$name-$round.server.log"
  fi
  kill $pid; wait $pid 2>/dev/null
  rm -rf "$data"
}

# Command A for an SDK peer (pinned to CPU 1 by run_peer.sh).
peer_intake() { # name round
  local name=$1 round=$2
  "$HARNESS/peers/run_peer.sh" "$name" 41242 > "$OUT/peer-$name-$round.server.log" 2>&1 &
  local pid=$!
  if wait_http http://127.0.0.1:41242/.well-known/agent-card.json; then
    python3 "$HARNESS/jsonrpc_load.py" http://127.0.0.1:41242 --pid $pid --stream-probe 0 --levels 1,64 \
      --duration 8 --json-out "$OUT/peer-$name-$round.json" --label "$name" > "$OUT/peer-$name-$round.txt" 2>&1
  else
    log "peer $name did not start: $OUT/peer-$name-$round.server.log"
  fi
  kill $pid; wait $pid 2>/dev/null
}

for step in $STEPS; do
  case $step in
  intake)
    # Two rounds, liaison and the peers interleaved, so that a drift of the machine shows.
    for round in 1 2; do
      log "A. intake, round $round"
      liaison_intake sqlite $round
      db=liaison_bench_intake_$$_$round
      psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
      liaison_intake postgres $round "$PG/$db"
      psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $db"
      for peer in js-memory js-sqlite python-memory python-sqlite; do peer_intake $peer $round; done
    done
    grep -h '^| [a-z]' "$OUT"/intake-*.txt "$OUT"/peer-*.txt | grep -v '| server |' > "$OUT/intake-table.md" ;;
  roundtrip)
    log "C. round trip"
    LIAISON_BENCH_BIN=$BIN LIAISON_BENCH_SERVER_PREFIX="taskset -c 1" LIAISON_BENCH_CLAIM_WAIT=1 \
      LIAISON_BENCH_PG_URL=$PG/postgres taskset -c 0 "$(bench_exe roundtrip)" --bench > "$OUT/roundtrip.txt" 2>&1 ;;
  roundtrip-inbox)
    log "C. round trip, claimers waiting in inbox"
    LIAISON_BENCH_BIN=$BIN LIAISON_BENCH_SERVER_PREFIX="taskset -c 1" LIAISON_BENCH_ROUNDTRIP=inbound:1,inbound:64 \
      LIAISON_BENCH_PG_URL=$PG/postgres taskset -c 0 "$(bench_exe roundtrip)" --bench > "$OUT/roundtrip-inbox.txt" 2>&1 ;;
  fleet)
    log "F. fleet"
    LIAISON_BENCH_BIN=$BIN LIAISON_BENCH_SERVER_PREFIX="taskset -c 1" LIAISON_BENCH_CLAIM_WAIT=1 \
      LIAISON_BENCH_FLEET_TASKS=300 LIAISON_BENCH_PG_URL=$PG/postgres \
      taskset -c 0 "$(bench_exe fleet)" --bench > "$OUT/fleet.txt" 2>&1 ;;
  mcp)
    log "D. wake-up and memory"
    LIAISON_BENCH_BIN=$BIN LIAISON_BENCH_SERVER_PREFIX="taskset -c 1" LIAISON_BENCH_MCP_SECTIONS=2,4,6 \
      LIAISON_BENCH_PG_URL=$PG/postgres taskset -c 0 "$(bench_exe mcp)" --bench > "$OUT/mcp.txt" 2>&1 ;;
  pywake)
    log "E. wake-up, Python SDK"
    LIAISON_BIN=$BIN LIAISON_BENCH_SERVER_CPUS=1 LIAISON_BENCH_CLIENT_CPUS=0 \
      .venv/bin/python benches/interop/bench_wakeup.py 200 > "$OUT/pywake-sqlite.txt" 2>&1
    LIAISON_BIN=$BIN LIAISON_BENCH_SERVER_CPUS=1 LIAISON_BENCH_CLIENT_CPUS=0 \
      LIAISON_TEST_DATABASE_URL=$PG/postgres \
      .venv/bin/python benches/interop/bench_wakeup.py 200 > "$OUT/pywake-postgres.txt" 2>&1 ;;
  *) log "unknown step $step (intake roundtrip roundtrip-inbox fleet mcp pywake)" ;;
  esac
done
log "done: $OUT"
