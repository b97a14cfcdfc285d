//! fio iologs (`--write_iolog` / `--read_iolog`), versions 2 and 3: importer and v3 exporter.
//!
//! **Format, as fio's `iolog.c` reads and writes it** (checked against fio master f5344384 and
//! real fio 3.33 output). The first line is `fio version 2 iolog` or `fio version 3 iolog`.
//! Then, one action per line, whitespace separated (fio uses `sscanf("%s")`, so file names
//! cannot contain blanks):
//!
//! - v2: `FILE add|open|close` and `FILE read|write|trim|sync|datasync|wait OFFSET LENGTH`.
//!   `wait` holds its delay in the `OFFSET` field; it is read here as microseconds relative to
//!   the previous wait, as fio's HOWTO documents, and the waits accumulate into `at`.
//!   (fio's current replay code, `read_iolog_get`, instead compares the value with
//!   `mtime_since_genesis()`; we follow the documented meaning, and do not drop waits below
//!   100 µs, which the HOWTO also mentions.) A `wait` without `LENGTH` and
//!   `sync`/`datasync` without `OFFSET LENGTH` are accepted here although fio requires them.
//! - v3: the same lines, each prefixed by a timestamp, and `wait` is not allowed. The
//!   timestamp is **microseconds since the job opened its write log**: `log_io_u` and
//!   `log_file` print `utime_since_now(&td->io_log_start_time)`, and on replay `read_iolog`
//!   (the former `read_iolog2`) turns the difference of consecutive timestamps
//!   (`delay_since_ttime`) into a delay that `iolog_delay` compares with `utime_since_now`.
//!   An event's `at` is `timestamp × 1000` ns: time 0 is the log start, not the first I/O.
//!
//! **Mapping.** Each fio file is a volume declared in the header, named by [`volume_name`]
//! (the original name is kept in `provenance.parameters["file.<volume>"]`), with size the
//! furthest byte reached rounded up to 1 MiB (at least 1 MiB). `read`/`write`/`trim` become
//! [`Op::Io`]; `sync` and `datasync` become [`IoKind::Flush`] with offset and length 0;
//! `add`/`open`/`close` and `wait` produce no event. Ids are sequential from 0.
//!
//! **Bad input.** Every malformed line (missing or extra field, unknown action, non-numeric
//! number, `offset + length` overflowing, `wait` in v3, a v3 timestamp going backwards) is a
//! located [`BadInput`] handed to [`ImportReport::bad`]. A wrong or missing first line is always
//! fatal: nothing after it can be interpreted. Both passes run the same parser, so a skipped
//! line contributes nothing to the volume sizes either.
//!
//! **Export.** [`export_fio_v3`] writes `Op::Io` events as a v3 log; other operations are
//! skipped and counted (a trace mixing control and I/O still exports its I/O).

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Write};
use std::path::Path;

use trace_format::{Event, Header, Io, IoKind, Name, Op, TraceWriter, VolumeDecl};

use crate::{BadInput, ImportError, ImportReport, Policy, Source};

/// Longest volume name: a Kubernetes DNS label.
const MAX_NAME: usize = 63;

/// Which iolog version a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FioVersion {
    /// `fio version 2 iolog`: no timestamps, optional `wait` lines.
    V2,
    /// `fio version 3 iolog`: every line starts with a microsecond timestamp.
    V3,
}

impl FioVersion {
    /// The `provenance.source_format` of an import of this version.
    pub const fn source_format(self) -> &'static str {
        match self {
            FioVersion::V2 => "fio-iolog-v2",
            FioVersion::V3 => "fio-iolog-v3",
        }
    }
}

/// One meaningful line of an iolog.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    /// `add`, `open` or `close` of a file.
    File(String),
    /// An I/O request at `at` ns; `datasync` tells a flush that was a datasync.
    Io {
        file: String,
        at: u64,
        kind: IoKind,
        offset: u64,
        len: u64,
        datasync: bool,
    },
    /// A v2 wait (already added to the clock).
    Wait,
}

/// The line parser, with the state both passes share.
struct Parser<'a> {
    file: &'a str,
    version: FioVersion,
    /// v3: the last accepted timestamp (µs). v2: the accumulated waits (µs).
    clock_us: u64,
}

