#!/usr/bin/env bash
# Peak memory and time of streaming conversions on a large trace.
#
#   scripts/bench-convert-rss.sh [EVENTS]      (default 10000000)
#   env CNSREPLAY: a cnsreplay binary already built (else the release build here)
#
# Writes the deterministic sample trace (trace_format::sample) as JSON Lines, then times
# `cnsreplay convert` JSONL → binary → JSONL and `cnsreplay validate` on the binary, printing
# each command's wall time, events/s and peak RSS (getrusage of the child). Results go in
# docs/PERFORMANCE.md. Needs ~1 GiB free in $TMPDIR per 10 M events.
set -euo pipefail
n=${1:-10000000}
cd "$(dirname "$0")/.."
[ -n "${CNSREPLAY:-}" ] || cargo build --release -q -p cnsreplay
cargo build --release -q -p trace-format --example sample
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
bin=${CNSREPLAY:-$target/release/cnsreplay}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$target/release/examples/sample" "$n" "$dir/big.jsonl"
measure() {
  python3 - "$n" "$@" <<'PY'
import resource, subprocess, sys, time
n = int(sys.argv[1]); cmd = sys.argv[2:]
t = time.monotonic()
subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
dt = time.monotonic() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(f"{' '.join(c.rsplit('/', 1)[-1] for c in cmd[1:])}: {dt:.2f} s, {n / dt / 1e6:.2f} M events/s, peak RSS {rss:.1f} MiB")
PY
}
echo "events: $n; JSONL $(du -m "$dir/big.jsonl" | cut -f1) MiB"
measure "$bin" -q convert "$dir/big.jsonl" -o "$dir/big.cnsbin"
echo "binary: $(du -m "$dir/big.cnsbin" | cut -f1) MiB"
measure "$bin" -q convert "$dir/big.cnsbin" -o "$dir/back.jsonl"
measure "$bin" -q validate "$dir/big.cnsbin"
cmp -s "$dir/big.jsonl" "$dir/back.jsonl" && echo "JSONL → binary → JSONL: byte-identical"
