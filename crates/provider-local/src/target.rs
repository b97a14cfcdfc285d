//! Where a volume's I/O goes, shared by `io_phase`, ordered writes and the changed-block
//! checks: the data file on a file-system volume (or in a directory volume), the loop device
//! of a block volume; and the registration that lets detach/abort stop a running I/O unit.

use std::path::{Path, PathBuf};

use replay::ProviderError;
use trace_format::Name;

use crate::context::{LocalProvider, lock, missing};
use crate::sys::io_err;

/// The data file I/O runs against on a file-system volume.
pub const DATA_FILE: &str = "cnsreplay-io.dat";

/// Whether `p` is a device (a loop device of an attached volume), not a file — by its type:
/// a memory-backed run directory lives under `/dev/shm`.
pub(crate) fn is_device(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt as _;
    fs_err::metadata(p)
        .is_ok_and(|m| m.file_type().is_block_device() || m.file_type().is_char_device())
}

/// Makes sure a file target exists and is at least `len` bytes (sparse).
pub(crate) fn ensure_file(target: &Path, len: u64) -> Result<(), ProviderError> {
    if is_device(target) {
        return Ok(());
    }
    let f = fs_err::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(target)
        .map_err(io_err)?;
    if f.metadata().map_err(io_err)?.len() < len {
        f.set_len(len).map_err(io_err)?;
    }
    Ok(())
}

/// Size of the data file on a volume of `size` bytes: room for file-system metadata.
pub(crate) fn data_len(size: u64, region: Option<u64>) -> u64 {
    region
        .unwrap_or(size / 4 * 3)
        .min(size / 4 * 3)
        .max(1 << 20)
        & !0xFFFF
}

pub(crate) fn volume_size(p: &LocalProvider, name: &Name) -> u64 {
    p.state()
        .volumes
        .get(name)
        .map_or(1 << 30, |v| v.lock().map_or(1 << 30, |g| g.size))
}

/// Requests a stop of an I/O unit when dropped.
pub(crate) struct StopOnDrop(pub(crate) iogen::Stop);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.request();
    }
}

/// The I/O target of a volume: the data file on its mount or in its directory, or the loop
/// device of a block volume.
pub(crate) fn io_target(p: &LocalProvider, name: &Name) -> Result<PathBuf, ProviderError> {
    let vol = p.volume(name)?;
    let g = lock(&vol);
    if !p.loop_mode() {
        return Ok(g.image.join(DATA_FILE));
    }
    match (&g.mount, &g.loop_dev) {
        (Some(m), _) => Ok(m.join(DATA_FILE)),
        (None, Some(dev)) => Ok(PathBuf::from(dev)),
        (None, None) => Err(ProviderError::new(
            "not_attached",
            format!("volume {name:?} is not attached"),
        )),
    }
}

/// Registers a running I/O unit with its workload so detach/abort can stop it.
pub(crate) fn register_io(
    p: &LocalProvider,
    workload: &Name,
    stop: &iogen::Stop,
) -> Result<(), ProviderError> {
    p.state()
        .workloads
        .get_mut(workload)
        .map(|w| w.io.push(stop.clone()))
        .ok_or_else(|| missing("workload", workload))
}
