# Shared by build.sh, up.sh, down.sh and smoke.sh (sourced, not run).
# Defines where the binaries and the state live and the binary table.

TESTENV_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TESTENV_CACHE=${TESTENV_CACHE:-$HOME/.cache/cnsreplay/testenv}
TESTENV_DIR=${TESTENV_DIR:-$TESTENV_CACHE/run}

# name  wrapper-module  package  [build tags, comma-separated, "-" for none]  [cgo0: CGO_ENABLED=0]
# (every wrapper in testenv/go pins its versions in go.mod and go.sum; pause and cni-eth0
# are this repository's own code, without dependencies)
TESTENV_BINARIES="
etcd                    kube        go.etcd.io/etcd/server/v3
kube-apiserver          kube        k8s.io/kubernetes/cmd/kube-apiserver
kube-controller-manager kube        k8s.io/kubernetes/cmd/kube-controller-manager
kube-scheduler          kube        k8s.io/kubernetes/cmd/kube-scheduler
kubectl                 kube        k8s.io/kubernetes/cmd/kubectl
kwok                    kube        sigs.k8s.io/kwok/cmd/kwok
csi-provisioner         kube        github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner
csi-attacher            sidecars    github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher
csi-resizer             sidecars    github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer
csi-snapshotter         sidecars    github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter
snapshot-controller     sidecars    github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller
kubelet                 kube        k8s.io/kubernetes/cmd/kubelet
containerd              containerd  github.com/containerd/containerd/v2/cmd/containerd urfave_cli_no_docs,no_btrfs,no_devmapper,no_zfs cgo0
containerd-shim-runc-v2 containerd  github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 urfave_cli_no_docs,no_grpc cgo0
loopback                cni         github.com/containernetworking/plugins/plugins/main/loopback - cgo0
crane                   crane       github.com/google/go-containerregistry/cmd/crane - cgo0
pause                   pause       cnsreplay.local/testenv/pause - cgo0
cni-eth0                cni-eth0    cnsreplay.local/testenv/cni-eth0 - cgo0
"

# The wrapper modules of the cluster's binaries, in the order their go.mod/go.sum are hashed.
TESTENV_WRAPPERS="kube sidecars containerd cni crane pause cni-eth0"

# The version key: Kubernetes version plus a hash of every wrapper's go.mod and go.sum, the
# binary table and the Go version. Any change to a pinned version gives a new cache folder.
testenv_version_key() {
	local h
	h=$(cd "$TESTENV_SRC/go" && {
		# Only the cluster's wrappers (not go/csi-sanity, which has its own key): the same
		# bytes as `cat */go.mod */go.sum` before csi-sanity existed, so the key is unchanged.
		for w in $TESTENV_WRAPPERS; do cat "$w/go.mod"; done
		for w in $TESTENV_WRAPPERS; do [ ! -e "$w/go.sum" ] || cat "$w/go.sum"; done
		cat pause/*.go cni-eth0/*.go
		echo "$TESTENV_BINARIES"
		go env GOVERSION GOOS GOARCH
	} | sha256sum | cut -c1-12)
	echo "k8s-v1.36.3-$h"
}

testenv_bin_dir() {
	echo "$TESTENV_CACHE/$(testenv_version_key)/bin"
}

# The wrapper module holding the CRDs of the VolumeSnapshot API (client/v8 v8.7.0).
testenv_snapshot_crd_dir() {
	local d
	d=$(cd "$TESTENV_SRC/go/sidecars" &&
		go list -m -f '{{.Dir}}' github.com/kubernetes-csi/external-snapshotter/client/v8)
	echo "$d/config/crd"
}

# csi-sanity (kubernetes-csi/csi-test), built by build.sh into its own folder: its key is a
# hash of its wrapper's go.mod and go.sum and the Go version, apart from the cluster's key.
testenv_sanity_bin_dir() {
	local h
	h=$(cd "$TESTENV_SRC/go/csi-sanity" && { cat go.mod go.sum; go env GOVERSION GOOS GOARCH; } |
		sha256sum | cut -c1-12)
	echo "$TESTENV_CACHE/csi-sanity-$h/bin"
}

# rancher's local-path-provisioner (go/local-path), built by build.sh into its own folder like
# csi-sanity: its key is a hash of its wrapper's go.mod and go.sum and the Go version, so adding
# or changing it never rebuilds the cluster's binaries.
testenv_local_path_bin_dir() {
	local h
	h=$(cd "$TESTENV_SRC/go/local-path" && { cat go.mod go.sum; go env GOVERSION GOOS GOARCH; } |
		sha256sum | cut -c1-12)
	echo "$TESTENV_CACHE/local-path-$h/bin"
}

testenv_log() {
	printf '[testenv %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2
}

testenv_die() {
	testenv_log "error: $*"
	exit 1
}

# The state dir's record of one started process: "<pid> <binary path>" in pids/<name>.pid.
testenv_pid_alive() { # pidfile -> 0 when the recorded process still runs the recorded binary
	local pid exe arg0
	read -r pid exe <"$1" || return 1
	[ -r "/proc/$pid/cmdline" ] || return 1
	arg0=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n1)
	[ "$arg0" = "$exe" ]
}

# Resident memory of every recorded process, one line each, then the total (MiB).
testenv_rss() {
	local f name pid exe kb total=0
	for f in "$TESTENV_DIR"/pids/*.pid; do
		[ -e "$f" ] || continue
		testenv_pid_alive "$f" || continue
		name=$(basename "$f" .pid)
		read -r pid exe <"$f"
		kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
		total=$((total + kb))
		printf '  %-24s %6d MiB\n' "$name" $((kb / 1024))
	done
	printf '  %-24s %6d MiB\n' total $((total / 1024))
}
