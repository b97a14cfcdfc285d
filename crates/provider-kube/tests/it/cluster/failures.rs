//! Nothing hangs: an operation that cannot complete ends, in seconds, with a stable class and
//! the cluster's reason, and a delete waits for the earlier users of its volume.

use std::time::Duration;

use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams};
use provider_kube::{KubeConfig, KubeProvider, Piece};
use replay::Outcome;
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

/// A run whose attach can never schedule: a static class of `tag` and a node selector no node
/// matches. Returns the client, the class (drop it with `drop_static`) and the config.
fn unschedulable_setup(
    env: &TestEnv,
    rt: &tokio::runtime::Runtime,
    tag: &str,
) -> (kube::Client, String, KubeConfig) {
    let c = rt.block_on(client(env));
    let class = uniq(tag);
    rt.block_on(static_class(&c, &class, 1));
    let mut cfg = KubeConfig {
        storage_class: Some(class.clone()),
        ..KubeConfig::default()
    };
    cfg.pod
        .node_selector
        .insert("cnsreplay.io/no-such-label".into(), "x".into());
    (c, class, cfg)
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
    let (c, class, cfg) = unschedulable_setup(&env, &rt, "unsched");
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(
        dir.path(),
        "  - {at: 0s, create_volume: {volume: v}}\n  \
         - {at: 100ms, attach: {workload: w, volumes: [v]}}\n  \
         - {at: 300ms, detach: {workload: w}}\n  \
         - {at: 400ms, delete_volume: {volume: v}}\n",
    );
    let run_dir = dir.path().join("run");
    let (out, _p) = replay_run(&trace, &run_dir, env.provider_for(cfg, &trace));
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

/// An attach that times out (its pod still unscheduled when `--timeout attach` runs out,
/// the scheduler's grace longer) deletes its pod at once: the run's cleanup finds only its
/// namespace to remove, the trace's later delete of the volume succeeds in seconds, and the
/// run leaves nothing.
#[test]
fn a_timed_out_attach_deletes_its_pod() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let (c, class, mut cfg) = unschedulable_setup(&env, &rt, "attach-timeout");
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(
        dir.path(),
        "  - {at: 0s, create_volume: {volume: v}}\n  \
         - {at: 100ms, attach: {workload: w, volumes: [v]}}\n  \
         - {at: 5s, delete_volume: {volume: v}}\n",
    );
    cfg.failure_grace_ns = 600_000_000_000;
    cfg.timeouts.insert(OpType::Attach, 2_000_000_000);
    cfg.timeouts.insert(OpType::DeleteVolume, 30_000_000_000);
    let run_dir = dir.path().join("run");
    let (out, _p) = replay_run(&trace, &run_dir, env.provider_for(cfg, &trace));
    let recs = events(&run_dir);
    failed_within(record(&recs, OpType::Attach), "timeout", 10);
    let delete = record(&recs, OpType::DeleteVolume);
    assert_eq!(delete.outcome, Outcome::Ok, "{:?}", delete.error);
    let took = Duration::from_nanos(delete.completed - delete.started);
    assert!(
        took < Duration::from_secs(20),
        "the delete waited {took:?} for the PVC: the timed-out attach's pod was left"
    );
    // The pod was gone before the run's cleanup came to it (which would count it removed):
    // the cleanup removed only the run's own namespace.
    assert_eq!(
        out.summary.cleaned_up, 1,
        "the run's cleanup had to remove what the timed-out attach left: {:?}",
        out.summary.cleanup_failures
    );
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
         - {at: 0s, io_phase: {workload: w, volume: v, pattern: random, read_pct: 50, block_size: 4Ki, load: {depth: 1}, duration: 1s}}\n  \
         - {at: 2s, detach: {workload: w}}\n  \
         - {at: 2s, delete_volume: {volume: v}}\n",
    );
    let p = env.provider_for(
        KubeConfig {
            storage_class: Some(class.clone()),
            io_exec: provider_kube::IoExec::Local,
            ..KubeConfig::default()
        },
        &trace,
    );
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

/// A StorageClass of the project's CSI driver whose parameters inject `failRate.<Op>: 1`
/// with a final gRPC code (a retriable one is the cluster retrying, not a failure).
async fn faulty_class(c: &kube::Client, name: &str, op: &str) {
    let sc: StorageClass = serde_json::from_value(serde_json::json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "csi.cnsreplay.dev",
        "volumeBindingMode": "Immediate",
        "reclaimPolicy": "Delete",
        "parameters": {
            "nodeExpansion": "false",
            format!("failRate.{op}"): "1",
            format!("failCode.{op}"): "INVALID_ARGUMENT",
        },
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
    let snapclass = uniq("failsnap");
    let sc_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        sc_file.path(),
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
            "metadata": {"name": snapclass},
            "driver": "csi.cnsreplay.dev", "deletionPolicy": "Delete",
            // A final error: the snapshotter gives up, so the failed snapshot can be deleted.
            "parameters": {"failRate.CreateSnapshot": "1", "failCode.CreateSnapshot": "INTERNAL"},
        }))
        .unwrap(),
    )
    .unwrap();
    env.kubectl()
        .ok(&["apply", "-f", &sc_file.path().to_string_lossy()]);
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(
        dir.path(),
        &format!(
            "  - {{at: 0s, create_volume: {{volume: bad, storage_class: {prov}}}}}\n  \
             - {{at: 0s, create_volume: {{volume: v, storage_class: {publ}}}}}\n  \
             - {{at: 0s, attach: {{workload: w, volumes: [v]}}}}\n  \
             - {{at: 1s, detach: {{workload: w}}}}\n  \
             - {{at: 1s, delete_volume: {{volume: v}}}}\n  \
             - {{at: 0s, create_volume: {{volume: s, storage_class: cnsreplay-csi}}}}\n  \
             - {{at: 0s, snapshot: {{volume: s, snapshot: snap, class: {snapclass}}}}}\n  \
             - {{at: 1s, delete_volume: {{volume: s}}}}\n"
        ),
    );
    let run_dir = dir.path().join("run");
    // No --storage-class: it would replace the classes the events name.
    let p = env.provider_for(
        KubeConfig {
            ..KubeConfig::default()
        },
        &trace,
    );
    let (_out, _p) = replay_run(&trace, &run_dir, p);
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
    let msg = failed_within(record(&recs, OpType::Snapshot), "snapshot_failed", 10);
    assert!(msg.contains("status.error"), "{msg}");
    for r in recs.iter().filter(|r| r.op == OpType::DeleteVolume) {
        assert_eq!(r.outcome, Outcome::Ok, "{:?}", r.error);
    }
    env.kubectl()
        .ok(&["delete", "volumesnapshotclass", &snapclass]);
    for n in [&prov, &publ] {
        let _ =
            rt.block_on(Api::<StorageClass>::all(c.clone()).delete(n, &DeleteParams::default()));
    }
}

