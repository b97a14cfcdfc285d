//! The Controller service: volumes, snapshots, publish (loop device), expansion.

use std::collections::BTreeMap;
use std::path::PathBuf;

use local_storage::{self as storage, FsType, GrowKind};
use tonic::{Request, Response, Status};

use crate::pb::controller_server::Controller;
use crate::pb::{self, volume_capability::access_mode::Mode, volume_content_source as vcs};
use crate::snapshot::{id_number, page, snapshot_msg};
use crate::state::{Source, VolumeRec};
use crate::{Call, Driver, blocking, required};

const ALIGN: u64 = 4096;

/// What the capabilities of a request ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Access {
    /// A raw block volume.
    pub block: bool,
    /// The file system named by `fs_type` (`None`: not named; block volumes have none).
    pub fs: Option<FsType>,
}

impl Access {
    /// Why this request does not fit volume `v` (mode or file system), if it does not.
    pub(crate) fn mismatch(&self, v: &VolumeRec) -> Option<Status> {
        if v.block != self.block {
            return Some(Status::invalid_argument(
                "access type differs from the volume's (block vs mount)",
            ));
        }
        match self.fs {
            Some(fs) if !v.block && fs != v.fs => Some(Status::invalid_argument(format!(
                "fs_type {fs} differs from the volume's file system {}",
                v.fs
            ))),
            _ => None,
        }
    }
}

/// Checks volume capabilities: one access type and one file system across them.
pub(crate) fn check_caps(caps: &[pb::VolumeCapability]) -> Result<Access, Status> {
    if caps.is_empty() {
        return Err(Status::invalid_argument("volume_capabilities is required"));
    }
    let mut seen: Option<Access> = None;
    for c in caps {
        let mode = c
            .access_mode
            .as_ref()
            .map(|m| m.mode())
            .ok_or_else(|| Status::invalid_argument("access_mode is required"))?;
        if mode == Mode::Unknown {
            return Err(Status::invalid_argument("access_mode UNKNOWN"));
        }
        let this = match &c.access_type {
            Some(pb::volume_capability::AccessType::Block(_)) => Access {
                block: true,
                fs: None,
            },
            Some(pb::volume_capability::AccessType::Mount(m)) => {
                let fs = if m.fs_type.is_empty() {
                    None
                } else {
                    Some(FsType::parse(&m.fs_type).ok_or_else(|| {
                        Status::invalid_argument(format!(
                            "fs_type {:?} is not supported ({})",
                            m.fs_type,
                            FsType::NAMES
                        ))
                    })?)
                };
                Access { block: false, fs }
            }
            None => return Err(Status::invalid_argument("access_type is required")),
        };
        match seen {
            Some(a) if a.block != this.block => {
                return Err(Status::invalid_argument(
                    "block and mount access types in one request",
                ));
            }
            Some(a) if a.fs.is_some() && this.fs.is_some() && a.fs != this.fs => {
                return Err(Status::invalid_argument(
                    "two file systems (fs_type) in one request",
                ));
            }
            Some(a) => {
                seen = Some(Access {
                    fs: a.fs.or(this.fs),
                    ..a
                });
            }
            None => seen = Some(this),
        }
    }
    Ok(seen.unwrap_or(Access {
        block: false,
        fs: None,
    }))
}

/// The one capability of a publish/stage call, checked; with what it asks for.
pub(crate) fn one_cap(
    c: Option<&pb::VolumeCapability>,
) -> Result<(pb::VolumeCapability, Access), Status> {
    let cap = c
        .cloned()
        .ok_or_else(|| Status::invalid_argument("volume_capability is required"))?;
    let access = check_caps(std::slice::from_ref(&cap))?;
    Ok((cap, access))
}

fn single_node(caps: &pb::VolumeCapability) -> bool {
    matches!(
        caps.access_mode.as_ref().map(|m| m.mode()),
        Some(
            Mode::SingleNodeWriter
                | Mode::SingleNodeReaderOnly
                | Mode::SingleNodeSingleWriter
                | Mode::SingleNodeMultiWriter
        )
    )
}

