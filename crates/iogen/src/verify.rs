//! Verify mode: self-describing blocks and the generation map.
//!
//! The region is cut into verify units (the phase's smallest block size). Every unit a
//! verify-mode write puts on disk starts with a 32-byte header and is filled with data derived
//! from its offset and generation:
//!
//! | bytes  | field                                                   |
//! |--------|---------------------------------------------------------|
//! | 0..8   | magic `IOGENVB1`                                        |
//! | 8..16  | byte offset of the unit in the target (u64 LE)          |
//! | 16..20 | write generation (u32 LE, 1 for the first write)        |
//! | 20..24 | unit size (u32 LE)                                      |
//! | 24..32 | checksum: 64-bit hash of bytes 0..24 and 32..size       |
//!
//! The generation map holds the last generation written to each unit (0 = never written by
//! iogen, not checked). Reads check magic, offset, checksum and generation; any difference is
//! a [`Mismatch`]. Within a job, no two in-flight requests share a unit (so the expected
//! generation is always exact); jobs own disjoint slices of the region. The map can be saved
//! and loaded so a later run (e.g. on a restored snapshot) verifies data written earlier.

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use serde::{Deserialize, Serialize};

use crate::Error;
use trace_format::splitmix::next as splitmix64;

const MAGIC: &[u8; 8] = b"IOGENVB1";
const HEADER: usize = 32;
/// Largest number of mismatches listed in a summary (all are counted).
pub(crate) const MAX_LISTED: usize = 1000;
const STATE_MAGIC: &[u8; 16] = b"iogen-verify-v1\n";

/// What is wrong with a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MismatchKind {
    /// No iogen header: the unit holds foreign data (or zeros).
    NoHeader,
    /// The header names another offset: data landed in the wrong place.
    WrongOffset,
    /// The checksum does not match: the content is corrupt.
    Checksum,
    /// Intact, but an older or newer generation than the last write: a lost or stale write.
    Generation,
}

/// One unit that failed verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mismatch {
    /// Byte offset of the unit.
    pub offset: u64,
    /// Generation the map expects.
    pub expected_gen: u32,
    /// Generation the header claims, if there is a header.
    pub actual_gen: Option<u32>,
    /// What is wrong.
    pub kind: MismatchKind,
}

/// Verify results of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifySummary {
    /// Verify unit size in bytes.
    pub unit: u64,
    /// Units read back and checked.
    pub checked: u64,
    /// Units read that iogen never wrote (not checked).
    pub unwritten: u64,
    /// Units the generation map does not know that hold an iogen block, checked for offset
    /// and checksum only (there is no generation to compare): a restored snapshot or copy read
    /// without the writer's map. A torn or misplaced block there is still a mismatch.
    #[serde(default)]
    pub intact: u64,
    /// Units written.
    pub written: u64,
    /// Failed units (all of them, even beyond the listed ones).
    pub mismatches: u64,
    /// The first failed units, in completion order.
    pub listed: Vec<Mismatch>,
}

impl VerifySummary {
    pub(crate) fn merge(&mut self, o: &VerifySummary) {
        self.checked += o.checked;
        self.unwritten += o.unwritten;
        self.intact += o.intact;
        self.written += o.written;
        self.mismatches += o.mismatches;
        let room = MAX_LISTED.saturating_sub(self.listed.len());
        self.listed.extend(o.listed.iter().take(room).cloned());
    }

    fn note(&mut self, m: Mismatch) {
        self.mismatches += 1;
        if self.listed.len() < MAX_LISTED {
            self.listed.push(m);
        }
    }
}

