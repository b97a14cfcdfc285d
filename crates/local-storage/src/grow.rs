//! Growing a file system: offline, online, or unmounted-and-mounted-again where the kernel
//! refuses online resizing; and restoring a copy at a larger size.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::command::{path_str, run};
use crate::device::{mount, unmount};
use crate::error::StorageError;
use crate::fs::FsType;
use crate::image::{CopyKind, copy_image, grow_file};

/// How a file system was grown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrowKind {
    /// `resize2fs` on the mounted file system.
    Online,
    /// Unmounted, grown offline and mounted again (the kernel refused the online resize).
    Remount,
    /// The image or device was not mounted: e2fsck + resize2fs.
    Offline,
}

/// Grows the ext4 file system of an image or device that is not mounted: e2fsck (resize2fs
/// insists on a fresh check) + resize2fs.
pub fn grow_offline(target: &Path) -> Result<(), StorageError> {
    let p = path_str(target)?;
    // e2fsck exits 1 when it fixed something, which is fine here.
    let _ = Command::new("e2fsck").args(["-f", "-y", p]).output();
    run("resize2fs", &[p]).map(drop)
}

/// Grows the `fs` file system of an image or device that is not mounted. xfs grows only
/// mounted: it is mounted at `scratch` (a directory created and removed here, `nouuid`, a
/// loop device made by mount for an image), grown with xfs_growfs and unmounted again.
pub fn grow_offline_as(target: &Path, fs: FsType, scratch: &Path) -> Result<(), StorageError> {
    match fs {
        FsType::Ext4 => grow_offline(target),
        FsType::Xfs => {
            mount(path_str(target)?, scratch, fs.mount_args())?;
            let grown = run("xfs_growfs", &[path_str(scratch)?]).map(drop);
            let unmounted = unmount(scratch, Duration::from_secs(5));
            let _ = fs_err::remove_dir(scratch);
            grown.and(unmounted)
        }
    }
}

/// Grows the file system on `dev` to the device's size: online when mounted at `mount_at`;
/// where the kernel refuses online resizing, unmount, grow offline, mount again.
pub fn grow_fs(dev: &str, mount_at: Option<&Path>) -> Result<GrowKind, StorageError> {
    grow_fs_mounted(dev, mount_at.map(Path::to_owned).as_slice())
}

/// Like [`grow_fs`] for a file system mounted at several places: `mounts[0]` is the device's
/// own mount, the others bind mounts of it (a CSI staging path and its published targets).
/// When the online resize is refused, all are unmounted (binds first), the file system is
/// grown offline, and all are mounted again in the same way.
pub fn grow_fs_mounted(dev: &str, mounts: &[PathBuf]) -> Result<GrowKind, StorageError> {
    let Some((first, binds)) = mounts.split_first() else {
        grow_offline(Path::new(dev))?;
        return Ok(GrowKind::Offline);
    };
    let online = match run("resize2fs", &[dev]) {
        Ok(_) => return Ok(GrowKind::Online),
        Err(e) => e,
    };
    for (i, m) in mounts.iter().enumerate().rev() {
        if let Err(e) = run("umount", &[path_str(m)?]) {
            // Put back what was already unmounted, then report the original failure.
            for again in &mounts[i + 1..] {
                let _ = mount(path_str(first)?, again, &["--bind"]);
            }
            return Err(if i == 0 { online } else { e });
        }
    }
    let grown = grow_offline(Path::new(dev));
    mount(dev, first, &[])?;
    for b in binds {
        mount(path_str(first)?, b, &["--bind"])?;
    }
    grown.map_err(|offline| StorageError::Grow {
        online: Box::new(online),
        offline: Box::new(offline),
    })?;
    Ok(GrowKind::Remount)
}

/// Grows the `fs` file system on `dev`, mounted at `mounts` (`mounts[0]` the device's own
/// mount, the others bind mounts of it). ext4: [`grow_fs_mounted`]. xfs: xfs_growfs on the
/// first mount (no fallback: xfs cannot grow unmounted, and a failure here is the answer);
/// not mounted, through a temporary mount at `scratch` ([`grow_offline_as`]).
pub fn grow_fs_mounted_as(
    dev: &str,
    mounts: &[PathBuf],
    fs: FsType,
    scratch: &Path,
) -> Result<GrowKind, StorageError> {
    match (fs, mounts.first()) {
        (FsType::Ext4, _) => grow_fs_mounted(dev, mounts),
        (FsType::Xfs, Some(m)) => run("xfs_growfs", &[path_str(m)?]).map(|_| GrowKind::Online),
        (FsType::Xfs, None) => {
            grow_offline_as(Path::new(dev), fs, scratch)?;
            Ok(GrowKind::Offline)
        }
    }
}

/// Copies `src` to `dst` and grows the copy to `size` when that is larger than the source
/// (its file system too, with `fs`; an xfs one through a temporary mount at `dst` +
/// `.grow-mnt`). The copy must not be attached.
pub fn restore(
    src: &Path,
    dst: &Path,
    size: u64,
    fs: Option<FsType>,
) -> Result<CopyKind, StorageError> {
    let kind = copy_image(src, dst)?;
    let src_len = fs_err::metadata(dst)?.len();
    if size > src_len {
        grow_file(dst, size)?;
        if let Some(fs) = fs {
            grow_offline_as(dst, fs, &scratch_of(dst))?;
        }
    }
    Ok(kind)
}

/// The temporary mount point for growing an xfs image offline: beside the image.
pub fn scratch_of(image: &Path) -> PathBuf {
    let mut s = image.as_os_str().to_owned();
    s.push(".grow-mnt");
    PathBuf::from(s)
}
