#!/usr/bin/env bash
# Time and peak memory of traces whose header declares many volumes, ROUNDS times each.
#
#   scripts/bench-big-header.sh [VOLUMES] [ROUNDS]      (default 1000000 volumes, 5 rounds)
#
# Writes a JSON Lines trace whose header declares VOLUMES volumes (`pvc-NNNNNNN`, 1 GiB
# each; ~41 MB per million) and one event, then runs the release cnsreplay on it: `convert`
# to binary, `stats` and `validate` of the binary trace. Prints, per command, the range over
# the rounds of wall time and peak RSS (GNU time). Results go in docs/PERFORMANCE.md
# (## Trace tools).
set -euo pipefail
n=${1:-1000000}
rounds=${2:-5}
cd "$(dirname "$0")/.."
command -v /usr/bin/time >/dev/null || apt-get install -y -q time >/dev/null
cargo build --release -q -p cnsreplay
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
bin=$target/release/cnsreplay
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - "$n" "$dir/big.jsonl" <<'PY'
import json, sys
n, out = int(sys.argv[1]), sys.argv[2]
with open(out, "w") as f:
    f.write('{"format":"cnsreplay-trace","version":1,"volumes":[')
    f.write(",".join('{"name":"pvc-%07d","size":1073741824}' % i for i in range(n)))
    f.write("]}\n")
    f.write(json.dumps({"at": 0, "id": 0, "delete_volume": {"volume": "pvc-0000001"}}) + "\n")
PY
echo "volumes: $n; header $(du -m "$dir/big.jsonl" | cut -f1) MiB of JSON"
"$bin" -q convert "$dir/big.jsonl" -o "$dir/big.cnsbin"
for cmd in convert stats validate; do
  for r in $(seq "$rounds"); do
    case $cmd in
      convert) args=(-q convert "$dir/big.jsonl" -o "$dir/out.cnsbin") ;;
      *) args=("$cmd" "$dir/big.cnsbin") ;;
    esac
    /usr/bin/time -f "%e %M" -o "$dir/t" "$bin" "${args[@]}" >/dev/null 2>&1
    cat "$dir/t"
  done | awk -v c="$cmd" 'NR==1{tl=th=$1; ml=mh=$2} {if($1<tl)tl=$1; if($1>th)th=$1; if($2<ml)ml=$2; if($2>mh)mh=$2}
    END{printf "%-9s %s–%s s, peak RSS %d–%d MB\n", c, tl, th, ml/1024, mh/1024}'
done
