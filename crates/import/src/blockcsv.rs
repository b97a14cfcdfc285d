//! Block-trace CSV importers: MSR Cambridge, Alibaba block traces and Tencent CBS.
//!
//! **Formats** (comma separated, no header line, one request per line; blank lines are
//! skipped and a trailing `\r` is tolerated):
//!
//! - MSR Cambridge (`msr-cambridge-csv`): `Timestamp,Hostname,DiskNumber,Type,Offset,Size,
//!   ResponseTime`. `Timestamp` is a Windows FILETIME, 100 ns ticks since 1601-01-01 UTC;
//!   `Type` is `Read` or `Write` (any case); `Offset` and `Size` are bytes; `ResponseTime` is
//!   in 100 ns ticks and becomes `observed`. The volume is `<Hostname>-<DiskNumber>` through
//!   [`crate::fio::volume_name`] (`-2`, `-3`, … added if two disks sanitize alike; the
//!   original is kept in `provenance.parameters["disk.<volume>"]`).
//! - Alibaba (`alibaba-block-csv`): `device_id,opcode,offset,length,timestamp`; `opcode` is
//!   `R` or `W`, `offset` and `length` are bytes, `timestamp` is µs since the Unix epoch. The
//!   volume is `dev-<device_id>`. The optional `device_size.csv` holds `device_id,capacity`
//!   lines (capacity in bytes, as the dataset's README documents it); the README does not say
//!   whether the file starts with a header line, so a first line `device_id,capacity` is
//!   skipped. A listed device is declared with exactly its capacity and an I/O reaching past
//!   it is bad input; a device missing from the file gets the rule below, with a warning.
//! - Tencent CBS (`tencent-cbs-csv`): `Timestamp,Offset,Size,IOType,VolumeID`; `Timestamp`
//!   is in Unix seconds, `Offset` and `Size` in 512-byte sectors, `IOType` `0` = read and
//!   `1` = write. The volume is `vol-<VolumeID>`.
//!
//! **Tencent time spreading.** Timestamps have 1 s resolution, so the requests of one second
//! are spread deterministically: *within each (file, second) group of k requests, request i
//! (0-based, file order) gets at = second + i × 1 s / k (integer nanoseconds, rounded down)*.
//! Three requests in one second land at +0, +333333333 and +666666666 ns. To know k, the
//! importer buffers one second of each file at a time, so memory is bounded by the busiest
//! second of a file, not by the trace. A skipped bad line does not count in k.
//!
//! **Time and order.** Several input files are merged by time: each file must be sorted (a
//! line whose time goes backwards within its file is bad input), and a k-way merge holding one
//! request per file (one second per file for Tencent) emits them in time order, ties going to
//! the file named first. `at` counts nanoseconds since the earliest timestamp of the whole
//! input, which pass 1 finds. That instant is the header's `origin` (the wall clock of `at =
//! 0`), also written as RFC 3339 text to `provenance.parameters["origin"]`. Ids are sequential
//! from 0.
//!
//! **Volumes.** Pass 1 collects every volume and the furthest byte reached; each is declared
//! in the header with that size rounded up to 1 MiB, at least 1 MiB (Alibaba: the
//! `device_size.csv` capacity when listed).
//!
//! **Bad input.** Every malformed line (wrong number of fields, a non-numeric or negative
//! number, an unknown type or opcode, a 0-byte request — the trace checker rejects it —, an
//! offset + size or a sector × 512 or a time in nanoseconds overflowing 64 bits, a time going
//! backwards, non-UTF-8 text) is a located [`BadInput`] handed to [`ImportReport::bad`]. Both
//! passes run the same parser, so a skipped line contributes nothing to volumes or times.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use trace_format::{Event, Header, Io, IoKind, Name, Op, TraceWriter, VolumeDecl};

mod formats;

use formats::{Alibaba, Msr, Tencent};

use crate::fio::unique_names;
use crate::{BadInput, ImportError, ImportReport, Policy, Source};

const NS_PER_S: u64 = 1_000_000_000;
/// Seconds from 1601-01-01 (the FILETIME epoch) to 1970-01-01.
const FILETIME_TO_UNIX_S: i64 = 11_644_473_600;

