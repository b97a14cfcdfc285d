//! Is a set of restored volumes a consistent cut of an ordered-write run?
//!
//! Each block of a restored member shows at most one write: the latest that reached it (a
//! block's writes form a chain, each submitted after the previous one was acknowledged, see
//! [`crate::ordered`]). The state is consistent when it is what the storage could have held
//! at one instant: the set `C` of writes it implies (on every block, the write it shows and
//! the ones before it) is closed under "acknowledged before submitted" — if a write in `C`
//! was submitted after write `X` was acknowledged, `X` is in `C` too. Writes in flight at that
//! instant (submitted, not yet acknowledged) may be there or not.
//!
//! With `P` = the largest `acked_before` of a present write (the first `P` records in ack
//! order had to be present) and `m` = the smallest log position of a write that is missing
//! (the first write after the one a block shows), the state is consistent exactly when
//! `P ≤ m`. Otherwise the write at position `m` is missing although a present write was
//! submitted after its ack: that write's volume, block and sequence number are named, with
//! the present write that proves it. The cut is reported as the sequence number of the newest
//! present write (every write with a larger sequence number was submitted after it and is
//! absent).

use std::collections::HashMap;
use std::io::Read as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::ordered::{BLOCK_MAGIC, LogHeader, OrderedLog, block_checksum};

/// What one block of a restored member holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum Seen {
    /// No write of this run (zeros, other data, or another run's block).
    Empty,
    /// The write with this sequence number.
    Write {
        /// Its sequence number.
        seq: u64,
    },
    /// A block of this run that is damaged or misplaced.
    Corrupt {
        /// What is wrong.
        reason: Damage,
    },
}

/// How a block of this run is damaged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Damage {
    /// The checksum does not match (a torn or corrupted block).
    Checksum,
    /// The header names another volume or offset (data landed in the wrong place).
    Misplaced,
    /// A sequence number the log does not have, or has for another block.
    Unlogged,
}

/// One write, as the verdict names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WriteRef {
    /// Volume (target) index.
    pub volume: u32,
    /// Block index.
    pub block: u64,
    /// Sequence number.
    pub seq: u64,
    /// Position in the log (ack order).
    pub position: u64,
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case", tag = "verdict")]
pub enum CutVerdict {
    /// There is a cut.
    Consistent {
        /// Sequence number of the newest present write (0: none).
        cut_seq: u64,
        /// Writes that had to be present (acknowledged before a present write was submitted).
        required: u64,
        /// Writes in flight at the cut (submitted before it, acknowledged after the last
        /// required one) that are present.
        in_flight_present: u64,
        /// … and absent.
        in_flight_absent: u64,
    },
    /// No cut: `missing` was acknowledged before `present` was submitted, yet only `present`
    /// is on the restored members.
    Torn {
        /// The earliest-acknowledged write that is missing.
        missing: WriteRef,
        /// A present write submitted after `missing` was acknowledged.
        present: WriteRef,
        /// How many acknowledged writes are missing although a later-submitted write is
        /// present.
        missing_required: u64,
    },
    /// A block is damaged: nothing can be decided about it.
    Damaged {
        /// Volume index.
        volume: u32,
        /// Block index.
        block: u64,
        /// Sequence number in its header.
        seq: Option<u64>,
        /// What is wrong.
        reason: Damage,
        /// Damaged blocks in all.
        count: u64,
    },
}

impl CutVerdict {
    /// Whether the members are a consistent cut.
    pub fn is_consistent(&self) -> bool {
        matches!(self, CutVerdict::Consistent { .. })
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        self.describe_with(&[])
    }

