//! Removing what a run left behind, from its ledger: mounts, loop devices, images,
//! directories and cgroups, touching only the run's own.

use std::path::PathBuf;

use local_storage::throttle;
use replay::RunInfo;
use replay::ledger::LedgerEntry;
use replay::provider::CleanupReport;

use crate::sys;

/// How long cleanup retries a busy unmount before it detaches the mount lazily.
pub const UNMOUNT_PATIENCE: std::time::Duration = std::time::Duration::from_secs(15);

/// Unmounts `p`, retrying while it is busy. A killed process's io_uring is torn down by the
/// kernel in the background (cancelling in-flight requests, then dropping its files), so the
/// file system stays busy for a moment after the process is gone; unmounting lazily at once
/// would leave the loop device attached behind it. Lazy unmount is the last resort, and says
/// so.
fn unmount_patiently(p: &std::path::Path) -> Result<(), String> {
    let err = match local_storage::unmount(p, UNMOUNT_PATIENCE) {
        Ok(()) => return Ok(()),
        Err(_) if !sys::is_mounted(p) => return Ok(()),
        Err(e) => e.to_string(),
    };
    match sys::cmd("umount", &["-l", &p.to_string_lossy()]) {
        Ok(_) => Err(format!(
            "still busy after {UNMOUNT_PATIENCE:?} ({err}); detached lazily, its loop device is \
             freed when the last user closes it"
        )),
        Err(e) => Err(format!("{err}; lazy unmount failed too: {}", e.message)),
    }
}

/// Removes the ledger's leftovers, newest first, touching only paths inside the run
/// directory: mounts (unmount), loop devices backed by a ledger image (`losetup -j`), files
/// and directories. Returns what happened; entries removed are released in the ledger.
pub fn cleanup(run: &RunInfo, leftovers: &[LedgerEntry]) -> CleanupReport {
    let mut report = CleanupReport::default();
    let ledger = replay::Ledger::open(&run.run_dir).ok();
    for e in leftovers.iter().rev() {
        let p = PathBuf::from(&e.id);
        if e.kind == "cgroup" {
            // The run's own cgroups only: BLKIO/cnsreplay/RUN_ID/….
            let r = match throttle::blkio_root() {
                Some(root) if p.starts_with(root.join("cnsreplay").join(&run.run_id)) => {
                    throttle::remove(&p, &root)
                        .map(|()| true)
                        .map_err(|e| e.to_string())
                }
                Some(_) => Err("not one of this run's cgroups, not touched".to_owned()),
                None => Ok(false),
            };
            match r {
                Ok(removed) => {
                    if removed {
                        report.removed += 1;
                    }
                    if let Some(l) = &ledger {
                        let _ = l.release(&e.kind, &e.id);
                    }
                }
                Err(msg) => report.failed.push(format!("{} {}: {msg}", e.kind, e.id)),
            }
            continue;
        }
        if !sys::inside(&run.run_dir, &p) {
            report.failed.push(format!(
                "{} {}: outside the run directory, not touched",
                e.kind, e.id
            ));
            continue;
        }
        let r: Result<bool, String> = match e.kind.as_str() {
            "mount" => {
                if sys::is_mounted(&p) {
                    unmount_patiently(&p).map(|()| {
                        let _ = fs_err::remove_dir(&p);
                        true
                    })
                } else {
                    let _ = fs_err::remove_dir(&p);
                    Ok(false)
                }
            }
            "loop" => {
                let devs = sys::loops_of(&p);
                let mut err = None;
                for d in &devs {
                    if let Err(e) = sys::cmd("losetup", &["-d", d]) {
                        err = Some(e.message);
                    }
                }
                err.map_or(Ok(!devs.is_empty()), Err)
            }
            "file" | "image" => match fs_err::remove_file(&p) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(e.to_string()),
            },
            // The run's objects directory: removed only when nothing else is left in it.
            "root" => match std::fs::remove_dir(p.join("mnt"))
                .or_else(|e| {
                    if e.kind() == std::io::ErrorKind::NotFound {
                        Ok(())
                    } else {
                        Err(e)
                    }
                })
                .and_then(|()| fs_err::remove_dir(&p))
            {
                Ok(()) => Ok(false),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(format!("kept: {e}")),
            },
            "dir" => match fs_err::remove_dir_all(&p) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(e.to_string()),
            },
            other => Err(format!("unknown ledger kind {other:?}")),
        };
        match r {
            Ok(removed) => {
                if removed {
                    report.removed += 1;
                } else {
                    report.already_gone += 1;
                }
                if let Some(l) = &ledger {
                    let _ = l.release(&e.kind, &e.id);
                }
            }
            Err(msg) => report.failed.push(format!("{} {}: {msg}", e.kind, e.id)),
        }
    }
    report
}