/// One parsed request.
#[derive(Debug, Clone)]
struct Rec {
    /// Nanoseconds since the format's epoch.
    t: u64,
    /// Volume key: the final name (Alibaba, Tencent) or the unsanitized disk (MSR).
    volume: Arc<str>,
    kind: IoKind,
    offset: u64,
    len: u64,
    observed: Option<u64>,
}

/// Field `i` without surrounding blanks (empty when missing; counts are checked first).
fn field<'f>(fields: &[&'f str], i: usize) -> &'f str {
    fields.get(i).copied().unwrap_or("").trim()
}

/// Locates problems in one line of one file.
struct Loc<'a> {
    file: &'a str,
    line: u64,
    columns: &'static [&'static str],
}

impl Loc<'_> {
    fn bad(&self, field: impl Into<String>, message: impl Into<String>) -> BadInput {
        BadInput {
            file: self.file.to_owned(),
            line: self.line,
            record: false,
            field: field.into(),
            message: message.into(),
        }
    }

    /// A problem in column `i` (0-based), named `column N (Name)`.
    fn col(&self, i: usize, message: impl Into<String>) -> BadInput {
        let name = self.columns.get(i).copied().unwrap_or("?");
        self.bad(format!("column {} ({name})", i + 1), message)
    }

    fn number(&self, fields: &[&str], i: usize) -> Result<u64, BadInput> {
        let text = field(fields, i);
        text.parse::<u64>()
            .map_err(|_| self.col(i, format!("{text:?} is not a non-negative integer")))
    }

    /// `value × factor`, or a bad column saying what overflowed.
    fn scale(&self, i: usize, value: u64, factor: u64, what: &str) -> Result<u64, BadInput> {
        value
            .checked_mul(factor)
            .ok_or_else(|| self.col(i, format!("{what} overflows 64 bits")))
    }

    /// Checks that a request is not empty and that `offset + len` fits.
    fn extent(&self, len_col: usize, offset: u64, len: u64) -> Result<u64, BadInput> {
        let name = self.columns.get(len_col).copied().unwrap_or("?");
        if len == 0 {
            return Err(self.col(len_col, format!("{name} is 0 (a request of 0 bytes)")));
        }
        offset
            .checked_add(len)
            .ok_or_else(|| self.col(len_col, format!("offset + {name} overflows 64 bits")))
    }
}

/// One block-trace CSV format: its columns and its line parser.
trait Format {
    /// `provenance.source_format`.
    const SOURCE_FORMAT: &'static str;
    /// Column names, in order.
    const COLUMNS: &'static [&'static str];
    /// Seconds from the Unix epoch to the format's time 0 (negative: earlier).
    const EPOCH_UNIX_S: i64;
    /// Whether timestamps are whole seconds to spread (Tencent).
    const SPREAD: bool;
    /// The time column (0-based) and nanoseconds per unit of it.
    const TIME: (usize, u64);
    /// Whether volume keys are raw text to sanitize into names (MSR).
    const SANITIZE: bool = false;
    /// The capacity the user gave for a volume key (Alibaba's `device_size.csv`).
    fn capacity(&self, _key: &str) -> Option<u64> {
        None
    }
    /// Parses the fields of one line (their count already checked).
    fn parse(&self, loc: &Loc<'_>, fields: &[&str], keys: &mut Keys) -> Result<Rec, BadInput>;
}

/// A non-blank line: where it is, and its fields or why they are bad.
type Line<'l> = (Loc<'l>, Result<Fields<'l>, BadInput>);

/// The fields of a line, without allocating (at most [`Fields::MAX`]).
struct Fields<'l> {
    arr: [&'l str; Fields::MAX],
    n: usize,
}

impl Fields<'_> {
    const MAX: usize = 8;
}

impl<'l> std::ops::Deref for Fields<'l> {
    type Target = [&'l str];
    fn deref(&self) -> &[&'l str] {
        self.arr.get(..self.n).unwrap_or(&[])
    }
}

/// Volume keys of one file, shared (one allocation per volume, not per line) while lines
/// name a few volumes at a time.
#[derive(Default)]
struct Keys {
    recent: Vec<(String, u64, Arc<str>)>,
}

impl Keys {
    const MAX: usize = 64;

