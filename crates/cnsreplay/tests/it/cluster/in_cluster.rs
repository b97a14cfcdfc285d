//! cnsreplay inside the cluster it measures, on testenv's real node: the kustomize base with
//! its testenv overlay (deploy/kustomize) runs the README's Experiment 2 as a Job of the
//! static cnsreplay image; `cnsreplay fetch`, as an account bound by deploy/rbac/fetch, copies the
//! run directory off the claim and `analyze summary` reads it; nothing of the run is left.
//! Then a second Job is killed with its pod force-deleted, and `cleanup --run-id` removes
//! what it left. And a split trace replayed by parallel drivers, an Indexed Job from one
//! instant (overlay testenv-split), merged back with `merge-runs`. Skipped (one line) without
//! a real node and the cnsreplay image (`TESTENV_CNSREPLAY_BIN`) unless
//! `CNSREPLAY_REQUIRE_REAL_NODE=1`. The tests share the Job's fixed names: they take turns.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{Cluster, EXP2_OPS, nothing_left, real_node_cluster, run_objects_left};
use provider_kube::Piece;

use crate::{cnsreplay_within, ok, s, stdout};

const NS: &str = "cnsreplay";

/// The Job, its ConfigMaps and its claim have fixed names: one test at a time uses them.
static JOB: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The cluster with a real node and the cnsreplay image, or `None` (skipped, one line), with
/// this test's turn at the Job's fixed names ([`JOB`]), held until the guard is dropped.
fn image_cluster() -> Option<(Cluster, std::sync::MutexGuard<'static, ()>)> {
    let c = real_node_cluster()?;
    if c.get("TESTENV_CNSREPLAY_IMAGE").is_empty() {
        testkit::skip::missing(
            "REAL_NODE",
            "testenv has no cnsreplay image (TESTENV_CNSREPLAY_BIN)",
        );
        return None;
    }
    let turn = JOB
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Some((c, turn))
}

/// `kubectl wait` for the Job's completion; its logs (every pod's) either way.
fn wait_job(c: &Cluster, secs: u64) -> (bool, String) {
    let waited = Command::new(Path::new(c.get("TESTENV_BIN")).join("kubectl"))
        .arg(format!("--kubeconfig={}", c.get("KUBECONFIG")))
        .args([
            "-n",
            NS,
            "wait",
            "--for=condition=complete",
            "job/cnsreplay-run",
        ])
        .arg(format!("--timeout={secs}s"))
        .output()
        .expect("kubectl wait");
    let log = c.kubectl(&[
        "-n",
        NS,
        "logs",
        "-l",
        "job-name=cnsreplay-run",
        "--tail=-1",
        "--prefix",
    ]);
    (waited.status.success(), log)
}

/// Waits up to `secs` for `f`, polling every 500 ms.
fn until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "timed out after {secs} s waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The test's own objects (fixed names of the base) removed, waiting until they are gone.
fn remove_job_objects(c: &Cluster) {
    for what in [
        "job/cnsreplay-run",
        "configmap/cnsreplay-trace",
        "configmap/cnsreplay-split",
        "pvc/cnsreplay-runs",
    ] {
        c.kubectl(&[
            "-n",
            NS,
            "delete",
            what,
            "--ignore-not-found",
            "--wait=true",
            "--cascade=foreground",
        ]);
    }
}

/// Applies the testenv overlay with Experiment 2 as the trace.
fn start_job(c: &Cluster) {
    let ws = crate::workspace();
    c.kubectl(&["apply", "-k", s(&ws.join("deploy/rbac"))]);
    let from = format!(
        "--from-file=trace.yaml={}",
        s(&ws.join("traces/experiment2-short.yaml"))
    );
    c.kubectl(&["-n", NS, "create", "configmap", "cnsreplay-trace", &from]);
    c.kubectl(&[
        "apply",
        "-k",
        s(&ws.join("deploy/kustomize/overlays/testenv")),
    ]);
}

/// What the tests here run `cnsreplay fetch` and `cnsreplay cleanup --run-id --namespace
/// cnsreplay` as: the fetch piece, the Role of the Job's namespace and the reads.
const FETCH_AND_CLEANUP: [Piece; 3] = [Piece::Role, Piece::Read, Piece::Fetch];

/// `cnsreplay fetch` onto the real node as the runner `kc`, into `dest`.
fn fetch(c: &Cluster, kc: &Path, dest: &Path) -> String {
    let selector = format!("{}=true", c.get("TESTENV_REAL_NODE_LABEL"));
    let out = cnsreplay_within(
        &[
            "fetch",
            "--kubeconfig",
            s(kc),
            "--node-selector",
            &selector,
            "-o",
            s(dest),
        ],
        600,
    );
    ok(&out);
    stdout(&out)
}

