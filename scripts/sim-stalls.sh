#!/usr/bin/env bash
# Counts the sim runs that stood still: runs the release CLI on the sim at a high event rate
# (1000000 events at 100000/s, exponential 200 µs service, the command of
# scripts/bench-replay.sh) ROUNDS times per binary, the binaries' rounds interleaved (A, B,
# A, B, …), and prints per run the start lateness p99, p99.9 and max, when the latest event
# was due (ms into the run) and how late it was dispatched, and the hypervisor's steal over
# the run (the summary's notice, /proc/stat). A run whose latest event was dispatched more
# than 100 ms late counts as a stall; the last line gives per binary the stalls and the
# ranges. Tells a process-wide stall (nothing dispatched, nothing completed) apart from the
# host's: a whole-VM stop shows as steal of the same size.
#
# Usage: scripts/sim-stalls.sh ROUNDS BIN [BIN ...]
#        env GEN_TRACE: gen_trace already built (else built here, release)
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 ROUNDS BIN [BIN ...]" >&2; exit 2; }
rounds=$1
shift
cd "$(dirname "$0")/.."
export CNSREPLAY=$1
. scripts/lib/sim-bench.sh
sim_bench_prepare 1000000 100000
for r in $(seq "$rounds"); do
  for bin in "$@"; do
    rm -rf "$dir/run"
    "$bin" -q run "$dir/bench.cnsbin" --provider sim -o "$dir/run" "${SIM_BENCH_ARGS[@]}" \
      >/dev/null 2>&1 || true
    python3 - "$dir/run" "$bin" "$r" <<'PY' | tee -a "$dir/rows"
import json, re, sys
sys.path.insert(0, "scripts/lib")
from events import started
run, bin_, r = sys.argv[1:]
s = json.load(open(f"{run}/summary.json"))
st = s["start_lateness"]
worst = max(((e["start_lateness"], e["intended"], e["dispatched"] - e["intended"])
             for e in started(run)), key=lambda w: w[0], default=(-1, 0, 0))
steal = 0
for n in s.get("notices", []):
    m = re.search(r"took (\d+) ms of CPU from this machine", n)
    if m:
        steal = int(m.group(1))
print(f"{bin_} round {r}: start p99 {st['p99'] / 1e3:.1f} p99.9 {st['p999'] / 1e3:.1f} max "
      f"{st['max'] / 1e3:.1f} µs; latest due at {worst[1] / 1e6:.1f} ms, dispatched "
      f"{worst[2] / 1e3:.1f} µs late; steal {steal} ms")
PY
  done
done
python3 - "$dir/rows" "$@" <<'PY'
import re, sys
rows = [l for l in open(sys.argv[1]) if l.strip()]
for b in sys.argv[2:]:
    m = [re.search(r"p99 ([\d.]+) p99\.9 ([\d.]+) max ([\d.]+) µs; .* dispatched ([\d.]+) µs late; steal (\d+)", l)
         for l in rows if l.startswith(b + " ")]
    col = lambda i: sorted(float(x.group(i)) for x in m)
    stalls = sum(float(x.group(4)) > 100_000 for x in m)
    p999, mx, steal = col(2), col(3), col(5)
    print(f"{b}: {len(m)} runs, {stalls} stood still (latest event dispatched > 100 ms late); "
          f"p99.9 {p999[0]:.1f}–{p999[-1]:.1f} µs, max {mx[0] / 1e3:.1f}–{mx[-1] / 1e3:.1f} ms, "
          f"steal {steal[0]:.0f}–{steal[-1]:.0f} ms")
PY
