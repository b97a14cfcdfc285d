//! Fidelity: the client-measured PVC create→Bound and pod create→Running against the API
//! server's own audit-log timestamps for the same objects (`stageTimestamp` of the create and
//! of the status write that set Bound/Running). The test asserts that every object is matched
//! and both sides are consistent; the agreement itself is a number, not a test verdict (no
//! timed assertions): set `CNSREPLAY_FIDELITY_OUT=FILE` to get the differences as JSON
//! (docs/PERFORMANCE.md, "kube provider").
//!
//! The create's `stageTimestamp` is taken after the object is stored, so a controller that
//! watches it (kwok marks a pod Running within a millisecond) can write its status before the
//! create's own response is stamped: seen in CI on a loaded host, a status write 2.3 ms before
//! the create's stamp. The server's "created" is therefore the earlier of the create's stamp
//! and the first later request that touched the object (`requestReceivedTimestamp`): the same
//! rule the provider applies to its own stamp (the earlier of the create's response and the
//! object's first watch event).

use std::collections::HashMap;
use std::fmt::Write as _;

use trace_format::OpType;

use crate::common::*;

fn ts_ns(s: &str) -> i128 {
    s.parse::<jiff::Timestamp>().unwrap().as_nanosecond()
}

/// (created, first status write with `phase`) per object name, in `ns`. The create's stamp is
/// the earlier of its `stageTimestamp` and the `requestReceivedTimestamp` of the first other
/// write to the object (module doc).
fn audit_times(log: &str, ns: &str, resource: &str, phase: &str) -> HashMap<String, (i128, i128)> {
    let mut created: HashMap<String, i128> = HashMap::new();
    let mut touched: HashMap<String, i128> = HashMap::new();
    let mut done: HashMap<String, i128> = HashMap::new();
    for line in log.lines() {
        let Ok(e) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let o = &e["objectRef"];
        if e["stage"] != "ResponseComplete" || o["resource"] != resource || o["namespace"] != ns {
            continue;
        }
        let t = ts_ns(e["stageTimestamp"].as_str().unwrap());
        let verb = e["verb"].as_str();
        if verb == Some("create") && o["subresource"].is_null() {
            let name = e["responseObject"]["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            created.insert(name, t);
            continue;
        }
        // A write that succeeded (its status, a binding) shows the object existed when it was
        // received.
        let name = o["name"].as_str().unwrap_or_default().to_owned();
        let ok = e["responseStatus"]["code"]
            .as_u64()
            .is_some_and(|c| c < 300);
        if ok && matches!(verb, Some("update" | "patch" | "create")) {
            let received = ts_ns(e["requestReceivedTimestamp"].as_str().unwrap());
            let first = touched.entry(name.clone()).or_insert(received);
            *first = (*first).min(received);
        }
        if matches!(verb, Some("update" | "patch"))
            && o["subresource"] == "status"
            && e["responseObject"]["status"]["phase"] == phase
        {
            done.entry(name).or_insert(t);
        }
    }
    created
        .into_iter()
        .filter_map(|(n, c)| {
            let c = touched.get(&n).map_or(c, |t| c.min(*t));
            done.get(&n).map(|d| (n, (c, *d)))
        })
        .collect()
}

fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1]
}

fn p99(v: Vec<f64>) -> f64 {
    quantile(v, 0.99)
}

fn p50(v: Vec<f64>) -> f64 {
    quantile(v, 0.5)
}

#[test]
fn client_latencies_match_the_audit_log() {
    let Some(env) = testenv() else { return };
    let Some(audit) = env.vars().get("TESTENV_AUDIT_LOG").cloned() else {
        panic!("testenv.env has no TESTENV_AUDIT_LOG");
    };
    let rt = rt();
    let c = rt.block_on(client(&env));
    let class = uniq("fid");
    let n = 100;
    rt.block_on(static_class(&c, &class, n));
    let mut t = testkit::trace::yaml_header("defaults: {volume_size: 1Gi}\n");
    for i in 0..n {
        let at = i * 50;
        let _ = writeln!(t, "  - {{at: {at}ms, create_volume: {{volume: v{i}}}}}");
        let _ = writeln!(
            t,
            "  - {{at: {at}ms, attach: {{workload: w{i}, volumes: [v{i}]}}}}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("fid.yaml");
    std::fs::write(&trace, t).unwrap();
    let run_dir = dir.path().join("run");
    let (out, p) = replay_run(&trace, &run_dir, provider(&env, &class, &trace));
    assert_eq!(out.summary.failed, 0, "{:?}", out.summary.errors);
    let ns = p.namespace().unwrap().to_owned();
    let recs = events(&run_dir);
    // The audit backend is blocking, but give the file a moment to be flushed.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let log = std::fs::read_to_string(&audit).unwrap();
    let mut report = serde_json::Map::new();
    for (op, resource, first, last, phase) in [
        (
            OpType::CreateVolume,
            "persistentvolumeclaims",
            "created",
            "bound",
            "Bound",
        ),
        (OpType::Attach, "pods", "created", "running", "Running"),
    ] {
        let server = audit_times(&log, &ns, resource, phase);
        let mut diffs = Vec::new();
        // Per object: client stamp minus audit timestamp at each end (clocks differ by a
        // constant: the median is taken as the offset), to see which end the error is at.
        let mut stamps = Vec::new();
        for r in recs.iter().filter(|r| r.op == op) {
            let at = |name: &str| r.phases.iter().find(|p| p.name == name).unwrap().at as i128;
            let client = at(last) - at(first);
            let name = if op == OpType::CreateVolume {
                format!("v{}", r.id / 2)
            } else {
                format!("w{}", r.id / 2)
            };
            let (c0, c1) = server[&name];
            let audit_ns = c1 - c0;
            assert!(
                client > 0 && audit_ns > 0,
                "{name}: client {client} ns, audit {audit_ns} ns"
            );
            diffs.push((client - audit_ns) as f64 / 1e6);
            stamps.push((at(first) - c0, at(last) - c1));
        }
        assert_eq!(
            diffs.len(),
            n,
            "{resource}: every object matched in the audit log"
        );
        let abs: Vec<f64> = diffs.iter().map(|d| d.abs()).collect();
        let mean = diffs.iter().sum::<f64>() / diffs.len() as f64;
        let max = abs.iter().copied().fold(0.0, f64::max);
        let side = |pick: fn(&(i128, i128)) -> i128| {
            let mut v: Vec<i128> = stamps.iter().map(pick).collect();
            v.sort_unstable();
            let off = v[v.len() / 2];
            p99(v.iter().map(|x| (x - off).abs() as f64 / 1e6).collect())
        };
        report.insert(
            resource.to_owned(),
            serde_json::json!({
                "objects": diffs.len(),
                "p50_abs_diff_ms": p50(abs.clone()),
                "p99_abs_diff_ms": p99(abs),
                "max_abs_diff_ms": max,
                "mean_signed_diff_ms": mean,
                "p99_abs_create_stamp_error_ms": side(|s| s.0),
                "p99_abs_done_stamp_error_ms": side(|s| s.1),
            }),
        );
    }
    if let Ok(path) = std::env::var("CNSREPLAY_FIDELITY_OUT") {
        std::fs::write(path, serde_json::to_vec_pretty(&report).unwrap()).unwrap();
    }
    rt.block_on(drop_static(&c, &class));
}