fn bytes(field: &str, v: i64) -> Result<u64, Status> {
    u64::try_from(v).map_err(|_| Status::invalid_argument(format!("{field} is negative")))
}

pub(crate) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn round_up(v: u64) -> u64 {
    v.div_ceil(ALIGN).saturating_mul(ALIGN)
}

fn params_of(m: &std::collections::HashMap<String, String>) -> BTreeMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// The class's `maxSize` (bytes): the largest capacity it creates or expands to (above it,
/// OUT_OF_RANGE: a backend's size limit, which makes a resize fail for good).
fn max_size(params: &BTreeMap<String, String>) -> Result<Option<u64>, Status> {
    params
        .get("maxSize")
        .map(|v| {
            trace_format::units::parse_bytes(v)
                .map_err(|e| Status::invalid_argument(format!("maxSize: {v:?}: {e}")))
        })
        .transpose()
}

fn check_params(params: &BTreeMap<String, String>) -> Result<bool, Status> {
    crate::latency::validate_params(params).map_err(|e| Status::invalid_argument(e.to_string()))?;
    max_size(params)?;
    match params.get("nodeExpansion").map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(Status::invalid_argument(format!(
            "nodeExpansion: {other:?}: expected true or false"
        ))),
    }
}

fn content_source(s: Option<&Source>) -> Option<pb::VolumeContentSource> {
    s.map(|s| pb::VolumeContentSource {
        r#type: Some(match s {
            Source::Snapshot(id) => vcs::Type::Snapshot(vcs::SnapshotSource {
                snapshot_id: id.clone(),
            }),
            Source::Volume(id) => vcs::Type::Volume(vcs::VolumeSource {
                volume_id: id.clone(),
            }),
        }),
    })
}

pub(crate) fn volume_msg(v: &VolumeRec) -> pb::Volume {
    pb::Volume {
        capacity_bytes: to_i64(v.capacity),
        volume_id: v.id.clone(),
        volume_context: [
            ("image".to_owned(), v.image.display().to_string()),
            (
                "kind".to_owned(),
                if v.block { "block" } else { v.fs.name() }.to_owned(),
            ),
        ]
        .into(),
        content_source: content_source(v.source.as_ref()),
        accessible_topology: if v.topology.is_empty() {
            Vec::new()
        } else {
            vec![pb::Topology {
                segments: v.topology.clone().into_iter().collect(),
            }]
        },
    }
}

impl Driver {
    pub(crate) fn image_path(&self, dir: &str, id: &str) -> PathBuf {
        self.inner.cfg.root.join(dir).join(format!("{id}.img"))
    }

    /// Where a file-system volume is mounted: its staging path first, then its targets.
    pub(crate) fn fs_mounts(&self, v: &VolumeRec) -> Vec<PathBuf> {
        if !self.loop_mode() || v.block {
            return Vec::new();
        }
        v.staged.iter().chain(&v.targets).cloned().collect()
    }

    fn volume_params(&self, id: &str) -> BTreeMap<String, String> {
        self.state()
            .volumes
            .get(id)
            .map(|v| v.params.clone())
            .unwrap_or_default()
    }

