#!/usr/bin/env bash
# The replay engine's tail with and without a shorter EEVDF slice for its normal threads, one
# machine, rounds interleaved: does the start lateness's tail come from woken threads waiting
# for the running one's slice? (docs/PERFORMANCE.md, Replay engine.)
#
#   CNSREPLAY=… GEN_TRACE=… scripts/bench-slice-ab.sh [SLICE_US] [ROUNDS] [EVENTS] [RATE]
#                              (default 100 µs, 5 rounds a side, 1000000 events at 100000/s)
#
# Side A runs CNSREPLAY as it is; side B runs it under scripts/lib/sched-slice.py SLICE_US
# (every SCHED_OTHER thread asks for that slice through sched_setattr; Linux >= 6.12). Each
# round is one `scripts/bench-replay.sh EVENTS RATE 1` (its per-round lines on stderr); the
# end prints each side's ranges over its rounds: start lateness p99 and p99.9, the rounds that
# met the targets (p99 ≤ 100 µs, p99.9 ≤ 1 ms, rate within 2 %), the host floor's p99.
set -euo pipefail
slice=${1:-100}
rounds=${2:-5}
n=${3:-1000000}
rate=${4:-100000}
cd "$(dirname "$0")/.."
: "${CNSREPLAY:?set CNSREPLAY to a release cnsreplay}" "${GEN_TRACE:?set GEN_TRACE to a release gen_trace}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf '#!/bin/sh\nexec python3 %q %q %q "$@"\n' "$PWD/scripts/lib/sched-slice.py" "$slice" \
  "$CNSREPLAY" >"$dir/sliced"
chmod +x "$dir/sliced"
echo "bench-slice-ab: $rounds rounds a side, $n events at $rate/s, B: a $slice µs slice; $(uptime)"
for r in $(seq "$rounds"); do
  for side in A B; do
    bin=$CNSREPLAY
    [ "$side" = A ] || bin=$dir/sliced
    echo "$side, round $r:" >&2
    CNSREPLAY=$bin scripts/bench-replay.sh "$n" "$rate" 1 | sed "s/^/$side /" >>"$dir/rows"
  done
done
python3 - "$dir/rows" <<'PY'
import re, sys
sides = {}
for line in open(sys.argv[1]):
    side, rest = line.split(" ", 1)
    d = sides.setdefault(side, {"p99": [], "p999": [], "met": 0, "floor": []})
    m = re.search(r"start lateness p99 ([\d.]+)–[\d.]+ µs, p99.9 ([\d.]+)–[\d.]+ µs.*targets met in (\d)", rest)
    if m:
        d["p99"].append(float(m[1])); d["p999"].append(float(m[2])); d["met"] += int(m[3])
    m = re.search(r"host timing floor: p99 ([\d.]+)–", rest)
    if m:
        d["floor"].append(float(m[1]))
ms = lambda v: f"{min(v) / 1000:.2f}–{max(v) / 1000:.2f} ms"
for side, d in sorted(sides.items()):
    print(f"{side}: start lateness p99 {ms(d['p99'])}, p99.9 {ms(d['p999'])}; targets met in "
          f"{d['met']} of {len(d['p99'])}; host floor p99 {ms(d['floor'])}")
PY
