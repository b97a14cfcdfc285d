#!/usr/bin/env bash
# Whose are the misses of the engine benchmark: runs the round of scripts/bench-replay.sh
# (1000000 events at 100000/s on the sim) ROUNDS times with cyclictest beside it (SCHED_FIFO
# 90, every 1 ms on each CPU) and `perf record` of every scheduler switch and of a 4 kHz clock
# sample per CPU (with kernel call chains), and hands each round to
# scripts/miss-attribution.py: a late event is the host's when both CPUs ran nothing (no
# switch, no clock sample) for as long as it was late beyond the target. Prints a line per
# round and the late episodes of the rounds that missed, and keeps those rounds (run dir and
# perf text) under KEEP (default: a temporary directory, printed).
#
# Usage: scripts/miss-attribution.sh ROUNDS
#        env CNSREPLAY, GEN_TRACE: binaries already built (else built here, release)
#        env FREEZE=PERIOD_MS:MS: also stop one random thread of the process other than the
#        timing lanes for MS every PERIOD_MS (scripts/thread-freeze.py)
#        env PERF=0: without perf (nothing is then the host's: only the rounds' counts)
set -euo pipefail
rounds=${1:?usage: $0 ROUNDS}
cd "$(dirname "$0")/.."
command -v perf >/dev/null ||
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends linux-perf >/dev/null
. scripts/lib/sim-bench.sh
. scripts/lib/host-floor.sh
sim_bench_prepare 1000000 100000
keep=${KEEP:-$(mktemp -d)}
mkdir -p "$keep"
trap 'host_floor_stop; rm -rf "$dir"' EXIT
echo "rounds that missed are kept under $keep" >&2
for r in $(seq "$rounds"); do
  rm -rf "$dir/run" "$dir/perf.data" "$dir/freeze.log"
  host_floor_start "$dir/floor"
  offset=$(python3 -c 'import time; print(f"{time.time() - time.clock_gettime(time.CLOCK_MONOTONIC):.9f}")')
  rec=(perf record -q -a -k CLOCK_MONOTONIC -e sched:sched_switch -e 'cpu-clock/freq=4000/' -g -o "$dir/perf.data" --)
  [ "${PERF:-1}" != 0 ] || rec=()
  "${rec[@]}" "$CNSREPLAY" -q run "$dir/bench.cnsbin" --provider sim -o "$dir/run" "${SIM_BENCH_ARGS[@]}" \
    >/dev/null 2>"$dir/err" &
  perf_pid=$! freeze_pid=
  if [ -n "${FREEZE:-}" ]; then
    # Under perf, the replay is perf's child: wait for it to appear.
    pid=$perf_pid
    [ "${PERF:-1}" = 0 ] ||
      until pid=$(pgrep -P "$perf_pid" -x "$(basename "$CNSREPLAY" | cut -c1-15)"); do sleep 0.05; done
    python3 scripts/thread-freeze.py "$pid" "${FREEZE%%:*}" "${FREEZE##*:}" "$dir/freeze.log" &
    freeze_pid=$!
  fi
  wait "$perf_pid" $freeze_pid
  host_floor_stop
  if [ "${PERF:-1}" = 0 ]; then
    : >"$dir/perf.txt"
  else
    perf script -i "$dir/perf.data" -F comm,tid,cpu,time,event,trace,ip,sym --ns 2>/dev/null >"$dir/perf.txt"
  fi
  # One pass over the perf text: the round's line, then its episodes (shown if it missed).
  out=$(python3 scripts/miss-attribution.py "$dir/run" "$dir/perf.txt" "$offset" --episodes)
  line=${out%%$'\n'*}
  echo "round $r/$rounds: ${line#*: }" | tee -a "$dir/rows"
  if [ -f "$dir/freeze.log" ]; then
    echo "  $(wc -l <"$dir/freeze.log") threads stopped ($(cut -d' ' -f4 "$dir/freeze.log" | sort | uniq -c | tr -s ' ' | tr '\n' ','))"
  fi
  case $line in
  *" met") ;;
  *)
    printf '%s\n' "$out" | tail -n +2
    mkdir -p "$keep/round-$r"
    mv "$dir/run" "$dir/perf.txt" "$keep/round-$r/"
    [ ! -f "$dir/freeze.log" ] || mv "$dir/freeze.log" "$keep/round-$r/"
    echo "$offset" >"$keep/round-$r/offset"
    ;;
  esac
done
python3 - "$dir/rows" <<'PY'
import sys
rows = [l.split()[-1] for l in open(sys.argv[1])]
n = len(rows)
print(f"{n} rounds: targets met in {rows.count('met')}; of the {n - rows.count('met')} that "
      f"missed, {rows.count('host')} would have met them without the events the host's stops "
      f"made late (both CPUs running nothing), {rows.count('engine')} would not (the engine's)")
PY
