#!/usr/bin/env python3
"""A stand-in for a stopped vCPU: holds one CPU at SCHED_FIFO 99 (above the timing lanes)
for MS milliseconds every PERIOD seconds, for SECONDS, so that nothing else runs there
meanwhile. Run beside a replay to see what one stopped CPU costs the engine: with two
lanes, only the events its lane had claimed should be late (needs root).

Usage: scripts/cpu-stop.py CPU SECONDS [MS] [PERIOD]   (default 20 ms every 1 s)
"""
import os
import sys
import time


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cpu, secs = int(sys.argv[1]), float(sys.argv[2])
    hold = float(sys.argv[3]) / 1000 if len(sys.argv) > 3 else 0.020
    period = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(99))
    end = time.monotonic() + secs
    while time.monotonic() < end:
        t = time.perf_counter()
        while time.perf_counter() - t < hold:
            pass
        time.sleep(period)


if __name__ == "__main__":
    main()
