#!/usr/bin/env bash
# Calibrates the run verdict (docs/replay.md, Run validity) on the sim: RUNS runs with an
# engine delay injected through the engine's test hook (CNSREPLAY_TEST_ENGINE_DELAY: every
# dispatched batch held up DELAY) and RUNS clean runs, alternating, each with its own seed,
# with the default limits. Reports how many injected runs were flagged engine-bound
# (sensitivity), how many clean runs were valid (specificity), and per run the measured
# start-lateness and completion-probe p99 against the limit, so a false flag shows which check
# and how far, and the CPU time the hypervisor took from this VM during the run (`steal`).
#
# The trace: EVENTS attaches at RATE/s, each taking LATENCY on the sim (constant): the limits
# scale from that median service time (1 % of it, within [20 µs, 10 ms]).
#
# Usage: scripts/calibrate-validity.sh [WORKDIR]   (env: RUNS=20 EVENTS=1000 RATE=500
#        LATENCY=100ms DELAY=2ms CNSREPLAY=path/to/cnsreplay)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-20}
EVENTS=${EVENTS:-1000}
RATE=${RATE:-500}
LATENCY=${LATENCY:-100ms}
DELAY=${DELAY:-2ms}
target=${CARGO_TARGET_DIR:-target}
bin=${CNSREPLAY:-$target/release/cnsreplay}
if [[ -z ${CNSREPLAY:-} ]]; then
  cargo build --release -q -p cnsreplay
fi
work=${1:-$(mktemp -d /tmp/calibrate-validity.XXXX)}
mkdir -p "$work"
trace=$work/trace.jsonl
. scripts/lib/attach-trace.sh
attach_trace "$EVENTS" "$RATE" calibrate-validity >"$trace"

# CPU time the hypervisor gave to others while this VM's CPUs wanted it (/proc/stat `steal`,
# all CPUs, ms): a machine stall no process of ours can prevent.
steal_ms() { awk -v hz="$(getconf CLK_TCK)" '/^cpu /{print $9 * 1000 / hz}' /proc/stat; }

run() { # name seed [delay]
  local out=$work/$1
  rm -rf "$out"
  local s0
  s0=$(steal_ms)
  CNSREPLAY_TEST_ENGINE_DELAY=${3:-} "$bin" -q run "$trace" --provider sim \
    --sim-latency "attach=constant:$LATENCY" --seed "$2" -o "$out" --json >"$out.json" 2>/dev/null || true
  python3 - "$out.json" "$1" "$(($(steal_ms) - s0))" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
v = s["validity"]
l = v.get("limits", {})
failed = [c["check"] for c in v["checks"] if not c["passed"]]
print(f'{sys.argv[2]:<12} {v["verdict"]:<13} limit p99 {l.get("p99_ns", 0) / 1e6:.3f} ms | '
      f'start p99 {s["start_lateness"]["p99"] / 1e6:.3f} ms p99.9 {s["start_lateness"]["p999"] / 1e6:.3f} ms | '
      f'probe p99 {s["completion_lateness"]["p99"] / 1e6:.3f} ms p99.9 {s["completion_lateness"]["p999"] / 1e6:.3f} ms | '
      f'steal {sys.argv[3]} ms | failed: {",".join(failed) or "-"}')
PY
}

echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $EVENTS attaches at $RATE/s, sim constant $LATENCY, injected delay $DELAY per batch"
for ((i = 0; i < RUNS; i++)); do
  run "injected-$i" "$((i + 1))" "$DELAY"
  run "clean-$i" "$((i + 1))"
done | tee "$work/results.txt"
flagged=$(grep -c '^injected-[0-9]* *engine-bound' "$work/results.txt" || true)
valid=$(grep -c '^clean-[0-9]* *valid ' "$work/results.txt" || true)
echo "sensitivity: $flagged of $RUNS injected runs engine-bound"
echo "specificity: $valid of $RUNS clean runs valid"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
