# Sourced by the scripts that compare two revisions side by side (from the repository root):
# checks the arguments (REV_A REV_B [ROUNDS] [EVENTS] [RATE]: sets a, b, rounds, n, rate),
# finds the cargo target dir ($target, shared by both revisions' builds so only what differs
# is compiled again), makes a work folder ($work) whose worktrees (`ab_worktree REV`:
# $work/src-TAG) and files go on exit; `ab_prepare` builds both revisions and their traces,
# then waits for the machine to settle after the builds (`ab_settle`).
usage="usage: $0 REV_A REV_B [ROUNDS] [EVENTS] [RATE]"
[ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
a=$1 b=$2 rounds=${3:-5} n=${4:-1000000} rate=${5:-100000}
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
work=$(mktemp -d "/tmp/$(basename "$0" .sh).XXXX")
ab_cleanup() {
  for w in "$work"/src-*; do [ -d "$w" ] && git worktree remove --force "$w" 2>/dev/null || true; done
  rm -rf "$work"
}
trap ab_cleanup EXIT
ab_worktree() { # REV: checks it out in $work/src-TAG
  git worktree add -q --detach "$work/src-$(git rev-parse --short "$1")" "$1"
}
ab_prepare() { # "BIN ..." BUILD_ARGS...: each revision checked out and built (`cargo build
  # --release -q BUILD_ARGS`, and the `gen_trace` example), its BINs (paths under
  # $target/release) and gen_trace copied to $work/TAG beside its own trace of $n events at
  # $rate/s ($work/TAG/bench.cnsbin); sets ta and tb, the revisions' tags.
  local bins=$1 rev tag bin
  shift
  for rev in "$a" "$b"; do
    tag=$(git rev-parse --short "$rev")
    ab_worktree "$rev"
    # The revisions share the target dir: only what differs is compiled again.
    (cd "$work/src-$tag" && CARGO_TARGET_DIR=$target cargo build --release -q "$@" \
      && CARGO_TARGET_DIR=$target cargo build --release -q -p replay --example gen_trace)
    mkdir -p "$work/$tag"
    for bin in $bins examples/gen_trace; do cp "$target/release/$bin" "$work/$tag/"; done
    "$work/$tag/gen_trace" "$n" "$rate" "$work/$tag/bench.cnsbin" >/dev/null
  done
  ta=$(git rev-parse --short "$a") tb=$(git rev-parse --short "$b")
  ab_settle
}
ab_settle() { # waits, at most 240 s, for the 1-minute load average to fall below ${SETTLE_LOAD:-0.5}:
  # the two release builds leave it near 2 on this 2-CPU machine, and rounds started then
  # measured the builds' echo (the first A/B tables of docs/PERFORMANCE.md began at load 1.8–2.0)
  local _
  for _ in $(seq 48); do
    awk -v max="${SETTLE_LOAD:-0.5}" '{ exit !($1 < max) }' /proc/loadavg && return 0
    sleep 5
  done
  echo "ab_settle: load still $(cut -d' ' -f1 /proc/loadavg) after 240 s; measuring anyway" >&2
}
