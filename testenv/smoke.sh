#!/usr/bin/env bash
# Smoke test of the local test cluster, and the source of a real audit log:
#   up -> namespace, StorageClass cnsreplay-static, pre-created PV + PVC that binds to it,
#   a pod using the PVC on a kwok node (Running), a VolumeSnapshot of the PVC (created and
#   deleted; no CSI driver, so it never becomes ready), a resize request, delete the pod,
#   delete the PVC (and the released PV) -> copy the audit log to OUT -> down.
#
#   testenv/smoke.sh OUT.jsonl [--storage-only]
#
# --storage-only keeps only the audit events on storage objects (PVCs, PVs, pods,
# VolumeAttachments, VolumeSnapshot(Content)s, StorageClasses, CSINodes) and on the smoke
# namespace and its objects, reads and all stages included: the form of
# testenv/fixtures/audit-local.jsonl (the full log is mostly the cluster's own bootstrap).
# TESTENV_SMOKE_KEEP=1 leaves the cluster running afterwards.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ $# -ge 1 ] || testenv_die "usage: testenv/smoke.sh OUT.jsonl [--storage-only]"
out=$1
storage_only=false
[ "${2:-}" = "--storage-only" ] && storage_only=true
NS=cnsreplay-smoke

# The smoke test and its audit fixture are about the cluster without a CSI driver (pre-created
# PV, a snapshot that never becomes ready): keep cnsreplay-csi out unless asked for.
env_file=$(TESTENV_CSI=${TESTENV_CSI:-0} "$TESTENV_SRC/up.sh")
. "$env_file"
if [ "${TESTENV_SMOKE_KEEP:-0}" != 1 ]; then
	trap '"$TESTENV_SRC/down.sh"' EXIT
fi
k() { kubectl "$@"; }
step() { # description command...: run, print how long it took
	local what=$1 t0 t1
	shift
	t0=$(date +%s%N)
	"$@" >/dev/null
	t1=$(date +%s%N)
	testenv_log "$(printf '%-28s %6d ms' "$what" $(((t1 - t0) / 1000000)))"
}
# `kubectl wait` for a jsonpath value or deletion; 60 s is far above what any step takes.
until_is() { # jsonpath=value kubectl-args...
	local want=$1
	shift
	k wait --timeout=60s "--for=jsonpath=$want" "$@"
}
until_gone() { k wait --timeout=60s --for=delete "$@"; }

apply() { k apply -f - >/dev/null; }
apply <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: $NS
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: cnsreplay-static
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: Immediate
allowVolumeExpansion: true
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: cnsreplay-smoke-pv
spec:
  storageClassName: cnsreplay-static
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: /tmp/cnsreplay-smoke-pv}
EOF
step "serviceaccount/default" k wait --timeout=60s --for=create -n "$NS" serviceaccount/default

apply <<EOF
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
  namespace: $NS
spec:
  storageClassName: cnsreplay-static
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
EOF
step "pvc/data Bound" until_is '{.status.phase}=Bound' -n "$NS" pvc/data

apply <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: app
  namespace: $NS
spec:
  automountServiceAccountToken: false
  containers:
  - name: app
    image: registry.invalid/cnsreplay/iogen:smoke
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: data}
EOF
step "pod/app Running" until_is '{.status.phase}=Running' -n "$NS" pod/app
testenv_log "pod/app on node $(k -n "$NS" get pod app -o jsonpath='{.spec.nodeName}')"

apply <<EOF
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata:
  name: snap
  namespace: $NS
spec:
  source: {persistentVolumeClaimName: data}
EOF
k -n "$NS" delete volumesnapshot snap --wait=false >/dev/null
step "volumesnapshot/snap gone" until_gone -n "$NS" volumesnapshot/snap

k -n "$NS" patch pvc data --type=merge -p '{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}' >/dev/null
testenv_log "pvc/data resize to 2Gi requested (a hostPath PV cannot grow: status stays at 1Gi)"

k -n "$NS" delete pod app --wait=false >/dev/null
step "pod/app gone" until_gone -n "$NS" pod/app
k -n "$NS" delete pvc data --wait=false >/dev/null
step "pvc/data gone" until_gone -n "$NS" pvc/data
step "pv Released" until_is '{.status.phase}=Released' pv/cnsreplay-smoke-pv
k delete pv cnsreplay-smoke-pv --wait=false >/dev/null
step "pv gone" until_gone pv/cnsreplay-smoke-pv
k delete namespace "$NS" --wait=false >/dev/null

testenv_log "resident memory after the smoke workload:"
testenv_rss >&2
mkdir -p "$(dirname "$out")"
if $storage_only; then
	jq -c --arg ns "$NS" 'select((.objectRef.resource | IN("persistentvolumeclaims",
		"persistentvolumes", "pods", "volumeattachments", "volumesnapshots",
		"volumesnapshotcontents", "storageclasses", "csinodes"))
		or .objectRef.namespace == $ns or .objectRef.name == $ns)' \
		"$TESTENV_AUDIT_LOG" >"$out"
else
	cp "$TESTENV_AUDIT_LOG" "$out"
fi
testenv_log "audit log: $out ($(wc -l <"$out") events, $(du -k "$out" | cut -f1) KiB)"
