# Sourced by the scripts that compare two revisions side by side (from the repository root):
# checks the arguments (REV_A REV_B [ROUNDS] [EVENTS] [RATE]: sets a, b, rounds, n, rate),
# finds the cargo target dir ($target, shared by both revisions' builds so only what differs
# is compiled again), makes a work folder ($work) whose worktrees (`ab_worktree REV`:
# $work/src-TAG) and files go on exit.
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
