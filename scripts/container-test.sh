#!/usr/bin/env bash
# The container path, run for real: builds the image from docker/Dockerfile as the README says,
# runs it alone on SQLite, then brings up docker/compose.yaml (PostgreSQL, two replicas, nginx) and
# drives it through the proxy with the official A2A and MCP SDKs (tests/containers/test_compose.py).
#
# It runs Docker's files with podman (`podman build`; compose through podman's Docker-compatible
# socket and docker-compose), the way this project's machines run containers
# (podman with runc and lowered ulimits; health checks run by this script, as nothing schedules
# them without systemd). Images the files name but that no registry here can give
# (rust:1.95-bookworm, debian:bookworm-slim, postgres:16, nginx:1.27-alpine) are replaced by
# stand-ins built from Debian's packages (tests/containers/), and the versions really run are
# printed at the end.
#
# Bounded: every step has a time limit. Removes every container, volume, network and image it
# made, stand-ins included, whatever way it ends. What it keeps is the build's cache mounts (cargo's
# registry and target directory, as BuildKit keeps them): a second run rebuilds only the crate.
# `podman system prune --external` / `buildah prune` drop them.
#
# Without podman it prints why and exits 0 (LIAISON_CONTAINER_TEST=require makes that a failure;
# CI sets it). LIAISON_CONTAINER_TEST=skip skips on purpose; LIAISON_CONTAINER_TEST_KEEP_STANDINS=1
# keeps the stand-in images for the next run (while working on this test).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

say() { printf '\n==> [containers] %s\n' "$*"; }
fail() { printf 'container test: %s\n' "$*" >&2; exit 1; }

case "${LIAISON_CONTAINER_TEST:-}" in
  skip) echo "container test skipped (LIAISON_CONTAINER_TEST=skip)"; exit 0 ;;
esac
if ! command -v podman >/dev/null 2>&1 || ! command -v docker-compose >/dev/null 2>&1; then
  msg="container test skipped: it needs podman, runc, debootstrap and docker-compose (apt-get install podman runc debootstrap docker-compose)"
  [ "${LIAISON_CONTAINER_TEST:-}" = require ] && fail "$msg"
  echo "$msg"
  exit 0
fi

work=$(mktemp -d /var/tmp/liaison-container-test.XXXXXX)
made_images=()
made_volumes=()
service_pid=
health_pid=
compose_up=

# podman as this machine needs it: runc (crun refuses these cgroups) and limits below the current ones.
cat > "$work/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF=$work/containers.conf
# Docker's image format keeps HEALTHCHECK (the OCI format has no such field).
export BUILDAH_FORMAT=docker
sock=$work/podman.sock
export DOCKER_HOST=unix://$sock
compose=(docker-compose -p liaison -f docker/compose.yaml)

