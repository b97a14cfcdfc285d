//! Image files: create (sparse, optionally formatted), copy (reflink or full), grow the file.

use std::path::Path;

use crate::command::{path_str, run};
use crate::error::StorageError;
use crate::fs::{FsType, mkfs_as};

/// How a copy was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyKind {
    /// A reflink (FICLONE): shared extents, constant time.
    Reflink,
    /// A full sparse copy.
    Full,
}

impl CopyKind {
    /// `copy-reflink` or `copy-full` (the phase names the provider records).
    pub fn phase(self) -> &'static str {
        match self {
            Self::Reflink => "copy-reflink",
            Self::Full => "copy-full",
        }
    }
}

/// Creates a sparse image of `size` bytes; with `fs`, that file system on it.
pub fn create_image(image: &Path, size: u64, fs: Option<FsType>) -> Result<(), StorageError> {
    let f = fs_err::File::create(image)?;
    f.set_len(size)?;
    drop(f);
    if let Some(fs) = fs {
        mkfs_as(image, fs)?;
    }
    Ok(())
}

/// Copies `src` to `dst`, by reflink when the file system supports it (`cp
/// --reflink=always`; FICLONE underneath), else a full sparse copy.
pub fn copy_image(src: &Path, dst: &Path) -> Result<CopyKind, StorageError> {
    let (s, d) = (path_str(src)?, path_str(dst)?);
    if run("cp", &["--reflink=always", "--", s, d]).is_ok() {
        return Ok(CopyKind::Reflink);
    }
    let _ = fs_err::remove_file(dst);
    run(
        "cp",
        &["-a", "--reflink=never", "--sparse=always", "--", s, d],
    )?;
    Ok(CopyKind::Full)
}

/// Sets a file's length to `size` (never shrinks).
pub fn grow_file(image: &Path, size: u64) -> Result<(), StorageError> {
    let f = fs_err::OpenOptions::new().write(true).open(image)?;
    if f.metadata()?.len() < size {
        f.set_len(size)?;
    }
    Ok(())
}
