//! Cross-volume ordered writes: the load behind a consistency check of group snapshots.
//!
//! Writers on several targets (a database's data and log volumes, given together) stamp every
//! write with a global sequence number taken *before* the write is submitted, write it
//! (`pwrite`, then `fdatasync`; O_DIRECT with `--direct`), and only then acknowledge it by
//! appending a record to the ordered-write log under one lock: the log's order is the ack
//! order, and each record carries `acked_before`, the number of records in the log when the
//! write's sequence number was taken. So "write X was acknowledged before write Y was
//! submitted" is exactly `position(X) < Y.acked_before` — no clock comparison. With `writers`
//! 1 the writes form one chain, each submitted after the previous one (on the next target in
//! turn) was acknowledged: a total order, as a database alternating log and data writes.
//! With more writers, each owns the blocks `b ≡ i (mod writers)` of every target, so no two
//! writes to one block are ever in flight together and each block's writes form a chain.
//!
//! Block layout (every written block, `block` bytes, ≥ 64):
//!
//! | bytes  | field                                                         |
//! |--------|---------------------------------------------------------------|
//! | 0..8   | magic `IOGENOW1`                                              |
//! | 8..16  | sequence number (u64 LE, from 1)                              |
//! | 16..20 | target (volume) index (u32 LE)                                |
//! | 20..24 | block size (u32 LE)                                           |
//! | 24..32 | byte offset of the block in the target (u64 LE)               |
//! | 32..40 | checksum: hash of bytes 0..32 and 40..end                     |
//! | 40..48 | run nonce (u64 LE; the log's, so an older run's blocks are foreign) |
//! | 48..   | pseudo-random data derived from the sequence number           |
//!
//! Log file: magic `IOGENOL1`, u32 LE length and the JSON [`LogHeader`], then one 48-byte
//! [`LogRecord`] per acknowledged (or failed) write, in ack order: seq, acked_before, block
//! (u64 LE each), volume (u32), flags (u32; bit 0 failed), submit_ns, ack_ns (u64 LE, since
//! the run's start; the header's `start_unix_ns` places them on the wall clock).

use std::io::Write as _;
use std::os::unix::fs::{FileExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub mod log_text;

use crate::verify::hash64;
use crate::{Error, Pattern, Stop};
use trace_format::splitmix::next as splitmix64;

/// Magic of a written block.
pub(crate) const BLOCK_MAGIC: &[u8; 8] = b"IOGENOW1";
/// Magic of the log file.
const LOG_MAGIC: &[u8; 8] = b"IOGENOL1";
/// Bytes per log record.
pub const RECORD_LEN: usize = 48;
/// Smallest block.
const MIN_BLOCK: u64 = 64;

/// One ordered-write run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderedSpec {
    /// The targets (files or block devices), in volume-index order.
    pub targets: Vec<PathBuf>,
    /// Block size (every write is one block), a multiple of 512 with `direct`.
    pub block: u64,
    /// Bytes of each target used, from offset 0; a regular file shorter than this is
    /// extended (sparse), a missing one created. `None`: each target's size.
    pub region: Option<u64>,
    /// Writers, each with one write in flight; 1 = one chain over all targets in turn.
    pub writers: u32,
    /// Random or sequential blocks (each writer, each target).
    pub pattern: Pattern,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop after this many writes.
    pub writes: Option<u64>,
    /// O_DIRECT (then `fdatasync` after each write as well).
    pub direct: bool,
    /// Where the log goes; `-`: stdout, as text lines ([`log_text`]), for a writer
    /// whose files its caller cannot read (a pod).
    pub log: PathBuf,
    /// Seed of the block choices and of the run nonce.
    pub seed: u64,
}

impl Default for OrderedSpec {
    fn default() -> Self {
        Self {
            targets: Vec::new(),
            block: 4096,
            region: None,
            writers: 1,
            pattern: Pattern::Random,
            duration: None,
            writes: None,
            direct: false,
            log: PathBuf::from("ordered.log"),
            seed: 0x0d_e4ed,
        }
    }
}

/// The log's header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogHeader {
    /// Run nonce (in every block).
    pub nonce: u64,
    /// Block size.
    pub block: u64,
    /// Writers.
    pub writers: u32,
    /// The targets, in volume-index order, with the region used on each.
    pub volumes: Vec<LogVolume>,
    /// The run's start (time 0 of `submit_ns`/`ack_ns`) on the wall clock, ns since the Unix
    /// epoch.
    pub start_unix_ns: i64,
}

