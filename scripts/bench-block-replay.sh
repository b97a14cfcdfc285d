#!/usr/bin/env bash
# Block-trace replay on the local provider: a synthetic block trace (REQUESTS single `io`
# requests, Poisson arrivals at RATE requests/s over VOLUMES volumes declared in the header,
# 4 KiB, 70 % reads and 30 % writes as in MSR traces, or with MIX=all 70 % reads, 20 % writes,
# 5 % trims, 5 % flushes; random 4 KiB-aligned offsets of 1 GiB) is
# replayed ROUNDS times by the release `cnsreplay run --provider local` (raw block volumes, as
# the block importers declare them), each volume through
# its own I/O stream (O_DIRECT on the volume's image file). Per round, from summary.json, for
# the worst stream: the worst 1-s window's |issued − intended| / intended, issue lateness
# p50/p99/p99.9/max, dropped and reordered requests, CPU per request; and the verdict, judged
# with the targets as limits (`--validity rate=1%,start.p99=100us,start.p99.9=1ms`).
#
#   scripts/bench-block-replay.sh [REQUESTS] [RATE] [ROUNDS] [VOLUMES]
#                                  (default 1000000 at 50000/s, 5 rounds, 1 volume)
#
# Or replay a given trace instead of the synthetic one: TRACE=path/to/trace (any format
# `cnsreplay run` reads, e.g. `cnsreplay convert --from msr` output), SPEED=X to scale it;
# EXTRA="--local-io-spin 0" passes options to `cnsreplay run`.
# The run directories (and with them the volumes' image files, written once before each run)
# live under BASE (default /var/tmp, this machine's disk). BASE=/dev/shm puts them in memory
# (tmpfs: O_DIRECT from kernel 6.6, buffered before; the stream's flags say which) — no device
# in the way, which isolates the replay's own timing from the disk's stalls.
# TESTENV=path/to/testenv.env (a cluster of `TESTENV_REAL_NODE=1 testenv/up.sh`) replays in
# I/O stream pods on its real node instead: `--provider kube`, each volume a raw block PVC of
# the cluster's CSI driver, its requests streamed to `iogen replay` in a pod of its own.
# Results go in docs/PERFORMANCE.md (## Block-trace replay).
set -euo pipefail
n=${1:-1000000}
rate=${2:-50000}
rounds=${3:-5}
vols=${4:-1}
cd "$(dirname "$0")/.."
cargo build --release -q -p cnsreplay
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
bin=$target/release/cnsreplay
dir=$(mktemp -d "${BASE:-/var/tmp}/bench-block.XXXXXX")
trap 'rm -rf "$dir"' EXIT
if [[ -n ${TRACE:-} ]]; then
  trace=$TRACE
else
  python3 - "$n" "$rate" "$vols" "${MIX:-rw}" > "$dir/block.jsonl" <<'PY'
import json, random, sys
n, rate, vols, mix = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = random.Random(20)
size = 1 << 30
print(json.dumps({"format": "cnsreplay-trace", "version": 1,
                  "provenance": {"generator": "scripts/bench-block-replay.sh"},
                  "volumes": [{"name": f"d{i}", "size": size, "volume_mode": "block"} for i in range(vols)]}))
