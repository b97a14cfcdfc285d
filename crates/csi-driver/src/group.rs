//! The GroupController service: volume group snapshots (CSI v1.13, GA), what
//! external-snapshotter's VolumeGroupSnapshot becomes on the driver.
//!
//! CreateVolumeGroupSnapshot takes every source volume at one instant: each mounted member's
//! file system is frozen, then each image copied (reflink where the file system has it), then
//! all thawed ([`local_storage::group_snapshot_copy`]), so the group is
//! crash-consistent across its members (write-order consistent, as the spec asks). The
//! members are ordinary snapshots of the state (`snap-N`, restorable by CreateVolume and
//! listed by ListSnapshots, which the sidecar polls for members) carrying the group's id; the
//! call returns them ready. Idempotent by name: the same name with other source volumes or
//! parameters is ALREADY_EXISTS. DeleteVolumeGroupSnapshot removes the group and every member
//! (INVALID_ARGUMENT when `snapshot_ids` does not match them; OK when the group is gone);
//! GetVolumeGroupSnapshot answers NOT_FOUND for a group that is gone. DeleteSnapshot of a
//! member is refused with INVALID_ARGUMENT, as the spec allows: members go with their group.

use std::collections::BTreeMap;
use std::path::PathBuf;

use local_storage as storage;
use tonic::{Request, Response, Status};

use crate::driver::{Call, Driver, blocking, required};
use crate::pb;
use crate::pb::group_controller_server::GroupController;
use crate::snapshot::{snapshot_msg, timestamp};
use crate::state::{GroupRec, SnapRec, now_ns};

fn group_msg(g: &GroupRec, snaps: &BTreeMap<String, SnapRec>) -> pb::VolumeGroupSnapshot {
    pb::VolumeGroupSnapshot {
        group_snapshot_id: g.id.clone(),
        snapshots: g
            .snapshots
            .iter()
            .filter_map(|id| snaps.get(id))
            .map(snapshot_msg)
            .collect(),
        creation_time: Some(timestamp(g.created_ns)),
        ready_to_use: g.ready,
    }
}

impl Driver {
    async fn create_group_inner(
        &self,
        call: &mut Call,
        req: &pb::CreateVolumeGroupSnapshotRequest,
        params: BTreeMap<String, String>,
    ) -> Result<pb::VolumeGroupSnapshot, Status> {
        call.injected_failure()?;
        let mut sources = req.source_volume_ids.clone();
        sources.sort();
        sources.dedup();
        if sources.len() != req.source_volume_ids.len() {
            return Err(Status::invalid_argument(
                "source_volume_ids lists a volume twice",
            ));
        }
        // Idempotency: the name is the key.
        let existing = self
            .state()
            .groups
            .values()
            .find(|g| g.name == req.name)
            .cloned();
        if let Some(g) = &existing {
            if g.source_volumes != req.source_volume_ids || g.params != params {
                return Err(Status::already_exists(format!(
                    "group snapshot {:?} exists with other source volumes or parameters",
                    req.name
                )));
            }
            if g.ready {
                call.detail("exists");
                return Ok(group_msg(g, &self.state().snapshots));
            }
        }
        let vols = {
            let st = self.state();
            req.source_volume_ids
                .iter()
                .map(|id| {
                    st.volumes
                        .get(id)
                        .filter(|v| v.ready)
                        .cloned()
                        .ok_or_else(|| Status::not_found(format!("volume {id:?}")))
                })
                .collect::<Result<Vec<_>, _>>()?
        };
        // A retry after a crash redoes the copies into the same records.
        let (gid, snap_ids) = {
            let mut st = self.state();
            match &existing {
                Some(g) => (g.id.clone(), g.snapshots.clone()),
                None => {
                    let gid = st.new_id("group");
                    let ids = vols.iter().map(|_| st.new_id("snap")).collect();
                    (gid, ids)
                }
            }
        };
        let created_ns = now_ns();
        let mut recs: Vec<SnapRec> = vols
            .iter()
            .zip(&snap_ids)
            .map(|(v, id)| SnapRec {
                id: id.clone(),
                name: format!("{}/{}", req.name, v.id),
                source_volume: v.id.clone(),
                size: v.capacity,
                block: v.block,
                fs: v.fs,
                image: self.image_path("snapshots", id),
                params: params.clone(),
                created_ns,
                copy: String::new(),
                ready: false,
                group: Some(gid.clone()),
            })
            .collect();
        let mut group = GroupRec {
            id: gid.clone(),
            name: req.name.clone(),
            source_volumes: req.source_volume_ids.clone(),
            snapshots: snap_ids,
            params,
            created_ns,
            ready: false,
        };
        self.update(|st| {
            for r in &recs {
                st.snapshots.insert(r.id.clone(), r.clone());
            }
            st.groups.insert(gid.clone(), group.clone());
        })?;
        let loop_mode = self.loop_mode();
        let members: Vec<(PathBuf, PathBuf, Option<PathBuf>)> = vols
            .iter()
            .zip(&recs)
            .map(|(v, r)| {
                let mounted = if loop_mode && !v.block {
                    v.staged.iter().next().cloned()
                } else {
                    None
                };
                (v.image.clone(), r.image.clone(), mounted)
            })
            .collect();
        let (kinds, steps) = blocking(move || {
            for (_, dst, _) in &members {
                let _ = fs_err::remove_file(dst);
            }
            let m: Vec<storage::Member<'_>> = members
                .iter()
                .map(|(s, d, mnt)| (s.as_path(), d.as_path(), mnt.as_deref()))
                .collect();
            let mut steps = Vec::new();
            let kinds = storage::group_snapshot_copy(&m, &mut |s| steps.push(s))?;
            Ok((kinds, steps))
        })
        .await?;
        for s in steps {
            call.detail(s);
        }
        for (r, k) in recs.iter_mut().zip(&kinds) {
            r.copy = k.phase().to_owned();
            r.ready = true;
        }
        call.detail(if kinds.iter().all(|k| *k == storage::CopyKind::Reflink) {
            "copy-reflink"
        } else {
            "copy-full"
        });
        group.ready = true;
        self.update(|st| {
            for r in &recs {
                st.snapshots.insert(r.id.clone(), r.clone());
            }
            st.groups.insert(gid.clone(), group.clone());
        })?;
        Ok(group_msg(&group, &self.state().snapshots))
    }

