#!/usr/bin/env python3
"""How often a run passes capacity's stationarity check (crates/analyze/src/point.rs,
`backlog`) at a load rho of an M/M/4 queue: the simulation behind its 0.5 sigma threshold.

A run: N Poisson arrivals at rate rho * 4 / mean_service, FCFS on 4 servers with exponential
service. Growth of (arrivals - completions) over [I10, I90] of the sorted intended instants
must stay within SIGMAS * sqrt(arrivals + completions in that window), as in point.rs.

    scripts/sim-backlog-threshold.py [RUNS] [N] [SEED]     (defaults 200 10000 1)
"""
import bisect
import heapq
import math
import random
import sys

SERVERS, SIGMAS = 4, 0.5


def run(rng, rho, n):
    lam = rho * SERVERS  # mean service 1
    t, free = 0.0, [0.0] * SERVERS
    arrivals, completions = [], []
    for _ in range(n):
        t += rng.expovariate(lam)
        start = max(t, heapq.heappop(free))
        done = start + rng.expovariate(1.0)
        heapq.heappush(free, done)
        arrivals.append(t)
        completions.append(done)
    completions.sort()
    t1, t2 = arrivals[n // 10], arrivals[n - 1 - n // 10]
    upto = lambda v, x: bisect.bisect_right(v, x)
    a1, a2 = upto(arrivals, t1), upto(arrivals, t2)
    c1, c2 = upto(completions, t1), upto(completions, t2)
    growth = (a2 - c2) - (a1 - c1)
    return growth <= SIGMAS * math.sqrt((a2 - a1) + (c2 - c1))


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    print(f"M/M/{SERVERS}, {n} arrivals, {runs} runs per load, threshold {SIGMAS} sigma")
    for rho in (0.9, 0.97, 1.0, 1.02, 1.03):
        passed = sum(run(rng, rho, n) for _ in range(runs))
        print(f"rho {rho:4.2f}: {100 * passed / runs:5.1f} % pass")


if __name__ == "__main__":
    main()
