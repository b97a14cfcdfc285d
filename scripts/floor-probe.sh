#!/usr/bin/env bash
# The host's timing floor as a run measures it before its clock (docs/replay.md, The tool's
# error bound): ROUNDS runs of the quickstart trace on the sim, each with a --floor-probe of
# DUR, idle and then beside HOGS busy loops (`while true`), interleaved round by round. Prints
# one line per run (the floor's p50, p99, p99.9 and max, the probe count) and the range of each
# over the rounds, per condition.
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
f = json.load(open(sys.argv[1]))["host"]["timing_floor"]
ms = lambda n: n / 1e6
print(f"{sys.argv[2]} p50 {ms(f['p50']):.3f} p99 {ms(f['p99']):.3f} "
      f"p99.9 {ms(f['p999']):.3f} max {ms(f['max']):.3f} ms ({f['count']} probes)")
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
    rows.setdefault(cond, []).append({k: float(vals[k]) for k in ("p50", "p99", "p99.9", "max")})
for cond, rs in rows.items():
    parts = [f"{k} {min(r[k] for r in rs):.3f}–{max(r[k] for r in rs):.3f}" for k in ("p50", "p99", "p99.9", "max")]
    print(f"{cond}, {len(rs)} rounds: " + ", ".join(parts) + " ms")
EOF
