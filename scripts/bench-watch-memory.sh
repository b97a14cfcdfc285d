#!/usr/bin/env bash
# Peak RSS of a tiny kube run against a cluster holding N PersistentVolumes that are not the
# run's (the PV watch is cluster-wide), ROUNDS times, then the same with none.
#
#   TESTENV=/path/testenv.env scripts/bench-watch-memory.sh [N] [ROUNDS]   (default 2000, 5)
#
# The PVs are made with `kubectl apply` (so they carry managed fields and kubectl's
# last-applied annotation, as hand-made objects on a real cluster do), labelled memtest=1,
# and deleted at the end. The run: one create_volume and its delete through the cluster's
# CSI class (testenv: cnsreplay-csi). Prints the range of the runs' peak RSS (GNU time).
# Results go in docs/PERFORMANCE.md (## kube provider, watch memory).
set -euo pipefail
n=${1:-2000}
rounds=${2:-5}
cd "$(dirname "$0")/.."
. "${TESTENV:?path of a running testenv.env}"
command -v /usr/bin/time >/dev/null || apt-get install -y -q time >/dev/null
cargo build -q -p cnsreplay
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
bin=$target/debug/cnsreplay
dir=$(mktemp -d)
trap 'kubectl delete pv -l memtest=1 --wait=false >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
python3 - "$n" >"$dir/pvs.yaml" <<'PY'
import sys
for i in range(int(sys.argv[1])):
    print(f"""---
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
  hostPath: {{path: /tmp/memtest-{i}}}""")
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
  for r in $(seq "$rounds"); do
    rm -rf "$dir/run"
    /usr/bin/time -f "%M" -o "$dir/t" "$bin" -q run "$dir/tiny.yaml" --provider kube \
      --kubeconfig "$KUBECONFIG" -o "$dir/run" >/dev/null 2>&1
    cat "$dir/t"
  done | awk -v w="$1" 'NR==1{l=h=$1} {if($1<l)l=$1; if($1>h)h=$1} END{printf "%-22s peak RSS %.1f–%.1f MB\n", w, l/1024, h/1024}'
}
kubectl apply -f "$dir/pvs.yaml" >/dev/null
measure "$n foreign PVs"
kubectl delete pv -l memtest=1 >/dev/null
measure "no foreign PV"
