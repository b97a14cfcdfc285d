#!/usr/bin/env bash
# Checks the tool's error bound (docs/replay.md, The tool's error bound) against engine delays
# of known size: for each DELAY, RUNS seeds, each replayed twice on the sim with the same seed
# (so every event draws the same service time): clean, and with CNSREPLAY_TEST_ENGINE_DELAY
# (every dispatched batch held up DELAY). The true error of a percentile is the delayed run's
# figure less the clean run's (the clean run carries its own small tool error, so this is
# the error the delay added); a run holds when every reported percentile's bound (`tool_ns`
# of the delayed run: attach response p50, p90, p99, p99.9, max) is at least that, within
# the histograms' 0.1 % resolution. Prints per delay the runs that held, and how tight the
# bounds were (bound ÷ true error, the median over runs, per percentile).
#
# The trace: EVENTS attaches at RATE/s, each LATENCY (a sim distribution) long.
#
# Usage: scripts/bound-check.sh [WORKDIR]   (env: RUNS=20 DELAYS="1ms 5ms 20ms" EVENTS=2000
#        RATE=500 LATENCY=lognormal:20ms:0.5 CNSREPLAY=path/to/cnsreplay)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-20}
DELAYS=${DELAYS:-1ms 5ms 20ms}
EVENTS=${EVENTS:-2000}
RATE=${RATE:-500}
LATENCY=${LATENCY:-lognormal:20ms:0.5}
target=${CARGO_TARGET_DIR:-target}
bin=${CNSREPLAY:-$target/release/cnsreplay}
if [[ -z ${CNSREPLAY:-} ]]; then
  cargo build --release -q -p cnsreplay
fi
work=${1:-$(mktemp -d /tmp/bound-check.XXXX)}
mkdir -p "$work"
trace=$work/trace.jsonl
. scripts/lib/attach-trace.sh
attach_trace "$EVENTS" "$RATE" bound-check >"$trace"

run() { # name seed [delay]
  local out=$work/$1
  rm -rf "$out"
  CNSREPLAY_TEST_ENGINE_DELAY=${3:-} "$bin" -q run "$trace" --provider sim \
    --sim-latency "attach=$LATENCY" --seed "$2" -o "$out" --json >"$out.json" 2>"$out.log" || {
    echo "bound-check: run $1 failed: $(tail -3 "$out.log")" >&2
    exit 2
  }
}

echo "bound-check: $EVENTS attaches at $RATE/s, attach=$LATENCY, $RUNS seeds per delay; $(uptime)"
for delay in $DELAYS; do
  for i in $(seq 1 "$RUNS"); do
    seed=$((1000 + i))
    run "clean-$delay-$i" "$seed"
    run "late-$delay-$i" "$seed" "$delay"
  done
  python3 - "$work" "$delay" "$RUNS" <<'PY'
import json, statistics, sys
work, delay, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
keys = [("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("p999", "p99.9"), ("max", "max")]
held, tight, missed = 0, {k: [] for k, _ in keys}, []
for i in range(1, runs + 1):
    clean = json.load(open(f"{work}/clean-{delay}-{i}.json"))["ops"]["attach"]["response"]
    late_s = json.load(open(f"{work}/late-{delay}-{i}.json"))
    late = late_s["ops"]["attach"]["response"]
    bound = late.get("tool_ns")
    if bound is None:
        missed.append(f"run {i}: no bound")
        continue
    ok = True
    for k, name in keys:
        err = late[k] - clean[k]
        if bound[k] < err - 0.001 * late[k]:
            ok = False
            missed.append(f"run {i} {name}: bound {bound[k] / 1e6:.3f} ms < error {err / 1e6:.3f} ms")
        if err > 0:
            tight[k].append(bound[k] / err)
    held += ok
    v = late_s["validity"]
print(f"delay {delay}: every bound ≥ its true error in {held} of {runs} runs; "
      "bound ÷ true error, median over runs: "
      + ", ".join(f"{name} {statistics.median(tight[k]):.2f}" if tight[k] else f"{name} -"
                  for k, name in keys)
      + f"; last verdict {v['verdict']}")
for m in missed:
    print("  missed:", m)
PY
done
