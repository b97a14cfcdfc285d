#!/usr/bin/env bash
# Calibrates `cnsreplay analyze compare` on real sim runs (release binary):
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
# Usage: scripts/calibrate-compare.sh [WORKDIR]   (env: TRIALS=100 POWER=50 RUNS=5
#        POOL_A=40 POOL_B=20 EVENTS=600 RATE=500 CNSREPLAY=path/to/cnsreplay)
set -euo pipefail
cd "$(dirname "$0")/.."
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

# Sim configs: attach 20 ms median σ 0.3, create_volume 50 ms σ 0.4.
base_lat=(--sim-latency attach=lognormal:20ms:0.3 --sim-latency create_volume=lognormal:50ms:0.4)
p50_lat=(--sim-latency attach=lognormal:24ms:0.3 --sim-latency create_volume=lognormal:50ms:0.4)
# p99 = m·e^(2.3263σ): σ' = 0.3 + ln(1.2)/2.3263 = 0.3784 raises p99 by 20%, keeps p50.
p99_lat=(--sim-latency attach=lognormal:20ms:0.3784 --sim-latency create_volume=lognormal:50ms:0.4)

pool() { # NAME COUNT LATENCY-ARGS...
  local name=$1 count=$2 seed
  shift 2
  for ((seed = 1; seed <= count; seed++)); do
    local dir=$work/$name/$seed
    [[ -f $dir/summary.json ]] && continue
    rm -rf "$dir"
    mkdir -p "$work/$name"
    "$bin" -q run "$trace" --provider sim -o "$dir" --seed $((seed * 1000 + ${#name})) "$@" \
      > /dev/null
  done
}
t0=$(date +%s)
pool a "$POOL_A" "${base_lat[@]}"
pool p50 "$POOL_B" "${p50_lat[@]}"
pool p99 "$POOL_B" "${p99_lat[@]}"
t1=$(date +%s)
echo "runs: $POOL_A A + 2×$POOL_B shifted, $((2 * EVENTS)) events each, $((t1 - t0)) s" >&2

pick() { # SEED N COUNT: COUNT distinct numbers from 1..N
  awk -v s="$1" -v n="$2" -v k="$3" 'BEGIN { srand(s); for (i = 1; i <= n; i++) p[i] = i;
    for (i = 1; i <= k; i++) { j = i + int(rand() * (n - i + 1)); t = p[i]; p[i] = p[j]; p[j] = t;
      printf "%d ", p[i] } }'
}

# Prints "exit-code verdicts" where verdicts is the JSON array of [op, metric, verdict].
judge() { # BASE-DIRS... -- NEW-DIRS...
  local out rc=0
  out=$("$bin" analyze compare --json "$@") || rc=$?
  [[ $rc == 2 ]] && { echo "compare failed: $*" >&2; exit 2; }
  echo "$rc $(jq -c '[.rows[] | [.op, .metric, .verdict]]' <<< "$out")"
}
mirror='map([.[0], .[1], (if .[2] == "regression" then "improvement"
  elif .[2] == "improvement" then "regression" else .[2] end)])'

aa_reg=0 aa_inc=0 order_bad=0 aa_rows_reg=0 aa_rows=0
for ((t = 1; t <= TRIALS; t++)); do
  read -ra s <<< "$(pick "$t" "$POOL_A" $((2 * RUNS)))"
  b=() n=()
  for ((i = 0; i < RUNS; i++)); do
    b+=("$work/a/${s[i]}")
    n+=("$work/a/${s[i + RUNS]}")
  done
  read -r rc1 v1 <<< "$(judge "${b[@]}" -- "${n[@]}")"
  read -r rc2 v2 <<< "$(judge "${n[@]}" -- "${b[@]}")"
  [[ $rc1 == 1 ]] && aa_reg=$((aa_reg + 1))
  [[ $rc2 == 1 ]] && aa_reg=$((aa_reg + 1))
  [[ $rc1 == 3 ]] && aa_inc=$((aa_inc + 1))
  [[ $rc2 == 3 ]] && aa_inc=$((aa_inc + 1))
  aa_rows=$((aa_rows + $(jq length <<< "$v1")))
  aa_rows_reg=$((aa_rows_reg + $(jq '[.[] | select(.[2] == "regression")] | length' <<< "$v1")))
  if [[ $(jq -c "$mirror" <<< "$v1") != "$v2" ]]; then
    order_bad=$((order_bad + 1))
    echo "order-dependent verdicts in A/A trial $t: $v1 vs $v2" >&2
  fi
  if ((t % 10 == 0)); then echo "A/A: $t of $TRIALS trials, $aa_reg false regressions" >&2; fi
done

power() { # NAME METRIC
  local name=$1 metric=$2 hit=0 t i b n rc v rc2 v2
  for ((t = 1; t <= POWER; t++)); do
    read -ra s <<< "$(pick $((t + 7919)) "$POOL_A" "$RUNS")"
    read -ra u <<< "$(pick $((t + 104729)) "$POOL_B" "$RUNS")"
    b=() n=()
    for ((i = 0; i < RUNS; i++)); do
      b+=("$work/a/${s[i]}")
      n+=("$work/$name/${u[i]}")
    done
    read -r rc v <<< "$(judge "${b[@]}" -- "${n[@]}")"
    read -r rc2 v2 <<< "$(judge "${n[@]}" -- "${b[@]}")"
    if [[ $(jq -c "$mirror" <<< "$v") != "$v2" ]]; then
      order_bad=$((order_bad + 1))
      echo "order-dependent verdicts in $name trial $t" >&2
    fi
    if [[ $(jq -r --arg m "$metric" '.[] | select(.[0] == "attach" and .[1] == $m) | .[2]' \
      <<< "$v") == regression ]]; then
      hit=$((hit + 1))
    fi
    if ((t % 10 == 0)); then echo "power $name: $t of $POWER trials, $hit detected" >&2; fi
  done
  echo "$hit"
}
p50_hit=$(power p50 p50)
p99_hit=$(power p99 p99)
t2=$(date +%s)

pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f %%", 100 * a / b }'; }
echo "A/A: $((2 * TRIALS)) comparisons ($TRIALS trials × both orders, $RUNS runs per side)"
echo "  false-regression rate (exit 1): $aa_reg of $((2 * TRIALS)) = $(pct "$aa_reg" $((2 * TRIALS)))"
echo "  regression rows: $aa_rows_reg of $aa_rows = $(pct "$aa_rows_reg" "$aa_rows")"
echo "  inconclusive (exit 3): $aa_inc of $((2 * TRIALS)) = $(pct "$aa_inc" $((2 * TRIALS)))"
echo "  verdicts depending on argument order: $order_bad of $((2 * TRIALS + 2 * POWER)) trials"
echo "power: +20% attach p50 detected in $p50_hit of $POWER = $(pct "$p50_hit" "$POWER")"
echo "power: +20% attach p99 detected in $p99_hit of $POWER = $(pct "$p99_hit" "$POWER")"
echo "time: runs $((t1 - t0)) s, comparisons $((t2 - t1)) s"
ok=1
awk -v a="$aa_reg" -v n=$((2 * TRIALS)) 'BEGIN { exit !(a <= 0.05 * n) }' || ok=0
[[ $order_bad == 0 ]] || ok=0
awk -v a="$p50_hit" -v b="$p99_hit" -v n="$POWER" 'BEGIN { exit !(a >= 0.8 * n && b >= 0.8 * n) }' || ok=0
if [[ $ok == 1 ]]; then echo "calibration: PASS"; else echo "calibration: FAIL"; exit 1; fi