    async fn create_volume_inner(
        &self,
        call: &mut Call,
        req: pb::CreateVolumeRequest,
        access: Access,
        params: BTreeMap<String, String>,
        node_expansion: bool,
    ) -> Result<pb::Volume, Status> {
        call.injected_failure()?;
        let block = access.block;
        let (required_b, limit) = match &req.capacity_range {
            Some(r) => (
                bytes("required_bytes", r.required_bytes)?,
                bytes("limit_bytes", r.limit_bytes)?,
            ),
            None => (0, 0),
        };
        if limit > 0 && required_b > limit {
            return Err(Status::out_of_range("required_bytes above limit_bytes"));
        }
        let source = match req
            .volume_content_source
            .as_ref()
            .and_then(|s| s.r#type.as_ref())
        {
            None => None,
            Some(vcs::Type::Snapshot(s)) => Some(Source::Snapshot(s.snapshot_id.clone())),
            Some(vcs::Type::Volume(v)) => Some(Source::Volume(v.volume_id.clone())),
        };
        let src = {
            let st = self.state();
            match &source {
                None => None,
                Some(Source::Snapshot(id)) => {
                    let s = st
                        .snapshots
                        .get(id)
                        .filter(|s| s.ready)
                        .ok_or_else(|| Status::not_found(format!("snapshot {id:?}")))?;
                    Some((s.image.clone(), s.size, s.block, s.fs))
                }
                Some(Source::Volume(id)) => {
                    let v = st
                        .volumes
                        .get(id)
                        .filter(|v| v.ready)
                        .ok_or_else(|| Status::not_found(format!("volume {id:?}")))?;
                    Some((v.image.clone(), v.capacity, v.block, v.fs))
                }
            }
        };
        if let Some((_, _, b, _)) = &src
            && *b != block
        {
            return Err(Status::invalid_argument(
                "the content source's volume mode differs from the requested one",
            ));
        }
        // A restore or clone keeps its source's file system; asking for another is an error
        // (the copy is the source's bytes, there is nothing to reformat).
        let fs = match (&src, access.fs) {
            (Some((_, _, false, sfs)), Some(want)) if *sfs != want => {
                return Err(Status::invalid_argument(format!(
                    "fs_type {want} differs from the content source's file system {sfs}"
                )));
            }
            (Some((_, _, _, sfs)), _) => *sfs,
            (None, want) => want.unwrap_or_default(),
        };
        let src_size = src.as_ref().map_or(0, |s| s.1);
        let base = if required_b > 0 {
            required_b
        } else if src.is_some() {
            src_size
        } else {
            self.inner.cfg.default_size
        };
        let mut size = round_up(base.max(src_size));
        if !block {
            size = size.max(fs.min_bytes());
        }
        if limit > 0 && size > limit {
            return Err(Status::out_of_range(format!(
                "{size} bytes needed (alignment, minimum or source size) but limit_bytes is {limit}"
            )));
        }
        if let Some(max) = max_size(&params)?
            && size > max
        {
            return Err(Status::out_of_range(format!(
                "{size} bytes is above the class's maxSize of {max} bytes"
            )));
        }
        let limits = local_storage::throttle::Limits::parse(&params_of(&req.mutable_parameters))
            .map_err(Status::invalid_argument)?;
        if limits != local_storage::throttle::Limits::default()
            && let Some(why) = self.cannot_throttle()
        {
            return Err(Status::invalid_argument(format!(
                "mutable parameters cannot be applied: {why}"
            )));
        }
        let topology: BTreeMap<String, String> = req
            .accessibility_requirements
            .as_ref()
            .filter(|_| self.inner.cfg.topology)
            .and_then(|t| t.preferred.first().or_else(|| t.requisite.first()))
            .map(|t| t.segments.clone().into_iter().collect())
            .unwrap_or_default();
        // Idempotency: the name is the key.
        let (id, image) = {
            let mut st = self.state();
            match st.volume_by_name(&req.name).cloned() {
                Some(v) if v.ready => {
                    let fits = v.capacity >= required_b && (limit == 0 || v.capacity <= limit);
                    if fits
                        && v.block == block
                        && (block || v.fs == fs)
                        && v.params == params
                        && v.source == source
                    {
                        call.rec.volume.clone_from(&v.id);
                        call.detail("exists");
                        return Ok(volume_msg(&v));
                    }
                    return Err(Status::already_exists(format!(
                        "volume {:?} exists with other capacity, mode, file system, parameters or source",
                        req.name
                    )));
                }
                Some(v) => (v.id, v.image),
                None => {
                    let id = st.new_id("vol");
                    let image = self.image_path("volumes", &id);
                    (id, image)
                }
            }
        };
        call.rec.volume.clone_from(&id);
        let mut rec = VolumeRec {
            id: id.clone(),
            name: req.name.clone(),
            capacity: size,
            block,
            fs,
            image: image.clone(),
            params,
            source,
            topology,
            node_expansion,
            published: BTreeMap::new(),
            loop_dev: None,
            staged: Default::default(),
            targets: Default::default(),
            ready: false,
            limits,
        };
        self.update(|st| st.volumes.insert(id.clone(), rec.clone()))?;
        let detail = blocking(move || {
            let _ = fs_err::remove_file(&image);
            match src {
                None => {
                    storage::create_image(&image, size, (!block).then_some(fs))?;
                    Ok(if block { "allocate" } else { "allocate,mkfs" })
                }
                Some((src_image, _, _, _)) => {
                    Ok(storage::restore(&src_image, &image, size, (!block).then_some(fs))?.phase())
                }
            }
        })
        .await?;
        call.detail(detail);
        rec.ready = true;
        self.update(|st| st.volumes.insert(id.clone(), rec.clone()))?;
        Ok(volume_msg(&rec))
    }

    async fn delete_volume_inner(&self, call: &mut Call, id: &str) -> Result<(), Status> {
        call.injected_failure()?;
        let Some(v) = self.state().volumes.get(id).cloned() else {
            call.detail("absent");
            return Ok(());
        };
        if !v.published.is_empty() || v.loop_dev.is_some() {
            return Err(Status::failed_precondition(format!(
                "volume {id:?} is published to {:?}",
                v.published.keys().collect::<Vec<_>>()
            )));
        }
        let image = v.image.clone();
        blocking(move || match fs_err::remove_file(&image) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        })
        .await?;
        self.update(|st| st.volumes.remove(id))?;
        Ok(())
    }

