//! blktrace binary files and `blkparse` text output: importers, and a writer of blktrace files.
//!
//! **Binary format** (`struct blk_io_trace` of the kernel's `blktrace_api.h`, checked against
//! blkparse 1.2.0 and the real per-CPU files of a ZFS host). `blktrace -d DEV` writes one file
//! per CPU, `NAME.blktrace.<cpu>`, each a sequence of records: a 48-byte header (`magic` u32,
//! `sequence` u32, `time` u64 ns, `sector` u64, `bytes` u32, `action` u32, `pid` u32, `device`
//! u32, `cpu` u32, `error` u16, `pdu_len` u16) followed by `pdu_len` payload bytes. The kernel
//! writes its native byte order; `magic` is `0x65617400 | version` and only version 7 exists,
//! so the order is detected per file from the first magic and both orders are read. `action`
//! is category bits (`BLK_TC_*`) `<< 16 | action code` (`__BLK_TA_ISSUE` = 7 is `D`,
//! `__BLK_TA_COMPLETE` = 8 is `C`); `device` is `major << 20 | minor`. Notify records
//! (`BLK_TC_NOTIFY`: process names, timestamps, messages) and other actions produce no event
//! and are counted in a warning. A wrong magic or version is always fatal (nothing after it can
//! be framed); a record cut off by the end of its file is a [`BadInput`] (record index and byte
//! offset) under [`Policy`].
//!
//! **Text format.** `blkparse`'s default lines, `%D %2c %8s %5T.%9t %5p %2a %3d` then the
//! action's details: `8,52 3 1 0.000843237 0 C DS 983947432 + 64 [0]`. Times are relative to
//! blkparse's first record, sizes are 512-byte sectors; a request without data prints no sector
//! on `D` (`D FN [kworker/2:1H]`) and no `+ N` on `C`. Reading stops at the summary
//! (`CPU0 (…):`, `Total (…):`).
//!
//! **Mapping.** One `io` event per request, at its `D`: `at` = `D` time − the earliest `D`
//! time, `offset` = sector × 512, `len` = bytes; the kind from the RWBS bits (discard → trim,
//! write → write, other data → read, flush without data → flush; a `D` with none of them,
//! RWBS `N`, produces no event). Each device is a volume `dev-<major>-<minor>` declared in
//! the header (pass 1: furthest byte rounded up to 1 MiB, at least 1 MiB). A `C` pairs with
//! the oldest open `D` of the same device, sector (none for requests without data) and kind,
//! and `observed` is `C − D`. A second `D` of the same device, sector, kind and length while
//! the first is open is a re-dispatch (the driver requeued it): it is merged into the first,
//! which keeps its time. Since `observed` must be on the event when it is written, pending requests wait in a queue
//! ordered by `D` time and the head is written when completed or when it falls more than
//! [`COMPLETION_WINDOW_NS`] of trace time behind the newest record (then without `observed`);
//! per-CPU files are merged by time, one record buffered per file. Every such case is counted
//! in a warning.
//!
//! **Fixtures.** [`RawRecord`] and [`write_blktrace_fixture`] write per-CPU files in the
//! kernel's layout, so tests make synthetic traces that `blkparse` itself reads.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use trace_format::{Event, Header, Io, IoKind, Name, Op, TraceWriter, VolumeDecl};

use crate::{BadInput, ImportError, ImportReport, Policy};

/// `magic` without its version byte.
pub const MAGIC: u32 = 0x6561_7400;
/// The only blktrace record version.
pub const VERSION: u32 = 7;
/// Length of a record header.
pub const RECORD_LEN: usize = 48;
/// How long a request waits for its completion, in ns of trace time, before it is written
/// without `observed`.
pub const COMPLETION_WINDOW_NS: u64 = 30_000_000_000;

const SECTOR: u64 = 512;
/// Category bits (`action >> 16`).
const TC_READ: u32 = 1 << 0;
const TC_WRITE: u32 = 1 << 1;
const TC_FLUSH: u32 = 1 << 2;
const TC_ISSUE: u32 = 1 << 6;
const TC_COMPLETE: u32 = 1 << 7;
const TC_FS: u32 = 1 << 8;
const TC_PC: u32 = 1 << 9;
const TC_NOTIFY: u32 = 1 << 10;
const TC_DISCARD: u32 = 1 << 13;
/// Action codes (`action & 0xffff`).
const TA_ISSUE: u32 = 7;
const TA_COMPLETE: u32 = 8;

