# Sourced by the calibration scripts: a trace of N attaches at RATE/s (one workload each, no
# volumes), in JSON Lines, on stdout.
#
#   attach_trace N RATE GENERATOR >trace.jsonl
attach_trace() {
  awk -v n="$1" -v rate="$2" -v gen="$3" 'BEGIN {
    print "{\"format\":\"cnsreplay-trace\",\"version\":1,\"provenance\":{\"generator\":\"" gen "\"}}";
    step = int(1e9 / rate);
    for (i = 0; i < n; i++)
      printf "{\"at\":%d,\"id\":%d,\"attach\":{\"workload\":\"w%d\",\"volumes\":[]}}\n", i * step, i + 1, i;
  }'
}