    async fn publish_inner(
        &self,
        call: &mut Call,
        req: &pb::ControllerPublishVolumeRequest,
        cap: &pb::VolumeCapability,
        access: Access,
    ) -> Result<BTreeMap<String, String>, Status> {
        call.injected_failure()?;
        let cfg = &self.inner.cfg;
        let v = self
            .state()
            .volumes
            .get(&req.volume_id)
            .cloned()
            .ok_or_else(|| Status::not_found(format!("volume {:?}", req.volume_id)))?;
        if req.node_id != cfg.node_id && !cfg.nodes.contains(&req.node_id) {
            return Err(Status::not_found(format!("node {:?}", req.node_id)));
        }
        if let Some(e) = access.mismatch(&v) {
            return Err(e);
        }
        let context = |v: &VolumeRec| {
            let mut c = BTreeMap::from([("image".to_owned(), v.image.display().to_string())]);
            if let Some(d) = &v.loop_dev {
                c.insert("devicePath".to_owned(), d.clone());
            }
            c
        };
        match v.published.get(&req.node_id) {
            Some(ro) if *ro == req.readonly => {
                call.detail("already-published");
                return Ok(context(&v));
            }
            Some(_) => {
                return Err(Status::already_exists(
                    "published to this node with another readonly flag",
                ));
            }
            None => {}
        }
        if !v.published.is_empty() && single_node(cap) {
            return Err(Status::failed_precondition(format!(
                "single-node volume already published to {:?}",
                v.published.keys().next()
            )));
        }
        let mut dev = v.loop_dev.clone();
        if self.loop_mode() && dev.is_none() {
            let image = v.image.clone();
            dev = Some(blocking(move || storage::attach_loop(&image)).await?);
            call.detail("losetup");
        }
        let node = req.node_id.clone();
        let ro = req.readonly;
        let v = self.update(|st| {
            st.volumes.get_mut(&req.volume_id).map(|v| {
                v.loop_dev.clone_from(&dev);
                v.published.insert(node, ro);
                v.clone()
            })
        })?;
        v.as_ref()
            .map(context)
            .ok_or_else(|| Status::not_found(format!("volume {:?}", req.volume_id)))
    }

