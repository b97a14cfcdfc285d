#!/usr/bin/env bash
# Start the local Kubernetes test cluster: etcd, kube-apiserver (audit log on),
# kube-controller-manager, kube-scheduler, kwok with N fake nodes, the VolumeSnapshot CRDs and
# snapshot-controller; the CSI sidecars too when TESTENV_CSI_SOCKET names a CSI driver socket.
# Every process binds 127.0.0.1; their PIDs, logs, certificates and data live in the state dir.
#
# Environment (all optional):
#   TESTENV_DIR            state dir (default $HOME/.cache/cnsreplay/testenv/run); wiped on start
#   TESTENV_NODES          number of fake nodes (default 3)
#   TESTENV_APISERVER_PORT secure port of kube-apiserver (default 6443, or a free port if taken)
#   TESTENV_QPS/BURST      client rate limits of the controllers and sidecars (default 200/400)
#   TESTENV_CSI_DRIVER     CSI driver name for CSINode objects and topology (csi.cnsreplay.dev)
#   TESTENV_CSI_BIN        the cnsreplay-csi binary (default: $CARGO_TARGET_DIR/debug/cnsreplay-csi,
#                          CARGO_TARGET_DIR defaulting to the repository's target/, when present);
#                          started on $TESTENV_DIR/csi/csi.sock with root $TESTENV_DIR/csi-root,
#                          then the four CSI sidecars, the CSIDriver, StorageClasses
#                          cnsreplay-csi (Immediate) and cnsreplay-csi-wffc (WaitForFirstConsumer)
#                          and VolumeSnapshotClass cnsreplay-csi
#   TESTENV_CSI=0          do not start cnsreplay-csi even when its binary exists
#   TESTENV_SNAPSHOT_METADATA_BIN  the changed-block tracking stand-in (default:
#                          cnsreplay-snapshot-metadata-sidecar beside TESTENV_CSI_BIN), started
#                          with cnsreplay-csi when present: TLS on a free 127.0.0.1 port, the
#                          SnapshotMetadataService named after the driver, address in
#                          TESTENV_SNAPSHOT_METADATA (README.md "Changed-block tracking")
#   TESTENV_CSI_TOPOLOGY=1 cnsreplay-csi advertises topology: each PV is pinned to one node
#                          (default: no topology, PVs usable from every fake node)
#   TESTENV_CSI_LATENCY_CONFIG  JSON latency config for cnsreplay-csi (docs/csi-driver.md)
#   TESTENV_CSI_TIMEOUT    the sidecars' --timeout for CSI calls (default 60s)
#   TESTENV_CSI_SOCKET     path of another CSI driver's unix socket: start the four CSI sidecars
#                          against it instead (cnsreplay-csi is then not started)
#   TESTENV_TIMEOUT        seconds to wait for readiness (default 120)
#   TESTENV_REAL_NODE=1    also start one real node (testenv/node.sh): a registry on 127.0.0.1
#                          with the pause and iogen images, containerd and a kubelet; node
#                          testenv-real-node (TESTENV_REAL_NODE_NAME), label
#                          cnsreplay.dev/real-node=true; cnsreplay-csi then serves that node
#                          and registers with its kubelet. Needs root, runc, docker-registry
#                          and a static iogen (TESTENV_IOGEN_BIN, default
#                          $CARGO_TARGET_DIR/x86_64-unknown-linux-musl/release/iogen);
#                          TESTENV_CNSREPLAY_BIN (a static cnsreplay) adds the in-cluster
#                          cnsreplay image (TESTENV_CNSREPLAY_IMAGE, deploy/kustomize);
#                          and rancher's local-path-provisioner (testenv/local-path.sh):
#                          StorageClass local-path on that node (TESTENV_LOCAL_PATH_CLASS)
#   TESTENV_LOCAL_PATH=0   with the real node, do not start local-path-provisioner
#
# Afterwards: `. $TESTENV_DIR/testenv.env` sets KUBECONFIG, PATH (kubectl) and TESTENV_*.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

