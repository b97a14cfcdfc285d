#!/usr/bin/env bash
# Stop exactly the processes testenv/up.sh started: each PID recorded in $TESTENV_DIR/pids,
# in the reverse order of starting, only while /proc/<pid>/cmdline still names the recorded
# binary (a recycled PID is left alone). SIGTERM, then SIGKILL after 15 s.
# Logs and data stay in the state dir; `--purge` removes the state dir afterwards.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

purge=false
case "${1:-}" in
"") ;;
--purge) purge=true ;;
*) testenv_die "usage: testenv/down.sh [--purge]" ;;
esac

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
