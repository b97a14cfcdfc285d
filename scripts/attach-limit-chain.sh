#!/usr/bin/env bash
# The attach-limit chain on testenv's real kubelet node, timed phase by phase over ROUNDS runs
# (docs/PERFORMANCE.md, "Attach-limit storm on the real node"): with the node's limit at 2
# (cnsreplay-csi's TESTENV_CSI_MAX_VOLUMES_FILE), traces/attach-limit-chain.yaml fills the node,
# an attach without `wait_for_room` fails (`attach_limit`) and one with it waits; once that
# failure is recorded the limit is raised to 3, and the waiting attach's record gives the
# chain: limit raised → csinode-updated (the kubelet's refresh) → scheduled → attached →
# running. Prints each round and min–max. The same run as the test
# attach_limit::the_attach_limit_chain_on_the_real_node. Uses the cluster of CNSREPLAY_TESTENV
# or starts its own (scripts/lib/real-node.sh).
#
#   scripts/attach-limit-chain.sh [ROUNDS]      (default 5)
set -euo pipefail
rounds=${1:-5}
cd "$(dirname "$0")/.."
. scripts/lib/real-node.sh
chain_finish() {
  set_limit 1000 || true
  real_node_finish
}
trap chain_finish EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for i in $(seq 1 "$rounds"); do
  set_limit 2
  run="$work/run-$i"
  "$target/release/cnsreplay" -q run traces/attach-limit-chain.yaml --provider kube \
    --kubeconfig "$KUBECONFIG" --storage-class "$TESTENV_STORAGE_CLASS" \
    --node-selector "$TESTENV_REAL_NODE_LABEL=true" \
    --pause-image "$TESTENV_REGISTRY/cnsreplay/pause:testenv" --kube-failure-grace 5s \
    --validity=start.p99=10s,start.p99.9=10s,rate=100%,workers=100% -o "$run" >/dev/null &
  pid=$!
  # Event 7 (`third`) fails at the limit; then there is room for one more.
  until [ -f "$run/events.jsonl" ] && grep -q '"id":7,' "$run/events.jsonl"; do
    kill -0 "$pid" 2>/dev/null || { echo "round $i: the run ended before event 7" >&2; exit 1; }
    sleep 0.2
  done
  date +%s%N >"$work/raised-$i"
  echo 3 >"$TESTENV_CSI_MAX_VOLUMES_FILE"
  wait "$pid"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 - "$work" "$rounds" <<'PY'
import json, sys
from datetime import datetime
work, rounds = sys.argv[1], int(sys.argv[2])
cols = ["raised → csinode-updated", "csinode-updated → scheduled", "scheduled → attached",
        "attached → running", "unschedulable (total wait)"]
rows = []
for i in range(1, rounds + 1):
    recs = {}
    for line in open(f"{work}/run-{i}/events.jsonl"):
        r = json.loads(line)
        recs[r["id"]] = r
    third, second = recs[7], recs[6]
    assert third["outcome"] == "error" and third["error_class"] == "attach_limit", third
    assert second["outcome"] == "ok", second
    ph = {p["name"]: p["at"] for p in second["phases"]}
    origin = json.load(open(f"{work}/run-{i}/manifest.json"))["origin"]
    # RFC 3339 with nanoseconds: seconds via datetime, the fraction by hand.
    base, frac = origin.rstrip("Z").split(".") if "." in origin else (origin.rstrip("Z"), "0")
    origin_ns = int(datetime.fromisoformat(base + "+00:00").timestamp()) * 10**9 + int(frac.ljust(9, "0")[:9])
    raised = int(open(f"{work}/raised-{i}").read()) - origin_ns
    row = [ph["csinode-updated"] - raised, ph["scheduled"] - ph["csinode-updated"],
           ph["attached"] - ph["scheduled"], ph["running"] - ph["attached"],
           ph["scheduled"] - ph["unschedulable"]]
    rows.append(row)
    print(f"round {i}: " + ", ".join(f"{c} {v / 1e9:.3f} s" for c, v in zip(cols, row)))
print(f"over {rounds} rounds (min–max):")
for k, c in enumerate(cols):
    v = [r[k] / 1e9 for r in rows]
    print(f"  {c}: {min(v):.3f}–{max(v):.3f} s")
PY