    async fn unpublish_inner(&self, call: &mut Call, id: &str, node: &str) -> Result<(), Status> {
        call.injected_failure()?;
        let Some(mut v) = self.state().volumes.get(id).cloned() else {
            call.detail("absent");
            return Ok(());
        };
        if node.is_empty() {
            v.published.clear();
        } else if v.published.remove(node).is_none() {
            call.detail("not-published");
            return Ok(());
        }
        if v.published.is_empty() {
            // Node-side leftovers (the CO should have unstaged first) go before the device.
            let mounts: Vec<PathBuf> = v.targets.iter().chain(&v.staged).cloned().collect();
            let dev = v.loop_dev.take();
            let detached = blocking(move || {
                for m in &mounts {
                    if storage::is_mounted(m) {
                        storage::unmount(m, std::time::Duration::from_secs(5))?;
                    }
                }
                if let Some(d) = &dev {
                    storage::detach_loop(d)?;
                }
                Ok(dev.is_some())
            })
            .await?;
            v.targets.clear();
            v.staged.clear();
            if detached {
                call.detail("losetup-d");
            }
        }
        self.update(|st| st.volumes.insert(id.to_owned(), v))?;
        Ok(())
    }

    async fn expand_inner(
        &self,
        call: &mut Call,
        id: &str,
        range: &pb::CapacityRange,
    ) -> Result<pb::ControllerExpandVolumeResponse, Status> {
        call.injected_failure()?;
        let required_b = bytes("required_bytes", range.required_bytes)?;
        let limit = bytes("limit_bytes", range.limit_bytes)?;
        let v = self
            .state()
            .volumes
            .get(id)
            .cloned()
            .ok_or_else(|| Status::not_found(format!("volume {id:?}")))?;
        let node_fs = !v.block && v.node_expansion;
        let new = round_up(required_b);
        if limit > 0 && new.max(v.capacity) > limit {
            return Err(Status::out_of_range(format!(
                "capacity {} above limit_bytes {limit}",
                new.max(v.capacity)
            )));
        }
        if let Some(max) = max_size(&v.params)?
            && new > max
        {
            return Err(Status::out_of_range(format!(
                "capacity {new} bytes is above the class's maxSize of {max} bytes"
            )));
        }
        if new <= v.capacity {
            call.detail("no-op");
            return Ok(pb::ControllerExpandVolumeResponse {
                capacity_bytes: to_i64(v.capacity),
                node_expansion_required: node_fs,
            });
        }
        let (image, dev, block, fs) = (v.image.clone(), v.loop_dev.clone(), v.block, v.fs);
        let mounts = self.fs_mounts(&v);
        let detail = blocking(move || {
            let mut d = vec!["grow-file"];
            storage::grow_file(&image, new)?;
            if let Some(dev) = &dev {
                storage::refresh_loop(dev)?;
                d.push("losetup-c");
            }
            if !block && !node_fs {
                let scratch = storage::scratch_of(&image);
                match &dev {
                    Some(dev) => {
                        if storage::grow_fs_mounted_as(dev, &mounts, fs, &scratch)?
                            == GrowKind::Remount
                        {
                            d.push("remount");
                        }
                    }
                    None => storage::grow_offline_as(&image, fs, &scratch)?,
                }
                d.push(fs.grow_command());
            }
            Ok(d.join(","))
        })
        .await?;
        call.detail(detail);
        self.update(|st| {
            if let Some(v) = st.volumes.get_mut(id) {
                v.capacity = new;
            }
        })?;
        Ok(pb::ControllerExpandVolumeResponse {
            capacity_bytes: to_i64(new),
            node_expansion_required: node_fs,
        })
    }
}

