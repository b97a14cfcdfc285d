//! The ordered-write log as text lines, for a writer whose caller cannot read its files: in
//! a pod, whose only channel back is its log. The writer streams its log as it acknowledges
//! writes (`iogen ordered --log -`: one line per record) and the caller rebuilds the binary
//! log from them. The log starts and ends with a marker line carrying the count of records
//! between, so a log cut short is an error, never a shorter state; other lines (iogen's own
//! summary on the pod's log) are ignored, a malformed line between the markers is an error
//! naming its line. The cut scan's text form is in `cut_wire`.

use std::path::Path;

use super::{LogHeader, LogRecord, OrderedLog};
use crate::Error;

/// First token of the log's marker lines.
pub const LOG_MARK: &str = "#iogen-ordered-log";

/// The log's first line: the marker, the format and the header as JSON.
pub(crate) fn log_begin(header: &LogHeader) -> String {
    format!(
        "{LOG_MARK} v1 {}\n",
        serde_json::to_string(header).unwrap_or_default()
    )
}

/// One record's line: `O seq acked_before volume block failed submit_ns ack_ns`.
pub(crate) fn log_record(r: &LogRecord) -> String {
    format!(
        "O {} {} {} {} {} {} {}\n",
        r.seq,
        r.acked_before,
        r.volume,
        r.block,
        u8::from(r.failed),
        r.submit_ns,
        r.ack_ns
    )
}

/// The log's last line, with the number of records.
pub(crate) fn log_end(count: u64) -> String {
    format!("{LOG_MARK} end {count}\n")
}

fn bad(name: &Path, line: usize, mut reason: String) -> Error {
    reason.insert_str(0, &format!("line {line}: "));
    Error::OrderedLog {
        path: name.to_owned(),
        reason,
    }
}

/// Rebuilds an ordered-write log from its text form inside `text` (a pod's log); `name` is
/// for messages. Checks the records as [`OrderedLog::parse`] does.
pub fn parse_log_text(text: &str, name: &Path) -> Result<OrderedLog, Error> {
    let mut header: Option<(usize, LogHeader)> = None;
    let mut records = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if let Some(rest) = line.strip_prefix(LOG_MARK) {
            let rest = rest.trim_start();
            if let Some(json) = rest.strip_prefix("v1 ") {
                if let Some((at, _)) = &header {
                    return Err(bad(
                        name,
                        n,
                        format!("a second log begins (the first at line {at})"),
                    ));
                }
                let h: LogHeader =
                    serde_json::from_str(json).map_err(|e| bad(name, n, format!("header: {e}")))?;
                header = Some((n, h));
                continue;
            }
            if let Some(count) = rest.strip_prefix("end ") {
                let count: u64 = count
                    .trim()
                    .parse()
                    .map_err(|e| bad(name, n, format!("record count {count:?}: {e}")))?;
                let Some((_, header)) = header else {
                    return Err(bad(name, n, "the log ends before it begins".into()));
                };
                if count != records.len() as u64 {
                    return Err(bad(
                        name,
                        n,
                        format!("the end says {count} records, {} were read", records.len()),
                    ));
                }
                // The binary form's checks (block ranges, acked_before) on the same records.
                let log = OrderedLog { header, records };
                return OrderedLog::parse(&log.to_bytes(), name);
            }
            return Err(bad(name, n, format!("unknown marker line {line:?}")));
        }
        let Some(rec) = line.strip_prefix("O ") else {
            continue;
        };
        if header.is_none() {
            return Err(bad(name, n, "a record before the log's first line".into()));
        }
        let f: Vec<&str> = rec.split(' ').collect();
        if f.len() != 7 {
            return Err(bad(name, n, format!("{} fields, a record has 7", f.len())));
        }
        const FIELDS: [&str; 7] = [
            "seq",
            "acked_before",
            "volume",
            "block",
            "failed",
            "submit_ns",
            "ack_ns",
        ];
        let mut v = [0u64; 7];
        for (k, s) in f.iter().enumerate() {
            v[k] = s
                .parse()
                .map_err(|e| bad(name, n, format!("{} {s:?}: {e}", FIELDS[k])))?;
        }
        records.push(LogRecord {
            seq: v[0],
            acked_before: v[1],
            volume: u32::try_from(v[2])
                .map_err(|_| bad(name, n, format!("volume {} is too large", v[2])))?,
            block: v[3],
            failed: match v[4] {
                0 => false,
                1 => true,
                x => return Err(bad(name, n, format!("failed {x}: 0 or 1"))),
            },
            submit_ns: v[5],
            ack_ns: v[6],
        });
    }
    Err(match header {
        None => bad(
            name,
            text.lines().count(),
            "no ordered-write log in it".into(),
        ),
        Some((at, _)) => bad(
            name,
            text.lines().count(),
            format!(
                "the log begun at line {at} has no end line ({} records read): the writer \
                 did not finish",
                records.len()
            ),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ordered::LogVolume;

    fn header() -> LogHeader {
        LogHeader {
            nonce: 9,
            block: 512,
            writers: 1,
            volumes: vec![
                LogVolume {
                    path: "/data/0/x".into(),
                    region: 512 * 8,
                },
                LogVolume {
                    path: "/data/1/x".into(),
                    region: 512 * 4,
                },
            ],
            start_unix_ns: 1,
        }
    }

    fn records() -> Vec<LogRecord> {
        (0..5u64)
            .map(|i| LogRecord {
                seq: i + 1,
                acked_before: i,
                volume: (i % 2) as u32,
                block: i % 4,
                failed: i == 3,
                submit_ns: 10 * i,
                ack_ns: 10 * i + 5,
            })
            .collect()
    }

    fn text(recs: &[LogRecord]) -> String {
        let mut s = String::from("iogen: starting\n");
        s += &log_begin(&header());
        for r in recs {
            s += &log_record(r);
        }
        s += &log_end(recs.len() as u64);
        s + "ordered writes: 4 acknowledged\n"
    }

    #[test]
    fn the_text_log_is_the_binary_log() {
        let log = parse_log_text(&text(&records()), Path::new("pod.log")).expect("parse");
        assert_eq!(log.header, header());
        assert_eq!(log.records, records());
    }

    #[test]
    fn a_log_cut_short_or_damaged_is_an_error_naming_its_line() {
        let full = text(&records());
        let cut: String = full.lines().take(4).map(|l| format!("{l}\n")).collect();
        let e = parse_log_text(&cut, Path::new("pod.log"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no end line") && e.contains("pod.log"), "{e}");
        let bad = full.replace("O 3 2 0 2 0 20 25", "O 3 2 0 x 0 20 25");
        let e = parse_log_text(&bad, Path::new("pod.log"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 5") && e.contains("block \"x\""), "{e}");
        let miscount = full.replace(&log_end(5), &log_end(6));
        let e = parse_log_text(&miscount, Path::new("pod.log"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("says 6 records, 5 were read"), "{e}");
        // A block outside its volume: the binary form's check.
        let outside = full.replace("O 2 1 1 1 0 10 15", "O 2 1 1 9 0 10 15");
        let e = parse_log_text(&outside, Path::new("pod.log"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside volume 1"), "{e}");
    }
}
