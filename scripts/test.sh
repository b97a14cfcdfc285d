#!/usr/bin/env bash
# All tests: formatting, lints, and every crate's tests. This is the README's test command
# and exactly what `.ci/run` runs. Ends with one line totalling every test binary's results.
#
# The Kubernetes tests (every test whose path has `cluster::`: crates/cnsreplay, provider-kube
# and csi-driver) run against the local test cluster of testenv/: its Go binaries are built
# once and cached under $HOME/.cache/cnsreplay/testenv (about 25 min cold on 2 cores, seconds
# when cached), our CSI driver is built here, and the cluster is started for this run in a
# fresh state directory and stopped on exit (down.sh ends exactly the processes up.sh
# started). With the cluster up the tests must use it (CNSREPLAY_REQUIRE_TESTENV=1), and the
# CSI sanity suite runs against our driver; CNSREPLAY_TESTENV=0 skips the cluster and its
# tests say they skipped; CNSREPLAY_TESTENV=<testenv.env> uses a cluster already running.
# TESTENV_REAL_NODE=1 (the default) adds testenv's real kubelet node (testenv/README.md), with
# the iogen and cnsreplay images built from static (musl) binaries; TESTENV_REAL_NODE=0 runs
# without it.
#
# Order (docs/PERFORMANCE.md, Cold CI): fmt and clippy; one build of every test binary and
# binary the cluster runs; the fast tests (no cluster: `-- --skip cluster::`); then the
# cluster, once, for every suite that needs it, and the cluster tests (`-- cluster::`) in two
# lanes side by side: the CLI suite's, and the other crates' followed by the CSI sanity
# suite. A fast test that fails ends the run there (the cluster part is not
# started) unless CNSREPLAY_KEEP_GOING=1. testenv's Go build and the static image binaries
# build in the background from the start, on CPU time the rest leaves idle
# (scripts/lib/background.sh; CNSREPLAY_OVERLAP=0 builds them in line instead).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/background.sh
bg_init
log=$(mktemp)
cluster=
finish() {
  bg_stop
  rm -f "$log"
  if [ -n "$cluster" ]; then
    TESTENV_DIR=$cluster testenv/down.sh >/dev/null 2>&1 || echo "testenv/down.sh failed for $cluster" >&2
    rm -rf "$cluster"
  fi
}
trap finish EXIT
overlap=${CNSREPLAY_OVERLAP:-1}
# Start testenv's Go build now (.ci/run may have started it already): clippy, the Rust builds
# and the fast tests leave CPU idle that it can use.
start_cluster=
if [ -n "${CNSREPLAY_TESTENV:-}" ] && [ "$CNSREPLAY_TESTENV" != 0 ]; then
  export CNSREPLAY_REQUIRE_TESTENV=1 # a running cluster's testenv.env, given by the caller
elif [ "${CNSREPLAY_TESTENV:-}" != 0 ]; then
  start_cluster=1
  [ "$overlap" != 1 ] || bg_start testenv-build testenv/build.sh