    /// [`describe`](Self::describe), each volume also by its name in `names` (by index).
    pub fn describe_with(&self, names: &[&str]) -> String {
        let vol = |v: u32| match names.get(v as usize) {
            Some(n) => format!("{v} ({n})"),
            None => v.to_string(),
        };
        match self {
            CutVerdict::Consistent {
                cut_seq,
                required,
                in_flight_present,
                in_flight_absent,
            } => format!(
                "consistent: cut at sequence number {cut_seq} ({required} writes acknowledged \
                 before a present write was submitted, all present; in flight at the cut: \
                 {in_flight_present} present, {in_flight_absent} absent)"
            ),
            CutVerdict::Torn {
                missing,
                present,
                missing_required,
            } => format!(
                "torn: volume {} block {} lacks write {} (acknowledged as write #{} of the \
                 log), but volume {} block {} holds write {}, submitted after that \
                 acknowledgement ({missing_required} such writes missing)",
                vol(missing.volume),
                missing.block,
                missing.seq,
                missing.position + 1,
                vol(present.volume),
                present.block,
                present.seq
            ),
            CutVerdict::Damaged {
                volume,
                block,
                seq,
                reason,
                count,
            } => format!(
                "damaged: volume {} block {block} ({}{}; {count} damaged blocks)",
                vol(*volume),
                match reason {
                    Damage::Checksum => "checksum mismatch",
                    Damage::Misplaced => "header names another volume or offset",
                    Damage::Unlogged => "a write the log does not have for this block",
                },
                seq.map_or_else(String::new, |s| format!(", sequence number {s}"))
            ),
        }
    }
}

/// Reads what a block holds.
pub fn classify(buf: &[u8], header: &LogHeader, volume: u32, block: u64) -> Seen {
    if buf.len() < 48 || &buf[..8] != BLOCK_MAGIC {
        return Seen::Empty;
    }
    let u64_at = |i: usize| u64::from_le_bytes(buf[i..i + 8].try_into().unwrap_or([0; 8]));
    let u32_at = |i: usize| u32::from_le_bytes(buf[i..i + 4].try_into().unwrap_or([0; 4]));
    if u64_at(40) != header.nonce {
        return Seen::Empty;
    }
    if u64_at(32) != block_checksum(buf) {
        return Seen::Corrupt {
            reason: Damage::Checksum,
        };
    }
    if u32_at(16) != volume
        || u64::from(u32_at(20)) != header.block
        || u64_at(24) != block * header.block
    {
        return Seen::Corrupt {
            reason: Damage::Misplaced,
        };
    }
    Seen::Write { seq: u64_at(8) }
}

/// Reads a restored member's region (volume `volume` of the log) block by block.
pub fn scan_member(path: &Path, header: &LogHeader, volume: u32) -> Result<Vec<Seen>, Error> {
    let blocks = header.blocks(volume as usize);
    let bs = header.block as usize;
    let mut f = fs_err::File::open(path)?;
    let per = (1usize << 20).div_ceil(bs).max(1);
    let mut buf = vec![0u8; per * bs];
    let mut out = Vec::with_capacity(blocks as usize);
    while (out.len() as u64) < blocks {
        let want = ((blocks - out.len() as u64) as usize).min(per) * bs;
        let mut got = 0;
        while got < want {
            match f.read(&mut buf[got..want])? {
                0 => break,
                n => got += n,
            }
        }
        if got < want {
            return Err(Error::InvalidSpec {
                field: "target",
                reason: format!(
                    "{}: ends at byte {}, before the {} bytes of volume {volume}'s region in the log",
                    path.display(),
                    out.len() * bs + got,
                    blocks * header.block
                ),
            });
        }
        for c in buf[..want].chunks_exact(bs) {
            let b = out.len() as u64;
            out.push(classify(c, header, volume, b));
        }
    }
    Ok(out)
}

