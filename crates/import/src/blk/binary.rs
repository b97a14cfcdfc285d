//! The binary side: the kernel's record layout, per-CPU file reading (both byte orders), the
//! fixture writer, and the importer that merges per-CPU files by time.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};

use trace_format::{Header, IoKind, TraceWriter};

use super::pairing::{Extents, Other, Pairer, Req};
use super::*;
use crate::{BadInput, ImportError, ImportReport, Policy, Source};

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
    r: Box<dyn BufRead + Send>,
    endian: Option<Endian>,
    index: u64,
    offset: u64,
    done: bool,
}

impl RecordReader {
    fn open(src: &Source) -> Result<Self, ImportError> {
        Ok(Self {
            file: src.name(),
            r: src.open()?,
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
    let mut r = RecordReader::open(&Source::File(path.to_owned()))?;
    let mut out = Vec::new();
    loop {
        match r.next()? {
            Next::Record(rec) => out.push(rec),
            Next::Truncated(b) => return Err(b.into()),
            Next::End => return Ok((r.endian.unwrap_or(Endian::Little), out)),
        }
    }
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
    // As blkparse's RWBS: discard, else write, else data (read), else flush, else none; a
    // request without data is a flush or nothing (a 0-byte write is a preflush, `FWS`).
    let kind = if bytes == 0 {
        (tc & TC_FLUSH != 0).then_some(IoKind::Flush)
    } else if tc & TC_DISCARD != 0 {
        Some(IoKind::Trim)
    } else if tc & TC_WRITE != 0 {
        Some(IoKind::Write)
    } else {
        Some(IoKind::Read)
    };
    if r.sector
        .checked_mul(SECTOR)
        .and_then(|o| o.checked_add(bytes))
        .is_none()
    {
        return Err(Other::Overflow);
    }
    Ok(Req {
        phase,
        time: r.time,
        device: r.device,
        sector: (bytes > 0).then_some(r.sector),
        bytes,
        kind,
    })
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
    import_blktrace_sources(&Source::files(files), policy, writer_factory)
}

/// [`import_blktrace`] from any [`Source`]s (e.g. bytes in memory).
pub fn import_blktrace_sources(
    files: &[Source],
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
    let names_in: Vec<String> = files.iter().map(Source::name).collect();
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
        .map(RecordReader::open)
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

/// Imports one blktrace stream holding the records of every CPU (`blktrace -o -`, piped or
/// saved to a file): the records are split by their `cpu` field into per-CPU files in a
/// temporary directory (one streaming pass, the stream's byte order kept), which are then
/// imported as [`import_blktrace_sources`] does. Per-CPU inputs are named `NAME (CPU N)` in
/// messages, their record indices counting that CPU's records. A truncated last record
/// follows `policy`.
pub fn import_blktrace_stream(
    src: &Source,
    policy: Policy,
    writer_factory: impl FnOnce(Header) -> Result<TraceWriter, trace_format::Error>,
) -> Result<ImportReport, ImportError> {
    let dir = tempfile::Builder::new()
        .prefix("cnsreplay-blktrace-")
        .tempdir()?;
    let mut r = RecordReader::open(src)?;
    let mut cpus: std::collections::BTreeMap<u32, std::io::BufWriter<fs_err::File>> =
        std::collections::BTreeMap::new();
    let mut truncated = None;
    loop {
        match r.next()? {
            Next::Record(rec) => {
                let w = match cpus.entry(rec.cpu) {
                    std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::btree_map::Entry::Vacant(e) => {
                        let f = fs_err::File::create(dir.path().join(format!("cpu{}", rec.cpu)))?;
                        e.insert(std::io::BufWriter::with_capacity(64 << 10, f))
                    }
                };
                w.write_all(&rec.encode(r.endian.unwrap_or(Endian::Little)))?;
            }
            Next::Truncated(b) => {
                truncated = Some(b);
                break;
            }
            Next::End => break,
        }
    }
    let mut report = ImportReport::default();
    if let Some(b) = truncated {
        report.bad(policy, b)?;
    }
    let name = src.name();
    let mut sources = Vec::with_capacity(cpus.len());
    let cpus_seen: Vec<u32> = cpus.keys().copied().collect();
    for (cpu, mut w) in cpus {
        w.flush()?;
        sources.push(Source::Spooled {
            name: format!("{name} (CPU {cpu})"),
            path: dir.path().join(format!("cpu{cpu}")),
        });
    }
    if sources.is_empty() {
        return Err(ImportError::from(BadInput {
            file: name,
            line: 0,
            record: true,
            field: "header".into(),
            message: "no blktrace record in the stream".into(),
        }));
    }
    let only_cpu = match sources.as_slice() {
        [_] => cpus_seen.first().copied(),
        _ => None,
    };
    let mut got = import_blktrace_sources(&sources, policy, writer_factory)?;
    if let Some(cpu) = only_cpu {
        // A real one-CPU capture, or one per-CPU file of a set read on its own (where
        // requests completed on other CPUs lose their completion): say which to check.
        got.warnings.push(format!(
            "every record of {name} is of CPU {cpu}: if it is one file of a per-CPU set \
             (NAME.blktrace.N), give the whole set (its NAME prefix or all its files), or \
             requests completed on other CPUs have no completion"
        ));
    }
    got.skipped += report.skipped;
    report.first_skipped.append(&mut got.first_skipped);
    got.first_skipped = report.first_skipped;
    Ok(got)
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