/// Byte order of a blktrace file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    /// Little-endian (x86, most ARM).
    Little,
    /// Big-endian (s390x, some POWER).
    Big,
}

/// Whether a request record is the issue (`D`) or the completion (`C`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `D`: handed to the driver.
    Issue,
    /// `C`: completed.
    Complete,
}

/// One record of a blktrace file, exactly as the kernel lays it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRecord {
    /// `0x65617400 | version`.
    pub magic: u32,
    /// Per-CPU sequence number.
    pub sequence: u32,
    /// Nanoseconds (the kernel's clock).
    pub time: u64,
    /// First 512-byte sector.
    pub sector: u64,
    /// Length in bytes.
    pub bytes: u32,
    /// Category bits `<< 16 |` action code.
    pub action: u32,
    /// Process id.
    pub pid: u32,
    /// `major << 20 | minor`.
    pub device: u32,
    /// CPU (also the file's suffix).
    pub cpu: u32,
    /// Completion error.
    pub error: u16,
    /// Payload (`pdu_len` bytes): a process name, a SCSI command, a message, …
    pub pdu: Vec<u8>,
}

impl RawRecord {
    /// A `D` or `C` record of a file-system request of `kind` on device `major,minor`
    /// (`sector` in 512-byte units), with the category bits the kernel sets for it.
    pub fn request(
        phase: Phase,
        cpu: u32,
        time: u64,
        (major, minor): (u32, u32),
        kind: IoKind,
        sector: u64,
        bytes: u32,
    ) -> Self {
        let (code, tc) = match phase {
            Phase::Issue => (TA_ISSUE, TC_ISSUE),
            Phase::Complete => (TA_COMPLETE, TC_COMPLETE),
        };
        let dir = match kind {
            IoKind::Read => TC_READ,
            IoKind::Write => TC_WRITE,
            IoKind::Trim => TC_WRITE | TC_DISCARD,
            IoKind::Flush => TC_READ | TC_FLUSH,
        };
        Self {
            magic: MAGIC | VERSION,
            sequence: 0,
            time,
            sector,
            bytes,
            action: ((TC_FS | tc | dir) << 16) | code,
            pid: 0,
            device: (major << 20) | minor,
            cpu,
            error: 0,
            pdu: Vec::new(),
        }
    }

    /// A notify record naming process `pid` (`BLK_TN_PROCESS`), as blktrace writes before a
    /// process's first request on a CPU.
    pub fn process_name(
        cpu: u32,
        time: u64,
        (major, minor): (u32, u32),
        pid: u32,
        comm: &str,
    ) -> Self {
        let mut pdu = comm.as_bytes().to_vec();
        pdu.resize(16, 0);
        Self {
            pid,
            pdu,
            action: TC_NOTIFY << 16,
            ..Self::request(Phase::Issue, cpu, time, (major, minor), IoKind::Read, 0, 0)
        }
    }

    /// The record's bytes in `endian` order; `pdu_len` is the payload's length (at most
    /// 65535 bytes are written).
    pub fn encode(&self, endian: Endian) -> Vec<u8> {
        let pdu = self
            .pdu
            .get(..self.pdu.len().min(usize::from(u16::MAX)))
            .unwrap_or(&[]);
        let mut out = Vec::with_capacity(RECORD_LEN + pdu.len());
        let mut put = |b: &[u8]| out.extend_from_slice(b);
        macro_rules! field {
            ($v:expr) => {
                match endian {
                    Endian::Little => put(&$v.to_le_bytes()),
                    Endian::Big => put(&$v.to_be_bytes()),
                }
            };
        }
        field!(self.magic);
        field!(self.sequence);
        field!(self.time);
        field!(self.sector);
        field!(self.bytes);
        field!(self.action);
        field!(self.pid);
        field!(self.device);
        field!(self.cpu);
        field!(self.error);
        field!(u16::try_from(pdu.len()).unwrap_or(u16::MAX));
        out.extend_from_slice(pdu);
        out
    }

