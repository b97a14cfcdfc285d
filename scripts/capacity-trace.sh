#!/usr/bin/env bash
# Writes an attach/detach churn trace for capacity searches (JSON Lines) to OUT:
#   scripts/capacity-trace.sh OUT CYCLES GAP_MS [VOLUMES]
# VOLUMES volumes (default 8) are created first, one every 250 ms, then the steady part starts
# at 2 s + VOLUMES × 250 ms: workload w<i> attaches volume v<i mod VOLUMES> every GAP_MS and
# detaches it VOLUMES/2 × GAP_MS later (so at most half the volumes are attached and a volume
# is free again long before its next attach); the volumes are deleted at the end. At speed 1
# the trace offers 1000 / GAP_MS attaches (and detaches) per second; `cnsreplay capacity`
# scales that with the speed.
set -euo pipefail
out=${1:?usage: capacity-trace.sh OUT CYCLES GAP_MS [VOLUMES]}
cycles=${2:?cycles}
gap_ms=${3:?gap in ms}
vols=${4:-8}
ms=1000000
{
  printf '{"format":"cnsreplay-trace","version":1,"provenance":{"generator":"scripts/capacity-trace.sh"},'
  printf '"defaults":{"volume_size":"64Mi","access_mode":"ReadWriteOnce","volume_mode":"filesystem"}}\n'
  id=0
  for ((v = 0; v < vols; v++)); do
    id=$((id + 1))
    printf '{"at":%d,"id":%d,"create_volume":{"volume":"v%d"}}\n' $((v * 250 * ms)) $id $v
  done
  t0=$(((2000 + vols * 250) * ms))
  hold=$((vols / 2 * gap_ms * ms))
  # Events must be in time order: attach i at t0 + i·gap, detach i at that + hold.
  next_detach=0
  for ((i = 0; i < cycles; i++)); do
    t=$((t0 + i * gap_ms * ms))
    while ((next_detach < i)) && ((t0 + next_detach * gap_ms * ms + hold <= t)); do
      id=$((id + 1))
      printf '{"at":%d,"id":%d,"detach":{"workload":"w%d"}}\n' $((t0 + next_detach * gap_ms * ms + hold)) $id $next_detach
      next_detach=$((next_detach + 1))
    done
    id=$((id + 1))
    printf '{"at":%d,"id":%d,"attach":{"workload":"w%d","volumes":["v%d"]}}\n' $t $id $i $((i % vols))
  done
  while ((next_detach < cycles)); do
    id=$((id + 1))
    printf '{"at":%d,"id":%d,"detach":{"workload":"w%d"}}\n' $((t0 + next_detach * gap_ms * ms + hold)) $id $next_detach
    next_detach=$((next_detach + 1))
  done
  tend=$((t0 + cycles * gap_ms * ms + hold + 1000 * ms))
  for ((v = 0; v < vols; v++)); do
    id=$((id + 1))
    printf '{"at":%d,"id":%d,"delete_volume":{"volume":"v%d"}}\n' $tend $id $v
  done
} > "$out"
