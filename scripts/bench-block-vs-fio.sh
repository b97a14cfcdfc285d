#!/usr/bin/env bash
# Block-trace replay timing, cnsreplay against real fio, side by side in one run.
#
#   scripts/bench-block-vs-fio.sh [REQUESTS] [RATE] [ROUNDS]   (default 200000 at 20000/s, 5)
#
# One synthetic single-volume block trace (Poisson arrivals at RATE requests/s, 4 KiB, 70 %
# reads / 30 % writes at random 4 KiB-aligned offsets of 1 GiB) is replayed, alternating, by
#  - cnsreplay: `cnsreplay run TRACE --provider local` (the volume's I/O stream: io_uring,
#    O_DIRECT, on the volume's sparse image file);
#  - fio 3.x: the same trace exported with `cnsreplay convert --to fio-iolog`, replayed with
#    `--read_iolog --replay_redirect=FILE --ioengine=io_uring --direct=1 --iodepth=128` on a
#    1 GiB file in the same directory (written once first, as cnsreplay writes its image), with
#    a per-request latency log (`--write_lat_log --log_offset=1`; fio refuses `--write_iolog`
#    while it replays one: "read iolog overrides write_iolog").
# Timing error per request: cnsreplay's is its issue lateness (issued − intended from the run
# origin; it never issues early); fio's is |(issued − first issued) − (intended − first
# intended)|, its issue instant being the log's completion time minus the request's total
# latency. fio 3.33 stamps that log in whole milliseconds, so fio's error is known to ±1 ms
# (enough for the tens of ms its replay drifts; see fio issue #1537); it is measured against
# its own first request, which is kinder to fio. Requests are matched by (direction, offset)
# in trace order. CPU per request: the whole process (user + system, getrusage of
# the child) over the requests, both tools (cnsreplay's includes creating and writing its
# 1 GiB image, fio's file is written beforehand), and the I/O path alone: cnsreplay's stream
# thread and its kernel workers (the summary's `cpu_per_request_us`) against fio's job
# (`(usr_cpu + sys_cpu) × job_runtime / ios`). EXTRA="--local-io-spin 0" passes options to
# `cnsreplay run`. Prints per round and the ranges; results go in
# docs/PERFORMANCE.md (## Block-trace replay). Needs fio (Debian's package) with io_uring.
set -euo pipefail
n=${1:-200000}
rate=${2:-20000}
rounds=${3:-5}
cd "$(dirname "$0")/.."
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 2; }
cargo build --release -q -p cnsreplay
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
bin=$target/release/cnsreplay
dir=$(mktemp -d /tmp/bench-block-fio.XXXXXX)
trap 'rm -rf "$dir"' EXIT
python3 - "$n" "$rate" > "$dir/block.jsonl" <<'PY'
import json, random, sys
n, rate = int(sys.argv[1]), float(sys.argv[2])
rng = random.Random(7)
size = 1 << 30
print(json.dumps({"format": "cnsreplay-trace", "version": 1,
                  "provenance": {"generator": "scripts/bench-block-vs-fio.sh"},
                  "volumes": [{"name": "d0", "size": size, "volume_mode": "block"}]}))
