#!/usr/bin/env bash
# Runs the CSI sanity suite (kubernetes-csi/csi-test v5 cmd/csi-sanity, built by
# testenv/build.sh --csi-sanity) against cnsreplay-csi, started here on a socket in a temp dir
# (own root dir, own staging/target dirs), and prints the pass/fail counts.
#
#   scripts/csi-sanity.sh [extra csi-sanity args, e.g. --ginkgo.focus=Snapshot]
#
# Environment: TESTENV_CSI_BIN (default $CARGO_TARGET_DIR/debug/cnsreplay-csi, CARGO_TARGET_DIR
# defaulting to the repository's target/), CSI_SANITY_KEEP=1 keeps the temp dir.
# Exit status: csi-sanity's (non-zero when a spec failed).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${TESTENV_CSI_BIN:-${CARGO_TARGET_DIR:-$repo/target}/debug/cnsreplay-csi}
[ -x "$bin" ] || { echo "csi-sanity.sh: $bin missing (cargo build -p csi-driver)" >&2; exit 2; }
sanity=$("$repo/testenv/build.sh" --csi-sanity)/csi-sanity

tmp=$(mktemp -d /tmp/cnsreplay-csi-sanity.XXXXXX)
driver_pid=
finish() {
	if [ -n "$driver_pid" ] && kill -0 "$driver_pid" 2>/dev/null; then
		kill -TERM "$driver_pid"
		wait "$driver_pid" || true
	fi
	# Volumes csi-sanity left published keep a loop device: release those of this root only.
	for img in "$tmp"/root/volumes/*.img "$tmp"/root/snapshots/*.img; do
		[ -e "$img" ] || continue
		for dev in $(losetup -n -O NAME -j "$img" 2>/dev/null); do losetup -d "$dev" || true; done
	done
	if [ "${CSI_SANITY_KEEP:-0}" = 1 ]; then
		echo "kept $tmp" >&2
	else
		rm -rf "$tmp"
	fi
}
trap finish EXIT

"$bin" --endpoint="$tmp/csi.sock" --root="$tmp/root" --node-id=sanity-node \
	--default-size=$((64 << 20)) >"$tmp/driver.log" 2>&1 &
driver_pid=$!
for _ in $(seq 1 100); do
	[ -S "$tmp/csi.sock" ] && break
	sleep 0.1
done
[ -S "$tmp/csi.sock" ] || { cat "$tmp/driver.log" >&2; exit 2; }

set +e
"$sanity" --csi.endpoint="$tmp/csi.sock" \
	--csi.stagingdir="$tmp/staging" --csi.mountdir="$tmp/mount" \
	--csi.testvolumesize=$((64 << 20)) --csi.testvolumeexpandsize=$((128 << 20)) --ginkgo.no-color \
	"$@" >"$tmp/sanity.log" 2>&1
rc=$?
set -e
grep -E '^\[(FAIL|PANICKED)\]|^  \[FAIL\]' "$tmp/sanity.log" | sort -u || true
summary=$(grep -E '(Passed|Failed).*(Pending|Skipped)' "$tmp/sanity.log" | tail -n1)
echo "csi-sanity $(basename "$(dirname "$(dirname "$sanity")")"): ${summary:-no summary (see $tmp/sanity.log)}"
exit $rc
