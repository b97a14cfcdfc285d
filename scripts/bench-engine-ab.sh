#!/usr/bin/env bash
# The replay engine's own tail at two revisions side by side, on one machine, rounds
# interleaved (A, B, A, B, …) so the machine's drift hits both alike: each revision's release
# `engine_bench` example replays its own `gen_trace` of EVENTS events at RATE/s on the sim
# (exponential 200 µs) with the engine targets as the verdict's limits
# (`VALIDITY=start.p99=100us,start.p99.9=1ms`), as `scripts/bench-replay.sh` does through the
# CLI. Prints each run's line and, per revision, the range of start lateness p99 and p99.9
# over the rounds and the rounds that met the targets (p99 ≤ 100 µs, p99.9 ≤ 1 ms).
#
# Usage: scripts/bench-engine-ab.sh REV_A REV_B [ROUNDS] [EVENTS] [RATE]
#        (default 5 rounds of 1000000 events at 100000/s; e.g. `d7f21e1 HEAD`)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/ab.sh
ab_prepare examples/engine_bench -p replay --example engine_bench
echo "bench-engine-ab: $ta vs $tb, $rounds rounds of $n events at $rate/s; $(uptime)"
for r in $(seq "$rounds"); do
  for tag in "$ta" "$tb"; do
    rm -rf "$work/run"
    line=$(VALIDITY=start.p99=100us,start.p99.9=1ms "$work/$tag/engine_bench" \
      "$work/$tag/bench.cnsbin" "$work/run")
    echo "$tag round $r: $line"
    echo "$tag $line" >>"$work/rows"
  done
done
python3 - "$work/rows" "$ta" "$tb" <<'PY'
import re, sys
rows = [l.split(" ", 1) for l in open(sys.argv[1]) if l.strip()]
for tag in sys.argv[2:]:
    lines = [l for t, l in rows if t == tag]
    st = [re.search(r"start lateness p50 ([\d.]+) µs p99 ([\d.]+) p99\.9 ([\d.]+)", l) for l in lines]
    p99 = sorted(float(m.group(2)) for m in st)
    p999 = sorted(float(m.group(3)) for m in st)
    met = sum(float(m.group(2)) <= 100 and float(m.group(3)) <= 1000 for m in st)
    print(f"{tag}: {len(lines)} rounds: start lateness p99 {p99[0]:.1f}–{p99[-1]:.1f} µs, "
          f"p99.9 {p999[0]:.1f}–{p999[-1]:.1f} µs; targets met in {met} of {len(lines)}")
PY
