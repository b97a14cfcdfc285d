#!/usr/bin/env bash
# Pod create → Running with one new volume, on testenv's real kubelet node, split into the
# attach phases. Results go in docs/PERFORMANCE.md ("Pod start on the real node").
#
#   scripts/pod-start-real-node.sh [PODS] [SPACING]     (default 50 pods, one every 3 s)
#
# Runs the release `cnsreplay run --provider kube` on a trace of PODS volumes (created first,
# 256Mi, class cnsreplay-csi), then one pod per volume every SPACING (the provider's workload
# pod, pinned to the real node), then detach and delete. Uses the cluster of CNSREPLAY_TESTENV
# (a testenv.env with a real node) or starts its own (TESTENV_REAL_NODE=1 testenv/up.sh) and
# stops it on exit. Per pod, from the run's events (run clock) and the CSI driver's call log
# (wall clock; the run origin's wall time is the StartTime of the run's attach histogram log):
#   schedule    created → scheduled (the scheduler's binding seen by the watch)
#   attach      scheduled → VolumeAttachment attached (attach-detach controller, csi-attacher)
#   to-stage    attached → NodeStageVolume called (the kubelet: volume in use reported, then
#               mount: the kubelet reports volumesInUse with its node status, default every 10 s)
#   stage       NodeStageVolume (mount of the loop device ControllerPublish attached)
#   publish     NodeStageVolume end → NodePublishVolume end (bind mount, fsGroup)
#   start       NodePublishVolume end → Running (sandbox, container, status seen by the watch)
# and prints p50/p99/max of each and of the total.
set -euo pipefail
pods=${1:-50}
spacing=${2:-3}
cd "$(dirname "$0")/.."
. scripts/lib/real-node.sh

python3 - "$pods" "$spacing" >"$work/trace.yaml" <<'PY'
import sys
n, spacing = int(sys.argv[1]), float(sys.argv[2])
print("format: cnsreplay-trace\nversion: 1\nprovenance: {generator: scripts/pod-start-real-node.sh}")
print("defaults: {volume_size: 256Mi, access_mode: ReadWriteOnce, volume_mode: filesystem}\nevents:")
for i in range(n):
    print(f"  - {{at: {i * 100}ms, create_volume: {{volume: v{i}}}}}")
t0 = n * 0.1 + 5
for i in range(n):
    print(f"  - {{at: {int((t0 + i * spacing) * 1000)}ms, attach: {{workload: w{i}, volumes: [v{i}]}}}}")
end = t0 + n * spacing + 15
for i in range(n):
    print(f"  - {{at: {int(end * 1000)}ms, detach: {{workload: w{i}}}}}")
    print(f"  - {{at: {int(end * 1000) + 1000}ms, delete_volume: {{volume: v{i}}}}}")
PY
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$target/release/cnsreplay" -q run "$work/trace.yaml" --provider kube --kubeconfig "$KUBECONFIG" \
  --storage-class "$TESTENV_STORAGE_CLASS" --node-selector "$TESTENV_REAL_NODE_LABEL=true" \
  --pause-image "$TESTENV_REGISTRY/cnsreplay/pause:testenv" -o "$work/run" >/dev/null
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 - "$work/run" "$TESTENV_CSI_OPS_LOG" "$TESTENV_REAL_NODE" "$spacing" <<'PY'
import json, re, sys
run, ops_log, node, spacing = sys.argv[1:5]
start = None
for line in open(f"{run}/histograms/attach.hlog"):
    m = re.match(r"#\[StartTime: ([0-9.]+)", line)
    if m:
        start = int(float(m.group(1)) * 1e9)
        break
assert start, "no StartTime in the attach histogram log"
pvc_uid = {}
for line in open(f"{run}/ledger.jsonl"):
    e = json.loads(line)
    if e["kind"] == "pvc" and "detail" in e:
        pvc_uid[e["id"].split("/")[1]] = e["detail"]["uid"]
stage, publish = {}, {}
for line in open(ops_log):
    r = json.loads(line)
    if r.get("node") != node or r.get("code") != "OK" or r["start_ns"] < start:
        continue
    if r["op"] == "NodeStageVolume":
        stage.setdefault(r["volume"], r)
    elif r["op"] == "NodePublishVolume":
        m = re.search(r"/(pvc-[0-9a-f-]+)/mount$", r.get("path", ""))
        if m:
            publish.setdefault(m.group(1), r)
rows = {k: [] for k in ["schedule", "attach", "to-stage", "stage", "publish", "start", "total"]}
failed, events = 0, []
for line in open(f"{run}/events.jsonl"):
    e = json.loads(line)
    if e["op"] != "attach":
        continue
    if e["outcome"] != "ok":
        failed += 1
        continue
    rows["total"].append(e["completed"] - e["started"])
    events.append(e)
# The attach of workload wI mounts volume vI; events are numbered in trace order:
# create_volume v0..vN-1 are ids 0..N-1, attach wI is id N + I.
n = len(pvc_uid)
for e in events:
    ph = {p["name"]: p["at"] + start for p in e["phases"]}
    vol = f"v{e['id'] - n}"
    pv = "pvc-" + pvc_uid[vol]
    pub = publish.get(pv)
    st = stage.get(pub["volume"]) if pub else None
    if not (pub and st and {"created", "scheduled", "attached", "running"} <= ph.keys()):
        print(f"attach {e['id']}: phases or driver calls missing ({sorted(ph)}, publish {bool(pub)}, stage {bool(st)})", file=sys.stderr)
        continue
    rows["schedule"].append(ph["scheduled"] - ph["created"])
    rows["attach"].append(ph["attached"] - ph["scheduled"])
    rows["to-stage"].append(st["start_ns"] - ph["attached"])
    rows["stage"].append(st["end_ns"] - st["start_ns"])
    rows["publish"].append(pub["end_ns"] - st["end_ns"])
    rows["start"].append(ph["running"] - pub["end_ns"])
def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")
print(f"{len(rows['total'])} pods ok, {failed} failed, one every {spacing} s, each with a new 256Mi volume")
print(f"{'phase':10} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}")
for k, v in rows.items():
    print(f"{k:10} {pct(v, .5) / 1e6:9.1f} {pct(v, .99) / 1e6:9.1f} {max(v) / 1e6 if v else float('nan'):9.1f}")
PY
