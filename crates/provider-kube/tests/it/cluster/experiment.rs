//! The seed's Experiment 1 shape and a fixed-rate control loop, through `replay::run`.

use std::fmt::Write as _;

use trace_format::OpType;

use crate::common::*;

fn check_phases(records: &[replay::EventRecord]) {
    for r in records {
        let names = ordered_phases(r);
        match r.op {
            OpType::CreateVolume => assert_eq!(names, ["created", "bound"], "event {}", r.id),
            OpType::Attach => {
                assert_eq!(
                    names,
                    ["created", "scheduled", "running", "ready"],
                    "event {}",
                    r.id
                );
            }
            OpType::Detach => assert_eq!(names, ["deleted", "pod-gone"], "event {}", r.id),
            OpType::DeleteVolume => assert_eq!(names, ["deleted", "pvc-gone"], "event {}", r.id),
            _ => {}
        }
    }
}

/// 1 pod and 50 pods at once, each on a new volume and on a pre-existing one (declared in the
/// header, so created before the clock starts), then teardown.
#[test]
fn experiment1_one_and_fifty_pods_new_and_preexisting_volumes() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    let class = uniq("exp1");
    rt.block_on(static_class(&c, &class, 102));
    let mut t = String::from(
        "format: cnsreplay-trace\nversion: 1\ndefaults: {volume_size: 1Gi}\nvolumes:\n",
    );
    t.push_str("  - {name: pre-s}\n");
    for i in 0..50 {
        let _ = writeln!(t, "  - {{name: pre-{i}}}");
    }
    t.push_str("events:\n");
    t.push_str("  - {at: 0s, create_volume: {volume: new-s}}\n");
    t.push_str("  - {at: 0s, attach: {workload: pod-new-s, volumes: [new-s]}}\n");
    t.push_str("  - {at: 0s, attach: {workload: pod-pre-s, volumes: [pre-s]}}\n");
    for i in 0..50 {
        let _ = writeln!(t, "  - {{at: 3s, create_volume: {{volume: new-{i}}}}}");
    }
    for i in 0..50 {
        let _ = writeln!(
            t,
            "  - {{at: 3s, attach: {{workload: pod-new-{i}, volumes: [new-{i}]}}}}"
        );
        let _ = writeln!(
            t,
            "  - {{at: 3s, attach: {{workload: pod-pre-{i}, volumes: [pre-{i}]}}}}"
        );
    }
    for w in ["new-s", "pre-s"]
        .iter()
        .map(|s| (*s).to_owned())
        .chain((0..50).flat_map(|i| [format!("new-{i}"), format!("pre-{i}")]))
    {
        let _ = writeln!(t, "  - {{at: 6s, detach: {{workload: pod-{w}}}}}");
        let _ = writeln!(t, "  - {{at: 6s, delete_volume: {{volume: {w}}}}}");
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("exp1.yaml");
    std::fs::write(&trace, t).unwrap();
    let run_dir = dir.path().join("run");
    let (out, p) = replay_run(&trace, &run_dir, provider(&env, &class, &trace));
    let recs = events(&run_dir);
    check_phases(&recs);
    assert_eq!(out.summary.failed, 0, "{:?}", out.summary.errors);
    assert_eq!(recs.iter().filter(|r| r.op == OpType::Attach).count(), 102);
    assert_eq!(
        recs.iter().filter(|r| r.op == OpType::CreateVolume).count(),
        51
    );
    // Per-phase latencies are in the summary too.
    let attach = &out.summary.ops["attach"];
    assert!(attach.count == 102 && attach.response.p50 > 0);
    // The environment was captured.
    let env_json = p.environment();
    assert!(
        env_json["server_version"]["git_version"]
            .as_str()
            .is_some_and(|v| v.starts_with("v1.")),
        "{env_json}"
    );
    assert!(
        env_json["storage_classes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == class.as_str())
    );
    let manifest = replay::RunDir::open(&run_dir).manifest().expect("manifest");
    let env = &manifest.provider.environment;
    assert!(
        env.get("server_version").is_some() && env.get("nodes").is_some(),
        "the manifest records the cluster: {env}"
    );
    // Nothing of the run is left (the run-owned namespace went in the final cleanup).
    let left = rt.block_on(run_objects(&c, &out.manifest.run_id));
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(p.client_stats().requests > 300);
    rt.block_on(drop_static(&c, &class));
}

/// Create, attach, detach and delete at a fixed rate (5 volumes/s for 4 s).
#[test]
fn fixed_rate_create_attach_detach_delete() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    let class = uniq("rate");
    rt.block_on(static_class(&c, &class, 20));
    let mut t = testkit::trace::yaml_header("defaults: {volume_size: 512Mi}\n");
    let mut ev = Vec::new();
    for i in 0..20u64 {
        let at = i * 200;
        ev.push((at, format!("create_volume: {{volume: v{i}}}")));
        ev.push((
            at + 1000,
            format!("attach: {{workload: w{i}, volumes: [v{i}]}}"),
        ));
        ev.push((at + 3000, format!("detach: {{workload: w{i}}}")));
        ev.push((at + 4000, format!("delete_volume: {{volume: v{i}}}")));
    }
    ev.sort_by_key(|e| e.0);
    for (at, op) in ev {
        let _ = writeln!(t, "  - {{at: {at}ms, {op}}}");
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("rate.yaml");
    std::fs::write(&trace, t).unwrap();
    let run_dir = dir.path().join("run");
    let (out, p) = replay_run(&trace, &run_dir, provider(&env, &class, &trace));
    let recs = events(&run_dir);
    check_phases(&recs);
    assert_eq!(recs.len(), 80);
    assert_eq!(out.summary.failed, 0, "{:?}", out.summary.errors);
    for op in [
        OpType::CreateVolume,
        OpType::Attach,
        OpType::Detach,
        OpType::DeleteVolume,
    ] {
        assert_eq!(out.summary.ops[op.name()].count, 20, "{op}");
    }
    let left = rt.block_on(run_objects(&c, &out.manifest.run_id));
    assert!(left.is_empty(), "left behind: {left:?}");
    // 200 qps was never reached: no throttling to report.
    assert!(
        p.throttle_notices().is_empty(),
        "{:?}",
        p.throttle_notices()
    );
    rt.block_on(drop_static(&c, &class));
}
