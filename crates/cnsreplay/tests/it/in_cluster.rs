//! cnsreplay inside the cluster it measures, on testenv's real node: the kustomize base with
//! its testenv overlay (deploy/kustomize) runs the README's Experiment 2 as a Job of the
//! static cnsreplay image; `cnsreplay fetch`, as the service account of deploy/rbac, copies the
//! run directory off the claim and `analyze summary` reads it; nothing of the run is left.
//! Then a second Job is killed with its pod force-deleted, and `cleanup --run-id` removes
//! what it left. Skipped (one line) without a real node and the cnsreplay image
//! (`TESTENV_CNSREPLAY_BIN`) unless `CNSREPLAY_REQUIRE_REAL_NODE=1`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::real_node::{Cluster, EXP2_OPS, nothing_left, real_node_cluster, run_objects_left};
use crate::{cnsreplay, ok, s, stdout};

const NS: &str = "cnsreplay";

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

/// `cnsreplay fetch` onto the real node as the runner `kc`, into `dest`.
fn fetch(c: &Cluster, kc: &Path, dest: &Path) -> String {
    let selector = format!("{}=true", c.get("TESTENV_REAL_NODE_LABEL"));
    let out = cnsreplay(&[
        "fetch",
        "--kubeconfig",
        s(kc),
        "--node-selector",
        &selector,
        "-o",
        s(dest),
    ]);
    ok(&out);
    stdout(&out)
}

#[test]
fn an_in_cluster_job_runs_experiment2_and_fetch_brings_its_run_directory_back() {
    let Some(c) = real_node_cluster() else {
        return;
    };
    if c.get("TESTENV_CNSREPLAY_IMAGE").is_empty() {
        assert!(
            std::env::var("CNSREPLAY_REQUIRE_REAL_NODE").as_deref() != Ok("1"),
            "CNSREPLAY_REQUIRE_REAL_NODE=1 but testenv has no cnsreplay image \
             (TESTENV_CNSREPLAY_BIN)"
        );
        #[allow(clippy::print_stderr)] // the skip line is the contract
        {
            eprintln!("skipped: testenv has no cnsreplay image (TESTENV_CNSREPLAY_BIN)");
        }
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let kc = c.runner_kubeconfig(tmp.path());
    remove_job_objects(&c);
    start_job(&c);
    let waited = Command::new(Path::new(c.get("TESTENV_BIN")).join("kubectl"))
        .arg(format!("--kubeconfig={}", c.get("KUBECONFIG")))
        .args([
            "-n",
            NS,
            "wait",
            "--for=condition=complete",
            "job/cnsreplay-run",
        ])
        .arg("--timeout=900s")
        .output()
        .expect("kubectl wait");
    let log = c.kubectl(&["-n", NS, "logs", "job/cnsreplay-run"]);
    assert!(waited.status.success(), "the Job did not complete: {log}");
    assert!(log.contains("complete: 44 events on kube"), "{log}");
    assert!(log.contains("run directory: runs/trace-"), "{log}");

    // Back on this machine, as the service account (deploy/rbac piece 5).
    let dest = tmp.path().join("fetched");
    let said = fetch(&c, &kc, &dest);
    assert!(said.contains("new:"), "{said}");
    let runs: Vec<_> = std::fs::read_dir(dest.join("runs"))
        .expect("fetched runs")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run = &runs[0];
    let out = cnsreplay(&["analyze", "summary", "--json", s(run)]);
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
    let out = cnsreplay(&[
        "cleanup",
        "--run-id",
        &run_id,
        "--namespace",
        NS,
        "--kubeconfig",
        s(&kc),
    ]);
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

/// What `fetch` execs in its pod, by hand: `cnsreplay pack DIR | tar -x` gives DIR back.
#[test]
fn pack_writes_an_archive_that_tar_reads() {
    let d = tempfile::tempdir().expect("tempdir");
    let run = d.path().join("exp2-20261126T000000Z");
    std::fs::create_dir_all(run.join("histograms")).expect("mkdir");
    std::fs::write(run.join("summary.json"), "{}\n").expect("write");
    std::fs::write(run.join("histograms/attach.hlog"), vec![1u8; 70_000]).expect("write");
    let archive = d.path().join("run.tar");
    let status = Command::new(env!("CARGO_BIN_EXE_cnsreplay"))
        .args(["pack", s(&run)])
        .stdout(std::fs::File::create(&archive).expect("create"))
        .status()
        .expect("pack");
    assert!(status.success());
    let out = d.path().join("out");
    std::fs::create_dir(&out).expect("mkdir");
    let tar = Command::new("tar")
        .args(["-xf", s(&archive), "-C", s(&out)])
        .output()
        .expect("tar");
    assert!(tar.status.success(), "{tar:?}");
    let back = out.join("exp2-20261126T000000Z");
    assert_eq!(
        std::fs::read(back.join("histograms/attach.hlog")).expect("read"),
        vec![1u8; 70_000]
    );
    assert_eq!(
        std::fs::read_to_string(back.join("summary.json")).expect("read"),
        "{}\n"
    );
}
