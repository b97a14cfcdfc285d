//! The text side: `blkparse`'s default output format.

use std::path::Path;

use trace_format::{Header, IoKind, TraceWriter};

use super::pairing::{Extents, Other, Pairer, Req};
use super::{Phase, SECTOR};
use crate::{BadInput, ImportError, ImportReport, Policy, Source};

/// One line of blkparse output.
enum Line {
    Blank,
    Summary,
    Other(Other),
    Req(Req),
}

fn parse_line(file: &str, line: u64, text: &str) -> Result<Line, BadInput> {
    let bad = |field: &str, message: String| BadInput {
        file: file.to_owned(),
        line,
        record: false,
        field: field.to_owned(),
        message,
    };
    let t = text.trim();
    if t.is_empty() {
        return Ok(Line::Blank);
    }
    let summary = t.starts_with("Total (")
        || t.strip_prefix("CPU").is_some_and(|r| {
            let d = r.trim_start_matches(|c: char| c.is_ascii_digit());
            d.len() < r.len() && d.starts_with(" (")
        });
    if summary {
        return Ok(Line::Summary);
    }
    let mut f = t.split_ascii_whitespace();
    let missing = |field: &str| bad(field, format!("missing {field}"));
    let num = |field: &str, s: &str| {
        s.parse::<u64>()
            .map_err(|_| bad(field, format!("{s:?} is not a non-negative integer")))
    };
    let dev = f.next().ok_or_else(|| missing("device"))?;
    let device = dev
        .split_once(',')
        .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
        .filter(|&(a, b)| a < 1 << 12 && b < 1 << 20)
        .map(|(a, b)| (a << 20) | b)
        .ok_or_else(|| bad("device", format!("{dev:?} is not MAJOR,MINOR")))?;
    num("cpu", f.next().ok_or_else(|| missing("cpu"))?)?;
    num("sequence", f.next().ok_or_else(|| missing("sequence"))?)?;
    let ts = f.next().ok_or_else(|| missing("time"))?;
    let time = ts
        .split_once('.')
        .filter(|(s, ns)| ns.len() == 9 && !s.is_empty())
        .and_then(|(s, ns)| {
            let (s, ns) = (s.parse::<u64>().ok()?, ns.parse::<u64>().ok()?);
            s.checked_mul(1_000_000_000)?.checked_add(ns)
        })
        .ok_or_else(|| {
            bad(
                "time",
                format!("{ts:?} is not SECONDS.NANOSECONDS (9 digits)"),
            )
        })?;
    num("pid", f.next().ok_or_else(|| missing("pid"))?)?;
    let phase = match f.next().ok_or_else(|| missing("action"))? {
        "D" => Phase::Issue,
        "C" => Phase::Complete,
        "m" => return Ok(Line::Other(Other::Notify)),
        _ => return Ok(Line::Other(Other::Action)),
    };
    let rwbs = f.next().ok_or_else(|| missing("rwbs"))?;
    let (flush, rest) = match rwbs.strip_prefix('F') {
        Some(r) => (true, r),
        None => (false, rwbs),
    };
    let kind = match rest.chars().next() {
        Some('D') => Some(IoKind::Trim),
        Some('W') => Some(IoKind::Write),
        Some('R') => Some(IoKind::Read),
        Some('N') if flush => Some(IoKind::Flush),
        Some('N') => None,
        _ => {
            return Err(bad(
                "rwbs",
                format!("{rwbs:?} is not an RWBS field (optional F, then D, W, R or N, …)"),
            ));
        }
    };
    // Details: [SECTOR [+ SECTORS]] then [comm] or [error]; a PC request's (cdb) is ignored.
    let mut sector = None;
    let mut bytes = 0;
    if let Some(s) = f
        .next()
        .filter(|s| !s.starts_with('[') && !s.starts_with('('))
    {
        sector = Some(num("sector", s)?);
        if f.next() == Some("+") {
            let n = num("sectors", f.next().ok_or_else(|| missing("sectors"))?)?;
            bytes = n
                .checked_mul(SECTOR)
                .filter(|b| u32::try_from(*b).is_ok())
                .ok_or_else(|| bad("sectors", format!("{n} sectors is too long")))?;
        }
        let s = sector.unwrap_or(0);
        if s.checked_mul(SECTOR)
            .and_then(|o| o.checked_add(bytes))
            .is_none()
        {
            return Err(bad(
                "sector",
                format!("sector {s} × 512 + {bytes} bytes overflows 64 bits"),
            ));
        }
    }
    Ok(Line::Req(Req {
        phase,
        time,
        device,
        sector: sector.filter(|_| bytes > 0),
        bytes,
        // A request without data is a flush or nothing (a 0-byte write is a preflush, `FWS`).
        kind: if bytes == 0 {
            flush.then_some(IoKind::Flush)
        } else {
            kind
        },
    }))
}

/// Imports `blkparse` output in its default format (`blkparse -i NAME > FILE`), up to its
/// summary. The same two passes and mapping as [`import_blktrace`]; a malformed line is a
/// [`BadInput`] with its line and field, handled by `policy`.
pub fn import_blkparse(
    path: &Path,
    policy: Policy,
    writer_factory: impl FnOnce(Header) -> Result<TraceWriter, trace_format::Error>,
) -> Result<ImportReport, ImportError> {
    import_blkparse_source(&Source::File(path.to_owned()), policy, writer_factory)
}

/// [`import_blkparse`] from any [`Source`] (e.g. bytes in memory).
pub fn import_blkparse_source(
    path: &Source,
    policy: Policy,
    writer_factory: impl FnOnce(Header) -> Result<TraceWriter, trace_format::Error>,
) -> Result<ImportReport, ImportError> {
    let file = path.name();
    let mut extents = Extents::default();
    crate::for_each_line(path, |line, text| {
        let Ok(text) = text else { return Ok(true) };
        Ok(match parse_line(&file, line, text) {
            Ok(Line::Summary) => false,
            Ok(Line::Req(q)) => {
                extents.add(&q);
                true
            }
            _ => true,
        })
    })?;
    let (header, names) = extents.header("blkparse-text", vec![file.clone()]);
    let mut report = ImportReport::default();
    let mut p = Pairer::new(
        extents.first_issue.unwrap_or(0),
        &names,
        writer_factory(header)?,
    );
    crate::for_each_line(path, |line, text| {
        let parsed = match text {
            Ok(t) => parse_line(&file, line, t),
            Err(e) => Err(BadInput {
                file: file.clone(),
                line,
                record: false,
                field: "line".to_owned(),
                message: format!("not UTF-8 text: {e}"),
            }),
        };
        match parsed {
            Ok(Line::Summary) => return Ok(false),
            Ok(Line::Blank) => {}
            Ok(Line::Other(o)) => p.other(o),
            Ok(Line::Req(q)) => p.request(q, &mut report)?,
            Err(b) => report.bad(policy, b)?,
        }
        Ok(true)
    })?;
    p.finish(&mut report)?;
    Ok(report)
}
