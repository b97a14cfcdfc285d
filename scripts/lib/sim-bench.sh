# Sourced by the scripts that replay a generated trace through the release CLI on the sim at a
# high event rate (bench-replay.sh, bench-replay-ab.sh, wake-census.sh; from the repository
# root). SIM_BENCH_ARGS: the run's arguments after `-o DIR` (exponential 200 µs service times,
# the engine targets as the verdict's limits). `sim_bench_prepare EVENTS RATE`: CNSREPLAY and
# GEN_TRACE (built here, release, unless the environment names them: a release build from
# scratch takes minutes), a folder $dir removed on exit, and in it the trace $dir/bench.cnsbin
# of EVENTS events at RATE/s.
SIM_BENCH_ARGS=(--sim-latency default=exponential:200us --validity start.p99=100us,start.p99.9=1ms)
sim_bench_prepare() {
  local target
  target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
  if [ -z "${CNSREPLAY:-}" ]; then
    cargo build --release -q -p cnsreplay
    CNSREPLAY=$target/release/cnsreplay
  fi
  if [ -z "${GEN_TRACE:-}" ]; then
    cargo build --release -q -p replay --example gen_trace
    GEN_TRACE=$target/release/examples/gen_trace
  fi
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  "$GEN_TRACE" "$1" "$2" "$dir/bench.cnsbin"
}
