//! Snapshot, restore, clone, resize and dynamic provisioning through the project's CSI driver:
//! these run when the cluster has the `cnsreplay-csi` StorageClass (testenv/up.sh creates it
//! once the driver is built) and otherwise print a skip notice (a failure when
//! `CNSREPLAY_REQUIRE_CSI=1`).

use provider_kube::KubeConfig;
use trace_format::OpType;

use crate::common::*;

#[test]
fn snapshot_restore_clone_resize_with_the_csi_driver() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    if csi_driver(&env, &rt, &c, false).is_none() {
        return;
    }
    let t = "format: cnsreplay-trace\nversion: 1\n\
             defaults: {storage_class: cnsreplay-csi, snapshot_class: cnsreplay-csi, volume_size: 1Gi}\n\
             events:\n\
             - {at: 0s, create_volume: {volume: a}}\n\
             - {at: 0s, attach: {workload: w, volumes: [a]}}\n\
             - {at: 1s, snapshot: {volume: a, snapshot: s}}\n\
             - {at: 2s, create_volume: {volume: b, source: {snapshot: s}}}\n\
             - {at: 2s, create_volume: {volume: c, source: {volume: a}}}\n\
             - {at: 3s, resize: {volume: a, size: 2Gi}}\n\
             - {at: 4s, detach: {workload: w}}\n\
             - {at: 5s, delete_snapshot: {snapshot: s}}\n\
             - {at: 5s, delete_volume: {volume: b}}\n\
             - {at: 5s, delete_volume: {volume: c}}\n\
             - {at: 6s, delete_volume: {volume: a}}\n";
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("csi.yaml");
    std::fs::write(&trace, t).unwrap();
    let run_dir = dir.path().join("run");
    // The cluster's timing plane: the sidecars' and the API server's metrics.
    let csi_metrics: Vec<String> = env
        .vars()
        .get("TESTENV_CSI_METRICS")
        .map(|v| v.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    assert_eq!(csi_metrics.len(), 4, "testenv.env: TESTENV_CSI_METRICS");
    let p = env.provider_for(
        KubeConfig {
            storage_class: Some("cnsreplay-csi".into()),
            qps: 200.0,
            burst: 400,
            csi_metrics,
            apiserver_metrics: true,
            ..KubeConfig::default()
        },
        &trace,
    );
    let (out, _p) = replay_run(&trace, &run_dir, p);
    let recs = events(&run_dir);
    for r in &recs {
        let names = ordered_phases(r);
        match r.op {
            OpType::Snapshot => assert_eq!(names, ["created", "ready"]),
            // The resizer's step shows when the claim's status said so before it finished.
            OpType::Resize => assert!(
                names == ["patched", "resized"]
                    || names == ["patched", "controller-resize", "resized"],
                "{names:?}"
            ),
            OpType::DeleteSnapshot => assert_eq!(names, ["deleted"]),
            OpType::CreateVolume => assert_eq!(names, ["created", "bound"]),
            // The class deletes its PVs: deletion waits for the PV too.
            OpType::DeleteVolume => assert_eq!(names, ["deleted", "pvc-gone", "pv-gone"]),
            OpType::Attach => assert!(
                names.contains(&"scheduled") && names.contains(&"ready"),
                "{names:?}"
            ),
            _ => {}
        }
    }
    assert_eq!(out.summary.failed, 0);
    // Every CSI call the run's operations made, counted by the sidecars during the run (other
    // tests share the cluster: at least these), and the API server's side of its requests.
    let cluster = out.summary.cluster.as_ref().expect("the cluster's timing");
    assert!(cluster.errors.is_empty(), "{:?}", cluster.errors);
    for (method, at_least) in [
        ("CreateVolume", 3),
        ("CreateSnapshot", 1),
        ("ControllerExpandVolume", 1),
        ("ControllerPublishVolume", 1),
    ] {
        let m = cluster
            .csi
            .get(method)
            .unwrap_or_else(|| panic!("no {method} in {:?}", cluster.csi.keys()));
        assert!(m.count >= at_least, "{method}: {m:?}");
        assert!(m.p50 > 0.0 && m.p50 <= m.p99, "{method}: {m:?}");
    }
    let posts = &cluster.apiserver["POST persistentvolumeclaims"];
    assert!(posts.count >= 3, "{posts:?}");
    // The queues in front of them: the run's requests waited in API priority and fairness
    // (a service account's requests go to a priority level of their own, not the exempt
    // one), and the provisioner's and attacher's work queues took the run's work.
    let apf: u64 = cluster.apf_wait.values().map(|l| l.count).sum();
    assert!(apf >= 10, "APF waits: {:?}", cluster.apf_wait);
    for (queue, at_least) in [("claims", 3), ("csi-attacher-va", 1)] {
        let q = cluster
            .queue_wait
            .get(queue)
            .unwrap_or_else(|| panic!("no queue {queue} in {:?}", cluster.queue_wait.keys()));
        assert!(q.count >= at_least, "{queue}: {q:?}");
    }
    let left = rt.block_on(run_objects(&c, &out.manifest.run_id));
    assert!(left.is_empty(), "left behind: {left:?}");
}