    /// The key of volume (`text`, `id`), made by `make` the first time.
    fn get(&mut self, text: &str, id: u64, make: impl FnOnce() -> String) -> Arc<str> {
        if let Some((_, _, k)) = self.recent.iter().find(|(t, i, _)| *i == id && t == text) {
            return Arc::clone(k);
        }
        if self.recent.len() >= Self::MAX {
            self.recent.clear();
        }
        let k: Arc<str> = Arc::from(make());
        self.recent.push((text.to_owned(), id, Arc::clone(&k)));
        k
    }
}

/// The lines of one file, split into fields.
struct Lines {
    file: String,
    reader: Box<dyn BufRead + Send>,
    buf: Vec<u8>,
    line: u64,
    /// The line number of a column-name line that was skipped (the first non-blank line,
    /// naming the format's columns), for the report.
    header_line: Option<u64>,
}

impl Lines {
    fn open(src: &Source) -> Result<Self, ImportError> {
        Ok(Self {
            file: src.name(),
            reader: src.open()?,
            buf: Vec::new(),
            line: 0,
            header_line: None,
        })
    }

    /// The next non-blank line's fields, or why they are bad (not UTF-8, wrong count). A
    /// UTF-8 byte-order mark before the first line is dropped, and a first non-blank line
    /// that names the format's columns (`Timestamp,Hostname,…`, any case) is skipped and
    /// remembered in `header_line`.
    fn next(&mut self, columns: &'static [&'static str]) -> Result<Option<Line<'_>>, ImportError> {
        let mut first = self.line == 0;
        loop {
            self.buf.clear();
            if self.reader.read_until(b'\n', &mut self.buf)? == 0 {
                return Ok(None);
            }
            self.line += 1;
            if self.line == 1 && self.buf.starts_with(b"\xEF\xBB\xBF") {
                self.buf.drain(..3);
            }
            if self.buf.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if first && self.header_line.is_none() && names_columns(&self.buf, columns) {
                self.header_line = Some(self.line);
                first = false;
                continue;
            }
            break;
        }
        let loc = Loc {
            file: &self.file,
            line: self.line,
            columns,
        };
        let fields = match std::str::from_utf8(&self.buf) {
            Err(e) => Err(loc.bad("line", format!("not UTF-8 text: {e}"))),
            Ok(text) => {
                let text = text.trim_end_matches('\n').trim_end_matches('\r');
                let mut fields = Fields {
                    arr: [""; Fields::MAX],
                    n: 0,
                };
                let mut count = 0;
                for f in text.split(',') {
                    if let Some(slot) = fields.arr.get_mut(count) {
                        *slot = f;
                    }
                    count += 1;
                }
                fields.n = count.min(Fields::MAX);
                if count == columns.len() {
                    Ok(fields)
                } else {
                    Err(loc.bad(
                        "line",
                        format!(
                            "expected {} comma-separated fields ({}), found {}",
                            columns.len(),
                            columns.join(","),
                            count
                        ),
                    ))
                }
            }
        };
        Ok(Some((loc, fields)))
    }
}

/// Whether a line is the format's column names (comma-separated, any case, spaces trimmed).
fn names_columns(line: &[u8], columns: &[&str]) -> bool {
    let Ok(text) = std::str::from_utf8(line) else {
        return false;
    };
    let names: Vec<&str> = text.trim_end().split(',').map(str::trim).collect();
    names.len() == columns.len()
        && names
            .iter()
            .zip(columns)
            .all(|(n, c)| n.eq_ignore_ascii_case(c))
}

/// Reads one file's requests in order, checking that time does not go backwards, and (for a
/// spreading format) assigning times within each second.
struct Cursor<'a, F: Format> {
    fmt: &'a F,
    lines: Lines,
    keys: Keys,
    /// Time of the last accepted line.
    last_t: Option<u64>,
    /// Spreading: the rest of the current second, times already assigned.
    group: VecDeque<Rec>,
    /// Spreading: the first request of the next second.
    ahead: Option<Rec>,
}

type OnBad<'b> = dyn FnMut(BadInput) -> Result<(), ImportError> + 'b;

impl<'a, F: Format> Cursor<'a, F> {
    fn open(fmt: &'a F, path: &Source) -> Result<Self, ImportError> {
        Ok(Self {
            fmt,
            lines: Lines::open(path)?,
            keys: Keys::default(),
            last_t: None,
            group: VecDeque::new(),
            ahead: None,
        })
    }