cleanup() {
  local rc=$?
  set +e
  say "cleaning up"
  [ -n "$health_pid" ] && kill "$health_pid" 2>/dev/null
  if [ -n "$compose_up" ]; then
    timeout 120 "${compose[@]}" down --volumes --timeout 10 >/dev/null 2>&1
  fi
  podman rm -f -t 5 liaison-solo >/dev/null 2>&1
  for v in "${made_volumes[@]}"; do podman volume rm -f "$v" >/dev/null 2>&1; done
  # Newest first: a stand-in built on another goes before its base.
  for ((i = ${#made_images[@]} - 1; i >= 0; i--)); do
    case "${made_images[i]}" in
      liaison:*) ;;
      *) [ -n "${LIAISON_CONTAINER_TEST_KEEP_STANDINS:-}" ] && continue ;;
    esac
    podman rmi -f "${made_images[i]}" >/dev/null 2>&1
  done
  podman image prune -f >/dev/null 2>&1
  [ -n "$service_pid" ] && kill "$service_pid" 2>/dev/null
  rm -rf "$work"
  if [ "$rc" = 0 ]; then say "passed"; else say "FAILED (exit $rc)"; fi
  exit "$rc"
}
trap cleanup EXIT

exists() { podman image exists "$1"; }
# podman tries to schedule health checks with systemd, which this kind of machine lacks, and says so
# on every container start; this script runs them itself.
podman() { command podman "$@" 2> >(grep -v 'systemd connection' >&2); }

# An image the files name, when this machine has none of that name: built from Debian and
# tagged with it, and removed at the end.
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)
mirror=${mirror:-http://deb.debian.org/debian}
debian_base() { # TAG SUITE
  exists "$1" && return 0
  say "stand-in $1: debootstrap $2 from $mirror"
  timeout 600 debootstrap --variant=minbase "$2" "$work/rootfs-$2" "$mirror" >"$work/debootstrap-$2.log" 2>&1 \
    || { tail -20 "$work/debootstrap-$2.log"; fail "debootstrap $2 failed"; }
  tar -C "$work/rootfs-$2" -c . | podman import - "$1" >/dev/null
  rm -rf "$work/rootfs-$2"
  made_images+=("$1")
}
standin() { # TAG DIR
  exists "$1" && return 0
  say "stand-in $1: tests/containers/$2"
  timeout 900 podman build -q -t "$1" "$work/ctx-$2" >/dev/null || fail "stand-in $1 did not build"
  made_images+=("$1")
}
# For now the stand-ins' versions; printed with the rest at the end.
versions=()

say "stand-ins for images no registry here can give"
debian_base docker.io/library/debian:bookworm-slim bookworm
for dir in rust postgres nginx; do
  mkdir -p "$work/ctx-$dir" && cp -a "tests/containers/$dir/." "$work/ctx-$dir/"
done
if ! exists docker.io/library/rust:1.95-bookworm; then
  sysroot=$(rustc --print sysroot)
  mkdir -p "$work/ctx-rust/toolchain"
  cp -a "$sysroot/bin" "$sysroot/lib" "$work/ctx-rust/toolchain/"
  cp /etc/ssl/certs/ca-certificates.crt "$work/ctx-rust/"
fi
standin docker.io/library/rust:1.95-bookworm rust
standin docker.io/library/postgres:16 postgres
if ! exists docker.io/library/nginx:1.27-alpine; then
  debian_base localhost/liaison-standin/debian:trixie trixie
fi
standin docker.io/library/nginx:1.27-alpine nginx

for tag in liaison:latest liaison:local; do
  exists "$tag" && fail "an image $tag exists already; this test builds and removes it: remove it first (podman rmi $tag)"
done
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
export LIAISON_GIT_COMMIT=$commit

say "docker build -f docker/Dockerfile --build-arg LIAISON_GIT_COMMIT=$commit -t liaison ."
made_images+=(liaison:latest)
started=$(date +%s)
# The whole log goes to build.log; the build's steps and cargo's progress (one line per crate, the
# optimised `dist` profile: the longest step) are shown as they happen.
echo "(the first build compiles about 280 crates with --profile dist: tens of minutes on 2 cores)"
timeout 3600 podman build -f docker/Dockerfile --build-arg "LIAISON_GIT_COMMIT=$commit" -t liaison . 2>&1 \
  | tee "$work/build.log" \
  | grep --line-buffered -E '^(STEP [0-9]+/[0-9]+:|COMMIT|[[:space:]]+(Compiling|Finished) )' \
  | sed -u 's/^[[:space:]]*/  /' \
  || { tail -40 "$work/build.log"; fail "the image did not build"; }
echo "built in $(( $(date +%s) - started )) s"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { # URL SECONDS
  local deadline=$(( $(date +%s) + $2 ))
  until curl -fsS -o /dev/null "$1" 2>/dev/null; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.5
  done
}

say "the image alone, on SQLite"
test "$(podman run --rm liaison --version)" != "" || fail "--version printed nothing"
version=$(podman run --rm liaison --version)
echo "liaison --version: $version"
case "$version" in *"$commit"*) ;; *) fail "--version does not name the commit $commit: $version" ;; esac
# Outputs are read whole before they are searched: `cmd | grep -q` fails under pipefail when grep
# stops reading early.
has() { grep -q -- "$2" <<<"$1"; }
has "$(podman image inspect liaison --format '{{json .Config.Healthcheck}}')" healthcheck \
  || fail "the image lost its HEALTHCHECK"
test "$(podman image inspect liaison --format '{{.Config.User}}')" = liaison || fail "the image does not run as liaison"

solo_port=$(free_port)
made_volumes+=(liaison-solo-data)
podman volume create liaison-solo-data >/dev/null
solo() {
  podman run -d --name liaison-solo -p "127.0.0.1:$solo_port:8080" -v liaison-solo-data:/var/lib/liaison \
    -e "LIAISON_PUBLIC_URL=http://127.0.0.1:$solo_port" liaison >/dev/null
  wait_http "http://127.0.0.1:$solo_port/readyz" 60 || { podman logs liaison-solo | tail -30; fail "liaison did not become ready"; }
}
solo
test "$(podman exec liaison-solo id -u)" = 10001 || fail "the process does not run as uid 10001"
# The image's own health check command, run the way a scheduler runs it.
podman healthcheck run liaison-solo >/dev/null || fail "the health check command failed on a healthy server"
test "$(podman inspect liaison-solo --format '{{.State.Health.Status}}')" = healthy \
  || fail "the health check did not mark the container healthy"
