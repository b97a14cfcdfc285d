#!/usr/bin/env bash
# The scale run: cnsreplay (`run --provider kube`, release) driving a churn trace against a
# local cluster of NODES kwok nodes with our CSI driver (release), as the issue of runs at
# scale asks: 1000 nodes, 10 000 PVCs and 10 000 pods, 100 attach/s for 10 minutes.
#
#   scripts/bench-scale.sh [MODEL] [NODES]
#       (default traces/synth/scale-1000-nodes.yaml, 1000)
#
# Starts its own testenv (TESTENV_NODES=NODES, no real node; nothing else should run on the
# machine), synthesizes MODEL (seed 1), runs it with client-side throttling off, and reports:
#   - the driver's peak RSS and CPU per operation (user+system, sampled from /proc every
#     second; CPU per op over the measured window, origin to last completion);
#   - the operations: count, achieved rate, failures by class, response percentiles;
#   - watch completion delay: for each operation completed from a watch, the time from the
#     API server's write that completed it (audit log, stageTimestamp of ResponseComplete)
#     to the moment our watch saw it — pod binding → `scheduled`, pod status Running →
#     `running`, PVC status Bound → `bound` — its percentiles and maximum;
#   - lost completions: operations that failed with `timeout` although the audit log shows
#     the completing write before their deadline (must be 0);
#   - objects left after the run's cleanup (must be none): its PVCs, pods, PVs of the class,
#     VolumeAttachments.
# Results go in docs/PERFORMANCE.md (## kube provider, at scale).
set -euo pipefail
model=${1:-traces/synth/scale-1000-nodes.yaml}
nodes=${2:-1000}
cd "$(dirname "$0")/.."
command -v /usr/bin/time >/dev/null || apt-get install -y -q time >/dev/null
cargo build --release -q -p cnsreplay -p csi-driver
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
bin=$target/release/cnsreplay
tmp=$(mktemp -d /tmp/cnsreplay-bench-scale.XXXXXX)
cluster=$tmp/cluster
mkdir -p "$cluster"
finish() {
  TESTENV_DIR=$cluster testenv/down.sh >/dev/null 2>&1 || true
  [ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap finish EXIT
env_file=$(TESTENV_DIR=$cluster TESTENV_APISERVER_PORT=0 TESTENV_NODES=$nodes \
  TESTENV_CSI_BIN="$target/release/cnsreplay-csi" TESTENV_TIMEOUT=600 testenv/up.sh)
# shellcheck disable=SC1090
. "$env_file"
"$bin" -q synth "$model" -o "$tmp/trace.cnsbin" --seed 1 >/dev/null
"$bin" -q convert "$tmp/trace.cnsbin" -o "$tmp/trace.jsonl" >/dev/null
ns=scale
kubectl create namespace "$ns" >/dev/null
echo "model $model on $nodes kwok nodes; trace: $("$bin" stats "$tmp/trace.cnsbin" | head -1)"

# The run, with its RSS and CPU sampled every second.
/usr/bin/time -f "%M %U %S %e" -o "$tmp/time" "$bin" -q run "$tmp/trace.cnsbin" --provider kube \
  --kubeconfig "$KUBECONFIG" --namespace "$ns" --storage-class "$TESTENV_STORAGE_CLASS" \
  --kube-qps 0 -o "$tmp/run" --json >"$tmp/summary.json" 2>"$tmp/run.log" &
runner=$!
python3 - "$runner" "$tmp/samples.csv" <<'PY' &
import os, sys, time
parent, out = int(sys.argv[1]), sys.argv[2]
tick = os.sysconf("SC_CLK_TCK")
pid = None
with open(out, "w") as f:
    while True:
        try:
            if pid is None:  # the cnsreplay under /usr/bin/time
                kids = open(f"/proc/{parent}/task/{parent}/children").read().split()
                pid = int(kids[0]) if kids else None
            if pid is not None:
                st = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
                rss = [l for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS:")]
                cpu = (int(st[11]) + int(st[12])) / tick
                f.write(f"{time.time():.3f},{cpu:.2f},{int(rss[0].split()[1]) if rss else 0}\n")
                f.flush()
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            if not os.path.exists(f"/proc/{parent}"):
                break
        time.sleep(1)
PY
sampler=$!
status=0
wait "$runner" || status=$?
wait "$sampler" || true
echo "cnsreplay exited $status; $(tail -n 3 "$tmp/run.log" | tr '\n' ' ')"

# Objects left after the run's own cleanup (the PV deletions may still be finishing).
left_after() {
  local pvc pods pvs vas
  for _ in $(seq 1 600); do
    pvc=$(kubectl get pvc -n "$ns" -o name | grep -c . || true)
    pods=$(kubectl get pods -n "$ns" -o name | grep -c . || true)
    pvs=$(kubectl get pv -o jsonpath="{range .items[?(@.spec.storageClassName==\"$TESTENV_STORAGE_CLASS\")]}{.metadata.name}{'\n'}{end}" | grep -c . || true)
    vas=$(kubectl get volumeattachments -o name | grep -c . || true)
    [ $((pvc + pods + pvs + vas)) -eq 0 ] && break
    sleep 1
  done
  echo "left after cleanup: $pvc PVCs, $pods pods, $pvs PVs, $vas VolumeAttachments"
}
left_after

python3 - "$tmp" "$TESTENV_AUDIT_LOG" "$ns" <<'PY'
import json, re, sys, datetime
tmp, audit, ns = sys.argv[1], sys.argv[2], sys.argv[3]
def ts(s):
    # RFC 3339 with up to nanoseconds (ours) or microseconds (the audit log's).
    s = s.replace("Z", "")
    frac = 0.0
    if "." in s:
        s, f = s.split(".", 1)
        frac = float("0." + f)
    return datetime.datetime.fromisoformat(s).replace(tzinfo=datetime.timezone.utc).timestamp() + frac
manifest = json.load(open(f"{tmp}/run/manifest.json"))
origin = ts(manifest["origin"])
trace = {}
for line in open(f"{tmp}/trace.jsonl"):
    e = json.loads(line)
    if "id" not in e:
        continue
    for op in ("attach", "detach", "create_volume", "delete_volume"):
        if op in e:
            trace[e["id"]] = (op, e[op].get("workload") or e[op].get("volume"), e[op].get("volumes", []))
recs = [json.loads(l) for l in open(f"{tmp}/run/events.jsonl")]
# The API server's writes that complete operations (ResponseComplete, 2xx), per object.
binding, running, bound, pv_of, node_of, va_attached = {}, {}, {}, {}, {}, {}
status = {}  # pod -> [(t, Running and Ready)] of every status write
with open(audit) as f:
    for line in f:
        if '"ResponseComplete"' not in line:
            continue
        a = json.loads(line)
        ref = a.get("objectRef", {})
        if a.get("stage") != "ResponseComplete" or a.get("responseStatus", {}).get("code", 0) >= 300:
            continue
        t = ts(a["stageTimestamp"])
        res, sub, verb, name = ref.get("resource"), ref.get("subresource"), a.get("verb"), ref.get("name")
        o = a.get("responseObject") or {}
        if res == "volumeattachments" and verb in ("patch", "update"):
            spec, st = o.get("spec") or {}, o.get("status") or {}
            if st.get("attached"):
                key = ((spec.get("source") or {}).get("persistentVolumeName"), spec.get("nodeName"))
                va_attached.setdefault(key, []).append(t)
            continue
        if ref.get("namespace") != ns:
            continue
        if res == "pods" and sub == "binding" and verb == "create":
            binding.setdefault(name, []).append(t)
            node_of[name] = ((a.get("requestObject") or {}).get("target") or {}).get("name")
        elif res == "pods" and sub == "status" and verb in ("patch", "update"):
            st = o.get("status") or {}
            if st.get("phase") == "Running":
                running.setdefault(name, []).append(t)
            ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in st.get("conditions") or [])
            status.setdefault(name, []).append((t, st.get("phase") == "Running" and ready))
        elif res == "persistentvolumeclaims" and verb in ("patch", "update"):
            if (o.get("status") or {}).get("phase") == "Bound":
                bound.setdefault(name, []).append(t)
                pv_of[name] = (o.get("spec") or {}).get("volumeName")
def first_after(ws, t0, t1):
    """The first write in [t0, t1] (10 ms of clock slack on both ends), or None."""
    c = [w for w in sorted(ws) if t0 - 0.010 <= w <= t1 + 0.010]
    return c[0] if c else None
# Watch delay: from the completing write to our stamp of that phase, counted only where the
# write came while we were already waiting for it (after the previous phase's stamp).
delays = {"scheduled": [], "running": [], "bound": []}
lost, timeouts = [], []
for r in recs:
    op_name = trace.get(r["id"])
    if not op_name:
        continue
    op, name, vols = op_name
    ph = {p["name"]: origin + p["at"] / 1e9 for p in r.get("phases", [])}
    if r["outcome"] == "ok":
        for phase, prev, ws in (("scheduled", "created", binding), ("running", "attached", running),
                                ("bound", "created", bound)):
            if phase in ph and prev in ph:
                w = first_after(ws.get(name, []), ph[prev], ph[phase])
                if w is not None:
                    delays[phase].append(max(0.0, ph[phase] - w))
    elif r.get("error_class") == "timeout":
        deadline = origin + r["completed"] / 1e9
        start = origin + r["started"] / 1e9
        timeouts.append((op, name, r.get("error", "")))
        if op == "create_volume" and first_after(bound.get(name, []), start, deadline):
            lost.append((op, name))
        if op == "attach":
            # Complete as the attach judges it: at the deadline the pod's latest status is
            # Running and Ready (a pod that was Ready and then not, e.g. its node going
            # NotReady, is not complete), and its volumes are attached on its node.
            node = node_of.get(name)
            before = [s for s in sorted(status.get(name, [])) if s[0] <= deadline + 0.010]
            ok_pod = bool(before) and before[-1][1]
            ok_vas = all(first_after(va_attached.get((pv_of.get(v), node), []), start, deadline)
                         is not None for v in vols)
            if ok_pod and ok_vas and node:
                lost.append((op, name))
def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, max(0, int(q * len(v) + 0.999999) - 1))] if v else float("nan")
print("watch completion delay (the API server's completing write -> our stamp of that phase):")
for phase, v in delays.items():
    if v:
        print(f"  {phase:<10} n={len(v):>6}  p50 {pct(v,.5)*1e3:8.1f} ms  p99 {pct(v,.99)*1e3:8.1f} ms  max {max(v)*1e3:8.1f} ms")
