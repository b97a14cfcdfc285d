#!/usr/bin/env python3
"""How often a run passes capacity's stationarity check (crates/analyze/src/point.rs,
`backlog`) at a load rho of a 4-server queue with exponential service: the simulation behind
its 0.5 sigma threshold.

A run: N arrivals at rate rho * 4 / mean_service, Poisson or evenly spaced, FCFS on 4 servers
with exponential service. Growth of (arrivals - completions) over [I10, I90] of the sorted
intended instants must stay within SIGMAS * sqrt(D_a * A + D_c * C), A and C the arrivals and
completions in that window and D_a, D_c their measured indices of dispersion (variance over
mean of the counts in 20 equal slices of the window), as in point.rs. For comparison the
earlier threshold, SIGMAS * sqrt(A + C) (Poisson counting noise whatever the arrivals).

    scripts/sim-backlog-threshold.py [RUNS] [N] [SEED] [poisson|even]   (defaults 200 10000 1 poisson)
"""
import bisect
import heapq
import math
import random
import sys

SERVERS, SIGMAS, BINS = 4, 0.5, 20


def dispersion(v, t1, t2):
    w = (t2 - t1) / BINS
    counts = [bisect.bisect_right(v, t1 + (j + 1) * w) - bisect.bisect_right(v, t1 + j * w)
              for j in range(BINS)]
    mean = sum(counts) / BINS
    if mean < 5:
        return 1.0
    return sum((c - mean) ** 2 for c in counts) / (BINS - 1) / mean


def run(rng, rho, n, even):
    lam = rho * SERVERS  # mean service 1
    t, free = 0.0, [0.0] * SERVERS
    arrivals, completions = [], []
    for _ in range(n):
        t += 1 / lam if even else rng.expovariate(lam)
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
    a, c = a2 - a1, c2 - c1
    da, dc = dispersion(arrivals, t1, t2), dispersion(completions, t1, t2)
    return growth <= SIGMAS * math.sqrt(da * a + dc * c), growth <= SIGMAS * math.sqrt(a + c)


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    even = (sys.argv[4] if len(sys.argv) > 4 else "poisson") == "even"
    kind = "evenly spaced" if even else "Poisson"
    print(f"{SERVERS} servers, exponential service, {n} {kind} arrivals, {runs} runs per load, "
          f"threshold {SIGMAS} sigma")
    for rho in (0.9, 0.95, 0.97, 0.99, 1.0, 1.005, 1.01, 1.02, 1.03):
        r = [run(rng, rho, n, even) for _ in range(runs)]
        new = sum(x[0] for x in r)
        old = sum(x[1] for x in r)
        print(f"rho {rho:5.3f}: {100 * new / runs:5.1f} % pass (measured dispersion), "
              f"{100 * old / runs:5.1f} % (Poisson noise)")


if __name__ == "__main__":
    main()
