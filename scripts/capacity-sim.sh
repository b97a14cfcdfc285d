#!/usr/bin/env bash
# The capacity search against a known truth: the sim's queueing model with 4 attach servers
# and exponential service of mean 10 ms saturates at 4 / 0.01 s = 400 attaches/s.
#   scripts/capacity-sim.sh [OUTDIR] [CNSREPLAY]
# Writes 1500 evenly spaced attaches (200/s at speed 1), runs `cnsreplay capacity` on the sim
# and prints the answer; the sustained attach rate should be within 5 % of 400/s.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-$(mktemp -d /tmp/cnsreplay-capacity-sim.XXXX)}
bin=${2:-}
if [[ -z $bin ]]; then
  cargo build --release -p cnsreplay >&2
  bin=${CARGO_TARGET_DIR:-target}/release/cnsreplay
fi
trace="$out/attach.jsonl"
{
  printf '{"format":"cnsreplay-trace","version":1,"provenance":{"generator":"scripts/capacity-sim.sh"}}\n'
  for ((i = 0; i < 1500; i++)); do
    printf '{"at":%d,"id":%d,"attach":{"workload":"w%d","volumes":[]}}\n' $((i * 5000000)) $((i + 1)) $i
  done
} > "$trace"
"$bin" capacity "$trace" --provider sim -o "$out/search" \
  --sim-servers attach=4 --sim-latency attach=exponential:10ms --slo 'attach p99<=2s'
