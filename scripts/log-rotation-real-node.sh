#!/usr/bin/env bash
# An io_phase long enough for the kubelet to rotate its pod's log several times, on testenv's
# real node (containerLogMaxSize 1Mi): does every interval of iogen's interval log reach the
# run directory? Results go in docs/PERFORMANCE.md ("Log rotation on the real node").
#
#   scripts/log-rotation-real-node.sh [MINUTES]        (default 30)
#
# One volume, one pod, one io_phase of MINUTES at 200 IOPS (random 4 KiB, 70 % reads), run by
# the release `cnsreplay run --provider kube` (iogen pods write a 200 ms interval log to
# stdout; the provider follows the pod log). Uses the cluster of CNSREPLAY_TESTENV (a
# testenv.env with a real node) or starts its own and stops it on exit. Prints the kubelet's
# rotations of the pod's log (the rotated files it kept, and the log's total size), and per
# histogram tag the intervals in RUNDIR/io/<id>.hlog, the intervals expected from iogen's
# elapsed time, and every gap between consecutive intervals longer than 1.5 intervals.
set -euo pipefail
minutes=${1:-30}
cd "$(dirname "$0")/.."
. scripts/lib/real-node.sh
secs=$((minutes * 60))
cat >"$work/trace.yaml" <<EOF
format: cnsreplay-trace
version: 1
provenance: {generator: scripts/log-rotation-real-node.sh}
defaults: {volume_size: 1Gi}
events:
  - {at: 0s, create_volume: {volume: v}}
  - {at: 1s, attach: {workload: w, volumes: [v]}}
  - {at: 20s, io_phase: {workload: w, volume: v, pattern: random, read_pct: 70, block_size: 4Ki, load: {rate: {iops: 200}}, duration: ${secs}s, region: 256Mi}}
  - {at: $((secs + 90))s, detach: {workload: w}}
  - {at: $((secs + 91))s, delete_volume: {volume: v}}
EOF
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
# Snapshot the kubelet's files of the iogen container while it runs (rotated files are
# compressed and the oldest removed after containerLogMaxFiles).
(
  while sleep 20; do
    find "$TESTENV_POD_LOGS" -path '*_w-io-*' -type f -printf '%f %s\n' 2>/dev/null | sort >>"$work/files"
  done
) &
watcher=$!
"$target/release/cnsreplay" -q run "$work/trace.yaml" --provider kube --kubeconfig "$KUBECONFIG" \
  --storage-class "$TESTENV_STORAGE_CLASS" --node-selector "$TESTENV_REAL_NODE_LABEL=true" \
  --iogen-image "$TESTENV_IOGEN_IMAGE" --pause-image "$TESTENV_REGISTRY/cnsreplay/pause:testenv" \
  --timeout "io_phase=$((secs + 300))s" -o "$work/run" >/dev/null || true
kill "$watcher" 2>/dev/null || true
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 - "$work/run" "$work/files" <<'PY'
import json, re, sys, collections, glob, os
run, files = sys.argv[1:3]
rotated = set()
for line in open(files) if os.path.exists(files) else []:
    name = line.split()[0]
    # A rotated file is seen first as 0.log.<stamp>, later compressed as 0.log.<stamp>.gz:
    # one rotation.
    if name != "0.log":
        rotated.add(name.removesuffix(".gz"))
print(f"kubelet rotations of the iogen container's log seen: {len(rotated)} ({', '.join(sorted(rotated)) or 'none'})")
rec = [json.loads(l) for l in open(f"{run}/events.jsonl")]
io = [r for r in rec if r["op"] == "io_phase"]
assert io, "no io_phase record"
r = io[0]
print(f"io_phase: {r['outcome']} {r.get('error_class') or ''} {r.get('error') or ''}")
hlog = f"{run}/io/{r['id']}.hlog"
log = f"{run}/io/{r['id']}.log"
print(f"followed log: {os.path.getsize(log)} bytes")
tags = collections.defaultdict(list)
for line in open(hlog):
    m = re.match(r"Tag=([^,]+),([0-9.]+),([0-9.]+),", line)
    if m:
        tags[m.group(1)].append((float(m.group(2)), float(m.group(3))))
for tag, iv in sorted(tags.items()):
    iv.sort()
    length = sorted(l for _, l in iv)[len(iv) // 2]
    span = iv[-1][0] + iv[-1][1] - iv[0][0]
    expected = round(span / length)
    gaps = [(a, b) for (a, _), (b, _) in zip(iv, iv[1:]) if b - a > 1.5 * length]
    print(f"{tag:24} {len(iv):6} intervals of {length:.3f} s over {span:8.1f} s "
          f"(expected {expected}), gaps {len(gaps)}" + (f": {gaps[:5]}" if gaps else ""))
PY
