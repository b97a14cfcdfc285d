#!/usr/bin/env bash
# The host's timing floor as a run measures it before its clock (docs/replay.md, The tool's
# error bound): ROUNDS runs of the quickstart trace on the sim, each with a --floor-probe of
# DUR, idle and then beside HOGS busy loops (`while true`), interleaved round by round. Prints
# one line per run (the floor's p50, p99, p99.9 and max, the probe count; then the CPU and wall
# time per wake-up of a thread sleeping on the timing lanes' grid, manifest `host.wake_cost`)
# and the range of each over the rounds, per condition.
#
# Usage: scripts/floor-probe.sh   (env: ROUNDS=5 DUR=1s HOGS=2 CNSREPLAY=path/to/cnsreplay)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
DUR=${DUR:-1s}
HOGS=${HOGS:-2}
target=${CARGO_TARGET_DIR:-target}
bin=${CNSREPLAY:-$target/release/cnsreplay}
if [[ -z ${CNSREPLAY:-} ]]; then
  cargo build --release -q -p cnsreplay
fi
work=$(mktemp -d /tmp/floor-probe.XXXX)
hogs=()
stop_hogs() {
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
  hogs=()
}
trap 'stop_hogs; rm -rf "$work"' EXIT
one() { # condition round
  local run=$work/$1-$2
  "$bin" -q run traces/quickstart.yaml --provider sim --speed 50 \
    --sim-latency default=constant:1ms --floor-probe "$DUR" -o "$run" >/dev/null
  python3 - "$run/manifest.json" "$1" <<'EOF'
import json, sys
h = json.load(open(sys.argv[1]))["host"]
f, w = h["timing_floor"], h["wake_cost"]
ms = lambda n: n / 1e6
print(f"{sys.argv[2]} p50 {ms(f['p50']):.3f} p99 {ms(f['p99']):.3f} "
      f"p99.9 {ms(f['p999']):.3f} max {ms(f['max']):.3f} wake_cpu {ms(w['cpu_ns_per_wake']):.4f} "
      f"wake_wall {ms(w['wall_ns_per_wake']):.4f} ms ({f['count']} probes; {w['wakes']} timer "
      f"wake-ups every {ms(w['period_ns']):.3f} ms)")
EOF
}
for r in $(seq 1 "$ROUNDS"); do
  one idle "$r"
  for _ in $(seq 1 "$HOGS"); do
    (while true; do :; done) &
    hogs+=($!)
  done
  one "hogs-$HOGS" "$r"
  stop_hogs
done | tee "$work/lines"
python3 - "$work/lines" <<'EOF'
import re, sys
rows = {}
for line in open(sys.argv[1]):
    cond, *rest = line.split()
    vals = dict(zip(rest[0::2], rest[1::2]))
    keys = ("p50", "p99", "p99.9", "max", "wake_cpu", "wake_wall")
    rows.setdefault(cond, []).append({k: float(vals[k]) for k in keys})
for cond, rs in rows.items():
    parts = [f"{k} {min(r[k] for r in rs):.3f}–{max(r[k] for r in rs):.3f}" for k in ("p50", "p99", "p99.9", "max")]
    parts += [f"{k} {1000 * min(r[k] for r in rs):.1f}–{1000 * max(r[k] for r in rs):.1f} µs" for k in ("wake_cpu", "wake_wall")]
    print(f"{cond}, {len(rs)} rounds: " + ", ".join(parts[:4]) + " ms, " + ", ".join(parts[4:]))
EOF
