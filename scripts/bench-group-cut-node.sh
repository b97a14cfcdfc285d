#!/usr/bin/env bash
# What a group snapshot costs and whether it is one cut, on testenv's real kubelet node through
# the kube provider and cnsreplay-csi (docs/PERFORMANCE.md, "On the real node" under "Group
# snapshots"): ROUNDS (default 5) runs each of traces/group-snapshot-cut-node.yaml (a
# VolumeGroupSnapshot of three volumes under chained ordered writes in a pod) and
# traces/separate-snapshots-cut-node.yaml (three VolumeSnapshots a second apart). Per round it
# prints the check's verdict and, from its io/ID.cut.json (docs/replay.md): where the cut fell
# in the writes, request → ready (the provider's watch), the members' creationTime spread
# (the API's whole seconds) and each volume's write pause around its snapshot; then min–max.
# Uses the cluster of CNSREPLAY_TESTENV or starts its own (scripts/lib/real-node.sh).
#
#   scripts/bench-group-cut-node.sh [ROUNDS]
set -euo pipefail
rounds=${1:-5}
cd "$(dirname "$0")/.."
. scripts/lib/real-node.sh
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for trace in group-snapshot-cut-node separate-snapshots-cut-node; do
  check=11
  [ "$trace" = separate-snapshots-cut-node ] && check=13
  for i in $(seq 1 "$rounds"); do
    "$target/release/cnsreplay" -q run "traces/$trace.yaml" --provider kube \
      --kubeconfig "$KUBECONFIG" --node-selector "$TESTENV_REAL_NODE_LABEL=true" \
      --iogen-image "$TESTENV_IOGEN_IMAGE" ${TESTENV_IOGEN_SECCOMP:+--iogen-seccomp-profile "$TESTENV_IOGEN_SECCOMP"} \
      --pause-image "$TESTENV_REGISTRY/cnsreplay/pause:testenv" \
      --validity=start.p99=10s,start.p99.9=10s,rate=100%,workers=100% -o "$work/$trace-$i" >/dev/null
    cp "$work/$trace-$i/io/$check.cut.json" "$work/$trace-$i.cut.json"
    rm -rf "$work/$trace-$i"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 - "$work" "$rounds" <<'PY'
import json, sys
work, rounds = sys.argv[1], int(sys.argv[2])
for trace in ("group-snapshot-cut-node", "separate-snapshots-cut-node"):
    rows = [json.load(open(f"{work}/{trace}-{i}.cut.json")) for i in range(1, rounds + 1)]
    print(f"== {trace}")
    for i, c in enumerate(rows, 1):
        v = c["report"]["verdict"]
        what = f"cut at {v['cut_seq']} of {c['report']['log_writes']}" if v["verdict"] == "consistent" else \
            f"missing volume {v.get('missing', {}).get('volume')} seq {v.get('missing', {}).get('seq')}"
        spread = c.get("api_creation_spread_s", c.get("creation_spread_s"))  # the older name too
        print(f"round {i}: {v['verdict']} ({what}); request→ready {c['request_to_ready_ns']/1e6:.0f} ms, "
              f"creationTime spread {spread} s, pause " +
              ", ".join(f"{m['volume']} {m['pause_ns']/1e6:.0f} ms (gap {m['typical_gap_ns']/1e6:.1f} ms)"
                        for m in c["members"] if m.get("pause_ns") is not None))
    verdicts = sorted({c["report"]["verdict"]["verdict"] for c in rows})
    r2r = [c["request_to_ready_ns"] / 1e6 for c in rows]
    pauses = [m["pause_ns"] / 1e6 for c in rows for m in c["members"] if m.get("pause_ns") is not None]
    gaps = [m["typical_gap_ns"] / 1e6 for c in rows for m in c["members"] if m.get("typical_gap_ns") is not None]
    print(f"{trace}: {rounds} rounds, verdicts {verdicts}; request→ready {min(r2r):.0f}–{max(r2r):.0f} ms, "
          f"write pause {min(pauses):.0f}–{max(pauses):.0f} ms, typical gap {min(gaps):.1f}–{max(gaps):.1f} ms")
PY
