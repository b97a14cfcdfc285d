//! A cut scan as text lines, for a checker that runs where the caller cannot read its files:
//! in a pod, whose only channel back is its log.
//!
//! A pod's log is lines (the container runtime splits output at newlines and the kubelet
//! rotates it), and a restricted pod's root file system is read-only. So the checker does not
//! need the ordered-write log at all: `iogen scan` prints what each restored member's blocks
//! hold (the [`Seen`] of every block, runs of empty blocks collapsed), and the caller decides
//! with its copy of the log ([`crate::cut::decide`]). The scan starts and ends with a marker
//! line carrying the count of what lies between, so a scan cut short is an error, never a
//! shorter state. Other lines are ignored; a malformed line between the markers is an error
//! naming its line. The log's own text form (`iogen ordered --log -`) lives beside the log:
//! [`crate::ordered::log_text`], re-exported here.

use std::io::Write;
use std::path::Path;

pub use crate::ordered::log_text::{LOG_MARK, parse_log_text};

use crate::Error;
use crate::cut::{Damage, Seen};

/// First token of the scan's marker lines.
pub const SCAN_MARK: &str = "#iogen-cut-scan";
/// Tokens per line of a scan.
const PER_LINE: usize = 256;

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