fi
cargo fmt --all -- --check
# Imports run down each crate's declared layers; the self-test plants upward imports (in
# made-up crates and in copies of provider-kube, replay and analyze) and fails unless caught.
python3 scripts/check-layers.py
python3 scripts/check-layers.py --self-test
cargo clippy --workspace --all-targets --locked -- -D warnings
target=$(cargo metadata --format-version 1 --no-deps --locked |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
# One build of every test binary, and of the binaries the cluster runs, with the test build's
# features: `cargo build -p csi-driver -p iogen -p snapshot-metadata-sidecar` alone resolved
# other features and compiled 79 units again (kube, tonic, hyper, rustls, ring, our crates).
# The tests of a crate with integration tests build its binaries (cnsreplay-csi, iogen); the
# second command adds only the metadata sidecar's binary (up.sh runs it).
cargo test --workspace --locked --no-run -q
cargo build --workspace --locked --bins --tests -q
if [ -n "$start_cluster" ]; then
  export TESTENV_REAL_NODE=${TESTENV_REAL_NODE:-1}
  if [ "$TESTENV_REAL_NODE" = 1 ]; then
    # The images' binaries must be static (FROM scratch): iogen, and cnsreplay without
    # `analyze` (deploy/cnsreplay.Containerfile), in one build (one feature resolution), in
    # a target dir of their own so that its lock never holds up the tests' cargo, with the
    # `testenv` profile (Cargo.toml: release at opt-level 1, no debug info): 946 CPU-s cold
    # against the release profile's 1 367, and a 43 MB cnsreplay for the image, not 195 MB
    # (docs/PERFORMANCE.md, Cold CI).
    rustup target list --installed | grep -qx x86_64-unknown-linux-musl ||
      rustup target add x86_64-unknown-linux-musl
    images=$target/images
    images_build=(env CARGO_TARGET_DIR="$images" CARGO_BUILD_BUILD_DIR="$images"
      cargo build --locked -q --profile testenv --target x86_64-unknown-linux-musl --no-default-features
      -p iogen --bin iogen -p cnsreplay --bin cnsreplay)
    if [ "$overlap" = 1 ]; then bg_start images-build "${images_build[@]}"; else "${images_build[@]}"; fi
    export TESTENV_IOGEN_BIN=$images/x86_64-unknown-linux-musl/testenv/iogen
    export TESTENV_CNSREPLAY_BIN=$images/x86_64-unknown-linux-musl/testenv/cnsreplay
    export CNSREPLAY_REQUIRE_REAL_NODE=1
  fi
fi
# A failing test must not end the script before the totals line.
status=0
echo "test.sh: the fast tests (no cluster)" >&2
(
  [ -z "$start_cluster" ] || export CNSREPLAY_TESTENV=0 CNSREPLAY_REQUIRE_TESTENV=0
  cargo test --workspace --locked --no-fail-fast -- --skip cluster::
) 2>&1 | tee -a "$log" || status=$?
if [ "$status" != 0 ] && [ "${CNSREPLAY_KEEP_GOING:-0}" != 1 ]; then
  echo "test.sh: a fast test failed; the cluster tests were not run (CNSREPLAY_KEEP_GOING=1 runs them)" >&2
else
  if [ -n "$start_cluster" ]; then
    [ "$overlap" != 1 ] || bg_wait testenv-build
    [ "$TESTENV_REAL_NODE" != 1 ] || [ "$overlap" != 1 ] || bg_wait images-build
    cluster=$(mktemp -d /tmp/cnsreplay-testenv.XXXXXX)
    env_file=$(TESTENV_DIR=$cluster TESTENV_APISERVER_PORT=0 \
      TESTENV_CSI_BIN="$target/debug/cnsreplay-csi" testenv/up.sh)
    export CNSREPLAY_TESTENV=$env_file CNSREPLAY_REQUIRE_TESTENV=1 CNSREPLAY_REQUIRE_CSI=1
  fi
  echo "test.sh: the cluster tests" >&2
  # The cluster tests wait on the cluster far more than they compute, so they run in two
  # lanes side by side, each to its own log, printed whole in turn: the CLI suite's (the
  # longest), and the other crates' followed by two modules of the CLI suite (so that the
  # lanes end together) and the CSI sanity suite. A test that disturbs what the others use
  # takes the cluster alone across both lanes (testkit::NodeTurn); provider-kube's
  # `discovery`, which removes the group snapshot CRDs for a while, runs before the lanes
  # instead, since waiting for its turn in a lane would hold up both. The test binaries are
  # run directly, from the build above (`cargo test -p` alone would resolve other features
  # and compile again), in their crate's folder as cargo runs them. `--tests`' set: the doc
  # tests ran with the fast part; the filter also selects replay's unit tests of
  # `replay::cluster` (they need no cluster).
  exes=$(mktemp)
  cargo test --workspace --locked --tests --no-run --message-format=json 2>/dev/null |
    python3 scripts/lib/test-exes.py >"$exes"
  lane() { # AWK_TEST ARGS...: run each listed test binary whose line AWK_TEST selects, with ARGS
    local sel=$1 st=0 dir pkg target exe
    shift
    while IFS=$'\t' read -r dir pkg target exe; do
      echo "     Running $pkg $target ($exe)"
      (cd "$dir" && CARGO_MANIFEST_DIR=$dir CARGO_PKG_NAME=$pkg "$exe" "$@") || st=1
    done < <(awk -F'\t' "$sel" "$exes")
    return "$st"
  }
  alone=cluster::discovery::
  moved=(cluster::local_path:: cluster::least_privilege::)
  lane '$2 == "provider-kube" && $3 == "it"' "$alone" 2>&1 | tee -a "$log" || status=1
  lane_a=$(mktemp) lane_b=$(mktemp)
  lane '$2 == "cnsreplay"' cluster:: "${moved[@]/#/--skip=}" >"$lane_a" 2>&1 &
  pid_a=$!
  st_b=0
  {
    lane '$2 != "cnsreplay"' cluster:: --skip "$alone" || st_b=1
    lane '$2 == "cnsreplay" && $3 == "it"' "${moved[@]}" || st_b=1
    if [ -n "$cluster" ]; then
      # CSI conformance: kubernetes-csi's sanity suite against our driver (exits non-zero on a
      # failed spec). It needs no cluster, only the driver binary built above.
      TESTENV_CSI_BIN="$target/debug/cnsreplay-csi" scripts/csi-sanity.sh 2>&1 | tail -n 5 || st_b=1
    fi
  } >"$lane_b" 2>&1
  st_a=0
  wait "$pid_a" || st_a=1
  cat "$lane_b" "$lane_a" | tee -a "$log"
  rm -f "$exes" "$lane_a" "$lane_b"
  [ "$st_a$st_b" = 00 ] || status=1
fi
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