NODES=${TESTENV_NODES:-3}
REAL=${TESTENV_REAL_NODE:-0}
QPS=${TESTENV_QPS:-200}
BURST=${TESTENV_BURST:-400}
DRIVER=${TESTENV_CSI_DRIVER:-csi.cnsreplay.dev}
TIMEOUT=${TESTENV_TIMEOUT:-120}
TOPOLOGY_KEY="topology.$DRIVER/node"
MARKER=.cnsreplay-testenv
CSI_TIMEOUT=${TESTENV_CSI_TIMEOUT:-60s}
REPO=$(cd "$TESTENV_SRC/.." && pwd)
CSI_BIN=${TESTENV_CSI_BIN:-${CARGO_TARGET_DIR:-$REPO/target}/debug/cnsreplay-csi}
OWN_CSI=false
# testenv's stand-in for the external-snapshot-metadata sidecar (README "Changed-block
# tracking"), started beside cnsreplay-csi when built.
SMS_BIN=${TESTENV_SNAPSHOT_METADATA_BIN:-$(dirname "$CSI_BIN")/cnsreplay-snapshot-metadata-sidecar}
SMS_AUDIENCE=cnsreplay-testenv-snapshot-metadata
if [ -z "${TESTENV_CSI_SOCKET:-}" ] && [ "${TESTENV_CSI:-1}" != 0 ]; then
	if [ -x "$CSI_BIN" ]; then
		OWN_CSI=true
		CSI_BIN=$(cd "$(dirname "$CSI_BIN")" && pwd)/$(basename "$CSI_BIN")
	elif [ -n "${TESTENV_CSI_BIN:-}" ]; then
		testenv_die "TESTENV_CSI_BIN=$TESTENV_CSI_BIN is not an executable"
	fi
fi

BIN=$("$TESTENV_SRC/build.sh")
for b in etcd kube-apiserver kubectl kwok; do
	[ -x "$BIN/$b" ] || testenv_die "missing $BIN/$b (run testenv/build.sh)"
done