/// Decides whether `seen` (per volume, per block) is a consistent cut of `log`.
pub fn decide(log: &OrderedLog, seen: &[Vec<Seen>]) -> CutVerdict {
    let recs = &log.records;
    // Each block's writes in ack order (= submission order: a block's writes form a chain).
    let mut chains: HashMap<(u32, u64), Vec<usize>> = HashMap::new();
    let mut by_seq: HashMap<u64, usize> = HashMap::with_capacity(recs.len());
    for (i, r) in recs.iter().enumerate() {
        chains.entry((r.volume, r.block)).or_default().push(i);
        by_seq.insert(r.seq, i);
    }
    let wref = |i: usize| WriteRef {
        volume: recs[i].volume,
        block: recs[i].block,
        seq: recs[i].seq,
        position: i as u64,
    };
    let mut damaged: Option<(u32, u64, Option<u64>, Damage)> = None;
    let mut damage_count = 0u64;
    let mut note = |v: u32, b: u64, s: Option<u64>, d: Damage| {
        damage_count += 1;
        damaged.get_or_insert((v, b, s, d));
    };
    // Present writes (positions) and, per block, the first write after the one it shows.
    let mut present: Vec<usize> = Vec::new();
    let mut first_missing: Vec<usize> = Vec::new();
    // Every write a block implies (what it shows and the writes before it).
    let mut implied = vec![false; recs.len()];
    for (v, blocks) in seen.iter().enumerate() {
        let v = v as u32;
        for (b, s) in blocks.iter().enumerate() {
            let b = b as u64;
            let chain = chains.get(&(v, b)).map_or(&[][..], Vec::as_slice);
            let shown = match *s {
                Seen::Empty => None,
                Seen::Corrupt { reason } => {
                    note(v, b, None, reason);
                    continue;
                }
                Seen::Write { seq } => match by_seq.get(&seq) {
                    Some(&i) if recs[i].volume == v && recs[i].block == b => Some(i),
                    _ => {
                        note(v, b, Some(seq), Damage::Unlogged);
                        continue;
                    }
                },
            };
            let after = match shown {
                None => 0,
                Some(i) => {
                    present.push(i);
                    let k = chain.iter().position(|&c| c == i).unwrap_or(0);
                    for &c in &chain[..=k] {
                        implied[c] = true;
                    }
                    k + 1
                }
            };
            // A failed write may or may not have landed: it requires nothing.
            if let Some(&x) = chain[after..].iter().find(|&&c| !recs[c].failed) {
                first_missing.push(x);
            }
        }
    }
    if let Some((volume, block, seq, reason)) = damaged {
        return CutVerdict::Damaged {
            volume,
            block,
            seq,
            reason,
            count: damage_count,
        };
    }
    let required = present
        .iter()
        .map(|&i| recs[i].acked_before)
        .max()
        .unwrap_or(0);
    let m = first_missing.iter().copied().min();
    match m {
        Some(m) if (m as u64) < required => {
            // The present write submitted after `m`'s ack with the smallest sequence number.
            let witness = present
                .iter()
                .copied()
                .filter(|&i| recs[i].acked_before > m as u64)
                .min_by_key(|&i| recs[i].seq)
                .unwrap_or(m);
            let missing_required = (0..required as usize).filter(|&i| !implied[i]).count() as u64;
            CutVerdict::Torn {
                missing: wref(m),
                present: wref(witness),
                missing_required,
            }
        }
        _ => {
            let cut_seq = present.iter().map(|&i| recs[i].seq).max().unwrap_or(0);
            let (mut inp, mut ina) = (0, 0);
            for (i, r) in recs.iter().enumerate().skip(required as usize) {
                if r.seq <= cut_seq {
                    if implied[i] {
                        inp += 1;
                    } else {
                        ina += 1;
                    }
                }
            }
            CutVerdict::Consistent {
                cut_seq,
                required,
                in_flight_present: inp,
                in_flight_absent: ina,
            }
        }
    }
}

/// The whole check: reads the log and each restored member (in the log's volume order) and
/// decides.
pub fn verify_cut(log: &Path, members: &[&Path]) -> Result<CutReport, Error> {
    let log = OrderedLog::read(log)?;
    let seen = scan_members(&log.header, members)?;
    report(&log, &seen)
}

