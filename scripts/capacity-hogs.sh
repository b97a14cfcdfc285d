#!/usr/bin/env bash
# Capacity on the sim's queueing model, idle and beside CPU hogs (issue 44's must-show 3):
# the saturation case of scripts/calibrate-capacity.sh (4 attach servers, exponential 10 ms,
# evenly spaced attaches, `attach p99<=2s`; truth 400/s), the same seeds searched first on the
# idle machine and then beside HOGS busy loops (`while true`). Prints each seed's sustained rate
# in both conditions and the hogs' answer relative to the idle one (the issue asks ±5 %).
#
# Usage: scripts/capacity-hogs.sh [WORKDIR]
#   env: SEEDS=3 EVENTS=4000 REFINE=12 HOGS=2 CNSREPLAY=path/to/cnsreplay (default: release)
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d /tmp/capacity-hogs.XXXX)}
mkdir -p "$work"
export SEEDS=${SEEDS:-3} EVENTS=${EVENTS:-4000} REFINE=${REFINE:-12} CASES=saturation JOBS=1
echo "capacity-hogs: $SEEDS seeds of $EVENTS attaches, idle then beside ${HOGS:-2} hogs; $(uptime)"
HOGS=0 scripts/calibrate-capacity.sh "$work/idle"
HOGS=${HOGS:-2} scripts/calibrate-capacity.sh "$work/hogs"
python3 - "$work" <<'PY'
import glob, json, os, sys
work = sys.argv[1]
def rates(cond):
    out = {}
    for f in glob.glob(f"{work}/{cond}/saturation-*/search/capacity.json"):
        r = json.load(open(f))
        seed = f.split("/")[-3].split("-")[1]
        e = r.get("estimate")
        out[seed] = e["rate"] if r.get("complete") and e else None
    return out
idle, hogs = rates("idle"), rates("hogs")
within = 0
for seed in sorted(idle, key=int):
    a, b = idle[seed], hogs.get(seed)
    if a is None or b is None:
        print(f"seed {seed}: idle {a}, hogs {b}: no answer to compare")
        continue
    d = b / a - 1
    within += abs(d) <= 0.05
    print(f"seed {seed}: idle {a:.1f}/s, beside hogs {b:.1f}/s ({100 * d:+.1f} %)")
print(f"within ±5 % of the idle answer: {within} of {len(idle)}")
PY
