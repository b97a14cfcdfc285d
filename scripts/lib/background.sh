# Sourced by .ci/run and scripts/test.sh (from the repository root): builds that run beside
# the tests on CPU time nothing else wants, so they cost the tests nothing.
#
# A job runs in its own session (its process group is its pid, so it ends as a whole), at
# SCHED_IDLE and the idle I/O class where the machine allows them (else `nice -n 19`): a
# runnable test, cargo or rustc always comes first. Its output goes to
# $CNSREPLAY_BG_DIR/NAME.log and its exit status, when it ends, to NAME.status.
#
#   bg_init             make $CNSREPLAY_BG_DIR unless the caller's environment has one
#   bg_start NAME CMD…  start CMD as job NAME (nothing when NAME was started already)
#   bg_wait NAME        wait for NAME, show its log (stderr), return its exit status
#   bg_stop             end the jobs this process started (trap it on EXIT)

bg_owned=()

bg_init() {
  if [ -z "${CNSREPLAY_BG_DIR:-}" ]; then
    CNSREPLAY_BG_DIR=$(mktemp -d /tmp/cnsreplay-bg.XXXXXX)
    bg_own_dir=1
  fi
  export CNSREPLAY_BG_DIR
}

# The lowest scheduling the machine grants (a container may refuse SCHED_IDLE or ioclass 3).
bg_idle_prefix() {
  local p=(nice -n 19)
  chrt --idle 0 true 2>/dev/null && p+=(chrt --idle 0)
  ionice -c 3 true 2>/dev/null && p+=(ionice -c 3)
  printf '%s\n' "${p[@]}"
}

bg_start() {
  local name=$1 prefix
  shift
  [ ! -e "$CNSREPLAY_BG_DIR/$name.pid" ] || return 0
  mapfile -t prefix < <(bg_idle_prefix)
  rm -f "$CNSREPLAY_BG_DIR/$name.status"
  # setsid without --fork: the background child is no group leader, so it becomes the leader of
  # a new session and group with its own pid, which `kill -- -PID` ends with its children.
  setsid bash -c 'log=$1 st=$2; shift 2; s=0; "$@" >"$log" 2>&1 || s=$?; echo "$s" >"$st.tmp"; mv "$st.tmp" "$st"' \
    _ "$CNSREPLAY_BG_DIR/$name.log" "$CNSREPLAY_BG_DIR/$name.status" "${prefix[@]}" "$@" &
  echo $! >"$CNSREPLAY_BG_DIR/$name.pid"
  bg_owned+=("$name")
  echo "background: $name started (pid $!, ${prefix[*]}): $*" >&2
}

bg_wait() {
  local name=$1 t0 pid status
  t0=$(date +%s)
  pid=$(cat "$CNSREPLAY_BG_DIR/$name.pid")
  while [ ! -e "$CNSREPLAY_BG_DIR/$name.status" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      sleep 1 # it may have written its status just now
      [ -e "$CNSREPLAY_BG_DIR/$name.status" ] || {
        echo "background: $name (pid $pid) ended without a status" >&2
        cat "$CNSREPLAY_BG_DIR/$name.log" >&2
        return 1
      }
    fi
    sleep 2
  done
  status=$(cat "$CNSREPLAY_BG_DIR/$name.status")
  cat "$CNSREPLAY_BG_DIR/$name.log" >&2
  echo "background: $name ended with status $status; waited $(($(date +%s) - t0)) s for it" >&2
  return "$status"
}

bg_stop() {
  local name pid
  for name in ${bg_owned[@]+"${bg_owned[@]}"}; do
    [ ! -e "$CNSREPLAY_BG_DIR/$name.status" ] || continue
    pid=$(cat "$CNSREPLAY_BG_DIR/$name.pid" 2>/dev/null) || continue
    kill -- "-$pid" 2>/dev/null || true
  done
  if [ -n "${bg_own_dir:-}" ]; then
    rm -rf "$CNSREPLAY_BG_DIR"
  fi
}