/// One target as the log names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogVolume {
    /// Its path when written.
    pub path: String,
    /// Bytes used from offset 0.
    pub region: u64,
}

impl LogHeader {
    /// Blocks of volume `v`'s region.
    pub fn blocks(&self, v: usize) -> u64 {
        self.volumes.get(v).map_or(0, |x| x.region / self.block)
    }
}

/// One write, as acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRecord {
    /// Its sequence number (taken before submission).
    pub seq: u64,
    /// Records in the log when its sequence number was taken: the writes acknowledged before
    /// it was submitted are exactly the first `acked_before` records.
    pub acked_before: u64,
    /// Target index.
    pub volume: u32,
    /// Block index in the target.
    pub block: u64,
    /// The write failed (it may or may not have reached the storage).
    pub failed: bool,
    /// Submitted, ns since the run's start.
    pub submit_ns: u64,
    /// Acknowledged (or failed), ns since the run's start.
    pub ack_ns: u64,
}

impl LogRecord {
    fn encode(&self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[0..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8..16].copy_from_slice(&self.acked_before.to_le_bytes());
        b[16..24].copy_from_slice(&self.block.to_le_bytes());
        b[24..28].copy_from_slice(&self.volume.to_le_bytes());
        b[28..32].copy_from_slice(&u32::from(self.failed).to_le_bytes());
        b[32..40].copy_from_slice(&self.submit_ns.to_le_bytes());
        b[40..48].copy_from_slice(&self.ack_ns.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Self {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or([0; 4]));
        LogRecord {
            seq: u64_at(0),
            acked_before: u64_at(8),
            block: u64_at(16),
            volume: u32_at(24),
            failed: u32_at(28) & 1 != 0,
            submit_ns: u64_at(32),
            ack_ns: u64_at(40),
        }
    }
}

/// A whole ordered-write log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderedLog {
    /// Its header.
    pub header: LogHeader,
    /// Records in ack order.
    pub records: Vec<LogRecord>,
}

impl OrderedLog {
    /// The log's bytes (what [`run_ordered`] writes).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(LOG_MAGIC);
        let h = serde_json::to_vec(&self.header).unwrap_or_default();
        out.extend_from_slice(&(h.len() as u32).to_le_bytes());
        out.extend_from_slice(&h);
        for r in &self.records {
            out.extend_from_slice(&r.encode());
        }
        out
    }

    /// Parses a log; `name` is for messages.
    pub fn parse(bytes: &[u8], name: &Path) -> Result<Self, Error> {
        let bad = |reason: String| Error::OrderedLog {
            path: name.to_owned(),
            reason,
        };
        if bytes.len() < 12 || &bytes[..8] != LOG_MAGIC {
            return Err(bad(
                "not an iogen ordered-write log (no IOGENOL1 magic)".into()
            ));
        }
        let hlen = u32::from_le_bytes(bytes[8..12].try_into().unwrap_or([0; 4])) as usize;
        let body = bytes
            .get(12..12 + hlen)
            .ok_or_else(|| bad(format!("truncated in its {hlen}-byte header")))?;
        let header: LogHeader =
            serde_json::from_slice(body).map_err(|e| bad(format!("header: {e}")))?;
        if header.block < MIN_BLOCK {
            return Err(bad(format!(
                "header.block: {} is below {MIN_BLOCK}",
                header.block
            )));
        }
        let rest = &bytes[12 + hlen..];
        if !rest.len().is_multiple_of(RECORD_LEN) {
            return Err(bad(format!(
                "truncated: {} bytes after record {} (records are {RECORD_LEN} bytes)",
                rest.len() % RECORD_LEN,
                rest.len() / RECORD_LEN
            )));
        }
        let mut records = Vec::with_capacity(rest.len() / RECORD_LEN);
        for (i, c) in rest.chunks_exact(RECORD_LEN).enumerate() {
            let r = LogRecord::decode(c);
            let byte = 12 + hlen + i * RECORD_LEN;
            if r.volume as usize >= header.volumes.len() {
                return Err(bad(format!(
                    "record {i} (byte {byte}): volume {} of {}",
                    r.volume,
                    header.volumes.len()
                )));
            }
            if r.block >= header.blocks(r.volume as usize) {
                return Err(bad(format!(
                    "record {i} (byte {byte}): block {} outside volume {}'s {} blocks",
                    r.block,
                    r.volume,
                    header.blocks(r.volume as usize)
                )));
            }
            if r.acked_before > i as u64 {
                return Err(bad(format!(
                    "record {i} (byte {byte}): acked_before {} is after its own position",
                    r.acked_before
                )));
            }
            records.push(r);
        }
        Ok(OrderedLog { header, records })
    }

    /// Reads a log file.
    pub fn read(path: &Path) -> Result<Self, Error> {
        Self::parse(&fs_err::read(path)?, path)
    }

    /// Writes the image volume `volume` would hold if exactly the records `keep` accepts
    /// (by log position) had reached it: each block the latest kept write to it, zeros
    /// elsewhere. A reference state for tests and for checking a checker.
    pub fn write_image(
        &self,
        volume: u32,
        keep: impl Fn(usize, &LogRecord) -> bool,
        path: &Path,
    ) -> Result<(), Error> {
        let h = &self.header;
        let f = fs_err::File::create(path)?;
        f.set_len(h.blocks(volume as usize) * h.block)?;
        let mut buf = vec![0u8; h.block as usize];
        for (i, r) in self.records.iter().enumerate() {
            if r.volume == volume && keep(i, r) {
                let offset = r.block * h.block;
                fill_block(&mut buf, r.seq, volume, offset, h.nonce);
                f.file().write_all_at(&buf, offset)?;
            }
        }
        Ok(())
    }
}

