//! File systems other than ext4: a StorageClass's `csi.storage.k8s.io/fstype` reaches the
//! driver as the capability's `fs_type`. xfs is here because it grows online where ext4
//! cannot (resize2fs online needs CAP_SYS_RESOURCE, xfs_growfs only CAP_SYS_ADMIN), and
//! because its copies share a UUID (a restore must mount beside its source).

#![allow(clippy::print_stderr)] // the skip line is the contract

use std::path::Path;

use csi_driver::pb::{self, volume_capability as vc};
use tonic::Code;

use crate::harness::*;

const MIB: i64 = 1 << 20;

fn fs_cap(fs: &str) -> pb::VolumeCapability {
    pb::VolumeCapability {
        access_type: Some(vc::AccessType::Mount(vc::MountVolume {
            fs_type: fs.to_owned(),
            ..Default::default()
        })),
        ..mount_cap()
    }
}

fn is_root() -> bool {
    local_storage::is_root()
}

/// The file system type and size (bytes) mounted at `p`, as the kernel reports them.
fn fs_at(p: &Path) -> (String, u64) {
    let out = std::process::Command::new("stat")
        .args(["-f", "--format=%T %S %b"])
        .arg(p)
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    let f: Vec<&str> = s.split_whitespace().collect();
    let n = |i: usize| f[i].parse::<u64>().unwrap();
    (f[0].to_owned(), n(1) * n(2))
}

#[tokio::test]
async fn an_unsupported_fs_type_is_refused_with_the_supported_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let mut d = start(
        config(&tmp.path().join("root")),
        &tmp.path().join("csi.sock"),
    )
    .await;
    let err = d
        .ctl
        .create_volume(create_req("pvc-btrfs", 32 * MIB, fs_cap("btrfs")))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("\"btrfs\"") && err.message().contains("ext4, xfs"),
        "{}",
        err.message()
    );
    let err = d
        .ctl
        .create_volume(pb::CreateVolumeRequest {
            volume_capabilities: vec![fs_cap("ext4"), fs_cap("xfs")],
            ..create_req("pvc-two", 32 * MIB, fs_cap("ext4"))
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{}", err.message());
    d.stop().await;
}

/// An xfs volume from creation to deletion the way the kubelet drives it: the minimum size,
/// a stage that names another file system refused, stage + publish, a node expansion that
/// grows the mounted file system, a snapshot restored larger (grown offline) and staged
/// beside its source (same UUID), and nothing left behind.
#[tokio::test]
async fn an_xfs_volume_is_made_grown_online_snapshotted_and_restored_beside_its_source() {
    if !is_root() {
        eprintln!("skipped: xfs volumes need root (loop devices, mounts)");
        return;
    }
    assert!(
        std::process::Command::new("mkfs.xfs")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success()),
        "mkfs.xfs is missing: install xfsprogs (.ci/run does)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let mut d = start(config(&root), &tmp.path().join("csi.sock")).await;
    let mut req = create_req("pvc-xfs", 32 * MIB, fs_cap("xfs"));
    req.parameters = [("nodeExpansion".to_owned(), "true".to_owned())].into();
    let vol = d.create(req).await;
    assert_eq!(
        vol.capacity_bytes,
        300 * MIB,
        "raised to mkfs.xfs's minimum"
    );
    assert_eq!(vol.volume_context["kind"], "xfs");
    let id = vol.volume_id.clone();
    let publish = pb::ControllerPublishVolumeRequest {
        volume_id: id.clone(),
        node_id: NODE.into(),
        volume_capability: Some(fs_cap("xfs")),
        ..Default::default()
    };
    let ctx = d
        .ctl
        .controller_publish_volume(publish.clone())
        .await
        .unwrap()
        .into_inner()
        .publish_context;
    let staging = tmp.path().join("staging");
    let target = tmp.path().join("target");
    let err = d
        .node
        .node_stage_volume(stage_req(&id, &staging, &ctx, fs_cap("ext4")))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("xfs"), "{}", err.message());
    assert!(mounts_under(tmp.path()).is_empty());
    d.node
        .node_stage_volume(stage_req(&id, &staging, &ctx, fs_cap("xfs")))
        .await
        .unwrap();
    d.node
        .node_publish_volume(publish_node_req(&id, &staging, &target, fs_cap("xfs")))
        .await
        .unwrap();
    let (kind, before) = fs_at(&target);
    assert_eq!(kind, "xfs");
    let data = pattern(3, 200_000);
    fs_err::write(target.join("data.bin"), &data).unwrap();

    // Controller expansion grows the image and the loop device; the file system waits for
    // the node (nodeExpansion=true), which grows it while it stays mounted.
    let grown = d.expand(&id, 400 * MIB).await;
    assert!(grown.node_expansion_required);
    assert_eq!(
        fs_at(&target).1,
        before,
        "not grown before NodeExpandVolume"
    );
    d.node_expand(&id, &target).await;
    let after = fs_at(&target).1;
    assert!(
        after > before + 90 * MIB as u64,
        "the mounted xfs grew by about 100 MiB: {before} -> {after}"
    );
    assert_eq!(fs_err::read(target.join("data.bin")).unwrap(), data);
    let ops = csi_driver::state::read_ops(&root.join("ops.jsonl")).unwrap();
    let expand = ops
        .iter()
        .rfind(|o| o.op == "NodeExpandVolume")
        .expect("NodeExpandVolume logged");
    assert!(expand.detail.contains("xfs_growfs"), "{expand:?}");

    // A snapshot of the mounted volume, restored larger: grown offline (a temporary mount),
    // then staged while its source is still mounted.
    let snap = d.snapshot(&id, "snap-xfs").await;
    let mut restore = create_req("pvc-xfs-restored", 500 * MIB, fs_cap(""));
    restore.volume_content_source = from_snapshot(&snap.snapshot_id);
    let restored = d.create(restore).await;
    assert_eq!(
        restored.volume_context["kind"], "xfs",
        "a restore keeps xfs"
    );
    let mut wrong = create_req("pvc-xfs-as-ext4", 500 * MIB, fs_cap("ext4"));
    wrong.volume_content_source = from_snapshot(&snap.snapshot_id);
    let err = d.ctl.create_volume(wrong).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{}", err.message());
    let rid = restored.volume_id.clone();
    let rctx = d
        .ctl
        .controller_publish_volume(pb::ControllerPublishVolumeRequest {
            volume_id: rid.clone(),
            ..publish.clone()
        })
        .await
        .unwrap()
        .into_inner()
        .publish_context;
    let rstaging = tmp.path().join("staging-restored");
    d.node
        .node_stage_volume(stage_req(&rid, &rstaging, &rctx, fs_cap("xfs")))
        .await
        .unwrap();
    let (rkind, rsize) = fs_at(&rstaging);
    assert_eq!(rkind, "xfs");
    assert!(
        rsize > after + 90 * MIB as u64,
        "grown to ~500 MiB: {rsize}"
    );
    assert_eq!(fs_err::read(rstaging.join("data.bin")).unwrap(), data);

    // Teardown leaves nothing: no mounts (the grow's scratch mount included), no loops.
    d.unstage(&rid, &rstaging).await;
    d.unpublish_node(&id, &target).await;
    d.unstage(&id, &staging).await;
    for v in [&id, &rid] {
        d.unpublish(v).await;
        d.delete_volume(v).await;
    }
    d.delete_snapshot(&snap.snapshot_id).await;
    assert!(mounts_under(tmp.path()).is_empty());
    assert_no_loops_under(&root);
    assert!(files_in(&root.join("volumes")).is_empty());
    d.stop().await;
}
