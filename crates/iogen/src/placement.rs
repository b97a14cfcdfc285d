//! Where a trace's request lands on the target it is replayed against.
//!
//! A block trace's offsets and lengths belong to the recorded disk; the replay target may be
//! smaller and may need O_DIRECT's alignment. The policy, recorded in the results as a flag: a
//! request that fits and is aligned is issued as recorded; otherwise its range is widened
//! outwards to the alignment, cut to the target's size when longer than it, and moved back
//! into the target (modulo its size, in alignment units) when it runs past the end. Every
//! changed request is counted, so a replay says how much of the trace it could keep as is.

use std::io::{Seek, SeekFrom};
use std::path::Path;

use trace_format::IoKind;

use crate::Error;

/// The placement of requests on one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// Addressable bytes.
    pub size: u64,
    /// Offset and length granule (1 for buffered I/O).
    pub align: u64,
}

impl Placement {
    /// A placement on `size` bytes with `align`-byte granules (0 is taken as 1).
    pub fn new(size: u64, align: u64) -> Self {
        Self {
            size,
            align: align.max(1),
        }
    }

    /// The range `(offset, len)` as it can be issued; flushes are `(0, 0)`. The second value
    /// says whether the request was changed.
    pub fn place(&self, kind: IoKind, offset: u64, len: u64) -> ((u64, u64), bool) {
        if matches!(kind, IoKind::Flush) {
            return ((0, 0), false);
        }
        let a = self.align;
        let start = offset / a * a;
        let end = offset.saturating_add(len).div_ceil(a).saturating_mul(a);
        let mut n = end - start;
        let mut off = start;
        if n > self.size {
            n = self.size / a * a;
        }
        if off.saturating_add(n) > self.size {
            let room = (self.size - n) / a + 1;
            off = (off / a % room) * a;
        }
        ((off, n), (off, n) != (offset, len))
    }

    /// The policy, as a flag for results.
    pub fn describe(&self) -> String {
        format!(
            "{} bytes addressable, {}-byte granules; requests past the end wrap modulo it",
            self.size, self.align
        )
    }
}

/// The size of a file or block device, in bytes.
pub fn target_len(target: &Path) -> Result<u64, Error> {
    let mut f = fs_err::File::open(target)?;
    Ok(f.seek(SeekFrom::End(0))?)
}

/// The CPUs this thread may run on (its affinity mask, which `taskset` or a cgroup's cpuset
/// narrows), in ascending order.
pub fn allowed_cpus() -> Result<Vec<usize>, Error> {
    Ok(crate::ring::allowed_cpus()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_that_fit_are_kept_and_others_are_moved_inside() {
        let p = Placement::new(1 << 20, 4096);
        assert_eq!(p.place(IoKind::Read, 8192, 4096), ((8192, 4096), false));
        // Widened outwards to the granule.
        assert_eq!(p.place(IoKind::Write, 8193, 100), ((8192, 4096), true));
        // Past the end: wrapped, aligned.
        let ((off, len), changed) = p.place(IoKind::Read, (1 << 20) + 4096, 4096);
        assert!(changed && off + len <= 1 << 20 && off % 4096 == 0, "{off}");
        // Longer than the target: cut to it.
        assert_eq!(p.place(IoKind::Read, 0, 2 << 20), ((0, 1 << 20), true));
        assert_eq!(p.place(IoKind::Flush, 77, 3), ((0, 0), false));
    }
}
