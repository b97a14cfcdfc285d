#!/usr/bin/env bash
# Fuzz one parser: scripts/fuzz.sh TARGET [SECONDS]   (targets: decode_jsonl decode_yaml decode_binary)
# Installs cargo-fuzz from crates.io when missing; needs a nightly toolchain (rustup).
# Seeds the corpus with the committed example traces in every encoding.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?target}
secs=${2:-300}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
corpus=fuzz/corpus/$target
mkdir -p "$corpus"
case $target in
  decode_jsonl) ext=jsonl ;;
  decode_yaml) ext=yaml ;;
  decode_binary) ext=cnsbin ;;
esac
for t in traces/*.yaml; do
  cargo run -q -p cnsreplay -- -q convert "$t" -o "$corpus/$(basename "$t" .yaml).$ext"
done
cargo +nightly fuzz run "$target" "$corpus" -- -max_total_time="$secs" -rss_limit_mb=2048
