#!/usr/bin/env bash
# testenv's Go build at each revision given, cold: the wrappers of that revision (`git archive
# REV testenv`), one fresh Go build cache per revision shared by its groups in table order (as
# testenv/build.sh builds them: one `go build` per wrapper module, build tags and cgo
# setting), the module cache as it is (run `go mod download` in each wrapper first to leave
# downloads out). Prints each group's wall and CPU seconds (user + system, from
# /usr/bin/time: the figure that holds when other work shares the machine, as it does in
# CI, where this build runs at SCHED_IDLE beside the Rust builds) and the revision's totals.
# The cold CI's longest background step is this build (docs/PERFORMANCE.md, Cold CI); the
# wrappers' layout decides how often the shared libraries are compiled.
#
# Usage: scripts/bench-testenv-go.sh [--sidecars] REV...   (e.g. `HEAD~1 HEAD`)
#   --sidecars   only the CSI sidecars' rows (csi-*, snapshot-controller)
set -euo pipefail
cd "$(dirname "$0")/.."
only='1'
if [ "${1:-}" = --sidecars ]; then
	only='$1 ~ /^csi-|^snapshot-controller$/'
	shift
fi
[ $# -gt 0 ] || set -- HEAD
work=$(mktemp -d /tmp/bench-testenv-go.XXXX)
trap 'rm -rf "$work"' EXIT
echo "bench-testenv-go: $(go env GOVERSION), $(nproc) CPUs; $(uptime)"
for rev in "$@"; do
	src=$work/$rev-src
	mkdir -p "$src"
	git archive "$rev" testenv | tar -x -C "$src"
	# That revision's binary table: name module package [tags [cgo0]].
	rows=$(bash -c '. "$1/testenv/lib.sh"; printf "%s\n" "$TESTENV_BINARIES"' _ "$src" |
		awk "NF >= 3 && ($only) { print \$1, \$2, \$3, (NF > 3 ? \$4 : \"-\"), (NF > 4 ? \$5 : \"-\") }")
	groups=$(awk '{ print $2, $4, $5 }' <<<"$rows" | awk '!seen[$0]++')
	cache=$work/$rev-gocache
	total=0 cpu_total=0
	while read -r m tags cgo; do
		pkgs=$(awk -v g="$m $tags $cgo" '$2 " " $4 " " $5 == g { print $3 }' <<<"$rows")
		names=$(awk -v g="$m $tags $cgo" '$2 " " $4 " " $5 == g { printf "%s ", $1 }' <<<"$rows")
		[ "$tags" != - ] || tags=
		env=(GOCACHE="$cache")
		[ "$cgo" != cgo0 ] || env+=(CGO_ENABLED=0)
		mkdir -p "$work/$rev-out"
		t0=$(date +%s)
		# shellcheck disable=SC2086 # the packages are words
		(cd "$src/testenv/go/$m" && env "${env[@]}" /usr/bin/time -f '%U %S' -o "$work/cpu" \
			go build -trimpath -tags "$tags" -ldflags "-s -w" -o "$work/$rev-out/" $pkgs)
		t=$(($(date +%s) - t0))
		cpu=$(awk '{ printf "%d", $1 + $2 }' "$work/cpu")
		total=$((total + t)) cpu_total=$((cpu_total + cpu))
		echo "$rev: go/$m (${names% }): $t s, $cpu CPU-s"
	done <<<"$groups"
	echo "$rev: $total s, $cpu_total CPU-s"
	rm -rf "$cache" "$work/$rev-out"
done