/// xxHash64-style hash (same primes and avalanche), over 8-byte words.
pub(crate) fn hash64(parts: &[&[u8]], seed: u64) -> u64 {
    const P1: u64 = 0x9E37_79B1_85EB_CA87;
    const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
    const P3: u64 = 0x1656_67B1_9E37_79F9;
    const P4: u64 = 0x85EB_CA77_C2B2_AE63;
    let mut h = seed.wrapping_add(P3);
    let mut total = 0u64;
    for p in parts {
        total += p.len() as u64;
        let mut words = p.chunks_exact(8);
        for w in &mut words {
            let k = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
            let k = k.wrapping_mul(P2).rotate_left(31).wrapping_mul(P1);
            h = (h ^ k).rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        }
        for &b in words.remainder() {
            h = (h ^ u64::from(b).wrapping_mul(P3))
                .rotate_left(11)
                .wrapping_mul(P1);
        }
    }
    h ^= total;
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

fn checksum(unit: &[u8]) -> u64 {
    hash64(&[&unit[..24], &unit[HEADER..]], 0x1060_5eed)
}

/// Fills one unit with its header and generated content.
pub(crate) fn fill_unit(unit: &mut [u8], offset: u64, generation: u32, salt: u64) {
    let mut s = offset ^ (u64::from(generation) << 40) ^ 0x5eed ^ salt;
    for w in unit[HEADER..].chunks_mut(8) {
        let v = splitmix64(&mut s).to_le_bytes();
        w.copy_from_slice(&v[..w.len()]);
    }
    unit[..8].copy_from_slice(MAGIC);
    unit[8..16].copy_from_slice(&offset.to_le_bytes());
    unit[16..20].copy_from_slice(&generation.to_le_bytes());
    let size = unit.len() as u32;
    unit[20..24].copy_from_slice(&size.to_le_bytes());
    let c = checksum(unit);
    unit[24..32].copy_from_slice(&c.to_le_bytes());
}

/// Checks one unit against the generation the map expects (> 0).
pub(crate) fn check_unit(unit: &[u8], offset: u64, expected: u32) -> Option<Mismatch> {
    let mism = |actual_gen, kind| {
        Some(Mismatch {
            offset,
            expected_gen: expected,
            actual_gen,
            kind,
        })
    };
    if &unit[..8] != MAGIC {
        return mism(None, MismatchKind::NoHeader);
    }
    let gen_ = u32::from_le_bytes(unit[16..20].try_into().unwrap_or([0; 4]));
    let stored = u64::from_le_bytes(unit[24..32].try_into().unwrap_or([0; 8]));
    if stored != checksum(unit) {
        return mism(Some(gen_), MismatchKind::Checksum);
    }
    if u64::from_le_bytes(unit[8..16].try_into().unwrap_or([0; 8])) != offset {
        return mism(Some(gen_), MismatchKind::WrongOffset);
    }
    if gen_ != expected {
        return mism(Some(gen_), MismatchKind::Generation);
    }
    None
}

/// Checks a unit that carries an iogen header but whose generation nobody knows: checksum
/// and offset only.
pub(crate) fn check_intact(unit: &[u8], offset: u64) -> Option<Mismatch> {
    let gen_ = u32::from_le_bytes(unit[16..20].try_into().unwrap_or([0; 4]));
    let kind = if u64::from_le_bytes(unit[24..32].try_into().unwrap_or([0; 8])) != checksum(unit) {
        MismatchKind::Checksum
    } else if u64::from_le_bytes(unit[8..16].try_into().unwrap_or([0; 8])) != offset {
        MismatchKind::WrongOffset
    } else {
        return None;
    };
    Some(Mismatch {
        offset,
        expected_gen: 0,
        actual_gen: Some(gen_),
        kind,
    })
}

/// Last written generation per unit of the region, shared by all jobs (each touches only its
/// own slice).
#[derive(Debug)]
pub(crate) struct GenMap {
    pub unit: u64,
    gens: Vec<AtomicU32>,
    /// Mixed into every block's content (not its header): this phase's blocks differ from
    /// any other phase's at the same offset and generation — another process that starts its
    /// generations again at 1 (an I/O pod) still changes every block it rewrites, which a
    /// content-compared delta must then list. Checks need only the header and checksum.
    pub salt: u64,
}

/// A salt no other phase shares: the clock's nanoseconds and the process id, mixed.
fn fresh_salt() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut s = now ^ (u64::from(std::process::id()) << 32);
    splitmix64(&mut s)
}

impl GenMap {
    pub(crate) fn new(unit: u64, region: u64) -> Self {
        let n = region / unit;
        GenMap {
            unit,
            gens: (0..n).map(|_| AtomicU32::new(0)).collect(),
            salt: fresh_salt(),
        }
    }

    pub(crate) fn units(&self) -> u64 {
        self.gens.len() as u64
    }

    pub(crate) fn get(&self, unit_index: u64) -> u32 {
        self.gens
            .get(unit_index as usize)
            .map_or(0, |g| g.load(Ordering::Relaxed))
    }

    pub(crate) fn set(&self, unit_index: u64, generation: u32) {
        if let Some(g) = self.gens.get(unit_index as usize) {
            g.store(generation, Ordering::Relaxed);
        }
    }

    /// Loads a saved map; it must have the same unit size and unit count.
    pub(crate) fn load(path: &Path, unit: u64, region: u64) -> Result<Self, Error> {
        let bad = |reason: String| Error::VerifyState {
            path: path.to_owned(),
            reason,
        };
        let bytes = fs_err::read(path)?;
        if bytes.len() < 32 || &bytes[..16] != STATE_MAGIC {
            return Err(bad("not an iogen verify state file".to_owned()));
        }
        let file_unit = u64::from_le_bytes(bytes[16..24].try_into().unwrap_or([0; 8]));
        let n = u64::from_le_bytes(bytes[24..32].try_into().unwrap_or([0; 8]));
        if file_unit != unit || n != region / unit {
            return Err(bad(format!(
                "saved for unit {file_unit} × {n} units, this phase has unit {unit} × {} units",
                region / unit
            )));
        }
        let body = &bytes[32..];
        if body.len() as u64 != n * 4 {
            return Err(bad(format!(
                "truncated: {} bytes of generations, expected {}",
                body.len(),
                n * 4
            )));
        }
        let gens = body
            .chunks_exact(4)
            .map(|c| AtomicU32::new(u32::from_le_bytes(c.try_into().unwrap_or([0; 4]))))
            .collect();
        Ok(GenMap {
            unit,
            gens,
            salt: fresh_salt(),
        })
    }

