//! A storage system nobody here wrote: rancher's local-path-provisioner on testenv's real node
//! (StorageClass `local-path`: WaitForFirstConsumer, hostPath PVs made by a helper pod, not
//! CSI — no VolumeAttachment, no snapshots, no expansion). The seed's Experiment 1 shape
//! (create/attach/detach/delete churn) and Experiment 2 without snapshots run through the CLI as
//! the account of the pieces of `deploy/rbac/` each trace needs, every operation ok, the same table
//! as on `cnsreplay-csi`, nothing left (objects, PVs, the host directories); a trace with a
//! snapshot is refused at pre-flight naming the missing capability, before anything is created.
//! Skipped (one line) without a real node running local-path unless
//! `CNSREPLAY_REQUIRE_REAL_NODE=1`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Output;

use crate::{Cluster, kube_run_args, nothing_left, real_node_cluster};
use crate::{cnsreplay_within, s, stdout};

/// The real node with local-path, or None after the skip line.
fn local_path() -> Option<Cluster> {
    let c = real_node_cluster()?;
    if c.get("TESTENV_LOCAL_PATH_CLASS").is_empty() {
        testkit::skip::missing(
            "REAL_NODE",
            "testenv's real node runs no local-path-provisioner",
        );
        return None;
    }
    Some(c)
}

fn args(c: &Cluster, kc: &Path, trace: &Path, run: &Path) -> Vec<String> {
    kube_run_args(
        c,
        kc,
        s(trace),
        run,
        true,
        &["--storage-class", c.get("TESTENV_LOCAL_PATH_CLASS")],
    )
}

fn records(run: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(run.join("events.jsonl"))
        .expect("events")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn phases(e: &serde_json::Value) -> Vec<&str> {
    e["phases"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p["name"].as_str()).collect())
        .unwrap_or_default()
}

/// Every operation of `run` ok, `want` of each op type, the table's rows printed, the attach
/// and create phases of a WaitForFirstConsumer class without a VolumeAttachment, and nothing
/// of the run left on the cluster or the node's disk.
fn check_run(c: &Cluster, out: &Output, run: &Path, want: &[(&str, u64)]) {
    let text = stdout(out);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("summary.json")).expect("summary"))
            .expect("json");
    let recs = records(run);
    let failed: Vec<String> = recs
        .iter()
        .filter(|v| v["outcome"] != "ok")
        .map(|v| {
            format!(
                "{} {}: {} {}",
                v["id"], v["op"], v["error_class"], v["error"]
            )
        })
        .collect();
    assert_eq!(summary["state"], "complete", "{text}\n{failed:#?}");
    assert_eq!(summary["failed"], 0, "{failed:#?}\n{text}");
    for (op, n) in want {
        assert_eq!(summary["ops"][op]["count"], *n, "{op}: {summary}");
        assert!(text.contains(&format!("\n{op} ")), "no {op} row:\n{text}");
    }
    for r in &recs {
        let p = phases(r);
        match r["op"].as_str() {
            // The claim's creation only: provisioning waits for its consumer.
            Some("create_volume") => {
                assert_eq!(p, ["created", "wait-for-first-consumer"], "{r}");
            }
            // Provisioned once the scheduler chose the consumer's node; no VolumeAttachment
            // (not CSI). The scheduler binds the pod to the node as soon as its claim is
            // bound, and the two come through two watches: either may be seen first (12 ms
            // apart, `scheduled` first, in a cold CI run).
            Some("attach") => {
                assert_eq!(p[..2], ["created", "node-selected"], "{r}");
                let mut next = [p[2], p[3]];
                next.sort_unstable();
                assert_eq!(next, ["bound", "scheduled"], "{r}");
                assert!(p.contains(&"running"), "{r}");
                assert!(!p.contains(&"attached"), "{r}");
                let at = |n: &str| {
                    r["phases"]
                        .as_array()
                        .and_then(|a| a.iter().find(|x| x["name"] == n))
                        .and_then(|x| x["at"].as_u64())
                        .unwrap_or_else(|| panic!("no {n} in {r}"))
                };
                assert!(
                    at("node-selected") < at("bound"),
                    "provisioning took no time: {r}"
                );
            }
            _ => {}
        }
    }
    // The manifest records what the class is: not CSI, WaitForFirstConsumer.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).expect("manifest"))
            .expect("json");
    let class = c.get("TESTENV_LOCAL_PATH_CLASS");
    let sc = manifest["provider"]["environment"]["storage_classes"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == class))
        .unwrap_or_else(|| panic!("no {class} in {manifest}"));
    assert_eq!(sc["csi"], false, "{sc}");
    assert_eq!(sc["provisioner"], "rancher.io/local-path", "{sc}");
    assert_eq!(sc["volume_binding_mode"], "WaitForFirstConsumer", "{sc}");
    nothing_left(c, run);
    // The PVs local-path made (`pvc-<claim uid>`) and their host directories
    // (`pvc-<uid>_<namespace>_<claim>`) are gone.
    let ledger = std::fs::read_to_string(run.join("ledger.jsonl")).expect("ledger");
    let pvs: Vec<String> = ledger
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "pvc")
        .filter_map(|v| v["detail"]["uid"].as_str().map(|u| format!("pvc-{u}")))
        .collect();
    let volumes = want
        .iter()
        .find(|(op, _)| *op == "create_volume")
        .map_or(0, |(_, n)| *n);
    assert_eq!(pvs.len() as u64, volumes, "{ledger}");
    let all_pvs = c.kubectl(&["get", "pv", "-o", "name"]);
    let dir = c.get("TESTENV_LOCAL_PATH_DIR");
    let dirs: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for pv in &pvs {
        assert!(
            !all_pvs.contains(&format!("persistentvolume/{pv}\n")),
            "PV {pv} left"
        );
        let prefix = format!("{pv}_");
        assert!(
            !dirs.iter().any(|d| d.starts_with(&prefix)),
            "host directory of {pv} left in {dir}: {dirs:?}"
        );
    }
}

