#!/usr/bin/env bash
# Calibrates `cnsreplay capacity` against two known truths on the sim's queueing model
# (4 attach servers, exponential service of mean 10 ms):
#  - saturation: evenly spaced attaches, SLO `attach p99<=2s`; truth 4 / 10 ms = 400/s.
#  - slo: Poisson arrivals, SLO `attach p99<=100ms`; truth the rate where the M/M/4 response
#    time's 99th percentile is 100 ms, computed here (Erlang C; response = wait + service,
#    P(T > t) = (1 − C) e^{−μt} + C (θ e^{−μt} − μ e^{−θt}) / (θ − μ), θ = 4μ − λ): 350.09/s.
# Each seed gets its own trace (EVENTS attaches; Poisson gaps drawn with that seed) and its own
# search (`--seed`); every search writes DIR/CASE-SEED/search/capacity.json. The summary per
# case: seeds within ±5 % of the truth, seeds whose 95 % capacity interval covers the truth,
# seeds reporting a sustained rate at or above the truth (saturation: must be ≤ 5 %).
#
# Usage: scripts/calibrate-capacity.sh [WORKDIR]
#   env: SEEDS=20 FIRST_SEED=1 EVENTS=10000 CASES="saturation slo" JOBS=2 REFINE=16
#        SUMMARY_ONLY=1 (summarise WORKDIR's finished searches)
#        HOGS=N (N busy loops beside the searches)
#        REJUDGE=1 (with SUMMARY_ONLY: first re-judge every finished search's runs with
#        CNSREPLAY's `analyze capacity`, e.g. after a change of the estimator; the runs were
#        still chosen by the refinement of the binary that ran the search)
#        CNSREPLAY=path/to/cnsreplay (default: a release build)
# The sim runs in real time: a search is about 20–25 runs of EVENTS/400 s each.
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${SEEDS:-20}
FIRST_SEED=${FIRST_SEED:-1}
EVENTS=${EVENTS:-10000}
CASES=${CASES:-saturation slo}
JOBS=${JOBS:-2}
REFINE=${REFINE:-16}
target=${CARGO_TARGET_DIR:-target}
bin=${CNSREPLAY:-$target/release/cnsreplay}
if [[ -z ${CNSREPLAY:-} ]]; then
  cargo build --release -q -p cnsreplay
fi
work=${1:-$(mktemp -d /tmp/calibrate-capacity.XXXX)}
mkdir -p "$work"

# The SLO truth: λ with P(response > 100 ms) = 1 % in M/M/4, μ = 100/s (bisection).
slo_truth=$(awk 'function fact(n,  f,i){f=1;for(i=2;i<=n;i++)f*=i;return f}
function tail(l,t,  a,s,k,x,C,th,conv){a=l/100;s=0;for(k=0;k<4;k++)s+=a^k/fact(k);
  x=a^4/fact(4)*4/(4-a);C=x/(s+x);th=400-l;
  conv=(th*exp(-100*t)-100*exp(-th*t))/(th-100);return (1-C)*exp(-100*t)+C*conv}
BEGIN{lo=1;hi=399;for(i=0;i<100;i++){m=(lo+hi)/2;if(tail(m,0.1)>0.01)hi=m;else lo=m};printf "%.2f",lo}')
echo "truths: saturation 400/s, slo (M/M/4 p99 = 100 ms) ${slo_truth}/s" >&2

# trace CASE SEED OUT: EVENTS attaches; saturation 200/s evenly, slo 300/s Poisson.
trace() {
  awk -v kind="$1" -v seed="$2" -v n="$EVENTS" 'BEGIN{srand(seed);
    print "{\"format\":\"cnsreplay-trace\",\"version\":1,\"provenance\":{\"generator\":\"scripts/calibrate-capacity.sh\"}}";
    t=0; for(i=0;i<n;i++){
      printf "{\"at\":%.0f,\"id\":%d,\"attach\":{\"workload\":\"w%d\",\"volumes\":[]}}\n", t, i+1, i;
      if (kind=="saturation") t+=5000000; else t+=-log(1-rand())/300*1e9 }}' > "$3"
}

one() {
  local case=$1 seed=$2 dir="$work/$1-$2"
  [[ -f $dir/search/capacity.json ]] && return 0
  rm -rf "$dir" && mkdir -p "$dir"
  trace "$case" "$seed" "$dir/trace.jsonl"
  local slo start
  if [[ $case == saturation ]]; then slo='attach p99<=2s' start=1.8; else slo='attach p99<=100ms' start=1.0; fi
  "$bin" -q capacity "$dir/trace.jsonl" --provider sim -o "$dir/search" --json \
    --sim-servers attach=4 --sim-latency attach=exponential:10ms --slo "$slo" \
    --start "$start" --factor 1.25 --resolution 0.04 --repeats 2 --refine "$REFINE" \
    --allow-invalid --seed "$((seed * 1000))" > "$dir/out.json" 2> "$dir/err.txt" || true
}
export -f one trace
export work bin EVENTS REFINE

