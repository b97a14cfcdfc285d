//! Ownership: a pre-existing PVC is never touched; Ctrl-C of the real binary leaves nothing
//! of the run; `cnsreplay cleanup` after SIGKILL removes exactly the run's objects.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim};
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt};
use provider_kube::KubeConfig;

use crate::common::*;

async fn namespace_with_pvc(c: &Client, ns: &str, pvc: &str, class: &str) -> String {
    let n: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap();
    Api::<Namespace>::all(c.clone())
        .create(&PostParams::default(), &n)
        .await
        .unwrap();
    let p: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
        "metadata": {"name": pvc, "labels": {"app": "not-cnsreplay"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                 "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .unwrap();
    Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &p)
        .await
        .unwrap()
        .uid()
        .unwrap()
}

async fn pvc_uid(c: &Client, ns: &str, name: &str) -> Option<String> {
    Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns)
        .get_opt(name)
        .await
        .unwrap()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .and_then(|p| p.uid())
}

async fn drop_namespace(c: &Client, ns: &str) {
    let _ = Api::<Namespace>::all(c.clone())
        .delete(ns, &DeleteParams::default())
        .await;
}

#[test]
fn preexisting_pvc_of_the_same_name_is_never_touched() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    let class = uniq("own");
    rt.block_on(static_class(&c, &class, 4));
    let ns = class.clone();
    let keep_uid = rt.block_on(namespace_with_pvc(&c, &ns, "data-0", &class));
    let t = "format: cnsreplay-trace\nversion: 1\nevents:\n\
             - {at: 0s, create_volume: {volume: data-0}}\n\
             - {at: 0s, create_volume: {volume: data-1}}\n\
             - {at: 0s, attach: {workload: w1, volumes: [data-1]}}\n";
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.yaml");
    std::fs::write(&trace, t).unwrap();
    let run_dir = dir.path().join("run");
    let p = env.provider_for(
        KubeConfig {
            namespace: Some(ns.clone()),
            storage_class: Some(class.clone()),
            ..KubeConfig::default()
        },
        &trace,
    );
    let (out, _p) = replay_run(&trace, &run_dir, p);
    assert_eq!(out.summary.failed, 1);
    assert_eq!(
        out.summary.errors.get("already_exists"),
        Some(&1),
        "{:?}",
        out.summary.errors
    );
    // The run's own objects (data-1, w1) were removed by the end-of-run cleanup...
    assert_eq!(
        out.summary.cleaned_up, 2,
        "{:?}",
        out.summary.cleanup_failures
    );
    let left = rt.block_on(run_objects(&c, &out.manifest.run_id));
    assert!(left.is_empty(), "left behind: {left:?}");
    // ...and the pre-existing PVC is still the same object.
    assert_eq!(rt.block_on(pvc_uid(&c, &ns, "data-0")), Some(keep_uid));
    rt.block_on(drop_namespace(&c, &ns));
    rt.block_on(drop_static(&c, &class));
}

/// The `cnsreplay` binary: `CNSREPLAY_BIN`, or the one next to this test's target dir.
fn cnsreplay_bin() -> PathBuf {
    if let Ok(b) = std::env::var("CNSREPLAY_BIN") {
        return b.into();
    }
    let exe = std::env::current_exe().unwrap();
    let b = exe.parent().unwrap().parent().unwrap().join("cnsreplay");
    assert!(
        b.exists(),
        "{} missing: run `cargo build -p cnsreplay` first (or set CNSREPLAY_BIN)",
        b.display()
    );
    b
}

/// A trace that creates and attaches `n` volumes over 3 s and keeps them for a minute.
fn long_trace(dir: &Path, n: usize) -> PathBuf {
    let mut t = testkit::trace::yaml_header("defaults: {volume_size: 1Gi}\n");
    for i in 0..n {
        let at = i * 3000 / n;
        let _ = writeln!(t, "  - {{at: {at}ms, create_volume: {{volume: v{i}}}}}");
        let _ = writeln!(
            t,
            "  - {{at: {at}ms, attach: {{workload: w{i}, volumes: [v{i}]}}}}"
        );
    }
    for i in 0..n {
        let _ = writeln!(t, "  - {{at: 60s, detach: {{workload: w{i}}}}}");
    }
    let p = dir.join("long.yaml");
    std::fs::write(&p, t).unwrap();
    p
}