/// The seed's Experiment 1 shape: one pod on a new volume, then five at once, then all torn
/// down.
#[test]
fn experiment1_churn_on_local_path_all_ok_nothing_left() {
    let Some(c) = local_path() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut t = String::from(
        "format: cnsreplay-trace\nversion: 1\ndefaults: {volume_size: 64Mi}\nevents:\n  \
         - {at: 0s, create_volume: {volume: s}}\n  \
         - {at: 0s, attach: {workload: pod-s, volumes: [s]}}\n",
    );
    for i in 0..5 {
        let _ = writeln!(t, "  - {{at: 2s, create_volume: {{volume: v{i}}}}}");
        let _ = writeln!(
            t,
            "  - {{at: 2s, attach: {{workload: pod-{i}, volumes: [v{i}]}}}}"
        );
    }
    for w in std::iter::once("s".to_owned()).chain((0..5).map(|i| format!("v{i}"))) {
        let pod = if w == "s" {
            "pod-s".to_owned()
        } else {
            format!("pod-{}", &w[1..])
        };
        let _ = writeln!(t, "  - {{at: 4s, detach: {{workload: {pod}}}}}");
        let _ = writeln!(t, "  - {{at: 4s, delete_volume: {{volume: {w}}}}}");
    }
    let trace = tmp.path().join("exp1.yaml");
    std::fs::write(&trace, t).expect("write trace");
    let run = tmp.path().join("run");
    let kc = c.runner_kubeconfig_for(tmp.path(), &trace);
    let out = cnsreplay_within(&args(&c, &kc, &trace, &run), 300);
    crate::ok(&out);
    check_run(
        &c,
        &out,
        &run,
        &[
            ("create_volume", 6),
            ("attach", 6),
            ("detach", 6),
            ("delete_volume", 6),
        ],
    );
}

/// Experiment 2 without snapshots: five volumes, a pod on each, iogen pods doing I/O on the
/// mounted host directories, then teardown.
#[test]
fn experiment2_without_snapshots_on_local_path_all_ok_nothing_left() {
    let Some(c) = local_path() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut t = testkit::trace::yaml_header("defaults: {volume_size: 64Mi}\n");
    // Events in time order (run refuses a trace that is not): each step for all five.
    for i in 0..5 {
        let _ = writeln!(t, "  - {{at: 0s, create_volume: {{volume: db-{i}}}}}");
    }
    for i in 0..5 {
        let _ = writeln!(
            t,
            "  - {{at: 1s, tenant: db, attach: {{workload: db-pod-{i}, volumes: [db-{i}]}}}}"
        );
    }
    for i in 0..5 {
        let _ = writeln!(
            t,
            "  - {{at: 2s, tenant: db, io_phase: {{workload: db-pod-{i}, volume: db-{i}, \
             pattern: random, read_pct: 70, block_size: 8Ki, \
             load: {{rate: {{iops: 100, arrival: poisson}}}}, duration: 8s, region: 16Mi}}}}"
        );
    }
    for i in 0..5 {
        let _ = writeln!(t, "  - {{at: 12s, detach: {{workload: db-pod-{i}}}}}");
    }
    for i in 0..5 {
        let _ = writeln!(t, "  - {{at: 13s, delete_volume: {{volume: db-{i}}}}}");
    }
    let trace = tmp.path().join("exp2.yaml");
    std::fs::write(&trace, t).expect("write trace");
    let run = tmp.path().join("run");
    let kc = c.runner_kubeconfig_for(tmp.path(), &trace);
    let out = cnsreplay_within(&args(&c, &kc, &trace, &run), 400);
    crate::ok(&out);
    check_run(
        &c,
        &out,
        &run,
        &[
            ("create_volume", 5),
            ("attach", 5),
            ("io_phase", 5),
            ("detach", 5),
            ("delete_volume", 5),
        ],
    );
    let text = stdout(&out);
    assert!(
        text.contains("I/O p99.9:") && text.contains("without a snapshot in flight"),
        "{text}"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("summary.json")).expect("summary"))
            .expect("json");
    assert!(
        summary["io"]["without_snapshot"]["count"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "no I/O: {summary}"
    );
}