    /// Decodes a header; the payload is left empty and its length returned.
    fn decode(h: &[u8], endian: Endian) -> (Self, u16) {
        fn get<const N: usize>(h: &[u8], at: usize) -> [u8; N] {
            h.get(at..at + N)
                .and_then(|s| <[u8; N]>::try_from(s).ok())
                .unwrap_or([0; N])
        }
        macro_rules! rd {
            ($t:ty, $at:expr) => {
                match endian {
                    Endian::Little => <$t>::from_le_bytes(get(h, $at)),
                    Endian::Big => <$t>::from_be_bytes(get(h, $at)),
                }
            };
        }
        let r = Self {
            magic: rd!(u32, 0),
            sequence: rd!(u32, 4),
            time: rd!(u64, 8),
            sector: rd!(u64, 16),
            bytes: rd!(u32, 24),
            action: rd!(u32, 28),
            pid: rd!(u32, 32),
            device: rd!(u32, 36),
            cpu: rd!(u32, 40),
            error: rd!(u16, 44),
            pdu: Vec::new(),
        };
        (r, rd!(u16, 46))
    }
}

/// Writes `records` as per-CPU blktrace files `dir/BASE.blktrace.<cpu>`, one per CPU from 0 to
/// the highest CPU used (empty when a CPU has none, as blktrace leaves them), each in the
/// records' order; `blkparse -D DIR -i BASE` reads them. Returns the files, by CPU.
pub fn write_blktrace_fixture(
    dir: &Path,
    base: &str,
    records: &[RawRecord],
    endian: Endian,
) -> std::io::Result<Vec<PathBuf>> {
    let cpus = records.iter().map(|r| r.cpu).max().map_or(0, |c| c + 1);
    let mut files = Vec::new();
    for cpu in 0..cpus {
        let path = dir.join(format!("{base}.blktrace.{cpu}"));
        let mut w = std::io::BufWriter::new(fs_err::File::create(&path)?);
        for r in records.iter().filter(|r| r.cpu == cpu) {
            w.write_all(&r.encode(endian))?;
        }
        w.flush()?;
        files.push(path);
    }
    Ok(files)
}

/// What reading one record gave.
enum Next {
    Record(RawRecord),
    /// A record cut off by the end of the file (the rest of the file is ignored).
    Truncated(BadInput),
    End,
}

/// Reads the records of one per-CPU file.
struct RecordReader {
    file: String,
    r: BufReader<fs_err::File>,
    endian: Option<Endian>,
    index: u64,
    offset: u64,
    done: bool,
}

impl RecordReader {
    fn open(path: &Path) -> Result<Self, ImportError> {
        Ok(Self {
            file: path.display().to_string(),
            r: BufReader::with_capacity(256 << 10, fs_err::File::open(path)?),
            endian: None,
            index: 0,
            offset: 0,
            done: false,
        })
    }

    fn bad(&self, field: &str, message: String) -> BadInput {
        BadInput {
            file: self.file.clone(),
            line: self.index,
            record: true,
            field: field.to_owned(),
            message,
        }
    }

    /// The next record. A wrong magic or version is an error: nothing after it can be framed.
    fn next(&mut self) -> Result<Next, ImportError> {
        if self.done {
            return Ok(Next::End);
        }
        let mut h = Vec::with_capacity(RECORD_LEN);
        let n = (&mut self.r).take(RECORD_LEN as u64).read_to_end(&mut h)?;
        if n == 0 {
            self.done = true;
            return Ok(Next::End);
        }
        let off = self.offset;
        if n < RECORD_LEN {
            self.done = true;
            return Ok(Next::Truncated(self.bad(
                "header",
                format!(
                    "truncated record at byte offset {off}: {n} of the {RECORD_LEN} header bytes \
                     before the end of the file"
                ),
            )));
        }
        let le = RawRecord::decode(&h, Endian::Little).0.magic;
        let endian = match self.endian {
            Some(e) => e,
            None if le & !0xff != MAGIC && le.swap_bytes() & !0xff == MAGIC => Endian::Big,
            None => Endian::Little,
        };
        let (mut rec, pdu_len) = RawRecord::decode(&h, endian);
        let (m, v) = (rec.magic, rec.magic & 0xff);
        let order = match self.endian {
            Some(_) => "in the byte order of the file's first record",
            None => "either byte order",
        };
        let wrong = if m & !0xff != MAGIC {
            format!(
                "bad magic {m:#010x} at byte offset {off}, expected {:#010x} (blktrace \
                 version {VERSION}, {order})",
                MAGIC | VERSION
            )
        } else if v != VERSION {
            format!(
                "unsupported blktrace version {v} (magic {m:#010x}) at byte offset {off}; \
                 only version {VERSION} is supported"
            )
        } else {
            String::new()
        };
        if !wrong.is_empty() {
            return Err(self.bad("magic", wrong).into());
        }
        self.endian = Some(endian);
        let mut pdu = Vec::with_capacity(usize::from(pdu_len));
        let got = (&mut self.r)
            .take(u64::from(pdu_len))
            .read_to_end(&mut pdu)?;
        if got < usize::from(pdu_len) {
            self.done = true;
            return Ok(Next::Truncated(self.bad(
                "pdu_len",
                format!(
                    "truncated record at byte offset {off}: payload of {pdu_len} bytes has only \
                     {got} before the end of the file"
                ),
            )));
        }
        rec.pdu = pdu;
        self.index += 1;
        self.offset += (RECORD_LEN + usize::from(pdu_len)) as u64;
        Ok(Next::Record(rec))
    }
}

