//! `cnsreplay cleanup --run-id`: a kube run killed (SIGKILL) with its run directory then
//! deleted — the client machine lost — leaves its namespace, PVC, pod and a cordoned node;
//! the command finds them by the run label and the cordon annotation and removes them, and
//! touches nothing else (an object labelled for another run, a node cordoned by someone
//! else). Needs testenv (`CNSREPLAY_TESTENV`); skipped (one line) without it unless
//! `CNSREPLAY_REQUIRE_TESTENV=1`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{cnsreplay_within, s, stdout};

/// The cluster with a shared turn on its real node (pods may land there), or None after the
/// skip line.
fn cluster() -> Option<crate::Cluster> {
    testkit::testenv().map(crate::shared_cluster)
}

fn until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn cleanup_by_run_id_removes_a_lost_runs_objects_and_only_those() {
    let Some(c) = cluster() else { return };
    let node = "testenv-node-3";
    let other_node = "testenv-node-2";
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let trace = d.join("t.yaml");
    std::fs::write(
        &trace,
        format!(
            "format: cnsreplay-trace\nversion: 1\ndefaults: {{volume_size: 1Gi}}\nevents:\n\
             - {{at: 0s, create_volume: {{volume: v}}}}\n\
             - {{at: 0s, attach: {{workload: w, volumes: [v], node: {node}}}}}\n\
             - {{at: 1s, cordon_node: {{node: {node}}}}}\n\
             - {{at: 600s, marker: {{name: end}}}}\n"
        ),
    )
    .expect("trace");
    // Someone else's: a PVC labelled for another run, a node cordoned by hand.
    let foreign_ns = format!("foreign-{}", std::process::id());
    c.kubectl(&["create", "namespace", &foreign_ns]);
    let pvc = format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"PersistentVolumeClaim\",\"metadata\":{{\"name\":\"keep\",\
         \"namespace\":\"{foreign_ns}\",\"labels\":{{\"cnsreplay.io/run\":\"another-run\"}}}},\
         \"spec\":{{\"accessModes\":[\"ReadWriteOnce\"],\"resources\":{{\"requests\":{{\"storage\":\"1Gi\"}}}}}}}}"
    );
    let pvc_file = d.join("pvc.json");
    std::fs::write(&pvc_file, pvc).expect("pvc");
    c.kubectl(&["create", "-f", s(&pvc_file)]);
    c.kubectl(&["cordon", other_node]);

    // The run and the cleanups run as the account the trace needs: the cordon's node patch
    // and the run-owned namespace's rules in every namespace (which `cleanup --run-id`
    // without --namespace searches).
    let kc = c.runner_kubeconfig_for(d, &trace);
    let run = d.join("run");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cnsreplay"))
        .args(["run", s(&trace), "--provider", "kube", "--kubeconfig"])
        .arg(&kc)
        .args([
            "--storage-class",
            c.get("TESTENV_STORAGE_CLASS"),
            "-o",
            s(&run),
        ])
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the run");
    let manifest = run.join("manifest.json");
    until("the run's manifest", || manifest.is_file());
    let run_id = serde_json::from_str::<serde_json::Value>(
        &std::fs::read_to_string(&manifest).expect("manifest"),
    )
    .expect("manifest JSON")["run_id"]
        .as_str()
        .expect("run_id")
        .to_owned();
    let label = format!("cnsreplay.io/run={run_id}");
    until("the run's pod and the cordon", || {
        let pods = c.kubectl(&["get", "pods", "-A", "-l", &label, "-o", "name"]);
        let cordoned = c.kubectl(&["get", "node", node, "-o", "jsonpath={.spec.unschedulable}"]);
        !pods.trim().is_empty() && cordoned == "true"
    });
    // The client machine is lost: the process killed, its run directory and ledger gone.
    child.kill().expect("kill");
    child.wait().expect("wait");
    std::fs::remove_dir_all(&run).expect("remove the run directory");

    let o = cnsreplay_within(
        &["cleanup", "--run-id", &run_id, "--kubeconfig", s(&kc)],
        600,
    );
    let out = stdout(&o);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for kind in ["pod", "pvc", "namespace", "cordon"] {
        assert!(out.contains(&format!("found {kind} ")), "{kind}: {out}");
    }
    for kind in ["pods", "pvc", "namespaces", "volumesnapshots"] {
        let left = c.kubectl(&["get", kind, "-A", "-l", &label, "-o", "name"]);
        assert!(left.trim().is_empty(), "{kind} left: {left}");
    }
    let n = c.kubectl(&[
        "get",
        "node",
        node,
        "-o",
        "jsonpath={.spec.unschedulable}/{.metadata.annotations}",
    ]);
    assert!(!n.starts_with("true") && !n.contains("cordoned-by"), "{n}");
    // Nothing else was touched.
    c.kubectl(&["get", "pvc", "keep", "-n", &foreign_ns]);
    let other = c.kubectl(&[
        "get",
        "node",
        other_node,
        "-o",
        "jsonpath={.spec.unschedulable}",
    ]);
    assert_eq!(other, "true");
    // A second cleanup finds nothing and succeeds.
    let again = cnsreplay_within(
        &["cleanup", "--run-id", &run_id, "--kubeconfig", s(&kc)],
        600,
    );
    assert!(again.status.success());
    assert!(
        stdout(&again).contains("found 0 object(s)"),
        "{}",
        stdout(&again)
    );
    c.kubectl(&["uncordon", other_node]);
    c.kubectl(&["delete", "namespace", &foreign_ns, "--wait=false"]);
}
