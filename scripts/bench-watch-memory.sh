#!/usr/bin/env bash
# Peak RSS of a tiny kube run against a cluster holding N PersistentVolumes and N
# VolumeAttachments that are not the run's (both watches are cluster-wide), ROUNDS times per
# binary, then the same with none.
#
#   TESTENV=/path/testenv.env [BINS="before=/path/cnsreplay after=/path/cnsreplay"] \
#     scripts/bench-watch-memory.sh [N] [ROUNDS]   (default 2000, 5)
#
# BINS: label=binary pairs to compare on the same objects (default: this checkout's debug
# build, labelled "this"). The objects are made with `kubectl apply` (so they carry managed
# fields and kubectl's last-applied annotation, as hand-made objects on a real cluster do),
# labelled memtest=1, and deleted at the end. The VolumeAttachments name attacher
# memtest.invalid (no CSI driver acts on them), node memtest-node and PV memtest-pv-<i>.
# Thousands of objects are meant for a private testenv (testenv/up.sh with its own
# TESTENV_DIR), not a shared one. The run: one create_volume and its delete through the
# cluster's CSI class (testenv: cnsreplay-csi). Prints the range of the runs' peak RSS
# (GNU time). Results go in docs/PERFORMANCE.md (## kube provider, watch memory).
set -euo pipefail
n=${1:-2000}
rounds=${2:-5}
cd "$(dirname "$0")/.."
. "${TESTENV:?path of a running testenv.env}"
command -v /usr/bin/time >/dev/null || apt-get install -y -q time >/dev/null
if [ -z "${BINS:-}" ]; then
  cargo build -q -p cnsreplay
  target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
  BINS="this=$target/debug/cnsreplay"
fi
dir=$(mktemp -d)
# deletecollection per kind (`kubectl delete -l` deletes and waits one by one), repeated: for
# thousands it can outlast the API server's request timeout, and PVs then wait for the PV
# controller to drop their protection finalizer.
drop_objects() {
  while [ -n "$(kubectl get pv,volumeattachments -l memtest=1 -o name | head -1)" ]; do
    kubectl delete --raw "/apis/storage.k8s.io/v1/volumeattachments?labelSelector=memtest%3D1" >/dev/null 2>&1 || true
    kubectl delete --raw "/api/v1/persistentvolumes?labelSelector=memtest%3D1" >/dev/null 2>&1 || true
    sleep 2
  done
}
cleanup() {
  drop_objects 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
python3 - "$n" "$dir" <<'PY'
import sys
n, out = int(sys.argv[1]), sys.argv[2]
chunk = 500
for c in range(0, n, chunk):
    with open(f"{out}/objs-{c // chunk:04d}.yaml", "w") as f:
        for i in range(c, min(n, c + chunk)):
            f.write(f"""---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: memtest-pv-{i:05d}
  labels: {{memtest: "1", app: memtest, tier: bench-{i % 7}}}
  annotations: {{note: a pv made to size the cluster-wide watch of cnsreplay}}
spec:
  capacity: {{storage: 1Gi}}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: memtest-none
  hostPath: {{path: /tmp/memtest-{i}}}
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata:
  name: memtest-va-{i:05d}
  labels: {{memtest: "1", app: memtest, tier: bench-{i % 7}}}
  annotations: {{note: a volume attachment made to size the cluster-wide watch of cnsreplay}}
spec:
  attacher: memtest.invalid
  nodeName: memtest-node
  source: {{persistentVolumeName: memtest-pv-{i:05d}}}
""")
PY
cat >"$dir/tiny.yaml" <<YAML
format: cnsreplay-trace
version: 1
defaults: {storage_class: ${TESTENV_STORAGE_CLASS:-cnsreplay-csi}, volume_size: 1Gi}
events:
  - {at: 0s, create_volume: {volume: a}}
  - {at: 1s, delete_volume: {volume: a}}
YAML
measure() {
  for b in $BINS; do
    for r in $(seq "$rounds"); do
      rm -rf "$dir/run"
      /usr/bin/time -f "%M" -o "$dir/t" "${b#*=}" -q run "$dir/tiny.yaml" --provider kube \
        --kubeconfig "$KUBECONFIG" -o "$dir/run" >/dev/null 2>&1
      cat "$dir/t"
    done | awk -v w="${b%%=*}: $1" 'NR==1{l=h=$1} {if($1<l)l=$1; if($1>h)h=$1} END{printf "%-36s peak RSS %.1f–%.1f MB\n", w, l/1024, h/1024}'
  done
}
# Three kubectl at a time: one would take minutes for 10 000 pairs.
ls "$dir"/objs-*.yaml | xargs -P 3 -n 1 kubectl apply -f >/dev/null
echo "cluster: $(kubectl get pv -l memtest=1 -o name | wc -l) foreign PVs, $(kubectl get volumeattachments -l memtest=1 -o name | wc -l) foreign VolumeAttachments"
measure "$n foreign PVs + VAs"
drop_objects
measure "no foreign PV or VA"
