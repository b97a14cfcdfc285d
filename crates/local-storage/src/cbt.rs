//! Changed-block tracking over snapshot images, computed from what the images hold: the
//! allocated ranges of one image (its data extents, by `SEEK_DATA`/`SEEK_HOLE`) and the
//! ranges whose content differs between two (block by block, reading only where either
//! image has data: a hole in both is zeros in both). Nothing is recorded at write or snapshot
//! time, so no bookkeeping can disagree with the data; the price is reading the extents both
//! images hold. Shared with `cnsreplay-csi`, whose SnapshotMetadata service streams the same
//! ranges.
//!
//! Ranges are block-aligned (a partial block counts whole), merged when adjacent
//! (variable-length, in CSI's terms), and handed to a callback as they are found, in offset
//! order, so a caller can time the first one and stream them; the callback can stop the
//! listing early. On a file system without `SEEK_DATA` the kernel reports the whole file as
//! data: then the allocated listing is the whole image and the delta reads all of it.

use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rustix::fs::SeekFrom;

/// The block size when the caller gives none: the page and file-system block size.
pub const DEFAULT_BLOCK: u64 = 4096;

/// Bytes compared per read in a delta.
const CHUNK: u64 = 1 << 20;

/// A failed listing.
#[derive(Debug, thiserror::Error)]
pub enum CbtError {
    /// Opening or reading an image (the message names the path: `fs-err`).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// `SEEK_DATA`/`SEEK_HOLE` failed.
    #[error("{}: seeking the data at {offset}: {source}", path.display())]
    Seek {
        /// The image.
        path: PathBuf,
        /// Where.
        offset: u64,
        /// Why.
        source: rustix::io::Errno,
    },
    /// A block size that is not a power of two of at least 512 bytes.
    #[error("block size {0} is not a power of two of at least 512 bytes")]
    BlockSize(u64),
}

/// One listed range: `len` bytes from `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Range {
    /// Byte offset, a multiple of the block size.
    pub offset: u64,
    /// Length in bytes, a multiple of the block size.
    pub len: u64,
}

impl Range {
    /// The first byte after it.
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }
}

/// What a listing covered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Listed {
    /// Ranges handed to the callback.
    pub ranges: u64,
    /// Bytes they cover.
    pub bytes: u64,
    /// Bytes read from the images to find them (0 for an allocated listing).
    pub read_bytes: u64,
    /// The image size the listing covers (the larger image's, for a delta).
    pub size: u64,
    /// The callback stopped the listing early.
    pub stopped: bool,
}

/// Merges adjacent block ranges and hands each finished one to the callback.
struct Emitter<'a> {
    cur: Option<Range>,
    f: &'a mut dyn FnMut(Range) -> ControlFlow<()>,
    out: Listed,
}

impl Emitter<'_> {
    /// Adds a range (in offset order); `Break` once the callback stopped.
    fn add(&mut self, r: Range) -> ControlFlow<()> {
        if r.len == 0 {
            return ControlFlow::Continue(());
        }
        match &mut self.cur {
            Some(c) if c.end() >= r.offset => {
                let end = c.end().max(r.end());
                c.len = end - c.offset;
                ControlFlow::Continue(())
            }
            _ => {
                let prev = self.cur.replace(r);
                match prev {
                    Some(p) => self.emit(p),
                    None => ControlFlow::Continue(()),
                }
            }
        }
    }

    fn emit(&mut self, r: Range) -> ControlFlow<()> {
        self.out.ranges += 1;
        self.out.bytes += r.len;
        let c = (self.f)(r);
        if c.is_break() {
            self.out.stopped = true;
        }
        c
    }

    fn finish(mut self) -> Listed {
        if let Some(r) = self.cur.take()
            && !self.out.stopped
        {
            let _ = self.emit(r);
        }
        self.out
    }
}

fn check_block(block: u64) -> Result<(), CbtError> {
    if block < 512 || !block.is_power_of_two() {
        return Err(CbtError::BlockSize(block));
    }
    Ok(())
}

fn down(x: u64, block: u64) -> u64 {
    x / block * block
}

fn up(x: u64, block: u64) -> u64 {
    x.div_ceil(block).saturating_mul(block)
}

/// The data extents of a file from a start offset, unaligned, in order, found one at a time
/// (`SEEK_DATA`, then `SEEK_HOLE`), so a listing streams from the first.
struct Segments<'a> {
    f: &'a std::fs::File,
    path: &'a Path,
    pos: u64,
    size: u64,
}

