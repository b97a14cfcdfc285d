#!/usr/bin/env bash
# Maximum sustainable attach/s of the local provider on this machine (run as root: loop
# devices and mounts):
#   sudo scripts/capacity-local.sh [OUTDIR] [CNSREPLAY]
# An attach/detach churn trace (scripts/capacity-trace.sh: 8 volumes of 64 MiB, 200 cycles,
# 10 attaches/s at speed 1), searched with the SLO attach p99 <= 1 s to 5 % resolution.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-$(mktemp -d /tmp/cnsreplay-capacity-local.XXXX)}
bin=${2:-}
if [[ -z $bin ]]; then
  cargo build --release -p cnsreplay >&2
  bin=${CARGO_TARGET_DIR:-target}/release/cnsreplay
fi
scripts/capacity-trace.sh "$out/attach-churn.jsonl" 200 100
"$bin" capacity "$out/attach-churn.jsonl" --provider local --local-max-volume 64Mi \
  --slo 'attach p99<=1s' --resolution 0.05 --max-runs 24 -o "$out/search"
