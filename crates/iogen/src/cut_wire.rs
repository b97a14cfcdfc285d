//! The ordered-write log and a cut scan as text lines, for writers and checkers that run
//! where the caller cannot read their files: in a pod, whose only channel back is its log.
//!
//! A pod's log is lines (the container runtime splits output at newlines and the kubelet
//! rotates it), and a restricted pod's root file system is read-only. So the writer streams
//! its log as it acknowledges writes (`iogen ordered --log -`: one line per record, the
//! caller rebuilds the binary log from them), and the checker does not need the log at all:
//! `iogen scan` prints what each restored member's blocks hold (the [`Seen`] of every block,
//! runs of empty blocks collapsed), and the caller decides with its copy of the log
//! ([`crate::cut::decide`]). Both forms start and end with a marker line carrying the count
//! of what lies between, so a log cut short is an error, never a shorter state. Other lines
//! (iogen's own summary on the pod's log) are ignored; a malformed line between the markers
//! is an error naming its line.

use std::io::Write;
use std::path::Path;

use crate::Error;
use crate::cut::{Damage, Seen};
use crate::ordered::{LogHeader, LogRecord, OrderedLog};

/// First token of the log's marker lines.
pub const LOG_MARK: &str = "#iogen-ordered-log";
/// First token of the scan's marker lines.
pub const SCAN_MARK: &str = "#iogen-cut-scan";
/// Tokens per line of a scan.
const PER_LINE: usize = 256;

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

fn seen_token(s: &Seen) -> String {
    match s {
        Seen::Empty => "e1".into(),
        Seen::Write { seq } => format!("w{seq}"),
        Seen::Corrupt { reason } => match reason {
            Damage::Checksum => "cc".into(),
            Damage::Misplaced => "cm".into(),
            Damage::Unlogged => "cu".into(),
        },
    }
}

/// Writes the scan of restored members (per volume, per block) as text.
pub fn write_scan(out: &mut impl Write, seen: &[Vec<Seen>]) -> std::io::Result<()> {
    writeln!(out, "{SCAN_MARK} v1 {}", seen.len())?;
    for (v, blocks) in seen.iter().enumerate() {
        writeln!(out, "V {v} {}", blocks.len())?;
        let mut tokens: Vec<String> = Vec::new();
        let mut empties = 0u64;
        for s in blocks {
            if *s == Seen::Empty {
                empties += 1;
                continue;
            }
            if empties > 0 {
                tokens.push(format!("e{empties}"));
                empties = 0;
            }
            tokens.push(seen_token(s));
        }
        if empties > 0 {
            tokens.push(format!("e{empties}"));
        }
        for chunk in tokens.chunks(PER_LINE) {
            writeln!(out, "S {}", chunk.join(" "))?;
        }
    }
    writeln!(out, "{SCAN_MARK} end {}", seen.len())
}

fn bad_scan(name: &Path, line: usize, mut reason: String) -> Error {
    reason.insert_str(0, &format!("{}: line {line}: ", name.display()));
    Error::InvalidSpec {
        field: "scan",
        reason,
    }
}

