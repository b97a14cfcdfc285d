//! The system commands behind the local provider (mkfs.ext4, losetup, mount, resize2fs,
//! fsfreeze, cp) as provider errors, over [`local_storage`]'s primitives. Every command's failure names the command
//! and its stderr.

use replay::ProviderError;
use std::path::{Path, PathBuf};

use local_storage::{self as storage, CopyKind, StorageError};

/// Runs a command; `Err` carries its stderr.
pub(crate) fn cmd(program: &str, args: &[&str]) -> Result<String, ProviderError> {
    storage::run(program, args).map_err(storage_err)
}

/// A storage primitive's failure as a provider error (`command_failed` or `io`).
#[allow(clippy::needless_pass_by_value)] // shaped for `.map_err(storage_err)`
pub(crate) fn storage_err(e: StorageError) -> ProviderError {
    ProviderError::new(e.kind(), e.to_string())
}

pub(crate) fn path_str(p: &Path) -> Result<&str, ProviderError> {
    p.to_str()
        .ok_or_else(|| ProviderError::new("io", format!("non-UTF-8 path {}", p.display())))
}

#[allow(clippy::needless_pass_by_value)] // shaped for `.map_err(io_err)`
pub(crate) fn io_err(e: std::io::Error) -> ProviderError {
    ProviderError::new("io", e.to_string())
}

/// Whether this process runs as root (Linux: effective uid 0 in /proc/self/status).
pub fn is_root() -> bool {
    storage::is_root()
}

/// Loop devices whose backing file is `image`.
pub fn loops_of(image: &Path) -> Vec<String> {
    storage::loops_of(image)
}

/// Mount points currently mounted (from /proc/self/mountinfo, octal escapes decoded).
pub fn mount_points() -> Vec<PathBuf> {
    storage::mount_points()
}

/// Whether `p` is a mount point now.
pub fn is_mounted(p: &Path) -> bool {
    storage::is_mounted(p)
}

/// Copies `src` to `dst` by reflink where the file system supports it, else a full sparse
/// copy. Returns whether the reflink worked.
pub(crate) fn copy_image(src: &Path, dst: &Path) -> Result<bool, ProviderError> {
    storage::copy_image(src, dst)
        .map(|k| k == CopyKind::Reflink)
        .map_err(storage_err)
}

/// Grows a file-system image that is not attached: fsck (resize2fs insists) + resize2fs.
pub(crate) fn grow_offline(image: &Path) -> Result<(), ProviderError> {
    storage::grow_offline(image).map_err(storage_err)
}

/// Whether `p` lies inside `root` (both made absolute without following the last symlink).
pub(crate) fn inside(root: &Path, p: &Path) -> bool {
    let canon = |x: &Path| {
        x.parent()
            .and_then(|par| fs_err::canonicalize(par).ok())
            .map(|par| par.join(x.file_name().unwrap_or_default()))
    };
    match (fs_err::canonicalize(root).ok(), canon(p)) {
        (Some(r), Some(c)) => c.starts_with(&r) && c != r,
        _ => false,
    }
}
