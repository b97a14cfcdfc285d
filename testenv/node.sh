# testenv's real kubelet node (TESTENV_REAL_NODE=1): sourced by up.sh, which defines S, BIN,
# REPO, DRIVER, OWN_CSI, client, start, start_exe, wait_for, since, k, free_port and testenv_*.
# See testenv/README.md ("The real node").
#
# registry (docker-registry, 127.0.0.1) -> images.sh pushes pause + iogen -> containerd (own
# root/state/socket, overlayfs, cgroupfs, CNI = loopback + cni-eth0) -> kubelet (own root-dir,
# cgroupfs, cgroup v1 allowed, 127.0.0.1 only) -> Node status gets InternalIP 127.0.0.1.

REAL_NODE=${TESTENV_REAL_NODE_NAME:-testenv-real-node}
REAL_NODE_LABEL=cnsreplay.dev/real-node
KUBELET_ROOT=$S/kubelet
REG_PORT=
REGISTRY=

real_node_prepare() { # before the CSI driver starts: checks, ports, folders, the kubelet's identity
	if pgrep -x kubelet >/dev/null; then
		testenv_die "a kubelet already runs on this machine (one real node at a time: it writes /var/lib/kubelet)"
	fi
	local c b
	for c in runc docker-registry; do
		command -v "$c" >/dev/null || testenv_die "$c is not installed (scripts/install-node-deps.sh)"
	done
	for b in kubelet containerd containerd-shim-runc-v2 loopback cni-eth0 crane pause; do
		[ -x "$BIN/$b" ] || testenv_die "missing $BIN/$b (run testenv/build.sh)"
	done
	REG_PORT=$(free_port 0)
	REGISTRY=127.0.0.1:$REG_PORT
	mkdir -p "$S"/{registry/data,containerd/certs.d,cni/bin,cni/conf,kubelet/plugins_registry,pod-logs}
	ln -s "$BIN/loopback" "$S/cni/bin/loopback"
	ln -s "$BIN/cni-eth0" "$S/cni/bin/cni-eth0"
	client kubelet "/O=system:masters/CN=system:node:$REAL_NODE"
}

real_node_start() {
	local t0 t_kubelet iogen cnsreplay host kport hport
	t0=$(date +%s.%N)
	iogen=${TESTENV_IOGEN_BIN:-${CARGO_TARGET_DIR:-$REPO/target}/x86_64-unknown-linux-musl/release/iogen}
	# Optional: the static cnsreplay of the in-cluster image (deploy/cnsreplay.Containerfile).
	cnsreplay=${TESTENV_CNSREPLAY_BIN:-}
	# --- registry (no auth section: Debian's default config would enable htpasswd) ---
	cat >"$S/registry/config.yml" <<EOF
version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage:
  filesystem: {rootdirectory: $S/registry/data}
  delete: {enabled: true}
http:
  addr: $REGISTRY
EOF
	start_exe registry "$(command -v docker-registry)" serve "$S/registry/config.yml"
	wait_for "registry" curl -sf "http://$REGISTRY/v2/"
	"$TESTENV_SRC/images.sh" "$REGISTRY" "$iogen" ${cnsreplay:+"$cnsreplay"} 2>>"$S/logs/images.log" || {
		tail -n 5 "$S/logs/images.log" >&2
		testenv_die "images.sh failed (see $S/logs/images.log)"
	}

	# --- containerd ---
	for host in "$REGISTRY" docker.io registry.k8s.io; do
		# docker.io and registry.k8s.io are mirrored onto the local registry: the kube
		# provider's default images `cnsreplay/iogen:latest` and `registry.k8s.io/pause:3.10`
		# are pulled from there (images.sh pushes both), and no pull leaves the machine.
		mkdir -p "$S/containerd/certs.d/$host"
		cat >"$S/containerd/certs.d/$host/hosts.toml" <<EOF
server = "http://$REGISTRY"
[host."http://$REGISTRY"]
  capabilities = ["pull", "resolve"]
EOF
	done
	cat >"$S/cni/conf/10-testenv.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "testenv-lo",
 "plugins": [{"type": "loopback"}, {"type": "cni-eth0"}]}
EOF
	cat >"$S/containerd/config.toml" <<EOF
version = 3
root = "$S/containerd/root"
state = "$S/containerd/state"
imports = []
[grpc]
  address = "$S/containerd/containerd.sock"
[ttrpc]
  address = "$S/containerd/containerd.sock.ttrpc"
[plugins.'io.containerd.internal.v1.opt']
  path = "$S/containerd/opt"
