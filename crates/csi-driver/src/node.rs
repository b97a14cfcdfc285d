//! The Node service: stage (mount the loop device), publish (bind mount), expand, volume
//! stats, info. On testenv's real node the kubelet calls it (it finds the driver through the
//! plugin registration, [`crate::serve_registration`]); on kwok's fake nodes nothing does.

use std::path::{Path, PathBuf};
use std::time::Duration;

use local_storage::{self as storage, GrowKind};
use tonic::{Request, Response, Status};

use crate::access::{Access, one_cap};
use crate::driver::{Call, Driver, blocking, required};
use crate::pb::node_server::Node;
use crate::pb::{self, node_service_capability::rpc::Type as NodeCap};
use crate::state::VolumeRec;

const PATIENCE: Duration = Duration::from_secs(5);

fn path_arg(field: &str, v: &str) -> Result<PathBuf, Status> {
    required(field, v).map(PathBuf::from)
}

impl Driver {
    fn volume(&self, id: &str) -> Result<VolumeRec, Status> {
        self.state()
            .volumes
            .get(id)
            .filter(|v| v.ready)
            .cloned()
            .ok_or_else(|| Status::not_found(format!("volume {id:?}")))
    }

    /// Begins a logged node call on a volume (its class parameters drive the latency).
    async fn begin_node(&self, op: &'static str, id: &str, path: &Path) -> Call {
        let params = self
            .state()
            .volumes
            .get(id)
            .map(|v| v.params.clone())
            .unwrap_or_default();
        let mut call = self.begin(op, &params).await;
        call.rec.volume = id.to_owned();
        call.rec.node.clone_from(&self.config().node_id);
        call.rec.path = path.display().to_string();
        call
    }

    fn device(
        &self,
        v: &VolumeRec,
        ctx: &std::collections::HashMap<String, String>,
    ) -> Option<String> {
        v.loop_dev
            .clone()
            .or_else(|| ctx.get("devicePath").cloned())
    }

    async fn stage_inner(
        &self,
        call: &mut Call,
        req: &pb::NodeStageVolumeRequest,
        staging: PathBuf,
        access: Access,
    ) -> Result<(), Status> {
        call.injected_failure()?;
        let v = self.volume(&req.volume_id)?;
        if let Some(e) = access.mismatch(&v) {
            return Err(e);
        }
        let (block, fs) = (access.block, v.fs);
        if v.staged.contains(&staging) {
            call.detail("already-staged");
            return Ok(());
        }
        if self.loop_mode() && !block {
            let dev = self.device(&v, &req.publish_context).ok_or_else(|| {
                Status::failed_precondition("volume is not published (no loop device)")
            })?;
            let st = staging.clone();
            blocking(move || {
                if !storage::is_mounted(&st) {
                    storage::mount(&dev, &st, fs.mount_args())?;
                }
                Ok(())
            })
            .await?;
            call.detail("mount");
        }
        self.update(|s| {
            if let Some(v) = s.volumes.get_mut(&req.volume_id) {
                v.staged.insert(staging);
            }
        })
    }

    async fn unmount_inner(
        &self,
        call: &mut Call,
        id: &str,
        path: PathBuf,
        target: bool,
    ) -> Result<(), Status> {
        call.injected_failure()?;
        self.volume(id)?;
        let p = path.clone();
        let unmounted = blocking(move || {
            let was = storage::is_mounted(&p);
            if was {
                storage::unmount(&p, PATIENCE)?;
            }
            if target {
                // The target path is the driver's to create and to remove.
                match fs_err::metadata(&p) {
                    Ok(m) if m.is_dir() => fs_err::remove_dir(&p)?,
                    Ok(_) => fs_err::remove_file(&p)?,
                    Err(_) => {}
                }
            }
            Ok(was)
        })
        .await?;
        if unmounted {
            call.detail("umount");
        }
        self.update(|s| {
            if let Some(v) = s.volumes.get_mut(id) {
                if target {
                    v.targets.remove(&path);
                } else {
                    v.staged.remove(&path);
                }
            }
        })
    }

    async fn publish_node_inner(
        &self,
        call: &mut Call,
        req: &pb::NodePublishVolumeRequest,
        staging: PathBuf,
        target: PathBuf,
        access: Access,
    ) -> Result<(), Status> {
        call.injected_failure()?;
        let v = self.volume(&req.volume_id)?;
        if let Some(e) = access.mismatch(&v) {
            return Err(e);
        }
        let block = access.block;
        if v.targets.contains(&target) {
            call.detail("already-published");
            return Ok(());
        }
        if !block && !v.staged.contains(&staging) {
            return Err(Status::failed_precondition(format!(
                "volume is not staged at {}",
                staging.display()
            )));
        }
        let dev = self.device(&v, &req.publish_context);
        let (loop_mode, ro) = (self.loop_mode(), req.readonly);
        let t = target.clone();
        blocking(move || {
            if !loop_mode {
                fs_err::create_dir_all(&t)?;
                return Ok(());
            }
            if storage::is_mounted(&t) {
                return Ok(());
            }
            let opts: &[&str] = if ro { &["-o", "bind,ro"] } else { &["--bind"] };
            if block {
                let dev = dev.ok_or_else(|| {
                    std::io::Error::other("volume is not published (no loop device)")
                })?;
                if !t.exists() {
                    fs_err::File::create(&t)?;
                }
                storage::mount(&dev, &t, opts)
            } else {
                let s = storage::path_str(&staging)?.to_owned();
                storage::mount(&s, &t, opts)
            }
        })
        .await?;
        call.detail("bind-mount");
        self.update(|s| {
            if let Some(v) = s.volumes.get_mut(&req.volume_id) {
                v.targets.insert(target);
            }
        })
    }

