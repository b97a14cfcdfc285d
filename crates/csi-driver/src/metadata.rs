//! The CSI SnapshotMetadata service (changed-block tracking, KEP-3314): GetMetadataAllocated and
//! GetMetadataDelta over the driver's snapshot images, from the same code as the `local`
//! provider's `snapshot_allocated`/`snapshot_delta` ([`storage::cbt`]): the data extents of an
//! image, and the blocks whose content differs between two. Nothing is recorded at write or
//! snapshot time, so the answer cannot disagree with the data.
//!
//! Ranges are 4 KiB-aligned extents (`VARIABLE_LENGTH`), found on the blocking pool and sent
//! as they are found in responses of at most `max_results` ranges ([`DEFAULT_BATCH`] when 0),
//! so the first response leaves before the whole image is read; a client that goes away stops
//! the reading. `starting_offset` is rounded down to a block. Each call gets one line in
//! `ops.jsonl` (ranges, bytes, bytes read) when its stream ends, and the class parameters'
//! injected latency like every other call.

use std::ops::ControlFlow;

use local_storage::{self as storage, cbt::CbtError, cbt::Listed, cbt::Range};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::driver::{Call, Driver, required};
use crate::pb::{self, snapshot_metadata_server::SnapshotMetadata};
use crate::state::SnapRec;
use crate::to_i64;

/// Ranges per response when the client leaves `max_results` at 0.
pub const DEFAULT_BATCH: usize = 1024;

/// Responses queued ahead of a slow client.
const QUEUE: usize = 4;

fn offset(field: &str, v: i64) -> Result<u64, Status> {
    u64::try_from(v).map_err(|_| Status::invalid_argument(format!("{field} is negative: {v}")))
}

fn batch(v: i32) -> Result<usize, Status> {
    match usize::try_from(v) {
        Ok(0) => Ok(DEFAULT_BATCH),
        Ok(n) => Ok(n),
        Err(_) => Err(Status::invalid_argument(format!(
            "max_results is negative: {v}"
        ))),
    }
}

fn out_of_range(start: u64, s: &SnapRec) -> Result<(), Status> {
    if start > s.size {
        return Err(Status::out_of_range(format!(
            "starting_offset {start} is past the end of snapshot {:?} ({} bytes)",
            s.id, s.size
        )));
    }
    Ok(())
}

impl Driver {
    fn ready_snapshot(&self, field: &str, id: &str) -> Result<SnapRec, Status> {
        required(field, id)?;
        self.state()
            .snapshots
            .get(id)
            .filter(|s| s.ready)
            .cloned()
            .ok_or_else(|| Status::not_found(format!("snapshot {id:?}")))
    }

    /// Streams what `list` finds in batches of `max`, each wrapped by `wrap`, and logs the
    /// call when the stream ends.
    fn stream<R: Send + 'static>(
        &self,
        mut call: Call,
        max: usize,
        list: impl FnOnce(&mut dyn FnMut(Range) -> ControlFlow<()>) -> Result<Listed, CbtError>
        + Send
        + 'static,
        wrap: impl Fn(Vec<pb::BlockMetadata>) -> R + Send + 'static,
    ) -> ReceiverStream<Result<R, Status>> {
        let (tx, rx) = tokio::sync::mpsc::channel(QUEUE);
        let driver = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut batch = Vec::with_capacity(max.min(DEFAULT_BATCH));
            let mut gone = false;
            let listed = list(&mut |r| {
                batch.push(pb::BlockMetadata {
                    byte_offset: to_i64(r.offset),
                    size_bytes: to_i64(r.len),
                });
                if batch.len() >= max
                    && tx
                        .blocking_send(Ok(wrap(std::mem::take(&mut batch))))
                        .is_err()
                {
                    gone = true;
                    return ControlFlow::Break(());
                }
                ControlFlow::Continue(())
            });
            let result = match listed {
                Ok(l) => {
                    call.detail(format!(
                        "{} ranges, {} bytes, {} bytes read",
                        l.ranges, l.bytes, l.read_bytes
                    ));
                    if !batch.is_empty() && tx.blocking_send(Ok(wrap(batch))).is_err() {
                        gone = true;
                    }
                    if gone {
                        Err(Status::cancelled("the client went away"))
                    } else {
                        Ok(())
                    }
                }
                Err(e) => {
                    let s = match e {
                        CbtError::BlockSize(_) => Status::invalid_argument(e.to_string()),
                        _ => Status::internal(e.to_string()),
                    };
                    let _ = tx.blocking_send(Err(s.clone()));
                    Err(s)
                }
            };
            driver.finish(call, &result);
        });
        ReceiverStream::new(rx)
    }
}

