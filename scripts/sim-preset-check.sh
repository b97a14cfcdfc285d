#!/usr/bin/env bash
# The sim with realistic latencies, idle and beside CPU hogs (issue 44's must-show 3):
#  1. Experiment 2 (traces/experiment2-short.yaml) on the sim with `--sim-preset real-node`:
#     r0 and r1 on the idle machine, r2 beside HOGS busy loops (`while true`); each run's
#     verdict, then `analyze compare r0 r0`, `r0 -- r1` and `r0 -- r2`, their exit codes and
#     their first note (why a comparison is inconclusive).
#  2. A capacity search on the sim's queueing model (attach: 4 servers, exponential 10 ms:
#     saturation 400/s; SLO attach p99<=2s; default validity thresholds), idle and beside the
#     hogs: the sustained rate each finds, and the loaded one's as a share of the idle one's.
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
capacity() { # name
  rm -rf "$work/$1"
  "$bin" -q capacity "$work/attach.jsonl" -o "$work/$1" --provider sim --sim-servers attach=4 \
    --sim-latency attach=exponential:10ms --slo 'attach p99<=2s' --start 1.8 --factor 1.25 \
    --resolution 0.04 --repeats 2 --refine 8 --seed 7 --json >"$work/$1.json" || true
  python3 - "$work/$1.json" "$work/capacity-rates.txt" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
r = next((x for x in v.get("rates", []) if x.get("op") == "attach"), {})
undecided = sum(1 for p in v.get("points", []) if not p["eval"].get("decided", True))
print(f'  complete {v.get("complete")}; attach sustained {r.get("sustained")}/s, failed at '
      f'{r.get("failed")}/s, fitted (90 % pass) {r.get("at_probability")}/s, interval '
      f'{r.get("interval")}; points {len(v.get("points", []))}, not decided {undecided}')
with open(sys.argv[2], "a") as f:
    f.write(f'{r.get("at_probability") or r.get("sustained")}\n')
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

awk 'BEGIN {
  print "{\"format\":\"cnsreplay-trace\",\"version\":1,\"provenance\":{\"generator\":\"sim-preset-check\"}}";
  for (i = 0; i < 2000; i++)
    printf "{\"at\":%d,\"id\":%d,\"attach\":{\"workload\":\"w%d\",\"volumes\":[]}}\n", i * 5000000, i + 1, i;
}' >"$work/attach.jsonl"
rm -f "$work/capacity-rates.txt"
echo "capacity, idle:"
capacity cap-idle
start_hogs
echo "capacity, beside $HOGS hogs:"
capacity cap-hogs
stop_hogs
python3 - "$work/capacity-rates.txt" <<'PY'
import sys
idle, hogs = (float(x) for x in open(sys.argv[1]).read().split())
print(f"capacity beside the hogs: {hogs / idle * 100:.1f} % of the idle answer ({hogs:.1f} vs {idle:.1f} attach/s)")
PY