/// Reads every record of one blktrace file with its byte order; a truncated record is an
/// error here. (For tests and tools; the importer streams.)
pub fn read_blktrace_file(path: &Path) -> Result<(Endian, Vec<RawRecord>), ImportError> {
    let mut r = RecordReader::open(path)?;
    let mut out = Vec::new();
    loop {
        match r.next()? {
            Next::Record(rec) => out.push(rec),
            Next::Truncated(b) => return Err(b.into()),
            Next::End => return Ok((r.endian.unwrap_or(Endian::Little), out)),
        }
    }
}

/// A `D` or `C` of a request, in either input format.
#[derive(Debug, Clone, Copy)]
struct Req {
    phase: Phase,
    time: u64,
    device: u32,
    /// `None` for a request without data.
    sector: Option<u64>,
    bytes: u64,
    kind: Option<IoKind>,
}

/// A record or line that is not a request.
#[derive(Debug, Clone, Copy)]
enum Other {
    Notify,
    Action,
}

fn classify(r: &RawRecord) -> Result<Req, Other> {
    let tc = r.action >> 16;
    if tc & TC_NOTIFY != 0 {
        return Err(Other::Notify);
    }
    let phase = match r.action & 0xffff {
        TA_ISSUE => Phase::Issue,
        TA_COMPLETE => Phase::Complete,
        _ => return Err(Other::Action),
    };
    if tc & TC_PC != 0 {
        return Err(Other::Action);
    }
    let bytes = u64::from(r.bytes);
    // As blkparse's RWBS: discard, else write, else data (read), else flush, else none.
    let kind = if tc & TC_DISCARD != 0 {
        Some(IoKind::Trim)
    } else if tc & TC_WRITE != 0 {
        Some(IoKind::Write)
    } else if bytes > 0 {
        Some(IoKind::Read)
    } else if tc & TC_FLUSH != 0 {
        Some(IoKind::Flush)
    } else {
        None
    };
    Ok(Req {
        phase,
        time: r.time,
        device: r.device,
        sector: (bytes > 0).then_some(r.sector),
        bytes,
        kind,
    })
}

/// What pass 1 learns: the earliest issue and each device's furthest byte.
#[derive(Default)]
struct Extents {
    first_issue: Option<u64>,
    ends: BTreeMap<u32, u64>,
}

impl Extents {
    fn add(&mut self, q: &Req) {
        if q.phase != Phase::Issue || q.kind.is_none() {
            return;
        }
        self.first_issue = Some(self.first_issue.map_or(q.time, |t| t.min(q.time)));
        let end = q
            .sector
            .map_or(0, |s| s.saturating_mul(SECTOR).saturating_add(q.bytes));
        let e = self.ends.entry(q.device).or_insert(0);
        *e = (*e).max(end);
    }

    /// The header, and each device's volume name.
    fn header(&self, source_format: &str, files: Vec<String>) -> (Header, HashMap<u32, Name>) {
        let mut names = HashMap::new();
        let mut volumes = Vec::new();
        let mut parameters = BTreeMap::new();
        for (&dev, &end) in &self.ends {
            let (major, minor) = (dev >> 20, dev & 0xf_ffff);
            let name = Name::new(&format!("dev-{major}-{minor}"));
            parameters.insert(format!("device.{name}"), format!("{major},{minor}"));
            volumes.push(VolumeDecl {
                name: name.clone(),
                size: Some(crate::volume_size(end)),
                storage_class: None,
                access_mode: None,
                volume_mode: None,
            });
            names.insert(dev, name);
        }
        parameters.insert("time_origin".to_owned(), "first_issue".to_owned());
        parameters.insert(
            "completion_window".to_owned(),
            format!("{}s", COMPLETION_WINDOW_NS / 1_000_000_000),
        );
        let header = crate::header(source_format, files, parameters, volumes);
        (header, names)
    }
}

