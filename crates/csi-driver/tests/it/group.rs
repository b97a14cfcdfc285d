//! The GroupController service and ControllerModifyVolume over gRPC: group snapshots whose
//! members share one instant, restore from a member, idempotency and the spec's errors; a
//! modify's parameters checked before anything changes.

use csi_driver::pb;
use tonic::Code;

use crate::harness::*;

const MIB: i64 = 1 << 20;

#[tokio::test]
async fn a_group_snapshot_takes_every_member_and_restores_each() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let mut d = start(config(&root), &tmp.path().join("csi.sock")).await;
    let caps = d
        .group
        .group_controller_get_capabilities(pb::GroupControllerGetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(caps.capabilities.len(), 1);
    let mut vols = Vec::new();
    for i in 0..3u8 {
        let v = d
            .create(create_req(&format!("pvc-{i}"), 8 * MIB, block_cap()))
            .await;
        write_at(&image_of(&root, &v), 1 << 20, &pattern(i + 1, 4096));
        vols.push(v);
    }
    let req = pb::CreateVolumeGroupSnapshotRequest {
        name: "groupsnapshot-1".into(),
        source_volume_ids: vols.iter().map(|v| v.volume_id.clone()).collect(),
        ..Default::default()
    };
    let g = d
        .group
        .create_volume_group_snapshot(req.clone())
        .await
        .unwrap()
        .into_inner()
        .group_snapshot
        .unwrap();
    assert!(g.ready_to_use);
    assert_eq!(g.snapshots.len(), 3);
    for (s, v) in g.snapshots.iter().zip(&vols) {
        assert_eq!(s.source_volume_id, v.volume_id);
        assert_eq!(s.group_snapshot_id, g.group_snapshot_id);
        assert!(s.ready_to_use);
    }
    // Idempotent by name; the same name over other volumes is ALREADY_EXISTS.
    let again = d
        .group
        .create_volume_group_snapshot(req.clone())
        .await
        .unwrap()
        .into_inner()
        .group_snapshot
        .unwrap();
    assert_eq!(again, g);
    let mut other = req.clone();
    other.source_volume_ids.pop();
    assert_eq!(
        d.group
            .create_volume_group_snapshot(other)
            .await
            .unwrap_err()
            .code(),
        Code::AlreadyExists
    );
    let mut twice = req.clone();
    twice.name = "groupsnapshot-2".into();
    twice.source_volume_ids.push(vols[0].volume_id.clone());
    assert_eq!(
        d.group
            .create_volume_group_snapshot(twice)
            .await
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );
    // The sources change afterwards; each restored member has its volume's data from then.
    for v in &vols {
        write_at(&image_of(&root, v), 1 << 20, &pattern(9, 4096));
    }
    for (i, s) in g.snapshots.iter().enumerate() {
        let mut r = create_req(&format!("pvc-r{i}"), 0, block_cap());
        r.volume_content_source = from_snapshot(&s.snapshot_id);
        let restored = d.create(r).await;
        assert_eq!(
            read_at(&image_of(&root, &restored), 1 << 20, 4096),
            pattern(i as u8 + 1, 4096)
        );
    }
    // ListSnapshots (which the sidecar polls for members) knows them.
    let listed = d
        .ctl
        .list_snapshots(pb::ListSnapshotsRequest {
            snapshot_id: g.snapshots[1].snapshot_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.entries.len(), 1);
    // A member goes with its group only.
    assert_eq!(
        d.ctl
            .delete_snapshot(pb::DeleteSnapshotRequest {
                snapshot_id: g.snapshots[0].snapshot_id.clone(),
                ..Default::default()
            })
            .await
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );
    let get = |id: &str| pb::GetVolumeGroupSnapshotRequest {
        group_snapshot_id: id.to_owned(),
        ..Default::default()
    };
    let got = d
        .group
        .get_volume_group_snapshot(get(&g.group_snapshot_id))
        .await
        .unwrap()
        .into_inner()
        .group_snapshot
        .unwrap();
    assert_eq!(got, g);
    let del = pb::DeleteVolumeGroupSnapshotRequest {
        group_snapshot_id: g.group_snapshot_id.clone(),
        snapshot_ids: vec![g.snapshots[0].snapshot_id.clone()],
        ..Default::default()
    };
    assert_eq!(
        d.group
            .delete_volume_group_snapshot(del.clone())
            .await
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );
    let mut del = del;
    del.snapshot_ids = g.snapshots.iter().map(|s| s.snapshot_id.clone()).collect();
    d.group
        .delete_volume_group_snapshot(del.clone())
        .await
        .unwrap();
    // Idempotent; the group and its member images are gone.
    d.group.delete_volume_group_snapshot(del).await.unwrap();
    assert_eq!(
        d.group
            .get_volume_group_snapshot(get(&g.group_snapshot_id))
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    for s in &g.snapshots {
        assert!(
            !root
                .join(format!("snapshots/{}.img", s.snapshot_id))
                .exists()
        );
    }
    d.stop().await;
}

#[tokio::test]
async fn modify_checks_its_parameters_before_anything_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let mut d = start(config(&root), &tmp.path().join("csi.sock")).await;
    let v = d.create(create_req("pvc-m", 8 * MIB, block_cap())).await;
    let modify = |params: &[(&str, &str)]| pb::ControllerModifyVolumeRequest {
        volume_id: v.volume_id.clone(),
        mutable_parameters: params
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..Default::default()
    };
    let e = d
        .ctl
        .controller_modify_volume(modify(&[("iops", "5")]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("unknown parameter \"iops\""), "{e:?}");
    let state = || csi_driver::state::State::load(&root.join("state.json")).unwrap();
    assert_eq!(
        state().volumes[&v.volume_id].limits,
        local_storage::throttle::Limits::default()
    );
    let r = d
        .ctl
        .controller_modify_volume(modify(&[("write_iops", "300"), ("read_bps", "10Mi")]))
        .await;
    if !(local_storage::is_root() && local_storage::throttle::blkio_root().is_some()) {
        // Nothing to throttle here: refused before anything changes.
        assert_eq!(r.unwrap_err().code(), Code::InvalidArgument);
        d.stop().await;
        return;
    }
    r.unwrap();
    assert_eq!(
        state().volumes[&v.volume_id].limits,
        local_storage::throttle::Limits([None, Some(300), Some(10 << 20), None])
    );
    // Only the keys given change (the spec's rule).
    d.ctl
        .controller_modify_volume(modify(&[("write_iops", "unlimited")]))
        .await
        .unwrap();
    assert_eq!(
        state().volumes[&v.volume_id].limits,
        local_storage::throttle::Limits([None, Some(0), Some(10 << 20), None])
    );
    let e = d
        .ctl
        .controller_modify_volume(pb::ControllerModifyVolumeRequest {
            volume_id: "vol-404".into(),
            ..modify(&[("write_iops", "1")])
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    d.stop().await;
}