impl Parser<'_> {
    fn bad(&self, line: u64, field: &str, message: impl Into<String>) -> BadInput {
        BadInput {
            file: self.file.to_owned(),
            line,
            record: false,
            field: field.to_owned(),
            message: message.into(),
        }
    }

    fn number(&self, line: u64, field: &str, text: Option<&str>) -> Result<u64, BadInput> {
        let text = text.ok_or_else(|| self.bad(line, field, format!("missing {field}")))?;
        text.parse::<u64>().map_err(|_| {
            self.bad(
                line,
                field,
                format!("{text:?} is not a non-negative integer"),
            )
        })
    }

    /// Parses one line; `Ok(None)` for a blank line. The state changes only on success.
    fn line(&mut self, line: u64, text: &str) -> Result<Option<Action>, BadInput> {
        let mut fields = text.split_ascii_whitespace();
        let ts = match self.version {
            FioVersion::V2 => None,
            FioVersion::V3 => match fields.clone().next() {
                None => return Ok(None),
                Some(_) => Some(self.number(line, "timestamp", fields.next())?),
            },
        };
        let Some(file) = fields.next() else {
            return Ok(None);
        };
        let act = fields
            .next()
            .ok_or_else(|| self.bad(line, "action", "missing action"))?;
        let kind = match act {
            "add" | "open" | "close" => None,
            "read" => Some(IoKind::Read),
            "write" => Some(IoKind::Write),
            "trim" => Some(IoKind::Trim),
            "sync" | "datasync" | "wait" => Some(IoKind::Flush),
            other => {
                return Err(self.bad(
                    line,
                    "action",
                    format!(
                        "unknown action {other:?}, expected add, open, close, read, write, \
                         trim, sync, datasync or wait"
                    ),
                ));
            }
        };
        // Optional trailing numbers: wait's length, and sync's offset and length.
        let (offset, len) = match kind {
            None => (0, 0),
            Some(_) => {
                let optional_off = matches!(act, "sync" | "datasync");
                let off = fields.next();
                let offset = if off.is_none() && optional_off {
                    0
                } else {
                    self.number(line, "offset", off)?
                };
                let l = fields.next();
                let len = if l.is_none() && (optional_off || act == "wait") {
                    0
                } else {
                    self.number(line, "length", l)?
                };
                (offset, len)
            }
        };
        if let Some(extra) = fields.next() {
            return Err(self.bad(line, "line", format!("unexpected extra field {extra:?}")));
        }
        if act == "wait" {
            return match self.version {
                FioVersion::V3 => Err(self.bad(
                    line,
                    "action",
                    "wait is not allowed in a version 3 iolog (timestamps give the timing)",
                )),
                FioVersion::V2 => {
                    self.clock_us = self.clock_us.checked_add(offset).ok_or_else(|| {
                        self.bad(line, "offset", "accumulated waits overflow 64 bits")
                    })?;
                    Ok(Some(Action::Wait))
                }
            };
        }
        if let Some(ts) = ts
            && ts < self.clock_us
        {
            return Err(self.bad(
                line,
                "timestamp",
                format!(
                    "timestamp {ts} goes backwards (the previous line's was {})",
                    self.clock_us
                ),
            ));
        }
        let clock = ts.unwrap_or(self.clock_us);
        let at = clock
            .checked_mul(1000)
            .ok_or_else(|| self.bad(line, "timestamp", "time in nanoseconds overflows 64 bits"))?;
        let action = match kind {
            None => Action::File(file.to_owned()),
            Some(kind) => {
                let (offset, len) = if kind == IoKind::Flush {
                    (0, 0)
                } else if len == 0 {
                    return Err(self.bad(line, "length", "length is 0 (a request of 0 bytes)"));
                } else {
                    offset.checked_add(len).ok_or_else(|| {
                        self.bad(line, "length", "offset + length overflows 64 bits")
                    })?;
                    (offset, len)
                };
                Action::Io {
                    file: file.to_owned(),
                    at,
                    kind,
                    offset,
                    len,
                    datasync: act == "datasync",
                }
            }
        };
        self.clock_us = clock;
        Ok(Some(action))
    }
}

/// Reads the first line and tells the version.
fn read_version(src: &Source, file: &str) -> Result<FioVersion, ImportError> {
    let mut r = src.open()?;
    let mut buf = Vec::new();
    r.read_until(b'\n', &mut buf)?;
    let first = String::from_utf8_lossy(&buf);
    let first = first.trim_end();
    match first {
        "fio version 2 iolog" => Ok(FioVersion::V2),
        "fio version 3 iolog" => Ok(FioVersion::V3),
        _ => Err(BadInput {
            file: file.to_owned(),
            line: 1,
            record: false,
            field: "header".to_owned(),
            message: if first.is_empty() {
                "empty first line; expected \"fio version 2 iolog\" or \"fio version 3 iolog\""
                    .to_owned()
            } else {
                format!(
                    "not a fio v2/v3 iolog: first line is {first:?}, expected \
                     \"fio version 2 iolog\" or \"fio version 3 iolog\""
                )
            },
        }
        .into()),
    }
}

