//! Nothing hangs: an operation that cannot complete ends, in seconds, with a stable class and
//! the cluster's reason, and a delete waits for the earlier users of its volume.

use std::time::Duration;

use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams};
use provider_kube::{KubeConfig, KubeProvider};
use replay::{EventRecord, Outcome};
use trace_format::OpType;

use crate::common::*;

fn write_trace(dir: &std::path::Path, body: &str) -> std::path::PathBuf {
    let t = format!(
        "format: cnsreplay-trace\nversion: 1\ndefaults: {{volume_size: 64Mi}}\nevents:\n{body}"
    );
    let p = dir.join("trace.yaml");
    std::fs::write(&p, t).unwrap();
    p
}

fn record(recs: &[EventRecord], op: OpType) -> &EventRecord {
    recs.iter()
        .find(|r| r.op == op)
        .unwrap_or_else(|| panic!("no {op} record"))
}

fn failed_within<'a>(r: &'a EventRecord, class: &str, secs: u64) -> &'a str {
    assert_eq!(r.outcome, Outcome::Error, "{} {}", r.id, r.op);
    assert_eq!(
        r.error_class.as_deref(),
        Some(class),
        "event {} ({}): {:?}",
        r.id,
        r.op,
        r.error
    );
    let took = Duration::from_nanos(r.completed - r.started);
    assert!(
        took < Duration::from_secs(secs),
        "event {} ({}) failed after {took:?}: {:?}",
        r.id,
        r.op,
        r.error
    );
    r.error.as_deref().unwrap_or_default()
}

/// The cold-CI hang, made deterministic: the attach's pod can never be scheduled (a node
/// selector no node matches) and the trace deletes its volume right after. The attach fails
/// with class `unschedulable` quoting the scheduler within seconds, its detach fails as a
/// dependency, the delete waits for both (recorded as its dependency wait) and then succeeds:
/// the run ends and leaves nothing.
#[test]
fn delete_after_an_unschedulable_attach_ends_with_the_schedulers_reason() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    let class = uniq("unsched");
    rt.block_on(static_class(&c, &class, 1));
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(
        dir.path(),
        "  - {at: 0s, create_volume: {volume: v}}\n  \
         - {at: 100ms, attach: {workload: w, volumes: [v]}}\n  \
         - {at: 300ms, detach: {workload: w}}\n  \
         - {at: 400ms, delete_volume: {volume: v}}\n",
    );
    let mut cfg = KubeConfig {
        kubeconfig: Some(env.kubeconfig()),
        storage_class: Some(class.clone()),
        ..KubeConfig::default()
    };
    cfg.pod
        .node_selector
        .insert("cnsreplay.io/no-such-label".into(), "x".into());
    let run_dir = dir.path().join("run");
    let (out, _p) = replay_run(&trace, &run_dir, KubeProvider::new(cfg).unwrap());
    let recs = events(&run_dir);
    let msg = failed_within(record(&recs, OpType::Attach), "unschedulable", 10);
    assert!(
        msg.contains("Unschedulable") && msg.contains("node"),
        "the scheduler's message is quoted: {msg}"
    );
    let detach = record(&recs, OpType::Detach);
    assert_eq!(detach.error_class.as_deref(), Some("dependency_failed"));
    let delete = record(&recs, OpType::DeleteVolume);
    assert_eq!(delete.outcome, Outcome::Ok, "{:?}", delete.error);
    let attach = record(&recs, OpType::Attach);
    assert!(
        delete.started >= attach.completed,
        "the delete started before the attach using its volume ended"
    );
    assert!(delete.dep_wait > 0, "the wait is recorded");
    assert_eq!(out.summary.errors.get("unschedulable"), Some(&1));
    let left = rt.block_on(run_objects(&c, &out.manifest.run_id));
    assert!(left.is_empty(), "left behind: {left:?}");
    rt.block_on(drop_static(&c, &class));
}

