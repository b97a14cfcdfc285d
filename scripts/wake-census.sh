#!/usr/bin/env bash
# Who wakes how often: runs the release CLI on the sim at a high event rate (the command of
# scripts/bench-replay.sh) and prints, per thread name (threads of one name summed), its
# voluntary context switches (went to sleep: each is a later wake-up) and involuntary ones
# (preempted) per second of the run, read from /proc/PID/task/*/status every 0.2 s (each
# thread's last reading, over the seconds from the start to it; the 1 s floor probe before
# the clock is in that span). On this 2-CPU VM a timer wake-up costs 15–29 µs of CPU
# (`manifest.host.wake_cost`), so these rates times that cost show where the engine's CPU per
# event goes.
#
# Usage: scripts/wake-census.sh [EVENTS] [RATE]   (default 1000000 events at 100000/s)
#        env CNSREPLAY, GEN_TRACE: binaries already built (else both are built here, release)
set -euo pipefail
n=${1:-1000000}
rate=${2:-100000}
cd "$(dirname "$0")/.."
. scripts/lib/sim-bench.sh
sim_bench_prepare "$n" "$rate" >/dev/null
"$CNSREPLAY" -q run "$dir/bench.cnsbin" --provider sim -o "$dir/run" "${SIM_BENCH_ARGS[@]}" \
  >/dev/null 2>&1 &
pid=$!
python3 - "$pid" <<'PY'
import glob, os, sys, time
# Per thread id: its name, its counts at the last reading that saw it, and when (threads exit
# before the process does, and their counts go with them).
pid, start, tids = sys.argv[1], time.monotonic(), {}
while os.path.exists(f"/proc/{pid}/status"):
    now = time.monotonic() - start
    for task in glob.glob(f"/proc/{pid}/task/*/"):
        try:
            name = open(task + "comm").read().strip()
            st = dict(l.split(":", 1) for l in open(task + "status"))
            tids[task] = (name, int(st["voluntary_ctxt_switches"]),
                          int(st["nonvoluntary_ctxt_switches"]), now)
        except (OSError, KeyError, ValueError):
            continue
    time.sleep(0.2)
if not tids:
    sys.exit("wake-census: the run ended before a reading")
names = {}
for name, vol, inv, t in tids.values():
    v = names.setdefault(name, [0, 0, 0, 0.0])
    v[0] += 1
    v[1] += vol
    v[2] += inv
    v[3] = max(v[3], t)
print("wake-census: per thread name: threads, seconds seen (from the start), sleeps/s, preemptions/s")
for name, (n, vol, inv, secs) in sorted(names.items(), key=lambda kv: -kv[1][1]):
    secs = max(secs, 0.2)
    print(f"  {name:<24} {n:>2}  {secs:>5.1f}  {vol / secs:>9.0f}  {inv / secs:>9.0f}")
PY
wait "$pid" || echo "wake-census: the run exited with $?" >&2
