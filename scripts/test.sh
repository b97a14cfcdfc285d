#!/usr/bin/env bash
# All tests: formatting, lints, and every crate's tests. This is the README's test command
# and exactly what `.ci/run` runs. Ends with one line totalling every test binary's results.
#
# The Kubernetes tests (crates/provider-kube, crates/csi-driver) run against the local test
# cluster of testenv/: its Go binaries are built once and cached under
# $HOME/.cache/cnsreplay/testenv (about 25 min cold on 2 cores, seconds when cached), our CSI
# driver is built here, and the cluster is started for this run in a fresh state directory and
# stopped on exit (down.sh ends exactly the processes up.sh started). With the cluster up the
# tests must use it (CNSREPLAY_REQUIRE_TESTENV=1), and the CSI sanity suite runs against our
# driver; CNSREPLAY_TESTENV=0 skips the cluster and
# its tests say they skipped; CNSREPLAY_TESTENV=<testenv.env> uses a cluster already running.
# TESTENV_REAL_NODE=1 (the default) adds testenv's real kubelet node (testenv/README.md), with
# the iogen and cnsreplay images built from static (musl) binaries; TESTENV_REAL_NODE=0 runs
# without it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# Imports run down each crate's declared layers; the self-test plants upward imports (in
# made-up crates and in copies of provider-kube, replay and analyze) and fails unless caught.
python3 scripts/check-layers.py
python3 scripts/check-layers.py --self-test
log=$(mktemp)
cluster=
finish() {
  rm -f "$log"
  if [ -n "$cluster" ]; then
    TESTENV_DIR=$cluster testenv/down.sh >/dev/null 2>&1 || echo "testenv/down.sh failed for $cluster" >&2
    rm -rf "$cluster"
  fi
}
trap finish EXIT
if [ -n "${CNSREPLAY_TESTENV:-}" ] && [ "$CNSREPLAY_TESTENV" != 0 ]; then
  export CNSREPLAY_REQUIRE_TESTENV=1 # a running cluster's testenv.env, given by the caller
elif [ "${CNSREPLAY_TESTENV:-}" != 0 ]; then
  # The driver (and its changed-block tracking stand-in) must exist before up.sh starts
  # them; the snapshot test verifies data with iogen.
  cargo build --locked -q -p csi-driver -p iogen -p snapshot-metadata-sidecar
  target=$(cargo metadata --format-version 1 --no-deps --locked |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
  export TESTENV_REAL_NODE=${TESTENV_REAL_NODE:-1}
  if [ "$TESTENV_REAL_NODE" = 1 ]; then
    # The iogen image's binary must be static (FROM scratch).
    rustup target list --installed | grep -qx x86_64-unknown-linux-musl ||
      rustup target add x86_64-unknown-linux-musl
    cargo build --locked -q --release -p iogen --bin iogen --target x86_64-unknown-linux-musl
    export TESTENV_IOGEN_BIN=$target/x86_64-unknown-linux-musl/release/iogen
    # The in-cluster image (deploy/cnsreplay.Containerfile): cnsreplay without `analyze`.
    cargo build --locked -q --release -p cnsreplay --no-default-features \
      --target x86_64-unknown-linux-musl
    export TESTENV_CNSREPLAY_BIN=$target/x86_64-unknown-linux-musl/release/cnsreplay
    export CNSREPLAY_REQUIRE_REAL_NODE=1
  fi
  cluster=$(mktemp -d /tmp/cnsreplay-testenv.XXXXXX)
  env_file=$(TESTENV_DIR=$cluster TESTENV_APISERVER_PORT=0 \
    TESTENV_CSI_BIN="$target/debug/cnsreplay-csi" testenv/up.sh)
  export CNSREPLAY_TESTENV=$env_file CNSREPLAY_REQUIRE_TESTENV=1 CNSREPLAY_REQUIRE_CSI=1
fi
# A failing test must not end the script before the sanity suite and the totals line.
status=0
cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$log" || status=$?
if [ -n "$cluster" ]; then
  # CSI conformance: kubernetes-csi's sanity suite against our driver (exits non-zero on a
  # failed spec). It needs no cluster, only the driver binary built above.
  TESTENV_CSI_BIN="$target/debug/cnsreplay-csi" scripts/csi-sanity.sh 2>&1 | tail -n 5 || status=$?
fi
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