t = 0.0
for i in range(n):
    t += rng.expovariate(rate)
    kind = "read" if rng.random() < 0.7 else "write"
    off = rng.randrange(size // 4096) * 4096
    sys.stdout.write(f'{{"at":{int(t * 1e9)},"id":{i + 1},"io":{{"volume":"d0","kind":"{kind}",'
                     f'"offset":{off},"len":4096}}}}\n')
PY
"$bin" -q convert "$dir/block.jsonl" -o "$dir/block.cnsbin"
"$bin" -q convert "$dir/block.jsonl" --to fio-iolog -o "$dir/block.iolog"
echo "fio: $(fio --version)  kernel: $(uname -r)  cpus: $(nproc)  requests: $n at $rate/s  $(date -u +%FT%TZ)"
# Runs a command, prints the child's user + system CPU seconds on fd 3.
cpu_of() { python3 -c '
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_utime + r.ru_stime)' "$@"; }
rows=()
for r in $(seq "$rounds"); do
  rm -rf "$dir/run" "$dir"/lat_*.log
  # shellcheck disable=SC2086
  ours_cpu=$(cpu_of "$bin" -q run "$dir/block.cnsbin" --provider local -o "$dir/run" ${EXTRA:-})
  [[ -f $dir/fio.dat ]] || dd if=/dev/urandom of="$dir/fio.dat" bs=1M count=1024 status=none
  fio_cpu=$(cpu_of fio --name=replay --read_iolog="$dir/block.iolog" \
    --replay_redirect="$dir/fio.dat" --ioengine=io_uring --direct=1 --iodepth=128 \
    --write_lat_log="$dir/lat" --log_offset=1 --output-format=json --output="$dir/fio.json")
  rows+=("$(python3 - "$dir" "$n" "$ours_cpu" "$fio_cpu" "$r" <<'PY'
import json, sys
d, n, ours_cpu, fio_cpu, r = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
s = json.load(open(f"{d}/run/summary.json"))
f = s["io_streams"][0]
ol = f["lateness"]
from collections import defaultdict, deque
want, first, total = defaultdict(deque), None, 0
for line in open(f"{d}/block.iolog"):
    p = line.split()
    if len(p) == 5 and p[2] in ("read", "write"):
        us = int(p[0])
        first = us if first is None else first
        want[(0 if p[2] == "read" else 1, int(p[3]))].append(us - first)
        total += 1
issued = []
for line in open(f"{d}/lat_lat.1.log"):
    t, lat, dd, _bs, off = [x.strip() for x in line.split(",")][:5]
    issued.append((int(t) * 1000 - int(lat) / 1000, int(dd), int(off)))
issued.sort()
err = []
for it, dd, off in issued:
    q = want[(dd, off)]
    if q:
        err.append(abs((it - issued[0][0]) - q.popleft()))
err.sort()
q = lambda xs, p: xs[min(len(xs) - 1, int(p * len(xs)))]
fp99, fp999, fmax = q(err, 0.99), q(err, 0.999), err[-1]
fio = json.load(open(f"{d}/fio.json"))["jobs"][0]
done = fio["read"]["total_ios"] + fio["write"]["total_ios"]
oc, fc = ours_cpu * 1e6 / n, fio_cpu * 1e6 / n
oio = f["cpu_per_request_us"]
fio_io = (fio["usr_cpu"] + fio["sys_cpu"]) / 100 * fio["job_runtime"] / 1e3 * 1e6 / max(done, 1)
print(f"round {r}: cnsreplay lateness p50 {ol['p50']/1e3:.1f} p99 {ol['p99']/1e3:.1f} p99.9 {ol['p999']/1e3:.1f} "
      f"max {ol['max']/1e3:.1f} µs, {f['dropped']} dropped, {f['reordered']} reordered, "
      f"{oc:.2f} µs CPU/request | fio timing error p50 {q(err, 0.5) / 1e3:.1f} p99 {fp99 / 1e3:.1f} p99.9 "
      f"{fp999 / 1e3:.1f} max {fmax / 1e3:.1f} ms (±1 ms), {done} of {total} done ({len(err)} in its log), "
      f"{fc:.2f} µs CPU/request | CPU ratio ours/fio: process {oc / fc:.3f}, I/O path {oio:.2f}/{fio_io:.2f} µs = {oio / fio_io:.3f}",
      file=sys.stderr)
print(ol["p99"] / 1e3, fp99 / 1e3, oc / fc, ol["p999"] / 1e3, fp999 / 1e3, oio / fio_io)
PY
)")
done
printf '%s\n' "${rows[@]}" | python3 -c '
import sys
rows = [[float(x) for x in l.split()] for l in sys.stdin if l.strip()]
rng = lambda i, d: f"{min(r[i] for r in rows):.{d}f}–{max(r[i] for r in rows):.{d}f}"
print(f"{len(rows)} rounds: timing error p99 cnsreplay {rng(0, 1)} µs, fio {rng(1, 1)} ms; "
      f"p99.9 cnsreplay {rng(3, 1)} µs, fio {rng(4, 1)} ms; CPU per request ours/fio: process "
      f"{rng(2, 3)}, I/O path {rng(5, 3)}")
'
