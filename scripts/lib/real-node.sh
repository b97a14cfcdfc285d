# Sourced by the scripts that measure on testenv's real kubelet node (from the repository
# root): builds the release cnsreplay, makes a work folder `$work`, and loads a cluster with a
# real node into the environment (KUBECONFIG, TESTENV_*): the one of CNSREPLAY_TESTENV (a
# testenv.env) or one it starts itself (TESTENV_REAL_NODE=1 testenv/up.sh, with the CSI driver
# and the static iogen it builds) and stops on exit, with `$work`.
cargo build --release -q -p cnsreplay
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
work=$(mktemp -d)
cluster=
real_node_finish() {
  if [ -n "$cluster" ]; then
    TESTENV_DIR=$cluster testenv/down.sh >/dev/null 2>&1 || echo "down.sh failed for $cluster" >&2
    rm -rf "$cluster"
  fi
  rm -rf "$work"
}
trap real_node_finish EXIT
env_file=${CNSREPLAY_TESTENV:-}
if [ -z "$env_file" ]; then
  cargo build -q -p csi-driver
  rustup target list --installed | grep -qx x86_64-unknown-linux-musl ||
    rustup target add x86_64-unknown-linux-musl
  cargo build --release -q -p iogen --bin iogen --target x86_64-unknown-linux-musl
  cluster=$(mktemp -d /tmp/cnsreplay-testenv.XXXXXX)
  env_file=$(TESTENV_DIR=$cluster TESTENV_APISERVER_PORT=0 TESTENV_REAL_NODE=1 \
    TESTENV_CSI_BIN="$target/debug/cnsreplay-csi" \
    TESTENV_IOGEN_BIN="$target/x86_64-unknown-linux-musl/release/iogen" testenv/up.sh)
fi
# shellcheck disable=SC1090
. "$env_file"
[ -n "${TESTENV_REAL_NODE:-}" ] || { echo "$env_file: the cluster has no real node" >&2; exit 1; }
# The real node's CSI attach limit for the driver: its CSINode allocatable count, and
# `set_limit N`, which writes cnsreplay-csi's limit file and waits until the kubelet's refresh
# (nodeAllocatableUpdatePeriodSeconds) shows it in the CSINode.
csinode_count() {
  kubectl get csinode "$TESTENV_REAL_NODE" \
    -o "jsonpath={.spec.drivers[?(@.name==\"$TESTENV_CSI_DRIVER\")].allocatable.count}"
}
set_limit() {
  echo "$1" >"$TESTENV_CSI_MAX_VOLUMES_FILE"
  for _ in $(seq 1 300); do
    [ "$(csinode_count)" = "$1" ] && return 0
    sleep 0.2
  done
  echo "the node's CSINode count is $(csinode_count), not $1, 60 s after setting the driver's limit" >&2
  return 1
}
