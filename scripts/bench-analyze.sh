#!/usr/bin/env bash
# analyze benchmark: `analyze summary` of a 10 M-event run (target ≤ 10 s) and `analyze
# compare` of two such runs (target ≤ 20 s), release build.
#
#   scripts/bench-analyze.sh [EVENTS]      (default 10000000)
#
# The run directories are synthetic: crates/analyze/examples/gen_run.rs writes manifest.json
# and an events.jsonl of EVENTS records in exactly the replay engine's record shape (90% `io`,
# 10% control ops, lognormal service times, 0.5% failures; ~2.3 GB per 10 M records), since a
# real 10 M-event sim run takes minutes and the analysis only reads the directory. The second
# run has another seed and 20% slower attaches. Results go in docs/PERFORMANCE.md (## analyze).
set -euo pipefail
n=${1:-10000000}
cd "$(dirname "$0")/.."
cargo build --release -q -p cnsreplay
cargo build --release -q -p analyze --example gen_run
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$target/release/examples/gen_run" "$n" "$dir/base" 1 1.0
"$target/release/examples/gen_run" "$n" "$dir/new" 2 1.2
ls -l "$dir/base/events.jsonl"
cat "$dir/base/events.jsonl" > /dev/null # warm the page cache, as for a run just finished
cat "$dir/new/events.jsonl" > /dev/null
t() { /usr/bin/time -f "%e s wall, %U s user, %M KiB max RSS" "$@"; }
echo "== analyze summary ($n events)"
t "$target/release/cnsreplay" analyze summary "$dir/base" > "$dir/summary.txt"
head -12 "$dir/summary.txt"
echo "== analyze compare (2 × $n events)"
t "$target/release/cnsreplay" analyze compare "$dir/base" "$dir/new" > "$dir/compare.txt" || true
cat "$dir/compare.txt"
