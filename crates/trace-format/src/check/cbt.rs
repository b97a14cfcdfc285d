//! Checks of the changed-block tracking ops (`snapshot_allocated`, `snapshot_delta`, version
//! 3): the snapshots they name are alive, a delta's two snapshots are of one volume (the same
//! volume, not a later one of the same name) and in the order they were taken, and a block
//! size, when given, is a power of two of at least 512 bytes (what a block device can list).

use super::{Checker, dangling};
use crate::error::Problem;
use crate::model::{SnapshotAllocated, SnapshotDelta};
use crate::units::Name;

impl Checker {
    pub(super) fn snapshot_allocated(
        &mut self,
        s: &SnapshotAllocated,
        p: &dyn Fn(&str) -> String,
        push: &mut dyn FnMut(String, Problem),
    ) {
        if !self.snapshots.contains_key(&s.snapshot) {
            push(
                p("snapshot_allocated.snapshot"),
                dangling("snapshot", &s.snapshot, &self.gone_snapshots),
            );
        }
        block_size(s.block_size, &p("snapshot_allocated.block_size"), push);
    }

    pub(super) fn snapshot_delta(
        &mut self,
        d: &SnapshotDelta,
        p: &dyn Fn(&str) -> String,
        push: &mut dyn FnMut(String, Problem),
    ) {
        let base = self.snapshots.get(&d.base);
        let target = self.snapshots.get(&d.snapshot);
        if base.is_none() {
            push(
                p("snapshot_delta.base"),
                dangling("snapshot", &d.base, &self.gone_snapshots),
            );
        }
        if target.is_none() {
            push(
                p("snapshot_delta.snapshot"),
                dangling("snapshot", &d.snapshot, &self.gone_snapshots),
            );
        }
        block_size(d.block_size, &p("snapshot_delta.block_size"), push);
        let (Some(base), Some(target)) = (base, target) else {
            return;
        };
        let name = |n: &Name| n.as_str().to_owned();
        if d.base == d.snapshot {
            push(
                p("snapshot_delta.snapshot"),
                Problem::InvalidValue(format!(
                    "the delta of snapshot {:?} with itself: name two snapshots",
                    name(&d.snapshot)
                )),
            );
        } else if base.serial != target.serial {
            let of = if base.volume == target.volume {
                format!(
                    "two volumes named {:?} (it was deleted and made again between them)",
                    name(&base.volume)
                )
            } else {
                format!(
                    "volumes {:?} and {:?}",
                    name(&base.volume),
                    name(&target.volume)
                )
            };
            push(
                p("snapshot_delta.snapshot"),
                Problem::InvalidValue(format!(
                    "snapshots {:?} and {:?} are of {of}; a delta needs two snapshots of one \
                     volume",
                    name(&d.base),
                    name(&d.snapshot)
                )),
            );
        } else if base.index > target.index {
            push(
                p("snapshot_delta.base"),
                Problem::InvalidValue(format!(
                    "base {:?} was taken after snapshot {:?}; the base is the earlier one",
                    name(&d.base),
                    name(&d.snapshot)
                )),
            );
        }
    }
}

fn block_size(bs: Option<u64>, path: &str, push: &mut dyn FnMut(String, Problem)) {
    if let Some(bs) = bs
        && (bs < 512 || !bs.is_power_of_two())
    {
        push(
            path.to_owned(),
            Problem::InvalidValue(format!(
                "block size {bs} is not a power of two of at least 512 bytes"
            )),
        );
    }
}