    async fn node_expand_inner(
        &self,
        call: &mut Call,
        id: &str,
        path: &Path,
    ) -> Result<i64, Status> {
        call.injected_failure()?;
        let v = self.volume(id)?;
        if !path.exists() {
            return Err(Status::not_found(format!("volume_path {}", path.display())));
        }
        if self.loop_mode() && !v.block {
            let dev = v
                .loop_dev
                .clone()
                .ok_or_else(|| Status::failed_precondition("volume is not published"))?;
            let mounts = self.fs_mounts(&v);
            let (fs, scratch) = (v.fs, storage::scratch_of(&v.image));
            let kind =
                blocking(move || storage::grow_fs_mounted_as(&dev, &mounts, fs, &scratch)).await?;
            call.detail(fs.grow_command());
            if kind == GrowKind::Remount {
                call.detail("remount");
            }
        }
        Ok(i64::try_from(v.capacity).unwrap_or(i64::MAX))
    }
}

#[tonic::async_trait]
impl Node for Driver {
    async fn node_stage_volume(
        &self,
        request: Request<pb::NodeStageVolumeRequest>,
    ) -> Result<Response<pb::NodeStageVolumeResponse>, Status> {
        let req = request.into_inner();
        let id = required("volume_id", &req.volume_id)?;
        let staging = path_arg("staging_target_path", &req.staging_target_path)?;
        let (_, access) = one_cap(req.volume_capability.as_ref())?;
        let _busy = self.busy(&[id])?;
        let mut call = self.begin_node("NodeStageVolume", id, &staging).await;
        let r = self.stage_inner(&mut call, &req, staging, access).await;
        self.finish(call, &r);
        r.map(|()| Response::new(pb::NodeStageVolumeResponse {}))
    }

    async fn node_unstage_volume(
        &self,
        request: Request<pb::NodeUnstageVolumeRequest>,
    ) -> Result<Response<pb::NodeUnstageVolumeResponse>, Status> {
        let req = request.into_inner();
        let id = required("volume_id", &req.volume_id)?;
        let staging = path_arg("staging_target_path", &req.staging_target_path)?;
        let _busy = self.busy(&[id])?;
        let mut call = self.begin_node("NodeUnstageVolume", id, &staging).await;
        let r = self.unmount_inner(&mut call, id, staging, false).await;
        self.finish(call, &r);
        r.map(|()| Response::new(pb::NodeUnstageVolumeResponse {}))
    }

