#!/usr/bin/env python3
"""When a run's latest events were due: reads RUNDIR/events.jsonl (start lateness per event)
and prints the start lateness p99, p99.9 and max of the whole run and of the run after its
first 100 ms, how many of its N latest events (default 1000) were due in the first 100 ms,
and the 100 ms windows holding most of them. Separates a run's start (threads' first
allocations, first wake-ups) from what happens while it runs.

Usage: scripts/latest-events.py RUNDIR [N]
"""
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from events import started  # noqa: E402  (scripts/lib/events.py)

START_NS = 100_000_000


def pct(xs, p):
    return xs[min(len(xs) - 1, int(p * len(xs)))] / 1e3


def main():
    run, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    events = [(r["start_lateness"], r["intended"]) for r in started(run)]
    if not events:
        sys.exit(f"{run}/events.jsonl: no event with a start lateness")
    every = sorted(l for l, _ in events)
    after = sorted(l for l, at in events if at >= START_NS)
    latest = sorted(events, reverse=True)[:n]
    windows = Counter(at // START_NS for _, at in latest)
    print(f"start lateness p99 {pct(every, 0.99):.1f} µs, p99.9 {pct(every, 0.999):.1f} µs, "
          f"max {every[-1] / 1e3:.1f} µs ({len(every)} events)")
    if after:
        print(f"after the first 100 ms: p99 {pct(after, 0.99):.1f} µs, p99.9 "
              f"{pct(after, 0.999):.1f} µs, max {after[-1] / 1e3:.1f} µs ({len(after)} events)")
    print(f"of the {len(latest)} latest, {windows.get(0, 0)} due in the first 100 ms; most in "
          + ", ".join(f"{w * 100}–{w * 100 + 100} ms ({c})" for w, c in windows.most_common(4)))


if __name__ == "__main__":
    main()