#[test]
fn an_in_cluster_job_runs_experiment2_and_fetch_brings_its_run_directory_back() {
    let Some((c, _turn)) = image_cluster() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    // No trace of its own: `cnsreplay fetch` (the fetch piece) and `cleanup --run-id
    // --namespace cnsreplay` of the Job's run (the Role there and the reads).
    let kc = c.pieces_kubeconfig(tmp.path(), &FETCH_AND_CLEANUP.into());
    remove_job_objects(&c);
    start_job(&c);
    let (done, log) = wait_job(&c, 900);
    assert!(done, "the Job did not complete: {log}");
    assert!(log.contains("complete: 44 events on kube"), "{log}");
    assert!(log.contains("run directory: runs/trace-"), "{log}");

    // Back on this machine, as an account bound by deploy/rbac/fetch.
    let dest = tmp.path().join("fetched");
    let said = fetch(&c, &kc, &dest);
    assert!(said.contains("new:"), "{said}");
    let runs: Vec<_> = std::fs::read_dir(dest.join("runs"))
        .expect("fetched runs")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run = &runs[0];
    let out = cnsreplay_within(&["analyze", "summary", "--json", s(run)], 600);
    ok(&out);
    let summary: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("summary json");
    let r = &summary["runs"][0];
    assert_eq!(r["state"], "complete", "{r:#}");
    for (op, n) in EXP2_OPS {
        let row = &r["ops"][op];
        assert_eq!(row["count"], n, "{op}: {row}");
        assert_eq!(row["failed"], 0, "{op}: {row}");
    }
    nothing_left(&c, run);
    let fetch_pods = c.kubectl(&[
        "-n",
        NS,
        "get",
        "pods",
        "-l",
        "cnsreplay.io/role=fetch",
        "-o",
        "name",
    ]);
    assert!(
        fetch_pods.trim().is_empty(),
        "fetch pods left: {fetch_pods}"
    );
    // A second fetch keeps what is already here.
    let again = fetch(&c, &kc, &dest);
    assert!(
        again.contains("kept:") && !again.contains("new:"),
        "{again}"
    );

    // A run killed with its pod deleted: `cleanup --run-id` removes what it left.
    c.kubectl(&[
        "-n",
        NS,
        "delete",
        "job/cnsreplay-run",
        "--wait=true",
        "--cascade=foreground",
    ]);
    c.kubectl(&["-n", NS, "delete", "configmap/cnsreplay-trace"]);
    start_job(&c);
    let mut run_id = String::new();
    until("the second run's iogen pods", 180, || {
        let ids = c.kubectl(&[
            "-n",
            NS,
            "get",
            "pods",
            "-l",
            "cnsreplay.io/role=io",
            "--field-selector",
            "status.phase=Running",
            "-o",
            "jsonpath={.items[*].metadata.labels.cnsreplay\\.io/run}",
        ]);
        match ids.split_whitespace().next() {
            Some(id) => {
                run_id = id.to_owned();
                true
            }
            None => false,
        }
    });
    c.kubectl(&[
        "-n",
        NS,
        "delete",
        "pods",
        "-l",
        "job-name=cnsreplay-run",
        "--grace-period=0",
        "--force",
    ]);
    // The container outlives its force-deleted pod until the kubelet kills it: wait until its
    // process is gone, so nothing is created behind the cleanup's back.
    until("the killed run's process to exit", 120, || {
        !Command::new("pgrep")
            .args(["-f", "^/cnsreplay run /trace/"])
            .stdout(std::process::Stdio::null())
            .status()
            .expect("pgrep")
            .success()
    });
    c.kubectl(&[
        "-n",
        NS,
        "delete",
        "job/cnsreplay-run",
        "--ignore-not-found",
    ]);
    let out = cnsreplay_within(
        &[
            "cleanup",
            "--run-id",
            &run_id,
            "--namespace",
            NS,
            "--kubeconfig",
            s(&kc),
        ],
        600,
    );
    ok(&out);
    let left = run_objects_left(&c, &run_id);
    assert!(left.trim().is_empty(), "left behind: {left}");
    // The claim with the run directories is not the run's: it stays.
    let runs_pvc = c.kubectl(&[
        "-n",
        NS,
        "get",
        "pvc/cnsreplay-runs",
        "-o",
        "jsonpath={.status.phase}",
    ]);
    assert_eq!(runs_pvc, "Bound");
    remove_job_objects(&c);
}

