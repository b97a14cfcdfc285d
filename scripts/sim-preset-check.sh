#!/usr/bin/env bash
# The sim with realistic latencies, idle and beside CPU hogs (issue 44's must-show 3):
#  1. Experiment 2 (traces/experiment2-short.yaml) on the sim with `--sim-preset real-node`:
#     r0 and r1 on the idle machine, r2 beside HOGS busy loops (`while true`); each run's
#     verdict, then `analyze compare r0 r0`, `r0 -- r1` and `r0 -- r2`, their exit codes and
#     their first note (why a comparison is inconclusive).
#
# Usage: scripts/sim-preset-check.sh [WORKDIR]   (env: HOGS=2 CNSREPLAY=path/to/cnsreplay)
set -euo pipefail
cd "$(dirname "$0")/.."
HOGS=${HOGS:-2}
target=${CARGO_TARGET_DIR:-target}
bin=${CNSREPLAY:-$target/release/cnsreplay}
if [[ -z ${CNSREPLAY:-} ]]; then
  cargo build --release -q -p cnsreplay
fi
work=${1:-$(mktemp -d /tmp/sim-preset-check.XXXX)}
mkdir -p "$work"
hogs=()
start_hogs() { for _ in $(seq 1 "$HOGS"); do bash -c 'while true; do :; done' & hogs+=($!); done; }
stop_hogs() { [ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2>/dev/null || true; hogs=(); }
trap stop_hogs EXIT

exp2() { # name
  rm -rf "$work/$1"
  "$bin" -q run traces/experiment2-short.yaml --provider sim --sim-preset real-node --seed 1 \
    -o "$work/$1" --json >"$work/$1.json"
  python3 - "$work/$1.json" "$1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
v = s["validity"]
ops = ", ".join(f'{o["op"]} {o["verdict"]} ({o.get("tool_ratio", 0) * 100:.1f} %)' for o in v.get("ops", []))
print(f"{sys.argv[2]}: verdict {v['verdict']}; op types (largest bound ÷ figure): {ops}")
PY
}
compare() { # label args...
  local label=$1 code=0
  shift
  "$bin" -q analyze compare "$@" --json >"$work/cmp.json" 2>"$work/cmp.err" || code=$?
  python3 - "$work/cmp.json" "$label" "$code" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception:
    r = {"notes": [], "rows": []}
notes = r.get("notes") or ["-"]
print(f"compare {sys.argv[2]}: exit {sys.argv[3]}; regressions {r.get('regressions')}, "
      f"inconclusive {r.get('inconclusive')}, insufficient {r.get('insufficient')}; "
      f"first note: {notes[0][:300]}")
PY
}
echo "sim-preset-check: $(uptime)"
exp2 r0
exp2 r1
start_hogs
exp2 r2
stop_hogs
compare "r0 r0" "$work/r0" "$work/r0"
compare "r0 -- r1" "$work/r0" -- "$work/r1"
compare "r0 -- r2 (r2 beside $HOGS hogs)" "$work/r0" -- "$work/r2"