    async fn delete_group_inner(
        &self,
        call: &mut Call,
        req: &pb::DeleteVolumeGroupSnapshotRequest,
    ) -> Result<(), Status> {
        call.injected_failure()?;
        let Some(g) = self.state().groups.get(&req.group_snapshot_id).cloned() else {
            call.detail("absent");
            return Ok(());
        };
        let mut want = req.snapshot_ids.clone();
        want.sort();
        let mut have = g.snapshots.clone();
        have.sort();
        if !want.is_empty() && want != have {
            return Err(Status::invalid_argument(format!(
                "snapshot_ids {want:?} are not the members {have:?} of group snapshot {:?}",
                g.id
            )));
        }
        let images: Vec<PathBuf> = {
            let st = self.state();
            g.snapshots
                .iter()
                .filter_map(|id| st.snapshots.get(id).map(|s| s.image.clone()))
                .collect()
        };
        blocking(move || {
            for img in &images {
                match fs_err::remove_file(img) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                    _ => {}
                }
            }
            Ok(())
        })
        .await?;
        self.update(|st| {
            for id in &g.snapshots {
                st.snapshots.remove(id);
            }
            st.groups.remove(&g.id);
        })?;
        Ok(())
    }
}

#[tonic::async_trait]
impl GroupController for Driver {
    async fn group_controller_get_capabilities(
        &self,
        _request: Request<pb::GroupControllerGetCapabilitiesRequest>,
    ) -> Result<Response<pb::GroupControllerGetCapabilitiesResponse>, Status> {
        use pb::group_controller_service_capability::rpc::Type as T;
        use pb::group_controller_service_capability::{Rpc, Type};
        Ok(Response::new(pb::GroupControllerGetCapabilitiesResponse {
            capabilities: vec![pb::GroupControllerServiceCapability {
                r#type: Some(Type::Rpc(Rpc {
                    r#type: T::CreateDeleteGetVolumeGroupSnapshot.into(),
                })),
            }],
        }))
    }

    async fn create_volume_group_snapshot(
        &self,
        request: Request<pb::CreateVolumeGroupSnapshotRequest>,
    ) -> Result<Response<pb::CreateVolumeGroupSnapshotResponse>, Status> {
        let req = request.into_inner();
        required("name", &req.name)?;
        if req.source_volume_ids.is_empty() {
            return Err(Status::invalid_argument("source_volume_ids is required"));
        }
        let params: BTreeMap<String, String> = req
            .parameters
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        crate::latency::validate_params(&params)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let mut keys = vec![format!("group:{}", req.name)];
        keys.extend(req.source_volume_ids.iter().cloned());
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let _busy = self.busy(&keys)?;
        let mut call = self.begin("CreateVolumeGroupSnapshot", &params).await;
        call.rec.volume = req.source_volume_ids.join(",");
        let r = self.create_group_inner(&mut call, &req, params).await;
        if let Ok(g) = &r {
            call.rec.snapshot.clone_from(&g.group_snapshot_id);
        }
        self.finish(call, &r);
        r.map(|g| {
            Response::new(pb::CreateVolumeGroupSnapshotResponse {
                group_snapshot: Some(g),
            })
        })
    }

    async fn delete_volume_group_snapshot(
        &self,
        request: Request<pb::DeleteVolumeGroupSnapshotRequest>,
    ) -> Result<Response<pb::DeleteVolumeGroupSnapshotResponse>, Status> {
        let req = request.into_inner();
        let id = required("group_snapshot_id", &req.group_snapshot_id)?.to_owned();
        let _busy = self.busy(&[&id])?;
        let params = self
            .state()
            .groups
            .get(&id)
            .map(|g| g.params.clone())
            .unwrap_or_default();
        let mut call = self.begin("DeleteVolumeGroupSnapshot", &params).await;
        call.rec.snapshot.clone_from(&id);
        let r = self.delete_group_inner(&mut call, &req).await;
        self.finish(call, &r);
        r.map(|()| Response::new(pb::DeleteVolumeGroupSnapshotResponse {}))
    }

    async fn get_volume_group_snapshot(
        &self,
        request: Request<pb::GetVolumeGroupSnapshotRequest>,
    ) -> Result<Response<pb::GetVolumeGroupSnapshotResponse>, Status> {
        let req = request.into_inner();
        let id = required("group_snapshot_id", &req.group_snapshot_id)?;
        let st = self.state();
        let g = st
            .groups
            .get(id)
            .ok_or_else(|| Status::not_found(format!("group snapshot {id:?}")))?;
        Ok(Response::new(pb::GetVolumeGroupSnapshotResponse {
            group_snapshot: Some(group_msg(g, &st.snapshots)),
        }))
    }
}