/// Turns a fio file name into a Kubernetes-like volume name (a DNS-1123 label): lower-case
/// ASCII letters and digits, other runs of characters become one `-`, no leading or trailing
/// `-`, at most 63 characters; `file` when nothing is left. `/dev/nvme0n1` → `dev-nvme0n1`.
pub fn volume_name(file: &str) -> String {
    let mut out = String::new();
    for c in file.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.truncate(MAX_NAME);
    let trimmed = out.trim_end_matches('-');
    if trimmed.is_empty() {
        "file".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// Gives each volume key a distinct volume name, adding `-2`, `-3`, … when sanitizing collides.
pub(crate) fn unique_names(keys: impl Iterator<Item = String>) -> BTreeMap<String, Name> {
    let mut taken = std::collections::HashSet::new();
    let mut out = BTreeMap::new();
    for key in keys {
        let base = volume_name(&key);
        let mut name = base.clone();
        let mut n = 1u64;
        while taken.contains(&name) {
            n += 1;
            let suffix = format!("-{n}");
            let keep = base.len().min(MAX_NAME.saturating_sub(suffix.len()));
            let stem = base.get(..keep).unwrap_or(&base); // ASCII: every index is a boundary
            name = format!("{}{suffix}", stem.trim_end_matches('-'));
        }
        taken.insert(name.clone());
        out.insert(key, Name::new(&name));
    }
    out
}

/// Every line of the file, to the end (see [`crate::for_each_line`]).
fn each_line(
    path: &Source,
    mut f: impl FnMut(u64, Result<&str, std::str::Utf8Error>) -> Result<(), ImportError>,
) -> Result<(), ImportError> {
    crate::for_each_line(path, |line, text| f(line, text).map(|()| true))
}

/// Imports a fio v2 or v3 iolog (the version comes from its first line).
///
/// Pass 1 finds every file and the furthest byte it reaches; the header (volumes, provenance)
/// is then handed to `writer_factory`, and pass 2 streams the events into the writer, which is
/// finished on success. Bad lines follow `policy`; on error the writer is dropped unfinished.
pub fn import_fio(
    path: &Path,
    policy: Policy,
    writer_factory: impl FnOnce(Header) -> Result<TraceWriter, trace_format::Error>,
) -> Result<ImportReport, ImportError> {
    import_fio_source(&Source::File(path.to_owned()), policy, writer_factory)
}

/// [`import_fio`] from any [`Source`] (e.g. bytes in memory).
pub fn import_fio_source(
    src: &Source,
    policy: Policy,
    writer_factory: impl FnOnce(Header) -> Result<TraceWriter, trace_format::Error>,
) -> Result<ImportReport, ImportError> {
    let path = src;
    let file = src.name();
    let version = read_version(path, &file)?;

    // Pass 1: files and their extents; bad lines are left for pass 2 to report.
    let mut extents: BTreeMap<String, u64> = BTreeMap::new();
    let mut parser = Parser {
        file: &file,
        version,
        clock_us: 0,
    };
    each_line(path, |line, text| {
        let Ok(text) = text else { return Ok(()) };
        if line == 1 {
            return Ok(());
        }
        match parser.line(line, text) {
            Ok(Some(Action::File(f))) => {
                extents.entry(f).or_insert(0);
            }
            Ok(Some(Action::Io {
                file, offset, len, ..
            })) => {
                let end = extents.entry(file).or_insert(0);
                *end = (*end).max(offset.saturating_add(len));
            }
            Ok(_) | Err(_) => {}
        }
        Ok(())
    })?;

    let names = unique_names(extents.keys().cloned());
    let mut parameters = BTreeMap::new();
    let mut volumes = Vec::with_capacity(extents.len());
    for (f, end) in &extents {
        let Some(name) = names.get(f) else { continue };
        // Round up to 1 MiB, at least 1 MiB; an end too close to 2^64 keeps its exact value.
        let size = crate::volume_size(*end);
        parameters.insert(format!("file.{name}"), f.clone());
        volumes.push(VolumeDecl {
            name: name.clone(),
            size: Some(size),
            storage_class: None,
            access_mode: None,
            volume_mode: None,
            attributes_class: None,
        });
    }
    parameters.insert("datasync".to_owned(), "flush".to_owned());
    parameters.insert(
        "time_unit".to_owned(),
        match version {
            FioVersion::V2 => "wait_us",
            FioVersion::V3 => "timestamp_us",
        }
        .to_owned(),
    );
    let header = crate::header(
        version.source_format(),
        vec![file.clone()],
        parameters,
        volumes,
    );
    let mut writer = writer_factory(header)?;

    // Pass 2: events.
    let mut report = ImportReport::default();
    let mut parser = Parser {
        file: &file,
        version,
        clock_us: 0,
    };
    let (mut file_actions, mut datasyncs, mut waits) = (0u64, 0u64, 0u64);
    each_line(path, |line, text| {
        if line == 1 {
            return Ok(());
        }
        let text = match text {
            Ok(t) => t,
            Err(e) => {
                let b = parser.bad(line, "line", format!("not UTF-8 text: {e}"));
                return report.bad(policy, b);
            }
        };
        match parser.line(line, text) {
            Ok(None) => {}
            Ok(Some(Action::File(_))) => file_actions += 1,
            Ok(Some(Action::Wait)) => waits += 1,
            Ok(Some(Action::Io {
                file,
                at,
                kind,
                offset,
                len,
                datasync,
            })) => {
                let Some(volume) = names.get(&file) else {
                    let b = parser.bad(line, "file", "file not seen in the first pass");
                    return report.bad(policy, b);
                };
                datasyncs += u64::from(datasync);
                writer.write(&Event {
                    at,
                    id: report.events,
                    tenant: None,
                    observed: None,
                    op: Op::Io(Io {
                        volume: volume.clone(),
                        kind,
                        offset,
                        len,
                    }),
                })?;
                report.events += 1;
            }
            Err(b) => report.bad(policy, b)?,
        }
        Ok(())
    })?;
    writer.finish()?;
    if file_actions > 0 {
        report.warnings.push(format!(
            "{file_actions} add/open/close lines produce no event (volumes are declared in the header)"
        ));
    }
    if waits > 0 {
        report.warnings.push(format!(
            "{waits} wait lines were turned into event times (microseconds, accumulated)"
        ));
    }
    if datasyncs > 0 {
        report.warnings.push(format!(
            "{datasyncs} datasync lines were mapped to flush (the trace has no datasync)"
        ));
    }
    Ok(report)
}

/// What [`export_fio_v3`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FioExport {
    /// I/O lines written (`read`, `write`, `trim`, `sync`).
    pub ios: u64,
    /// Events skipped because fio has no such action (every operation but `io`).
    pub skipped: u64,
    /// The fio file names used, in order of first use.
    pub files: Vec<String>,
}

/// Writes the `io` events of a trace as a fio version 3 iolog that `fio --read_iolog` replays.
///
/// `file_for` maps a volume name to the fio file name to write (a path; it must not contain
/// whitespace). Each file gets `add` and `open` at its first use and `close` at the end (at the
/// last event's time). Timestamps are `at / 1000` µs (sub-microsecond parts are dropped).
/// Flush becomes `sync OFFSET 0`. Other operations are skipped and counted in
/// [`FioExport::skipped`]. A length above 2^32−1 is `Unsupported` (fio reads it as `%u`).
pub fn export_fio_v3<I, W>(
    events: I,
    mut file_for: impl FnMut(&str) -> String,
    out: W,
) -> Result<FioExport, ImportError>
where
    I: IntoIterator<Item = Result<Event, trace_format::Error>>,
    W: Write,
{
    let mut out = std::io::BufWriter::new(out);
    writeln!(out, "fio version 3 iolog")?;
    let mut report = FioExport::default();
    let mut files: HashMap<Name, String> = HashMap::new();
    let mut last_us = 0u64;
    for event in events {
        let event = event?;
        let us = event.at / 1000;
        last_us = last_us.max(us);
        let Op::Io(io) = &event.op else {
            report.skipped += 1;
            continue;
        };
        if !files.contains_key(&io.volume) {
            let f = file_for(io.volume.as_str());
            if f.is_empty() || f.chars().any(char::is_whitespace) {
                return Err(ImportError::Unsupported(format!(
                    "event {}: fio file name {f:?} for volume {:?} is empty or contains \
                     whitespace",
                    event.id,
                    io.volume.as_str()
                )));
            }
            writeln!(out, "{us} {f} add")?;
            writeln!(out, "{us} {f} open")?;
            report.files.push(f.clone());
            files.insert(io.volume.clone(), f);
        }
        let Some(f) = files.get(&io.volume) else {
            continue;
        };
        let (act, offset, len) = match io.kind {
            IoKind::Read => ("read", io.offset, io.len),
            IoKind::Write => ("write", io.offset, io.len),
            IoKind::Trim => ("trim", io.offset, io.len),
            IoKind::Flush => ("sync", io.offset, 0),
        };
        if u32::try_from(len).is_err() {
            return Err(ImportError::Unsupported(format!(
                "event {}: length {len} does not fit fio's 32-bit iolog length",
                event.id
            )));
        }
        writeln!(out, "{us} {f} {act} {offset} {len}")?;
        report.ios += 1;
    }
    for f in &report.files {
        writeln!(out, "{last_us} {f} close")?;
    }
    out.flush()?;
    Ok(report)
}
