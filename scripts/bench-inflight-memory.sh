#!/usr/bin/env bash
# What an operation waiting on the cluster costs the kube driver in memory: a run of N
# attaches (pods with no volume) at RATE/s that can never be scheduled (a node selector no
# node has), each waiting until its --timeout attach=WAIT, so all N are in flight at once
# near the end of the dispatch; against the same run with N/10 attaches. Prints each run's
# peak RSS (GNU time) and the slope per in-flight attach, ROUNDS times.
#
#   TESTENV=/path/testenv.env scripts/bench-inflight-memory.sh [N] [RATE] [WAIT] [ROUNDS]
#       (default 2000, 100, 40s, 3)
#
# Each waiting attach holds: its operation (the engine's task and the provider's future), its
# pod in the pod watch's cache (Pending, with the scheduler's condition), a waiter, and the
# scheduler's FailedScheduling event in the Warning-event watch's cache. A timed-out attach
# deletes its pod; the run's cleanup removes the namespace. Release build.
# Results go in docs/PERFORMANCE.md (## kube provider, memory per operation in flight).
set -euo pipefail
n=${1:-2000}
rate=${2:-100}
wait=${3:-40s}
rounds=${4:-3}
cd "$(dirname "$0")/.."
. "${TESTENV:?path of a running testenv.env}"
command -v /usr/bin/time >/dev/null || apt-get install -y -q time >/dev/null
cargo build --release -q -p cnsreplay
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
bin=$target/release/cnsreplay
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
trace() { # COUNT FILE
  python3 - "$1" "$rate" >"$2" <<'PY'
import sys
n, rate = int(sys.argv[1]), float(sys.argv[2])
print("format: cnsreplay-trace\nversion: 2\nevents:")
for i in range(n):
    print(f"  - {{at: {int(i * 1e9 / rate)}, id: {i + 1}, attach: {{workload: w{i}, volumes: []}}}}")
PY
}
small=$((n / 10))
trace "$n" "$dir/big.yaml"
trace "$small" "$dir/small.yaml"
peak() { # TRACE → peak RSS in KiB
  rm -rf "$dir/run"
  /usr/bin/time -f "%M" -o "$dir/t" "$bin" -q run "$1" --provider kube \
    --kubeconfig "$KUBECONFIG" --node-selector cnsreplay.dev/no-such-node=1 \
    --timeout "attach=$wait" --kube-failure-grace 1h --kube-qps 0 -o "$dir/run" >/dev/null 2>"$dir/log" || true
  # Every attach must have failed by its timeout (nothing else), or the run measured
  # something else.
  local f
  f=$(grep -c '"error_class":"timeout"' "$dir/run/events.jsonl" || true)
  if [ "$f" != "$(grep -c . "$dir/run/events.jsonl")" ]; then
    echo "not every attach timed out ($f): $(tail -n 3 "$dir/log")" >&2
    exit 1
  fi
  tail -n 1 "$dir/t"
}
echo "attaches in flight: $n and $small at $rate/s, each waiting $wait (release)"
for r in $(seq "$rounds"); do
  b=$(peak "$dir/big.yaml")
  s=$(peak "$dir/small.yaml")
  python3 -c "
b, s, n, m = $b, $s, $n, $small
print(f'round $r: peak RSS {b/1024:.1f} MB with {n}, {s/1024:.1f} MB with {m}: '
      f'{(b - s) * 1024 / (n - m) / 1024:.1f} KiB per attach in flight')"
done