#[tonic::async_trait]
impl SnapshotMetadata for Driver {
    type GetMetadataAllocatedStream =
        ReceiverStream<Result<pb::GetMetadataAllocatedResponse, Status>>;
    type GetMetadataDeltaStream = ReceiverStream<Result<pb::GetMetadataDeltaResponse, Status>>;

    async fn get_metadata_allocated(
        &self,
        request: Request<pb::GetMetadataAllocatedRequest>,
    ) -> Result<Response<Self::GetMetadataAllocatedStream>, Status> {
        let req = request.into_inner();
        let checked = (|| {
            let s = self.ready_snapshot("snapshot_id", &req.snapshot_id)?;
            let start = offset("starting_offset", req.starting_offset)?;
            out_of_range(start, &s)?;
            Ok((s, start, batch(req.max_results)?))
        })();
        let params = checked
            .as_ref()
            .map(|(s, ..)| s.params.clone())
            .unwrap_or_default();
        let mut call = self.begin("GetMetadataAllocated", &params).await;
        call.rec.snapshot.clone_from(&req.snapshot_id);
        let (s, start, max) = match checked.and_then(|c| call.injected_failure().map(|()| c)) {
            Ok(c) => c,
            Err(e) => {
                let r: Result<(), Status> = Err(e.clone());
                self.finish(call, &r);
                return Err(e);
            }
        };
        let capacity = to_i64(s.size);
        let image = s.image;
        Ok(Response::new(self.stream(
            call,
            max,
            move |f| storage::cbt::allocated(&image, storage::cbt::DEFAULT_BLOCK, start, f),
            move |block_metadata| pb::GetMetadataAllocatedResponse {
                block_metadata_type: pb::BlockMetadataType::VariableLength.into(),
                volume_capacity_bytes: capacity,
                block_metadata,
            },
        )))
    }

    async fn get_metadata_delta(
        &self,
        request: Request<pb::GetMetadataDeltaRequest>,
    ) -> Result<Response<Self::GetMetadataDeltaStream>, Status> {
        let req = request.into_inner();
        let checked = (|| {
            let base = self.ready_snapshot("base_snapshot_id", &req.base_snapshot_id)?;
            let target = self.ready_snapshot("target_snapshot_id", &req.target_snapshot_id)?;
            if base.source_volume != target.source_volume {
                return Err(Status::invalid_argument(format!(
                    "snapshots {:?} (of volume {:?}) and {:?} (of volume {:?}) are not of one \
                     volume",
                    base.id, base.source_volume, target.id, target.source_volume
                )));
            }
            if base.created_ns > target.created_ns {
                return Err(Status::invalid_argument(format!(
                    "base snapshot {:?} was created after target {:?}",
                    base.id, target.id
                )));
            }
            let start = offset("starting_offset", req.starting_offset)?;
            out_of_range(start, &target)?;
            Ok((base, target, start, batch(req.max_results)?))
        })();
        let params = checked
            .as_ref()
            .map(|(_, t, ..)| t.params.clone())
            .unwrap_or_default();
        let mut call = self.begin("GetMetadataDelta", &params).await;
        call.rec.snapshot.clone_from(&req.target_snapshot_id);
        let (base, target, start, max) =
            match checked.and_then(|c| call.injected_failure().map(|()| c)) {
                Ok(c) => c,
                Err(e) => {
                    let r: Result<(), Status> = Err(e.clone());
                    self.finish(call, &r);
                    return Err(e);
                }
            };
        let capacity = to_i64(target.size);
        Ok(Response::new(self.stream(
            call,
            max,
            move |f| {
                storage::cbt::delta(
                    &base.image,
                    &target.image,
                    storage::cbt::DEFAULT_BLOCK,
                    start,
                    f,
                )
            },
            move |block_metadata| pb::GetMetadataDeltaResponse {
                block_metadata_type: pb::BlockMetadataType::VariableLength.into(),
                volume_capacity_bytes: capacity,
                block_metadata,
            },
        )))
    }
}
