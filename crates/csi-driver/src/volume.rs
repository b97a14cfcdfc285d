//! The Controller service's volume work: create (empty, from a snapshot or a clone), delete,
//! publish (a loop device), unpublish, expand (file, loop device, file system) and modify (I/O
//! limits), with the checks of sizes and StorageClass parameters they share. The gRPC surface
//! that calls them is [`crate::controller`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use local_storage::{self as storage, GrowKind};
use tonic::Status;

use crate::access::{Access, single_node};
use crate::driver::{Call, Driver, blocking};
use crate::pb::{self, volume_content_source as vcs};
use crate::state::{Source, VolumeRec};
use crate::to_i64;

const ALIGN: u64 = 4096;

pub(crate) fn bytes(field: &str, v: i64) -> Result<u64, Status> {
    u64::try_from(v).map_err(|_| Status::invalid_argument(format!("{field} is negative")))
}

pub(crate) fn round_up(v: u64) -> u64 {
    v.div_ceil(ALIGN).saturating_mul(ALIGN)
}

pub(crate) fn params_of(m: &std::collections::HashMap<String, String>) -> BTreeMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// The class's `maxSize` (bytes): the largest capacity it creates or expands to (above it,
/// OUT_OF_RANGE: a backend's size limit, which makes a resize fail for good).
pub(crate) fn max_size(params: &BTreeMap<String, String>) -> Result<Option<u64>, Status> {
    params
        .get("maxSize")
        .map(|v| {
            trace_format::units::parse_bytes(v)
                .map_err(|e| Status::invalid_argument(format!("maxSize: {v:?}: {e}")))
        })
        .transpose()
}

pub(crate) fn check_params(params: &BTreeMap<String, String>) -> Result<bool, Status> {
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

pub(crate) fn content_source(s: Option<&Source>) -> Option<pb::VolumeContentSource> {
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
    pub(crate) fn volume_params(&self, id: &str) -> BTreeMap<String, String> {
        self.state()
            .volumes
            .get(id)
            .map(|v| v.params.clone())
            .unwrap_or_default()
    }

    pub(crate) async fn create_volume_inner(
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
            self.config().default_size
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
            .filter(|_| self.config().topology)
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

    pub(crate) async fn delete_volume_inner(
        &self,
        call: &mut Call,
        id: &str,
    ) -> Result<(), Status> {
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

    pub(crate) async fn publish_inner(
        &self,
        call: &mut Call,
        req: &pb::ControllerPublishVolumeRequest,
        cap: &pb::VolumeCapability,
        access: Access,
    ) -> Result<BTreeMap<String, String>, Status> {
        call.injected_failure()?;
        let cfg = &self.config();
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

    pub(crate) async fn unpublish_inner(
        &self,
        call: &mut Call,
        id: &str,
        node: &str,
    ) -> Result<(), Status> {
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

    pub(crate) async fn expand_inner(
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
    pub(crate) async fn modify_inner(
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
