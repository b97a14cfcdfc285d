#!/usr/bin/env bash
# Replay engine benchmark on the sim provider: dispatch lateness at a high event rate.
#
#   scripts/bench-replay.sh [EVENTS] [RATE] [ROUNDS]
#                                  (default 1000000 events at 100000/s, 3 rounds)
#
# Generates the trace with crates/replay/examples/gen_trace.rs (single `io` requests on 16
# volumes plus a snapshot every 1000 events), runs the release `cnsreplay run --provider sim`
# with exponential service times (mean 200 µs), and prints dispatch lateness percentiles and
# throughput from summary.json, once per round (the tail moves from run to run on a VM whose
# host preempts it; docs/PERFORMANCE.md says by how much), then the median round's tail.
# Results go in docs/PERFORMANCE.md (## Replay engine).
set -euo pipefail
n=${1:-1000000}
rate=${2:-100000}
rounds=${3:-3}
cd "$(dirname "$0")/.."
cargo build --release -q -p cnsreplay
cargo build --release -q -p replay --example gen_trace
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$target/release/examples/gen_trace" "$n" "$rate" "$dir/bench.cnsbin"
tails=()
for r in $(seq "$rounds"); do
  rm -rf "$dir/run"
  "$target/release/cnsreplay" -q run "$dir/bench.cnsbin" --provider sim -o "$dir/run" \
    --sim-latency default=exponential:200us > /dev/null || true
  echo "round $r/$rounds:"
  tails+=("$(python3 - "$dir/run/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
l, p = s["lateness"], s["pickup"]
us = lambda ns: f"{ns / 1000:.1f} µs"
print(f"  state {s['state']}: {s['dispatched']} events in {s['wall_seconds']:.2f} s "
      f"({s['ops_per_second']:.0f} events/s), {s['failed']} failed", file=sys.stderr)
print(f"  dispatch lateness: p50 {us(l['p50'])}, p90 {us(l['p90'])}, p99 {us(l['p99'])}, "
      f"p99.9 {us(l['p999'])}, max {us(l['max'])}", file=sys.stderr)
print(f"  pickup (dispatched -> started): p50 {us(p['p50'])}, p99 {us(p['p99'])}, "
      f"p99.9 {us(p['p999'])}", file=sys.stderr)
io = s["ops"].get("io", {})
if io:
    r, v = io["response"], io["service"]
    print(f"  io response p99 {us(r['p99'])}, service p99 {us(v['p99'])}", file=sys.stderr)
print(l["p99"], l["p999"])
PY
)")
done
printf '%s\n' "${tails[@]}" | python3 -c '
import sys
rows = sorted((float(b), float(a)) for a, b in (l.split() for l in sys.stdin if l.strip()))
p999, p99 = rows[len(rows) // 2]
print(f"median round by p99.9: lateness p99 {p99 / 1000:.1f} µs, p99.9 {p999 / 1000:.1f} µs "
      f"({len(rows)} rounds)")'
