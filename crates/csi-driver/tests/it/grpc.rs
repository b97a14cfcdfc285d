//! The driver over its real Unix socket, no cluster. As root (this machine) volumes get loop
//! devices and mounts; otherwise the same calls run in file mode.

use std::path::Path;

use csi_driver::pb;
use csi_driver::state::read_ops;
use tonic::Code;

use crate::harness::*;

const MIB: i64 = 1 << 20;

fn is_root() -> bool {
    local_storage::is_root()
}

#[tokio::test]
async fn identity_reports_name_version_and_capabilities() {
    let tmp = tempfile::tempdir().unwrap();
    let mut d = start(
        config(&tmp.path().join("root")),
        &tmp.path().join("csi.sock"),
    )
    .await;
    let info =
        d.id.get_plugin_info(pb::GetPluginInfoRequest {})
            .await
            .unwrap()
            .into_inner();
    assert_eq!(info.name, "csi.cnsreplay.dev");
    assert!(!info.vendor_version.is_empty());
    let probe = d.id.probe(pb::ProbeRequest {}).await.unwrap().into_inner();
    assert_eq!(probe.ready, Some(true));
    let caps = d
        .ctl
        .controller_get_capabilities(pb::ControllerGetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(caps.capabilities.len() >= 8);
    let info = d
        .node
        .node_get_info(pb::NodeGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.node_id, NODE);
    assert_eq!(
        info.accessible_topology.unwrap().segments["topology.csi.cnsreplay.dev/node"],
        NODE
    );
    // Not served: UNIMPLEMENTED, as the spec wants for what is not advertised.
    let e = d
        .ctl
        .get_capacity(pb::GetCapacityRequest::default())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unimplemented);
    d.stop().await;
}

/// The node's volume limit: the flag's value until the limit file exists, then the file's,
/// re-read at every NodeGetInfo (the kubelet's refresh sees a change at once); a file that
/// is no count is INTERNAL naming it. Every answer is in the call log.
#[tokio::test]
async fn node_get_info_reports_the_volume_limit_of_the_moment() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let file = tmp.path().join("max-volumes");
    let mut cfg = config(&root);
    cfg.max_volumes_per_node = 7;
    cfg.max_volumes_file = Some(file.clone());
    let mut d = start(cfg, &tmp.path().join("csi.sock")).await;
    let mut limit = async || {
        d.node
            .node_get_info(pb::NodeGetInfoRequest {})
            .await
            .map(|r| r.into_inner().max_volumes_per_node)
    };
    assert_eq!(limit().await.unwrap(), 7);
    std::fs::write(&file, "2\n").unwrap();
    assert_eq!(limit().await.unwrap(), 2);
    std::fs::write(&file, "3").unwrap();
    assert_eq!(limit().await.unwrap(), 3);
    std::fs::write(&file, "three").unwrap();
    let e = limit().await.unwrap_err();
    assert_eq!(e.code(), Code::Internal);
    assert!(
        e.message().contains("max-volumes") && e.message().contains("\"three\" is not a count"),
        "{}",
        e.message()
    );
    let answers: Vec<String> = read_ops(&root.join("ops.jsonl"))
        .unwrap()
        .into_iter()
        .filter(|r| r.op == "NodeGetInfo")
        .map(|r| format!("{} {}", r.code, r.detail))
        .collect();
    assert_eq!(
        answers[..3],
        [
            "OK max_volumes_per_node=7",
            "OK max_volumes_per_node=2",
            "OK max_volumes_per_node=3"
        ]
    );
    assert!(answers[3].starts_with("Internal "), "{answers:?}");
    d.stop().await;
}

