#!/usr/bin/env bash
# Build every binary of the local test cluster with the machine's Go into
#   $TESTENV_CACHE/<version-key>/bin   (default $HOME/.cache/cnsreplay/testenv/...)
# Does nothing when that version key is already built. Prints each binary and its build time.
#
#   testenv/build.sh              build (or reuse) and print the bin folder on the last line
#   testenv/build.sh --bin-dir    only print the bin folder of the current version key
#   testenv/build.sh --local-path build local-path-provisioner only; print its folder
#
# Versions are pinned by the wrapper modules in testenv/go/*/go.mod + go.sum.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

command -v go >/dev/null || testenv_die "Go is not installed (needs go >= 1.26)"
key=$(testenv_version_key)
out="$TESTENV_CACHE/$key"

# csi-sanity (go/csi-sanity) has its own folder and key: building it never rebuilds the
# cluster's binaries, and a change of the cluster's versions never rebuilds it.
build_sanity() {
	local dir t0
	dir=$(testenv_sanity_bin_dir)
	if [ -x "$dir/csi-sanity" ]; then
		return 0
	fi
	testenv_log "  csi-sanity <- github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity (wrapper testenv/go/csi-sanity)"
	t0=$(date +%s)
	mkdir -p "$dir"
	(cd "$TESTENV_SRC/go/csi-sanity" &&
		nice -n 10 go build -trimpath -ldflags "-s -w" -o "$dir/csi-sanity.tmp" \
			github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity)
	mv "$dir/csi-sanity.tmp" "$dir/csi-sanity"
	testenv_log "  csi-sanity: $(($(date +%s) - t0)) s"
}

# rancher's local-path-provisioner (go/local-path), the real node's second storage system:
# its own folder and key too, like csi-sanity.
build_local_path() {
	local dir t0
	dir=$(testenv_local_path_bin_dir)
	if [ -x "$dir/local-path-provisioner" ]; then
		return 0
	fi
	testenv_log "  local-path-provisioner <- github.com/rancher/local-path-provisioner (wrapper testenv/go/local-path)"
	t0=$(date +%s)
	mkdir -p "$dir"
	(cd "$TESTENV_SRC/go/local-path" &&
		nice -n 10 go build -trimpath -ldflags "-s -w" -o "$dir/local-path-provisioner.tmp" \
			github.com/rancher/local-path-provisioner)
	mv "$dir/local-path-provisioner.tmp" "$dir/local-path-provisioner"
	testenv_log "  local-path-provisioner: $(($(date +%s) - t0)) s"
}

case "${1:-}" in
--bin-dir)
	echo "$out/bin"
	exit 0
	;;
--csi-sanity) # build csi-sanity only; print its folder
	build_sanity
	testenv_sanity_bin_dir
	exit 0
	;;
--local-path) # build local-path-provisioner only; print its folder
	build_local_path
	testenv_local_path_bin_dir
	exit 0
	;;
esac
if [ -e "$out/bin/.complete" ]; then
	testenv_log "already built: $out/bin"
	build_sanity
	build_local_path
	echo "$out/bin"
	exit 0
fi

mkdir -p "$out/bin.partial"
testenv_log "building testenv $key with $(go env GOVERSION) (GOPROXY=$(go env GOPROXY))"
# Kubernetes reads its version from these variables (what /version and kubectl report).
kube_ldflags="-s -w"
for v in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	kube_ldflags+=" -X $v.gitVersion=v1.36.3 -X $v.gitMajor=1 -X $v.gitMinor=36"
	kube_ldflags+=" -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
done
t_all=$(date +%s)
# The binaries that one `go build` makes together: those of one wrapper module with the same
# tags, cgo and ldflags (the eight of go/kube, the four CSI sidecars of go/sidecars). One build loads the
# module's packages once and links each binary while it compiles the packages of the others
# (docs/PERFORMANCE.md, Cold CI); binaries already built (an interrupted build) are skipped.
build_group() { # module tags cgo "name pkg" ...
	local module=$1 tags=$2 cgo=$3 ldflags="-s -w" t0 np name pkg names=() pkgs=() cgo_env=()
	shift 3
	for np in "$@"; do
		read -r name pkg <<<"$np"
		if [ -x "$out/bin.partial/$name" ]; then
			testenv_log "  $name: already built"
			continue
		fi
		names+=("$name")
		pkgs+=("$pkg")
	done
	[ ${#names[@]} -gt 0 ] || return 0
	[ "$module" = kube ] && ldflags=$kube_ldflags
	[ "$tags" = - ] && tags=""
	[ "$cgo" = cgo0 ] && cgo_env=(CGO_ENABLED=0)
	testenv_log "  ${names[*]} <- ${pkgs[*]} (wrapper testenv/go/$module)"
	t0=$(date +%s)
	rm -rf "$out/bin.partial/.group"
	mkdir -p "$out/bin.partial/.group"
	if [ ${#pkgs[@]} = 1 ]; then
		(cd "$TESTENV_SRC/go/$module" &&
			env "${cgo_env[@]}" nice -n 10 go build -trimpath -tags "$tags" -ldflags "$ldflags" \
				-o "$out/bin.partial/.group/${names[0]}" "${pkgs[0]}")
	else
		# -o DIR/ names each binary after its package's last path element, or the one before
		# a major version suffix (go.etcd.io/etcd/server/v3: `server`), as `go build` does.
		(cd "$TESTENV_SRC/go/$module" &&
			env "${cgo_env[@]}" nice -n 10 go build -trimpath -tags "$tags" -ldflags "$ldflags" \
				-o "$out/bin.partial/.group/" "${pkgs[@]}")
		local i exe
		for i in "${!names[@]}"; do
			exe=$(basename "${pkgs[$i]}")
			[[ ! $exe =~ ^v[0-9]+$ ]] || exe=$(basename "$(dirname "${pkgs[$i]}")")
			[ "$exe" = "${names[$i]}" ] ||
				mv "$out/bin.partial/.group/$exe" "$out/bin.partial/.group/${names[$i]}"
		done
	fi
	for name in "${names[@]}"; do
		mv "$out/bin.partial/.group/$name" "$out/bin.partial/$name"
	done
	rmdir "$out/bin.partial/.group"
	testenv_log "  ${names[*]}: $(($(date +%s) - t0)) s"
}
# Groups in the order of their first binary in the table; a group's binaries in table order.
declare -A group
group_keys=()
while read -r name module pkg tags cgo; do
	[ -n "$name" ] || continue
	gkey="$module ${tags:--} ${cgo:--}"
	[ -n "${group[$gkey]+set}" ] || group_keys+=("$gkey")
	group[$gkey]+="$name $pkg"$'\n'
done <<<"$TESTENV_BINARIES"
for gkey in "${group_keys[@]}"; do
	mapfile -t members < <(printf '%s' "${group[$gkey]}")
	# shellcheck disable=SC2086 # the key is three words: module, tags, cgo
	build_group $gkey "${members[@]}"
done
rm -rf "$out/bin"
mv "$out/bin.partial" "$out/bin"
{
	echo "key=$key"
	echo "go=$(go env GOVERSION)"
	echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "build_seconds=$(($(date +%s) - t_all))"
} >"$out/bin/.complete"
testenv_log "built all in $(($(date +%s) - t_all)) s"
build_sanity
build_local_path
echo "$out/bin"
