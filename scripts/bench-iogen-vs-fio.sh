#!/usr/bin/env bash
# iogen vs fio, side by side on the same 1 GiB file (issue 5's "must show" numbers).
#
#   scripts/bench-iogen-vs-fio.sh [DIR] [ROUNDS] [RUNTIME_S]
#
# (a) 4 KiB random read, O_DIRECT, QD32, io_uring in both: IOPS ratio and CPU time per I/O
#     ratio, alternating fio/iogen for ROUNDS rounds (default 3, RUNTIME_S seconds each).
# (b) iogen open loop at half the measured maximum: achieved/target rate, lateness p99.
# (c) coordinated omission: fixed-rate 4 KiB writes to a file on ext4 on a loop device,
#     frozen with fsfreeze for 1 s mid-run; iogen's response-time p99 vs fio's clat p99.
#
# Needs root (losetup, mount, fsfreeze), fio with the io_uring engine, jq. The machine may be
# shared with other work: numbers move from run to run; CPU time is per process, so it is the
# fairer comparison when others share the cores.
set -euo pipefail

# 1-minute load average, printed with every measurement (the machine may be shared).
load() { cut -d' ' -f1 /proc/loadavg; }

DIR=${1:-/var/tmp}
ROUNDS=${2:-3}
RT=${3:-10}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FILE="$DIR/iogen-bench.dat"
OUT=$(mktemp -d /tmp/iogen-bench.XXXXXX)
trap 'umount "$OUT/mnt" 2>/dev/null || true; [ -n "${LOOP:-}" ] && losetup -d "$LOOP" 2>/dev/null; rm -rf "$OUT"' EXIT

cargo build --release -q -p iogen --manifest-path "$ROOT/Cargo.toml"
IOGEN="$ROOT/target/release/iogen"
echo "fio: $(fio --version)  kernel: $(uname -r)  cpus: $(nproc)  file: $FILE  $(date -u +%FT%TZ)"

# Lay the file out once (real data, so reads hit the disk).
"$IOGEN" run --target "$FILE" --size 1g --rw randread --ios 1 >/dev/null

fio_common=(--filename="$FILE" --size=1g --ioengine=io_uring --direct=1 --bs=4k --output-format=json
            --fixedbufs=1 --registerfiles=1 --norandommap --randrepeat=0 --group_reporting)

# --- (a) closed loop, QD32 ----------------------------------------------------------------
ratios=()
for r in $(seq 1 "$ROUNDS"); do
    fio --name=a "${fio_common[@]}" --rw=randread --iodepth=32 --runtime="$RT" --time_based \
        >"$OUT/fio-a.json"
    "$IOGEN" run --target "$FILE" --size 1g --rw randread --bs 4k --iodepth 32 --direct \
        --runtime "${RT}s" --json "$OUT/iogen-a.json" >/dev/null
    read -r fiops fcpu < <(jq -r '.jobs[0] | [.read.iops,
        ((.usr_cpu + .sys_cpu) / 100 * (.job_runtime / 1000) / .read.total_ios * 1e6)] | @tsv' "$OUT/fio-a.json")
    read -r iiops icpu < <(jq -r '[.iops,
        ((.cpu.process_user_s + .cpu.process_sys_s) / .ios * 1e6)] | @tsv' "$OUT/iogen-a.json")
    ratio=$(jq -n "$iiops / $fiops")
    cratio=$(jq -n "$icpu / $fcpu")
    ratios+=("$iiops")
    printf '(a) round %d: fio %.0f IOPS %.2f µs CPU/IO | iogen %.0f IOPS %.2f µs CPU/IO | IOPS ratio %.3f  CPU/IO ratio %.3f | load %s\n' \
        "$r" "$fiops" "$fcpu" "$iiops" "$icpu" "$ratio" "$cratio" "$(load)"
done
max=$(printf '%s\n' "${ratios[@]}" | sort -g | tail -1)

# --- (b) open loop at half the maximum -----------------------------------------------------
half=$(jq -n "($max / 2) | floor")
"$IOGEN" run --target "$FILE" --size 1g --rw randread --bs 4k --rate "$half" --direct \
    --runtime "$((RT * 2))s" --json "$OUT/iogen-b.json" >/dev/null
jq -r --argjson t "$half" '"(b) open loop target \($t) IOPS: achieved \(.iops | floor) IOPS (\(.iops / $t * 100 | . * 100 | round / 100)% of target), lateness p50 \(.kinds.read.lateness.p50_us) µs p99 \(.kinds.read.lateness.p99_us) µs p99.9 \(.kinds.read.lateness.p99_9_us) µs max \(.kinds.read.lateness.max_us) µs; response p99 \(.kinds.read.response.p99_us) µs | load '"$(load)"'"' "$OUT/iogen-b.json"

# --- (c) coordinated omission under fsfreeze -----------------------------------------------
truncate -s 768M "$OUT/ext4.img"
LOOP=$(losetup --find --show "$OUT/ext4.img")
mkfs.ext4 -q -F "$LOOP"
mkdir -p "$OUT/mnt"
mount "$LOOP" "$OUT/mnt"
CO="$OUT/mnt/co.dat"
"$IOGEN" run --target "$CO" --size 256m --rw randread --ios 1 >/dev/null
freeze_mid() { sleep 4; fsfreeze -f "$OUT/mnt"; sleep 1; fsfreeze -u "$OUT/mnt"; }

freeze_mid & "$IOGEN" run --target "$CO" --size 256m --rw randwrite --bs 4k --rate 1000 --direct \
    --runtime 10s --json "$OUT/iogen-c.json" >/dev/null; wait
freeze_mid & fio --name=c --filename="$CO" --size=256m --ioengine=io_uring --direct=1 --bs=4k \
    --rw=randwrite --rate_iops=1000 --iodepth=1 --runtime=10 --time_based --output-format=json \
    >"$OUT/fio-c.json"; wait
jq -r '"(c) iogen  1000 writes/s, 1 s freeze: \(.ios) writes; response p90 \(.kinds.write.response.p90_us) µs p99 \(.kinds.write.response.p99_us) µs max \(.kinds.write.response.max_us) µs; service p99 \(.kinds.write.service.p99_us) µs | load '"$(load)"'"' "$OUT/iogen-c.json"
jq -r '.jobs[0].write | "(c) fio    1000 writes/s, 1 s freeze: \(.total_ios) writes; clat p90 \(.clat_ns.percentile["90.000000"] / 1000) µs p99 \(.clat_ns.percentile["99.000000"] / 1000) µs max \(.clat_ns.max / 1000) µs"' "$OUT/fio-c.json"