    pub(crate) fn save(&self, path: &Path) -> Result<(), Error> {
        let mut out = Vec::with_capacity(32 + self.gens.len() * 4);
        out.extend_from_slice(STATE_MAGIC);
        out.extend_from_slice(&self.unit.to_le_bytes());
        out.extend_from_slice(&self.units().to_le_bytes());
        for g in &self.gens {
            out.extend_from_slice(&g.load(Ordering::Relaxed).to_le_bytes());
        }
        let tmp = path.with_extension("tmp");
        fs_err::write(&tmp, out)?;
        fs_err::rename(&tmp, path)?;
        Ok(())
    }
}

/// One job's view: fills writes, checks reads, tracks units in flight.
pub(crate) struct Verifier<'a> {
    pub map: &'a GenMap,
    busy: Vec<u64>,
    pub summary: VerifySummary,
}

impl<'a> Verifier<'a> {
    pub(crate) fn new(map: &'a GenMap) -> Self {
        let words = map.units().div_ceil(64) as usize;
        Verifier {
            map,
            busy: vec![0; words],
            summary: VerifySummary {
                unit: map.unit,
                ..Default::default()
            },
        }
    }

    fn units(&self, offset: u64, len: u64) -> std::ops::Range<u64> {
        offset / self.map.unit..(offset + len).div_ceil(self.map.unit)
    }

    /// Whether any unit of the range is in flight.
    pub(crate) fn is_busy(&self, offset: u64, len: u64) -> bool {
        self.units(offset, len)
            .any(|u| self.busy[(u / 64) as usize] & (1 << (u % 64)) != 0)
    }

    fn set_busy(&mut self, offset: u64, len: u64, on: bool) {
        for u in self.units(offset, len) {
            let (w, b) = ((u / 64) as usize, 1u64 << (u % 64));
            if on {
                self.busy[w] |= b;
            } else {
                self.busy[w] &= !b;
            }
        }
    }

    /// Marks a read's units busy.
    pub(crate) fn start_read(&mut self, offset: u64, len: u64) {
        self.set_busy(offset, len, true);
    }

    /// Marks a write's units busy and fills `buf` with their next generation.
    pub(crate) fn start_write(&mut self, buf: &mut [u8], offset: u64, len: u64) {
        self.set_busy(offset, len, true);
        let unit = self.map.unit as usize;
        for (i, u) in self.units(offset, len).enumerate() {
            let g = self.map.get(u).wrapping_add(1).max(1);
            fill_unit(
                &mut buf[i * unit..(i + 1) * unit],
                u * self.map.unit,
                g,
                self.map.salt,
            );
        }
    }

    /// A write completed (`ok`: fully written): its units now hold the generation it wrote.
    pub(crate) fn end_write(&mut self, buf: &[u8], offset: u64, len: u64, ok: bool) {
        self.set_busy(offset, len, false);
        if !ok {
            return;
        }
        let unit = self.map.unit as usize;
        for (i, u) in self.units(offset, len).enumerate() {
            let g = u32::from_le_bytes(
                buf[i * unit + 16..i * unit + 20]
                    .try_into()
                    .unwrap_or([0; 4]),
            );
            self.map.set(u, g);
            self.summary.written += 1;
        }
    }

    /// A read completed with `got` bytes in `buf`: checks every whole unit.
    pub(crate) fn end_read(&mut self, buf: &[u8], offset: u64, len: u64, got: usize) {
        self.set_busy(offset, len, false);
        let unit = self.map.unit as usize;
        for (i, u) in self.units(offset, len).enumerate() {
            let expected = self.map.get(u);
            if expected == 0 {
                // Not written by this map's writer: an iogen block from elsewhere must still
                // be whole and in its place.
                let whole = got >= (i + 1) * unit;
                let data = &buf[i * unit..((i + 1) * unit).min(buf.len())];
                if whole && data.len() == unit && &data[..8] == MAGIC {
                    self.summary.intact += 1;
                    if let Some(m) = check_intact(data, u * self.map.unit) {
                        self.summary.note(m);
                    }
                } else {
                    self.summary.unwritten += 1;
                }
                continue;
            }
            self.summary.checked += 1;
            let at = u * self.map.unit;
            let m = if got < (i + 1) * unit {
                Some(Mismatch {
                    offset: at,
                    expected_gen: expected,
                    actual_gen: None,
                    kind: MismatchKind::NoHeader,
                })
            } else {
                check_unit(&buf[i * unit..(i + 1) * unit], at, expected)
            };
            if let Some(m) = m {
                self.summary.note(m);
            }
        }
    }
}
