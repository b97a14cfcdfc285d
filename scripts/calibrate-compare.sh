#!/usr/bin/env bash
# Calibrates `cnsreplay analyze compare` on real sim runs (release binary unless CNSREPLAY):
#  - A/A: TRIALS trials of RUNS runs per side, all with the same sim config and distinct
#    seeds; each compared both ways. Reports the false-regression rate (exit 1) and checks
#    that no verdict depends on argument order (every row's verdict mirrors exactly).
#  - power: POWER trials of RUNS base runs against RUNS runs with attach's p50 (median ×1.2:
#    p50, p99 and mean +20%) or attach's p99 alone (σ raised by ln(1.2)/z₀.₉₉: p99 +20%,
#    p50 unchanged) shifted; reports how often that row is a regression.
# Runs come from pools (POOL_A same-config seeds, POOL_B per shifted config); each trial draws
# its runs from the pools without replacement inside the trial (seeded), so trials overlap in
# runs but no trial compares a run with itself.
#
# Real-provider noise (each run's latencies multiplied by its own `--sim-slowdown`): CV=0.1
# draws every run's factor e^(CV·Z); SHIFT=0.03 makes every shifted run (p50, p99 pools) that
# much slower on top, as a separate batch would be; DRIFT=0.01 multiplies run number i (in
# collection order) by (1 + DRIFT)^i. All 0 by default (the seed-only noise of the history).
#
# Usage: scripts/calibrate-compare.sh [WORKDIR]   (env: TRIALS=100 POWER=50 RUNS=5
#        POOL_A=40 POOL_B=20 EVENTS=600 RATE=500 JOBS=4 CV=0 SHIFT=0 DRIFT=0
#        CNSREPLAY=path/to/cnsreplay)
#        scripts/calibrate-compare.sh --simulated [TRIALS] [SEED]
#   The statistics alone under real-provider noise, ≥ 300 fresh A/A trials per case and the
#   power at the runs the tool recommends: crates/analyze/examples/calibrate_compare.rs (runs'
#   per-row values drawn from the sim's distributions, judged by the exact compare code).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == --simulated ]]; then
  exec cargo run --release -q -p analyze --example calibrate_compare -- "${2:-300}" "${3:-1}"
fi
CV=${CV:-0}
SHIFT=${SHIFT:-0}
DRIFT=${DRIFT:-0}
TRIALS=${TRIALS:-100}
POWER=${POWER:-50}
RUNS=${RUNS:-5}
POOL_A=${POOL_A:-40}
POOL_B=${POOL_B:-20}
EVENTS=${EVENTS:-600}
RATE=${RATE:-500}
target=${CARGO_TARGET_DIR:-target}
bin=${CNSREPLAY:-$target/release/cnsreplay}
if [[ -z ${CNSREPLAY:-} ]]; then
  cargo build --release -q -p cnsreplay
fi
work=${1:-$(mktemp -d /tmp/calibrate-compare.XXXX)}
mkdir -p "$work"

# The trace: EVENTS attaches and EVENTS create_volumes, interleaved, at RATE events/s in all.
trace=$work/trace.jsonl
if [[ ! -s $trace ]]; then
  awk -v n="$EVENTS" -v rate="$RATE" 'BEGIN {
    print "{\"format\":\"cnsreplay-trace\",\"version\":1,\"provenance\":{\"generator\":\"calibrate-compare\"}}";
    step = int(1e9 / rate);
    for (i = 0; i < 2 * n; i++) {
      if (i % 2 == 0) body = sprintf("\"attach\":{\"workload\":\"w%d\",\"volumes\":[]}", i);
      else body = sprintf("\"create_volume\":{\"volume\":\"v%d\"}", i);
      printf "{\"at\":%d,\"id\":%d,%s}\n", i * step, i + 1, body;
    }
  }' > "$trace"
fi

# Sim configs: attach 200 ms median σ 0.3, create_volume 500 ms σ 0.4 (latencies long
# against the host's scheduling jitter, which is part of every run's noise).
base_lat=(--sim-latency attach=lognormal:200ms:0.3 --sim-latency create_volume=lognormal:500ms:0.4)
p50_lat=(--sim-latency attach=lognormal:240ms:0.3 --sim-latency create_volume=lognormal:500ms:0.4)
# p99 = m·e^(2.3263σ): σ' = 0.3 + ln(1.2)/2.3263 = 0.3784 raises p99 by 20%, keeps p50.
p99_lat=(--sim-latency attach=lognormal:200ms:0.3784 --sim-latency create_volume=lognormal:500ms:0.4)

