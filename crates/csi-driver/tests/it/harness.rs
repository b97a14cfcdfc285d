//! An in-process driver on a Unix socket in a temp dir, and a tonic client for it.

use std::path::{Path, PathBuf};

use csi_driver::pb::controller_client::ControllerClient;
use csi_driver::pb::group_controller_client::GroupControllerClient;
use csi_driver::pb::identity_client::IdentityClient;
use csi_driver::pb::node_client::NodeClient;
use csi_driver::pb::{self, volume_capability as vc};
use csi_driver::{Driver, DriverConfig, Served};
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tokio::sync::oneshot;
use tonic::transport::{Channel, Endpoint};

pub const NODE: &str = "node-a";
pub const OTHER_NODE: &str = "node-b";

/// A running driver and clients of its three services.
pub struct Running {
    pub id: IdentityClient<Channel>,
    pub ctl: ControllerClient<Channel>,
    pub group: GroupControllerClient<Channel>,
    pub node: NodeClient<Channel>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<Served, csi_driver::DriverError>>>,
}

pub fn config(root: &Path) -> DriverConfig {
    let mut cfg = DriverConfig::new(root);
    cfg.node_id = NODE.to_owned();
    cfg.nodes = vec![OTHER_NODE.to_owned()];
    cfg.topology = true;
    cfg.default_size = 32 << 20;
    cfg
}

pub async fn start(cfg: DriverConfig, socket: &Path) -> Running {
    let driver = Driver::open(cfg.clone()).expect("driver opens");
    let (tx, rx) = oneshot::channel::<()>();
    let sock = socket.to_owned();
    let task = tokio::spawn(async move {
        csi_driver::serve(driver, &sock, async {
            let _ = rx.await;
        })
        .await
    });
    for _ in 0..200 {
        if socket.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let ch = connect(socket).await;
    Running {
        id: IdentityClient::new(ch.clone()),
        ctl: ControllerClient::new(ch.clone()),
        group: GroupControllerClient::new(ch.clone()),
        node: NodeClient::new(ch),
        stop: Some(tx),
        task: Some(task),
    }
}

pub async fn connect(socket: &Path) -> Channel {
    let path = socket.to_owned();
    Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let p = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(p).await?)) }
        }))
        .await
        .expect("connects to the driver socket")
}

impl Running {
    /// Stops the server (as a SIGTERM would) and waits for it.
    pub async fn stop(mut self) -> Served {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let task = self.task.take().expect("task");
        drop(self);
        task.await.expect("server task").expect("server ran")
    }
}

impl Running {
    /// CreateVolume, which must succeed.
    pub async fn create(&mut self, req: pb::CreateVolumeRequest) -> pb::Volume {
        self.ctl
            .create_volume(req)
            .await
            .expect("CreateVolume")
            .into_inner()
            .volume
            .expect("a volume")
    }

    /// CreateSnapshot, which must succeed.
    pub async fn snapshot(&mut self, vol: &str, name: &str) -> pb::Snapshot {
        self.ctl
            .create_snapshot(pb::CreateSnapshotRequest {
                source_volume_id: vol.to_owned(),
                name: name.to_owned(),
                ..Default::default()
            })
            .await
            .expect("CreateSnapshot")
            .into_inner()
            .snapshot
            .expect("a snapshot")
    }

    /// DeleteVolume, which must succeed.
    pub async fn delete_volume(&mut self, id: &str) {
        self.ctl
            .delete_volume(pb::DeleteVolumeRequest {
                volume_id: id.to_owned(),
                ..Default::default()
            })
            .await
            .expect("DeleteVolume");
    }

    /// DeleteSnapshot, which must succeed.
    pub async fn delete_snapshot(&mut self, id: &str) {
        self.ctl
            .delete_snapshot(pb::DeleteSnapshotRequest {
                snapshot_id: id.to_owned(),
                ..Default::default()
            })
            .await
            .expect("DeleteSnapshot");
    }

    /// ControllerUnpublishVolume from `NODE`, which must succeed.
    pub async fn unpublish(&mut self, id: &str) {
        self.ctl
            .controller_unpublish_volume(pb::ControllerUnpublishVolumeRequest {
                volume_id: id.to_owned(),
                node_id: NODE.into(),
                ..Default::default()
            })
            .await
            .expect("ControllerUnpublishVolume");
    }

    /// ControllerExpandVolume to `bytes`, which must succeed.
    pub async fn expand(&mut self, id: &str, bytes: i64) -> pb::ControllerExpandVolumeResponse {
        self.ctl
            .controller_expand_volume(pb::ControllerExpandVolumeRequest {
                volume_id: id.to_owned(),
                capacity_range: Some(pb::CapacityRange {
                    required_bytes: bytes,
                    limit_bytes: 0,
                }),
                ..Default::default()
            })
            .await
            .expect("ControllerExpandVolume")
            .into_inner()
    }

    /// NodeExpandVolume at `path`, which must succeed.
    pub async fn node_expand(&mut self, id: &str, path: &Path) -> pb::NodeExpandVolumeResponse {
        self.node
            .node_expand_volume(pb::NodeExpandVolumeRequest {
                volume_id: id.to_owned(),
                volume_path: path.display().to_string(),
                ..Default::default()
            })
            .await
            .expect("NodeExpandVolume")
            .into_inner()
    }