[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
[plugins.'io.containerd.cri.v1.runtime']
  # No CAP_SYS_RESOURCE in this kind of VM: a sandbox's oom_score_adj of -998 makes runc fail.
  restrict_oom_score_adj = true
  # Raw block volumes in non-root pods: without udev here, loop devices are root:root 0600;
  # the device node in the container gets the pod's runAsUser/runAsGroup instead (the
  # setting Kubernetes recommends for non-root block access).
  device_ownership_from_security_context = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["$S/cni/bin"]
    conf_dir = "$S/cni/conf"
    max_conf_num = 1
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$REGISTRY/cnsreplay/pause:testenv"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "$S/containerd/certs.d"
[plugins.'io.containerd.nri.v1.nri']
  disable = true
EOF
	# The shim must be on containerd's PATH.
	PATH=$BIN:$PATH start containerd --config "$S/containerd/config.toml"
	wait_for "containerd socket" test -S "$S/containerd/containerd.sock"
	testenv_log "containerd serving $(since "$t0") s after the registry started"

	# --- kubelet ---
	kport=$(free_port 0)
	hport=$(free_port 0)
	cat >"$S/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The machine's hybrid cgroup layout counts as cgroup v1, which 1.36 refuses unless allowed.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
address: 127.0.0.1
port: $kport
healthzBindAddress: 127.0.0.1
healthzPort: $hport
readOnlyPort: 0
# The apiserver presents no client certificate to kubelets: anonymous, on 127.0.0.1 only.
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$S/containerd/containerd.sock
imageServiceEndpoint: unix://$S/containerd/containerd.sock
podLogsDir: $S/pod-logs
containerLogMaxSize: 1Mi
containerLogMaxFiles: 3
volumePluginDir: $S/kubelet/volume-plugins
rotateCertificates: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
EOF
	t_kubelet=$(date +%s.%N)
	# --cloud-provider=external: the kubelet then leaves the Node's addresses to whoever set
	# them (a cloud controller; here the patch below) instead of putting the machine's own IP
	# and a Hostname entry back on every status update, which the apiserver would dial for
	# logs/exec while the kubelet listens on 127.0.0.1 only.
	start kubelet --config="$S/kubelet/config.yaml" --kubeconfig="$S/kubelet.kubeconfig" \
		--root-dir="$KUBELET_ROOT" --cert-dir="$S/kubelet/pki" --cloud-provider=external \
		--hostname-override="$REAL_NODE" --node-labels="$REAL_NODE_LABEL=true"
	wait_for "node $REAL_NODE registered" k get node "$REAL_NODE"
	# The kubelet rejects a loopback --node-ip, so the Node has no address and logs/exec fail
	# ("no preferred addresses found"); one status patch (InternalIP only: a Hostname entry
	# would make the apiserver resolve it) sets it, and plays the cloud controller's other
	# part: the taint an external cloud provider's node starts with comes off.
	k patch node "$REAL_NODE" --subresource=status --type=merge \
		-p '{"status":{"addresses":[{"type":"InternalIP","address":"127.0.0.1"}]}}' >/dev/null
	k taint node "$REAL_NODE" node.cloudprovider.kubernetes.io/uninitialized- >/dev/null 2>&1 || true
	wait_for "node $REAL_NODE Ready" real_node_ready
	real_node_address || testenv_die "the kubelet changed node $REAL_NODE's addresses: $(k get node "$REAL_NODE" -o jsonpath='{.status.addresses}')"
	testenv_log "real node $REAL_NODE Ready $(since "$t_kubelet") s after the kubelet started ($(since "$t0") s with registry, images, containerd)"
	if $OWN_CSI; then
		wait_for "CSINode $REAL_NODE listing $DRIVER (plugin registration)" real_node_csinode
	fi
	# iogen's own seccomp profile (RuntimeDefault refuses io_uring), where the kubelet finds
	# Localhost profiles: <root-dir>/seccomp.
	mkdir -p "$KUBELET_ROOT/seccomp/cnsreplay"
	cp "$REPO/deploy/seccomp/iogen.json" "$KUBELET_ROOT/seccomp/cnsreplay/iogen.json"
	cat >>"$S/testenv.env" <<EOF
export TESTENV_IOGEN_SECCOMP=cnsreplay/iogen.json
export TESTENV_REAL_NODE=$REAL_NODE
export TESTENV_REAL_NODE_LABEL=$REAL_NODE_LABEL
export TESTENV_REGISTRY=$REGISTRY
export TESTENV_IOGEN_IMAGE=$REGISTRY/cnsreplay/iogen:latest
export TESTENV_POD_LOGS=$S/pod-logs
EOF
	# In-cluster clients on this node (deploy/kustomize/overlays/testenv) run with the host's
	# network, since pods get loopback only and nothing routes the Service IP: they find the
	# API server at 127.0.0.1 on its port through this ConfigMap (envFrom), which overrides
	# the kubelet's KUBERNETES_SERVICE_* variables.
	k create namespace cnsreplay --dry-run=client -o yaml | k apply -f - >/dev/null
	k -n cnsreplay create configmap testenv-apiserver --from-literal=KUBERNETES_SERVICE_HOST=127.0.0.1 \
		--from-literal=KUBERNETES_SERVICE_PORT="$API_PORT" >/dev/null
	if [ -n "$cnsreplay" ]; then
		echo "export TESTENV_CNSREPLAY_IMAGE=$REGISTRY/cnsreplay/cnsreplay:latest" >>"$S/testenv.env"
	fi
}

real_node_address() {
	[ "$(k get node "$REAL_NODE" -o jsonpath='{.status.addresses}')" = '[{"address":"127.0.0.1","type":"InternalIP"}]' ]
}
real_node_ready() {
	[ "$(k get node "$REAL_NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
real_node_csinode() {
	k get csinode "$REAL_NODE" -o jsonpath='{.spec.drivers[*].name}' | grep -qw "$DRIVER"
}
