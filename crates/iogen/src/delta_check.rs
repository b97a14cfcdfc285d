//! The check of a changed-block delta against written sets ([`crate::written`]), shared by
//! every provider that lists deltas: the local provider (its snapshot images) and the kube
//! provider (a CSI driver's SnapshotMetadataService).
//!
//! Every block of a write submitted after the base snapshot was ready and acknowledged
//! before the later one was requested must be in the delta (verify mode makes every write
//! change its blocks' bytes); a block written then and missing is the storage's fault. Delta
//! blocks that no write around the window touched (acknowledged after the base was requested,
//! submitted before the later one was ready) are counted as extra, not a failure:
//! file-system metadata, writes of another kind, or a coarser granularity. Times are ns on one
//! clock, the run's.

use serde::{Deserialize, Serialize};

use crate::written::WriteRecord;

/// Mismatches listed in a [`DeltaCheck`] (all are counted).
pub const LISTED: usize = 100;

/// Why a written set's offsets cannot be checked against a delta's, if they cannot: the
/// record's offsets must be the storage's — a raw block device (`device`) written with
/// O_DIRECT (`direct`: a buffered write acknowledged in the page cache is not yet on the
/// storage a snapshot copies). A file system's data file sits at offsets only it knows.
pub fn uncheckable(device: bool, direct: bool) -> Option<&'static str> {
    if !device {
        Some("a file-system volume: the written set is in its data file's offsets")
    } else if !direct {
        Some("buffered writes: acknowledged in the page cache, not yet in the image")
    } else {
        None
    }
}

/// When a snapshot was taken, ns on the run clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The snapshot was requested.
    pub requested_ns: u64,
    /// It was ready (its content fixed).
    pub ready_ns: u64,
}

/// One delta block a write put there that the delta lacks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Missing {
    /// Its byte offset.
    pub block: u64,
    /// The writing phase's event id.
    pub event: u64,
    /// The write.
    pub write: WriteRecord,
}

/// The written-set check of a delta.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeltaCheck {
    /// Writes that must be in it: submitted at or after this (the base ready), ns on the
    /// run clock...
    pub after_ns: u64,
    /// ...and acknowledged at or before this (the later snapshot requested).
    pub before_ns: u64,
    /// Phases whose written sets were checked.
    pub phases: Vec<u64>,
    /// Phases on the volume that were not, and why.
    pub not_checked: Vec<String>,
    /// Writes inside the window.
    pub writes_in_window: u64,
    /// Distinct blocks they touched.
    pub blocks_in_window: u64,
    /// Blocks written in the window that the delta lacks.
    pub missing: u64,
    /// The first [`LISTED`] of them.
    pub missing_listed: Vec<Missing>,
    /// Delta blocks no write around the window touched.
    pub extra_blocks: u64,
    /// Blocks in the delta.
    pub delta_blocks: u64,
}

impl DeltaCheck {
    /// Why the delta fails the check (its first missing block), if it does.
    pub fn failure(&self, volume: &str, base: &str, snap: &str) -> Option<String> {
        let m = self.missing_listed.first()?;
        Some(format!(
            "volume {volume:?}: block at byte {} (written by event {}'s write of {} bytes at {}, \
             submitted at {} ns and acknowledged at {} ns on the run clock, after snapshot \
             {base:?} was ready at {} ns and before {snap:?} was requested at {} ns) is not in \
             the delta; {} of {} blocks written between them are missing",
            m.block,
            m.event,
            m.write.len,
            m.write.offset,
            m.write.submitted_ns,
            m.write.acked_ns,
            self.after_ns,
            self.before_ns,
            self.missing,
            self.blocks_in_window
        ))
    }
}

/// Whether byte `x` is in one of the sorted, disjoint `[offset, len]` ranges.
fn covered(ranges: &[[u64; 2]], x: u64) -> bool {
    let i = ranges.partition_point(|r| r[0] + r[1] <= x);
    ranges.get(i).is_some_and(|r| r[0] <= x)
}

/// The blocks of `block` bytes a write touches.
fn blocks(w: &WriteRecord, block: u64) -> impl Iterator<Item = u64> {
    let first = w.offset / block;
    let last = (w.offset + w.len).div_ceil(block);
    (first..last).map(move |b| b * block)
}

