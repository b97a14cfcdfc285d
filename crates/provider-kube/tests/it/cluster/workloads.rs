//! Workload operations on kwok nodes: `reschedule` to a named node, `cordon_node`,
//! `drain_node` (moves the run's pods off the node), checked against the API server's audit
//! log (which node each pod was bound to) and the nodes' state after cleanup; and
//! `abort_workload` in the middle of `io_phase` I/O run locally on a CSI block volume.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use provider_kube::{IoExec, KubeConfig};
use replay::EventRecord;
use trace_format::OpType;

use crate::common::*;

/// The nodes each pod of namespace `ns` was bound to, in order (from the audit log).
fn bindings(log: &str, ns: &str) -> HashMap<String, Vec<String>> {
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for line in log.lines() {
        let Ok(e) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let o = &e["objectRef"];
        if e["stage"] == "ResponseComplete"
            && e["verb"] == "create"
            && o["resource"] == "pods"
            && o["subresource"] == "binding"
            && o["namespace"] == ns
            && e["responseStatus"]["code"] == 201
        {
            let pod = o["name"].as_str().unwrap_or_default().to_owned();
            let node = e["requestObject"]["target"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            out.entry(pod).or_default().push(node);
        }
    }
    out
}

#[test]
fn reschedule_cordon_and_drain_move_only_the_runs_pods() {
    let Some(env) = testenv() else { return };
    let audit = env.vars()["TESTENV_AUDIT_LOG"].clone();
    let rt = rt();
    let c = rt.block_on(client(&env));
    let class = uniq("wl");
    rt.block_on(static_class(&c, &class, 2));
    let (n1, n2, n3) = ("testenv-node-1", "testenv-node-2", "testenv-node-3");
    let t = format!(
        "format: cnsreplay-trace\nversion: 1\ndefaults: {{volume_size: 1Gi}}\nevents:\n\
         - {{at: 0s, create_volume: {{volume: v0}}}}\n\
         - {{at: 0s, create_volume: {{volume: v1}}}}\n\
         - {{at: 0s, attach: {{workload: w0, volumes: [v0], node: {n1}}}}}\n\
         - {{at: 0s, attach: {{workload: w1, volumes: [v1], node: {n1}}}}}\n\
         - {{at: 1s, reschedule: {{workload: w0, node: {n2}}}}}\n\
         - {{at: 2s, cordon_node: {{node: {n3}}}}}\n\
         - {{at: 3s, drain_node: {{node: {n1}}}}}\n\
         - {{at: 4s, detach: {{workload: w0}}}}\n\
         - {{at: 4s, detach: {{workload: w1}}}}\n\
         - {{at: 5s, delete_volume: {{volume: v0}}}}\n\
         - {{at: 5s, delete_volume: {{volume: v1}}}}\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("wl.yaml");
    std::fs::write(&trace, t).unwrap();
    let run_dir = dir.path().join("run");
    let (out, p) = replay_run(&trace, &run_dir, provider(&env, &class, &trace));
    let ns = p.namespace().unwrap().to_owned();
    let recs = events(&run_dir);
    let story: Vec<String> = recs
        .iter()
        .map(|r| {
            let phases: Vec<String> = r
                .phases
                .iter()
                .map(|p| format!("{}@{:.3}s", p.name, p.at as f64 / 1e9))
                .collect();
            format!(
                "{} {:?} {:?} started {:.3}s done {:.3}s {:?} {phases:?}",
                r.id,
                r.op,
                r.outcome,
                r.started as f64 / 1e9,
                r.completed as f64 / 1e9,
                r.error
            )
        })
        .collect();
    assert_eq!(
        out.summary.failed, 0,
        "{:?}: {story:#?}",
        out.summary.errors
    );
    let moved = [
        "deleted",
        "pod-gone",
        "created",
        "scheduled",
        "running",
        "ready",
    ];
    for r in &recs {
        let names = ordered_phases(r);
        match r.op {
            OpType::Reschedule => assert_eq!(names, moved),
            OpType::CordonNode => assert_eq!(names, ["cordoned"]),
            OpType::DrainNode => {
                let mut want = vec!["cordoned"];
                want.extend(moved);
                want.push("drained");
                assert_eq!(names, want);
            }
            _ => {}
        }
    }
    // w0 went where it was sent; w1 was drained off node 1, and node 3 was cordoned: node 2.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let b = bindings(&std::fs::read_to_string(&audit).unwrap(), &ns);
    assert_eq!(b["w0"], [n1, n2], "{b:?}");
    assert_eq!(b["w1"], [n1, n2], "{b:?}");
    // Cleanup uncordoned both nodes the run cordoned.
    let nodes = Api::<Node>::all(c.clone());
    for n in [n1, n3] {
        let node = rt.block_on(nodes.get(n)).unwrap();
        assert_ne!(
            node.spec.and_then(|s| s.unschedulable),
            Some(true),
            "{n} is still cordoned"
        );
    }
    let left = rt.block_on(run_objects(&c, &out.manifest.run_id));
    assert!(left.is_empty(), "left behind: {left:?}");
    rt.block_on(drop_static(&c, &class));
}

#[test]
fn abort_workload_stops_local_io_and_detaches() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    if csi_driver(&env, &rt, &c, true).is_none() {
        return;
    }
    // The I/O would run for 10 minutes: the abort at 2 s must end it.
    let t = "format: cnsreplay-trace\nversion: 1\n\
             defaults: {storage_class: cnsreplay-csi, volume_size: 64Mi, volume_mode: block}\n\
             events:\n\
             - {at: 0s, create_volume: {volume: a}}\n\
             - {at: 0s, attach: {workload: w, volumes: [a]}}\n\
             - {at: 1s, io_phase: {workload: w, volume: a, pattern: random, read_pct: 100, block_size: 4Ki, load: {depth: 1}, duration: 10m}}\n\
             - {at: 2s, abort_workload: {workload: w}}\n\
             - {at: 3s, delete_volume: {volume: a}}\n";
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("abort.yaml");
    std::fs::write(&trace, t).unwrap();
    let run_dir = dir.path().join("run");
    let p = env.provider_for(
        KubeConfig {
            io_exec: IoExec::Local,
            ..KubeConfig::default()
        },
        &trace,
    );
    let (out, _p) = replay_run(&trace, &run_dir, p);
    assert_eq!(out.summary.failed, 0, "{:?}", out.summary.errors);
    let recs = events(&run_dir);
    let io = recs.iter().find(|r| r.op == OpType::IoPhase).unwrap();
    assert_eq!(ordered_phases(io), ["running", "io-stopped"]);
    let abort = recs.iter().find(|r| r.op == OpType::AbortWorkload).unwrap();
    assert_eq!(
        ordered_phases(abort),
        ["io-stopped", "deleted", "pod-gone", "detached"]
    );
    // The abort ended the I/O (the unit was stopped after the abort started, not by its
    // duration); the abort's `io-stopped` is stamped once the iogen thread had ended (device
    // closed), and only then was the pod deleted (phase order, checked above).
    assert!(io.completed >= abort.started, "{io:?} {abort:?}");
    let s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run_dir.join(format!("io/{}.json", io.id))).unwrap())
            .unwrap();
    assert_eq!(s["partial"], true, "{s}");
    assert!(s["ios"].as_u64().unwrap() > 0, "{s}");
    let left = rt.block_on(run_objects(&c, &out.manifest.run_id));
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A volume handed from one workload to the next, as churn on a pool of volumes does. On the
/// same node, while another workload still uses it, the attach-detach controller keeps the
/// VolumeAttachment: the first workload's detach ends when its pod is gone
/// (`in-use-on-node`), not at its timeout. On another node the next attach sees
/// `Multi-Attach error` Warnings until the old attachment is gone: a wait, not a failure,
/// and it ends attached there after the detach.
#[test]
fn a_volume_handed_to_the_next_workload_detaches_and_attaches_without_failing() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    if csi_driver(&env, &rt, &c, false).is_none() {
        return;
    }
    let (n1, n2) = ("testenv-node-1", "testenv-node-2");
    let t = format!(
        "format: cnsreplay-trace\nversion: 1\n\
         defaults: {{storage_class: cnsreplay-csi, volume_size: 16Mi, access_mode: ReadWriteOnce}}\n\
         events:\n\
         - {{at: 0s, id: 1, create_volume: {{volume: v}}}}\n\
         - {{at: 0s, id: 2, attach: {{workload: a, volumes: [v], node: {n1}}}}}\n\
         - {{at: 2s, id: 3, attach: {{workload: b, volumes: [v], node: {n1}}}}}\n\
         - {{at: 3s, id: 4, detach: {{workload: a}}}}\n\
         - {{at: 15s, id: 5, detach: {{workload: b}}}}\n\
         - {{at: 15s, id: 6, attach: {{workload: c, volumes: [v], node: {n2}}}}}\n\
         - {{at: 18s, id: 7, detach: {{workload: c}}}}\n\
         - {{at: 19s, id: 8, delete_volume: {{volume: v}}}}\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("handover.yaml");
    std::fs::write(&trace, t).unwrap();
    let run_dir = dir.path().join("run");
    // A short grace: a Multi-Attach Warning must not fail the attach, however long it lasts.
    let mut cfg = KubeConfig {
        failure_grace_ns: 1_000_000_000,
        ..KubeConfig::default()
    };
    cfg.timeouts.insert(OpType::Detach, 60_000_000_000);
    cfg.timeouts.insert(OpType::Attach, 60_000_000_000);
    let (out, _) = replay_run(&trace, &run_dir, env.provider_for(cfg, &trace));
    let recs = events(&run_dir);
    let by_id = |id: u64| recs.iter().find(|r| r.id == id).expect("record");
    for r in &recs {
        assert!(
            r.error.is_none(),
            "{} {}: {:?} {:?}",
            r.id,
            r.op,
            r.error_class,
            r.error
        );
    }
    assert_eq!(out.summary.failed, 0, "{:?}", out.summary.errors);
    // Same node: no detach happens, and the detach says why it ended.
    let kept = ordered_phases(by_id(4));
    assert!(kept.contains(&"in-use-on-node"), "{kept:?}");
    assert!(!kept.contains(&"detached"), "{kept:?}");
    // Not until b lets go of the volume at 15 s.
    assert!(
        by_id(4).response < 5_000_000_000,
        "the detach waited {} ns",
        by_id(4).response
    );
    // Another node: b's detach really detaches, and c's attach waited for it (its
    // `attached` comes after b's `detached`).
    let moved = by_id(5);
    assert!(ordered_phases(moved).contains(&"detached"), "{moved:?}");
    let c_attach = by_id(6);
    let at = |r: &EventRecord, name: &str| {
        r.phases
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.at)
            .unwrap_or_else(|| panic!("no {name} in {r:?}"))
    };
    assert!(
        at(c_attach, "attached") >= at(moved, "detached"),
        "{c_attach:?} {moved:?}"
    );
}