/// Two tenants, each a volume and a workload on it; `trace split` makes a part of each.
const SPLIT_TRACE: &str = "format: cnsreplay-trace
version: 2
defaults: {volume_size: 64Mi}
events:
  - {at: 0s, tenant: shop, create_volume: {volume: shop-db}}
  - {at: 0s, tenant: ads, create_volume: {volume: ads-db}}
  - {at: 1s, tenant: shop, attach: {workload: shop-app, volumes: [shop-db]}}
  - {at: 1500ms, tenant: ads, attach: {workload: ads-app, volumes: [ads-db]}}
  - {at: 12s, tenant: shop, snapshot: {volume: shop-db, snapshot: shop-snap}}
  - {at: 20s, tenant: shop, detach: {workload: shop-app}}
  - {at: 20500ms, tenant: ads, detach: {workload: ads-app}}
  - {at: 24s, tenant: shop, delete_snapshot: {snapshot: shop-snap}}
  - {at: 26s, tenant: shop, delete_volume: {volume: shop-db}}
  - {at: 26s, tenant: ads, delete_volume: {volume: ads-db}}
";

#[test]
fn a_split_trace_runs_as_parallel_jobs_from_one_instant_and_merges_back() {
    let Some((c, _turn)) = image_cluster() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    // `cnsreplay fetch` of the Jobs' runs (the fetch piece).
    let kc = c.pieces_kubeconfig(tmp.path(), &FETCH_AND_CLEANUP.into());
    let trace = tmp.path().join("two-tenants.yaml");
    std::fs::write(&trace, SPLIT_TRACE).expect("trace");
    let parts = tmp.path().join("parts");
    ok(&cnsreplay_within(
        &["trace", "split", s(&trace), "-o", s(&parts)],
        600,
    ));
    let mut files: Vec<_> = std::fs::read_dir(&parts)
        .expect("parts")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "{files:?}");

    remove_job_objects(&c);
    let ws = crate::workspace();
    c.kubectl(&["apply", "-k", s(&ws.join("deploy/rbac"))]);
    let from: Vec<String> = files
        .iter()
        .enumerate()
        .map(|(i, f)| format!("--from-file=part-{i}.cnsbin={}", s(f)))
        .collect();
    let mut args = vec!["-n", NS, "create", "configmap", "cnsreplay-trace"];
    args.extend(from.iter().map(String::as_str));
    c.kubectl(&args);
    // Far enough ahead for both pods to start and both drivers to prepare.
    let start = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(60);
    let start_at = start.round(jiff::Unit::Second).expect("round").to_string();
    c.kubectl(&[
        "-n",
        NS,
        "create",
        "configmap",
        "cnsreplay-split",
        &format!("--from-literal=start_at={start_at}"),
    ]);
    c.kubectl(&[
        "apply",
        "-k",
        s(&ws.join("deploy/kustomize/overlays/testenv-split")),
    ]);
    let (done, log) = wait_job(&c, 900);
    assert!(done, "the Job did not complete: {log}");
    assert_eq!(log.matches("complete: ").count(), 2, "{log}");

    let dest = tmp.path().join("fetched");
    fetch(&c, &kc, &dest);
    let mut runs: Vec<_> = std::fs::read_dir(dest.join("runs"))
        .expect("fetched runs")
        .map(|e| e.expect("entry").path())
        .collect();
    runs.sort();
    assert_eq!(runs.len(), 2, "{runs:?}");
    // Both clocks started on the one instant.
    let start: jiff::Timestamp = start_at.parse().expect("start_at");
    for run in &runs {
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(run.join("manifest.json")).expect("manifest"))
                .expect("json");
        assert_eq!(m["state"], "complete", "{m:#}");
        let origin: jiff::Timestamp = m["origin"].as_str().expect("origin").parse().expect("t");
        let off = origin.duration_since(start).as_secs_f64();
        assert!(
            (0.0..0.1).contains(&off),
            "{}: clock started {off} s after start_at",
            run.display()
        );
    }
    // Merged back: every event of the trace, once, and none failed.
    let merged = tmp.path().join("merged");
    let mut args = vec!["merge-runs"];
    args.extend(runs.iter().map(|r| s(r)));
    args.extend(["-o", s(&merged)]);
    ok(&cnsreplay_within(&args, 600));
    let out = cnsreplay_within(&["analyze", "summary", "--json", s(&merged)], 600);
    ok(&out);
    let summary: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("summary json");
    let r = &summary["runs"][0];
    for (op, n) in [
        ("create_volume", 2),
        ("attach", 2),
        ("snapshot", 1),
        ("delete_snapshot", 1),
        ("detach", 2),
        ("delete_volume", 2),
    ] {
        let row = &r["ops"][op];
        assert_eq!(row["count"], n, "{op}: {row}");
        assert_eq!(row["failed"], 0, "{op}: {row}");
    }
    for run in &runs {
        nothing_left(&c, run);
    }
    remove_job_objects(&c);
}