/// Fills one block.
pub(crate) fn fill_block(buf: &mut [u8], seq: u64, volume: u32, offset: u64, nonce: u64) {
    let mut s = seq ^ nonce.rotate_left(17) ^ 0x0de4_ed00;
    for w in buf[48..].chunks_mut(8) {
        let v = splitmix64(&mut s).to_le_bytes();
        w.copy_from_slice(&v[..w.len()]);
    }
    buf[..8].copy_from_slice(BLOCK_MAGIC);
    buf[8..16].copy_from_slice(&seq.to_le_bytes());
    buf[16..20].copy_from_slice(&volume.to_le_bytes());
    let len = buf.len() as u32;
    buf[20..24].copy_from_slice(&len.to_le_bytes());
    buf[24..32].copy_from_slice(&offset.to_le_bytes());
    buf[40..48].copy_from_slice(&nonce.to_le_bytes());
    let c = block_checksum(buf);
    buf[32..40].copy_from_slice(&c.to_le_bytes());
}

pub(crate) fn block_checksum(buf: &[u8]) -> u64 {
    hash64(&[&buf[..32], &buf[40..]], 0x0de4_ed5e)
}

/// What an ordered-write run did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OrderedResult {
    /// Writes acknowledged.
    pub writes: u64,
    /// Writes that failed.
    pub failed: u64,
    /// Writes acknowledged per target.
    pub per_volume: Vec<u64>,
    /// Wall time of the run, s.
    pub elapsed_s: f64,
    /// Stopped by a stop request.
    pub partial: bool,
    /// The log.
    pub log: PathBuf,
    /// The first write error, if any (the writers stop at it).
    pub error: Option<String>,
}

struct Shared {
    seq: AtomicU64,
    acks: AtomicU64,
    log: Mutex<LogSink>,
    start: Instant,
    /// A write failed: every writer stops (the caller's stop flag is left alone).
    halt: std::sync::atomic::AtomicBool,
}

struct LogSink {
    out: LogOut,
    count: u64,
    per_volume: Vec<u64>,
    failed: u64,
    error: Option<String>,
}

/// Where the log goes: its file, or stdout as text lines ([`log_text`]).
enum LogOut {
    File(std::io::BufWriter<fs_err::File>),
    Text(std::io::BufWriter<std::io::Stdout>),
}

impl LogOut {
    fn open(path: &Path, header: &LogHeader) -> Result<Self, Error> {
        let mut out = if path == Path::new("-") {
            let mut o = LogOut::Text(std::io::BufWriter::new(std::io::stdout()));
            o.write(log_text::log_begin(header).as_bytes())?;
            return Ok(o);
        } else {
            LogOut::File(std::io::BufWriter::new(fs_err::File::create(path)?))
        };
        out.write(
            &OrderedLog {
                header: header.clone(),
                records: Vec::new(),
            }
            .to_bytes(),
        )?;
        Ok(out)
    }