/// Reads a scan from `text` (a pod's log); `name` is for messages.
pub fn parse_scan(text: &str, name: &Path) -> Result<Vec<Vec<Seen>>, Error> {
    let mut volumes: Option<usize> = None;
    let mut seen: Vec<(usize, Vec<Seen>)> = Vec::new();
    let close = |seen: &[(usize, Vec<Seen>)], n: usize| -> Result<(), Error> {
        match seen.last() {
            Some((want, got)) if got.len() != *want => Err(bad_scan(
                name,
                n,
                format!(
                    "volume {} lists {} blocks, its line says {want}",
                    seen.len() - 1,
                    got.len()
                ),
            )),
            _ => Ok(()),
        }
    };
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if let Some(rest) = line.strip_prefix(SCAN_MARK) {
            let rest = rest.trim_start();
            if let Some(k) = rest.strip_prefix("v1 ") {
                if volumes.is_some() {
                    return Err(bad_scan(name, n, "a second scan begins".into()));
                }
                volumes = Some(
                    k.trim()
                        .parse()
                        .map_err(|e| bad_scan(name, n, format!("volumes {k:?}: {e}")))?,
                );
                continue;
            }
            if let Some(k) = rest.strip_prefix("end ") {
                close(&seen, n)?;
                let want = volumes
                    .ok_or_else(|| bad_scan(name, n, "the scan ends before it begins".into()))?;
                if k.trim() != want.to_string() || seen.len() != want {
                    return Err(bad_scan(
                        name,
                        n,
                        format!("{} volumes read, the scan announced {want}", seen.len()),
                    ));
                }
                return Ok(seen.into_iter().map(|(_, s)| s).collect());
            }
            return Err(bad_scan(name, n, format!("unknown marker line {line:?}")));
        }
        if volumes.is_none() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("V ") {
            close(&seen, n)?;
            let mut f = rest.split(' ');
            let (Some(v), Some(b), None) = (f.next(), f.next(), f.next()) else {
                return Err(bad_scan(
                    name,
                    n,
                    "a volume line is `V index blocks`".into(),
                ));
            };
            if v != seen.len().to_string() {
                return Err(bad_scan(
                    name,
                    n,
                    format!("volume {v} where volume {} comes next", seen.len()),
                ));
            }
            let b: usize = b
                .parse()
                .map_err(|e| bad_scan(name, n, format!("blocks {b:?}: {e}")))?;
            seen.push((b, Vec::with_capacity(b)));
            continue;
        }
        let Some(rest) = line.strip_prefix("S ") else {
            continue;
        };
        let Some((want, cur)) = seen.last_mut() else {
            return Err(bad_scan(name, n, "blocks before a volume line".into()));
        };
        for t in rest.split(' ') {
            let num = |s: &str| {
                s.parse::<u64>()
                    .map_err(|e| bad_scan(name, n, format!("token {t:?}: {e}")))
            };
            match t.split_at_checked(1) {
                Some(("e", k)) => {
                    let k = num(k)?;
                    if cur.len() as u64 + k > *want as u64 {
                        return Err(bad_scan(
                            name,
                            n,
                            format!("token {t:?} runs past the volume's {want} blocks"),
                        ));
                    }
                    cur.extend(std::iter::repeat_n(Seen::Empty, k as usize));
                }
                Some(("w", k)) => cur.push(Seen::Write { seq: num(k)? }),
                Some(("c", k)) => cur.push(Seen::Corrupt {
                    reason: match k {
                        "c" => Damage::Checksum,
                        "m" => Damage::Misplaced,
                        "u" => Damage::Unlogged,
                        _ => return Err(bad_scan(name, n, format!("token {t:?}: no such damage"))),
                    },
                }),
                _ => {
                    return Err(bad_scan(
                        name,
                        n,
                        format!("token {t:?}: not e<n>, w<seq> or c<x>"),
                    ));
                }
            }
            if cur.len() > *want {
                return Err(bad_scan(
                    name,
                    n,
                    format!("more blocks than the volume's {want}"),
                ));
            }
        }
    }
    Err(bad_scan(
        name,
        text.lines().count(),
        match volumes {
            None => "no cut scan in it".into(),
            Some(_) => format!(
                "the scan has no end line ({} volumes begun): the checker did not finish",
                seen.len()
            ),
        },
    ))
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

    #[test]
    fn a_scan_round_trips_and_a_short_one_is_an_error() {
        let seen = vec![
            vec![
                Seen::Empty,
                Seen::Empty,
                Seen::Write { seq: 4 },
                Seen::Corrupt {
                    reason: Damage::Misplaced,
                },
                Seen::Empty,
            ],
            vec![Seen::Write { seq: 1 }; PER_LINE + 3],
            vec![],
        ];
        let mut out = b"noise\n".to_vec();
        write_scan(&mut out, &seen).expect("write");
        let text = String::from_utf8(out).expect("utf8");
        assert_eq!(parse_scan(&text, Path::new("c.log")).expect("parse"), seen);
        let short: String = text.lines().take(4).map(|l| format!("{l}\n")).collect();
        let e = parse_scan(&short, Path::new("c.log"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no end line"), "{e}");
        let over = text.replace("V 0 5", "V 0 4");
        let e = parse_scan(&over, Path::new("c.log"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 4") && e.contains("runs past"), "{e}");
    }
}