/// Before the clock starts: a class or node the cluster lacks is named with where the trace
/// uses it and what the cluster has; `--storage-class` and `--map-storage-class` override the
/// trace's class.
#[test]
fn preflight_names_what_is_missing() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    let class = uniq("pre");
    rt.block_on(static_class(&c, &class, 0));
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.yaml");
    std::fs::write(
        &trace,
        "format: cnsreplay-trace\nversion: 1\ndefaults: {storage_class: standard-missing}\n\
         events:\n  - {at: 0s, create_volume: {volume: v}}\n  \
         - {at: 1s, attach: {workload: w, volumes: [v], node: no-such-node}}\n",
    )
    .unwrap();
    let cfg = KubeConfig::default();
    let e = env
        .provider_for(cfg.clone(), &trace)
        .preflight(&trace)
        .unwrap_err()
        .to_string();
    for needle in [
        "StorageClass standard-missing",
        "event 0 (at 0.000s), from the trace header's defaults",
        "the cluster has:",
        &class,
        "--map-storage-class standard-missing=CLASS",
        "node no-such-node",
        "event 1 (at 1.000s)",
    ] {
        assert!(e.contains(needle), "{needle:?} not in: {e}");
    }
    // The flags override the trace's class; only the node is left.
    for cfg in [
        KubeConfig {
            storage_class: Some(class.clone()),
            ..cfg.clone()
        },
        KubeConfig {
            storage_class_map: [("standard-missing".to_owned(), class.clone())].into(),
            ..cfg.clone()
        },
    ] {
        let e = env
            .provider_for(cfg, &trace)
            .preflight(&trace)
            .unwrap_err()
            .to_string();
        assert!(!e.contains("StorageClass"), "{e}");
        assert!(e.contains("node no-such-node"), "{e}");
    }
    // A missing --namespace is named too. Deliberately as an account that may read
    // namespaces (the run-namespaces piece): the trace's own pieces (the Role bound in that
    // namespace, which cannot be, and the reads) do not grant it, and pre-flight then cannot
    // tell a missing namespace from an unreadable one.
    let pieces = [Piece::Read, Piece::RunNamespaces].into();
    let e = KubeProvider::new(KubeConfig {
        kubeconfig: Some(env.pieces_kubeconfig(&pieces)),
        namespace: Some("cnsreplay-no-such-ns".into()),
        storage_class: Some(class.clone()),
        ..cfg
    })
    .unwrap()
    .preflight(&trace)
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("namespace cnsreplay-no-such-ns (--namespace) does not exist"),
        "{e}"
    );
    rt.block_on(drop_static(&c, &class));
}

/// The provider's pods pass the `restricted` Pod Security level: in a namespace that
/// enforces it (admission runs in the API server, so kwok nodes suffice) a run creates its
/// pods, while a pod without the security context is refused there.
#[test]
fn pods_are_admitted_in_a_restricted_namespace() {
    use k8s_openapi::api::core::v1::{Namespace, Pod};
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    let class = uniq("psa");
    rt.block_on(static_class(&c, &class, 1));
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": class, "labels": {
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/enforce-version": "latest"}},
    }))
    .unwrap();
    rt.block_on(Api::<Namespace>::all(c.clone()).create(&PostParams::default(), &ns))
        .unwrap();
    let plain: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }))
    .unwrap();
    let refused = rt
        .block_on(Api::<Pod>::namespaced(c.clone(), &class).create(&PostParams::default(), &plain))
        .expect_err("the namespace enforces the restricted level");
    assert!(refused.to_string().contains("restricted"), "{refused}");
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(
        dir.path(),
        "  - {at: 0s, create_volume: {volume: v}}\n  \
         - {at: 0s, attach: {workload: w, volumes: [v]}}\n  \
         - {at: 1s, detach: {workload: w}}\n  \
         - {at: 1s, delete_volume: {volume: v}}\n",
    );
    let p = env.provider_for(
        KubeConfig {
            namespace: Some(class.clone()),
            storage_class: Some(class.clone()),
            ..KubeConfig::default()
        },
        &trace,
    );
    let run_dir = dir.path().join("run");
    let (out, _p) = replay_run(&trace, &run_dir, p);
    let recs = events(&run_dir);
    let attach = record(&recs, OpType::Attach);
    assert_eq!(attach.outcome, Outcome::Ok, "{:?}", attach.error);
    assert_eq!(out.summary.failed, 0, "{:?}", out.summary.errors);
    let _ = rt.block_on(Api::<Namespace>::all(c.clone()).delete(&class, &DeleteParams::default()));
    rt.block_on(drop_static(&c, &class));
}