    fn write(&mut self, b: &[u8]) -> std::io::Result<()> {
        match self {
            LogOut::File(f) => f.write_all(b),
            LogOut::Text(t) => t.write_all(b),
        }
    }

    fn record(&mut self, r: &LogRecord) -> std::io::Result<()> {
        match self {
            LogOut::File(f) => f.write_all(&r.encode()),
            LogOut::Text(t) => t.write_all(log_text::log_record(r).as_bytes()),
        }
    }

    /// Flushes (and fsyncs a file); the text form gets its end line.
    fn finish(&mut self, count: u64) -> std::io::Result<()> {
        match self {
            LogOut::File(f) => {
                f.flush()?;
                f.get_ref().sync_all()
            }
            LogOut::Text(t) => {
                t.write_all(log_text::log_end(count).as_bytes())?;
                t.flush()
            }
        }
    }
}

/// A page-aligned buffer of `len` bytes inside an owned vector (O_DIRECT needs the
/// alignment; no unsafe needed).
struct Aligned {
    raw: Vec<u8>,
    at: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Self {
        let raw = vec![0u8; len + 4096];
        let at = raw.as_ptr().align_offset(4096).min(4096);
        Aligned { raw, at, len }
    }
    fn buf(&mut self) -> &mut [u8] {
        &mut self.raw[self.at..self.at + self.len]
    }
}

fn open_target(p: &Path, direct: bool, region: Option<u64>) -> Result<(fs_err::File, u64), Error> {
    let mut o = std::fs::OpenOptions::new();
    // A missing file is created (then extended to the region), as in a pod's fresh volume.
    o.read(true).write(true).create(region.is_some());
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    let f = fs_err::File::from_parts(
        o.open(p)
            .map_err(|e| std::io::Error::new(e.kind(), format!("opening {}: {e}", p.display())))?,
        p,
    );
    let len = crate::target_len(p)?;
    let region = match region {
        Some(r) => {
            if len < r {
                if f.metadata()?.is_file() {
                    f.set_len(r)?;
                } else {
                    return Err(Error::InvalidSpec {
                        field: "region",
                        reason: format!("{} has {len} bytes, fewer than {r}", p.display()),
                    });
                }
            }
            r
        }
        None => len,
    };
    Ok((f, region))
}

/// Runs ordered writes on all targets until `duration`, `writes` or a stop, writing the log
/// (flushed and fsynced at the end). Blocking.
pub fn run_ordered(spec: &OrderedSpec, stop: &Stop) -> Result<OrderedResult, Error> {
    let invalid = |field, reason: String| Err(Error::InvalidSpec { field, reason });
    if spec.targets.is_empty() {
        return invalid("targets", "at least one target is needed".into());
    }
    if spec.block < MIN_BLOCK || (spec.direct && !spec.block.is_multiple_of(512)) {
        return invalid(
            "block",
            format!(
                "{} bytes: at least {MIN_BLOCK}, a multiple of 512 with O_DIRECT",
                spec.block
            ),
        );
    }
    if spec.writers == 0 {
        return invalid("writers", "at least 1".into());
    }
    if spec.duration.is_none() && spec.writes.is_none() {
        return invalid(
            "duration",
            "a duration or a number of writes is needed".into(),
        );
    }
    let mut files = Vec::new();
    let mut volumes = Vec::new();
    for t in &spec.targets {
        let (f, region) = open_target(t, spec.direct, spec.region)?;
        let region = region / spec.block * spec.block;
        if region / spec.block < u64::from(spec.writers) {
            return invalid(
                "region",
                format!(
                    "{}: {region} bytes hold fewer blocks than the {} writers",
                    t.display(),
                    spec.writers
                ),
            );
        }
        files.push(f);
        volumes.push(LogVolume {
            path: t.to_string_lossy().into_owned(),
            region,
        });
    }
    let mut s = spec.seed ^ 0x006e_6f6e_6365;
    let anchor = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    let start = Instant::now();
    let header = LogHeader {
        nonce: splitmix64(&mut s) ^ anchor.as_nanos() as u64,
        block: spec.block,
        writers: spec.writers,
        volumes,
        start_unix_ns: i64::try_from(anchor.as_nanos()).unwrap_or(i64::MAX),
    };
    let out = LogOut::open(&spec.log, &header)?;
    let shared = Arc::new(Shared {
        seq: AtomicU64::new(1),
        acks: AtomicU64::new(0),
        log: Mutex::new(LogSink {
            out,
            count: 0,
            per_volume: vec![0; spec.targets.len()],
            failed: 0,
            error: None,
        }),
        start,
        halt: std::sync::atomic::AtomicBool::new(false),
    });
    let files = Arc::new(files);
    let header = Arc::new(header);
    let deadline = spec.duration.map(|d| start + d);
    let mut handles = Vec::new();
    for w in 0..spec.writers {
        let (shared, files, header, stop) = (
            Arc::clone(&shared),
            Arc::clone(&files),
            Arc::clone(&header),
            stop.clone(),
        );
        let spec = spec.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("iogen-ordered-{w}"))
                .spawn(move || writer(w, &spec, &shared, &files, &header, deadline, &stop))?,
        );
    }
    for h in handles {
        h.join().map_err(|_| Error::WorkerPanicked)?;
    }
    let elapsed = start.elapsed();
    let mut sink = shared.log.lock().unwrap_or_else(PoisonError::into_inner);
    let count = sink.count;
    sink.out.finish(count)?;
    Ok(OrderedResult {
        writes: sink.count - sink.failed,
        failed: sink.failed,
        per_volume: sink.per_volume.clone(),
        elapsed_s: elapsed.as_secs_f64(),
        partial: stop.is_requested(),
        log: spec.log.clone(),
        error: sink.error.clone(),
    })
}

