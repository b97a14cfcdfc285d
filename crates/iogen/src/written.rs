//! The written-set record: every write a phase had acknowledged, with its extent and its
//! submission and acknowledgement times on a clock the caller chooses (a run's origin).
//!
//! It exists for checks of changed-block tracking: a block whose write was submitted after
//! snapshot S1 was complete and acknowledged before snapshot S2 was requested must differ
//! between S1 and S2 (when every write puts new content there: verify mode stamps each write
//! with its own generation), so it must be in the storage's delta S1 → S2. Only the full list
//! answers that for any S1 and S2: a per-block latest time would lose a write in the window
//! that a later one overwrote.
//!
//! Each job keeps its records in memory (32 bytes per acknowledged write) and the phase writes
//! them at its end in acknowledgement order: a 16-byte magic, then fixed 32-byte little-endian
//! records `offset, len, submitted_ns, acked_ns`. A write that failed or came back short is
//! not recorded: it is not known to be on the storage.

use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::Error;

const MAGIC: &[u8; 16] = b"iogen-written-1\n";
const RECORD: usize = 32;

/// One acknowledged write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WriteRecord {
    /// Byte offset in the target.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// Submitted, ns since the record's origin.
    pub submitted_ns: u64,
    /// Acknowledged (completed successfully), ns since the record's origin.
    pub acked_ns: u64,
}

/// Where and on which clock a phase records its writes.
#[derive(Debug, Clone)]
pub struct WrittenSpec {
    /// The record file (created or replaced at the end of the phase); empty: none, the
    /// records are only in the phase's result (`PhaseResult::written`).
    pub path: PathBuf,
    /// Times are ns since this instant (e.g. the run's origin).
    pub origin: Instant,
}

fn bad(path: &Path, reason: String) -> Error {
    Error::WrittenLog {
        path: path.to_path_buf(),
        reason,
    }
}

/// Writes `records` (sorted here by acknowledgement time) to `path`.
pub fn write_records(path: &Path, records: &mut [WriteRecord]) -> Result<(), Error> {
    records.sort_by_key(|r| (r.acked_ns, r.offset));
    let mut w = BufWriter::new(fs_err::File::create(path)?);
    w.write_all(MAGIC)?;
    for r in records.iter() {
        for v in [r.offset, r.len, r.submitted_ns, r.acked_ns] {
            w.write_all(&v.to_le_bytes())?;
        }
    }
    w.into_inner()
        .map_err(|e| Error::Io(e.into_error()))?
        .sync_all()?;
    Ok(())
}

/// Reads a record file; a wrong magic or a torn last record is an error naming the file and
/// the record.
pub fn read_records(path: &Path) -> Result<Vec<WriteRecord>, Error> {
    let mut buf = Vec::new();
    fs_err::File::open(path)?.read_to_end(&mut buf)?;
    let Some(body) = buf.strip_prefix(MAGIC.as_slice()) else {
        return Err(bad(path, "not a written-set record (wrong magic)".into()));
    };
    if body.len() % RECORD != 0 {
        return Err(bad(
            path,
            format!(
                "record {} is torn: {} of {RECORD} bytes",
                body.len() / RECORD,
                body.len() % RECORD
            ),
        ));
    }
    let word = |c: &[u8], i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&c[i * 8..i * 8 + 8]);
        u64::from_le_bytes(b)
    };
    let mut out = Vec::with_capacity(body.len() / RECORD);
    for (i, c) in body.chunks_exact(RECORD).enumerate() {
        let r = WriteRecord {
            offset: word(c, 0),
            len: word(c, 1),
            submitted_ns: word(c, 2),
            acked_ns: word(c, 3),
        };
        if r.len == 0 || r.offset.checked_add(r.len).is_none() || r.acked_ns < r.submitted_ns {
            return Err(bad(
                path,
                format!(
                    "record {i}: offset {} len {} submitted {} ns acked {} ns is not a write",
                    r.offset, r.len, r.submitted_ns, r.acked_ns
                ),
            ));
        }
        out.push(r);
    }
    Ok(out)
}