/// One volume with a pod, a snapshot of it and the snapshot's deletion, in `dir`.
fn snapshot_trace(dir: &Path) -> std::path::PathBuf {
    let trace = dir.join("snap.yaml");
    std::fs::write(
        &trace,
        "format: cnsreplay-trace\nversion: 1\ndefaults: {volume_size: 64Mi}\nevents:\n  \
         - {at: 0s, create_volume: {volume: v}}\n  \
         - {at: 0s, attach: {workload: w, volumes: [v]}}\n  \
         - {at: 2s, snapshot: {volume: v, snapshot: s}}\n  \
         - {at: 3s, delete_snapshot: {snapshot: s}}\n  \
         - {at: 4s, detach: {workload: w}}\n  \
         - {at: 4s, delete_volume: {volume: v}}\n",
    )
    .expect("write trace");
    trace
}

/// A snapshot of a `local-path` volume is refused at pre-flight: the event, the class and
/// the missing capability named, nothing created (no run directory, no namespace).
#[test]
fn a_snapshot_on_local_path_is_refused_at_preflight() {
    let Some(c) = local_path() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let trace = snapshot_trace(tmp.path());
    let run = tmp.path().join("run");
    let kc = c.runner_kubeconfig_for(tmp.path(), &trace);
    let mut a = args(&c, &kc, &trace, &run);
    // Even with the cluster's snapshot class named: it is for another driver.
    a.extend([
        "--snapshot-class".to_owned(),
        c.get("TESTENV_SNAPSHOT_CLASS").to_owned(),
    ]);
    let out = cnsreplay_within(&a, 60);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    let class = c.get("TESTENV_LOCAL_PATH_CLASS");
    for needle in [
        "nothing was created".to_owned(),
        format!(
            "snapshot ({}: event 2 (at 2.000s)) is not supported by StorageClass {class}",
            s(&trace)
        ),
        "its provisioner rancher.io/local-path is not a CSI driver".to_owned(),
        "no VolumeSnapshotClass has driver rancher.io/local-path".to_owned(),
    ] {
        assert!(err.contains(&needle), "{needle:?} not in:\n{err}");
    }
    // Pre-flight runs before the run directory (and then the run's namespace) is made.
    assert!(!run.exists(), "the run started: {}", run.display());
}

/// `run --preflight-only` on a foreign cluster's class: on local-path a snapshot trace is
/// refused naming the capability (exit 2), on the CSI class the same trace passes listing
/// what it checked (exit 0); neither creates a run directory or anything on the cluster.
#[test]
fn preflight_only_checks_a_trace_against_each_class_and_creates_nothing() {
    let Some(c) = local_path() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let trace = snapshot_trace(tmp.path());
    let run = tmp.path().join("run");
    let kc = c.runner_kubeconfig_for(tmp.path(), &trace);
    let mut a = args(&c, &kc, &trace, &run);
    a.extend([
        "--snapshot-class".to_owned(),
        c.get("TESTENV_SNAPSHOT_CLASS").to_owned(),
        "--preflight-only".to_owned(),
    ]);
    let out = cnsreplay_within(&a, 60);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("snapshot") && err.contains("is not supported by StorageClass"),
        "{err}"
    );
    assert!(!run.exists());
    // The same trace on the CSI class.
    let csi = c.get("TESTENV_STORAGE_CLASS").to_owned();
    let a: Vec<String> = a
        .iter()
        .map(|x| {
            if x == c.get("TESTENV_LOCAL_PATH_CLASS") {
                csi.clone()
            } else {
                x.clone()
            }
        })
        .collect();
    let out = cnsreplay_within(&a, 60);
    let text = stdout(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("pre-flight passed")
            && text.contains(&format!("StorageClass {csi}"))
            && text.contains("snapshot on StorageClass"),
        "{text}"
    );
    assert!(!run.exists());
}
