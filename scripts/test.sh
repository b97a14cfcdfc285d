#!/usr/bin/env bash
# All tests: formatting, lints, and every crate's tests. This is the README's test command
# and exactly what `.ci/run` runs.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
