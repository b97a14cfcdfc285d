#!/usr/bin/env bash
# Stop exactly the processes testenv/up.sh started: each PID recorded in $TESTENV_DIR/pids,
# in the reverse order of starting, only while /proc/<pid>/cmdline still names the recorded
# binary (a recycled PID is left alone). SIGTERM, then SIGKILL after 15 s.
# With a real node (testenv/node.sh): first delete the node's pods through its kubelet (which
# unpublishes and unstages their volumes), then after the processes: stop what remains of pod
# containers and their shims (processes in the node's pod cgroups, shims of this state dir's
# containerd), unmount everything mounted under the state dir, remove the kubelet's log links
# in /var/log/containers and the CNI result cache entries of its network. local-path-provisioner
# (testenv/local-path.sh) is a recorded process like the others: stopped first.
# Logs and data stay in the state dir; `--purge` removes the state dir afterwards.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

purge=false
case "${1:-}" in
"") ;;
--purge) purge=true ;;
*) testenv_die "usage: testenv/down.sh [--purge]" ;;
esac

S=$TESTENV_DIR
real_node=false
[ -e "$S/kubelet/config.yaml" ] && real_node=true
if $real_node && [ -e "$S/pids/kubelet.pid" ] && testenv_pid_alive "$S/pids/kubelet.pid"; then
	read -r _ exe <"$S/pids/kubelet.pid"
	kubectl=$(dirname "$exe")/kubectl
	node=$(sed -n 's/^export TESTENV_REAL_NODE=\(.\+\)$/\1/p' "$S/testenv.env" 2>/dev/null | tail -n1)
	if [ -n "$node" ] && [ -x "$kubectl" ]; then
		t0=$(date +%s)
		"$kubectl" --kubeconfig "$S/kubeconfig" delete pods --all-namespaces --wait=true \
			--field-selector "spec.nodeName=$node" --grace-period=1 --timeout=30s >/dev/null 2>&1 ||
			testenv_log "pods on $node not all gone after 30 s; stopping them below"
		testenv_log "deleted the pods of $node in $(($(date +%s) - t0)) s"
	fi
fi
if [ -e "$TESTENV_DIR/pids/order" ]; then
	for name in $(tac "$TESTENV_DIR/pids/order"); do
		f=$TESTENV_DIR/pids/$name.pid
		[ -e "$f" ] || continue
		read -r pid exe <"$f"
		if testenv_pid_alive "$f"; then
			kill -TERM "$pid" 2>/dev/null || true
			for _ in $(seq 1 150); do
				testenv_pid_alive "$f" || break
				sleep 0.1
			done
			if testenv_pid_alive "$f"; then
				testenv_log "$name (pid $pid) ignored SIGTERM; SIGKILL"
				kill -KILL "$pid" 2>/dev/null || true
			fi
			testenv_log "stopped $name (pid $pid)"
		fi
		rm -f "$f"
	done
	rm -f "$TESTENV_DIR/pids/order"
fi
if $real_node; then
	# Pod processes: everything still in the node's pod cgroups (kubelet's cgroupfs root
	# "kubepods"), then the runc shims this state dir's containerd started.
	for procs in /sys/fs/cgroup/*/kubepods/cgroup.procs /sys/fs/cgroup/unified/kubepods/cgroup.procs; do
		[ -e "$procs" ] || continue
		for f in $(find "$(dirname "$procs")" -name cgroup.procs 2>/dev/null); do
			for pid in $(cat "$f" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
		done
	done
	for d in /proc/[0-9]*; do
		cmd=$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null) || continue
		case "$cmd" in
		*containerd-shim-runc-v2*"-address $S/containerd/containerd.sock"*)
			kill -KILL "${d#/proc/}" 2>/dev/null && testenv_log "killed shim ${d#/proc/}" ;;
		esac
	done
	sleep 0.2
	# Mounts under the state dir (container rootfs, netns, kubelet volumes, CSI staging and
	# targets), deepest first; a busy one is detached lazily.
	for m in $(awk -v s="$S/" 'index($5, s) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
	left=$(awk -v s="$S/" 'index($5, s) == 1' /proc/self/mountinfo | wc -l)
	[ "$left" = 0 ] || testenv_log "warning: $left mounts under $S remain"
	for l in /var/log/containers/*.log; do
		[ -L "$l" ] || continue
		case "$(readlink "$l")" in "$S"/*) rm -f "$l" ;; esac
	done
	rm -f /var/lib/cni/results/testenv-lo-*
	# The kubelet's device manager always uses /var/lib/kubelet/device-plugins: remove its
	# socket and checkpoint, then the folders if nothing else is in them.
	rm -f /var/lib/kubelet/device-plugins/kubelet.sock /var/lib/kubelet/device-plugins/kubelet_internal_checkpoint
	rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet 2>/dev/null || true
	# The pod cgroups the kubelet created (empty now), deepest first.
	for root in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/unified/kubepods; do
		[ -d "$root" ] || continue
		find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null || true
	done
fi
# cnsreplay-csi's loop devices outlive it (kernel objects): release those backed by its images
# in this state dir, so the next up.sh (which wipes the dir) leaks none.
if [ -d "$TESTENV_DIR/csi-root" ]; then
	root=$(cd "$TESTENV_DIR/csi-root" && pwd)
	for img in "$root"/volumes/*.img "$root"/snapshots/*.img; do
		[ -e "$img" ] || continue
		for dev in $(losetup -n -O NAME -j "$img" 2>/dev/null); do
			losetup -d "$dev" && testenv_log "detached $dev ($img)"
		done
	done
fi
if $purge && [ -e "$TESTENV_DIR/.cnsreplay-testenv" ]; then
	rm -rf "$TESTENV_DIR"
	testenv_log "removed $TESTENV_DIR"
fi
