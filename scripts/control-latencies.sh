#!/usr/bin/env bash
# The control operations' service times on testenv's cluster with cnsreplay-csi, for the sim's
# `real-node` preset (crates/provider-sim/src/preset.rs): N volumes (default 20) each created,
# snapshotted, restored from its snapshot, resized, its snapshot deleted, then both volumes
# deleted, every phase's N requests 0.5 s apart and the phases 15 s apart so that no operation
# waits for another. These operations touch the control plane and the driver, not a node: the
# cluster needs no real node (scripts/lib/real-node.sh starts one with it all the same).
#
#   scripts/control-latencies.sh [N] [ROUNDS]   (CNSREPLAY_TESTENV=…/testenv.env: a running cluster;
#                                               unset: one started and stopped here)
#
# Per round and op type it prints the service time (the provider's call: request until the
# operation's end condition, docs/kubernetes.md) p50, p90, p99 and max; then per op type the
# range of p50 and p90 over the rounds and the lognormal shape the preset takes from them
# (σ = ln(p90 / p50) / 1.2816, with the median p50 and p90 of all rounds).
set -euo pipefail
n=${1:-20}
rounds=${2:-3}
cd "$(dirname "$0")/.."
# The release build, `$work` and the cluster (CNSREPLAY_TESTENV's, or one started here and
# stopped on exit).
. scripts/lib/real-node.sh
bin=$target/release/cnsreplay
[ -n "${TESTENV_STORAGE_CLASS:-}" ] || { echo "$env_file: the cluster runs no cnsreplay-csi" >&2; exit 1; }
python3 - "$n" >"$work/trace.yaml" <<'PY'
import sys
n = int(sys.argv[1])
print("format: cnsreplay-trace\nversion: 1")
print("provenance: {generator: scripts/control-latencies.sh}")
print("defaults: {volume_size: 64Mi}\nevents:")
ms = lambda phase, i: f"{phase * 15_000 + i * 500}ms"
for i in range(n):
    print(f"  - {{at: {ms(0, i)}, create_volume: {{volume: v{i}}}}}")
for i in range(n):
    print(f"  - {{at: {ms(1, i)}, snapshot: {{volume: v{i}, snapshot: s{i}}}}}")
for i in range(n):
    print(f"  - {{at: {ms(2, i)}, create_volume: {{volume: r{i}, source: {{snapshot: s{i}}}}}}}")
for i in range(n):
    print(f"  - {{at: {ms(3, i)}, resize: {{volume: v{i}, size: 128Mi}}}}")
for i in range(n):
    print(f"  - {{at: {ms(4, i)}, delete_snapshot: {{snapshot: s{i}}}}}")
for i in range(n):
    print(f"  - {{at: {ms(5, i)}, delete_volume: {{volume: r{i}}}}}")
    print(f"  - {{at: {ms(5, i)}, delete_volume: {{volume: v{i}}}}}")
PY
echo "control-latencies: $n volumes, $rounds rounds; load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq "$rounds"); do
  "$bin" -q run "$work/trace.yaml" --provider kube --kubeconfig "$KUBECONFIG" \
    --storage-class "$TESTENV_STORAGE_CLASS" --snapshot-class "$TESTENV_SNAPSHOT_CLASS" \
    -o "$work/run$r" >"$work/out$r" 2>"$work/err$r" || { cat "$work/err$r" >&2; exit 1; }
  python3 - "$work/run$r/summary.json" "$r" <<'PY' | tee -a "$work/rows"
import json, sys
s = json.load(open(sys.argv[1]))
for op, o in sorted(s["ops"].items()):
    p = o["service"]
    assert o["failed"] == 0, f"{op}: {o['failed']} failed"
    print(f"round {sys.argv[2]} {op} n={o['count']} p50 {p['p50'] / 1e6:.1f} p90 {p['p90'] / 1e6:.1f} "
          f"p99 {p['p99'] / 1e6:.1f} max {p['max'] / 1e6:.1f} ms")
PY
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 - "$work/rows" <<'PY'
import math, re, statistics, sys
by = {}
for l in open(sys.argv[1]):
    m = re.match(r"round \d+ (\S+) n=\d+ p50 ([\d.]+) p90 ([\d.]+)", l)
    by.setdefault(m.group(1), []).append((float(m.group(2)), float(m.group(3))))
for op, v in by.items():
    p50 = statistics.median(a for a, _ in v)
    p90 = statistics.median(b for _, b in v)
    sigma = math.log(p90 / p50) / 1.2816 if p90 > p50 > 0 else 0.0
    print(f"{op}: p50 {min(a for a, _ in v):.1f}–{max(a for a, _ in v):.1f} ms, "
          f"p90 {min(b for _, b in v):.1f}–{max(b for _, b in v):.1f} ms over {len(v)} rounds; "
          f"lognormal median {p50:.0f} ms, σ {sigma:.2f}")
PY
