#!/usr/bin/env bash
# What the kube provider's pre-flight pull check adds to a run, on testenv's real kubelet node
# (docs/kubernetes.md, "The pull check"). Results as ranges in docs/kubernetes.md.
#
#   CNSREPLAY_TESTENV=/tmp/cnsreplay-testenv.dev/testenv.env scripts/bench-pull-check.sh [ROUNDS]
#
# ROUNDS (default 6) runs of a one-volume trace (create, attach, a 1 s io_phase, detach,
# delete) pinned to the real node with testenv's iogen image and seccomp profile: the check
# starts one pod with the workload and iogen images there. Per round it prints the seconds the
# check took (the provider's "pre-flight pull check passed" log line: pod create until every
# container ran, and its delete request) and the run's backend line. CNSREPLAY_BIN picks the
# binary (default: the release build, built here); the check's time is the cluster's (a pod
# start), not the binary's.
set -euo pipefail
rounds=${1:-6}
cd "$(dirname "$0")/.."
[ -n "${CNSREPLAY_TESTENV:-}" ] || { echo "set CNSREPLAY_TESTENV to a testenv.env with a real node" >&2; exit 1; }
# shellcheck disable=SC1090
. "$CNSREPLAY_TESTENV"
[ -n "${TESTENV_REAL_NODE:-}" ] || { echo "$CNSREPLAY_TESTENV: the cluster has no real node" >&2; exit 1; }
bin=${CNSREPLAY_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release -q -p cnsreplay
  bin=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/cnsreplay
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/trace.yaml" <<'T'
format: cnsreplay-trace
version: 1
provenance: {generator: scripts/bench-pull-check.sh}
defaults: {volume_size: 64Mi}
events:
  - {at: 0s, create_volume: {volume: v}}
  - {at: 0s, attach: {workload: w, volumes: [v]}}
  - {at: 0s, io_phase: {workload: w, volume: v, pattern: random, read_pct: 50, block_size: 4Ki, load: {depth: 1}, duration: 1s, region: 16Mi}}
  - {at: 8s, detach: {workload: w}}
  - {at: 8s, delete_volume: {volume: v}}
T
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
secs=()
for i in $(seq "$rounds"); do
  RUST_LOG=provider_kube=info "$bin" run "$work/trace.yaml" --provider kube --kubeconfig "$KUBECONFIG" \
    --storage-class "$TESTENV_STORAGE_CLASS" --node-selector "$TESTENV_REAL_NODE_LABEL=true" \
    --iogen-image "$TESTENV_IOGEN_IMAGE" --iogen-seccomp-profile "$TESTENV_IOGEN_SECCOMP" \
    -o "$work/run$i" >"$work/out$i" 2>"$work/err$i" || { cat "$work/err$i" >&2; exit 1; }
  s=$(sed -n 's/.*pre-flight pull check passed.*seconds=\([0-9.]*\).*/\1/p' "$work/err$i" | head -n1)
  [ -n "$s" ] || { echo "round $i: no pull check line" >&2; cat "$work/err$i" >&2; exit 1; }
  secs+=("$s")
  echo "round $i: pull check ${s} s; $(grep '^I/O backend' "$work/out$i" || echo 'no backend line')"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
printf '%s\n' "${secs[@]}" | sort -n | awk '{v[NR]=$1} END {printf "pull check over %d rounds: min %.2f s, median %.2f s, max %.2f s\n", NR, v[1], v[int((NR+1)/2)], v[NR]}'
