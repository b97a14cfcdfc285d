#!/usr/bin/env bash
# Build testenv's images without Docker and push them to the registry REGISTRY (host:port
# on 127.0.0.1): one-layer tar (owner 0:0, numeric), `crane append --oci-empty-base`, then
# `crane mutate` sets the platform (containerd matches images by it), entrypoint and user.
#
#   testenv/images.sh REGISTRY IOGEN_BIN [CNSREPLAY_BIN]
#
#   REGISTRY/cnsreplay/pause:testenv     testenv's pause binary (testenv/go/pause), user 65535,
#   REGISTRY/pause:3.10                  the same image under the kube provider's default
#                                        workload image (registry.k8s.io is mirrored here)
#   REGISTRY/cnsreplay/iogen:latest      IOGEN_BIN (a static iogen), as deploy/iogen.Containerfile
#                                        describes it: the binary's path, USER and ENTRYPOINT
#                                        are read from that file, so the two cannot drift apart.
#   REGISTRY/cnsreplay/cnsreplay:latest  CNSREPLAY_BIN (a static cnsreplay, built without
#                                        `analyze`), as deploy/cnsreplay.Containerfile: the
#                                        in-cluster Job's and `cnsreplay fetch`'s image.
#   REGISTRY/cnsreplay/local-path-helper:testenv
#                                        local-path-provisioner's helper pod image
#                                        (testenv/local-path-image.sh; not with
#                                        TESTENV_LOCAL_PATH=0)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
[ $# = 2 ] || [ $# = 3 ] || testenv_die "usage: testenv/images.sh REGISTRY IOGEN_BIN [CNSREPLAY_BIN]"
REG=$1
IOGEN=$2
CNSREPLAY=${3:-}
BIN=$("$TESTENV_SRC/build.sh" --bin-dir)
CRANE=$BIN/crane
for f in "$CRANE" "$BIN/pause" "$IOGEN" ${CNSREPLAY:+"$CNSREPLAY"}; do
	[ -x "$f" ] || testenv_die "missing $f"
done
# A dynamically linked binary would not start in a FROM scratch image.
for f in "$IOGEN" ${CNSREPLAY:+"$CNSREPLAY"}; do
	if ! file -L "$f" | grep -q 'statically linked\|static-pie linked'; then
		testenv_die "$f is not statically linked ($(file -L -b "$f"))"
	fi
done

# From a Containerfile: FROM scratch, one COPY (source ignored, destination kept), USER,
# ENTRYPOINT as a JSON array. Anything else in it is an error here, not silently dropped.
# Sets copy_dst, user, entrypoint.
containerfile() {
	local cf=$1 from other
	from=$(awk '/^FROM /{print $2}' "$cf")
	copy_dst=$(awk '/^COPY /{print $3}' "$cf")
	user=$(awk '/^USER /{print $2}' "$cf")
	entrypoint=$(sed -n 's/^ENTRYPOINT \[\(.*\)\]$/\1/p' "$cf" | tr -d '" ')
	other=$(grep -Ev '^(#|$|FROM |COPY |USER |ENTRYPOINT )' "$cf" || true)
	[ "$from" = scratch ] || testenv_die "$cf: FROM $from (only scratch is supported here)"
	[ -z "$other" ] || testenv_die "$cf: instruction not supported by images.sh: $other"
	[ -n "$copy_dst" ] && [ -n "$user" ] && [ -n "$entrypoint" ] ||
		testenv_die "$cf: needs COPY, USER and ENTRYPOINT"
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
image() { # ref binary path-in-image user entrypoint(comma-separated)
	local ref=$1 bin=$2 dst=${3#/} user=$4 ep=$5
	mkdir -p "$work/root/$(dirname "$dst")"
	rm -rf "$work/root" && mkdir -p "$work/root/$(dirname "$dst")"
	install -m 0755 "$bin" "$work/root/$dst"
	# Release builds keep line tables for backtraces; the image does not need them.
	strip --strip-debug "$work/root/$dst"
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
containerfile "$TESTENV_SRC/../deploy/iogen.Containerfile"
image "$REG/cnsreplay/iogen:latest" "$IOGEN" "$copy_dst" "$user" "$entrypoint"
if [ -n "$CNSREPLAY" ]; then
	containerfile "$TESTENV_SRC/../deploy/cnsreplay.Containerfile"
	image "$REG/cnsreplay/cnsreplay:latest" "$CNSREPLAY" "$copy_dst" "$user" "$entrypoint"
fi
if [ "${TESTENV_LOCAL_PATH:-1}" != 0 ]; then
	"$TESTENV_SRC/local-path-image.sh" "$REG" >/dev/null
fi
