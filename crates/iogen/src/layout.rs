//! Laying out a regular-file target before a phase, without filling the disk.
//!
//! Order: measure the file system's free space (statvfs, `f_bavail`: what an unprivileged
//! writer may use) and refuse an extension that does not fit before anything is written;
//! reserve the extension with `fallocate` where the file system supports it (an ENOSPC then
//! comes at once, not after gigabytes); fill it with non-zero, non-repeating data so reads hit
//! storage (checking the stop flag every MiB); fsync. Until the caller [`Layout::keep`]s the
//! result, dropping it undoes what was done: a file this call created is removed, one it
//! extended is truncated back to its old length. A new (or empty) file with no size given gets
//! [`DEFAULT_NEW_FILE_SIZE`] if that fits.

use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use crate::generate::Rng;
use crate::{Error, Stop};

/// The size a new or empty regular file is laid out to when the phase gives none (`--size`
/// absent): 1 GiB, the default of `iogen suite` too.
pub const DEFAULT_NEW_FILE_SIZE: u64 = 1 << 30;

/// What to do with the target if the phase does not succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Undo {
    Nothing,
    Remove,
    TruncateTo(u64),
}

/// A prepared target; undoes its layout when dropped unless kept.
#[derive(Debug)]
pub(crate) struct Layout {
    path: PathBuf,
    undo: Undo,
    /// The usable size: the file's (or device's) size, or the size asked for.
    pub(crate) size: u64,
}

impl Layout {
    /// The phase succeeded: the laid-out file stays.
    pub(crate) fn keep(mut self) {
        self.undo = Undo::Nothing;
    }
}

impl Drop for Layout {
    fn drop(&mut self) {
        // Best effort: the error that got us here is what the caller reports.
        match self.undo {
            Undo::Nothing => {}
            Undo::Remove => {
                let _ = std::fs::remove_file(&self.path);
            }
            Undo::TruncateTo(len) => {
                if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&self.path) {
                    let _ = f.set_len(len);
                }
            }
        }
    }
}

/// Free bytes for an unprivileged writer on the file system holding `path`.
pub(crate) fn free_bytes(path: &Path) -> Result<u64, Error> {
    let st = rustix::fs::statvfs(path).map_err(|e| {
        Error::Io(std::io::Error::new(
            std::io::Error::from(e).kind(),
            format!("statvfs {}: {e}", path.display()),
        ))
    })?;
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// `n` bytes as a person reads them (`1.0 TiB (1099511627776 B)`).
pub(crate) fn fmt_bytes(n: u64) -> String {
    const UNITS: [(&str, u32); 4] = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (unit, shift) in UNITS {
        if n >= 1 << shift {
            #[allow(clippy::cast_precision_loss)] // display only
            let v = n as f64 / (1u64 << shift) as f64;
            return format!("{v:.1} {unit} ({n} B)");
        }
    }
    format!("{n} B")
}

/// Opens `target` (creating it if absent) and makes sure a regular file is at least `want`
/// bytes long (or [`DEFAULT_NEW_FILE_SIZE`] when `want` is `None` and the file is empty).
pub(crate) fn prepare(target: &Path, want: Option<u64>, stop: &Stop) -> Result<Layout, Error> {
    let open = |create_new: bool| {
        fs_err::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(create_new)
            .open(target)
    };
    let (mut f, created) = match open(false) {
        Ok(f) => (f, false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match open(true) {
            Ok(f) => (f, true),
            // Created by someone else in between: not ours to remove.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => (open(false)?, false),
            Err(e) => return Err(e.into()),
        },
        Err(e) => return Err(e.into()),
    };
    let mut layout = Layout {
        path: target.to_path_buf(),
        undo: if created { Undo::Remove } else { Undo::Nothing },
        size: 0,
    };
    let meta = f.metadata()?;
    if meta.file_type().is_block_device() {
        layout.size = f.seek(SeekFrom::End(0))?;
        return Ok(layout);
    }
    let have = meta.len();
    let (want, defaulted) = match want {
        Some(w) => (w, false),
        None if have > 0 => {
            layout.size = have;
            return Ok(layout);
        }
        None => (DEFAULT_NEW_FILE_SIZE, true),
    };
    layout.size = want;
    if have >= want {
        return Ok(layout);
    }
    let need = want - have;
    let no_space = |free: u64| Error::NoSpace {
        path: target.to_path_buf(),
        want: fmt_bytes(want),
        need: fmt_bytes(need),
        free: fmt_bytes(free),
        defaulted,
    };
    let free = free_bytes(target)?;
    if need > free {
        return Err(no_space(free));
    }
    if !created {
        layout.undo = Undo::TruncateTo(have);
    }
    // Reserve first: on a file system with fallocate an ENOSPC comes now, with nothing
    // written; without it (EOPNOTSUPP) the writes below allocate as they go.
    match rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), have, need) {
        Ok(()) => {}
        Err(e) if e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOSYS => {}
        Err(e) if e == rustix::io::Errno::NOSPC => {
            return Err(no_space(free_bytes(target).unwrap_or(0)));
        }
        Err(e) => {
            return Err(Error::Io(std::io::Error::new(
                std::io::Error::from(e).kind(),
                format!("fallocate {} to {}: {e}", target.display(), fmt_bytes(want)),
            )));
        }
    }
    // Lay the file out with real (non-zero, non-repeating) data so reads hit storage.
    let mut rng = Rng::new(have ^ 0xf111);
    let mut chunk = vec![0u8; 1 << 20];
    let mut at = have;
    f.seek(SeekFrom::Start(at))?;
    while at < want {
        if stop.is_requested() {
            return Err(Error::Interrupted {
                path: target.to_path_buf(),
                done: fmt_bytes(at - have),
                need: fmt_bytes(need),
            });
        }
        for w in chunk.chunks_mut(8) {
            w.copy_from_slice(&rng.next_u64().to_le_bytes());
        }
        let n = (want - at).min(chunk.len() as u64) as usize;
        match f.write_all(&chunk[..n]) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                return Err(no_space(free_bytes(target).unwrap_or(0)));
            }
            Err(e) => return Err(e.into()),
        }
        at += n as u64;
    }
    f.sync_all()?;
    Ok(layout)
}