runs_made=0
slowdown() { # NAME SEED: this run's factor (seeded, so a rerun of the script makes the same)
  awk -v cv="$CV" -v shift="$SHIFT" -v drift="$DRIFT" -v i="$runs_made" -v name="$1" -v s="$2" \
    'BEGIN { srand(s * 7 + length(name)); u = rand(); v = rand(); if (u < 1e-12) u = 1e-12;
      z = sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
      f = exp(cv * z) * (name == "a" ? 1 : 1 + shift) * (1 + drift) ^ i; printf "%.6f", f }'
}

one_run() { # NAME SEED LATENCY-ARGS...
  local name=$1 seed=$2
  shift 2
  local dir=$work/$name/$seed try
  set -- "$@" --sim-slowdown "$(slowdown "$name" "$seed")"
  runs_made=$((runs_made + 1))
  [[ -f $dir/summary.json ]] && [[ $(jq -r .validity.verdict "$dir/summary.json") == valid ]] \
    && return
  mkdir -p "$work/$name"
  # A run the host's load made engine-bound is not a sample of the system: it is run again
  # (up to 5 times), as a user would, rather than compared with --allow-invalid.
  for try in 1 2 3 4 5; do
    rm -rf "$dir"
    "$bin" -q run "$trace" --provider sim -o "$dir" --seed $((seed * 1000 + ${#name})) "$@" \
      > /dev/null || true
    [[ $(jq -r .validity.verdict "$dir/summary.json") == valid ]] && return
    echo "run $name/$seed try $try: $(jq -r .validity.verdict "$dir/summary.json"); again" >&2
    retried=$((retried + 1))
  done
  echo "run $name/$seed stayed invalid after 5 tries" >&2
  return 1
}
retried=0
t0=$(date +%s)
# Interleaved (A, p50, p99, A, …), so a change of the host's load over the minutes this takes
# falls on every pool alike rather than looking like a shift between pools.
last=0
for ((seed = 1; seed <= POOL_A; seed++)); do
  one_run a "$seed" "${base_lat[@]}"
  k=$((seed * POOL_B / POOL_A))
  if ((k > last)); then
    one_run p50 "$k" "${p50_lat[@]}"
    one_run p99 "$k" "${p99_lat[@]}"
    last=$k
  fi
done
t1=$(date +%s)
echo "runs: $POOL_A A + 2×$POOL_B shifted, $((2 * EVENTS)) events each, $((t1 - t0)) s," \
  "$retried run again for an invalid verdict" >&2

pick() { # SEED N COUNT: COUNT distinct numbers from 1..N
  awk -v s="$1" -v n="$2" -v k="$3" 'BEGIN { srand(s); for (i = 1; i <= n; i++) p[i] = i;
    for (i = 1; i <= k; i++) { j = i + int(rand() * (n - i + 1)); t = p[i]; p[i] = p[j]; p[j] = t;
      printf "%d ", p[i] } }'
}

# Verdicts of a comparison as one JSON array of [op, metric, verdict]; `rc` in $rc.
judge() { # BASE-DIRS... -- NEW-DIRS...
  local out
  rc=0
  out=$("$bin" analyze compare --json "$@") || rc=$?
  if [[ $rc == 2 ]]; then
    echo "compare failed: $*" >&2
    return 2
  fi
  verdicts=$(jq -c '[.rows[] | [.op, .metric, .verdict]]' <<< "$out")
}
mirror='map([.[0], .[1], (if .[2] == "regression" then "improvement"
  elif .[2] == "improvement" then "regression" else .[2] end)])'

