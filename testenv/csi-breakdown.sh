#!/usr/bin/env bash
# Per-phase breakdown of PVC create→Bound and pod schedule→VolumeAttachment attached on the
# running local cluster with cnsreplay-csi, from the API server's audit log (µs timestamps of
# each controller's and sidecar's writes) and the driver's own call log (ops.jsonl, ns).
#
#   testenv/csi-breakdown.sh [N]      # N PVCs (default 20) in a fresh namespace csi-breakdown-<time>, then
#                                     # one pod per PVC; prints a Markdown table (ms)
#
# Needs TESTENV_DIR (or the default state dir) of a cluster started by up.sh with cnsreplay-csi.
# The namespace and its objects are deleted afterwards.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
N=${1:-20}
. "$TESTENV_DIR/testenv.env"
[ -n "${TESTENV_CSI_ROOT:-}" ] || testenv_die "cnsreplay-csi is not running in $TESTENV_DIR"
ns=csi-breakdown-$(date +%s)
k() { kubectl "$@"; }
k create namespace "$ns" >/dev/null
{
	for i in $(seq 1 "$N"); do
		cat <<YAML
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: pvc-$i, namespace: $ns}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: cnsreplay-csi
  resources: {requests: {storage: 16Mi}}
YAML
	done
} | k apply -f - >/dev/null
k -n "$ns" wait --for=jsonpath='{.status.phase}'=Bound pvc --all --timeout=120s >/dev/null
{
	for i in $(seq 1 "$N"); do
		cat <<YAML
---
apiVersion: v1
kind: Pod
metadata: {name: pod-$i, namespace: $ns}
spec:
  containers: [{name: c, image: busybox, volumeMounts: [{name: v, mountPath: /data}]}]
  volumes: [{name: v, persistentVolumeClaim: {claimName: pvc-$i}}]
YAML
	done
} | k apply -f - >/dev/null
deadline=$(($(date +%s) + 120))
until [ "$(k get volumeattachments -o jsonpath='{range .items[*]}{.status.attached}{"\n"}{end}' | grep -c true)" -ge "$N" ]; do
	[ "$(date +%s)" -lt "$deadline" ] || testenv_die "timed out waiting for $N attachments"
	sleep 0.2
done
sleep 1 # the audit log's writer is asynchronous to the responses
pvs=$(mktemp)
trap 'rm -f "$pvs"' EXIT
k get pv -o json >"$pvs"
python3 - "$TESTENV_AUDIT_LOG" "$TESTENV_CSI_OPS_LOG" "$ns" "$N" "$pvs" <<'PY'
import json, sys
from datetime import datetime

audit_path, ops_path, ns, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
pvs = json.load(open(sys.argv[5]))["items"]
handle_to_pvc = {}
pv_to_pvc = {}
for pv in pvs:
    ref = pv["spec"].get("claimRef", {})
    if ref.get("namespace") != ns:
        continue
    handle_to_pvc[pv["spec"]["csi"]["volumeHandle"]] = ref["name"]
    pv_to_pvc[pv["metadata"]["name"]] = ref["name"]

def ts(s):  # RFC 3339 with µs -> ns
    d = datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ")
    return int((d - datetime(1970, 1, 1)).total_seconds() * 1e6) * 1000

ev = {}  # (kind, key) -> ns, first occurrence
def first(kind, key, t):
    ev.setdefault((kind, key), t)

for line in open(audit_path):
    a = json.loads(line)
    if a.get("stage") != "ResponseComplete" or a.get("responseStatus", {}).get("code", 0) >= 300:
        continue
    o = a.get("objectRef", {})
    r, name, sub, verb = o.get("resource"), o.get("name"), o.get("subresource"), a["verb"]
    user = a["user"]["username"]
    t = ts(a["stageTimestamp"])
    resp = a.get("responseObject") or {}
    if r == "persistentvolumeclaims" and o.get("namespace") == ns:
        if verb == "create":
            first("pvc_created", resp.get("metadata", {}).get("name", name), t)
        elif "persistent-volume-binder" in user and sub is None and verb in ("update", "patch"):
            first("pvc_annotated", name, t)
        if sub == "status" and resp.get("status", {}).get("phase") == "Bound":
            first("pvc_bound", name, t)
    elif r == "persistentvolumes" and verb == "create" and user == "csi-provisioner":
        pvc = resp.get("spec", {}).get("claimRef", {}).get("name")
        if pvc and resp["spec"]["claimRef"].get("namespace") == ns:
            first("pv_created", pvc, t)
    elif r == "pods" and sub == "binding" and o.get("namespace") == ns:
        first("pod_bound", name.replace("pod-", "pvc-"), t)
    elif r == "volumeattachments":
        pv = (resp.get("spec", {}).get("source") or {}).get("persistentVolumeName")
        pvc = pv_to_pvc.get(pv)
        if pvc is None:
            continue
        if verb == "create":
            first("va_created", pvc, t)
        if resp.get("status", {}).get("attached") is True:
            first("va_attached", pvc, t)

for line in open(ops_path):
    r = json.loads(line)
    pvc = handle_to_pvc.get(r.get("volume"))
    if pvc is None or r["code"] != "OK":
        continue
    op = {"CreateVolume": "create", "ControllerPublishVolume": "publish"}.get(r["op"])
    if op:
        # The first call does the work (the attacher repeats ControllerPublish once).
        first(op + "_start", pvc, r["start_ns"])
        first(op + "_end", pvc, r["end_ns"])

def phases(steps):
    rows = []
    for (a, b, label) in steps:
        vals = sorted((ev[(b, k)] - ev[(a, k)]) / 1e6 for k in handle_to_pvc.values()
                      if (a, k) in ev and (b, k) in ev)
        rows.append((label, vals))
    return rows

def q(v, p):
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))] if v else float("nan")

create = [
    ("pvc_created", "pvc_annotated", "PVC created → PV controller annotates it (kube-controller-manager)"),
    ("pvc_annotated", "create_start", "annotated → CreateVolume call starts (external-provisioner)"),
    ("create_start", "create_end", "CreateVolume in the driver (provider time)"),
    ("create_end", "pv_created", "CreateVolume returned → PV created (external-provisioner)"),
    ("pv_created", "pvc_bound", "PV created → PVC Bound (PV controller)"),
    ("pvc_created", "pvc_bound", "**total create → Bound**"),
]
attach = [
    ("pod_bound", "va_created", "pod bound to node → VolumeAttachment created (attach-detach controller)"),
    ("va_created", "publish_start", "VolumeAttachment created → ControllerPublish starts (external-attacher)"),
    ("publish_start", "publish_end", "ControllerPublishVolume in the driver (provider time)"),
    ("publish_end", "va_attached", "ControllerPublish returned → VolumeAttachment attached (external-attacher)"),
    ("pod_bound", "va_attached", "**total scheduled → attached**"),
]
for title, steps in (("create → Bound", create), ("scheduled → attached", attach)):
    print(f"\n{title} ({n} volumes), ms\n")
    print("| phase | n | p50 | p90 | max |")
    print("|---|---:|---:|---:|---:|")
    for label, v in phases(steps):
        print(f"| {label} | {len(v)} | {q(v, .5):.1f} | {q(v, .9):.1f} | {max(v) if v else float('nan'):.1f} |")
PY
k delete namespace "$ns" --wait=true --timeout=120s >/dev/null
