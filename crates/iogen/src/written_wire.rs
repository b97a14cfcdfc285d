//! A written set ([`crate::written`]) as text lines, for a writer in a pod whose only way back
//! is its log: `iogen phase --written-log -` prints, after the phase,
//!
//! ```text
//! iogen-written-begin v1 origin_unix_ns=N count=C
//! iogen-written OFFSET LEN SUBMITTED_NS ACKED_NS      (C lines, acknowledgement order)
//! iogen-written-end count=C
//! ```
//!
//! Times count from the phase's origin, whose Unix time (one [`crate::WallAnchor`] reading)
//! moves them onto the reader's run clock. Other lines may surround the block (the phase's
//! table); a block without its end line, or with another count, is refused — a cut log never
//! passes for a complete written set.

use crate::written::WriteRecord;

const BEGIN: &str = "iogen-written-begin v1 ";
const LINE: &str = "iogen-written ";
const END: &str = "iogen-written-end ";

/// A written set read back from a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The Unix time (ns) of the records' origin.
    pub origin_unix_ns: i128,
    /// The records, times from that origin.
    pub records: Vec<WriteRecord>,
}

/// The text block of `records` whose times count from `origin_unix_ns`.
pub fn to_text(records: &[WriteRecord], origin_unix_ns: i128) -> String {
    let mut s = String::with_capacity(64 + records.len() * 48);
    s += &format!(
        "{BEGIN}origin_unix_ns={origin_unix_ns} count={}\n",
        records.len()
    );
    for r in records {
        s += &format!(
            "{LINE}{} {} {} {}\n",
            r.offset, r.len, r.submitted_ns, r.acked_ns
        );
    }
    s += &format!("{END}count={}\n", records.len());
    s
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// The written set in `log` (`None`: the log holds none). Line numbers in errors are the
/// log's, from 1.
pub fn from_log(log: &str) -> Result<Option<Received>, String> {
    let mut lines = log.lines().enumerate();
    let Some((at, begin)) = lines.find(|(_, l)| l.starts_with(BEGIN)) else {
        return Ok(None);
    };
    let origin_unix_ns: i128 = field(begin, "origin_unix_ns")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("line {}: no origin_unix_ns in {begin:?}", at + 1))?;
    let count: usize = field(begin, "count")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("line {}: no count in {begin:?}", at + 1))?;
    let mut records = Vec::with_capacity(count);
    for (i, l) in lines {
        if let Some(rest) = l.strip_prefix(LINE) {
            let v: Vec<u64> = rest
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("line {}: {e} in {l:?}", i + 1))?;
            let [offset, len, submitted_ns, acked_ns] = v[..] else {
                return Err(format!(
                    "line {}: expected offset, length, submitted and acknowledged ns in {l:?}",
                    i + 1
                ));
            };
            if len == 0 || acked_ns < submitted_ns {
                return Err(format!("line {}: {l:?} is not a write", i + 1));
            }
            records.push(WriteRecord {
                offset,
                len,
                submitted_ns,
                acked_ns,
            });
        } else if l.starts_with(END) {
            let end: Option<usize> = field(l, "count").and_then(|v| v.parse().ok());
            if end != Some(count) || records.len() != count {
                return Err(format!(
                    "line {}: the written set announced {count} records, its end line says \
                     {end:?} and {} came",
                    i + 1,
                    records.len()
                ));
            }
            return Ok(Some(Received {
                origin_unix_ns,
                records,
            }));
        }
    }
    Err(format!(
        "the written set that began on line {} has no end line: {} of {count} records came \
         (the log was cut)",
        at + 1,
        records.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(offset: u64, s: u64, a: u64) -> WriteRecord {
        WriteRecord {
            offset,
            len: 4096,
            submitted_ns: s,
            acked_ns: a,
        }
    }

    #[test]
    fn a_written_set_survives_a_log_with_other_lines_around_it() {
        let recs = vec![rec(0, 10, 20), rec(8192, 15, 40), rec(4096, 30, 41)];
        let log = format!(
            "Tag=write,0.0,0.2\n{}table line\n",
            to_text(&recs, 1_790_000_000_123_456_789)
        );
        let got = from_log(&log).unwrap().unwrap();
        assert_eq!(got.origin_unix_ns, 1_790_000_000_123_456_789);
        assert_eq!(got.records, recs);
        assert_eq!(from_log("no set here\n").unwrap(), None);
    }

    #[test]
    fn a_cut_or_miscounted_set_is_refused_with_its_line() {
        let text = to_text(&[rec(0, 1, 2), rec(4096, 3, 4)], 7);
        let cut: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
        let e = from_log(&cut).unwrap_err();
        assert!(e.contains("has no end line: 1 of 2 records came"), "{e}");
        let e = from_log(&text.replace("end count=2", "end count=3")).unwrap_err();
        assert!(
            e.contains("line 4: the written set announced 2 records"),
            "{e}"
        );
        let e = from_log(&text.replace("iogen-written 0 4096 1 2", "iogen-written 0 x 1 2"))
            .unwrap_err();
        assert!(e.starts_with("line 2: "), "{e}");
        let e = from_log(&text.replace("iogen-written 0 4096 1 2", "iogen-written 0 4096 5 2"))
            .unwrap_err();
        assert!(e.contains("is not a write"), "{e}");
    }
}
