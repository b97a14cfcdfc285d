#!/usr/bin/env bash
# The Go build of testenv's CSI sidecars (csi-provisioner, csi-attacher, csi-resizer,
# csi-snapshotter, snapshot-controller) at each revision given, cold: the wrappers of that
# revision (`git archive REV testenv`), one fresh Go build cache per revision shared by its
# wrappers in table order (as testenv/build.sh builds them), the module cache as it is (run
# `go mod download` in each wrapper first to leave downloads out). Prints each wrapper
# group's seconds and the revision's total. The cold CI's longest step is testenv's Go build
# (docs/PERFORMANCE.md, Cold CI); this isolates the part that the wrappers' layout decides.
#
# Usage: scripts/bench-testenv-go.sh REV...   (e.g. `HEAD~1 HEAD`; nothing else should run)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- HEAD
work=$(mktemp -d /tmp/bench-testenv-go.XXXX)
trap 'rm -rf "$work"' EXIT
echo "bench-testenv-go: $(go env GOVERSION), $(nproc) CPUs; $(uptime)"
for rev in "$@"; do
	src=$work/$rev-src
	mkdir -p "$src"
	git archive "$rev" testenv | tar -x -C "$src"
	# The sidecars' rows of that revision's binary table: name module package.
	rows=$(bash -c '. "$1/testenv/lib.sh"; printf "%s\n" "$TESTENV_BINARIES"' _ "$src" |
		awk '$1 ~ /^csi-|^snapshot-controller$/ { print $1, $2, $3 }')
	modules=$(awk '{ print $2 }' <<<"$rows" | awk '!seen[$0]++')
	cache=$work/$rev-gocache
	total=0
	for m in $modules; do
		pkgs=$(awk -v m="$m" '$2 == m { print $3 }' <<<"$rows")
		mkdir -p "$work/$rev-out"
		t0=$(date +%s)
		# shellcheck disable=SC2086 # the packages are words
		(cd "$src/testenv/go/$m" && GOCACHE=$cache go build -trimpath -ldflags "-s -w" \
			-o "$work/$rev-out/" $pkgs)
		t=$(($(date +%s) - t0))
		total=$((total + t))
		echo "$rev: go/$m ($(awk -v m="$m" '$2 == m { printf "%s ", $1 }' <<<"$rows")): $t s"
	done
	echo "$rev: the sidecars in $total s"
	rm -rf "$cache" "$work/$rev-out"
done
