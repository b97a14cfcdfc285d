#!/usr/bin/env bash
# iogen's issue lateness in the README's main job (traces/experiment2-short.yaml on the local
# provider: five open-loop io_phases of 400 IOPS on five volumes beside the engine), with the
# spin ration (`--local-io-spinners`, default one fewer than the CPUs) and without it
# (`--local-io-spinners all`: every worker spins before its deadlines, as before the ration),
# interleaved round by round in one binary so the machine's drift hits both alike. Prints per
# run the issue lateness p99 and p99.9 (the verdict's io_phase checks, over every I/O), the I/O
# p99.9 without a snapshot in flight with its tool bound, and the range over the rounds per
# setting. Needs root (loop devices).
#
# Usage: scripts/bench-phase-lateness.sh [ROUNDS]   (default 5; env CNSREPLAY=path/to/cnsreplay,
#        A="--local-io-spinners all" B="" to compare other flags)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
target=${CARGO_TARGET_DIR:-target}
bin=${CNSREPLAY:-$target/release/cnsreplay}
if [[ -z ${CNSREPLAY:-} ]]; then
  cargo build --release -q -p cnsreplay
fi
A=${A---local-io-spinners all}
B=${B-}
work=$(mktemp -d /tmp/bench-phase-lateness.XXXX)
trap 'rm -rf "$work"' EXIT
echo "bench-phase-lateness: $rounds rounds; A: ${A:-(defaults)}; B: ${B:-(defaults)}; $(uptime)"
one() { # setting round flags...
  local name=$1 round=$2 run=$work/$1-$2
  shift 2
  # shellcheck disable=SC2068 # the flags are words
  "$bin" -q run traces/experiment2-short.yaml --provider local -o "$run" $@ >/dev/null 2>"$run.err" || true
  python3 - "$run/summary.json" "$name" "$round" <<'PY' | tee -a "$work/rows"
import json, sys
s = json.load(open(sys.argv[1]))
checks = {c["check"]: c for c in s["validity"]["checks"]}
late = lambda k: checks[k]["value"] / 1e6 if k in checks else float("nan")
io = s["io"]["without_snapshot"]
bound = (io.get("tool_ns") or {}).get("p999", float("nan"))
print(f"{sys.argv[2]} {sys.argv[3]} {late('io_phase.lateness.p99'):.3f} "
      f"{late('io_phase.lateness.p99.9'):.3f} {io['p999'] / 1e6:.2f} {bound / 1e6:.2f} "
      f"{s['validity']['verdict']}")
PY
}
for r in $(seq "$rounds"); do
  one A "$r" $A
  one B "$r" $B
done
python3 - "$work/rows" "$A" "$B" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
print("setting round | issue lateness p99 ms | p99.9 ms | I/O p99.9 w/o snapshot ms | its tool bound ms | verdict")
for name, flags in (("A", sys.argv[2]), ("B", sys.argv[3])):
    rs = [r for r in rows if r[0] == name]
    rng = lambda i: f"{min(float(r[i]) for r in rs):.3f}–{max(float(r[i]) for r in rs):.3f}"
    print(f"{name} ({flags or 'defaults'}), {len(rs)} rounds: issue lateness p99 {rng(2)} ms, "
          f"p99.9 {rng(3)} ms; I/O p99.9 without a snapshot {rng(4)} ms, its bound {rng(5)} ms")
PY
