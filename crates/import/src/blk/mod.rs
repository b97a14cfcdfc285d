//! blktrace binary files and `blkparse` text output: importers, and a writer of blktrace files.
//!
//! **Binary format** (`struct blk_io_trace` of the kernel's `blktrace_api.h`, checked against
//! blkparse 1.2.0 and the real per-CPU files of a ZFS host). `blktrace -d DEV` writes one file
//! per CPU, `NAME.blktrace.<cpu>`, each a sequence of records: a 48-byte header (`magic` u32,
//! `sequence` u32, `time` u64 ns, `sector` u64, `bytes` u32, `action` u32, `pid` u32, `device`
//! u32, `cpu` u32, `error` u16, `pdu_len` u16) followed by `pdu_len` payload bytes. The kernel
//! writes its native byte order; `magic` is `0x65617400 | version` and only version 7 exists,
//! so the order is detected per file from the first magic and both orders are read. `action`
//! is category bits (`BLK_TC_*`) `<< 16 | action code` (`__BLK_TA_ISSUE` = 7 is `D`,
//! `__BLK_TA_COMPLETE` = 8 is `C`); `device` is `major << 20 | minor`. Notify records
//! (`BLK_TC_NOTIFY`: process names, timestamps, messages) and other actions produce no event
//! and are counted in a warning. A wrong magic or version is always fatal (nothing after it can
//! be framed); a record cut off by the end of its file is a [`BadInput`] (record index and byte
//! offset) under [`Policy`].
//!
//! **Text format.** `blkparse`'s default lines, `%D %2c %8s %5T.%9t %5p %2a %3d` then the
//! action's details: `8,52 3 1 0.000843237 0 C DS 983947432 + 64 [0]`. Times are relative to
//! blkparse's first record, sizes are 512-byte sectors; a request without data prints no sector
//! on `D` (`D FN [kworker/2:1H]`) and no `+ N` on `C`. Reading stops at the summary
//! (`CPU0 (…):`, `Total (…):`).
//!
//! **Mapping.** One `io` event per request, at its `D`: `at` = `D` time − the earliest `D`
//! time, `offset` = sector × 512, `len` = bytes; the kind from the RWBS bits (discard → trim,
//! write → write, other data → read; a request without data is a flush when flagged, e.g.
//! `FN` or a preflush `FWS`, and otherwise produces no event; a request whose end, sector ×
//! 512 plus bytes, overflows 64 bits produces no event (binary, counted) or is bad input
//! (text)). Each device is a volume `dev-<major>-<minor>` declared in the header (pass 1:
//! furthest byte rounded up to 1 MiB, at least 1 MiB). A `C` pairs with the oldest open `D`
//! of the same device, sector (none for requests without data) and kind, and `observed` is
//! `C − D`. A second `D` of the same device, sector, kind and length while the first is open
//! is a re-dispatch (the driver requeued it): it is merged into the first, which keeps its
//! time. Since `observed` must be on the event when it is written, pending requests wait in a
//! queue ordered by `D` time and the head is written when completed or when it falls more
//! than [`COMPLETION_WINDOW_NS`] of trace time behind the newest record (then without
//! `observed`); per-CPU files are merged by time, one record buffered per file. Every such
//! case is counted in a warning.
//!
//! **Fixtures.** [`RawRecord`] and [`write_blktrace_fixture`] write per-CPU files in the
//! kernel's layout, so tests make synthetic traces that `blkparse` itself reads.
//!
//! **Layout.** `binary.rs` (records, per-CPU files, the blktrace importer), `text.rs`
//! (blkparse lines and importer), `pairing.rs` (extents, header, D/C pairing, both share).

mod binary;
mod pairing;
mod text;

pub use binary::{
    RawRecord, import_blktrace, import_blktrace_sources, import_blktrace_stream,
    read_blktrace_file, write_blktrace_fixture,
};
pub use text::{import_blkparse, import_blkparse_source};

/// `magic` without its version byte.
pub const MAGIC: u32 = 0x6561_7400;
/// The only blktrace record version.
pub const VERSION: u32 = 7;
/// Length of a record header.
pub const RECORD_LEN: usize = 48;
/// How long a request waits for its completion, in ns of trace time, before it is written
/// without `observed`.
pub const COMPLETION_WINDOW_NS: u64 = 30_000_000_000;

const SECTOR: u64 = 512;
/// Category bits (`action >> 16`).
const TC_READ: u32 = 1 << 0;
const TC_WRITE: u32 = 1 << 1;
const TC_FLUSH: u32 = 1 << 2;
const TC_ISSUE: u32 = 1 << 6;
const TC_COMPLETE: u32 = 1 << 7;
const TC_FS: u32 = 1 << 8;
const TC_PC: u32 = 1 << 9;
const TC_NOTIFY: u32 = 1 << 10;
const TC_DISCARD: u32 = 1 << 13;
/// Action codes (`action & 0xffff`).
const TA_ISSUE: u32 = 7;
const TA_COMPLETE: u32 = 8;

/// Byte order of a blktrace file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    /// Little-endian (x86, most ARM).
    Little,
    /// Big-endian (s390x, some POWER).
    Big,
}

/// Whether a request record is the issue (`D`) or the completion (`C`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `D`: handed to the driver.
    Issue,
    /// `C`: completed.
    Complete,
}
