//! Snapshot, restore, clone, resize and dynamic provisioning through the project's CSI driver:
//! these run when the cluster has the `cnsreplay-csi` StorageClass (testenv/up.sh creates it
//! once the driver is built) and otherwise print a skip notice (a failure when
//! `CNSREPLAY_REQUIRE_CSI=1`).

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
    let (out, _p) = replay_run(&trace, &run_dir, provider(&env, "cnsreplay-csi"));
    let recs = events(&run_dir);
    for r in &recs {
        let names = ordered_phases(r);
        match r.op {
            OpType::Snapshot => assert_eq!(names, ["created", "ready"]),
            OpType::Resize => assert_eq!(names, ["patched", "resized"]),
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
    let left = rt.block_on(run_objects(&c, &out.manifest.run_id));
    assert!(left.is_empty(), "left behind: {left:?}");
}
