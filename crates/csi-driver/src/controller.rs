//! The Controller service's gRPC surface: each call checked, logged ([`crate::Driver`]'s
//! `begin`/`finish`) and handed to the volume work ([`crate::volume`]) or the snapshot work
//! ([`crate::snapshot`]); capabilities, listings and pagination answered here.

use tonic::{Request, Response, Status};

use crate::access::{check_caps, one_cap};
use crate::driver::{Driver, required};
use crate::pb::{self, controller_server::Controller};
use crate::snapshot::{id_number, page, snapshot_msg};
use crate::volume::{check_params, params_of, volume_msg};

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