impl Iterator for Segments<'_> {
    type Item = Result<(u64, u64), CbtError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.size {
            return None;
        }
        let pos = self.pos;
        // Whatever happens next, this call ends the walk unless it finds a segment.
        self.pos = self.size;
        let seek_err = |offset, source| CbtError::Seek {
            path: self.path.to_path_buf(),
            offset,
            source,
        };
        let data = match rustix::fs::seek(self.f, SeekFrom::Data(pos)) {
            Ok(d) if d < self.size => d,
            // No data at or after `pos` (ENXIO), or only past the size read at the start.
            Ok(_) | Err(rustix::io::Errno::NXIO) => return None,
            Err(e) => return Some(Err(seek_err(pos, e))),
        };
        let hole = match rustix::fs::seek(self.f, SeekFrom::Hole(data)) {
            Ok(h) => h.min(self.size),
            Err(e) => return Some(Err(seek_err(data, e))),
        };
        self.pos = hole;
        Some(Ok((data, hole)))
    }
}

fn open(path: &Path) -> Result<(std::fs::File, u64), CbtError> {
    let f = fs_err::File::open(path)?;
    let size = f.metadata()?.len();
    Ok((f.into_parts().0, size))
}

/// Lists the allocated blocks of the image at `path` from `start` (rounded down to a block),
/// handing each range to `f`.
pub fn allocated(
    path: &Path,
    block: u64,
    start: u64,
    f: &mut dyn FnMut(Range) -> ControlFlow<()>,
) -> Result<Listed, CbtError> {
    check_block(block)?;
    let (file, size) = open(path)?;
    let mut em = Emitter {
        cur: None,
        f,
        out: Listed {
            size,
            ..Listed::default()
        },
    };
    let segments = Segments {
        f: &file,
        path,
        pos: down(start, block),
        size,
    };
    for seg in segments {
        let (s, e) = seg?;
        let (s, e) = (down(s, block), up(e, block));
        if em
            .add(Range {
                offset: s,
                len: e - s,
            })
            .is_break()
        {
            break;
        }
    }
    Ok(em.finish())
}

/// Fills `buf` from `f` at `off`; what lies past the end of the file reads as zeros.
fn read_at_zero_filled(
    f: &std::fs::File,
    path: &Path,
    buf: &mut [u8],
    off: u64,
) -> Result<(), CbtError> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], off + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(CbtError::Io(std::io::Error::new(
                    e.kind(),
                    format!("reading {} at {}: {e}", path.display(), off + done as u64),
                )));
            }
        }
    }
    buf[done..].fill(0);
    Ok(())
}

/// The union of two images' data extents, aligned to the block and merged, one span at a
/// time: the next segment of either, in offset order, until a gap.
struct Union<'a> {
    a: Segments<'a>,
    b: Segments<'a>,
    /// The next segment of each, aligned, not yet taken.
    pa: Option<(u64, u64)>,
    pb: Option<(u64, u64)>,
    block: u64,
}

impl Union<'_> {
    fn next_span(&mut self) -> Result<Option<(u64, u64)>, CbtError> {
        let block = self.block;
        let align = |(s, e): (u64, u64)| (down(s, block), up(e, block));
        let mut cur: Option<(u64, u64)> = None;
        loop {
            if self.pa.is_none() {
                self.pa = self.a.next().transpose()?.map(align);
            }
            if self.pb.is_none() {
                self.pb = self.b.next().transpose()?.map(align);
            }
            let from_a = match (self.pa, self.pb) {
                (Some(x), Some(y)) => x.0 <= y.0,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => return Ok(cur),
            };
            let slot = if from_a { &mut self.pa } else { &mut self.pb };
            let Some(seg) = slot.take() else {
                return Ok(cur);
            };
            match cur {
                None => cur = Some(seg),
                Some(c) if seg.0 <= c.1 => cur = Some((c.0, c.1.max(seg.1))),
                Some(c) => {
                    *slot = Some(seg);
                    return Ok(Some(c));
                }
            }
        }
    }
}

