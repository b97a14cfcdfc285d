#!/usr/bin/env bash
# `scripts/bench-replay.sh` at two revisions side by side, on one machine, rounds interleaved
# (A, B, A, B, …) so the machine's drift hits both alike: each revision's release CLI replays
# its own `gen_trace` of EVENTS events at RATE/s with `cnsreplay run --provider sim
# --sim-latency default=exponential:200us --validity start.p99=100us,start.p99.9=1ms` (the
# command both revisions' bench-replay.sh run). Where scripts/bench-engine-ab.sh times the
# engine alone (its `engine_bench` example), this times what a user runs: the CLI with its
# sink, probes and progress. Prints per run the start lateness, its parts (dispatch lateness,
# pickup), how busy the runtime's workers were and the process's CPU per event (user + system
# of the process over the events dispatched: less sensitive to this host's noise than the
# tail), and the completion side: the sim's `io` service time as measured (p50, p99; the
# drawn service is exponential, mean 200 µs: p50 139 µs, p99 921 µs, so the excess is the
# engine's delay in seeing completions) and the completion probe's p99; per revision the
# ranges over the rounds and the rounds that met the targets (p99 ≤ 100 µs, p99.9 ≤ 1 ms).
#
# Usage: scripts/bench-replay-ab.sh REV_A REV_B [ROUNDS] [EVENTS] [RATE]
#        (default 5 rounds of 1000000 events at 100000/s; e.g. `caf2a3c HEAD`)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/ab.sh
. scripts/lib/sim-bench.sh
ab_prepare cnsreplay -p cnsreplay
cpu_of() { # FILE CMD...: runs CMD (its output dropped, its exit code ignored), writes its user and system CPU seconds to FILE
  python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write(f"{r.ru_utime} {r.ru_stime}")' "$@"
}
echo "bench-replay-ab: $ta vs $tb, $rounds rounds of $n events at $rate/s; $(uptime)"
for r in $(seq "$rounds"); do
  for tag in "$ta" "$tb"; do
    rm -rf "$work/run"
    cpu_of "$work/cpu" "$work/$tag/cnsreplay" -q run "$work/$tag/bench.cnsbin" \
      --provider sim -o "$work/run" "${SIM_BENCH_ARGS[@]}"
    python3 - "$work/run/summary.json" "$tag" "$r" "$work/cpu" <<'PY' | tee -a "$work/rows"
import json, sys
s = json.load(open(sys.argv[1]))
# The process's CPU (user + system, the 1 s floor probe and setup included) per event.
cpu = sum(float(x) for x in open(sys.argv[4]).read().split()[-2:])
st, l, p = s["start_lateness"], s["lateness"], s["pickup"]
# An older revision's summary may lack a block (d7f21e1 has no completion probe): 0 then.
sv, cl = s["ops"]["io"]["service"], s.get("completion_lateness") or {"p99": 0}
print(f"{sys.argv[2]} round {sys.argv[3]}: start p99 {st['p99'] / 1e3:.1f} p99.9 {st['p999'] / 1e3:.1f} µs; "
      f"dispatch lateness p99 {l['p99'] / 1e3:.1f} µs; pickup p99 {p['p99'] / 1e3:.1f} µs; "
      f"workers busy {100 * (s.get('workers_busy') or 0):.1f} %; "
      f"CPU {1e6 * cpu / max(s['dispatched'], 1):.2f} µs per event; "
      f"io service p50 {sv['p50'] / 1e3:.0f} p99 {sv['p99'] / 1e3:.0f} µs; "
      f"completion p99 {cl['p99'] / 1e3:.0f} µs; {s['validity']['verdict']}")
PY
  done
done
python3 - "$work/rows" "$ta" "$tb" <<'PY'
import re, sys
rows = [l for l in open(sys.argv[1]) if l.strip()]
for tag in sys.argv[2:]:
    m = [re.search(r"start p99 ([\d.]+) p99\.9 ([\d.]+) µs.*pickup p99 ([\d.]+) µs; workers busy ([\d.]+) %; CPU ([\d.]+) µs per event; io service p50 ([\d.]+) p99 ([\d.]+) µs; completion p99 ([\d.]+)", l)
         for l in rows if l.startswith(tag + " ")]
    col = lambda i: sorted(float(x.group(i)) for x in m)
    p99, p999, pick, busy, cpu = col(1), col(2), col(3), col(4), col(5)
    sv50, sv99, comp = col(6), col(7), col(8)
    met = sum(float(x.group(1)) <= 100 and float(x.group(2)) <= 1000 for x in m)
    print(f"{tag}: {len(m)} rounds: start lateness p99 {p99[0]:.1f}–{p99[-1]:.1f} µs, p99.9 "
          f"{p999[0]:.1f}–{p999[-1]:.1f} µs, pickup p99 {pick[0]:.1f}–{pick[-1]:.1f} µs, workers "
          f"busy {busy[0]:.1f}–{busy[-1]:.1f} %, CPU {cpu[0]:.2f}–{cpu[-1]:.2f} µs per event; "
          f"io service p50 {sv50[0]:.0f}–{sv50[-1]:.0f} µs, p99 {sv99[0]:.0f}–{sv99[-1]:.0f} µs; "
          f"completion probe p99 {comp[0]:.0f}–{comp[-1]:.0f} µs; targets met in {met} of {len(m)}")
PY
