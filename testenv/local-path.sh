# shellcheck shell=bash
# rancher's local-path-provisioner on testenv's real node (TESTENV_REAL_NODE=1, unless
# TESTENV_LOCAL_PATH=0): sourced by up.sh after node.sh, which defines S, BIN, REAL_NODE,
# REGISTRY, client, start_exe, wait_for, since, k and testenv_*. See testenv/README.md
# ("local-path-provisioner").
#
# A storage system nobody here wrote: hostPath PVs made by a helper pod per volume, not CSI
# (no VolumeAttachment, no snapshots, no expansion), WaitForFirstConsumer. It runs out of
# cluster with its own kubeconfig; its helper pods run on the real node in namespace
# local-path-storage, from the helper image images.sh pushed.

LOCAL_PATH_NS=local-path-storage
LOCAL_PATH_CLASS=local-path
LOCAL_PATH_SA=local-path-provisioner-service-account
LOCAL_PATH_DIR=$S/local-path

local_path_prepare() { # before up.sh writes the env file: the binary and the client identity
	LOCAL_PATH_BIN=$("$TESTENV_SRC/build.sh" --local-path 2>>"$S/logs/build.log")/local-path-provisioner
	[ -x "$LOCAL_PATH_BIN" ] || testenv_die "missing $LOCAL_PATH_BIN (run testenv/build.sh)"
	client local-path-provisioner "/O=system:masters/CN=local-path-provisioner"
	mkdir -p "$LOCAL_PATH_DIR/volumes"
}

local_path_start() { # after the real node is Ready
	local t0 helper
	t0=$(date +%s.%N)
	helper=$REGISTRY/cnsreplay/local-path-helper:testenv
	# Its helper pods run as root with a hostPath: the namespace carries no Pod Security label
	# (a run's own namespace can still be `restricted`).
	cat >"$LOCAL_PATH_DIR/config.json" <<EOF
{"nodePathMap": [{"node": "$REAL_NODE", "paths": ["$LOCAL_PATH_DIR/volumes"]}],
 "cmdTimeoutSeconds": 60}
EOF
	# The helper pod template: its `image:` wins over --helper-image, so it names ours (with
	# `busybox` the node would look for it on docker.io, and every provisioning would fail
	# after cmdTimeoutSeconds).
	cat >"$LOCAL_PATH_DIR/helperPod.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: helper-pod
spec:
  containers:
  - name: helper-pod
    image: $helper
    imagePullPolicy: IfNotPresent
EOF
	cat >"$LOCAL_PATH_DIR/setup" <<'EOF'
#!/bin/sh
set -eu
mkdir -m 0777 -p "$VOL_DIR"
EOF
	cat >"$LOCAL_PATH_DIR/teardown" <<'EOF'
#!/bin/sh
set -eu
rm -rf "$VOL_DIR"
EOF
	cat >"$LOCAL_PATH_DIR/objects.yaml" <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: $LOCAL_PATH_NS
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: $LOCAL_PATH_SA
  namespace: $LOCAL_PATH_NS
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $LOCAL_PATH_CLASS
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
# Only the real node has a directory for it (config.json): the scheduler places its
# consumers there.
allowedTopologies:
- matchLabelExpressions:
  - key: kubernetes.io/hostname
    values: ["$REAL_NODE"]
EOF
	k apply -f "$LOCAL_PATH_DIR/objects.yaml" >/dev/null
	k -n "$LOCAL_PATH_NS" create configmap local-path-config \
		--from-file=config.json="$LOCAL_PATH_DIR/config.json" \
		--from-file=helperPod.yaml="$LOCAL_PATH_DIR/helperPod.yaml" \
		--from-file=setup="$LOCAL_PATH_DIR/setup" \
		--from-file=teardown="$LOCAL_PATH_DIR/teardown" >/dev/null
	start_exe local-path-provisioner "$LOCAL_PATH_BIN" --debug start \
		--kubeconfig "$S/local-path-provisioner.kubeconfig" \
		--config "$LOCAL_PATH_DIR/config.json" --namespace "$LOCAL_PATH_NS" \
		--helper-image "$helper" --configmap-name local-path-config \
		--service-account-name "$LOCAL_PATH_SA"
	wait_for "local-path-provisioner started" grep -q "Provisioner started" "$S/logs/local-path-provisioner.log"
	cat >>"$S/testenv.env" <<EOF
export TESTENV_LOCAL_PATH_CLASS=$LOCAL_PATH_CLASS
export TESTENV_LOCAL_PATH_DIR=$LOCAL_PATH_DIR/volumes
export TESTENV_LOCAL_PATH_NAMESPACE=$LOCAL_PATH_NS
EOF
	testenv_log "local-path-provisioner serving StorageClass $LOCAL_PATH_CLASS on $REAL_NODE after $(since "$t0") s"
}
