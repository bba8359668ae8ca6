#!/usr/bin/env bash
# Measures a cold build of liaison with one cargo profile, as the README's figures were taken:
# wall and CPU time and the largest single process (/usr/bin/time -v), and the peak memory of the
# whole build (the summed resident size of every process of the build, sampled twice a second).
#
#   scripts/measure-build.sh release     # what `cargo install --path . --locked` builds
#   scripts/measure-build.sh dist        # what ships (docker/Dockerfile)
#   scripts/measure-build.sh dist DIR    # the same, keeping the build in DIR (must not exist yet)
#
# Builds in a fresh target directory under $TMPDIR (removed at the end), so nothing is reused;
# with DIR, in that new directory, kept afterwards (to benchmark the binary just measured).
set -euo pipefail
profile=${1:?usage: scripts/measure-build.sh release|dist|dev [DIR]}
keep=${2:-}
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export CARGO_TARGET_DIR=$out/target
if [ -n "$keep" ]; then
  [ -e "$keep" ] && { echo "$keep exists: a measured build starts from nothing" >&2; exit 2; }
  export CARGO_TARGET_DIR=$keep
fi
cargo fetch --locked >/dev/null
set -m
/usr/bin/time -v cargo build --locked --profile "$profile" --bin liaison 2> "$out/time.log" &
pid=$!
peak=0
while kill -0 "$pid" 2>/dev/null; do
  sum=$(ps -eo pgid=,rss= | awk -v g="$pid" '$1==g {s+=$2} END {print s+0}')
  [ "$sum" -gt "$peak" ] && peak=$sum
  sleep 0.5
done
wait "$pid"
grep -E 'Elapsed \(wall clock\)|User time|System time|Maximum resident set size' "$out/time.log"
echo "Peak memory of the whole build (summed RSS): $((peak / 1024)) MiB"
dir=$profile; [ "$profile" = dev ] && dir=debug
ls -l "$CARGO_TARGET_DIR/$dir/liaison"
