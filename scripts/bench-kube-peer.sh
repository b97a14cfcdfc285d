#!/usr/bin/env bash
# The Kubernetes provider side by side with a peer on the same local cluster: cnsreplay
# (`run --provider kube`) and peers/pvc-baseline (plain client-go; kube-burner's Go module is
# filtered on the module proxy here, answering 403) each create N PVCs of the cnsreplay-csi
# StorageClass open-loop at RATE/s, wait for Bound, then delete them. Both use client QPS 200 /
# burst 400 and measure create→Bound from each PVC's intended instant. Before each tool runs,
# the script waits until no PV of the class and no terminating namespace is left from the
# previous one. Alternates ROUNDS times
# and prints achieved rate and latency percentiles of both, and the ratios.
#
#   scripts/bench-kube-peer.sh [N] [RATE] [ROUNDS]     (default 100 PVCs at 10/s, 2 rounds)
#
# Uses the cluster named by CNSREPLAY_TESTENV (a testenv.env), or starts one (testenv/up.sh,
# with our CSI driver) and stops it at the end. Results go in docs/PERFORMANCE.md.
set -euo pipefail
n=${1:-100}
rate=${2:-10}
rounds=${3:-2}
cd "$(dirname "$0")/.."
repo=$PWD
cargo build --release -q -p cnsreplay
cargo build -q -p csi-driver
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
peer_bin=$HOME/.cache/cnsreplay/peers/bin
mkdir -p "$peer_bin"
(cd peers/pvc-baseline && go build -trimpath -o "$peer_bin/pvc-baseline" .)
tmp=$(mktemp -d /tmp/cnsreplay-bench-kube.XXXXXX)
cluster=
finish() {
  if [ -n "$cluster" ]; then TESTENV_DIR=$cluster testenv/down.sh >/dev/null 2>&1 || true; fi
  rm -rf "$tmp"
}
trap finish EXIT
if [ -z "${CNSREPLAY_TESTENV:-}" ]; then
  cluster=$tmp/cluster
  mkdir -p "$cluster"
  CNSREPLAY_TESTENV=$(TESTENV_DIR=$cluster TESTENV_APISERVER_PORT=0 \
    TESTENV_CSI_BIN="$target/debug/cnsreplay-csi" testenv/up.sh)
fi
# shellcheck disable=SC1090
. "$CNSREPLAY_TESTENV"
[ -n "${TESTENV_STORAGE_CLASS:-}" ] || { echo "the cluster has no cnsreplay-csi StorageClass" >&2; exit 2; }

python3 - "$n" "$rate" "$TESTENV_STORAGE_CLASS" > "$tmp/pvcs.yaml" <<'PY'
import sys
n, rate, sc = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
print("format: cnsreplay-trace\nversion: 1\nprovenance:\n  generator: scripts/bench-kube-peer.sh")
print(f"defaults:\n  storage_class: {sc}\n  volume_size: 16Mi\n  access_mode: ReadWriteOnce\nevents:")
gap = 1e9 / rate
end = int((n - 1) * gap) + 20_000_000_000
for i in range(n):
    print(f"  - {{at: {int(i * gap)}, id: {i + 1}, create_volume: {{volume: pvc-{i}}}}}")
for i in range(n):
    print(f"  - {{at: {end + i * 1_000_000}, id: {n + i + 1}, delete_volume: {{volume: pvc-{i}}}}}")
PY