    /// NodeUnpublishVolume of `target`, which must succeed.
    pub async fn unpublish_node(&mut self, id: &str, target: &Path) {
        self.node
            .node_unpublish_volume(pb::NodeUnpublishVolumeRequest {
                volume_id: id.to_owned(),
                target_path: target.display().to_string(),
            })
            .await
            .expect("NodeUnpublishVolume");
    }

    /// NodeUnstageVolume, which must succeed.
    pub async fn unstage(&mut self, id: &str, staging: &Path) {
        self.node
            .node_unstage_volume(pb::NodeUnstageVolumeRequest {
                volume_id: id.to_owned(),
                staging_target_path: staging.display().to_string(),
            })
            .await
            .expect("NodeUnstageVolume");
    }
}

pub fn mount_cap() -> pb::VolumeCapability {
    pb::VolumeCapability {
        access_type: Some(vc::AccessType::Mount(vc::MountVolume::default())),
        access_mode: Some(vc::AccessMode {
            mode: vc::access_mode::Mode::SingleNodeWriter.into(),
        }),
    }
}

/// A NodeStageVolume request of `vol` at `staging` with `cap`.
pub fn stage_req(
    vol: &str,
    staging: &Path,
    ctx: &std::collections::HashMap<String, String>,
    cap: pb::VolumeCapability,
) -> pb::NodeStageVolumeRequest {
    pb::NodeStageVolumeRequest {
        volume_id: vol.to_owned(),
        publish_context: ctx.clone(),
        staging_target_path: staging.display().to_string(),
        volume_capability: Some(cap),
        ..Default::default()
    }
}

/// A NodePublishVolume request of `vol` from `staging` to `target` with `cap`.
pub fn publish_node_req(
    vol: &str,
    staging: &Path,
    target: &Path,
    cap: pb::VolumeCapability,
) -> pb::NodePublishVolumeRequest {
    pb::NodePublishVolumeRequest {
        volume_id: vol.to_owned(),
        staging_target_path: staging.display().to_string(),
        target_path: target.display().to_string(),
        volume_capability: Some(cap),
        ..Default::default()
    }
}

pub fn block_cap() -> pb::VolumeCapability {
    pb::VolumeCapability {
        access_type: Some(vc::AccessType::Block(vc::BlockVolume {})),
        access_mode: Some(vc::AccessMode {
            mode: vc::access_mode::Mode::SingleNodeWriter.into(),
        }),
    }
}

pub fn create_req(name: &str, size: i64, cap: pb::VolumeCapability) -> pb::CreateVolumeRequest {
    pb::CreateVolumeRequest {
        name: name.to_owned(),
        capacity_range: Some(pb::CapacityRange {
            required_bytes: size,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![cap],
        ..Default::default()
    }
}

pub fn from_snapshot(snap: &str) -> Option<pb::VolumeContentSource> {
    use pb::volume_content_source as s;
    Some(pb::VolumeContentSource {
        r#type: Some(s::Type::Snapshot(s::SnapshotSource {
            snapshot_id: snap.to_owned(),
        })),
    })
}

pub fn from_volume(vol: &str) -> Option<pb::VolumeContentSource> {
    use pb::volume_content_source as s;
    Some(pb::VolumeContentSource {
        r#type: Some(s::Type::Volume(s::VolumeSource {
            volume_id: vol.to_owned(),
        })),
    })
}

/// Loop devices whose backing file lies under `root`.
pub fn loops_under(root: &Path) -> Vec<String> {
    let out = std::process::Command::new("losetup")
        .args(["-n", "-O", "NAME,BACK-FILE", "-l"])
        .output()
        .expect("losetup runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&*root.to_string_lossy()))
        .map(str::to_owned)
        .collect()
}

/// Waits up to 5 s for every loop device backed by a file under `root` to be detached, and
/// says which are left. The driver detaches with autoclear, which the kernel carries out at
/// the device's last close: after an XFS unmount that can come a moment after the unmount
/// returned (seen once in 0.75 s of tests right after a cluster's teardown).
pub fn assert_no_loops_under(root: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let left = loops_under(root);
        if left.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "loop devices left under {} 5 s after teardown: {left:?}",
            root.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Mount points under `root`.
pub fn mounts_under(root: &Path) -> Vec<PathBuf> {
    local_storage::mount_points()
        .into_iter()
        .filter(|m| m.starts_with(root))
        .collect()
}

/// Files left in a directory.
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    fs_err::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default()
}

/// A deterministic byte pattern for `n` bytes tagged with `seed`.
pub fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Writes `data` at `off` in an image (synced).
pub fn write_at(path: &Path, off: u64, data: &[u8]) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = fs_err::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(off)).unwrap();
    f.write_all(data).unwrap();
    f.sync_all().unwrap();
}

/// Reads `n` bytes at `off` of an image.
pub fn read_at(path: &Path, off: u64, n: usize) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = fs_err::File::open(path).unwrap();
    f.seek(SeekFrom::Start(off)).unwrap();
    let mut b = vec![0; n];
    f.read_exact(&mut b).unwrap();
    b
}

/// The image of a volume (its volume context names it).
pub fn image_of(root: &Path, vol: &pb::Volume) -> PathBuf {
    let p = root.join("volumes").join(format!("{}.img", vol.volume_id));
    assert_eq!(vol.volume_context["image"], p.display().to_string());
    p
}