/// Pairing key: device, sector (`None` without data), kind.
type Key = (u32, Option<u64>, IoKind);

struct Pending {
    key: Key,
    offset: u64,
    len: u64,
    observed: Option<u64>,
}

#[derive(Default)]
struct Counts {
    notify: u64,
    other: u64,
    no_kind: u64,
    redispatched: u64,
    timed_out: u64,
    never_completed: u64,
    unmatched: u64,
    raised: u64,
}

/// Pairs issues with completions and writes events in issue-time order.
struct Pairer<'a> {
    origin: u64,
    names: &'a HashMap<u32, Name>,
    writer: TraceWriter,
    /// Requests not yet written, by (issue time, arrival).
    queue: BTreeMap<(u64, u64), Pending>,
    /// Queue keys of requests without completion, oldest first.
    open: HashMap<Key, VecDeque<(u64, u64)>>,
    seq: u64,
    newest: u64,
    last_at: u64,
    counts: Counts,
}

impl<'a> Pairer<'a> {
    fn new(origin: u64, names: &'a HashMap<u32, Name>, writer: TraceWriter) -> Self {
        Self {
            origin,
            names,
            writer,
            queue: BTreeMap::new(),
            open: HashMap::new(),
            seq: 0,
            newest: 0,
            last_at: 0,
            counts: Counts::default(),
        }
    }

    fn other(&mut self, o: Other) {
        match o {
            Other::Notify => self.counts.notify += 1,
            Other::Action => self.counts.other += 1,
        }
    }

    fn request(&mut self, q: Req, report: &mut ImportReport) -> Result<(), ImportError> {
        self.newest = self.newest.max(q.time);
        let Some(kind) = q.kind else {
            match q.phase {
                Phase::Issue => self.counts.no_kind += 1,
                Phase::Complete => self.counts.unmatched += 1,
            }
            return self.drain(report, false);
        };
        let key = (q.device, q.sector, kind);
        match q.phase {
            Phase::Issue => {
                let open = self.open.entry(key).or_default();
                let again = q.sector.is_some()
                    && open
                        .iter()
                        .any(|k| self.queue.get(k).is_some_and(|p| p.len == q.bytes));
                if again {
                    self.counts.redispatched += 1;
                } else {
                    let k = (q.time, self.seq);
                    self.seq += 1;
                    open.push_back(k);
                    self.queue.insert(
                        k,
                        Pending {
                            key,
                            offset: q.sector.unwrap_or(0).saturating_mul(SECTOR),
                            len: q.bytes,
                            observed: None,
                        },
                    );
                }
            }
            Phase::Complete => {
                let k = self.open.get_mut(&key).and_then(VecDeque::pop_front);
                match k.and_then(|k| Some((k.0, self.queue.get_mut(&k)?))) {
                    Some((t, p)) => p.observed = Some(q.time.saturating_sub(t)),
                    None => self.counts.unmatched += 1,
                }
            }
        }
        self.drain(report, false)
    }

    /// Writes the queue's head while it is complete, timed out, or `all`.
    fn drain(&mut self, report: &mut ImportReport, all: bool) -> Result<(), ImportError> {
        while let Some(entry) = self.queue.first_entry() {
            let (t, _) = *entry.key();
            let p = entry.get();
            if p.observed.is_none() {
                if !all && self.newest.saturating_sub(t) <= COMPLETION_WINDOW_NS {
                    return Ok(());
                }
                if all {
                    self.counts.never_completed += 1;
                } else {
                    self.counts.timed_out += 1;
                }
                let k = *entry.key();
                if let Some(open) = self.open.get_mut(&p.key) {
                    open.retain(|o| *o != k);
                }
            }
            let p = entry.remove();
            let Some(volume) = self.names.get(&p.key.0) else {
                continue;
            };
            let mut at = t.saturating_sub(self.origin);
            if at < self.last_at {
                self.counts.raised += 1;
                at = self.last_at;
            }
            self.last_at = at;
            self.writer.write(&Event {
                at,
                id: report.events,
                tenant: None,
                observed: p.observed,
                op: Op::Io(Io {
                    volume: volume.clone(),
                    kind: p.key.2,
                    offset: p.offset,
                    len: p.len,
                }),
            })?;
            report.events += 1;
        }
        Ok(())
    }

