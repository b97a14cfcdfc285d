#!/usr/bin/env bash
# What a group snapshot costs and whether it is one cut, on the local provider (as root):
# ROUNDS (default 5) runs each of traces/group-snapshot-cut.yaml (a group snapshot of three
# volumes under chained ordered writes) and traces/separate-snapshots-cut.yaml (the same load,
# each volume snapshotted on its own). Per round it prints the check's verdict and, from its
# io/ID.cut.json (docs/replay.md, "Group snapshots: the cut and what it costs"): request → cut,
# cut → ready, the members' creation spread, each volume's write pause around its snapshot and
# its typical gap between writes; then min–max over the rounds. CNSREPLAY_BIN picks the binary
# (default: the release build, built here); the times are the provider's commands (fsfreeze,
# copies), not the binary's.
#
#   sudo scripts/bench-group-cut.sh [ROUNDS]
set -euo pipefail
rounds=${1:-5}
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "the local provider's block volumes need root" >&2; exit 1; }
bin=${CNSREPLAY_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release -q -p cnsreplay
  bin=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/cnsreplay
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for trace in group-snapshot-cut separate-snapshots-cut; do
  check=7
  [ "$trace" = separate-snapshots-cut ] && check=10
  for i in $(seq 1 "$rounds"); do
    "$bin" -q run "traces/$trace.yaml" --provider local \
      --validity=start.p99=10s,start.p99.9=10s,rate=100%,workers=100% -o "$work/$trace-$i" >/dev/null
    cp "$work/$trace-$i/io/$check.cut.json" "$work/$trace-$i.cut.json"
    rm -rf "$work/$trace-$i"
  done
done
python3 - "$work" "$rounds" <<'PY'
import json, sys
work, rounds = sys.argv[1], int(sys.argv[2])
for trace in ("group-snapshot-cut", "separate-snapshots-cut"):
    rows = [json.load(open(f"{work}/{trace}-{i}.cut.json")) for i in range(1, rounds + 1)]
    print(f"== {trace}")
    for i, c in enumerate(rows, 1):
        v = c["report"]["verdict"]
        what = f"cut at {v['cut_seq']}" if v["verdict"] == "consistent" else \
            f"missing volume {v.get('missing', {}).get('volume')} seq {v.get('missing', {}).get('seq')}"
        print(f"round {i}: {v['verdict']} ({what}); request→cut {c['request_to_cut_ns']/1e6:.1f} ms, "
              f"cut→ready {c['cut_to_ready_ns']/1e6:.1f} ms, spread {c['creation_spread_ns']/1e6:.1f} ms, "
              "pause " + ", ".join(f"{m['volume']} {m['pause_ns']/1e6:.0f} ms (gap {m['typical_gap_ns']/1e6:.1f} ms)"
                                   for m in c["members"]))
    verdicts = sorted({c["report"]["verdict"]["verdict"] for c in rows})
    rng = lambda k: f"{min(c[k] for c in rows)/1e6:.1f}–{max(c[k] for c in rows)/1e6:.1f} ms"
    pauses = [m["pause_ns"] for c in rows for m in c["members"]]
    print(f"{trace}: {rounds} rounds, verdicts {verdicts}; request→cut {rng('request_to_cut_ns')}, "
          f"cut→ready {rng('cut_to_ready_ns')}, creation spread {rng('creation_spread_ns')}, "
          f"write pause {min(pauses)/1e6:.0f}–{max(pauses)/1e6:.0f} ms")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
