#!/usr/bin/env bash
# What the timing lanes block on: runs the release CLI on the sim at a high event rate (the
# command of scripts/bench-replay.sh). From 3 s into the run, for SECS seconds, `perf trace -s`
# gives each lane's futex calls with their total and longest time (waits and wakes together;
# perf trace slows the run). For the next SECS seconds perf records every futex wait of the
# lanes (a lock held by another thread: FUTEX_WAIT, op 128, glibc's locks; FUTEX_WAIT_BITSET,
# op 137, Rust std's mutexes and condvars, which tokio uses) with its call chain (DWARF
# unwinding); the script prints the waits per second per lane and the call chains that made
# them, grouped by the first frames above the wait. A lane that waits cannot dispatch: when the
# lock's holder is a thread preempted on the other CPU (or on a vCPU the hypervisor stopped),
# the lane waits as long as it.
#
# Usage: scripts/lane-waits.sh [SECS]   (default 2; 1000000 events at 100000/s)
#        env CNSREPLAY, GEN_TRACE: binaries already built (else both are built here, release)
set -euo pipefail
secs=${1:-2}
cd "$(dirname "$0")/.."
command -v perf >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null
. scripts/lib/sim-bench.sh
sim_bench_prepare 1000000 100000 >/dev/null
"$CNSREPLAY" -q run "$dir/bench.cnsbin" --provider sim -o "$dir/run" "${SIM_BENCH_ARGS[@]}" \
  >/dev/null 2>&1 &
pid=$!
sleep 3
lanes=$(for t in /proc/$pid/task/*; do
  if grep -q '^cnsreplay-timin' "$t/comm"; then basename "$t"; fi
done | paste -sd,)
[ -n "$lanes" ] || { echo "lane-waits: no timing lane threads in process $pid" >&2; exit 1; }
timeout -s INT "$secs" perf trace -s -t "$lanes" -o "$dir/trace.txt" >/dev/null 2>&1 || true
timeout -s INT "$secs" perf record -q -e syscalls:sys_enter_futex --filter 'op == 128 || op == 137' \
  -t "$lanes" --call-graph dwarf,8192 -o "$dir/waits.data" >/dev/null 2>&1 || true
wait "$pid" || true
echo "futex calls of the lanes over ${secs} s (perf trace -s; msec):"
grep -E '^ cnsreplay-timin|^ +futex ' "$dir/trace.txt" | sed 's/^/  /'
perf script -i "$dir/waits.data" -F tid,ip,sym 2>/dev/null | python3 -c '
import collections, sys
secs = float(sys.argv[1])
per_tid, chains, cur, tid = collections.Counter(), collections.Counter(), [], None
def flush():
    if tid is None:
        return
    per_tid[tid] += 1
    # The frames above the lock wait, up to the first of ours (replay::, provider_sim::).
    frames = [f for f in cur if not f.startswith(("__GI___lll_lock_wait", "syscall", "std::sys::pal::unix::futex::futex_wait", "std::sys::sync::"))]
    top = []
    for f in frames:
        top.append(f.split("<")[0])
        if f.startswith(("replay::", "provider_sim::")) or len(top) == 6:
            break
    chains[" <- ".join(top)] += 1
for line in sys.stdin:
    if not line.strip():
        continue
    f = line.split()
    if not line.startswith((" ", "\t")):
        flush()
        tid, cur = f[0], []
    elif len(f) >= 2:
        cur.append(f[1].split("+0x")[0])
flush()
total = sum(per_tid.values())
print(f"lock waits (FUTEX_WAIT) of the lanes: {total} in {secs:g} s"
      + (", per lane: " + ", ".join(f"{n / secs:.0f}/s" for n in per_tid.values()) if total else ""))
for chain, n in chains.most_common(10):
    print(f"  {100 * n / max(total, 1):5.1f} %  {chain}")
' "$secs"
