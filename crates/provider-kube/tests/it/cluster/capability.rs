//! Pre-flight learns what a StorageClass can do: on a class whose provisioner is not a CSI
//! driver (no CSIDriver object) and that does not allow expansion — as `local-path` or any
//! hostPath provisioner — a snapshot, a clone, a resize, a modify_volume and a group snapshot
//! are each refused before anything is created, naming the event and the reason; the same
//! trace on testenv's CSI class passes.

use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams};
use provider_kube::KubeConfig;

use crate::common::*;

fn trace(group: bool) -> String {
    let mut t = String::from(
        "format: cnsreplay-trace\nversion: 2\ndefaults: {volume_size: 64Mi}\n\
         attributes_classes:\n  gold: {read_iops: 1000}\nevents:\n  \
         - {at: 0s, id: 1, create_volume: {volume: v}}\n  \
         - {at: 1s, id: 2, snapshot: {volume: v, snapshot: s}}\n  \
         - {at: 2s, id: 3, create_volume: {volume: c, source: {volume: v}}}\n  \
         - {at: 3s, id: 4, resize: {volume: v, size: 128Mi}}\n  \
         - {at: 4s, id: 5, resize: {volume: v, size: 256Mi}}\n  \
         - {at: 5s, id: 6, modify_volume: {volume: v, class: gold}}\n",
    );
    if group {
        t.push_str("  - {at: 6s, id: 7, group_snapshot: {group: g, volumes: [v, c]}}\n");
    }
    t
}

#[test]
fn preflight_refuses_what_a_non_csi_class_cannot_do_and_names_why() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    let class = uniq("nocsi");
    let provisioner = format!("example.com/{class}");
    let sc: StorageClass = serde_json::from_value(serde_json::json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": class},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete",
    }))
    .unwrap();
    let classes = Api::<StorageClass>::all(c.clone());
    rt.block_on(classes.create(&PostParams::default(), &sc))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.yaml");
    std::fs::write(&path, trace(true)).unwrap();
    let cfg = KubeConfig {
        storage_class: Some(class.clone()),
        ..KubeConfig::default()
    };
    let e = env
        .provider_for(cfg.clone(), &path)
        .preflight(&path)
        .unwrap_err()
        .to_string();
    let _ = rt.block_on(classes.delete(&class, &DeleteParams::default()));
    let t = path.display();
    let not_csi = format!(
        "its provisioner {provisioner} is not a CSI driver (there is no CSIDriver {provisioner})"
    );
    for needle in [
        "nothing was created".to_owned(),
        // The snapshot: no class for the provisioner, and why.
        format!("snapshot ({t}: event 2 (at 1.000s)) is not supported by StorageClass {class}"),
        format!("no VolumeSnapshotClass has driver {provisioner}"),
        not_csi.clone(),
        // The clone, the resizes (counted), the modify, the group snapshot.
        format!(
            "create_volume from a volume (clone) ({t}: event 3 (at 2.000s)) is not \
             supported by StorageClass {class}: {not_csi}; Kubernetes clones only CSI volumes"
        ),
        format!(
            "resize ({t}: event 4 (at 3.000s), and 1 more event(s)) is not supported by \
             StorageClass {class}: it does not allow volume expansion (allowVolumeExpansion: \
             unset)"
        ),
        format!(
            "modify_volume ({t}: event 6 (at 5.000s)) is not supported by StorageClass {class}"
        ),
        format!(
            "group_snapshot ({t}: event 7 (at 6.000s)) is not supported by StorageClass {class}"
        ),
    ] {
        assert!(e.contains(&needle), "{needle:?} not in: {e}");
    }
    // A group of two volumes of the class is one event.
    assert!(!e.contains("event 7 (at 6.000s), and"), "{e}");
    // Each problem once: the two resizes are one line.
    assert_eq!(e.matches("resize (").count(), 1, "{e}");

    // The same operations on testenv's CSI class (a CSIDriver, allowVolumeExpansion, a
    // VolumeSnapshotClass for its driver) pass pre-flight. Without the group snapshot: another
    // test of this binary removes its CRDs for a while.
    let Some(_) = csi_driver(&env, &rt, &c, false) else {
        return;
    };
    std::fs::write(&path, trace(false)).unwrap();
    let uses = env
        .provider_for(
            KubeConfig {
                storage_class: Some("cnsreplay-csi".into()),
                snapshot_class: Some("cnsreplay-csi".into()),
                ..cfg
            },
            &path,
        )
        .preflight(&path)
        .unwrap_or_else(|e| panic!("the CSI class can do all of it: {e}"));
    assert_eq!(uses.needs.len(), 4, "{:?}", uses.needs);
}

/// A WaitForFirstConsumer claim is provisioned inside its first attach, and the attach says
/// when: `node-selected` (the scheduler chose the pod's node: provisioning starts), `bound`,
/// then `scheduled` (the scheduler binds the pod only after its claims), in time order; the
/// `create_volume` measures the claim's creation only.
#[test]
fn a_wait_for_first_consumer_attach_reports_provisioning_as_its_own_phases() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    if csi_driver(&env, &rt, &c, false).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.yaml");
    std::fs::write(
        &trace,
        "format: cnsreplay-trace\nversion: 1\ndefaults: {volume_size: 64Mi}\nevents:\n  \
         - {at: 0s, create_volume: {volume: v}}\n  \
         - {at: 0s, attach: {workload: w, volumes: [v]}}\n  \
         - {at: 1s, detach: {workload: w}}\n  \
         - {at: 1s, delete_volume: {volume: v}}\n",
    )
    .unwrap();
    let p = env.provider_for(
        KubeConfig {
            storage_class: Some("cnsreplay-csi-wffc".into()),
            ..KubeConfig::default()
        },
        &trace,
    );
    let run_dir = dir.path().join("run");
    let (out, _p) = replay_run(&trace, &run_dir, p);
    assert_eq!(out.summary.failed, 0, "{:?}", out.summary.errors);
    let recs = events(&run_dir);
    let record = |op| recs.iter().find(|r| r.op == op).unwrap();
    let create = record(trace_format::OpType::CreateVolume);
    assert_eq!(
        ordered_phases(create),
        ["created", "wait-for-first-consumer"]
    );
    let attach = record(trace_format::OpType::Attach);
    // ordered_phases also checks that their instants never go backwards.
    let p = ordered_phases(attach);
    assert_eq!(
        p[..4],
        ["created", "node-selected", "bound", "scheduled"],
        "{p:?}"
    );
    assert!(p.contains(&"running"), "{p:?}");
    // Provisioning took time of its own: the claim bound after the node was chosen.
    let at = |n: &str| attach.phases.iter().find(|x| x.name == n).unwrap().at;
    assert!(at("bound") > at("node-selected"), "{:?}", attach.phases);
}
