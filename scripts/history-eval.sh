#!/usr/bin/env bash
# `analyze history` on simulated build series (crates/analyze/examples/history_eval.rs): of
# SERIES series with a +15 % p50 shift at one build, in how many the change is named at its
# build ±1; of SERIES stationary series, in how many a change point is found; beside pairwise
# `analyze compare` of neighbouring builds on the same series. Fresh seeds unless SEED is
# given (the seed used is printed). The dev profile: the counts do not depend on it, and a
# release build of polars costs minutes.
#
# Usage: scripts/history-eval.sh [SERIES] [SEED]   (env: BUILDS=20 EVENTS=2000 CV=0.05 OUTLIER=0.05)
set -euo pipefail
cd "$(dirname "$0")/.."
seed=${2:-$(date +%s%N)}
exec cargo run -q -p analyze --example history_eval -- "${1:-20}" "$seed" \
  "${BUILDS:-20}" "${EVENTS:-2000}" "${CV:-0.05}" "${OUTLIER:-0.05}"