# --- state dir -------------------------------------------------------------------------------
if [ -d "$TESTENV_DIR" ]; then
	for f in "$TESTENV_DIR"/pids/*.pid; do
		if [ -e "$f" ] && testenv_pid_alive "$f"; then
			testenv_die "already running ($f); run testenv/down.sh first"
		fi
	done
	if [ -n "$(ls -A "$TESTENV_DIR")" ] && [ ! -e "$TESTENV_DIR/$MARKER" ]; then
		testenv_die "$TESTENV_DIR is not empty and not a testenv state dir; refusing to wipe it"
	fi
	rm -rf "$TESTENV_DIR"
fi
mkdir -p "$TESTENV_DIR"/{pki,pids,logs,etcd,kwok}
chmod 700 "$TESTENV_DIR/etcd"
touch "$TESTENV_DIR/$MARKER"
S=$TESTENV_DIR
P=$S/pki
t_start=$(date +%s.%N)

free_port() { # preferred port, or one the kernel picks when it is taken
	python3 - "$1" <<'PY'
import socket, sys
for port in (int(sys.argv[1]), 0):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    print(s.getsockname()[1])
    break
PY
}
ETCD_PORT=$(free_port 0)
ETCD_PEER_PORT=$(free_port 0)
API_PORT=$(free_port "${TESTENV_APISERVER_PORT:-6443}")
KWOK_PORT=$(free_port 0)
# The CSI sidecars' metrics endpoints (csi_sidecar_operations_seconds), one each.
declare -A SIDECAR_PORT
for c in csi-provisioner csi-attacher csi-resizer csi-snapshotter; do
	SIDECAR_PORT[$c]=$(free_port 0)
done
SERVER=https://127.0.0.1:$API_PORT
CSI_SOCKET=${TESTENV_CSI_SOCKET:-}
CSI_ROOT=
if $OWN_CSI; then
	CSI_SOCKET=$S/csi/csi.sock
	CSI_ROOT=$S/csi-root
fi

# --- certificates (self-signed CA, EC P-256 keys) -------------------------------------------
ssl() { openssl "$@" 2>>"$S/logs/openssl.log"; }
newkey() { ssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$P/$1.key"; }
newkey ca
ssl req -x509 -new -key "$P/ca.key" -subj "/CN=cnsreplay-testenv-ca" -days 3650 \
	-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
	-out "$P/ca.crt"
cert() { # name subject extendedKeyUsage [subjectAltName]
	newkey "$1"
	ssl req -new -key "$P/$1.key" -subj "$2" -out "$P/$1.csr"
	{
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=$3"
		[ -z "${4:-}" ] || echo "subjectAltName=$4"
	} >"$P/$1.ext"
	ssl x509 -req -in "$P/$1.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial \
		-days 3650 -extfile "$P/$1.ext" -out "$P/$1.crt"
	rm -f "$P/$1.csr" "$P/$1.ext"
}
cert apiserver "/CN=kube-apiserver" serverAuth \
	"IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
newkey sa
ssl pkey -in "$P/sa.key" -pubout -out "$P/sa.pub"

kubeconfig() { # name (pki/<name>.crt and .key) -> <name>.kubeconfig
	cat >"$S/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: testenv
  cluster:
    server: $SERVER
    certificate-authority: $P/ca.crt
users:
- name: $1
  user:
    client-certificate: $P/$1.crt
    client-key: $P/$1.key
contexts:
- name: testenv
  context: {cluster: testenv, user: $1}
current-context: testenv
EOF
}
# One client identity per component, so the audit log says who did what.
client() { # name subject
	cert "$1" "$2" clientAuth
	kubeconfig "$1"
}
client admin "/O=system:masters/CN=cnsreplay-admin"
client kube-controller-manager "/CN=system:kube-controller-manager"
client kube-scheduler "/CN=system:kube-scheduler"
for c in kwok snapshot-controller csi-provisioner csi-attacher csi-resizer csi-snapshotter; do
	client "$c" "/O=system:masters/CN=$c"
done
mv "$S/admin.kubeconfig" "$S/kubeconfig"
# The changed-block tracking stand-in's identity (testenv/csi/snapshot-metadata.yaml binds
# it) and its TLS server certificate, signed by the CA its SnapshotMetadataService advertises.
if $OWN_CSI && [ -x "$SMS_BIN" ]; then
	client snapshot-metadata "/CN=cnsreplay-snapshot-metadata"
	cert snapshot-metadata-server "/CN=cnsreplay-snapshot-metadata" serverAuth \
		"IP:127.0.0.1,DNS:localhost"
fi
WANT_NODES=$NODES
if [ "$REAL" = 1 ]; then
	. "$TESTENV_SRC/node.sh"
	real_node_prepare
	WANT_NODES=$((NODES + 1))
	if [ "${TESTENV_LOCAL_PATH:-1}" != 0 ]; then
		. "$TESTENV_SRC/local-path.sh"
		local_path_prepare
	fi
fi
ADMIN_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$ADMIN_TOKEN" >"$S/admin.token"
echo "$ADMIN_TOKEN,cnsreplay-admin-token,cnsreplay-admin-token,\"system:masters\"" >"$P/tokens.csv"
chmod 600 "$S/admin.token" "$P/tokens.csv" "$P"/*.key

cat >"$S/testenv.env" <<EOF
# Written by testenv/up.sh: source it to use the local test cluster.
export TESTENV_DIR=$S
export TESTENV_BIN=$BIN
export TESTENV_SERVER=$SERVER
export TESTENV_CA=$P/ca.crt
export TESTENV_ADMIN_TOKEN_FILE=$S/admin.token
export TESTENV_AUDIT_LOG=$S/logs/audit.jsonl
export TESTENV_CSI_DRIVER=$DRIVER
export TESTENV_TOPOLOGY_KEY=$TOPOLOGY_KEY
export TESTENV_NODES=$NODES
export TESTENV_QPS=$QPS
export TESTENV_BURST=$BURST
export TESTENV_CSI_SOCKET=$CSI_SOCKET
export TESTENV_CSI_ROOT=$CSI_ROOT
export TESTENV_CSI_OPS_LOG=${CSI_ROOT:+$CSI_ROOT/ops.jsonl}
export TESTENV_CSI_MAX_VOLUMES_FILE=${CSI_ROOT:+$S/csi/max-volumes}
export TESTENV_CSI_METRICS="${CSI_SOCKET:+$(for c in csi-provisioner csi-attacher csi-resizer csi-snapshotter; do printf 'http://127.0.0.1:%s/metrics ' "${SIDECAR_PORT[$c]}"; done)}"
export TESTENV_STORAGE_CLASS=${CSI_ROOT:+cnsreplay-csi}
export TESTENV_STORAGE_CLASS_WFFC=${CSI_ROOT:+cnsreplay-csi-wffc}
export TESTENV_SNAPSHOT_CLASS=${CSI_ROOT:+cnsreplay-csi}
export TESTENV_SNAPSHOT_METADATA=
export TESTENV_REAL_NODE=
export TESTENV_LOCAL_PATH_CLASS=
export KUBECONFIG=$S/kubeconfig
export PATH=$BIN:\$PATH
EOF

# --- processes -------------------------------------------------------------------------------
cleanup_on_error() {
	testenv_log "start failed; stopping what was started (logs stay in $S/logs)"
	"$TESTENV_SRC/down.sh" || true
}
trap 'rc=$?; [ "$rc" = 0 ] || cleanup_on_error' EXIT

start() { # name args...: start $BIN/name in its own session, record "<pid> <binary>"
	local name=$1
	shift
	start_exe "$name" "$BIN/$name" "$@"
}
start_exe() { # name binary args...: the same for a binary given by its path
	local name=$1 exe=$2
	shift 2
	[ -x "$exe" ] || testenv_die "missing $exe (run testenv/build.sh)"
	setsid "$exe" "$@" </dev/null >"$S/logs/$name.log" 2>&1 &
	echo "$! $exe" >"$S/pids/$name.pid"
	echo "$name" >>"$S/pids/order"
	# Until the child has exec'd, /proc/<pid>/cmdline is still this shell's, and the liveness
	# check (which compares it with the binary) would call it dead: wait for the exec.
	for _ in $(seq 1 100); do
		testenv_pid_alive "$S/pids/$name.pid" && break
		sleep 0.02
	done
	testenv_log "started $name (pid $!)"
}
wait_for() { # description command...: retry until it succeeds or TIMEOUT
	local what=$1 deadline=$(($(date +%s) + TIMEOUT))
	shift
	until "$@" >/dev/null 2>&1; do
		for f in "$S"/pids/*.pid; do
			testenv_pid_alive "$f" || {
				tail -n 20 "$S/logs/$(basename "$f" .pid).log" >&2
				testenv_die "$(basename "$f" .pid) exited while waiting for $what"
			}
		done
		[ "$(date +%s)" -lt "$deadline" ] || testenv_die "timed out after ${TIMEOUT}s waiting for $what"
		sleep 0.2
	done
}
since() { awk -v t0="$1" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.1f", t1 - t0 }'; }
k() { "$BIN/kubectl" --kubeconfig "$S/kubeconfig" "$@"; }
curl_api() { curl -sf --cacert "$P/ca.crt" --cert "$P/admin.crt" --key "$P/admin.key" "$SERVER$1"; }

t_procs=$(date +%s.%N)
start etcd --name=testenv --data-dir="$S/etcd" --log-level=warn \
	--listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
	--advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
	--listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
	--initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
	--initial-cluster="testenv=http://127.0.0.1:$ETCD_PEER_PORT"
wait_for etcd curl -sf "http://127.0.0.1:$ETCD_PORT/health"

start kube-apiserver \
	--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
	--etcd-servers="http://127.0.0.1:$ETCD_PORT" --cert-dir="$P" \
	--tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
	--client-ca-file="$P/ca.crt" --token-auth-file="$P/tokens.csv" \
	--service-account-issuer=https://kubernetes.default.svc.cluster.local \
	--service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
	--service-cluster-ip-range=10.96.0.0/16 --authorization-mode=RBAC --allow-privileged=true \
	--audit-policy-file="$TESTENV_SRC/audit-policy.yaml" --audit-log-format=json \
	--audit-log-path="$S/logs/audit.jsonl" --audit-log-maxsize=0 --audit-log-maxbackup=0
wait_for "kube-apiserver /readyz" curl_api /readyz
testenv_log "kube-apiserver ready at $SERVER after $(since "$t_procs") s"

start kube-controller-manager --kubeconfig="$S/kube-controller-manager.kubeconfig" \
	--bind-address=127.0.0.1 --secure-port=0 --leader-elect=false \
	--use-service-account-credentials=true --service-account-private-key-file="$P/sa.key" \
	--root-ca-file="$P/ca.crt" --service-cluster-ip-range=10.96.0.0/16 \
	--kube-api-qps="$QPS" --kube-api-burst="$BURST"
start kube-scheduler --kubeconfig="$S/kube-scheduler.kubeconfig" \
	--bind-address=127.0.0.1 --secure-port=0 --leader-elect=false \
	--kube-api-qps="$QPS" --kube-api-burst="$BURST"
kwok_config=$(printf '%s,' "$TESTENV_SRC"/kwok/*.yaml)
start kwok --kubeconfig="$S/kwok.kubeconfig" --config="${kwok_config%,}" \
	--manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
	--node-lease-duration-seconds=40 --cidr=10.0.0.1/16 --node-ip=127.0.0.1 \
	--server-address="127.0.0.1:$KWOK_PORT"

# Fake nodes with what kubelet would set for volumes, and their CSINode objects.
{
	for i in $(seq 1 "$NODES"); do
		n=testenv-node-$i
		cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: $n
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
    volumes.kubernetes.io/controller-managed-attach-detach: "true"
  labels:
    kubernetes.io/hostname: $n
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
    $TOPOLOGY_KEY: $n
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata:
  name: $n
spec:
  drivers:
  - name: $DRIVER
    nodeID: $n
    topologyKeys: ["$TOPOLOGY_KEY"]
EOF
	done
} >"$S/nodes.yaml"
k apply -f "$S/nodes.yaml" >/dev/null

crds=$(testenv_snapshot_crd_dir)
# The VolumeGroupSnapshot CRDs too: the feature is on by default in v8.7 and, without them,
# snapshot-controller waits --retry-crd-interval-max (30 s) before it starts working.
for r in volumesnapshotclasses volumesnapshotcontents volumesnapshots; do
	k apply -f "$crds/snapshot.storage.k8s.io_$r.yaml" >/dev/null
	k apply -f "$crds/groupsnapshot.storage.k8s.io_volumegroup${r#volume}.yaml" >/dev/null
done
# The SnapshotMetadataService API (changed-block tracking): ours, from the published schema.
k apply -f "$TESTENV_SRC/csi/snapshotmetadataservices.crd.yaml" >/dev/null
wait_for "VolumeSnapshot CRDs" k wait --for=condition=Established --timeout=5s \
	crd/snapshotmetadataservices.cbt.storage.k8s.io \
	crd/volumesnapshotclasses.snapshot.storage.k8s.io \
	crd/volumesnapshotcontents.snapshot.storage.k8s.io \
	crd/volumesnapshots.snapshot.storage.k8s.io \
	crd/volumegroupsnapshotclasses.groupsnapshot.storage.k8s.io \
	crd/volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io \
	crd/volumegroupsnapshots.groupsnapshot.storage.k8s.io
start snapshot-controller --kubeconfig="$S/snapshot-controller.kubeconfig" \
	--leader-election=false --kube-api-qps="$QPS" --kube-api-burst="$BURST"

if $OWN_CSI; then
	mkdir -p "$S/csi" "$CSI_ROOT"
	node_ids=$(seq -s, -f "testenv-node-%g" 1 "$NODES")
	node_id=testenv-node-1
	registration=()
	if [ "$REAL" = 1 ]; then
		# The driver's node service is the real node's: the kubelet finds it through the
		# registration socket and writes the node's CSINode from its NodeGetInfo.
		node_id=$REAL_NODE
		registration=(--registration-socket="$KUBELET_ROOT/plugins_registry/$DRIVER@reg.sock")
	fi
	# The node's volume limit is read from this file at every NodeGetInfo (none while it
	# does not exist); the kubelet refreshes the CSINode from it every 10 s (objects.yaml).
	start_exe cnsreplay-csi "$CSI_BIN" --endpoint="$CSI_SOCKET" --root="$CSI_ROOT" \
		--max-volumes-file="$S/csi/max-volumes" \
		--driver-name="$DRIVER" --node-id="$node_id" --nodes="$node_ids" "${registration[@]}" \
		--topology-key="$TOPOLOGY_KEY" ${TESTENV_CSI_TOPOLOGY:+--topology} \
		${TESTENV_CSI_LATENCY_CONFIG:+--latency-config="$TESTENV_CSI_LATENCY_CONFIG"}
	wait_for "cnsreplay-csi socket" test -S "$CSI_SOCKET"
fi
if [ -n "$CSI_SOCKET" ]; then
	[ -S "$CSI_SOCKET" ] || testenv_die "TESTENV_CSI_SOCKET=$CSI_SOCKET is not a socket"
	for c in csi-provisioner csi-attacher csi-resizer csi-snapshotter; do
		start "$c" --kubeconfig="$S/$c.kubeconfig" --csi-address="$CSI_SOCKET" \
			--leader-election=false --kube-api-qps="$QPS" --kube-api-burst="$BURST" \
			--timeout="$CSI_TIMEOUT" --http-endpoint="127.0.0.1:${SIDECAR_PORT[$c]}"
	done
else
	testenv_log "no CSI driver (no $CSI_BIN, TESTENV_CSI_SOCKET not set): CSI sidecars not started"
fi
if $OWN_CSI; then
	# The driver's API objects: names are a contract with the tests (docs/csi-driver.md).
	sed -e "s|@DRIVER@|$DRIVER|g" "$TESTENV_SRC/csi/objects.yaml" >"$S/csi/objects.yaml"
	k apply -f "$S/csi/objects.yaml" >/dev/null
fi
SMS_ADDRESS=
if $OWN_CSI && [ -x "$SMS_BIN" ]; then
	SMS_BIN=$(cd "$(dirname "$SMS_BIN")" && pwd)/$(basename "$SMS_BIN")
	KUBECONFIG="$S/snapshot-metadata.kubeconfig" start_exe snapshot-metadata "$SMS_BIN" \
		--csi-address="$CSI_SOCKET" --driver="$DRIVER" --listen=127.0.0.1:0 \
		--address-file="$S/csi/snapshot-metadata.addr" \
		--tls-cert="$P/snapshot-metadata-server.crt" --tls-key="$P/snapshot-metadata-server.key"
	wait_for "snapshot-metadata address" test -s "$S/csi/snapshot-metadata.addr"
	SMS_ADDRESS=$(cat "$S/csi/snapshot-metadata.addr")
	sed -e "s|@DRIVER@|$DRIVER|g" -e "s|@AUDIENCE@|$SMS_AUDIENCE|g" \
		-e "s|@ADDRESS@|$SMS_ADDRESS|g" -e "s|@CACERT@|$(base64 -w0 "$P/ca.crt")|g" \
		"$TESTENV_SRC/csi/snapshot-metadata.yaml" >"$S/csi/snapshot-metadata.yaml"
	k apply -f "$S/csi/snapshot-metadata.yaml" >/dev/null
	echo "export TESTENV_SNAPSHOT_METADATA=$SMS_ADDRESS" >>"$S/testenv.env"
elif $OWN_CSI; then
	testenv_log "no $SMS_BIN: changed-block tracking through Kubernetes not served"
fi

if [ "$REAL" = 1 ]; then
	real_node_start
	if [ "${TESTENV_LOCAL_PATH:-1}" != 0 ]; then
		local_path_start
	fi
fi
all_nodes_ready() {
	[ "$(k get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
		grep -c '^True$')" -ge "$WANT_NODES" ]
}
wait_for "$WANT_NODES nodes Ready" all_nodes_ready
wait_for "default service account" k -n default get serviceaccount default
if [ -n "$CSI_SOCKET" ]; then
	# A sidecar exits when it cannot talk to the driver (about 1 s after its start): give them
	# 3 s, then require all of them to be running.
	sleep 3
fi
for f in "$S"/pids/*.pid; do
	testenv_pid_alive "$f" || {
		tail -n 5 "$S/logs/$(basename "$f" .pid).log" >&2
		testenv_die "$(basename "$f" .pid) exited; see $S/logs"
	}
done
trap - EXIT
testenv_log "ready: $WANT_NODES nodes, start to ready $(since "$t_procs") s (with certificates $(since "$t_start") s)"
testenv_rss >&2
echo "$S/testenv.env"