/// Checks delta `ranges` (`[offset, len]`, sorted, disjoint) at `block` bytes against the
/// written sets `phases` (event id, records) for snapshots taken in windows `base` and
/// `target`.
pub fn check(
    ranges: &[[u64; 2]],
    block: u64,
    phases: &[(u64, Vec<WriteRecord>)],
    base: Window,
    target: Window,
) -> DeltaCheck {
    let mut c = DeltaCheck {
        after_ns: base.ready_ns,
        before_ns: target.requested_ns,
        ..DeltaCheck::default()
    };
    let mut window = Vec::new();
    let mut around = Vec::new();
    let mut missing = Vec::new();
    for (event, records) in phases {
        c.phases.push(*event);
        for w in records {
            if w.acked_ns >= base.requested_ns && w.submitted_ns <= target.ready_ns {
                around.extend(blocks(w, block));
            }
            if w.submitted_ns < c.after_ns || w.acked_ns > c.before_ns {
                continue;
            }
            c.writes_in_window += 1;
            for b in blocks(w, block) {
                window.push(b);
                if !covered(ranges, b) {
                    missing.push(Missing {
                        block: b,
                        event: *event,
                        write: *w,
                    });
                }
            }
        }
    }
    window.sort_unstable();
    window.dedup();
    c.blocks_in_window = window.len() as u64;
    // A block written twice in the window is missing once (listed with its first write).
    missing.sort_by_key(|m| (m.block, m.write.acked_ns));
    missing.dedup_by_key(|m| m.block);
    c.missing = missing.len() as u64;
    missing.truncate(LISTED);
    c.missing_listed = missing;
    around.sort_unstable();
    around.dedup();
    c.delta_blocks = ranges.iter().map(|r| r[1] / block).sum();
    let explained = around.iter().filter(|&&b| covered(ranges, b)).count() as u64;
    c.extra_blocks = c.delta_blocks.saturating_sub(explained);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn win(requested_ns: u64, ready_ns: u64) -> Window {
        Window {
            requested_ns,
            ready_ns,
        }
    }

    fn w(offset: u64, submitted_ns: u64, acked_ns: u64) -> WriteRecord {
        WriteRecord {
            offset,
            len: 4096,
            submitted_ns,
            acked_ns,
        }
    }

    /// Base snapshot requested at 100, ready at 200; the later one requested at 1000, ready at
    /// 1100. Writes inside (200..=1000) must be in the delta; a write straddling a snapshot
    /// explains a delta block but is not required.
    #[test]
    fn a_delta_holding_every_block_written_between_passes_and_counts_extras() {
        let recs = vec![
            w(0, 50, 90),         // before the base: neither required nor explaining
            w(8192, 150, 250),    // straddles the base's copy: explains, not required
            w(16384, 300, 400),   // required
            w(20480, 500, 1000),  // required (acknowledged as the later one was requested)
            w(32768, 1050, 1200), // straddles the later one: explains, not required
        ];
        let delta = [[8192, 4096], [16384, 8192], [40960, 4096]];
        let c = check(&delta, 4096, &[(7, recs)], win(100, 200), win(1000, 1100));
        assert_eq!(
            (c.writes_in_window, c.blocks_in_window, c.missing),
            (2, 2, 0)
        );
        assert_eq!(c.delta_blocks, 4);
        // 40960 was touched by nothing: the one extra block.
        assert_eq!(c.extra_blocks, 1);
        assert!(c.failure("v", "s1", "s2").is_none());
    }

    /// A block written between the snapshots that the delta lacks fails the check, naming the
    /// volume, the block and the write's times.
    #[test]
    fn a_written_block_missing_from_the_delta_fails_and_is_named() {
        // 65536 is written twice in the window: one missing block, named with its first write.
        let recs = vec![w(16384, 300, 400), w(65536, 600, 700), w(65536, 800, 900)];
        let c = check(
            &[[16384, 4096]],
            4096,
            &[(7, recs)],
            win(100, 200),
            win(1000, 1100),
        );
        assert_eq!((c.missing, c.blocks_in_window), (1, 2));
        assert_eq!(c.missing_listed.len(), 1);
        let e = c
            .failure("data", "s1", "s2")
            .expect("a missing block fails");
        for part in [
            "volume \"data\"",
            "block at byte 65536",
            "event 7",
            "submitted at 600 ns",
            "acknowledged at 700 ns",
            "ready at 200 ns",
            "requested at 1000 ns",
            "1 of 2 blocks",
        ] {
            assert!(e.contains(part), "{part:?} not in: {e}");
        }
    }

    /// A write larger than a block needs every block it touched; one block short fails.
    #[test]
    fn a_multi_block_write_needs_all_its_blocks() {
        let big = WriteRecord {
            offset: 4096,
            len: 3 * 4096,
            submitted_ns: 300,
            acked_ns: 400,
        };
        let c = check(
            &[[4096, 8192]],
            4096,
            &[(1, vec![big])],
            win(100, 200),
            win(1000, 1100),
        );
        assert_eq!(c.missing, 1);
        assert_eq!(c.missing_listed[0].block, 12288);
    }
}
