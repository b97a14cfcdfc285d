//! Consistent copies of mounted volumes: freeze, copy, thaw — one volume, or a group frozen
//! together so the copies share one instant.

use std::path::Path;

use crate::command::{path_str, run};
use crate::error::StorageError;
use crate::image::{CopyKind, copy_image};

/// Freezes a mounted file system (`fsfreeze -f`); returns whether it worked.
pub fn freeze(mount_at: &Path) -> bool {
    path_str(mount_at).is_ok_and(|m| run("fsfreeze", &["-f", m]).is_ok())
}

/// Thaws a frozen file system (`fsfreeze -u`).
pub fn thaw(mount_at: &Path) -> Result<(), StorageError> {
    run("fsfreeze", &["-u", path_str(mount_at)?]).map(drop)
}

/// A consistent copy of a volume's image: freezes `mounted` (if any) around the copy.
pub fn snapshot_copy(
    image: &Path,
    dst: &Path,
    mounted: Option<&Path>,
) -> Result<(CopyKind, bool), StorageError> {
    let frozen = mounted.is_some_and(freeze);
    let copied = copy_image(image, dst);
    if frozen && let Some(m) = mounted {
        thaw(m)?;
    }
    Ok((copied?, frozen))
}

/// One member of a group snapshot: its image, the copy to make, its mount point if mounted.
pub type Member<'a> = (&'a Path, &'a Path, Option<&'a Path>);

/// A group snapshot's copies: every mounted member frozen first, then each copied, then all
/// thawed, so the copies share one instant (crash-consistent across the members). `step` is
/// told `freeze-all` once every mounted member is frozen and `thaw-all` once all are thawed
/// (not when none was mounted). Returns each copy's kind (in `members` order). Every member
/// is thawed whatever happened; the first error is returned after that.
pub fn group_snapshot_copy(
    members: &[Member<'_>],
    step: &mut dyn FnMut(&'static str),
) -> Result<Vec<CopyKind>, StorageError> {
    group_snapshot_copy_timed(members, step).map(|(kinds, _)| kinds)
}

/// [`group_snapshot_copy`], also returning when each mounted member's freeze returned (its
/// point in time; `None` for a member that was not mounted).
pub fn group_snapshot_copy_timed(
    members: &[Member<'_>],
    step: &mut dyn FnMut(&'static str),
) -> Result<(Vec<CopyKind>, Vec<Option<std::time::Instant>>), StorageError> {
    let mut at = Vec::with_capacity(members.len());
    let frozen: Vec<bool> = members
        .iter()
        .map(|(_, _, m)| {
            let f = m.is_some_and(freeze);
            at.push(f.then(std::time::Instant::now));
            f
        })
        .collect();
    let any = frozen.iter().any(|f| *f);
    if any {
        step("freeze-all");
    }
    let copies: Vec<Result<CopyKind, StorageError>> = members
        .iter()
        .map(|(src, dst, _)| copy_image(src, dst))
        .collect();
    let mut thawed = Ok(());
    for ((_, _, m), f) in members.iter().zip(&frozen) {
        if *f && let Some(m) = m {
            let r = thaw(m);
            if thawed.is_ok() {
                thawed = r;
            }
        }
    }
    if any {
        step("thaw-all");
    }
    let kinds = copies.into_iter().collect::<Result<Vec<_>, _>>()?;
    thawed?;
    Ok((kinds, at))
}
