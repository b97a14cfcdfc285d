#!/usr/bin/env bash
# Changed-block tracking on a 1 GiB volume, local provider (as root): ROUNDS (default 5) runs
# of each of two traces on a raw block volume of 1 GiB: `full` fills it with 1 MiB writes,
# `sparse` writes 128 MiB of random 4 KiB blocks; then snapshot s1, 64 MiB of random 4 KiB
# verify-mode writes (O_DIRECT), snapshot s2, `snapshot_allocated s1` and `snapshot_delta
# s1 → s2`. Per round it prints, from cbt/ID.json (docs/replay.md,
# "Changed-block tracking"): time to the first range, total time, ranges, bytes covered,
# ranges/s and MiB/s of each listing, the delta's bytes read and its written-set check; then
# min–max over the rounds. The snapshot images are full sparse copies unless the run
# directory's file system reflinks (RUNROOT picks where runs go; default a mktemp dir).
# CNSREPLAY_BIN picks the binary (default: the release build, built here). Then the same two
# volumes through cnsreplay-csi's SnapshotMetadata service, timed by a gRPC client over its
# Unix socket (crates/csi-driver/examples/cbt_timing.rs; CBT_TIMING_BIN picks its binary,
# default the release build, built here).
#
#   sudo scripts/bench-cbt.sh [ROUNDS]
set -euo pipefail
rounds=${1:-5}
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "the local provider's block volumes need root" >&2; exit 1; }
bin=${CNSREPLAY_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release -q -p cnsreplay
  bin=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/cnsreplay
fi
work=$(mktemp -d "${RUNROOT:-${TMPDIR:-/tmp}}/bench-cbt.XXXXXX")
trap 'rm -rf "$work"' EXIT
for kind in full sparse; do
  if [ "$kind" = full ]; then
    first='{at: 0, id: 1, io_phase: {workload: db, volume: data, pattern: sequential, read_pct: 0, block_size: 1Mi, load: {depth: 8}, bytes: 1Gi, direct: true}}'
  else
    first='{at: 0, id: 1, io_phase: {workload: db, volume: data, pattern: random, read_pct: 0, block_size: 4Ki, load: {depth: 16}, bytes: 128Mi, direct: true}}'
  fi
  cat > "$work/$kind.yaml" <<YAML
format: cnsreplay-trace
version: 3
provenance:
  generator: scripts/bench-cbt.sh
defaults:
  volume_size: 1Gi
volumes:
  - {name: data, volume_mode: block}
workloads:
  - {name: db, volumes: [data]}
events:
  - $first
  - {at: 15s, id: 2, snapshot: {volume: data, snapshot: s1}}
  - {at: 20s, id: 3, io_phase: {workload: db, volume: data, pattern: random, read_pct: 0, block_size: 4Ki, load: {depth: 16}, bytes: 64Mi, direct: true, verify: true}}
  - {at: 35s, id: 4, snapshot: {volume: data, snapshot: s2}}
  - {at: 40s, id: 5, snapshot_allocated: {snapshot: s1}}
  - {at: 41s, id: 6, snapshot_delta: {base: s1, snapshot: s2}}
  - {at: 45s, id: 7, detach: {workload: db}}
  - {at: 45s, id: 8, delete_snapshot: {snapshot: s1}}
  - {at: 45s, id: 9, delete_snapshot: {snapshot: s2}}
YAML
done
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for kind in full sparse; do
  for i in $(seq 1 "$rounds"); do
    "$bin" -q run "$work/$kind.yaml" --provider local \
      --validity=start.p99=10s,start.p99.9=10s,rate=100%,workers=100% -o "$work/run-$i" >/dev/null
    for id in 5 6; do cp "$work/run-$i/cbt/$id.json" "$work/$kind-$i-$id.json"; done
    echo "$kind round $i: $(grep -o '"outcome":"[a-z_]*"' "$work/run-$i/events.jsonl" | sort | uniq -c | tr -s ' \n' ' ')" >&2
    rm -rf "$work/run-$i"
  done
done
python3 - "$work" "$rounds" <<'PY'
import json, sys
work, rounds = sys.argv[1], int(sys.argv[2])
mib = 1 << 20
for kind, id, name in ((k, i, n) for k in ("full", "sparse")
                       for i, n in ((5, "snapshot_allocated s1"), (6, "snapshot_delta s1 → s2"))):
    rows = [json.load(open(f"{work}/{kind}-{i}-{id}.json")) for i in range(1, rounds + 1)]
    name = f"{kind}: {name}"
    print(f"== {name} (1 GiB volume, block size {rows[0]['block_size']})")
    for i, f in enumerate(rows, 1):
        t = f["timing"]
        line = (f"round {i}: first range {t['first_range_ns']/1e6:.2f} ms, total {t['total_ns']/1e6:.1f} ms, "
                f"{t['ranges']} ranges, {t['bytes']/mib:.1f} MiB, {t['ranges_per_s']:.0f} ranges/s, "
                f"{t['bytes_per_s']/mib:.0f} MiB/s covered")
        if t["read_bytes"]:
            line += f", {t['read_bytes']/mib:.0f} MiB read"
        c = f.get("check")
        if c:
            line += (f"; check: {c['missing']} of {c['blocks_in_window']} written blocks missing, "
                     f"{c['extra_blocks']} extra")
        print(line)
    def rng(key, scale, fmt):
        v = [f["timing"][key] / scale for f in rows]
        return f"{min(v):{fmt}}–{max(v):{fmt}}"
    print(f"{name}: {rounds} rounds; first range {rng('first_range_ns', 1e6, '.2f')} ms, "
          f"total {rng('total_ns', 1e6, '.1f')} ms, ranges {rng('ranges', 1, '.0f')}, "
          f"{rng('ranges_per_s', 1, '.0f')} ranges/s, {rng('bytes_per_s', mib, '.0f')} MiB/s covered, "
          f"{rng('read_bytes', mib, '.0f')} MiB read")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
timing=${CBT_TIMING_BIN:-}
if [ -z "$timing" ]; then
  cargo build --release -q -p csi-driver --example cbt_timing
  timing=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/examples/cbt_timing
fi
echo "== through cnsreplay-csi (gRPC over its Unix socket, 1024 ranges per response)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$timing" "$rounds" "$work"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
