#!/usr/bin/env bash
# local-path-provisioner's helper pod image, without Docker, pushed to REGISTRY (host:port on
# 127.0.0.1) as REGISTRY/cnsreplay/local-path-helper:testenv: Debian's static busybox
# (package busybox-static; TESTENV_BUSYBOX names another static one) as /bin/busybox with links
# for the applets its setup/teardown scripts call (sh, mkdir, rm, chmod, ls), user 0 (the
# scripts create and remove the volumes' host directories). Run by images.sh; prints the
# image reference.
#
#   testenv/local-path-image.sh REGISTRY
set -euo pipefail
. "$(dirname "$0")/lib.sh"
[ $# = 1 ] || testenv_die "usage: testenv/local-path-image.sh REGISTRY"
REG=$1
CRANE=$("$TESTENV_SRC/build.sh" --bin-dir)/crane
BUSYBOX=${TESTENV_BUSYBOX:-$(command -v busybox || echo /usr/bin/busybox)}
for f in "$CRANE" "$BUSYBOX"; do
	[ -x "$f" ] || testenv_die "missing $f (busybox: Debian package busybox-static, scripts/install-node-deps.sh)"
done
# A dynamically linked busybox would not start in an image without a libc.
if ! file -L "$BUSYBOX" | grep -q 'statically linked\|static-pie linked'; then
	testenv_die "$BUSYBOX is not statically linked ($(file -L -b "$BUSYBOX"))"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root/bin"
install -m 0755 "$BUSYBOX" "$work/root/bin/busybox"
for applet in sh mkdir rm chmod ls; do
	ln -s busybox "$work/root/bin/$applet"
done
tar --owner=0 --group=0 --numeric-owner --mtime=@0 --sort=name -C "$work/root" -cf "$work/layer.tar" bin
ref=$REG/cnsreplay/local-path-helper:testenv
"$CRANE" append --insecure --oci-empty-base -f "$work/layer.tar" -t "$ref" >/dev/null
"$CRANE" mutate --insecure "$ref" --set-platform linux/amd64 --entrypoint /bin/sh --user 0:0 \
	-t "$ref" >/dev/null
testenv_log "pushed $ref ($(du -h "$work/layer.tar" | cut -f1) layer, $(dpkg-query -W -f '${Package} ${Version}' busybox-static 2>/dev/null || echo "$BUSYBOX"))"
echo "$ref"
