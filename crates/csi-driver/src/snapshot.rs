//! Snapshots (CreateSnapshot / DeleteSnapshot bodies) and the pagination of the list calls.

use std::collections::BTreeMap;

use local_storage as storage;
use tonic::Status;

use crate::driver::{Call, Driver, blocking};
use crate::pb;
use crate::state::{SnapRec, now_ns};
use crate::to_i64;

/// A creation time (ns since the Unix epoch) as the wire's timestamp.
pub(crate) fn timestamp(ns: u64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: to_i64(ns / 1_000_000_000),
        nanos: i32::try_from(ns % 1_000_000_000).unwrap_or(0),
    }
}

pub(crate) fn snapshot_msg(s: &SnapRec) -> pb::Snapshot {
    pb::Snapshot {
        size_bytes: to_i64(s.size),
        snapshot_id: s.id.clone(),
        source_volume_id: s.source_volume.clone(),
        creation_time: Some(timestamp(s.created_ns)),
        ready_to_use: s.ready,
        group_snapshot_id: s.group.clone().unwrap_or_default(),
    }
}

/// One page of items ordered by the number in their id; the token is the number to start at.
pub(crate) fn page<T>(
    mut items: Vec<(u64, T)>,
    max_entries: i32,
    token: &str,
) -> Result<(Vec<T>, String), Status> {
    let max = usize::try_from(max_entries)
        .map_err(|_| Status::invalid_argument("max_entries is negative"))?;
    let start: u64 = if token.is_empty() {
        0
    } else {
        token
            .parse()
            .map_err(|_| Status::aborted(format!("starting_token {token:?} is not valid")))?
    };
    items.sort_by_key(|(n, _)| *n);
    items.retain(|(n, _)| *n >= start);
    let next = if max > 0 && items.len() > max {
        items[max].0.to_string()
    } else {
        String::new()
    };
    if max > 0 {
        items.truncate(max);
    }
    Ok((items.into_iter().map(|(_, t)| t).collect(), next))
}

pub(crate) fn id_number(id: &str) -> u64 {
    id.rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

impl Driver {
    pub(crate) async fn create_snapshot_inner(
        &self,
        call: &mut Call,
        req: &pb::CreateSnapshotRequest,
        params: BTreeMap<String, String>,
    ) -> Result<pb::Snapshot, Status> {
        call.injected_failure()?;
        let (id, image) = {
            let mut st = self.state();
            match st.snapshot_by_name(&req.name).cloned() {
                Some(s) if s.source_volume != req.source_volume_id => {
                    return Err(Status::already_exists(format!(
                        "snapshot {:?} exists for volume {:?}",
                        req.name, s.source_volume
                    )));
                }
                Some(s) if s.ready => {
                    call.rec.snapshot.clone_from(&s.id);
                    call.detail("exists");
                    return Ok(snapshot_msg(&s));
                }
                Some(s) => (s.id, s.image),
                None => {
                    let id = st.new_id("snap");
                    let image = self.image_path("snapshots", &id);
                    (id, image)
                }
            }
        };
        call.rec.snapshot.clone_from(&id);
        let v = self
            .state()
            .volumes
            .get(&req.source_volume_id)
            .filter(|v| v.ready)
            .cloned()
            .ok_or_else(|| Status::not_found(format!("volume {:?}", req.source_volume_id)))?;
        let mut rec = SnapRec {
            id: id.clone(),
            name: req.name.clone(),
            source_volume: v.id.clone(),
            size: v.capacity,
            block: v.block,
            fs: v.fs,
            image: image.clone(),
            params,
            created_ns: now_ns(),
            copy: String::new(),
            ready: false,
            group: None,
        };
        self.update(|st| st.snapshots.insert(id.clone(), rec.clone()))?;
        let mounted = if self.loop_mode() && !v.block {
            v.staged.iter().next().cloned()
        } else {
            None
        };
        let (kind, frozen) = blocking(move || {
            let _ = fs_err::remove_file(&image);
            storage::snapshot_copy(&v.image, &image, mounted.as_deref())
        })
        .await?;
        if frozen {
            call.detail("freeze");
        }
        call.detail(kind.phase());
        rec.copy = kind.phase().to_owned();
        rec.ready = true;
        self.update(|st| st.snapshots.insert(id.clone(), rec.clone()))?;
        Ok(snapshot_msg(&rec))
    }

    pub(crate) async fn delete_snapshot_inner(
        &self,
        call: &mut Call,
        id: &str,
    ) -> Result<(), Status> {
        call.injected_failure()?;
        let Some(s) = self.state().snapshots.get(id).cloned() else {
            call.detail("absent");
            return Ok(());
        };
        if let Some(g) = &s.group {
            // The spec: a CO deletes a group's members with the group.
            return Err(Status::invalid_argument(format!(
                "snapshot {id:?} is a member of group snapshot {g:?}: delete the group"
            )));
        }
        blocking(move || match fs_err::remove_file(&s.image) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        })
        .await?;
        self.update(|st| st.snapshots.remove(id))?;
        Ok(())
    }
}