#[tokio::test]
async fn create_is_idempotent_and_conflicts_are_already_exists() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let mut d = start(config(&root), &tmp.path().join("csi.sock")).await;
    let a = d.create(create_req("pvc-1", 20 * MIB, mount_cap())).await;
    let b = d.create(create_req("pvc-1", 20 * MIB, mount_cap())).await;
    assert_eq!(a, b);
    assert_eq!(a.capacity_bytes, 20 * MIB);
    assert_eq!(files_in(&root.join("volumes")).len(), 1);

    let e = d
        .ctl
        .create_volume(create_req("pvc-1", 40 * MIB, mount_cap()))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::AlreadyExists);
    let e = d
        .ctl
        .create_volume(create_req("pvc-1", 20 * MIB, block_cap()))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::AlreadyExists);

    let e = d
        .ctl
        .create_volume(create_req("", MIB, mount_cap()))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    let mut no_caps = create_req("pvc-2", MIB, mount_cap());
    no_caps.volume_capabilities.clear();
    assert_eq!(
        d.ctl.create_volume(no_caps).await.unwrap_err().code(),
        Code::InvalidArgument
    );
    let mut bad_latency = create_req("pvc-3", MIB, mount_cap());
    bad_latency
        .parameters
        .insert("latency.CreateVolume".into(), "sometimes".into());
    assert_eq!(
        d.ctl.create_volume(bad_latency).await.unwrap_err().code(),
        Code::InvalidArgument
    );
    let mut snap_missing = create_req("pvc-4", MIB, mount_cap());
    snap_missing.volume_content_source = from_snapshot("snap-404");
    assert_eq!(
        d.ctl.create_volume(snap_missing).await.unwrap_err().code(),
        Code::NotFound
    );

    // Unknown ids: delete succeeds, publish is NOT_FOUND, unknown node is NOT_FOUND.
    d.ctl
        .delete_volume(pb::DeleteVolumeRequest {
            volume_id: "vol-404".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let publish = |vol: &str, node: &str| pb::ControllerPublishVolumeRequest {
        volume_id: vol.to_owned(),
        node_id: node.to_owned(),
        volume_capability: Some(mount_cap()),
        ..Default::default()
    };
    assert_eq!(
        d.ctl
            .controller_publish_volume(publish("vol-404", NODE))
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    assert_eq!(
        d.ctl
            .controller_publish_volume(publish(&a.volume_id, "no-such-node"))
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    d.delete_volume(&a.volume_id).await;
    assert!(files_in(&root.join("volumes")).is_empty());
    d.stop().await;
}

#[tokio::test]
async fn snapshot_restore_and_clone_carry_the_data() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let mut d = start(config(&root), &tmp.path().join("csi.sock")).await;
    let vol = d.create(create_req("pvc-src", 8 * MIB, block_cap())).await;
    let img = image_of(&root, &vol);
    let first = pattern(1, 64 << 10);
    write_at(&img, 3 << 20, &first);

    let snap_req = pb::CreateSnapshotRequest {
        source_volume_id: vol.volume_id.clone(),
        name: "snapshot-1".into(),
        ..Default::default()
    };
    let snap = d
        .ctl
        .create_snapshot(snap_req.clone())
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert!(snap.ready_to_use);
    assert_eq!(snap.size_bytes, 8 * MIB);
    // Idempotent; the same name for another volume is ALREADY_EXISTS.
    let again = d
        .ctl
        .create_snapshot(snap_req.clone())
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert_eq!(again, snap);
    let other = d
        .create(create_req("pvc-other", 8 * MIB, block_cap()))
        .await;
    let mut clash = snap_req.clone();
    clash.source_volume_id.clone_from(&other.volume_id);
    assert_eq!(
        d.ctl.create_snapshot(clash).await.unwrap_err().code(),
        Code::AlreadyExists
    );

    // The source changes after the snapshot.
    let second = pattern(2, 64 << 10);
    write_at(&img, 3 << 20, &second);

    let mut restore = create_req("pvc-restored", 16 * MIB, block_cap());
    restore.volume_content_source = from_snapshot(&snap.snapshot_id);
    let restored = d.create(restore).await;
    assert_eq!(restored.capacity_bytes, 16 * MIB);
    let rimg = image_of(&root, &restored);
    assert_eq!(read_at(&rimg, 3 << 20, first.len()), first);
    assert_eq!(fs_err::metadata(&rimg).unwrap().len(), 16 << 20);

    let mut clone = create_req("pvc-clone", 0, block_cap());
    clone.volume_content_source = from_volume(&vol.volume_id);
    let cloned = d.create(clone).await;
    assert_eq!(cloned.capacity_bytes, 8 * MIB);
    assert_eq!(
        read_at(&image_of(&root, &cloned), 3 << 20, second.len()),
        second
    );

    let list = d
        .ctl
        .list_snapshots(pb::ListSnapshotsRequest {
            source_volume_id: vol.volume_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.entries.len(), 1);
    let none = d
        .ctl
        .list_snapshots(pb::ListSnapshotsRequest {
            snapshot_id: "snap-404".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(none.entries.is_empty());

    // A mount volume cannot come from a block snapshot.
    let mut mismatch = create_req("pvc-fs", 16 * MIB, mount_cap());
    mismatch.volume_content_source = from_snapshot(&snap.snapshot_id);
    assert_eq!(
        d.ctl.create_volume(mismatch).await.unwrap_err().code(),
        Code::InvalidArgument
    );

    for v in [&vol, &other, &restored, &cloned] {
        d.delete_volume(&v.volume_id).await;
    }
    d.delete_snapshot(&snap.snapshot_id).await;
    assert!(files_in(&root.join("volumes")).is_empty());
    assert!(files_in(&root.join("snapshots")).is_empty());
    d.stop().await;
}

/// Free bytes reported by `df` for a mount point.
fn fs_size(mount: &Path) -> u64 {
    let out = std::process::Command::new("df")
        .args(["-B1", "--output=size"])
        .arg(mount)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .unwrap()
}

/// The whole mount-volume path as a kubelet would drive it: publish (twice, like the
/// attacher), stage, node publish, write, expand online, snapshot while mounted, then tear
/// down and restore the snapshot elsewhere with the file intact.
#[tokio::test]
async fn publish_stage_expand_snapshot_and_teardown_leave_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let mut d = start(config(&root), &tmp.path().join("csi.sock")).await;
    let vol = d.create(create_req("pvc-fs", 32 * MIB, mount_cap())).await;
    let id = vol.volume_id.clone();
    let publish = pb::ControllerPublishVolumeRequest {
        volume_id: id.clone(),
        node_id: NODE.into(),
        volume_capability: Some(mount_cap()),
        ..Default::default()
    };
    let c1 = d
        .ctl
        .controller_publish_volume(publish.clone())
        .await
        .unwrap()
        .into_inner();
    let c2 = d
        .ctl
        .controller_publish_volume(publish.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(c1, c2, "a repeated publish returns the same context");
    let mut ro = publish.clone();
    ro.readonly = true;
    assert_eq!(
        d.ctl
            .controller_publish_volume(ro)
            .await
            .unwrap_err()
            .code(),
        Code::AlreadyExists
    );
    let mut elsewhere = publish.clone();
    elsewhere.node_id = OTHER_NODE.into();
    assert_eq!(
        d.ctl
            .controller_publish_volume(elsewhere)
            .await
            .unwrap_err()
            .code(),
        Code::FailedPrecondition
    );
    if is_root() {
        assert!(c1.publish_context["devicePath"].starts_with("/dev/loop"));
        assert_eq!(loops_under(&root).len(), 1);
    }
    // In use: not deletable.
    assert_eq!(
        d.ctl
            .delete_volume(pb::DeleteVolumeRequest {
                volume_id: id.clone(),
                ..Default::default()
            })
            .await
            .unwrap_err()
            .code(),
        Code::FailedPrecondition
    );

    let staging = tmp.path().join("staging");
    let target = tmp.path().join("pods/target");
    fs_err::create_dir_all(&staging).unwrap();
    fs_err::create_dir_all(target.parent().unwrap()).unwrap();
    for _ in 0..2 {
        d.node
            .node_stage_volume(stage_req(&id, &staging, &c1.publish_context, mount_cap()))
            .await
            .unwrap();
        d.node
            .node_publish_volume(publish_node_req(&id, &staging, &target, mount_cap()))
            .await
            .unwrap();
    }
    let data = pattern(7, 100_000);
    fs_err::write(target.join("data.bin"), &data).unwrap();
    if is_root() {
        assert_eq!(mounts_under(tmp.path()).len(), 2);
        let stats = d
            .node
            .node_get_volume_stats(pb::NodeGetVolumeStatsRequest {
                volume_id: id.clone(),
                volume_path: target.display().to_string(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let bytes = &stats.usage[0];
        assert_eq!(bytes.unit, pb::volume_usage::Unit::Bytes as i32);
        assert!(bytes.used >= 100_000, "the file written counts: {bytes:?}");
        assert!(bytes.total > bytes.available && bytes.total <= 32 * MIB);
        let inodes = &stats.usage[1];
        assert_eq!(inodes.unit, pb::volume_usage::Unit::Inodes as i32);
        assert!(
            inodes.used >= 12 && inodes.used < inodes.total,
            "{inodes:?}"
        );
        let before = fs_size(&target);
        let grown = d.expand(&id, 64 * MIB).await;
        assert_eq!(grown.capacity_bytes, 64 * MIB);
        assert!(!grown.node_expansion_required);
        assert!(fs_size(&target) > before, "the mounted file system grew");
        let n = d.node_expand(&id, &target).await;
        assert_eq!(n.capacity_bytes, 64 * MIB);
    }
    let snap = d.snapshot(&id, "snap-of-mounted").await;

    for _ in 0..2 {
        d.unpublish_node(&id, &target).await;
        d.unstage(&id, &staging).await;
        d.unpublish(&id).await;
    }
    assert!(!target.exists(), "node unpublish removes the target");
    assert!(mounts_under(tmp.path()).is_empty());
    assert_no_loops_under(&root);

    // The snapshot, restored and mounted through the same calls, has the file.
    let mut restore = create_req("pvc-restored", 0, mount_cap());
    restore.volume_content_source = from_snapshot(&snap.snapshot_id);
    let restored = d.create(restore).await;
    let rid = restored.volume_id.clone();
    if is_root() {
        assert_eq!(restored.capacity_bytes, 64 * MIB);
        let ctx = d
            .ctl
            .controller_publish_volume(pb::ControllerPublishVolumeRequest {
                volume_id: rid.clone(),
                ..publish.clone()
            })
            .await
            .unwrap()
            .into_inner()
            .publish_context;
        d.node
            .node_stage_volume(stage_req(&rid, &staging, &ctx, mount_cap()))
            .await
            .unwrap();
        assert_eq!(fs_err::read(staging.join("data.bin")).unwrap(), data);
        d.unstage(&rid, &staging).await;
        d.unpublish(&rid).await;
    }
    for v in [&id, &rid] {
        d.delete_volume(v).await;
    }
    d.delete_snapshot(&snap.snapshot_id).await;
    assert!(files_in(&root.join("volumes")).is_empty());
    assert!(files_in(&root.join("snapshots")).is_empty());
    assert_no_loops_under(&root);
    assert!(mounts_under(tmp.path()).is_empty());
    let served = d.stop().await;
    assert_eq!((served.volumes, served.snapshots), (0, 0));
}

#[tokio::test]
async fn a_restart_mid_run_keeps_volumes_snapshots_and_attachments() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let sock = tmp.path().join("csi.sock");
    let mut d = start(config(&root), &sock).await;
    let vol = d
        .create(create_req("pvc-keep", 16 * MIB, mount_cap()))
        .await;
    let snap = d.snapshot(&vol.volume_id, "snap-keep").await;
    let publish = pb::ControllerPublishVolumeRequest {
        volume_id: vol.volume_id.clone(),
        node_id: NODE.into(),
        volume_capability: Some(mount_cap()),
        ..Default::default()
    };
    let ctx = d
        .ctl
        .controller_publish_volume(publish.clone())
        .await
        .unwrap()
        .into_inner();
    let served = d.stop().await;
    assert_eq!((served.volumes, served.snapshots), (1, 1));

    let mut d = start(config(&root), &sock).await;
    // Same name, same answer; the snapshot is listed; the publish is remembered.
    let again = d
        .create(create_req("pvc-keep", 16 * MIB, mount_cap()))
        .await;
    assert_eq!(again, vol);
    let list = d
        .ctl
        .list_snapshots(pb::ListSnapshotsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.entries.len(), 1);
    assert_eq!(list.entries[0].snapshot.as_ref().unwrap(), &snap);
    let ctx2 = d
        .ctl
        .controller_publish_volume(publish)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ctx, ctx2);
    let vols = d
        .ctl
        .list_volumes(pb::ListVolumesRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        vols.entries[0].status.as_ref().unwrap().published_node_ids,
        [NODE]
    );
    d.unpublish(&vol.volume_id).await;
    assert_no_loops_under(&root);
    d.delete_volume(&vol.volume_id).await;
    d.delete_snapshot(&snap.snapshot_id).await;
    d.stop().await;
    let st = csi_driver::state::State::load(&root.join("state.json")).unwrap();
    assert!(st.volumes.is_empty() && st.snapshots.is_empty());
}

#[tokio::test]
async fn injected_latency_and_failures_are_logged_per_call() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let mut cfg = config(&root);
    cfg.latency = serde_json::from_str(
        r#"{"seed": 3, "ops": {"CreateVolume": {"latency": "fixed 20ms"}, "*": {"latency": "fixed 1ms"}}}"#,
    )
    .unwrap();
    let mut d = start(cfg, &tmp.path().join("csi.sock")).await;
    let vol = d
        .create(create_req("pvc-slow", 16 * MIB, block_cap()))
        .await;
    // Class parameters override the file: this class fails every snapshot.
    let e = d
        .ctl
        .create_snapshot(pb::CreateSnapshotRequest {
            source_volume_id: vol.volume_id.clone(),
            name: "snap-fails".into(),
            parameters: [("failRate.CreateSnapshot".to_owned(), "1".to_owned())].into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unavailable);
    d.delete_volume(&vol.volume_id).await;
    d.stop().await;
    let ops = read_ops(&root.join("ops.jsonl")).unwrap();
    let names: Vec<&str> = ops.iter().map(|o| o.op.as_str()).collect();
    assert_eq!(names, ["CreateVolume", "CreateSnapshot", "DeleteVolume"]);
    assert_eq!(ops[0].injected_ns, 20_000_000);
    assert_eq!(ops[0].volume, vol.volume_id);
    assert_eq!(ops[0].code, "OK");
    assert!(ops[0].end_ns - ops[0].start_ns >= ops[0].injected_ns);
    assert_eq!(ops[1].code, "Unavailable");
    assert_eq!(ops[1].injected_ns, 1_000_000);
    assert_eq!(ops[2].injected_ns, 1_000_000);
    assert!(files_in(&root.join("snapshots")).is_empty());
}