t = 0.0
out = sys.stdout
for i in range(n):
    t += rng.expovariate(rate)
    v = f"d{rng.randrange(vols)}"
    r = rng.random()
    if mix == "all":
        kind = "read" if r < 0.7 else "write" if r < 0.9 else "trim" if r < 0.95 else "flush"
    else:
        kind = "read" if r < 0.7 else "write"
    if kind == "flush":
        body = f'{{"volume":"{v}","kind":"flush"}}'
    else:
        off = rng.randrange(size // 4096) * 4096
        body = f'{{"volume":"{v}","kind":"{kind}","offset":{off},"len":4096}}'
    out.write(f'{{"at":{int(t * 1e9)},"id":{i + 1},"io":{body}}}\n')
PY
  "$bin" -q convert "$dir/block.jsonl" -o "$dir/block.cnsbin"
  trace=$dir/block.cnsbin
fi
provider=(--provider local)
if [[ -n ${TESTENV:-} ]]; then
  # shellcheck disable=SC1090
  source "$TESTENV"
  provider=(--provider kube --kubeconfig "$KUBECONFIG" --storage-class "$TESTENV_STORAGE_CLASS"
            --node-selector "$TESTENV_REAL_NODE_LABEL=true" --iogen-image "$TESTENV_IOGEN_IMAGE")
  # iogen's seccomp profile (io_uring allowed), which testenv installs on its node.
  if [[ -n ${TESTENV_IOGEN_SECCOMP:-} ]]; then
    provider+=(--iogen-seccomp-profile "$TESTENV_IOGEN_SECCOMP")
  fi
fi
rows=()
for r in $(seq "$rounds"); do
  rm -rf "$dir/run"
  "$bin" -q run "$trace" "${provider[@]}" -o "$dir/run" --speed "${SPEED:-1}" ${EXTRA:-} \
    --validity rate=1%,start.p99=100us,start.p99.9=1ms > /dev/null || true
  echo "round $r/$rounds:" >&2
  rows+=("$(python3 - "$dir/run/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
out = lambda *a: print(*a, file=sys.stderr)
us = lambda ns: f"{ns / 1000:.1f} µs"
worst_err, worst_p99, worst_p999, lost, cpu = 0.0, 0, 0, 0, 0.0
for f in s.get("io_streams", []):
    l, w = f["lateness"], f.get("worst_window") or {}
    out(f"  {f['volume']}: {f['requests']} requests, {f['intended_rate']:.0f}/s intended, "
        f"{f['achieved_rate']:.0f}/s achieved; worst second {100 * w.get('error', 0):.3f} % off "
        f"({w.get('issued')} of {w.get('intended')}, {f['windows']} seconds); lateness p50 "
        f"{us(l['p50'])} p99 {us(l['p99'])} p99.9 {us(l['p999'])} max {us(l['max'])}; "
        f"dropped {f['dropped']}, reordered {f['reordered']}, errors {f['errors']}; "
        f"{f['cpu_per_request_us']:.2f} µs CPU per request; {'; '.join(f['flags'][:3])}"
        + "".join(f"; {x}" for x in f["flags"] if "in pod" in x or "CPU" in x or "wake-ups" in x)
        + (f"; error: {f['error']}" if f.get("error") else ""))
    worst_err = max(worst_err, w.get("error", 0))
    worst_p99, worst_p999 = max(worst_p99, l["p99"]), max(worst_p999, l["p999"])
    lost += f["dropped"] + f["reordered"]
    cpu = max(cpu, f["cpu_per_request_us"])
v = s["validity"]
out(f"  verdict {v['verdict']}")
for c in v["checks"]:
    if not c["passed"]:
        out(f"    {c['check']}: {c['message']}")
met = worst_err <= 0.01 and worst_p99 <= 100_000 and lost == 0
print(worst_err, worst_p99, worst_p999, lost, cpu, int(met), v["verdict"])
PY
)")
done
printf '%s\n' "${rows[@]}" | python3 -c '
import sys
rows = [l.split() for l in sys.stdin if l.strip()]
err = [float(r[0]) * 100 for r in rows]
p99 = [int(r[1]) / 1000 for r in rows]
p999 = [int(r[2]) / 1000 for r in rows]
cpu = [float(r[4]) for r in rows]
met = sum(int(r[5]) for r in rows)
flagged = sum(1 for r in rows if r[5] == "0" and r[6] != "valid")
rng = lambda xs, d: f"{min(xs):.{d}f}–{max(xs):.{d}f}"
lost = sum(int(r[3]) for r in rows)
print(f"{len(rows)} rounds: worst 1-s window {rng(err, 3)} % off; issue lateness p99 {rng(p99, 1)} µs, "
      f"p99.9 {rng(p999, 1)} µs; dropped+reordered {lost}; CPU/request {rng(cpu, 2)} µs")
print(f"targets (window ≤ 1 %, p99 ≤ 100 µs, 0 lost) met in {met} of {len(rows)}; "
      f"{flagged} of the {len(rows) - met} others marked themselves invalid")
'
