#!/usr/bin/env bash
# The replay engine's own tail at two revisions side by side, on one machine, rounds
# interleaved (A, B, A, B, …) so the machine's drift hits both alike: each revision's release
# `engine_bench` example replays its own `gen_trace` of EVENTS events at RATE/s on the sim
# (exponential 200 µs) with the engine targets as the verdict's limits
# (`VALIDITY=start.p99=100us,start.p99.9=1ms`), as `scripts/bench-replay.sh` does through the
# CLI. Prints each run's line and, per revision, the range of start lateness p99 and p99.9
# over the rounds and the rounds that met the targets (p99 ≤ 100 µs, p99.9 ≤ 1 ms).
#
# With NOOP=1 it runs the noop provider at the engine's maximum on one core instead
# (`PROVIDER=noop SPEED=100 taskset -c 0`, issue 16's "≥ 1 M events/s on one core") and
# prints per revision the range of completed events/s: one core held the whole time, so the
# rate is the inverse of the engine's CPU per event.
#
# Usage: [NOOP=1] scripts/bench-engine-ab.sh REV_A REV_B [ROUNDS] [EVENTS] [RATE]
#        (default 5 rounds of 1000000 events at 100000/s; e.g. `d7f21e1 HEAD`)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/ab.sh
ab_prepare examples/engine_bench -p replay --example engine_bench
echo "bench-engine-ab${NOOP:+ (NOOP=$NOOP)}: $ta vs $tb, $rounds rounds of $n events at $rate/s; $(uptime)"
if [ "${NOOP:-0}" = 1 ]; then
  run=(env PROVIDER=noop SPEED=100 taskset -c 0)
else
  run=(env VALIDITY=start.p99=100us,start.p99.9=1ms)
fi
for r in $(seq "$rounds"); do
  for tag in "$ta" "$tb"; do
    rm -rf "$work/run"
    line=$("${run[@]}" "$work/$tag/engine_bench" "$work/$tag/bench.cnsbin" "$work/run")
    echo "$tag round $r: $line"
    echo "$tag $line" >>"$work/rows"
  done
done
python3 - "$work/rows" "$ta" "$tb" <<'PY'
import os, re, sys
rows = [l.split(" ", 1) for l in open(sys.argv[1]) if l.strip()]
for tag in sys.argv[2:]:
    lines = [l for t, l in rows if t == tag]
    if os.environ.get("NOOP") == "1":
        rate = sorted(float(re.search(r"\((\d+)/s completed\)", l).group(1)) for l in lines)
        print(f"{tag}: {len(lines)} rounds, noop on one core: {rate[0] / 1e3:.0f}–{rate[-1] / 1e3:.0f} k "
              f"events/s completed (one core's time per event {1e6 / rate[-1]:.2f}–{1e6 / rate[0]:.2f} µs)")
        continue
    st = [re.search(r"start lateness p50 ([\d.]+) µs p99 ([\d.]+) p99\.9 ([\d.]+)", l) for l in lines]
    p99 = sorted(float(m.group(2)) for m in st)
    p999 = sorted(float(m.group(3)) for m in st)
    met = sum(float(m.group(2)) <= 100 and float(m.group(3)) <= 1000 for m in st)
    print(f"{tag}: {len(lines)} rounds: start lateness p99 {p99[0]:.1f}–{p99[-1]:.1f} µs, "
          f"p99.9 {p999[0]:.1f}–{p999[-1]:.1f} µs; targets met in {met} of {len(lines)}")
PY