ours() { # round
  "$target/release/cnsreplay" -q run "$tmp/pvcs.yaml" --provider kube --kubeconfig "$KUBECONFIG" \
    --kube-qps 200 --kube-burst 400 -o "$tmp/run-$1" --json > "$tmp/ours-$1.json" || true
  python3 - "$tmp/run-$1" <<'PY'
import json, sys
run = sys.argv[1]
recs = [json.loads(l) for l in open(f"{run}/events.jsonl")]
cv = sorted((r for r in recs if r["op"] == "create_volume"), key=lambda r: r["dispatched"])
ok = [r for r in cv if r["outcome"] == "ok"]
lat = sorted((r["completed"] - r["intended"]) / 1e6 for r in ok)
def q(p):
    return lat[min(len(lat) - 1, max(0, int(p * len(lat) + 0.999999) - 1))] if lat else float("nan")
span = (cv[-1]["dispatched"] - cv[0]["dispatched"]) / 1e9 if len(cv) > 1 else 0
# PVCs Bound per second from the first intended create to the last Bound (the peer's too).
bound_span = (max(r["completed"] for r in ok) - cv[0]["intended"]) / 1e9 if ok else 0
# Intended instant -> the create's response (the peer times its create call the same way).
call = sorted((p["at"] - r["intended"]) / 1e6 for r in ok for p in r["phases"] if p["name"] == "created")
def qc(p):
    return call[min(len(call) - 1, max(0, int(p * len(call) + 0.999999) - 1))] if call else float("nan")
print(json.dumps({"tool": "cnsreplay", "count": len(cv), "failed": len(cv) - len(ok),
    "achieved_create_rate": (len(cv) - 1) / span if span else 0,
    "bound_throughput": len(ok) / bound_span if bound_span else 0,
    "create_call": {"p50_ms": qc(.5), "p99_ms": qc(.99)},
    "create_to_bound": {"p50_ms": q(.5), "p90_ms": q(.9), "p99_ms": q(.99), "max_ms": q(1)}}))
PY
}
peer() {
  "$peer_bin/pvc-baseline" -kubeconfig "$KUBECONFIG" -namespace default \
    -storage-class "$TESTENV_STORAGE_CLASS" -count "$n" -rate "$rate" -size 16Mi \
    -qps 200 -burst 400
}
# Each round starts on a settled cluster: PVs of the class still being deleted (and their
# backing images) from the previous tool's run would slow the next one down.
settle() {
  local left
  for _ in $(seq 1 300); do
    left=$(kubectl get pv -o jsonpath="{range .items[?(@.spec.storageClassName==\"$TESTENV_STORAGE_CLASS\")]}{.metadata.name}{'\n'}{end}" | grep -c . || true)
    # A run namespace cnsreplay deleted may still be terminating (its controller busy).
    left=$((left + $(kubectl get ns -o jsonpath="{range .items[?(@.status.phase==\"Terminating\")]}{.metadata.name}{'\n'}{end}" | grep -c . || true)))
    [ "$left" -eq 0 ] && return 0
    sleep 1
  done
  echo "PVs of $TESTENV_STORAGE_CLASS still present after 300 s" >&2
  return 1
}
for r in $(seq 1 "$rounds"); do
  settle
  ours "$r" > "$tmp/o$r.json"
  settle
  peer > "$tmp/p$r.json"
done
python3 - "$tmp" "$rounds" "$n" "$rate" <<'PY'
import json, sys
tmp, rounds, n, rate = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
print(f"{n} PVCs at {rate}/s, StorageClass cnsreplay-csi, client QPS 200 / burst 400")
print("rate/s: creates issued per second; Bound/s: PVCs Bound per second from the first intended")
print("create to the last Bound (the throughput); create->Bound from each PVC's intended instant")
print(f"{'round':>5} {'tool':<26} {'rate/s':>7} {'Bound/s':>7} {'failed':>6} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8}")
ratios = []
for r in range(1, rounds + 1):
    o = json.load(open(f"{tmp}/o{r}.json")); p = json.load(open(f"{tmp}/p{r}.json"))
    for x in (o, p):
        b = x["create_to_bound"]
        print(f"{r:>5} {x['tool']:<26} {x['achieved_create_rate']:>7.2f} {x['bound_throughput']:>7.2f} {x['failed']:>6} "
              f"{b['p50_ms']:>8.1f} {b['p90_ms']:>8.1f} {b['p99_ms']:>8.1f} {b['max_ms']:>8.1f}")
    ob, pb = o["create_to_bound"], p["create_to_bound"]
    tr = o["bound_throughput"] / p["bound_throughput"] if p["bound_throughput"] else float("nan")
    ratios.append(tr)
    print(f"{r:>5} {'ratio cnsreplay/peer':<26} {o['achieved_create_rate'] / p['achieved_create_rate']:>7.3f} {tr:>7.3f} {'':>6} "
          f"{ob['p50_ms'] / pb['p50_ms']:>8.3f} {ob['p90_ms'] / pb['p90_ms']:>8.3f} {ob['p99_ms'] / pb['p99_ms']:>8.3f}")
print(f"Bound/s ratio cnsreplay/peer over {rounds} rounds: {min(ratios):.3f}-{max(ratios):.3f}")
for r in range(1, rounds + 1):
    o = json.load(open(f"{tmp}/o{r}.json")); p = json.load(open(f"{tmp}/p{r}.json"))
    print(f"round {r} create call (intended -> response) p50/p99 ms: cnsreplay "
          f"{o['create_call']['p50_ms']:.1f}/{o['create_call']['p99_ms']:.1f}, "
          f"client-go {p['create_call']['p50_ms']:.1f}/{p['create_call']['p99_ms']:.1f}")
PY
