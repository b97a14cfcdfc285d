#!/usr/bin/env python3
"""Whose are a sim round's late events: the host's or the engine's? Reads one round of
scripts/miss-attribution.sh: RUNDIR (events.jsonl, manifest.json), the `perf script` text of
the scheduler switches recorded across it (with cyclictest, SCHED_FIFO 90 above the lanes,
waking every 1 ms on each CPU beside it), and OFFSET, the wall clock minus CLOCK_MONOTONIC.

A running CPU has a record at least every 0.4 ms (the 4 kHz clock samples; without them,
every 1 ms: cyclictest preempts whatever runs there), so a gap (a, b) longer than the margin
M (0.5 ms; 1 ms without clock samples) between two records of a CPU means that CPU ran
nothing from a + M to b: the hypervisor had stopped it (or it ran with interrupts off, or
stood in the host on a fault). This catches a stop while a thread sits on the CPU too, which
the switches alone would show as that thread running.
Where both CPUs were so stopped, no thread of the process could run, whatever the engine
did. A late event (start lateness L above a target T) is the host's when both CPUs were
stopped for at least L − T of its wait [intended, started], or when its wait overlaps an
episode of the host's: a group of events more than 1 ms late (due < 2 ms apart) in which both
CPUs stood still for at least half the group's worst lateness (the events due during the
stop, and the backlog the lanes work off after it). Otherwise it is the engine's.

Prints a line per round (its start lateness p99 and p99.9, the events above 1 ms and above
100 µs late, and how many of each were the host's) and, with --episodes, each group of events more than 1 ms
late: when, how many, how long both CPUs stood still, and what each timing lane did meanwhile
(its longest off-CPU stretch with the kernel frames it slept in, or its longest run).
The last field of the round line says whether the round would have met the targets (p99 ≤
100 µs, p99.9 ≤ 1 ms) without the host's events: `host` (it would), `engine` (it would not)
or `met`.

Usage: scripts/miss-attribution.py RUNDIR PERF_SCRIPT_TXT OFFSET [--episodes]
"""
import bisect
from collections import Counter
import datetime
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from events import started  # noqa: E402  (scripts/lib/events.py)

LINE = re.compile(r"^\s*(\S.*?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s+(.*)$")
SWITCH = re.compile(r"prev_comm=(.+?) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> "
                    r"next_comm=(.+?) next_pid=(\d+)")
MARGIN_NS, MARGIN_NO_SAMPLES_NS = 500_000, 1_000_000
# The clock samples' rate (scripts/miss-attribution.sh).
SAMPLE_HZ = 4000


def read_perf(path):
    """Per CPU the times (ns) of its records (switches and clock samples), the switches (time, cpu, prev tid, state, next tid,
    the first kernel frames of the task switched out), the clock samples (time, cpu, comm,
    frames) and the lanes' thread ids."""
    per_cpu, switches, samples, lanes = {}, [], [], set()
    cur = None
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                cur = None
                t, cpu = round(float(m.group(4)) * 1e9), int(m.group(3))
                per_cpu.setdefault(cpu, []).append(t)
                if m.group(5).startswith("cpu-clock"):
                    cur = [t, cpu, m.group(1).strip(), []]
                    samples.append(cur)
                    continue
                if m.group(5) != "sched:sched_switch":
                    continue
                s = SWITCH.search(m.group(6))
                if not s:
                    continue
                cur = [t, cpu, int(s.group(2)), s.group(3), int(s.group(5)), []]
                switches.append(cur)
                for name, tid in ((s.group(1), s.group(2)), (s.group(4), s.group(5))):
                    if name.startswith("cnsreplay-timin"):
                        lanes.add(int(tid))
            elif cur is not None and line.strip():
                parts = line.strip().split(None, 1)
                sym = parts[1].rsplit(" (", 1)[0].split("+")[0] if len(parts) > 1 else ""
                # C++ names without their template arguments.
                sym = sym.split("<", 1)[0]
                if len(cur[-1]) < 8 and sym and not sym.startswith(
                        ("__schedule", "schedule", "__traceiter", "perf_", "__perf",
                         "hrtimer", "__hrtimer", "__sysvec", "sysvec", "asm_sysvec", "cpu_clock")):
                    cur[-1].append(sym)
    return per_cpu, switches, samples, sorted(lanes)


def stopped(per_cpu, margin):
    """Per CPU the intervals (ns) in which it ran nothing: (a + margin, b) for each gap longer
    than `margin` between its records."""
    out = {}
    for cpu, ts in per_cpu.items():
        ts.sort()
        out[cpu] = [(a + margin, b) for a, b in zip(ts, ts[1:]) if b - a > margin]
    return out


def intersect(a, b):
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def covered(intervals, starts, lo, hi):
    """Time of sorted, disjoint `intervals` inside [lo, hi]."""
    k = max(bisect.bisect_right(starts, lo) - 1, 0)
    total = 0
    while k < len(intervals) and intervals[k][0] < hi:
        a, b = intervals[k]
        total += max(0, min(b, hi) - max(a, lo))
        k += 1
    return total


