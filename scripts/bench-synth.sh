#!/usr/bin/env bash
# Streaming generation benchmark: one simulated day of 1000 hosts × 30 containers (the
# `traces/synth/hosts-1000-attach-100.yaml` scenario: 100 attach/s, ~35 M events) written as
# binary by the release `cnsreplay synth`, on one core. Prints wall time, events/s and peak
# RSS (getrusage of the child). Targets: ≤ 60 s and ≤ 256 MiB. Results go in
# docs/PERFORMANCE.md (## Synth).
#
#   scripts/bench-synth.sh [DURATION]      (default 1d)
set -euo pipefail
duration=${1:-1d}
cd "$(dirname "$0")/.."
cargo build --release -q -p cnsreplay
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
bin=$target/release/cnsreplay
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - "$bin" "$duration" "$dir/day.cnsbin" <<'PY'
import json, resource, subprocess, sys, time
bin, duration, out = sys.argv[1:]
cmd = [bin, "-q", "synth", "traces/synth/hosts-1000-attach-100.yaml", "--duration", duration,
       "--seed", "1", "-o", out, "--json"]
# One core, as the target says.
cmd = ["taskset", "-c", "0"] + cmd
t = time.monotonic()
r = subprocess.run(cmd, check=True, stdout=subprocess.PIPE)
dt = time.monotonic() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
rep = json.loads(r.stdout)
import os
size = os.path.getsize(out) / 2**20
print(f"synth {duration}: {rep['events']} events, {dt:.2f} s wall, "
      f"{rep['events'] / dt / 1e6:.2f} M events/s, peak RSS {rss:.1f} MiB, output {size:.0f} MiB")
ok = dt <= 60 and rss <= 256
print("targets (≤ 60 s, ≤ 256 MiB):", "met" if ok else "MISSED")
PY