/// The writes that must show in a delta from a snapshot complete at `after_ns` to one
/// requested at `before_ns`: submitted at or after the first and acknowledged at or before the
/// second (a write that straddles either snapshot may or may not be in it).
pub fn between(
    records: &[WriteRecord],
    after_ns: u64,
    before_ns: u64,
) -> impl Iterator<Item = &WriteRecord> {
    records
        .iter()
        .filter(move |r| r.submitted_ns >= after_ns && r.acked_ns <= before_ns)
}

/// A job's records while it runs: times on the worker's clock, shifted to the origin's at the
/// end.
#[derive(Debug, Default)]
pub(crate) struct Recording {
    pub(crate) records: Vec<WriteRecord>,
}

impl Recording {
    pub(crate) fn push(&mut self, offset: u64, len: u64, submitted: u64, acked: u64) {
        self.records.push(WriteRecord {
            offset,
            len,
            submitted_ns: submitted,
            acked_ns: acked,
        });
    }

    /// The records on the origin's clock, for a worker whose times count from `base`.
    pub(crate) fn finish(self, base: Instant, origin: Instant) -> Vec<WriteRecord> {
        let (ahead, behind) = match base.checked_duration_since(origin) {
            Some(d) => (d.as_nanos() as u64, 0),
            None => (0, origin.duration_since(base).as_nanos() as u64),
        };
        let shift = |t: u64| t.saturating_add(ahead).saturating_sub(behind);
        self.records
            .into_iter()
            .map(|r| WriteRecord {
                submitted_ns: shift(r.submitted_ns),
                acked_ns: shift(r.acked_ns),
                ..r
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(offset: u64, submitted_ns: u64, acked_ns: u64) -> WriteRecord {
        WriteRecord {
            offset,
            len: 4096,
            submitted_ns,
            acked_ns,
        }
    }

    #[test]
    fn records_round_trip_in_ack_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w");
        let mut rs = vec![rec(8192, 5, 9), rec(0, 1, 3), rec(4096, 2, 9)];
        write_records(&p, &mut rs).unwrap();
        let back = read_records(&p).unwrap();
        assert_eq!(back, [rec(0, 1, 3), rec(4096, 2, 9), rec(8192, 5, 9)]);
    }

    #[test]
    fn a_torn_or_foreign_file_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w");
        write_records(&p, &mut [rec(0, 1, 3), rec(4096, 2, 4)]).unwrap();
        let mut bytes = fs_err::read(&p).unwrap();
        bytes.truncate(bytes.len() - 5);
        fs_err::write(&p, &bytes).unwrap();
        let e = read_records(&p).unwrap_err().to_string();
        assert!(e.contains("record 1 is torn: 27 of 32 bytes"), "{e}");
        assert!(e.contains(&p.display().to_string()), "{e}");
        fs_err::write(&p, b"something else entirely").unwrap();
        let e = read_records(&p).unwrap_err().to_string();
        assert!(e.contains("wrong magic"), "{e}");
    }

    #[test]
    fn between_keeps_only_writes_wholly_inside_the_window() {
        let rs = [
            rec(0, 5, 12),  // submitted before the first snapshot was complete
            rec(1, 10, 15), // inside
            rec(2, 14, 20), // acknowledged exactly when the second was requested: inside
            rec(3, 19, 21), // acknowledged after the second was requested
        ];
        let got: Vec<u64> = between(&rs, 10, 20).map(|r| r.offset).collect();
        assert_eq!(got, [1, 2]);
    }

    #[test]
    fn finish_moves_times_onto_the_origin_clock() {
        let origin = Instant::now();
        let base = origin + std::time::Duration::from_nanos(1_000);
        let mut r = Recording::default();
        r.push(0, 4096, 10, 20);
        let out = r.finish(base, origin);
        assert_eq!((out[0].submitted_ns, out[0].acked_ns), (1_010, 1_020));
    }
}