    fn finish(mut self, report: &mut ImportReport) -> Result<(), ImportError> {
        self.drain(report, true)?;
        self.writer.finish()?;
        let c = &self.counts;
        let window = COMPLETION_WINDOW_NS / 1_000_000_000;
        for (n, what) in [
            (
                c.notify,
                "notify records (process names, timestamps, messages) produce no event",
            ),
            (
                c.other,
                "records of actions other than issue (D) and complete (C) produce no event",
            ),
            (
                c.no_kind,
                "issues without data or flush (RWBS N) produce no event",
            ),
            (
                c.redispatched,
                "re-dispatches of a request still in flight (same device, sector, kind and \
                 length) were merged into its first dispatch",
            ),
            (
                c.timed_out,
                &format!(
                    "requests had no completion within {window}s of trace time and have no \
                     observed latency"
                ),
            ),
            (
                c.never_completed,
                "requests had no completion before the end of the trace and have no observed \
                 latency",
            ),
            (
                c.unmatched,
                "completions matched no open issue (e.g. a flush's original request, RWBS NS)",
            ),
            (
                c.raised,
                "event times were raised to the previous event's (input out of time order)",
            ),
        ] {
            if n > 0 {
                report.warnings.push(format!("{n} {what}"));
            }
        }
        Ok(())
    }
}

/// Imports per-CPU blktrace files (`NAME.blktrace.0`, `.1`, …; all CPUs of one recording).
///
/// Pass 1 finds the devices, their extents and the earliest issue (a wrong magic or version
/// fails here, before the writer exists); the header then goes to `writer_factory`, and pass 2
/// merges the files by time and streams the events. A truncated record follows `policy` (the
/// rest of its file is ignored when skipping); on error the writer is dropped unfinished.
pub fn import_blktrace(
    files: &[PathBuf],
    policy: Policy,
    writer_factory: impl FnOnce(Header) -> Result<TraceWriter, trace_format::Error>,
) -> Result<ImportReport, ImportError> {
    let mut extents = Extents::default();
    for path in files {
        let mut r = RecordReader::open(path)?;
        while let Next::Record(rec) = r.next()? {
            if let Ok(q) = classify(&rec) {
                extents.add(&q);
            }
        }
    }
    let names_in: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    let (header, names) = extents.header("blktrace", names_in);
    let mut report = ImportReport::default();
    let mut p = Pairer::new(
        extents.first_issue.unwrap_or(0),
        &names,
        writer_factory(header)?,
    );

    // Pass 2: k-way merge by (time, file), one record buffered per file.
    let mut readers = files
        .iter()
        .map(|f| RecordReader::open(f))
        .collect::<Result<Vec<_>, _>>()?;
    let mut heads: Vec<Option<RawRecord>> = vec![None; readers.len()];
    let mut heap = BinaryHeap::new();
    for i in 0..readers.len() {
        refill(i, &mut readers, &mut heads, &mut heap, &mut report, policy)?;
    }
    while let Some(Reverse((_, i))) = heap.pop() {
        let Some(rec) = heads.get_mut(i).and_then(Option::take) else {
            continue;
        };
        match classify(&rec) {
            Ok(q) => p.request(q, &mut report)?,
            Err(o) => p.other(o),
        }
        refill(i, &mut readers, &mut heads, &mut heap, &mut report, policy)?;
    }
    p.finish(&mut report)?;
    Ok(report)
}

/// Reads file `i`'s next record into `heads` and `heap`.
fn refill(
    i: usize,
    readers: &mut [RecordReader],
    heads: &mut [Option<RawRecord>],
    heap: &mut BinaryHeap<Reverse<(u64, usize)>>,
    report: &mut ImportReport,
    policy: Policy,
) -> Result<(), ImportError> {
    let Some(r) = readers.get_mut(i) else {
        return Ok(());
    };
    match r.next()? {
        Next::Record(rec) => {
            heap.push(Reverse((rec.time, i)));
            if let Some(h) = heads.get_mut(i) {
                *h = Some(rec);
            }
        }
        Next::Truncated(b) => report.bad(policy, b)?,
        Next::End => {}
    }
    Ok(())
}

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
    }
    Ok(Line::Req(Req {
        phase,
        time,
        device,
        sector: sector.filter(|_| bytes > 0),
        bytes,
        kind,
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
    let file = path.display().to_string();
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