    /// The next well-formed line; bad lines go to `on_bad`.
    fn raw_next(&mut self, on_bad: &mut OnBad<'_>) -> Result<Option<Rec>, ImportError> {
        while let Some((loc, fields)) = self.lines.next(F::COLUMNS)? {
            let last_t = self.last_t;
            let parsed = fields
                .and_then(|f| self.fmt.parse(&loc, &f, &mut self.keys))
                .and_then(|r| match last_t {
                    Some(prev) if r.t < prev => Err(loc.col(
                        F::TIME.0,
                        format!(
                            "time goes backwards within this file ({} after {}); each input \
                             file must be sorted by time",
                            r.t / F::TIME.1,
                            prev / F::TIME.1,
                        ),
                    )),
                    _ => Ok(r),
                });
            match parsed {
                Ok(r) => {
                    self.last_t = Some(r.t);
                    return Ok(Some(r));
                }
                Err(b) => on_bad(b)?,
            }
        }
        Ok(None)
    }

    /// The next request, with its final absolute time in `t`.
    fn next(&mut self, on_bad: &mut OnBad<'_>) -> Result<Option<Rec>, ImportError> {
        if !F::SPREAD {
            return self.raw_next(on_bad);
        }
        if self.group.is_empty() {
            let first = match self.ahead.take() {
                Some(r) => r,
                None => match self.raw_next(on_bad)? {
                    Some(r) => r,
                    None => return Ok(None),
                },
            };
            let second = first.t;
            self.group.push_back(first);
            while let Some(r) = self.raw_next(on_bad)? {
                if r.t == second {
                    self.group.push_back(r);
                } else {
                    self.ahead = Some(r);
                    break;
                }
            }
            let k = self.group.len() as u128;
            for (i, r) in self.group.iter_mut().enumerate() {
                // < 1 s, and the parser checked that second + 1 s − 1 ns fits.
                let step = (i as u128 * u128::from(NS_PER_S) / k) as u64;
                r.t = second.saturating_add(step);
            }
        }
        Ok(self.group.pop_front())
    }
}

/// RFC 3339 text (UTC, `Z`, fractional seconds without trailing zeros) of `t_ns` after the
/// format's epoch.
fn rfc3339<F: Format>(t_ns: u64) -> String {
    let ns = i128::from(t_ns) + i128::from(F::EPOCH_UNIX_S) * i128::from(NS_PER_S);
    let secs = ns.div_euclid(i128::from(NS_PER_S));
    let frac = ns.rem_euclid(i128::from(NS_PER_S));
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i128::from(month <= 2);
    let mut out = format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    );
    if frac != 0 {
        let digits = format!("{frac:09}");
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
    out.push('Z');
    out
}