/// Starts the binary and waits until the ledger names at least `pods` pods with their UIDs.
fn start_run(
    env: &TestEnv,
    trace: &Path,
    run_dir: &Path,
    extra: &[&str],
    pods: usize,
) -> std::process::Child {
    // The account the trace needs, in the run's --namespace when `extra` names one.
    let namespace = extra
        .iter()
        .position(|a| *a == "--namespace")
        .map(|i| extra[i + 1].to_owned());
    let cfg = KubeConfig {
        namespace,
        ..KubeConfig::default()
    };
    let mut cmd = Command::new(cnsreplay_bin());
    cmd.args(["run", "--provider", "kube", "--grace", "1s", "-q"])
        .arg("--kubeconfig")
        .arg(env.runner_kubeconfig_for(&cfg, trace))
        .arg("-o")
        .arg(run_dir)
        .args(extra)
        .arg(trace)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    #[allow(clippy::zombie_processes)] // the caller waits for it
    let child = cmd.spawn().unwrap();
    let t0 = Instant::now();
    loop {
        let ledger = std::fs::read_to_string(run_dir.join("ledger.jsonl")).unwrap_or_default();
        let n = ledger
            .lines()
            .filter(|l| l.contains("\"kind\":\"pod\"") && l.contains("\"uid\""))
            .count();
        if n >= pods {
            return child;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the run did not create {pods} pods in 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(child: &std::process::Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

fn run_id(run_dir: &Path) -> String {
    replay::RunDir::open(run_dir).manifest().unwrap().run_id
}

#[test]
fn sigint_mid_run_leaves_nothing_of_the_run_and_keeps_a_preexisting_pvc() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    let class = uniq("sigint");
    rt.block_on(static_class(&c, &class, 30));
    let ns = class.clone();
    let keep_uid = rt.block_on(namespace_with_pvc(&c, &ns, "v0-keep", &class));
    let dir = tempfile::tempdir().unwrap();
    let trace = long_trace(dir.path(), 25);
    let run_dir = dir.path().join("run");
    let mut child = start_run(
        &env,
        &trace,
        &run_dir,
        &["--namespace", &ns, "--storage-class", &class],
        5,
    );
    signal(&child, "-INT");
    let status = wait_child(&mut child, "the interrupted run");
    assert_eq!(status.code(), Some(1), "an interrupted run exits 1");
    let m = replay::RunDir::open(&run_dir).manifest().unwrap();
    assert_eq!(m.state, replay::CompletionState::Interrupted);
    let left = rt.block_on(run_objects(&c, &m.run_id));
    assert!(left.is_empty(), "left behind after Ctrl-C: {left:?}");
    assert_eq!(rt.block_on(pvc_uid(&c, &ns, "v0-keep")), Some(keep_uid));
    assert!(
        replay::ledger::read_live(&replay::Ledger::path_in(&run_dir))
            .unwrap()
            .is_empty()
    );
    rt.block_on(drop_namespace(&c, &ns));
    rt.block_on(drop_static(&c, &class));
}

#[test]
fn cleanup_after_sigkill_removes_the_run_namespace_and_objects() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    let class = uniq("sigkill");
    rt.block_on(static_class(&c, &class, 20));
    let dir = tempfile::tempdir().unwrap();
    let trace = long_trace(dir.path(), 15);
    let run_dir = dir.path().join("run");
    let mut child = start_run(&env, &trace, &run_dir, &["--storage-class", &class], 3);
    signal(&child, "-KILL");
    let _ = wait_child(&mut child, "the killed run");
    let id = run_id(&run_dir);
    assert!(
        !rt.block_on(run_objects(&c, &id)).is_empty(),
        "SIGKILL left the run's objects"
    );
    let (status, stdout) = output_within(
        Command::new(cnsreplay_bin()).arg("cleanup").arg(&run_dir),
        "cleanup",
    );
    assert!(status.success(), "cleanup: {stdout}");
    let left = rt.block_on(run_objects(&c, &id));
    assert!(left.is_empty(), "left behind after cleanup: {left:?}");
    // Run again: nothing left to do.
    let (_, again) = output_within(
        Command::new(cnsreplay_bin()).arg("cleanup").arg(&run_dir),
        "the second cleanup",
    );
    assert!(again.contains("removed 0"), "{again}");
    rt.block_on(drop_static(&c, &class));
}