# SUMMARY_ONLY=1: summarise the searches already in WORKDIR (e.g. after stopping it early).
# HOGS=N: N busy loops (`while true`) run beside the searches (scripts/capacity-hogs.sh).
hogs=()
stop_hogs() { [ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2>/dev/null || true; hogs=(); }
trap stop_hogs EXIT
if [[ -z ${SUMMARY_ONLY:-} ]]; then
  for _ in $(seq 1 "${HOGS:-0}"); do bash -c 'while true; do :; done' & hogs+=($!); done
  for ((s = FIRST_SEED; s < FIRST_SEED + SEEDS; s++)); do
    for case in $CASES; do echo "$case $s"; done
  done | xargs -P "$JOBS" -L 1 bash -c 'one "$0" "$1"'
  stop_hogs
fi

for case in $CASES; do
  truth=400; [[ $case == slo ]] && truth=$slo_truth
  if [[ -n ${REJUDGE:-} ]]; then
    slo='attach p99<=2s'; [[ $case == slo ]] && slo='attach p99<=100ms'
    for d in "$work/$case"-*/search; do
      [[ -f $d/capacity.json ]] || continue
      "$bin" -q analyze capacity "$d" --slo "$slo" --allow-invalid --json > "$d/../rejudged.json" || true
    done
  fi
  REJUDGE=${REJUDGE:-} python3 - "$work" "$case" "$truth" <<'EOF'
import json, glob, os, sys
work, case, truth = sys.argv[1], sys.argv[2], float(sys.argv[3])
rows = []
for f in sorted(glob.glob(f"{work}/{case}-*/search/capacity.json")):
    r = json.load(open(f))
    if not r.get("complete"):
        continue  # a search still going or stopped early: not counted
    if os.environ.get("REJUDGE"):
        j = json.load(open(os.path.join(os.path.dirname(f), "..", "rejudged.json")))
        r = dict(r, estimate=j.get("estimate"), capacity_interval=j.get("capacity_interval"))
    e, ci = r.get("estimate"), r.get("capacity_interval")
    if not e or not ci:
        rows.append((f, None, None, None, r.get("fit_runs"), None)); continue
    rows.append((f, e["rate"], ci[0], ci[1], r["fit_runs"], r.get("min_events_near")))
n = len(rows)
ok = [r for r in rows if r[1] is not None]
within = sum(abs(r[1] / truth - 1) <= 0.05 for r in ok)
# An open end (None: the runs do not bound that side) covers its side.
cover = sum((r[2] is None or r[2] <= truth) and (r[3] is None or truth <= r[3]) for r in ok)
opened = sum(r[2] is None or r[3] is None for r in ok)
above = sum(r[1] >= truth for r in ok)
print(f"{case}: truth {truth:.2f}/s, {n} seeds ({len(ok)} with an estimate)")
for f, x, lo, hi, k, m in rows:
    seed = f.split("/")[-3]
    fmt = lambda v: "open" if v is None else f"{v:.1f}"
    print(f"  {seed:>16}: sustained {fmt(x)}/s  interval [{fmt(lo)}, {fmt(hi)}]  runs {k}  min events near {m}")
print(f"  within ±5 %: {within} of {n}; interval covers truth: {cover} of {n} "
      f"({opened} with an open end); sustained ≥ truth: {above} of {n}")
# The pass curve of all seeds' runs within ±10 % of the truth, pooled (rates over the truth):
# logit P(pass) = −b·(ln(rate/truth) − v), by maximum likelihood on a grid. Its slope b is what
# crates/analyze/src/passprob.rs caps at 1.72·√N.
import math
runs = []
for f in glob.glob(f"{work}/{case}-*/search/capacity.json"):
    for p in json.load(open(f)).get("points", []):
        e = p.get("eval")
        if e and e["throughput"] and abs(math.log(e["throughput"][0]["offered_rate"] / truth)) < 0.1:
            runs.append((math.log(e["throughput"][0]["offered_rate"] / truth), e["pass"]))
def ll(b, v):
    s = 0.0
    for u, y in runs:
        eta = max(min(-b * (u - v), 50.0), -50.0)
        s += -math.log1p(math.exp(-eta)) if y else -math.log1p(math.exp(eta))
    return s
if runs:
    best = max(((ll(b, v), b, v) for b in range(4, 404, 4) for v in [i * 0.001 for i in range(-60, 61)]))
    print(f"  pooled pass curve of {len(runs)} runs within ±10 %: slope |b| ≈ {best[1]}, "
          f"50 % at {truth * math.exp(best[2]):.1f}/s, 90 % at {truth * math.exp(best[2] - math.log(9) / best[1]):.1f}/s")
EOF
done
