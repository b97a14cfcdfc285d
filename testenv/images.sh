#!/usr/bin/env bash
# Build testenv's two images without Docker and push them to the registry REGISTRY (host:port
# on 127.0.0.1): one-layer tar (owner 0:0, numeric), `crane append --oci-empty-base`, then
# `crane mutate` sets the platform (containerd matches images by it), entrypoint and user.
#
#   testenv/images.sh REGISTRY IOGEN_BIN
#
#   REGISTRY/cnsreplay/pause:testenv  testenv's pause binary (testenv/go/pause), user 65535,
#   REGISTRY/pause:3.10               the same image under the kube provider's default
#                                     workload image (registry.k8s.io is mirrored here)
#   REGISTRY/cnsreplay/iogen:latest   IOGEN_BIN (a static iogen), as deploy/iogen.Containerfile
#                                     describes it: the binary's path, USER and ENTRYPOINT are
#                                     read from that file, so the two cannot drift apart.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
[ $# = 2 ] || testenv_die "usage: testenv/images.sh REGISTRY IOGEN_BIN"
REG=$1
IOGEN=$2
BIN=$("$TESTENV_SRC/build.sh" --bin-dir)
CRANE=$BIN/crane
CONTAINERFILE=$TESTENV_SRC/../deploy/iogen.Containerfile
for f in "$CRANE" "$BIN/pause" "$IOGEN"; do
	[ -x "$f" ] || testenv_die "missing $f"
done
# A dynamically linked binary would not start in a FROM scratch image.
if ! file -L "$IOGEN" | grep -q 'statically linked\|static-pie linked'; then
	testenv_die "$IOGEN is not statically linked ($(file -L -b "$IOGEN"))"
fi

# From the Containerfile: FROM scratch, one COPY (source ignored, destination kept), USER,
# ENTRYPOINT as a JSON array. Anything else in it is an error here, not silently dropped.
from=$(awk '/^FROM /{print $2}' "$CONTAINERFILE")
copy_dst=$(awk '/^COPY /{print $3}' "$CONTAINERFILE")
user=$(awk '/^USER /{print $2}' "$CONTAINERFILE")
entrypoint=$(sed -n 's/^ENTRYPOINT \[\(.*\)\]$/\1/p' "$CONTAINERFILE" | tr -d '" ')
other=$(grep -Ev '^(#|$|FROM |COPY |USER |ENTRYPOINT )' "$CONTAINERFILE" || true)
[ "$from" = scratch ] || testenv_die "$CONTAINERFILE: FROM $from (only scratch is supported here)"
[ -z "$other" ] || testenv_die "$CONTAINERFILE: instruction not supported by images.sh: $other"
[ -n "$copy_dst" ] && [ -n "$user" ] && [ -n "$entrypoint" ] ||
	testenv_die "$CONTAINERFILE: needs COPY, USER and ENTRYPOINT"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
image() { # ref binary path-in-image user entrypoint(comma-separated)
	local ref=$1 bin=$2 dst=${3#/} user=$4 ep=$5
	mkdir -p "$work/root/$(dirname "$dst")"
	rm -rf "$work/root" && mkdir -p "$work/root/$(dirname "$dst")"
	install -m 0755 "$bin" "$work/root/$dst"
	tar --owner=0 --group=0 --numeric-owner --mtime=@0 --sort=name -C "$work/root" \
		-cf "$work/layer.tar" "$dst"
	"$CRANE" append --insecure --oci-empty-base -f "$work/layer.tar" -t "$ref" >/dev/null
	"$CRANE" mutate --insecure "$ref" --set-platform linux/amd64 --entrypoint "$ep" \
		--user "$user" -t "$ref" >/dev/null
	testenv_log "pushed $ref ($(du -h "$work/layer.tar" | cut -f1) layer)"
}
image "$REG/cnsreplay/pause:testenv" "$BIN/pause" /pause 65535:65535 /pause
# The registry stores the same manifest under a second name: no second upload.
"$CRANE" copy --insecure "$REG/cnsreplay/pause:testenv" "$REG/pause:3.10" >/dev/null
testenv_log "pushed $REG/pause:3.10 (= cnsreplay/pause:testenv)"
image "$REG/cnsreplay/iogen:latest" "$IOGEN" "$copy_dst" "$user" "$entrypoint"
