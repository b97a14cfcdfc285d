#!/usr/bin/env bash
# What first touching guest memory the host has taken back costs every vCPU. This VM's
# balloon reports free memory to the host (virtio_balloon free page reporting, 2 MiB blocks,
# ~2 s after they are freed), and the host backs such memory again only when the guest
# touches it. With cyclictest beside (SCHED_FIFO 90, every 1 ms on each CPU: the host's
# floor of scripts/lib/host-floor.sh), a thread on CPU 1 faults in MB MiB of anonymous memory
# two ways, ROUNDS times, interleaved:
#   fresh:  3 s after the last such memory was freed (so the host has taken it back);
#   reused: right after the same amount was touched and freed (the host still backs it).
# Both make the guest fault and zero the same number of pages. Prints per phase the touch
# time and the host's floor per CPU and on either CPU (the later of the two CPUs' wake-ups
# at each tick: how long *nothing* of ours could have run).
#
# Usage: scripts/fresh-memory-stalls.sh [ROUNDS] [MB]     (default 5 rounds of 1024 MiB)
set -euo pipefail
rounds=${1:-5}
mb=${2:-1024}
cd "$(dirname "$0")/.."
. scripts/lib/host-floor.sh
dir=$(mktemp -d)
trap 'host_floor_stop; rm -rf "$dir"' EXIT
touch_py='import mmap, os, sys, time
os.sched_setaffinity(0, {1})
size = int(sys.argv[1]) << 20
def touch():
    m = mmap.mmap(-1, size)
    t = time.perf_counter()
    for p in range(0, size, 4096):
        m[p] = 1
    m.close()
    return time.perf_counter() - t
if sys.argv[2] == "reused":
    touch()
    open(sys.argv[3], "w").write("go")
    while os.path.exists(sys.argv[3]):
        time.sleep(0.01)
print(f"{touch():.2f}")'
for r in $(seq "$rounds"); do
  for mode in fresh reused; do
    sleep 3
    rm -f "$dir/ready"
    if [ "$mode" = reused ]; then
      # Its first touch and free, unmeasured; the floor starts once it is done.
      python3 -c "$touch_py" "$mb" reused "$dir/ready" >"$dir/secs" &
      toucher=$!
      until [ -f "$dir/ready" ]; do sleep 0.01; done
      host_floor_start "$dir/floor"
      rm -f "$dir/ready"
      wait "$toucher"
    else
      host_floor_start "$dir/floor"
      python3 -c "$touch_py" "$mb" fresh >"$dir/secs"
    fi
    host_floor_stop
    read -r p50 p99 p999 mx n ep50 ep99 ep999 emx en <<<"$(host_floor_read "$dir/floor")"
    printf '%s %s %s %s %s %s\n' "$mode" "$(cat "$dir/secs")" "$p999" "$mx" "$ep999" "$emx" |
      tee -a "$dir/rows" | awk '{printf "round '"$r"' %-6s touch %s s; host per CPU p99.9 %.0f µs, max %.0f µs; on either CPU p99.9 %.0f µs, max %.0f µs\n", $1, $2, $3/1000, $4/1000, $5/1000, $6/1000}'
  done
done
python3 - "$dir/rows" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
for mode in ("fresh", "reused"):
    rs = [r for r in rows if r[0] == mode]
    rng = lambda i, k=1000: (lambda xs: f"{xs[0]:.0f}–{xs[-1]:.0f}")(sorted(float(r[i]) / k for r in rs))
    print(f"{mode}: {len(rs)} phases, touch {rng(1, 0.001)} ms; per CPU max {rng(3)} µs; "
          f"on either CPU p99.9 {rng(4)} µs, max {rng(5)} µs")
PY
