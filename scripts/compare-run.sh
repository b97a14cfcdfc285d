#!/usr/bin/env bash
# Collects an interleaved A/B comparison of two configurations and judges it: N runs of each,
# in the order A B B A A B B A … (each pair counterbalanced, so a drift over the session falls
# on both sides alike), every run with its own seed, then
# `cnsreplay analyze compare DIR/a-* -- DIR/b-*` (its exit code: 0 no change, 1 regression,
# 3 inconclusive). A-ARGS and B-ARGS are `cnsreplay run` flags (split on spaces), e.g. two
# StorageClasses or two sim configurations; COMMON-ARGS (env COMMON) go to both.
#
# Usage: scripts/compare-run.sh TRACE N 'A-ARGS' 'B-ARGS' DIR
#   env: CNSREPLAY=path/to/cnsreplay  COMMON='--provider sim'  COMPARE='--skip p99.9'
# Example: COMMON='--provider sim' scripts/compare-run.sh t.jsonl 5 \
#   '--sim-latency attach=lognormal:200ms:0.3' '--sim-latency attach=lognormal:220ms:0.3' /tmp/ab
set -euo pipefail
[[ $# == 5 ]] || { sed -n 2,13p "$0"; exit 2; }
trace=$1 n=$2 a_args=$3 b_args=$4 dir=$5
bin=${CNSREPLAY:-cnsreplay}
read -ra common <<< "${COMMON:---provider sim}"
read -ra a <<< "$a_args"
read -ra b <<< "$b_args"
mkdir -p "$dir"
one() { # SIDE I SEED ARGS...
  local side=$1 i=$2 seed=$3
  shift 3
  echo "run $side-$i (seed $seed)" >&2
  "$bin" -q run "$trace" "${common[@]}" "$@" --seed "$seed" -o "$dir/$side-$i" > /dev/null \
    || echo "run $side-$i exited $?" >&2
}
for ((i = 0; i < n; i++)); do
  if ((i % 2 == 0)); then
    one a "$i" $((2 * i + 1)) "${a[@]}"
    one b "$i" $((2 * i + 2)) "${b[@]}"
  else
    one b "$i" $((2 * i + 2)) "${b[@]}"
    one a "$i" $((2 * i + 1)) "${a[@]}"
  fi
done
read -ra extra <<< "${COMPARE:-}"
exec "$bin" analyze compare "${extra[@]}" "$dir"/a-* -- "$dir"/b-*
