#!/usr/bin/env bash
# The whole test suite, as the README says: installs what the tests need (a Python venv with the
# official MCP SDK, PostgreSQL running locally), then runs the Rust suite and the Python interop
# tests once against SQLite and once against PostgreSQL.
#
# Environment:
#   LIAISON_TEST_PG_URL  PostgreSQL server for the PostgreSQL pass
#                        (default postgres://postgres@127.0.0.1:5432/postgres)
#   LIAISON_TEST_PG_SOCKET_DIR  the same server's Unix socket directory, for a shorter pass over
#                        it (default /var/run/postgresql; skipped when there is no socket)
#   CARGO_TARGET_DIR     where cargo builds (default: target/ in the repository)
# Also needs Node >= 20 and npm (the JavaScript A2A SDK in tests/js-a2a, the MCP conformance suite
# and the Node >= 22 it runs on come from the npm registry).
#
#   LIAISON_CONTAINER_TEST  skip: leave out the container test; require: fail where podman is
#                        missing (default: run it where podman is, say why it is skipped elsewhere)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
pg_url=${LIAISON_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}
pg_socket_dir=${LIAISON_TEST_PG_SOCKET_DIR:-/var/run/postgresql}
pg_socket_url="postgres://postgres@$(printf %s "$pg_socket_dir" | sed 's|/|%2F|g')/postgres"
target=${CARGO_TARGET_DIR:-$root/target}
export CARGO_TARGET_DIR=$target

step() { printf '\n==> %s\n' "$*"; }

step "PostgreSQL"
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  fi
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
pg_isready -h 127.0.0.1 -p 5432

step "Browser for the console test"
chromium=${LIAISON_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$chromium" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "Installing Debian's chromium (apt-get; a few minutes on a fresh machine)"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
  else
    echo "The console test drives Debian's chromium: apt-get install chromium (or set LIAISON_CHROMIUM)" >&2
    exit 1
  fi
fi

step "Python environment (.venv)"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# Not --quiet: on a fresh venv this downloads the SDKs and Playwright for minutes; pip says what.
echo "Installing tests/requirements.txt into .venv (the MCP and A2A SDKs, Playwright, pytest)"
.venv/bin/python -m pip install --disable-pip-version-check --progress-bar off -r tests/requirements.txt

# The official A2A JavaScript SDK and what it needs, exactly as the lock pins them; the interop
# passes drive it (tests/interop/test_a2a_js.py). Node >= 20, the machine's. No package there needs
# an install script (protobufjs's only warns about version schemes), so none runs.
step "JavaScript A2A SDK for the interop scenarios (npm ci --prefix tests/js-a2a)"
node --version
npm ci --no-audit --no-fund --ignore-scripts --prefix tests/js-a2a

step "Build (debug, every target; the first build compiles about 280 crates)"
cargo build --locked --all-targets

step "Rust suite on SQLite"
cargo test --locked -- --test-threads=2

step "Rust suite on PostgreSQL"
LIAISON_TEST_DATABASE_URL=$pg_url cargo test --locked --test api -- --test-threads=2
# The unit tests that open a store (the writer's group commit, the gRPC service in process) pick
# the backend the same way (src/store/test_db.rs).
LIAISON_TEST_DATABASE_URL=$pg_url cargo test --locked --lib -- --test-threads=2

# The same server through its Unix socket (what the README suggests on one host): the read pool
# under bursts of connections, the bus and the replicas.
step "Rust suite on PostgreSQL over its Unix socket (pool, bus, replicas)"
if [ -S "$pg_socket_dir/.s.PGSQL.5432" ]; then
  LIAISON_TEST_DATABASE_URL=$pg_socket_url cargo test --locked --test api -- --test-threads=2 \
    resources:: replicas:: directory:: inbox::
else
  echo "No PostgreSQL socket in $pg_socket_dir: skipped (set LIAISON_TEST_PG_SOCKET_DIR)"
fi

export LIAISON_BIN=$target/debug/liaison
step "Interop: the official MCP and A2A Python SDKs, the A2A JavaScript SDK, CLI and console against the binary, on SQLite"
.venv/bin/python -m pytest -q tests/interop

# Once: the MCP protocol layer it checks reads and writes nothing backend-specific.
step "The official MCP conformance suite against /mcp, both protocol revisions (tests/mcp_conformance)"
.venv/bin/python tests/mcp_conformance/run.py
step "The MCP conformance suite's authorization-server scenarios against liaison's OAuth (tests/mcp_conformance/authorization.py)"
.venv/bin/python tests/mcp_conformance/authorization.py

step "Interop on PostgreSQL"
LIAISON_TEST_DATABASE_URL=$pg_url .venv/bin/python -m pytest -q tests/interop

step "Containers: the image and the compose topology, run with podman (scripts/container-test.sh)"
./scripts/container-test.sh
