#!/usr/bin/env bash
# Fuzz one parser: scripts/fuzz.sh TARGET [SECONDS]
#   decoders:  decode_jsonl decode_yaml decode_binary
#   importers: import_fio import_blkparse import_blktrace import_msr import_alibaba
#              import_tencent import_audit import_pods
# Installs cargo-fuzz from crates.io when missing; needs a nightly toolchain (rustup).
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
  *) echo "unknown target $target" >&2; exit 2 ;;
esac
if [ -n "${ext:-}" ]; then
  for t in traces/*.yaml; do
    cargo run -q -p cnsreplay -- -q convert "$t" -o "$corpus/$(basename "$t" .yaml).$ext"
  done
fi
cargo +nightly fuzz run "$target" "$corpus" -- -max_total_time="$secs" -rss_limit_mb=2048