# One trial, both ways. KIND is a (A/A) or a shifted pool (p50, p99). Prints
# "KIND T rc-forward rc-backward order-ok hit regression-rows rows".
trial() { # KIND T
  local kind=$1 t=$2 b=() n=() i s u rc1 rc2 v1 v2 order=1 hit=0 metric
  if [[ $kind == a ]]; then
    read -ra s <<< "$(pick "$t" "$POOL_A" $((2 * RUNS)))"
    for ((i = 0; i < RUNS; i++)); do
      b+=("$work/a/${s[i]}")
      n+=("$work/a/${s[i + RUNS]}")
    done
  else
    read -ra s <<< "$(pick $((t + 7919)) "$POOL_A" "$RUNS")"
    read -ra u <<< "$(pick $((t + 104729)) "$POOL_B" "$RUNS")"
    for ((i = 0; i < RUNS; i++)); do
      b+=("$work/a/${s[i]}")
      n+=("$work/$kind/${u[i]}")
    done
  fi
  judge "${b[@]}" -- "${n[@]}" || return 2
  rc1=$rc v1=$verdicts
  judge "${n[@]}" -- "${b[@]}" || return 2
  rc2=$rc v2=$verdicts
  if [[ $(jq -c "$mirror" <<< "$v1") != "$v2" ]]; then
    order=0
    echo "order-dependent verdicts in $kind trial $t: $v1 vs $v2" >&2
  fi
  metric=$kind
  [[ $kind == a ]] && metric=none
  if [[ $(jq -r --arg m "$metric" '.[] | select(.[0] == "attach" and .[1] == $m) | .[2]' \
    <<< "$v1") == regression ]]; then
    hit=1
  fi
  echo "$kind $t $rc1 $rc2 $order $hit $(jq '[.[] | select(.[2] == "regression")] | length' \
    <<< "$v1") $(jq length <<< "$v1")"
}
export -f pick judge trial
export bin work RUNS POOL_A POOL_B mirror

# Trials run JOBS at a time (each compare is one process reading 2 × RUNS run directories).
results=$work/results.txt
{
  for ((t = 1; t <= TRIALS; t++)); do echo "a $t"; done
  for ((t = 1; t <= POWER; t++)); do echo "p50 $t"; echo "p99 $t"; done
} | xargs -P "${JOBS:-4}" -L 1 bash -c 'trial "$0" "$1"' > "$results"
t2=$(date +%s)

sum() { awk -v k="$1" -v c="$2" -v want="$3" '$1 == k && (want == "" || $c == want) { n++ }
  END { print n + 0 }' "$results"; }
aa_reg=$(($(sum a 3 1) + $(sum a 4 1)))
aa_inc=$(($(sum a 3 3) + $(sum a 4 3)))
aa_rows_reg=$(awk '$1 == "a" { n += $7 } END { print n + 0 }' "$results")
aa_rows=$(awk '$1 == "a" { n += $8 } END { print n + 0 }' "$results")
order_bad=$(awk '$5 == 0 { n++ } END { print n + 0 }' "$results")
done_trials=$(wc -l < "$results")
p50_hit=$(sum p50 6 1)
p99_hit=$(sum p99 6 1)
[[ $done_trials == $((TRIALS + 2 * POWER)) ]] || { echo "only $done_trials trials ran" >&2; exit 2; }

pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f %%", 100 * a / b }'; }
echo "A/A: $((2 * TRIALS)) comparisons ($TRIALS trials × both orders, $RUNS runs per side)"
echo "  false-regression rate (exit 1): $aa_reg of $((2 * TRIALS)) = $(pct "$aa_reg" $((2 * TRIALS)))"
echo "  regression rows: $aa_rows_reg of $aa_rows = $(pct "$aa_rows_reg" "$aa_rows")"
echo "  inconclusive (exit 3): $aa_inc of $((2 * TRIALS)) = $(pct "$aa_inc" $((2 * TRIALS)))"
echo "  verdicts depending on argument order: $order_bad of $((TRIALS + 2 * POWER)) trials (A/A and power, each run both ways)"
echo "power: +20% attach p50 detected in $p50_hit of $POWER = $(pct "$p50_hit" "$POWER")"
echo "power: +20% attach p99 detected in $p99_hit of $POWER = $(pct "$p99_hit" "$POWER")"
echo "time: runs $((t1 - t0)) s, comparisons $((t2 - t1)) s"
ok=1
awk -v a="$aa_reg" -v n=$((2 * TRIALS)) 'BEGIN { exit !(a <= 0.05 * n) }' || ok=0
[[ $order_bad == 0 ]] || ok=0
awk -v a="$p50_hit" -v b="$p99_hit" -v n="$POWER" 'BEGIN { exit !(a >= 0.8 * n && b >= 0.8 * n) }' || ok=0
if [[ $ok == 1 ]]; then echo "calibration: PASS"; else echo "calibration: FAIL"; exit 1; fi