/// `--kube-io-exec local` writes to a device on this machine: refused for any volume that is
/// not of the project's test driver.
#[test]
fn io_exec_local_is_refused_for_other_drivers() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    let class = uniq("iolocal");
    rt.block_on(static_class(&c, &class, 1));
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(
        dir.path(),
        "  - {at: 0s, create_volume: {volume: v}}\n  \
         - {at: 0s, attach: {workload: w, volumes: [v]}}\n  \
         - {at: 0s, io_phase: {workload: w, volume: v, pattern: random, read_pct: 50, block_size: 4Ki, duration: 1s}}\n  \
         - {at: 2s, detach: {workload: w}}\n  \
         - {at: 2s, delete_volume: {volume: v}}\n",
    );
    let p = KubeProvider::new(KubeConfig {
        kubeconfig: Some(env.kubeconfig()),
        storage_class: Some(class.clone()),
        io_exec: provider_kube::IoExec::Local,
        ..KubeConfig::default()
    })
    .unwrap();
    let run_dir = dir.path().join("run");
    let (out, _p) = replay_run(&trace, &run_dir, p);
    let recs = events(&run_dir);
    let msg = failed_within(record(&recs, OpType::IoPhase), "unsupported", 10);
    assert!(
        msg.contains("csi.cnsreplay.dev") && msg.contains("--kube-io-exec pod"),
        "{msg}"
    );
    assert_eq!(out.summary.failed, 1, "{:?}", out.summary.errors);
    rt.block_on(drop_static(&c, &class));
}

/// A StorageClass of the project's CSI driver whose parameters inject `failRate.<Op>: 1`.
async fn faulty_class(c: &kube::Client, name: &str, op: &str) {
    let sc: StorageClass = serde_json::from_value(serde_json::json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "csi.cnsreplay.dev",
        "volumeBindingMode": "Immediate",
        "reclaimPolicy": "Delete",
        "parameters": {"nodeExpansion": "false", format!("failRate.{op}"): "1"},
    }))
    .unwrap();
    Api::<StorageClass>::all(c.clone())
        .create(&PostParams::default(), &sc)
        .await
        .unwrap();
}

/// Faults injected through the CSI driver end their operation within 10 s with the
/// Kubernetes reason: CreateVolume → `ProvisioningFailed` (class `provisioning_failed`),
/// ControllerPublishVolume → the VolumeAttachment's attachError (class `attach_failed`).
#[test]
fn csi_faults_fail_provisioning_and_attach_with_the_reason() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    if csi_driver(&env, &rt, &c, false).is_none() {
        return;
    }
    let prov = uniq("failprov");
    let publ = uniq("failpub");
    rt.block_on(faulty_class(&c, &prov, "CreateVolume"));
    rt.block_on(faulty_class(&c, &publ, "ControllerPublishVolume"));
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(
        dir.path(),
        &format!(
            "  - {{at: 0s, create_volume: {{volume: bad, storage_class: {prov}}}}}\n  \
             - {{at: 0s, create_volume: {{volume: v, storage_class: {publ}}}}}\n  \
             - {{at: 0s, attach: {{workload: w, volumes: [v]}}}}\n  \
             - {{at: 1s, detach: {{workload: w}}}}\n  \
             - {{at: 1s, delete_volume: {{volume: v}}}}\n"
        ),
    );
    let run_dir = dir.path().join("run");
    let (_out, _p) = replay_run(&trace, &run_dir, provider(&env, "cnsreplay-csi"));
    let recs = events(&run_dir);
    let create_bad = recs
        .iter()
        .find(|r| r.op == OpType::CreateVolume && r.error.is_some())
        .expect("the faulty create failed");
    let msg = failed_within(create_bad, "provisioning_failed", 10);
    assert!(msg.contains("ProvisioningFailed"), "{msg}");
    let msg = failed_within(record(&recs, OpType::Attach), "attach_failed", 10);
    assert!(
        msg.contains("attachError") || msg.contains("FailedAttachVolume"),
        "{msg}"
    );
    let delete = record(&recs, OpType::DeleteVolume);
    assert_eq!(delete.outcome, Outcome::Ok, "{:?}", delete.error);
    for n in [&prov, &publ] {
        let _ =
            rt.block_on(Api::<StorageClass>::all(c.clone()).delete(n, &DeleteParams::default()));
    }
}