def lane_story(switches, lane, lo, hi):
    """What a lane did in [lo, hi]: its longest off-CPU stretch (state, frames) and longest run."""
    off, run, out_at, in_at = (0, "", []), 0, None, None
    for t, _cpu, prev, state, nxt, frames in switches:
        if prev == lane:
            if in_at is not None and t > lo:
                run = max(run, min(t, hi) - max(in_at, lo))
            out_at, in_at = (t, state, frames), None
        elif nxt == lane:
            if out_at is not None and t > lo and out_at[0] < hi:
                d = min(t, hi) - max(out_at[0], lo)
                if d > off[0]:
                    off = (d, out_at[1], out_at[2])
            in_at, out_at = t, None
        if t > hi:
            break
    frames = " < ".join(off[2][:4]) or "-"
    return f"off CPU {off[0] / 1e6:.2f} ms ({off[1] or '-'} in {frames}), longest run {run / 1e6:.2f} ms"


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    run, txt, offset = sys.argv[1], sys.argv[2], float(sys.argv[3])
    episodes = "--episodes" in sys.argv
    manifest = json.load(open(f"{run}/manifest.json"))
    origin_wall = datetime.datetime.fromisoformat(manifest["origin"].replace("Z", "+00:00"))
    origin = round((origin_wall.timestamp() - offset) * 1e9)
    per_cpu, switches, samples, lanes = read_perf(txt)
    st = stopped(per_cpu, MARGIN_NS if samples else MARGIN_NO_SAMPLES_NS)
    cpus = sorted(st)
    both = st[cpus[0]] if cpus else []
    for c in cpus[1:]:
        both = intersect(both, st[c])
    starts = [a for a, _ in both]
    events, late = 0, []
    for e in started(run):
        events += 1
        sl = e["start_lateness"]
        if sl > 100_000:
            lo = origin + e["intended"]
            late.append((e["intended"], sl, covered(both, starts, lo, lo + sl)))
    late.sort()
    ms = [x for x in late if x[1] > 1_000_000]
    # Episodes: events more than 1 ms late, due less than 2 ms apart. One is the host's when
    # both CPUs stood still for at least half its worst lateness: what the events due during
    # a stop owe to it, and the backlog the lanes then work off (a stop of D ms leaves
    # D × 100 events due at once), which a host that had not stopped would not have left.
    groups = []
    for x in ms:
        if groups and x[0] - groups[-1][-1][0] < 2_000_000:
            groups[-1].append(x)
        else:
            groups.append([x])
    spans = []
    for g in groups:
        lo = origin + g[0][0]
        hi = origin + max(i + sl for i, sl, _ in g)
        worst = max(sl for _, sl, _ in g)
        stood = covered(both, starts, lo, hi)
        spans.append((lo, hi, worst, stood, 2 * stood >= worst, g))
    host_spans = [(lo, hi) for lo, hi, _, _, h, _ in spans if h]

    def hosts(x, target):
        lo = origin + x[0]
        return x[2] >= x[1] - target or any(a < lo + x[1] and lo < b for a, b in host_spans)

    host_ms = sum(1 for x in ms if hosts(x, 1_000_000))
    host_us = sum(1 for x in late if hosts(x, 100_000))
    p999_ok = len(ms) <= events // 1000
    p99_ok = len(late) <= events // 100
    without_host = (len(ms) - host_ms <= events // 1000) and (len(late) - host_us <= events // 100)
    verdict = "met" if p999_ok and p99_ok else ("host" if without_host else "engine")
    stood = sum(b - a for a, b in both)
    sl = json.load(open(f"{run}/summary.json"))["start_lateness"]
    print(f"{run}: start lateness p99 {sl['p99'] / 1e3:.1f} µs, p99.9 {sl['p999'] / 1e3:.1f} µs; "
          f"{events} events; > 1 ms late {len(ms)} (host's {host_ms}), > 100 µs late "
          f"{len(late)} (host's {host_us}); both CPUs stopped {len(both)} times, {stood / 1e6:.1f} ms "
          f"in all; {verdict}")
    if not episodes:
        return
    for lo, hi, worst, stood, host, g in spans:
        print(f"  at {g[0][0] / 1e6:.1f} ms: {len(g)} events > 1 ms late (worst {worst / 1e6:.2f} "
              f"ms); both CPUs stopped {stood / 1e6:.2f} of {(hi - lo) / 1e6:.2f} ms "
              f"({'the host' if host else 'the engine'}); per CPU "
              + ", ".join(f"{c}: {covered(st[c], [a for a, _ in st[c]], lo, hi) / 1e6:.2f}"
                          for c in cpus))
        for lane in lanes:
            print(f"    lane {lane}: {lane_story(switches, lane, lo, hi)}")
        for c in cpus:
            seen = Counter(f"{comm} in {' < '.join(fr[:3]) or '-'}"
                           for t, cpu, comm, fr in samples if cpu == c and lo <= t <= hi)
            top = "; ".join(f"{n}× {what}" for what, n in seen.most_common(3)) or "none"
            # A CPU that runs all the time has one every 0.25 ms: fewer means it stood still
            # (in stops shorter than the margin too), or sat idle.
            print(f"    CPU {c}: {sum(seen.values())} clock samples of {(hi - lo) * SAMPLE_HZ // 10**9} "
                  f"a running CPU would have: {top}")


if __name__ == "__main__":
    main()
