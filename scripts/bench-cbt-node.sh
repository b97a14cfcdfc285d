#!/usr/bin/env bash
# Changed-block tracking through Kubernetes on a 1 GiB volume, on testenv's real node:
# cnsreplay-csi behind testenv's stand-in for the external-snapshot-metadata sidecar
# (testenv/README.md, "Changed-block tracking"), called as a backup application calls it
# (docs/kubernetes.md, "Changed-block tracking"). ROUNDS (default 5) runs of each of
# scripts/bench-cbt.sh's two volumes, here in iogen pods: `full` fills the raw block volume
# with 1 MiB writes, `sparse` writes 128 MiB of random 4 KiB blocks; then snapshot s1, 64 MiB
# of random 4 KiB verify-mode writes (O_DIRECT), snapshot s2, `snapshot_allocated s1`,
# `snapshot_delta s1 → s2`. Per round, from cbt/ID.json: what a client waits for before the
# call (resolve the snapshots and the service, the TokenRequest, TLS), time to the first
# range, total, ranges, MiB covered, ranges/s and MiB/s, and the delta's check against the
# writer's written set (its pod's log); then min–max over the rounds.
#
# It runs as the testenv admin with the token of cnsreplay/cnsreplay (deploy/rbac/all is
# applied, which binds that account). CNSREPLAY_BIN picks the binary (default: the release
# build, built here).
#
#   CNSREPLAY_TESTENV=$TESTENV_DIR/testenv.env scripts/bench-cbt-node.sh [ROUNDS]
set -euo pipefail
rounds=${1:-5}
cd "$(dirname "$0")/.."
[ -n "${CNSREPLAY_TESTENV:-}" ] || { echo "CNSREPLAY_TESTENV: a testenv.env of a running testenv with the real node" >&2; exit 2; }
. "$CNSREPLAY_TESTENV"
[ -n "${TESTENV_SNAPSHOT_METADATA:-}" ] || { echo "this testenv serves no SnapshotMetadataService (build snapshot-metadata-sidecar before up.sh)" >&2; exit 2; }
[ -n "${TESTENV_REAL_NODE_LABEL:-}" ] || { echo "this testenv has no real node" >&2; exit 2; }
bin=${CNSREPLAY_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release -q -p cnsreplay
  bin=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/cnsreplay
fi
kubectl apply -k deploy/rbac/all >/dev/null
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-cbt-node.XXXXXX")
trap 'rm -rf "$work"' EXIT
for kind in full sparse; do
  if [ "$kind" = full ]; then
    first='pattern: sequential, read_pct: 0, block_size: 1Mi, load: {depth: 8}, bytes: 1Gi'
  else
    first='pattern: random, read_pct: 0, block_size: 4Ki, load: {depth: 16}, bytes: 128Mi'
  fi
  cat > "$work/$kind.yaml" <<YAML
format: cnsreplay-trace
version: 3
provenance:
  generator: scripts/bench-cbt-node.sh
defaults:
  storage_class: cnsreplay-csi
  snapshot_class: cnsreplay-csi
  volume_size: 1Gi
events:
  - {at: 0, id: 1, create_volume: {volume: data, volume_mode: block}}
  - {at: 1s, id: 2, attach: {workload: db, volumes: [data]}}
  - {at: 2s, id: 3, io_phase: {workload: db, volume: data, $first, direct: true}}
  - {at: 45s, id: 4, snapshot: {volume: data, snapshot: s1}}
  - {at: 47s, id: 5, io_phase: {workload: db, volume: data, pattern: random, read_pct: 0, block_size: 4Ki, load: {depth: 16}, bytes: 64Mi, direct: true, verify: true}}
  - {at: 80s, id: 6, snapshot: {volume: data, snapshot: s2}}
  - {at: 83s, id: 7, snapshot_allocated: {snapshot: s1}}
  - {at: 84s, id: 8, snapshot_delta: {base: s1, snapshot: s2}}
  - {at: 90s, id: 9, detach: {workload: db}}
  - {at: 90s, id: 10, delete_snapshot: {snapshot: s1}}
  - {at: 90s, id: 11, delete_snapshot: {snapshot: s2}}
  - {at: 91s, id: 12, delete_volume: {volume: data}}
YAML
done
seccomp=()
[ -z "${TESTENV_IOGEN_SECCOMP:-}" ] || seccomp=(--iogen-seccomp-profile "$TESTENV_IOGEN_SECCOMP")
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for kind in full sparse; do
  for i in $(seq 1 "$rounds"); do
    "$bin" -q run "$work/$kind.yaml" --provider kube --iogen-image "$TESTENV_IOGEN_IMAGE" \
      "${seccomp[@]}" --node-selector "$TESTENV_REAL_NODE_LABEL=true" \
      --validity=start.p99=10s,start.p99.9=10s,rate=100%,workers=100% -o "$work/run-$i" >/dev/null || true
    echo "$kind round $i: $(grep -o '"outcome":"[a-z_]*"' "$work/run-$i/events.jsonl" | sort | uniq -c | tr -s ' \n' ' ')" >&2
    python3 - "$work/run-$i/events.jsonl" <<'PY'
import json, sys
ev = {e["id"]: e for e in map(json.loads, open(sys.argv[1]))}
for w, s in ((3, 4), (5, 6)):
    if ev[w].get("completed", 1 << 62) >= ev[s]["started"]:
        sys.exit(f"writer {w} ended after snapshot {s} was requested: the round does not count")
bad = [e for e in ev.values() if e["outcome"] != "ok"]
if bad:
    sys.exit(f"failed: {bad[0]}")
PY
    for id in 7 8; do cp "$work/run-$i/cbt/$id.json" "$work/$kind-$i-$id.json"; done
    rm -rf "$work/run-$i"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 - "$work" "$rounds" <<'PY'
import json, sys
work, rounds = sys.argv[1], int(sys.argv[2])
mib = 1 << 20
for kind, id, name in ((k, i, n) for k in ("full", "sparse")
                       for i, n in ((7, "snapshot_allocated s1"), (8, "snapshot_delta s1 → s2"))):
    rows = [json.load(open(f"{work}/{kind}-{i}-{id}.json")) for i in range(1, rounds + 1)]
    name = f"{kind}: {name}"
    print(f"== {name} (1 GiB volume, {rows[0]['block_metadata_type']}, through {rows[0]['service']['name']}'s SnapshotMetadataService)")
    for i, f in enumerate(rows, 1):
        t, s = f["timing"], f["setup"]
        print(f"round {i}: resolve {s['resolve_ns']/1e6:.1f} ms, token {s['token_ns']/1e6:.1f} ms, "
              f"TLS {s['connect_ns']/1e6:.1f} ms; first range {t['first_range_ns']/1e6:.2f} ms, "
              f"total {t['total_ns']/1e6:.1f} ms, {t['ranges']} ranges in {f['responses']} responses, "
              f"{t['bytes']/mib:.1f} MiB, {t['ranges_per_s']:.0f} ranges/s, {t['bytes_per_s']/mib:.0f} MiB/s covered"
              + (f"; check: {f['check']['missing']} of {f['check']['blocks_in_window']} written blocks "
                 f"missing, {f['check']['extra_blocks']} extra" if f.get("check") else ""))
    def rng(get, scale, fmt):
        v = [get(f) / scale for f in rows]
        return f"{min(v):{fmt}}–{max(v):{fmt}}"
    t = lambda k: lambda f: f["timing"][k]
    s = lambda k: lambda f: f["setup"][k]
    print(f"{name}: {rounds} rounds; before the call: resolve {rng(s('resolve_ns'), 1e6, '.1f')} ms, "
          f"token {rng(s('token_ns'), 1e6, '.1f')} ms, TLS {rng(s('connect_ns'), 1e6, '.1f')} ms; "
          f"first range {rng(t('first_range_ns'), 1e6, '.2f')} ms, total {rng(t('total_ns'), 1e6, '.1f')} ms, "
          f"ranges {rng(t('ranges'), 1, '.0f')}, {rng(t('ranges_per_s'), 1, '.0f')} ranges/s, "
          f"{rng(t('bytes_per_s'), mib, '.0f')} MiB/s covered")
PY