/// The shared engine: pass 1 (volumes, extents, earliest time), header, pass 2 (merge, emit).
fn import<F: Format>(
    fmt: &F,
    paths: &[Source],
    mut parameters: BTreeMap<String, String>,
    mut report: ImportReport,
    policy: Policy,
    writer_factory: impl FnOnce(Header) -> Result<TraceWriter, trace_format::Error>,
) -> Result<ImportReport, ImportError> {
    let files: Vec<String> = paths.iter().map(Source::name).collect();

    // Pass 1: volumes and their extents, and the earliest time; bad lines wait for pass 2.
    let mut extents: BTreeMap<String, u64> = BTreeMap::new();
    let mut earliest: Option<u64> = None;
    for path in paths {
        let mut c = Cursor::open(fmt, path)?;
        while let Some(r) = c.next(&mut |_| Ok(()))? {
            earliest = Some(earliest.map_or(r.t, |e| e.min(r.t)));
            let reach = r.offset.saturating_add(r.len);
            match extents.get_mut(&*r.volume) {
                Some(end) => *end = (*end).max(reach),
                None => {
                    extents.insert(r.volume.to_string(), reach);
                }
            }
        }
        if let Some(n) = c.lines.header_line {
            report.warnings.push(format!(
                "{}:{n}: a line of column names ({}), skipped",
                path.name(),
                F::COLUMNS.join(",")
            ));
        }
    }
    let origin = earliest.unwrap_or(0);

    let names = if F::SANITIZE {
        unique_names(extents.keys().cloned())
    } else {
        extents.keys().map(|k| (k.clone(), Name::new(k))).collect()
    };
    let mut volumes = Vec::with_capacity(extents.len());
    let mut unlisted = 0u64;
    for (key, end) in &extents {
        let Some(name) = names.get(key) else { continue };
        let listed = fmt.capacity(key);
        if F::SANITIZE {
            parameters.insert(format!("disk.{name}"), key.clone());
        }
        // Round up to 1 MiB, at least 1 MiB; an end too close to 2^64 keeps its exact value.
        let size = listed.unwrap_or_else(|| crate::volume_size(*end));
        unlisted += u64::from(listed.is_none());
        volumes.push(VolumeDecl {
            name: name.clone(),
            size: Some(size),
            storage_class: None,
            access_mode: None,
            // Device-level requests: the volume is a raw block device (no file system).
            volume_mode: Some(trace_format::VolumeMode::Block),
            attributes_class: None,
        });
    }
    if parameters.contains_key("device_sizes") && unlisted > 0 {
        report.warnings.push(format!(
            "{unlisted} devices are not in the device_size file; their size is the furthest \
             byte reached, rounded up to 1 MiB"
        ));
    }
    if earliest.is_some() {
        parameters.insert("origin".to_owned(), rfc3339::<F>(origin));
    }
    let mut header = crate::header(F::SOURCE_FORMAT, files, parameters, volumes);
    if earliest.is_some() {
        let ns = i128::from(origin) + i128::from(F::EPOCH_UNIX_S) * i128::from(NS_PER_S);
        header.origin = jiff::Timestamp::from_nanosecond(ns).ok();
    }
    let mut writer = writer_factory(header)?;

    // Pass 2: a k-way merge by (time, file index), one buffered request per file.
    let mut cursors = paths
        .iter()
        .map(|p| Cursor::open(fmt, p))
        .collect::<Result<Vec<_>, _>>()?;
    let mut heads: Vec<Option<Rec>> = Vec::with_capacity(cursors.len());
    let mut heap = BinaryHeap::new();
    for (i, c) in cursors.iter_mut().enumerate() {
        let head = c.next(&mut |b| report.bad(policy, b))?;
        if let Some(r) = &head {
            heap.push(Reverse((r.t, i)));
        }
        heads.push(head);
    }
    let mut last: Option<(Arc<str>, Name)> = None;
    while let Some(Reverse((_, i))) = heap.pop() {
        let (Some(slot), Some(c)) = (heads.get_mut(i), cursors.get_mut(i)) else {
            continue;
        };
        let Some(r) = slot.take() else { continue };
        *slot = c.next(&mut |b| report.bad(policy, b))?;
        if let Some(n) = slot.as_ref() {
            heap.push(Reverse((n.t, i)));
        }
        // Consecutive requests usually share their key (the same `Arc`): skip the lookup.
        let cached = last
            .as_ref()
            .filter(|(k, _)| Arc::ptr_eq(k, &r.volume))
            .map(|(_, n)| n.clone());
        let Some(volume) = cached.or_else(|| names.get(&*r.volume).cloned()) else {
            let loc = Loc {
                file: &c.lines.file,
                line: c.lines.line,
                columns: F::COLUMNS,
            };
            report.bad(policy, loc.bad("line", "volume not seen in the first pass"))?;
            continue;
        };
        last = Some((Arc::clone(&r.volume), volume.clone()));
        writer.write(&Event {
            at: r.t.saturating_sub(origin),
            id: report.events,
            tenant: None,
            observed: r.observed,
            op: Op::Io(Io {
                volume,
                kind: r.kind,
                offset: r.offset,
                len: r.len,
            }),
        })?;
        report.events += 1;
    }
    writer.finish()?;
    Ok(report)
}

fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Imports MSR Cambridge CSV files (see the module documentation).
///
/// Pass 1 finds every disk, the furthest byte it reaches and the earliest timestamp; the
/// header is then handed to `writer_factory`, and pass 2 merges the files by time and streams
/// the events into the writer, which is finished on success. Bad lines follow `policy`; on
/// error the writer is dropped unfinished.
pub fn import_msr(
    paths: &[PathBuf],
    policy: Policy,
    writer_factory: impl FnOnce(Header) -> Result<TraceWriter, trace_format::Error>,
) -> Result<ImportReport, ImportError> {
    import_msr_sources(&Source::files(paths), policy, writer_factory)
}