impl Driver {
    async fn modify_inner(
        &self,
        call: &mut Call,
        id: &str,
        params: &BTreeMap<String, String>,
    ) -> Result<pb::ControllerModifyVolumeResponse, Status> {
        call.injected_failure()?;
        // INVALID_ARGUMENT before anything changes: the resizer marks the claim Infeasible.
        let next =
            local_storage::throttle::Limits::parse(params).map_err(Status::invalid_argument)?;
        if let Some(why) = self.cannot_throttle() {
            return Err(Status::invalid_argument(format!(
                "mutable parameters cannot be applied: {why}"
            )));
        }
        let v = self.update(|st| {
            st.volumes.get_mut(id).map(|v| {
                v.limits = v.limits.then(next);
                v.clone()
            })
        })?;
        let v = v.ok_or_else(|| Status::not_found(format!("volume {id:?}")))?;
        // Written to every container that uses it now, before the call returns.
        let d = self.clone();
        let written = blocking(move || {
            d.throttle_volume(&v)
                .map_err(|e| storage::StorageError::Io(std::io::Error::other(e)))
        })
        .await?;
        call.detail(format!("throttle,{written}-cgroups"));
        Ok(pb::ControllerModifyVolumeResponse {})
    }
}

fn rpc_cap(t: pb::controller_service_capability::rpc::Type) -> pb::ControllerServiceCapability {
    pb::ControllerServiceCapability {
        r#type: Some(pb::controller_service_capability::Type::Rpc(
            pb::controller_service_capability::Rpc { r#type: t.into() },
        )),
    }
}

#[tonic::async_trait]
impl Controller for Driver {
    async fn create_volume(
        &self,
        request: Request<pb::CreateVolumeRequest>,
    ) -> Result<Response<pb::CreateVolumeResponse>, Status> {
        let req = request.into_inner();
        required("name", &req.name)?;
        let access = check_caps(&req.volume_capabilities)?;
        let params = params_of(&req.parameters);
        let node_expansion = check_params(&params)?;
        let _busy = self.busy(&[&format!("name:{}", req.name)])?;
        let mut call = self.begin("CreateVolume", &params).await;
        call.rec.volume.clone_from(&req.name);
        let r = self
            .create_volume_inner(&mut call, req, access, params, node_expansion)
            .await;
        self.finish(call, &r);
        r.map(|v| Response::new(pb::CreateVolumeResponse { volume: Some(v) }))
    }

    async fn delete_volume(
        &self,
        request: Request<pb::DeleteVolumeRequest>,
    ) -> Result<Response<pb::DeleteVolumeResponse>, Status> {
        let req = request.into_inner();
        let id = required("volume_id", &req.volume_id)?;
        let _busy = self.busy(&[id])?;
        let mut call = self.begin("DeleteVolume", &self.volume_params(id)).await;
        call.rec.volume = id.to_owned();
        let r = self.delete_volume_inner(&mut call, id).await;
        self.finish(call, &r);
        r.map(|()| Response::new(pb::DeleteVolumeResponse {}))
    }

    async fn controller_publish_volume(
        &self,
        request: Request<pb::ControllerPublishVolumeRequest>,
    ) -> Result<Response<pb::ControllerPublishVolumeResponse>, Status> {
        let req = request.into_inner();
        let id = required("volume_id", &req.volume_id)?;
        required("node_id", &req.node_id)?;
        let (cap, access) = one_cap(req.volume_capability.as_ref())?;
        let _busy = self.busy(&[id])?;
        let mut call = self
            .begin("ControllerPublishVolume", &self.volume_params(id))
            .await;
        call.rec.volume = id.to_owned();
        call.rec.node.clone_from(&req.node_id);
        let r = self.publish_inner(&mut call, &req, &cap, access).await;
        self.finish(call, &r);
        r.map(|c| {
            Response::new(pb::ControllerPublishVolumeResponse {
                publish_context: c.into_iter().collect(),
            })
        })
    }