/// Reads each restored member (in the log's volume order) block by block: what a checker
/// without the log needs (`iogen scan`, [`crate::cut_wire`]).
pub fn scan_members(header: &LogHeader, members: &[&Path]) -> Result<Vec<Vec<Seen>>, Error> {
    if members.len() != header.volumes.len() {
        return Err(Error::InvalidSpec {
            field: "target",
            reason: format!(
                "{} restored members given, the log has {} volumes ({})",
                members.len(),
                header.volumes.len(),
                header
                    .volumes
                    .iter()
                    .map(|v| v.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    let mut seen = Vec::with_capacity(members.len());
    for (v, m) in members.iter().enumerate() {
        seen.push(scan_member(m, header, v as u32)?);
    }
    Ok(seen)
}

/// Decides on members scanned elsewhere: `seen` must have the log's volumes and blocks.
pub fn report(log: &OrderedLog, seen: &[Vec<Seen>]) -> Result<CutReport, Error> {
    let h = &log.header;
    if seen.len() != h.volumes.len() {
        return Err(Error::InvalidSpec {
            field: "scan",
            reason: format!(
                "{} volumes scanned, the log has {}",
                seen.len(),
                h.volumes.len()
            ),
        });
    }
    for (v, s) in seen.iter().enumerate() {
        if s.len() as u64 != h.blocks(v) {
            return Err(Error::InvalidSpec {
                field: "scan",
                reason: format!(
                    "volume {v}: {} blocks scanned, its region in the log has {}",
                    s.len(),
                    h.blocks(v)
                ),
            });
        }
    }
    let written = seen
        .iter()
        .map(|s| s.iter().filter(|x| matches!(x, Seen::Write { .. })).count() as u64)
        .collect();
    Ok(CutReport {
        verdict: decide(log, seen),
        log_writes: log.records.len() as u64,
        blocks_with_writes: written,
    })
}

/// How one volume's acknowledged writes flowed around a snapshot (see [`write_pause`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WritePause {
    /// The longest gap between two consecutive acknowledged writes of the volume that
    /// overlaps the window, ns.
    pub pause_ns: Option<u64>,
    /// Where that gap begins, on the caller's clock.
    pub pause_from_ns: Option<u64>,
    /// The median gap between its consecutive acknowledged writes over the whole log, ns.
    pub typical_gap_ns: Option<u64>,
}

impl WritePause {
    /// `VOLUME P ms (typical gap G ms)` for a summary notice; None without a pause.
    pub fn describe(&self, volume: &str) -> Option<String> {
        let ms = |n: u64| format!("{:.1} ms", n as f64 / 1e6);
        self.pause_ns.map(|p| {
            format!(
                "{volume} {}{}",
                ms(p),
                self.typical_gap_ns
                    .map_or_else(String::new, |g| format!(" (typical gap {})", ms(g)))
            )
        })
    }
}

/// `; write pause around the snapshot: A …, B …` for a cut check's notice, or nothing when no
/// member paused: the members' volumes with their [`WritePause`].
pub fn pauses_notice<'a>(members: impl Iterator<Item = (&'a str, &'a WritePause)>) -> String {
    let pauses: Vec<String> = members.filter_map(|(v, p)| p.describe(v)).collect();
    if pauses.is_empty() {
        String::new()
    } else {
        format!("; write pause around the snapshot: {}", pauses.join(", "))
    }
}

/// The write pause of volume `v` of `log` around `window` (a snapshot's request → ready, on
/// the caller's clock; `on_clock` maps the log's ack times there).
pub fn write_pause(
    log: &OrderedLog,
    v: u32,
    on_clock: impl Fn(u64) -> u64,
    window: Option<(u64, u64)>,
) -> WritePause {
    let acks: Vec<u64> = log
        .records
        .iter()
        .filter(|r| r.volume == v && !r.failed)
        .map(|r| on_clock(r.ack_ns))
        .collect();
    let gaps: Vec<(u64, u64)> = acks
        .windows(2)
        .map(|w| (w[0], w[1].saturating_sub(w[0])))
        .collect();
    let mut sorted: Vec<u64> = gaps.iter().map(|g| g.1).collect();
    sorted.sort_unstable();
    let pause = window.and_then(|(from, to)| {
        gaps.iter()
            .filter(|(at, gap)| at + gap >= from && *at <= to)
            .max_by_key(|g| g.1)
            .copied()
    });
    WritePause {
        pause_ns: pause.map(|g| g.1),
        pause_from_ns: pause.map(|g| g.0),
        typical_gap_ns: sorted.get(sorted.len() / 2).copied(),
    }
}

/// What [`verify_cut`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CutReport {
    /// The decision.
    pub verdict: CutVerdict,
    /// Records in the log.
    pub log_writes: u64,
    /// Per member, blocks holding a write of this run.
    pub blocks_with_writes: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ordered::{LogRecord, LogVolume};

    fn header(volumes: usize, blocks: u64) -> LogHeader {
        LogHeader {
            nonce: 7,
            block: 512,
            writers: 1,
            volumes: (0..volumes)
                .map(|i| LogVolume {
                    path: format!("v{i}"),
                    region: blocks * 512,
                })
                .collect(),
            start_unix_ns: 0,
        }
    }

    /// A log of writes `(volume, block, acked_before)`, acknowledged in the order given, with
    /// sequence numbers from 1 in that order.
    fn log(volumes: usize, blocks: u64, writes: &[(u32, u64, u64)]) -> OrderedLog {
        OrderedLog {
            header: header(volumes, blocks),
            records: writes
                .iter()
                .enumerate()
                .map(|(i, &(volume, block, acked_before))| LogRecord {
                    seq: i as u64 + 1,
                    acked_before,
                    volume,
                    block,
                    failed: false,
                    submit_ns: i as u64 * 10,
                    ack_ns: i as u64 * 10 + 5,
                })
                .collect(),
        }
    }

    /// A chain: every write submitted after the previous one was acknowledged, round robin
    /// over `volumes`, block `i / volumes` (no overwrites).
    fn chain(volumes: usize, n: usize) -> OrderedLog {
        let w: Vec<_> = (0..n)
            .map(|i| ((i % volumes) as u32, (i / volumes) as u64, i as u64))
            .collect();
        log(volumes, 16, &w)
    }

    /// The images a state holds: for each volume, each block's write (seq) or empty.
    fn images(log: &OrderedLog, present: &[u64]) -> Vec<Vec<Seen>> {
        let mut out: Vec<Vec<Seen>> = (0..log.header.volumes.len())
            .map(|v| vec![Seen::Empty; log.header.blocks(v) as usize])
            .collect();
        for r in &log.records {
            if present.contains(&r.seq) {
                out[r.volume as usize][r.block as usize] = Seen::Write { seq: r.seq };
            }
        }
        out
    }

    #[test]
    fn a_prefix_of_a_chain_is_consistent_with_its_last_write_as_the_cut() {
        let l = chain(3, 9);
        let v = decide(&l, &images(&l, &[1, 2, 3, 4, 5, 6]));
        assert_eq!(
            v,
            CutVerdict::Consistent {
                cut_seq: 6,
                required: 5,
                in_flight_present: 1,
                in_flight_absent: 0
            },
            "{}",
            v.describe()
        );
        // Nothing written yet is a cut too (at 0).
        let v = decide(&l, &images(&l, &[]));
        assert!(
            matches!(v, CutVerdict::Consistent { cut_seq: 0, .. }),
            "{v:?}"
        );
    }

    #[test]
    fn a_gap_torn_across_volumes_names_the_missing_write_and_the_witness() {
        // Volume 1 was taken before write 5 (on volume 1), the others later: write 6 on
        // volume 2 was submitted after 5 was acknowledged.
        let l = chain(3, 9);
        let v = decide(&l, &images(&l, &[1, 2, 3, 4, 6, 7]));
        let CutVerdict::Torn {
            missing,
            present,
            missing_required,
        } = v
        else {
            panic!("expected torn, got {v:?}");
        };
        assert_eq!((missing.volume, missing.block, missing.seq), (1, 1, 5));
        assert_eq!((present.volume, present.block, present.seq), (2, 1, 6));
        assert_eq!(missing_required, 1);
    }

    #[test]
    fn writes_in_flight_at_the_cut_may_be_present_or_absent() {
        // Writes 1..3 each on its own volume, all submitted before any was acknowledged
        // (acked_before 0): any subset is a state the storage could have crashed in.
        let l = log(3, 4, &[(0, 0, 0), (1, 0, 0), (2, 0, 0), (0, 1, 3)]);
        for present in [&[][..], &[1], &[2, 3], &[1, 3], &[1, 2, 3]] {
            let v = decide(&l, &images(&l, present));
            assert!(v.is_consistent(), "{present:?}: {}", v.describe());
        }
        let CutVerdict::Consistent {
            in_flight_present,
            in_flight_absent,
            ..
        } = decide(&l, &images(&l, &[1, 3]))
        else {
            panic!("consistent");
        };
        assert_eq!((in_flight_present, in_flight_absent), (2, 1));
        // Write 4 was submitted after all three were acknowledged: with it, all three must be.
        assert!(decide(&l, &images(&l, &[1, 2, 3, 4])).is_consistent());
        let v = decide(&l, &images(&l, &[1, 3, 4]));
        assert!(
            matches!(
                v,
                CutVerdict::Torn {
                    missing: WriteRef { seq: 2, .. },
                    present: WriteRef { seq: 4, .. },
                    ..
                }
            ),
            "{v:?}"
        );
    }

    #[test]
    fn an_overwritten_block_shows_only_its_latest_write() {
        // Block 0 of volume 0 written three times (seqs 1, 3, 5), volume 1 block 0 in between.
        let l = log(
            2,
            2,
            &[(0, 0, 0), (1, 0, 1), (0, 0, 2), (1, 0, 3), (0, 0, 4)],
        );
        // Volume 0 shows seq 3 (so 1 is implied), volume 1 shows seq 2: a cut after 3.
        let v = decide(&l, &images(&l, &[2, 3]));
        assert!(
            matches!(v, CutVerdict::Consistent { cut_seq: 3, .. }),
            "{}",
            v.describe()
        );
        // Volume 0 shows 5 but volume 1 still 2: 4 was acknowledged before 5 was submitted.
        let v = decide(&l, &images(&l, &[2, 5]));
        assert!(
            matches!(
                v,
                CutVerdict::Torn {
                    missing: WriteRef {
                        seq: 4,
                        volume: 1,
                        ..
                    },
                    ..
                }
            ),
            "{}",
            v.describe()
        );
    }

    #[test]
    fn damaged_and_unlogged_blocks_are_named() {
        let l = chain(2, 4);
        let mut img = images(&l, &[1, 2]);
        img[1][1] = Seen::Corrupt {
            reason: Damage::Checksum,
        };
        assert!(matches!(
            decide(&l, &img),
            CutVerdict::Damaged {
                volume: 1,
                block: 1,
                reason: Damage::Checksum,
                count: 1,
                ..
            }
        ));
        let mut img = images(&l, &[1, 2]);
        // Seq 3 belongs to volume 0 block 1, not volume 1 block 1.
        img[1][1] = Seen::Write { seq: 3 };
        assert!(matches!(
            decide(&l, &img),
            CutVerdict::Damaged {
                volume: 1,
                block: 1,
                seq: Some(3),
                reason: Damage::Unlogged,
                ..
            }
        ));
    }

    #[test]
    fn a_failed_write_requires_nothing() {
        // Write 2 failed; write 3 (submitted after it) is present without it.
        let mut l = chain(2, 4);
        l.records[1].failed = true;
        assert!(decide(&l, &images(&l, &[1, 3])).is_consistent());
    }

    #[test]
    fn blocks_round_trip_through_classify() {
        let h = header(2, 4);
        let mut b = vec![0u8; 512];
        crate::ordered::fill_block(&mut b, 42, 1, 3 * 512, h.nonce);
        assert_eq!(classify(&b, &h, 1, 3), Seen::Write { seq: 42 });
        assert_eq!(
            classify(&b, &h, 0, 3),
            Seen::Corrupt {
                reason: Damage::Misplaced
            }
        );
        let mut other = h.clone();
        other.nonce = 8;
        assert_eq!(classify(&b, &other, 1, 3), Seen::Empty);
        b[100] ^= 1;
        assert_eq!(
            classify(&b, &h, 1, 3),
            Seen::Corrupt {
                reason: Damage::Checksum
            }
        );
        assert_eq!(classify(&[0u8; 512], &h, 1, 3), Seen::Empty);
    }

    #[test]
    fn logs_round_trip_and_truncation_is_named() {
        let l = chain(3, 7);
        let bytes = l.to_bytes();
        assert_eq!(
            OrderedLog::parse(&bytes, Path::new("x.log")).expect("parse"),
            l
        );
        let e = OrderedLog::parse(&bytes[..bytes.len() - 5], Path::new("x.log"))
            .expect_err("truncated");
        assert!(
            e.to_string().contains("x.log") && e.to_string().contains("truncated"),
            "{e}"
        );
    }
}