/// Lists the blocks whose content differs between the images at `base` and `target` from
/// `start` (rounded down to a block), handing each range to `f`. An image shorter than the
/// other (a volume grown between the snapshots) reads as zeros past its end.
pub fn delta(
    base: &Path,
    target: &Path,
    block: u64,
    start: u64,
    f: &mut dyn FnMut(Range) -> ControlFlow<()>,
) -> Result<Listed, CbtError> {
    check_block(block)?;
    let (fb, size_b) = open(base)?;
    let (ft, size_t) = open(target)?;
    let size = size_b.max(size_t);
    let from = down(start, block);
    let mut spans = Union {
        a: Segments {
            f: &fb,
            path: base,
            pos: from,
            size: size_b,
        },
        b: Segments {
            f: &ft,
            path: target,
            pos: from,
            size: size_t,
        },
        pa: None,
        pb: None,
        block,
    };
    let chunk = CHUNK.max(block);
    let mut bb = vec![0u8; chunk as usize];
    let mut bt = vec![0u8; chunk as usize];
    let mut em = Emitter {
        cur: None,
        f,
        out: Listed {
            size,
            ..Listed::default()
        },
    };
    let mut read = 0u64;
    'spans: while let Some((s, e)) = spans.next_span()? {
        let mut off = s.max(from);
        let e = e.min(up(size, block));
        while off < e {
            let n = (e - off).min(chunk);
            let (xb, xt) = (&mut bb[..n as usize], &mut bt[..n as usize]);
            read_at_zero_filled(&fb, base, xb, off)?;
            read_at_zero_filled(&ft, target, xt, off)?;
            read += 2 * n;
            for (k, (cb, ct)) in xb
                .chunks(block as usize)
                .zip(xt.chunks(block as usize))
                .enumerate()
            {
                if cb != ct {
                    let r = Range {
                        offset: off + k as u64 * block,
                        len: block,
                    };
                    if em.add(r).is_break() {
                        break 'spans;
                    }
                }
            }
            off += n;
        }
    }
    let mut out = em.finish();
    out.read_bytes = read;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(
        run: impl FnOnce(&mut dyn FnMut(Range) -> ControlFlow<()>) -> Result<Listed, CbtError>,
    ) -> (Vec<(u64, u64)>, Listed) {
        let mut v = Vec::new();
        let l = run(&mut |r| {
            v.push((r.offset, r.len));
            ControlFlow::Continue(())
        })
        .unwrap();
        (v, l)
    }

    fn sparse(dir: &Path, name: &str, size: u64, writes: &[(u64, u8, usize)]) -> PathBuf {
        let p = dir.join(name);
        let f = fs_err::File::create(&p).unwrap();
        f.set_len(size).unwrap();
        for &(off, byte, n) in writes {
            f.file().write_all_at(&vec![byte; n], off).unwrap();
        }
        p
    }

    /// Data extents come out block-aligned and merged; holes are skipped. (tmpfs and the
    /// common disk file systems report holes at page granularity, so 4 KiB blocks are exact.)
    #[test]
    fn allocated_lists_the_data_extents() {
        let d = tempfile::tempdir().unwrap();
        let p = sparse(
            d.path(),
            "a",
            16 << 20,
            &[
                (0, 1, 4096),
                (4096, 2, 4096),
                (1 << 20, 3, 100),
                (8 << 20, 4, 8192),
            ],
        );
        let (v, l) = collect(|f| allocated(&p, 4096, 0, f));
        assert_eq!(v, [(0, 8192), (1 << 20, 4096), (8 << 20, 8192)]);
        assert_eq!((l.ranges, l.bytes, l.size), (3, 20480, 16 << 20));
        // From an offset: the range containing it is cut at its block.
        let (v, _) = collect(|f| allocated(&p, 4096, 4096 + 10, f));
        assert_eq!(v, [(4096, 4096), (1 << 20, 4096), (8 << 20, 8192)]);
    }

    /// The delta holds exactly the blocks whose bytes differ: a rewrite with other content, a
    /// block written in only one image, and a byte past the shorter image's end; a block
    /// rewritten with the same content is no change.
    #[test]
    fn delta_lists_the_blocks_that_differ() {
        let d = tempfile::tempdir().unwrap();
        let base = sparse(
            d.path(),
            "b",
            8 << 20,
            &[(0, 1, 4096), (4096, 2, 4096), (2 << 20, 5, 4096)],
        );
        let target = sparse(
            d.path(),
            "t",
            9 << 20,
            &[
                (0, 1, 4096),          // same
                (4096, 9, 4096),       // rewritten
                (2 << 20, 5, 4096),    // same
                (3 << 20, 7, 1),       // new, one byte
                ((8 << 20) + 1, 1, 1), // past the base's end
            ],
        );
        let (v, l) = collect(|f| delta(&base, &target, 4096, 0, f));
        assert_eq!(v, [(4096, 4096), (3 << 20, 4096), (8 << 20, 4096)]);
        assert_eq!(l.bytes, 3 * 4096);
        assert!(l.read_bytes > 0);
        // Stopping after the first range.
        let mut n = 0;
        let l = delta(&base, &target, 4096, 0, &mut |_| {
            n += 1;
            ControlFlow::Break(())
        })
        .unwrap();
        assert_eq!((n, l.ranges, l.stopped), (1, 1, true));
        // A block size that is not a power of two.
        let e = delta(&base, &target, 3000, 0, &mut |_| ControlFlow::Continue(())).unwrap_err();
        assert!(matches!(e, CbtError::BlockSize(3000)), "{e}");
    }
}