/// [`import_msr`] from any [`Source`]s (e.g. bytes in memory).
pub fn import_msr_sources(
    paths: &[Source],
    policy: Policy,
    writer_factory: impl FnOnce(Header) -> Result<TraceWriter, trace_format::Error>,
) -> Result<ImportReport, ImportError> {
    let parameters = params(&[("time_unit", "filetime_100ns")]);
    import(
        &Msr,
        paths,
        parameters,
        ImportReport::default(),
        policy,
        writer_factory,
    )
}

/// Imports Alibaba block-trace CSV files, with the device capacities of `device_sizes`
/// (`device_size.csv`) when given; like [`import_msr`] otherwise. Bad lines of the
/// `device_sizes` file also follow `policy` (a skipped one leaves its device unlisted).
pub fn import_alibaba(
    paths: &[PathBuf],
    device_sizes: Option<&Path>,
    policy: Policy,
    writer_factory: impl FnOnce(Header) -> Result<TraceWriter, trace_format::Error>,
) -> Result<ImportReport, ImportError> {
    import_alibaba_sources(&Source::files(paths), device_sizes, policy, writer_factory)
}

/// [`import_alibaba`] from any [`Source`]s (e.g. bytes in memory).
pub fn import_alibaba_sources(
    paths: &[Source],
    device_sizes: Option<&Path>,
    policy: Policy,
    writer_factory: impl FnOnce(Header) -> Result<TraceWriter, trace_format::Error>,
) -> Result<ImportReport, ImportError> {
    let mut report = ImportReport::default();
    let mut parameters = params(&[("time_unit", "unix_us")]);
    let sizes = match device_sizes {
        None => None,
        Some(path) => {
            parameters.insert("device_sizes".to_owned(), path.display().to_string());
            Some(read_device_sizes(path, policy, &mut report)?)
        }
    };
    import(
        &Alibaba { sizes },
        paths,
        parameters,
        report,
        policy,
        writer_factory,
    )
}

/// Reads `device_size.csv`: `device_id,capacity` lines, an optional header line first.
fn read_device_sizes(
    path: &Path,
    policy: Policy,
    report: &mut ImportReport,
) -> Result<HashMap<u64, u64>, ImportError> {
    let mut sizes = HashMap::new();
    let mut lines = Lines::open(&Source::File(path.to_owned()))?;
    while let Some((loc, fields)) = lines.next(&["device_id", "capacity"])? {
        let parsed = fields.and_then(|f| {
            if loc.line == 1 && field(&f, 0) == "device_id" && field(&f, 1) == "capacity" {
                return Ok(None);
            }
            let (id, cap) = (loc.number(&f, 0)?, loc.number(&f, 1)?);
            if cap == 0 {
                Err(loc.col(1, "capacity is 0"))
            } else if sizes.contains_key(&id) {
                Err(loc.col(0, format!("device {id} is listed twice")))
            } else {
                Ok(Some((id, cap)))
            }
        });
        match parsed {
            Ok(Some((id, cap))) => {
                sizes.insert(id, cap);
            }
            Ok(None) => {}
            Err(b) => report.bad(policy, b)?,
        }
    }
    Ok(sizes)
}

/// Imports Tencent CBS CSV files, spreading each second's requests as the module
/// documentation says; like [`import_msr`] otherwise.
pub fn import_tencent(
    paths: &[PathBuf],
    policy: Policy,
    writer_factory: impl FnOnce(Header) -> Result<TraceWriter, trace_format::Error>,
) -> Result<ImportReport, ImportError> {
    import_tencent_sources(&Source::files(paths), policy, writer_factory)
}

/// [`import_tencent`] from any [`Source`]s (e.g. bytes in memory).
pub fn import_tencent_sources(
    paths: &[Source],
    policy: Policy,
    writer_factory: impl FnOnce(Header) -> Result<TraceWriter, trace_format::Error>,
) -> Result<ImportReport, ImportError> {
    let parameters = params(&[
        ("time_unit", "unix_s"),
        ("sector_size", "512"),
        (
            "spread",
            "request i of k in a (file, second) gets at = second + i * 1s / k",
        ),
    ]);
    import(
        &Tencent,
        paths,
        parameters,
        ImportReport::default(),
        policy,
        writer_factory,
    )
}