/// Writer `w`: one write at a time; writer 0 of 1 cycles through the targets, writer `w` of
/// `n` starts at target `w % targets` and uses the blocks `≡ w (mod n)`.
fn writer(
    w: u32,
    spec: &OrderedSpec,
    shared: &Shared,
    files: &[fs_err::File],
    header: &LogHeader,
    deadline: Option<Instant>,
    stop: &Stop,
) {
    let n = u64::from(spec.writers);
    let mut rng = spec.seed ^ (u64::from(w) << 32) ^ 0x5157;
    let mut cursor = vec![0u64; files.len()];
    let mut buf = Aligned::new(spec.block as usize);
    let mut turn = u64::from(w);
    loop {
        if stop.is_requested()
            || shared.halt.load(Ordering::Relaxed)
            || deadline.is_some_and(|d| Instant::now() >= d)
        {
            return;
        }
        let v = (turn % files.len() as u64) as usize;
        turn += 1;
        let mine = header.blocks(v).saturating_sub(u64::from(w)).div_ceil(n);
        let k = match spec.pattern {
            Pattern::Random => splitmix64(&mut rng) % mine,
            Pattern::Sequential => {
                let k = cursor[v] % mine;
                cursor[v] += 1;
                k
            }
        };
        let block = k * n + u64::from(w);
        // The sequence number first, then what was acknowledged by then: every write in the
        // first `acked_before` records was acknowledged before this one is submitted.
        let seq = shared.seq.fetch_add(1, Ordering::SeqCst);
        if spec.writes.is_some_and(|max| seq > max) {
            return;
        }
        let acked_before = shared.acks.load(Ordering::SeqCst);
        let offset = block * spec.block;
        fill_block(buf.buf(), seq, v as u32, offset, header.nonce);
        let submit_ns = shared.start.elapsed().as_nanos() as u64;
        let res = files[v]
            .file()
            .write_all_at(buf.buf(), offset)
            .and_then(|()| files[v].file().sync_data());
        let mut sink = shared.log.lock().unwrap_or_else(PoisonError::into_inner);
        let rec = LogRecord {
            seq,
            acked_before,
            volume: v as u32,
            block,
            failed: res.is_err(),
            submit_ns,
            ack_ns: shared.start.elapsed().as_nanos() as u64,
        };
        if let Err(e) = sink.out.record(&rec) {
            sink.error.get_or_insert(format!("writing the log: {e}"));
        }
        sink.count += 1;
        shared.acks.store(sink.count, Ordering::SeqCst);
        if let Err(e) = res {
            sink.failed += 1;
            sink.error.get_or_insert(format!(
                "{}: write at {offset}: {e}",
                spec.targets[v].display()
            ));
            shared.halt.store(true, Ordering::Relaxed);
            return;
        }
        sink.per_volume[v] += 1;
    }
}