    async fn node_publish_volume(
        &self,
        request: Request<pb::NodePublishVolumeRequest>,
    ) -> Result<Response<pb::NodePublishVolumeResponse>, Status> {
        let req = request.into_inner();
        let id = required("volume_id", &req.volume_id)?;
        let staging = path_arg("staging_target_path", &req.staging_target_path)?;
        let target = path_arg("target_path", &req.target_path)?;
        let (_, access) = one_cap(req.volume_capability.as_ref())?;
        let _busy = self.busy(&[id])?;
        let mut call = self.begin_node("NodePublishVolume", id, &target).await;
        let r = self
            .publish_node_inner(&mut call, &req, staging, target, access)
            .await;
        self.finish(call, &r);
        r.map(|()| Response::new(pb::NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<pb::NodeUnpublishVolumeRequest>,
    ) -> Result<Response<pb::NodeUnpublishVolumeResponse>, Status> {
        let req = request.into_inner();
        let id = required("volume_id", &req.volume_id)?;
        let target = path_arg("target_path", &req.target_path)?;
        let _busy = self.busy(&[id])?;
        let mut call = self.begin_node("NodeUnpublishVolume", id, &target).await;
        let r = self.unmount_inner(&mut call, id, target, true).await;
        self.finish(call, &r);
        r.map(|()| Response::new(pb::NodeUnpublishVolumeResponse {}))
    }

    async fn node_get_volume_stats(
        &self,
        request: Request<pb::NodeGetVolumeStatsRequest>,
    ) -> Result<Response<pb::NodeGetVolumeStatsResponse>, Status> {
        let req = request.into_inner();
        let id = required("volume_id", &req.volume_id)?;
        let path = path_arg("volume_path", &req.volume_path)?;
        let v = self.volume(id)?;
        if !path.exists() {
            return Err(Status::not_found(format!("volume_path {}", path.display())));
        }
        let usage = if v.block || !self.loop_mode() {
            // A raw device (or a file-mode volume, which has no file system): its size only.
            vec![pb::VolumeUsage {
                unit: pb::volume_usage::Unit::Bytes.into(),
                total: i64::try_from(v.capacity).unwrap_or(i64::MAX),
                ..Default::default()
            }]
        } else {
            blocking(move || fs_usage(&path)).await?
        };
        Ok(Response::new(pb::NodeGetVolumeStatsResponse {
            usage,
            volume_condition: None,
        }))
    }

    async fn node_expand_volume(
        &self,
        request: Request<pb::NodeExpandVolumeRequest>,
    ) -> Result<Response<pb::NodeExpandVolumeResponse>, Status> {
        let req = request.into_inner();
        let id = required("volume_id", &req.volume_id)?;
        let path = path_arg("volume_path", &req.volume_path)?;
        let _busy = self.busy(&[id])?;
        let mut call = self.begin_node("NodeExpandVolume", id, &path).await;
        let r = self.node_expand_inner(&mut call, id, &path).await;
        self.finish(call, &r);
        r.map(|capacity_bytes| Response::new(pb::NodeExpandVolumeResponse { capacity_bytes }))
    }

    async fn node_get_capabilities(
        &self,
        _request: Request<pb::NodeGetCapabilitiesRequest>,
    ) -> Result<Response<pb::NodeGetCapabilitiesResponse>, Status> {
        let capabilities = [
            NodeCap::StageUnstageVolume,
            NodeCap::ExpandVolume,
            NodeCap::GetVolumeStats,
        ]
        .into_iter()
        .map(|t| pb::NodeServiceCapability {
            r#type: Some(pb::node_service_capability::Type::Rpc(
                pb::node_service_capability::Rpc { r#type: t.into() },
            )),
        })
        .collect();
        Ok(Response::new(pb::NodeGetCapabilitiesResponse {
            capabilities,
        }))
    }

    async fn node_get_info(
        &self,
        _request: Request<pb::NodeGetInfoRequest>,
    ) -> Result<Response<pb::NodeGetInfoResponse>, Status> {
        let cfg = &self.config();
        let mut call = self
            .begin("NodeGetInfo", &std::collections::BTreeMap::new())
            .await;
        call.rec.node = cfg.node_id.clone();
        let r = max_volumes(cfg).map(|max| {
            call.rec.detail = format!("max_volumes_per_node={max}");
            pb::NodeGetInfoResponse {
                node_id: cfg.node_id.clone(),
                max_volumes_per_node: i64::try_from(max).unwrap_or(i64::MAX),
                accessible_topology: cfg.topology.then(|| pb::Topology {
                    segments: [(cfg.topology_key.clone(), cfg.node_id.clone())].into(),
                }),
            }
        });
        self.finish(call, &r);
        r.map(Response::new)
    }
}

/// Bytes and inodes of the file system mounted at `path` (`stat -f`: block size, blocks,
/// free blocks, blocks available to non-root, inodes, free inodes).
fn fs_usage(path: &Path) -> Result<Vec<pb::VolumeUsage>, storage::StorageError> {
    let p = storage::path_str(path)?;
    let out = storage::run("stat", &["-f", "--format=%S %b %f %a %c %d", p])?;
    let n: Vec<i64> = out
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|e| std::io::Error::other(format!("stat -f {p}: {out:?}: {e}")))?;
    let &[bsize, blocks, free, avail, inodes, ifree] = n.as_slice() else {
        return Err(
            std::io::Error::other(format!("stat -f {p}: {out:?}: expected 6 numbers")).into(),
        );
    };
    Ok(vec![
        pb::VolumeUsage {
            unit: pb::volume_usage::Unit::Bytes.into(),
            total: bsize * blocks,
            available: bsize * avail,
            used: bsize * (blocks - free),
        },
        pb::VolumeUsage {
            unit: pb::volume_usage::Unit::Inodes.into(),
            total: inodes,
            available: ifree,
            used: inodes - ifree,
        },
    ])
}

/// The node's volume limit now: `max_volumes_file`'s integer when that file exists, else
/// `max_volumes_per_node`. A file that is not one integer is an error naming it.
pub(crate) fn max_volumes(cfg: &crate::DriverConfig) -> Result<u64, Status> {
    let Some(path) = &cfg.max_volumes_file else {
        return Ok(cfg.max_volumes_per_node);
    };
    match std::fs::read_to_string(path) {
        Ok(text) => text.trim().parse().map_err(|e| {
            Status::internal(format!(
                "{}: the node's volume limit {:?} is not a count: {e}",
                path.display(),
                text.trim()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(cfg.max_volumes_per_node),
        Err(e) => Err(Status::internal(format!("{}: {e}", path.display()))),
    }
}