token=$(podman exec liaison-solo cat /var/lib/liaison/admin.token)
admin() { podman exec -e "LIAISON_ADMIN_TOKEN=$token" liaison-solo liaison "$@" --server http://127.0.0.1:8080; }
admin person add ada --name "Ada Lovelace" >/dev/null
has "$(admin person list)" ada || fail "the person just added is not listed"
card_before=$(curl -fsS "http://127.0.0.1:$solo_port/.well-known/agent-card.json")
podman stop -t 30 liaison-solo >/dev/null
podman rm liaison-solo >/dev/null
solo
# The data volume kept the database, the bootstrap token and the master key.
test "$(podman exec liaison-solo cat /var/lib/liaison/admin.token)" = "$token" || fail "the admin token changed over a restart"
has "$(admin person list)" ada || fail "the person added before the restart is gone"
card_after=$(curl -fsS "http://127.0.0.1:$solo_port/.well-known/agent-card.json")
python3 - "$card_before" "$card_after" <<'EOF' || fail "the card's signing key changed over a restart"
import json, sys
before, after = (json.loads(a) for a in sys.argv[1:])
def protected(card):
    return sorted(s["protected"] for s in card.get("signatures", []))
assert protected(before), "the card is not signed"
assert protected(before) == protected(after), (protected(before), protected(after))
EOF
# A frozen server fails its health check (the check is not a constant). From outside: inside its
# namespace, the server is init, which ignores SIGSTOP.
podman kill -s STOP liaison-solo >/dev/null
if podman healthcheck run liaison-solo >/dev/null 2>&1; then
  fail "the health check passed against a frozen server"
fi
podman kill -s CONT liaison-solo >/dev/null
podman healthcheck run liaison-solo >/dev/null || fail "the health check failed once the server went on"
podman rm -f -t 5 liaison-solo >/dev/null

say "docker compose -p liaison -f docker/compose.yaml up --build -d (through podman's socket)"
podman system service --time=0 "unix://$sock" >"$work/service.log" 2>&1 &
service_pid=$!
for _ in $(seq 1 50); do [ -S "$sock" ] && break; sleep 0.2; done
[ -S "$sock" ] || fail "podman's socket did not come up"
http_port=$(free_port)
export LIAISON_HTTP_PORT=$http_port
export LIAISON_PUBLIC_URL=http://127.0.0.1:$http_port
LIAISON_MASTER_KEY=$(openssl rand -hex 32)
export LIAISON_MASTER_KEY
made_images+=(liaison:local)
compose_up=1
# Health checks: nothing schedules them here, so run each container's every 2 s, as Docker would.
(
  while sleep 2; do
    for c in $(podman ps --filter label=com.docker.compose.project=liaison --format '{{.Names}}'); do
      podman healthcheck run "$c" >/dev/null 2>&1 || true
    done
  done
) &
health_pid=$!
timeout 1800 "${compose[@]}" up --build -d > "$work/compose.log" 2>&1 \
  || { tail -40 "$work/compose.log"; fail "compose did not come up"; }
wait_http "http://127.0.0.1:$http_port/readyz" 120 || { "${compose[@]}" logs --tail 30; fail "the proxy never answered /readyz"; }

say "the topology, through nginx, with the official SDKs (tests/containers/test_compose.py)"
admin_token=
for svc in liaison-a liaison-b; do
  t=$("${compose[@]}" exec -T "$svc" cat /var/lib/liaison/admin.token 2>/dev/null || true)
  [ -n "$t" ] && admin_token=$t
done
[ -n "$admin_token" ] || fail "no replica kept the bootstrap admin token"
LIAISON_CT_URL=http://127.0.0.1:$http_port LIAISON_CT_ADMIN_TOKEN=$admin_token \
  LIAISON_CT_COMPOSE="${compose[*]}" \
  timeout 900 .venv/bin/python -m pytest -q -p no:cacheprovider tests/containers/test_compose.py

say "what ran"
versions+=("liaison $version (image built from docker/Dockerfile)")
versions+=("build stage: $(podman run --rm docker.io/library/rust:1.95-bookworm rustc --version)")
versions+=("runtime base: Debian $(podman run --rm docker.io/library/debian:bookworm-slim cat /etc/debian_version)")
versions+=("db: $("${compose[@]}" exec -T db postgres --version)")
versions+=("proxy: $("${compose[@]}" exec -T proxy nginx -v 2>&1)")
versions+=("podman $(podman version --format '{{.Client.Version}}'), $(runc --version | head -n1), $(docker-compose version --short 2>/dev/null || docker-compose --version)")
printf '  %s\n' "${versions[@]}"
