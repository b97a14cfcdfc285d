# Sourced by the engine benchmarks: the host's own wake-up latency *while* a round runs,
# measured beside it by cyclictest (rt-tests, the standard tool for this; installed here with
# apt-get when missing). One SCHED_FIFO thread per CPU at priority 90 (above the timing lanes'
# 10, so our threads never delay it), pinned, all waking on one 1 ms grid, memory locked: what
# it sees late is the kernel's and the hypervisor's (a vCPU stopped, a timer interrupt
# delivered late), not the engine's. It samples time uniformly, as a dense trace's events do,
# so its percentiles are comparable with the events' start lateness at the same percentiles.
# Two figures: per CPU (every wake-up), and *either CPU* (per 1 ms tick the earlier of the
# CPUs' wake-ups): the floor of an engine with a timing lane on each CPU, which dispatches
# while one vCPU is stopped. A round whose either-CPU p99 > 100 µs or p99.9 > 1 ms ran on a
# host that could not wake a task within the engine's targets. Its cost: 1000 wake-ups per
# second per CPU (a few % of one CPU).
#
#   host_floor_start FILE   starts it in the background, its samples to FILE
#   host_floor_stop         stops it (SIGINT)
#   host_floor_read FILE    prints, in ns, "p50 p99 p99.9 max wake-ups" per CPU, then the same
#                           for either CPU
host_floor_pid=
host_floor_start() {
  command -v cyclictest >/dev/null ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rt-tests >/dev/null
  cyclictest -m -q -p 90 -i 1000 -d 0 -t "$(nproc)" -a -v >"$1" 2>/dev/null &
  host_floor_pid=$!
  # Its threads up and locked before the round starts.
  sleep 0.3
}
host_floor_stop() {
  [ -n "$host_floor_pid" ] || return 0
  kill -INT "$host_floor_pid" 2>/dev/null || true
  wait "$host_floor_pid" 2>/dev/null || true
  host_floor_pid=
}
host_floor_read() {
  python3 - "$1" <<'PY'
import sys
# Verbose lines: "<thread>: <cycle>: <latency µs>".
per_cpu, ticks = [], {}
for line in open(sys.argv[1]):
    f = line.replace(":", " ").split()
    if len(f) != 3 or not all(x.isdigit() for x in f):
        continue
    t, cycle, us = (int(x) for x in f)
    per_cpu.append(us)
    ticks.setdefault(cycle, {})[t] = us
threads = max((len(v) for v in ticks.values()), default=0)
# Only ticks every thread reached (the last may be cut by the stop).
either = [min(v.values()) for v in ticks.values() if len(v) == threads]
if not either:
    sys.exit(f"{sys.argv[1]}: cyclictest recorded no samples")
def stats(xs):
    xs = sorted(xs)
    q = lambda p: xs[min(len(xs) - 1, int(p * len(xs)))] * 1000
    return f"{q(0.5)} {q(0.99)} {q(0.999)} {xs[-1] * 1000} {len(xs)}"
print(stats(per_cpu), stats(either))
PY
}