    async fn controller_unpublish_volume(
        &self,
        request: Request<pb::ControllerUnpublishVolumeRequest>,
    ) -> Result<Response<pb::ControllerUnpublishVolumeResponse>, Status> {
        let req = request.into_inner();
        let id = required("volume_id", &req.volume_id)?;
        let _busy = self.busy(&[id])?;
        let mut call = self
            .begin("ControllerUnpublishVolume", &self.volume_params(id))
            .await;
        call.rec.volume = id.to_owned();
        call.rec.node.clone_from(&req.node_id);
        let r = self.unpublish_inner(&mut call, id, &req.node_id).await;
        self.finish(call, &r);
        r.map(|()| Response::new(pb::ControllerUnpublishVolumeResponse {}))
    }

    async fn validate_volume_capabilities(
        &self,
        request: Request<pb::ValidateVolumeCapabilitiesRequest>,
    ) -> Result<Response<pb::ValidateVolumeCapabilitiesResponse>, Status> {
        let req = request.into_inner();
        let id = required("volume_id", &req.volume_id)?;
        if req.volume_capabilities.is_empty() {
            return Err(Status::invalid_argument("volume_capabilities is required"));
        }
        let v = self
            .state()
            .volumes
            .get(id)
            .cloned()
            .ok_or_else(|| Status::not_found(format!("volume {id:?}")))?;
        let resp = match check_caps(&req.volume_capabilities).map(|a| a.mismatch(&v)) {
            Ok(None) => pb::ValidateVolumeCapabilitiesResponse {
                confirmed: Some(pb::validate_volume_capabilities_response::Confirmed {
                    volume_context: req.volume_context,
                    volume_capabilities: req.volume_capabilities,
                    parameters: req.parameters,
                    mutable_parameters: req.mutable_parameters,
                }),
                message: String::new(),
            },
            Ok(Some(e)) => pb::ValidateVolumeCapabilitiesResponse {
                confirmed: None,
                message: e.message().to_owned(),
            },
            Err(e) => pb::ValidateVolumeCapabilitiesResponse {
                confirmed: None,
                message: e.message().to_owned(),
            },
        };
        Ok(Response::new(resp))
    }

    async fn list_volumes(
        &self,
        request: Request<pb::ListVolumesRequest>,
    ) -> Result<Response<pb::ListVolumesResponse>, Status> {
        let req = request.into_inner();
        let items: Vec<(u64, pb::list_volumes_response::Entry)> = self
            .state()
            .volumes
            .values()
            .filter(|v| v.ready)
            .map(|v| {
                (
                    id_number(&v.id),
                    pb::list_volumes_response::Entry {
                        volume: Some(volume_msg(v)),
                        status: Some(pb::list_volumes_response::VolumeStatus {
                            published_node_ids: v.published.keys().cloned().collect(),
                            volume_condition: None,
                        }),
                    },
                )
            })
            .collect();
        let (entries, next_token) = page(items, req.max_entries, &req.starting_token)?;
        Ok(Response::new(pb::ListVolumesResponse {
            entries,
            next_token,
        }))
    }

    async fn get_capacity(
        &self,
        _request: Request<pb::GetCapacityRequest>,
    ) -> Result<Response<pb::GetCapacityResponse>, Status> {
        Err(Status::unimplemented("GetCapacity is not supported"))
    }

