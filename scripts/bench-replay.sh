#!/usr/bin/env bash
# Replay engine benchmark on the sim provider: dispatch lateness at a high event rate.
#
#   scripts/bench-replay.sh [EVENTS] [RATE]      (default 1000000 events at 100000/s)
#
# Generates the trace with crates/replay/examples/gen_trace.rs (single `io` requests on 16
# volumes plus a snapshot every 1000 events), runs the release `cnsreplay run --provider sim`
# with exponential service times (mean 200 µs), and prints dispatch lateness percentiles and
# throughput from summary.json. Results go in docs/PERFORMANCE.md (## Replay engine).
set -euo pipefail
n=${1:-1000000}
rate=${2:-100000}
cd "$(dirname "$0")/.."
cargo build --release -q -p cnsreplay
cargo build --release -q -p replay --example gen_trace
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$target/release/examples/gen_trace" "$n" "$rate" "$dir/bench.cnsbin"
"$target/release/cnsreplay" -q run "$dir/bench.cnsbin" --provider sim -o "$dir/run" \
  --sim-latency default=exponential:200us > /dev/null || true
python3 - "$dir/run/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
l = s["lateness"]
us = lambda ns: f"{ns / 1000:.1f} µs"
print(f"state {s['state']}: {s['dispatched']} events in {s['wall_seconds']:.2f} s "
      f"({s['ops_per_second']:.0f} events/s), {s['failed']} failed")
print(f"dispatch lateness: p50 {us(l['p50'])}, p90 {us(l['p90'])}, p99 {us(l['p99'])}, "
      f"p99.9 {us(l['p999'])}, max {us(l['max'])}")
io = s["ops"].get("io", {})
if io:
    r, v = io["response"], io["service"]
    print(f"io response p99 {us(r['p99'])}, service p99 {us(v['p99'])}")
PY
