#!/usr/bin/env bash
# Throughput and memory of the trace tools on a large binary trace, ROUNDS times each.
#
#   scripts/bench-trace-tools.sh [EVENTS] [ROUNDS]      (default 10000000 events, 5 rounds)
#
# Writes the deterministic sample trace (trace_format::sample: ~97 % `io`, the rest the
# create/attach/snapshot/detach/delete cycle of 64 rolling volumes) as a binary trace, then
# runs the release `cnsreplay trace` tools on it — `slice --busiest 60s` (reads the trace
# twice), `slice` of its middle half, `rewrite --speed 2`, `merge` of the
# trace with itself (twice the events out) — and prints, per tool, the range over the rounds
# of wall time, events per second through it (the trace's events; a merge's 2× output) and
# peak RSS (getrusage of the child). The tools check their input in their own pass
# (validate's checker); slice and rewrite also run with `--no-check`, alternating with the
# checked run in each round, and the check's cost is printed as the range over the rounds of
# checked / unchecked wall time.
# Results go in docs/PERFORMANCE.md (## Trace tools). Needs ~0.5 GiB free in $TMPDIR per
# 10 M events.
set -euo pipefail
n=${1:-10000000}
rounds=${2:-5}
cd "$(dirname "$0")/.."
cargo build --release -q -p cnsreplay
cargo build --release -q -p trace-format --example sample
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
bin=$target/release/cnsreplay
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$target/release/examples/sample" "$n" "$dir/big.jsonl"
"$bin" -q convert "$dir/big.jsonl" -o "$dir/big.cnsbin"
rm "$dir/big.jsonl"
span=$("$bin" stats --json "$dir/big.cnsbin" | python3 -c 'import json,sys; print(json.load(sys.stdin)["stats"]["duration_ns"])')
q1=$((span / 4)); q3=$((span / 4 * 3))
echo "events: $n; binary $(du -m "$dir/big.cnsbin" | cut -f1) MiB; span $((span / 1000000000)) s"
python3 - "$n" "$rounds" "$bin" "$dir" "$q1" "$q3" <<'PY'
import resource, subprocess, sys, time
n, rounds, bin, d, q1, q3 = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
big = f"{d}/big.cnsbin"
tools = {
    "slice --busiest 60s": ["trace", "slice", big, "--busiest", "60s", "-o", f"{d}/out.cnsbin"],
    "slice (middle half)": ["trace", "slice", big, "--start", f"{q1}ns", "--end", f"{q3}ns", "-o", f"{d}/out.cnsbin"],
    "rewrite --speed 2": ["trace", "rewrite", big, "--speed", "2", "-o", f"{d}/out.cnsbin"],
    "merge (itself, 2× out)": ["trace", "merge", big, big, "-o", f"{d}/out.cnsbin"],
}
def once(args):
    t = time.monotonic()
    r = subprocess.run(["python3", "-c", """
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
""", bin, "-q", *args], check=True, capture_output=True, text=True)
    return time.monotonic() - t, int(r.stdout.strip()) / 1024
for name, args in tools.items():
    unchecked = not name.startswith("merge")
    walls, rss, plain = [], [], []
    for _ in range(rounds):
        w, m = once(args)
        walls.append(w)
        rss.append(m)
        if unchecked:
            plain.append(once(args + ["--no-check"])[0])
    out = 2 * n if name.startswith("merge") else n
    rate = [out / w / 1e6 for w in walls]
    line = (f"{name}: {min(walls):.2f}–{max(walls):.2f} s, {min(rate):.2f}–{max(rate):.2f} M events/s through it, "
            f"peak RSS {min(rss):.1f}–{max(rss):.1f} MiB ({rounds} rounds)")
    if unchecked:
        ratio = [w / p for w, p in zip(walls, plain)]
        line += (f"; --no-check {min(plain):.2f}–{max(plain):.2f} s, checked/unchecked "
                 f"{min(ratio):.2f}–{max(ratio):.2f}")
    print(line)
PY