    async fn controller_get_capabilities(
        &self,
        _request: Request<pb::ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<pb::ControllerGetCapabilitiesResponse>, Status> {
        use pb::controller_service_capability::rpc::Type as T;
        let capabilities = [
            T::CreateDeleteVolume,
            T::PublishUnpublishVolume,
            T::ListVolumes,
            T::ListVolumesPublishedNodes,
            T::CreateDeleteSnapshot,
            T::ListSnapshots,
            T::CloneVolume,
            T::PublishReadonly,
            T::ExpandVolume,
            T::ModifyVolume,
        ]
        .into_iter()
        .map(rpc_cap)
        .collect();
        Ok(Response::new(pb::ControllerGetCapabilitiesResponse {
            capabilities,
        }))
    }

    async fn create_snapshot(
        &self,
        request: Request<pb::CreateSnapshotRequest>,
    ) -> Result<Response<pb::CreateSnapshotResponse>, Status> {
        let req = request.into_inner();
        required("name", &req.name)?;
        let vol = required("source_volume_id", &req.source_volume_id)?;
        let params = params_of(&req.parameters);
        crate::latency::validate_params(&params)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let _busy = self.busy(&[&format!("snapshot:{}", req.name), vol])?;
        let mut call = self.begin("CreateSnapshot", &params).await;
        call.rec.volume = vol.to_owned();
        call.rec.snapshot.clone_from(&req.name);
        let r = self.create_snapshot_inner(&mut call, &req, params).await;
        self.finish(call, &r);
        r.map(|s| Response::new(pb::CreateSnapshotResponse { snapshot: Some(s) }))
    }

    async fn delete_snapshot(
        &self,
        request: Request<pb::DeleteSnapshotRequest>,
    ) -> Result<Response<pb::DeleteSnapshotResponse>, Status> {
        let req = request.into_inner();
        let id = required("snapshot_id", &req.snapshot_id)?;
        let _busy = self.busy(&[id])?;
        let params = self
            .state()
            .snapshots
            .get(id)
            .map(|s| s.params.clone())
            .unwrap_or_default();
        let mut call = self.begin("DeleteSnapshot", &params).await;
        call.rec.snapshot = id.to_owned();
        let r = self.delete_snapshot_inner(&mut call, id).await;
        self.finish(call, &r);
        r.map(|()| Response::new(pb::DeleteSnapshotResponse {}))
    }

    async fn list_snapshots(
        &self,
        request: Request<pb::ListSnapshotsRequest>,
    ) -> Result<Response<pb::ListSnapshotsResponse>, Status> {
        let req = request.into_inner();
        let items: Vec<(u64, pb::list_snapshots_response::Entry)> = self
            .state()
            .snapshots
            .values()
            .filter(|s| s.ready)
            .filter(|s| req.snapshot_id.is_empty() || s.id == req.snapshot_id)
            .filter(|s| req.source_volume_id.is_empty() || s.source_volume == req.source_volume_id)
            .map(|s| {
                (
                    id_number(&s.id),
                    pb::list_snapshots_response::Entry {
                        snapshot: Some(snapshot_msg(s)),
                    },
                )
            })
            .collect();
        let (entries, next_token) = page(items, req.max_entries, &req.starting_token)?;
        Ok(Response::new(pb::ListSnapshotsResponse {
            entries,
            next_token,
        }))
    }

    async fn controller_expand_volume(
        &self,
        request: Request<pb::ControllerExpandVolumeRequest>,
    ) -> Result<Response<pb::ControllerExpandVolumeResponse>, Status> {
        let req = request.into_inner();
        let id = required("volume_id", &req.volume_id)?;
        let range = req
            .capacity_range
            .ok_or_else(|| Status::invalid_argument("capacity_range is required"))?;
        let _busy = self.busy(&[id])?;
        let mut call = self
            .begin("ControllerExpandVolume", &self.volume_params(id))
            .await;
        call.rec.volume = id.to_owned();
        let r = self.expand_inner(&mut call, id, &range).await;
        self.finish(call, &r);
        r.map(Response::new)
    }

    async fn controller_modify_volume(
        &self,
        request: Request<pb::ControllerModifyVolumeRequest>,
    ) -> Result<Response<pb::ControllerModifyVolumeResponse>, Status> {
        let req = request.into_inner();
        let id = required("volume_id", &req.volume_id)?;
        let _busy = self.busy(&[id])?;
        let mut call = self
            .begin("ControllerModifyVolume", &self.volume_params(id))
            .await;
        call.rec.volume = id.to_owned();
        let r = self
            .modify_inner(&mut call, id, &params_of(&req.mutable_parameters))
            .await;
        self.finish(call, &r);
        r.map(Response::new)
    }
}
