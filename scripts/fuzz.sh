#!/usr/bin/env bash
# Fuzz one parser: scripts/fuzz.sh TARGET [SECONDS]
#   decoders:  decode_jsonl decode_yaml decode_binary
#   importers: import_fio import_blkparse import_blktrace import_msr import_alibaba
#              import_tencent import_audit import_pods
#   settings and state: csi_latency csi_state sim_config iogen_inputs synth_inputs
# Installs cargo-fuzz from crates.io when missing; needs a nightly toolchain (rustup).
# FUZZ_ARGS adds libFuzzer flags (e.g. FUZZ_ARGS=-detect_leaks=0).
# Seeds the corpus with the committed example traces in every encoding (decoders), or with
# the importer fixtures and, when present, the real samples in ../shared (importers; they are
# copied into the git-ignored corpus, never into the repository).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?target}
secs=${2:-300}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
corpus=fuzz/corpus/$target
mkdir -p "$corpus"
fixtures=crates/import/tests/fixtures
samples=../shared/trace-samples
seed() { for f in "$@"; do [ -f "$f" ] && cp "$f" "$corpus/seed-$(basename "$f")"; done; return 0; }
case $target in
  decode_jsonl) ext=jsonl ;;
  decode_yaml) ext=yaml ;;
  decode_binary) ext=cnsbin ;;
  import_fio) seed $fixtures/fio-randrw.iolog $samples/fio-iolog-v3/*.iolog ;;
  import_blkparse) seed $samples/blkparse-text/*.txt ;;
  import_blktrace) seed $samples/blktrace-binary/*.blktrace.0 ;;
  import_msr) seed $fixtures/blockcsv/msr.csv ;;
  import_alibaba) seed $fixtures/blockcsv/alibaba-*.csv ;;
  import_tencent) seed $fixtures/blockcsv/tencent.csv ;;
  import_audit) seed $samples/k8s-audit-jsonl/*.log $samples/k8s-audit-jsonl/falco/*.json ;;
  import_pods) printf 'name,creation_time,deletion_time,namespace\na,0,10,ns\nb,2024-01-01T00:00:00Z,,x\n' > "$corpus/seed-generic.csv"
               [ -f $samples/k8s-pod-lifecycle-csv/openb_pod_list_default.csv ] &&
                 head -50 $samples/k8s-pod-lifecycle-csv/openb_pod_list_default.csv > "$corpus/seed-openb.csv" ;;
  csi_latency)
    printf 'lognormal 50ms 0.4' > "$corpus/seed-dist"
    printf 'latency.CreateVolume=uniform 1ms 2ms\nstall.*=0.01 5s\nfailRate.*=0.1\n' > "$corpus/seed-params"
    printf '{"seed":1,"ops":{"*":{"latency":"exp 5ms","stall":"0.5 1s","fail_rate":0.1}}}' > "$corpus/seed-config.json" ;;
  csi_state)
    printf '{"next_id":3,"volumes":{},"snapshots":{}}' > "$corpus/seed-state.json"
    printf '{"op":"CreateVolume","volume":"pvc-1","start_ns":1,"end_ns":5,"injected_ns":2,"code":"OK"}\n\n{"op":"NodeStageVolume","volume":"pvc-1","node":"n1","start_ns":6,"end_ns":9,"injected_ns":0,"stalled":true,"code":"UNAVAILABLE","detail":"x"}\n' > "$corpus/seed-ops.jsonl" ;;
  sim_config)
    printf 'seed: 1\ndefault: {dist: exponential, mean: 200us}\nops: {attach: {dist: lognormal, median: 2s, sigma: 0.5}, snapshot: {dist: uniform, min: 1ms, max: 5ms}}\nerrors: {attach: 0.01}\nstalls: [{at: 10s, duration: 2s}]\n' > "$corpus/seed.yaml"
    printf 'lognormal:50ms:0.5' > "$corpus/seed-flag"
    printf '10s+2s' > "$corpus/seed-stall" ;;
  iogen_inputs)
    cargo build -q -p iogen
    t=$(mktemp -d /var/tmp/fuzz-seed.XXXXXX)
    "$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/iogen" \
      run --target "$t/data" --size 4m --runtime 1s --rw randrw --iodepth 4 \
      --interval-log "$corpus/seed.hlog" --interval 100ms > /dev/null
    rm -rf "$t"
    printf '{pattern: random, read_pct: 70, block_size: 4Ki, load: {rate: {iops: 500}}, duration: 1s}' > "$corpus/seed-phase" ;;
  synth_inputs)
    seed traces/synth/*.yaml
    printf 'lifetime_s,censored\n30,false\n120.5,true\n' > "$corpus/seed.csv" ;;
  *) echo "unknown target $target" >&2; exit 2 ;;
esac
if [ -n "${ext:-}" ]; then
  for t in traces/*.yaml; do
    cargo run -q -p cnsreplay -- -q convert "$t" -o "$corpus/$(basename "$t" .yaml).$ext"
  done
fi
# FUZZ_ARGS: more libFuzzer flags, e.g. -detect_leaks=0 (see fuzz/README.md on the YAML
# reader's thread).
# shellcheck disable=SC2086
cargo +nightly fuzz run "$target" "$corpus" -- -max_total_time="$secs" -rss_limit_mb=2048 ${FUZZ_ARGS:-}