allv = [x for v in delays.values() for x in v]
print(f"  largest: {max(allv)*1e3:.1f} ms over {len(allv)} completions" if allv else "  none")
by = {}
for op, _, err in timeouts:
    # What it waited for, without the object's name.
    what = re.sub(r"(pod|PV|PVC|node) [^ ]+", r"\1 X", err.split("; ")[-1])
    by[(op, what)] = by.get((op, what), 0) + 1
print(f"timeouts: {len(timeouts)} {sorted(by.items())}")
print(f"lost completions (completed in the cluster before the deadline, not seen): {len(lost)} {lost[:5]}")

summary = json.load(open(f"{tmp}/summary.json"))
ops = summary.get("ops", {})
print(f"state {summary.get('state')}, {summary.get('dispatched')} dispatched, {summary.get('failed')} failed {summary.get('errors')}")
print("operations (measured window):")
for op, o in sorted(ops.items()):
    r = o.get("response", {})
    print(f"  {op:<14} {o.get('count',0):>7} ok {o.get('ok',0):>7} failed {o.get('failed',0):>6} "
          f" resp p50 {r.get('p50',0)/1e6:9.1f} ms p99 {r.get('p99',0)/1e6:9.1f} ms")
rss_kb, user, sys_, wall = open(f"{tmp}/time").read().split()
samples = [tuple(map(float, l.split(","))) for l in open(f"{tmp}/samples.csv")]
last = origin + max((r["completed"] for r in recs), default=0) / 1e9
window = [s for s in samples if origin <= s[0] <= last]
n_ops = sum(o.get("count", 0) for o in ops.values())
if len(window) >= 2 and n_ops:
    cpu = window[-1][1] - window[0][1]
    print(f"driver CPU in the measured window: {cpu:.1f} s for {n_ops} operations = "
          f"{cpu / n_ops * 1e6:.0f} µs per operation ({cpu / (window[-1][0] - window[0][0]) * 100:.0f} % of one core)")
print(f"driver peak RSS {int(rss_kb)/1024:.1f} MB (whole process, GNU time); "
      f"{max((s[2] for s in samples), default=0)/1024:.1f} MB sampled; "
      f"CPU whole process {float(user)+float(sys_):.1f} s over {float(wall):.0f} s wall (setup and cleanup included)")
PY
exit "$status"
