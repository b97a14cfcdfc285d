//! Results: per-kind HdrHistograms of response, service and lateness times (nanoseconds,
//! 3 significant digits, up to a day), counters, the JSON summary, and the HdrHistogram V2
//! interval log (the format Java's `HistogramLogProcessor` reads).
//!
//! Histograms merge losslessly ([`Histograms::merge`]), so results of many jobs, runs or pods
//! combine into exact percentiles; [`write_histograms`]/[`read_histograms`] carry them between
//! processes as an interval log with one tag per kind and metric (`read.response`, …).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::mpsc::Sender;
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use serde::{Deserialize, Serialize};
use trace_format::IoKind;

use crate::Error;
use crate::verify::VerifySummary;

/// Largest recordable value: one day in nanoseconds (larger values saturate).
pub(crate) const HIGHEST_NS: u64 = 86_400 * 1_000_000_000;

const KINDS: [IoKind; 4] = [IoKind::Read, IoKind::Write, IoKind::Trim, IoKind::Flush];
const METRICS: [&str; 3] = ["response", "service", "lateness"];

pub(crate) fn kind_index(k: IoKind) -> usize {
    match k {
        IoKind::Read => 0,
        IoKind::Write => 1,
        IoKind::Trim => 2,
        IoKind::Flush => 3,
    }
}

pub(crate) fn kind_name(k: IoKind) -> &'static str {
    ["read", "write", "trim", "flush"][kind_index(k)]
}

fn new_hist() -> Histogram<u64> {
    // Bounds are constants that hdrhistogram accepts; failure would be a programming error.
    Histogram::new_with_bounds(1, HIGHEST_NS, 3).expect("constant histogram bounds are valid")
}

/// The three latency histograms of one operation kind, in nanoseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct KindHistograms {
    /// Completion − intended start.
    pub response: Histogram<u64>,
    /// Completion − actual submission.
    pub service: Histogram<u64>,
    /// Submission − intended start.
    pub lateness: Histogram<u64>,
}

impl KindHistograms {
    fn new() -> Self {
        KindHistograms {
            response: new_hist(),
            service: new_hist(),
            lateness: new_hist(),
        }
    }

    fn metric(&self, i: usize) -> &Histogram<u64> {
        [&self.response, &self.service, &self.lateness][i]
    }

    fn metric_mut(&mut self, i: usize) -> &mut Histogram<u64> {
        match i {
            0 => &mut self.response,
            1 => &mut self.service,
            _ => &mut self.lateness,
        }
    }
}

/// Latency histograms per operation kind (kinds without I/O have none).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histograms {
    kinds: [Option<KindHistograms>; 4],
}

impl Histograms {
    /// Empty histograms.
    pub fn new() -> Self {
        Self::default()
    }

    /// The histograms of one kind, if any I/O of that kind was recorded.
    pub fn get(&self, kind: IoKind) -> Option<&KindHistograms> {
        self.kinds[kind_index(kind)].as_ref()
    }

    /// Kinds with histograms, in the order read, write, trim, flush.
    pub fn iter(&self) -> impl Iterator<Item = (IoKind, &KindHistograms)> {
        KINDS
            .into_iter()
            .zip(&self.kinds)
            .filter_map(|(k, h)| h.as_ref().map(|h| (k, h)))
    }

    fn entry(&mut self, kind: IoKind) -> &mut KindHistograms {
        self.kinds[kind_index(kind)].get_or_insert_with(KindHistograms::new)
    }

    /// Records one completed I/O (times in ns; values beyond a day saturate).
    pub fn record(&mut self, kind: IoKind, response: u64, service: u64, lateness: u64) {
        let h = self.entry(kind);
        h.response.saturating_record(response.max(1));
        h.service.saturating_record(service.max(1));
        h.lateness.saturating_record(lateness.max(1));
    }

    /// Adds every count of `other` into `self` (lossless: the result equals recording both).
    /// All or nothing: when any histogram cannot be added (values beyond its bounds), `self`
    /// is left as it was and the error names the kind and metric — never a half merge.
    pub fn merge(&mut self, other: &Histograms) -> Result<(), Error> {
        let mut merged = self.clone();
        for (k, h) in other.iter() {
            let mine = merged.entry(k);
            for (i, name) in METRICS.iter().enumerate() {
                mine.metric_mut(i).add(h.metric(i)).map_err(|e| {
                    Error::Histogram(format!("merging {} {name}: {e:?}", kind_name(k)))
                })?;
            }
        }
        *self = merged;
        Ok(())
    }

    /// Number of recorded I/Os over all kinds.
    pub fn total_count(&self) -> u64 {
        self.iter().map(|(_, h)| h.response.len()).sum()
    }
}

/// Latency percentiles of one metric, in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Percentiles {
    /// Number of samples.
    pub count: u64,
    /// Smallest value.
    pub min_us: f64,
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p99_9_us: f64,
    /// 99.99th percentile.
    pub p99_99_us: f64,
    /// Largest value.
    pub max_us: f64,
}

impl Percentiles {
    /// Percentiles of a nanosecond histogram.
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        let q = |x: f64| us(h.value_at_quantile(x));
        Percentiles {
            count: h.len(),
            min_us: us(h.min()),
            mean_us: h.mean() / 1000.0,
            p50_us: q(0.5),
            p90_us: q(0.9),
            p99_us: q(0.99),
            p99_9_us: q(0.999),
            p99_99_us: q(0.9999),
            max_us: us(h.max()),
        }
    }
}

/// Totals and latency of one operation kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct KindSummary {
    /// Completed I/Os (successful).
    pub ios: u64,
    /// Bytes transferred.
    pub bytes: u64,
    /// Failed I/Os.
    pub errors: u64,
    /// I/Os per second over the run.
    pub iops: f64,
    /// MiB per second over the run.
    pub mib_s: f64,
    /// Completion − intended start.
    pub response: Percentiles,
    /// Completion − submission.
    pub service: Percentiles,
    /// Submission − intended start.
    pub lateness: Percentiles,
}

/// CPU time spent by the engine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuTime {
    /// User time of iogen's worker (and pool) threads, seconds.
    pub user_s: f64,
    /// System time of iogen's worker (and pool) threads, seconds.
    pub sys_s: f64,
    /// (user + system) per completed I/O, microseconds.
    pub per_io_us: f64,
    /// User time of the whole process during the run (includes io_uring worker threads).
    pub process_user_s: f64,
    /// System time of the whole process during the run.
    pub process_sys_s: f64,
}

/// The engine that ran and its flags.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineInfo {
    /// `io_uring` or `sync`.
    pub engine: String,
    /// Setup flags and features in effect.
    pub flags: Vec<String>,
    /// Flags dropped during setup and fallbacks taken, with reasons.
    pub notes: Vec<String>,
}

impl EngineInfo {
    /// The engine as a run's summary names it: `io_uring`, or `threads` (the thread-pool
    /// engine, iogen's `sync`).
    pub fn backend_name(&self) -> &'static str {
        if self.engine == "io_uring" {
            "io_uring"
        } else {
            "threads"
        }
    }

    /// Why the thread pool ran when io_uring was wanted: the fallback's note (`io_uring
    /// setup failed (…)`); `None` for io_uring or a thread pool asked for.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.notes
            .iter()
            .find(|n| n.contains("fell back"))
            .map(String::as_str)
    }
}

/// The JSON summary of a run (also a run directory's `io/ID.json`, which `analyze` reads as
/// this type: a field an older writer left out reads as its default).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Summary {
    /// Engine and flags.
    pub engine: EngineInfo,
    /// Target file or device.
    pub target: String,
    /// Kernel release.
    pub kernel: String,
    /// The run was stopped early (stop request or signal).
    pub partial: bool,
    /// Wall time from start to the last completion, seconds.
    pub elapsed_s: f64,
    /// Completed I/Os over all kinds.
    pub ios: u64,
    /// Bytes over all kinds.
    pub bytes: u64,
    /// Failed I/Os over all kinds.
    pub errors: u64,
    /// I/Os per second.
    pub iops: f64,
    /// MiB per second.
    pub mib_s: f64,
    /// Open loop: the configured rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intended_iops: Option<f64>,
    /// Open loop or replay: I/Os whose intended time fell in the run, per second of the
    /// intended window (what was offered, however late it was issued).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_iops: Option<f64>,
    /// CPU time.
    pub cpu: CpuTime,
    /// Per kind (`read`, `write`, `trim`, `flush`).
    pub kinds: BTreeMap<String, KindSummary>,
    /// The phase that ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<crate::PhaseSpec>,
    /// Verify results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<VerifySummary>,
}

/// Per-kind counters.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Counts {
    pub ios: u64,
    pub bytes: u64,
    pub errors: u64,
}

/// What a worker records: histograms, counters and (optionally) interval histograms.
pub(crate) struct Recorder {
    pub hists: Histograms,
    pub counts: [Counts; 4],
    interval: Option<IntervalState>,
    base_wall: Option<SystemTime>,
    /// Streams only: per [`BUCKET_NS`] of the worker's time, requests intended and requests
    /// issued then (a replay's rate curve, trace against replay).
    pub buckets: Option<Vec<[u32; 2]>>,
}

/// Width of a stream's rate buckets ([`Recorder::buckets`]), ns.
pub const BUCKET_NS: u64 = 10_000_000;

/// Most buckets a stream keeps (100 h); later requests go to the last one.
const MAX_BUCKETS: usize = 36_000_000;

struct IntervalState {
    hists: Histograms,
    period_ns: u64,
    index: u64,
    tx: Sender<IntervalMsg>,
}

/// One worker's histograms for one interval.
pub(crate) struct IntervalMsg {
    pub index: u64,
    pub hists: Histograms,
    /// The wall-clock instant of the worker's base (its time 0), when known: the log's
    /// `#[StartTime]`, so interval `start` + StartTime is the node's own clock.
    pub base_wall: Option<SystemTime>,
    /// For the last, partial interval: where the worker stopped (ns from the base), so the
    /// log gives that interval its true length rather than a whole period.
    pub end: Option<u64>,
}

impl Recorder {
    pub(crate) fn new(interval: Option<(Duration, Sender<IntervalMsg>)>) -> Self {
        Recorder {
            hists: Histograms::new(),
            counts: [Counts::default(); 4],
            interval: interval.map(|(p, tx)| IntervalState {
                hists: Histograms::new(),
                period_ns: (p.as_nanos() as u64).max(1_000_000),
                index: 0,
                tx,
            }),
            base_wall: None,
            buckets: None,
        }
    }

    /// Keeps per-bucket counts of intended and issued requests from now on.
    pub(crate) fn keep_buckets(&mut self) {
        self.buckets = Some(Vec::new());
    }

    /// The wall-clock instant of time 0 of the recorded times (sent with each interval).
    pub(crate) fn set_base_wall(&mut self, at: SystemTime) {
        self.base_wall = Some(at);
    }

    /// Records a completion; `res` is bytes or a negated errno (a failure, cancellation or
    /// give-up: counted as an error and recorded in the histograms like a success). Times are
    /// ns from the start. The completion goes into the interval its `completed` time falls in:
    /// a worker that waited across an interval's end (blocked on a throttled device, or
    /// descheduled) would otherwise put what it reaps late into the interval before, which
    /// then shows more I/O than the device did in it.
    pub(crate) fn record(
        &mut self,
        kind: IoKind,
        intended: u64,
        submitted: u64,
        completed: u64,
        res: i32,
    ) {
        self.tick(completed);
        let c = &mut self.counts[kind_index(kind)];
        if res < 0 {
            c.errors += 1;
        } else {
            c.ios += 1;
            c.bytes += res as u64;
        }
        // Failed, cancelled and abandoned I/Os stay in the latency picture: their response
        // time runs to their failure (or to the instant they were given up on), CO-safe.
        let (r, s, l) = (
            completed.saturating_sub(intended),
            completed.saturating_sub(submitted),
            submitted.saturating_sub(intended),
        );
        self.hists.record(kind, r, s, l);
        if let Some(b) = &mut self.buckets {
            for (t, which) in [(intended, 0), (submitted, 1)] {
                let i = usize::try_from(t / BUCKET_NS)
                    .unwrap_or(usize::MAX)
                    .min(MAX_BUCKETS - 1);
                if b.len() <= i {
                    b.resize(i + 1, [0, 0]);
                }
                b[i][which] = b[i][which].saturating_add(1);
            }
        }
        if let Some(iv) = &mut self.interval {
            iv.hists.record(kind, r, s, l);
        }
    }

    /// Sends finished intervals up to `now` (ns from the start).
    pub(crate) fn tick(&mut self, now: u64) {
        if let Some(iv) = &mut self.interval {
            while now >= (iv.index + 1) * iv.period_ns {
                let hists = std::mem::take(&mut iv.hists);
                let _ = iv.tx.send(IntervalMsg {
                    index: iv.index,
                    hists,
                    base_wall: self.base_wall,
                    end: None,
                });
                iv.index += 1;
            }
        }
    }

    /// Sends the last, partial interval, which ends at `now` (ns from the start), and closes
    /// the interval channel.
    pub(crate) fn flush(&mut self, now: u64) {
        if let Some(iv) = self.interval.take() {
            let _ = iv.tx.send(IntervalMsg {
                index: iv.index,
                hists: iv.hists,
                base_wall: self.base_wall,
                end: Some(now),
            });
        }
    }

    pub(crate) fn total(&self) -> Counts {
        self.counts.iter().fold(Counts::default(), |a, c| Counts {
            ios: a.ios + c.ios,
            bytes: a.bytes + c.bytes,
            errors: a.errors + c.errors,
        })
    }

    pub(crate) fn merge(&mut self, other: &Recorder) -> Result<(), Error> {
        self.hists.merge(&other.hists)?;
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            a.ios += b.ios;
            a.bytes += b.bytes;
            a.errors += b.errors;
        }
        Ok(())
    }

    /// Fills the totals and per-kind parts of a summary for a run of `elapsed`.
    pub(crate) fn summarize(&self, s: &mut Summary, elapsed: Duration) {
        let secs = elapsed.as_secs_f64().max(1e-9);
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0) / secs;
        for (k, c) in KINDS.into_iter().zip(&self.counts) {
            if c.ios == 0 && c.errors == 0 {
                continue;
            }
            let mut ks = KindSummary {
                ios: c.ios,
                bytes: c.bytes,
                errors: c.errors,
                iops: c.ios as f64 / secs,
                mib_s: mib(c.bytes),
                ..Default::default()
            };
            if let Some(h) = self.hists.get(k) {
                ks.response = Percentiles::of(&h.response);
                ks.service = Percentiles::of(&h.service);
                ks.lateness = Percentiles::of(&h.lateness);
            }
            s.kinds.insert(kind_name(k).to_owned(), ks);
        }
        let t = self.total();
        s.elapsed_s = elapsed.as_secs_f64();
        s.ios = t.ios;
        s.bytes = t.bytes;
        s.errors = t.errors;
        s.iops = t.ios as f64 / secs;
        s.mib_s = mib(t.bytes);
    }
}

/// Writes interval histograms as they arrive from `jobs` workers, one line per kind and
/// metric and interval, merging the workers' histograms of the same interval.
pub(crate) struct IntervalLog {
    out: Vec<u8>,
    file: fs_err::File,
    jobs: usize,
    period: Duration,
    /// Interval index → merged histograms, workers heard from, latest partial end (ns).
    pending: BTreeMap<u64, (Histograms, usize, Option<u64>)>,
    serializer: V2DeflateSerializer,
    header_done: bool,
    start: SystemTime,
}

impl IntervalLog {
    pub(crate) fn create(path: &Path, jobs: usize, period: Duration) -> Result<Self, Error> {
        Ok(IntervalLog {
            out: Vec::new(),
            file: fs_err::File::create(path)?,
            jobs,
            period,
            pending: BTreeMap::new(),
            serializer: V2DeflateSerializer::new(),
            header_done: false,
            start: SystemTime::now(),
        })
    }

    pub(crate) fn add(&mut self, msg: &IntervalMsg) -> Result<(), Error> {
        // The StartTime is the jobs' base on the wall clock (they share one base), not the
        // instant this file was created: interval starts are offsets from that base.
        if !self.header_done
            && let Some(w) = msg.base_wall
        {
            self.start = w;
        }
        let e = self.pending.entry(msg.index).or_default();
        e.0.merge(&msg.hists)?;
        e.1 += 1;
        e.2 = e.2.max(msg.end);
        while let Some(entry) = self.pending.first_entry() {
            if entry.get().1 < self.jobs {
                break;
            }
            let (index, (h, _, end)) = entry.remove_entry();
            self.write_interval(index, &h, end)?;
        }
        Ok(())
    }

    /// Writes interval `index`: a whole period, or up to `end` (ns from the base) for a
    /// last, partial one.
    fn write_interval(
        &mut self,
        index: u64,
        h: &Histograms,
        end: Option<u64>,
    ) -> Result<(), Error> {
        let start = self.period * u32::try_from(index).unwrap_or(u32::MAX);
        let len = end.map_or(self.period, |e| {
            Duration::from_nanos(e)
                .saturating_sub(start)
                .clamp(Duration::from_micros(1), self.period)
        });
        write_log_entries(
            &mut self.out,
            &mut self.serializer,
            !self.header_done,
            self.start,
            h,
            start,
            len,
        )?;
        self.header_done = true;
        self.file.write_all(&self.out)?;
        self.out.clear();
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Result<(), Error> {
        for (index, (h, _, end)) in std::mem::take(&mut self.pending) {
            self.write_interval(index, &h, end)?;
        }
        if !self.header_done {
            write_log_entries(
                &mut self.out,
                &mut self.serializer,
                true,
                self.start,
                &Histograms::new(),
                Duration::ZERO,
                self.period,
            )?;
            self.file.write_all(&self.out)?;
        }
        self.file.flush()?;
        Ok(())
    }
}

fn write_log_entries(
    out: &mut Vec<u8>,
    ser: &mut V2DeflateSerializer,
    header: bool,
    start_time: SystemTime,
    h: &Histograms,
    start: Duration,
    len: Duration,
) -> Result<(), Error> {
    let mut b = IntervalLogWriterBuilder::new();
    if header {
        b.add_comment("iogen interval log: values in nanoseconds; tags are <kind>.<metric>");
        b.with_start_time(start_time);
    }
    let mut w = b.begin_log_with(out, ser)?;
    if header {
        w.write_comment("\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"")?;
    }
    for (k, kh) in h.iter() {
        for (i, m) in METRICS.iter().enumerate() {
            let tag = format!("{}.{m}", kind_name(k));
            w.write_histogram(kh.metric(i), start, len, Tag::new(&tag))
                .map_err(|e| Error::Histogram(format!("writing interval log: {e}")))?;
        }
    }
    Ok(())
}

/// Writes histograms to a file as a one-interval HdrHistogram log (mergeable across runs
/// and pods with [`read_histograms`] and [`Histograms::merge`]).
pub fn write_histograms(path: &Path, h: &Histograms) -> Result<(), Error> {
    let mut out = Vec::new();
    write_log_entries(
        &mut out,
        &mut V2DeflateSerializer::new(),
        true,
        SystemTime::now(),
        h,
        Duration::ZERO,
        Duration::from_secs(1),
    )?;
    fs_err::write(path, out)?;
    Ok(())
}

/// The histograms as the text of a one-interval HdrHistogram log (what
/// [`write_histograms`] writes), for sending them inside another message.
pub fn histograms_to_log(h: &Histograms) -> Result<String, Error> {
    let mut out = Vec::new();
    write_log_entries(
        &mut out,
        &mut V2DeflateSerializer::new(),
        false,
        SystemTime::now(),
        h,
        Duration::ZERO,
        Duration::from_secs(1),
    )?;
    String::from_utf8(out).map_err(|e| Error::Histogram(format!("histogram log: {e}")))
}

/// Parses an iogen histogram or interval log's text, summing all intervals of each tag.
pub fn parse_histograms(bytes: &[u8]) -> Result<Histograms, Error> {
    parse_log(bytes).map_err(Error::Histogram)
}

/// Reads an iogen histogram or interval log, summing all intervals of each tag.
pub fn read_histograms(path: &Path) -> Result<Histograms, Error> {
    let bytes = fs_err::read(path)?;
    parse_log(&bytes).map_err(|reason| Error::Histogram(format!("{}: {reason}", path.display())))
}

/// The `#[StartTime]` of an iogen interval log (`bytes`): its base (time 0 of the interval
/// timestamps) on the wall clock of the machine that wrote it, ns since the Unix epoch, with
/// the millisecond precision of the format. `None` without one.
pub fn log_start_time(bytes: &[u8]) -> Option<i128> {
    IntervalLogIterator::new(bytes).find_map(|e| match e {
        Ok(LogEntry::StartTime(d)) => Some(d.as_nanos() as i128),
        _ => None,
    })
}

/// The response histograms of the interval lines in `chunk`, a run of complete lines of an
/// iogen interval log read while it is written (header lines are skipped; no header is
/// needed): `(kind, histogram)` per interval line, `kind` from its tag `<kind>.response`.
/// For live metrics of I/O still running; the whole log is read by [`split_responses`].
pub fn interval_responses(chunk: &[u8]) -> Result<Vec<(String, Histogram<u64>)>, Error> {
    Ok(response_intervals(chunk)?
        .into_iter()
        .map(|iv| (iv.kind, iv.hist))
        .collect())
}

/// One response interval of an interval log.
struct ResponseInterval {
    kind: String,
    /// Start, seconds from the log's own start.
    start: f64,
    /// Length, seconds.
    len: f64,
    hist: Histogram<u64>,
}

/// Every response interval of an interval log, in order.
fn response_intervals(bytes: &[u8]) -> Result<Vec<ResponseInterval>, Error> {
    let bad = |reason: String| Error::Histogram(format!("interval log: {reason}"));
    let mut de = Deserializer::new();
    let mut out = Vec::new();
    for (n, entry) in IntervalLogIterator::new(bytes).enumerate() {
        let entry = entry.map_err(|e| bad(format!("log entry {}: {e:?}", n + 1)))?;
        let LogEntry::Interval(iv) = entry else {
            continue;
        };
        let Some(kind) = iv.tag().and_then(|t| t.as_str().strip_suffix(".response")) else {
            continue;
        };
        let raw = base64_decode(iv.encoded_histogram())
            .ok_or_else(|| bad(format!("log entry {}: bad base64", n + 1)))?;
        let h: Histogram<u64> = de
            .deserialize(&mut raw.as_slice())
            .map_err(|e| bad(format!("log entry {}: {e:?}", n + 1)))?;
        out.push(ResponseInterval {
            kind: kind.to_owned(),
            start: iv.start_timestamp().as_secs_f64(),
            len: iv.duration().as_secs_f64(),
            hist: h,
        });
    }
    Ok(out)
}

/// Decodes an interval log as it is written, from chunks of any size (a file's new bytes, a
/// pod log's lines): [`IntervalFeed::push`] returns the response histograms of the lines it
/// completed and keeps a trailing partial line for the next chunk.
#[derive(Debug, Default)]
pub struct IntervalFeed {
    partial: Vec<u8>,
}

impl IntervalFeed {
    /// Adds `chunk`; returns `(kind, histogram)` of each interval line it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<(String, Histogram<u64>)>, Error> {
        self.partial.extend_from_slice(chunk);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return Ok(Vec::new());
        };
        let lines: Vec<u8> = self.partial.drain(..=end).collect();
        interval_responses(&lines)
    }
}

/// Sums the response histograms of every kind in an iogen interval log (`bytes`) into two
/// halves: intervals for which `first(start_s, length_s)` is true, and the rest. Start times
/// are as written, seconds from the log's own start. For splitting a unit's I/O by whether
/// something (a snapshot) was in flight during each interval.
pub fn split_responses(
    bytes: &[u8],
    mut first: impl FnMut(f64, f64) -> bool,
) -> Result<(Histogram<u64>, Histogram<u64>), Error> {
    let bad = |reason: String| Error::Histogram(format!("interval log: {reason}"));
    let new = || Histogram::<u64>::new(3).map_err(|e| bad(format!("{e:?}")));
    let (mut yes, mut no) = (new()?, new()?);
    for (n, iv) in response_intervals(bytes)?.into_iter().enumerate() {
        let side = if first(iv.start, iv.len) {
            &mut yes
        } else {
            &mut no
        };
        side.add(&iv.hist)
            .map_err(|e| bad(format!("response interval {}: {e:?}", n + 1)))?;
    }
    Ok((yes, no))
}

pub(crate) fn parse_log(bytes: &[u8]) -> Result<Histograms, String> {
    let mut out = Histograms::new();
    let mut de = Deserializer::new();
    for (n, entry) in IntervalLogIterator::new(bytes).enumerate() {
        let entry = entry.map_err(|e| format!("log entry {}: {e:?}", n + 1))?;
        let LogEntry::Interval(iv) = entry else {
            continue;
        };
        let Some(tag) = iv.tag() else { continue };
        let Some((kind, metric)) = tag.as_str().split_once('.') else {
            continue;
        };
        let Some(k) = KINDS.into_iter().find(|k| kind_name(*k) == kind) else {
            continue;
        };
        let Some(m) = METRICS.iter().position(|x| *x == metric) else {
            continue;
        };
        let raw = base64_decode(iv.encoded_histogram())
            .ok_or_else(|| format!("tag {}: bad base64", tag.as_str()))?;
        let h: Histogram<u64> = de
            .deserialize(&mut raw.as_slice())
            .map_err(|e| format!("tag {}: {e:?}", tag.as_str()))?;
        out.entry(k)
            .metric_mut(m)
            .add(&h)
            .map_err(|e| format!("tag {}: {e:?}", tag.as_str()))?;
    }
    Ok(out)
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let s = s.trim().trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= val(c)? << (18 - 6 * i);
        }
        let n = match chunk.len() {
            4 => 3,
            3 => 2,
            2 => 1,
            _ => return None,
        };
        out.extend_from_slice(&acc.to_be_bytes()[1..=n]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interval log fed in pieces that cut its lines anywhere gives every interval once,
    /// whole: the same responses as reading the log at once.
    #[test]
    fn an_interval_log_fed_in_pieces_gives_each_interval_once() {
        let mut h = Histograms::new();
        for i in 0..500u64 {
            h.record(IoKind::Read, 1_000 + i * 37, 900, 100);
            h.record(IoKind::Write, 50_000 + i * 91, 40_000, 10_000);
        }
        let log = histograms_to_log(&h).expect("log").into_bytes();
        let mut twice = log.clone();
        twice.extend_from_slice(&log);
        let (all, none) = split_responses(&twice, |_, _| true).expect("split");
        assert_eq!((all.len(), none.len()), (2000, 0));
        for piece in [1, 7, 100, twice.len()] {
            let mut feed = IntervalFeed::default();
            let mut got: Vec<(String, u64)> = Vec::new();
            for chunk in twice.chunks(piece) {
                for (kind, hist) in feed.push(chunk).expect("decode") {
                    got.push((kind, hist.len()));
                }
            }
            let n = |k: &str| {
                got.iter()
                    .filter(|(g, _)| g == k)
                    .map(|(_, c)| c)
                    .sum::<u64>()
            };
            assert_eq!(
                (n("read"), n("write")),
                (1000, 1000),
                "pieces of {piece}: {got:?}"
            );
            assert_eq!(got.len(), 4, "pieces of {piece}: {got:?}");
        }
    }

    /// A completion reaped after an interval's end counts in the interval it completed in,
    /// even when the worker did not tick in between.
    #[test]
    fn a_completion_counts_in_the_interval_it_completed_in() {
        let (tx, rx) = std::sync::mpsc::channel();
        let mut r = Recorder::new(Some((Duration::from_millis(200), tx)));
        r.tick(0);
        // Two in the first interval, then one reaped 250 ms in with no tick since.
        r.record(IoKind::Write, 0, 10, 50_000_000, 4096);
        r.record(IoKind::Write, 0, 10, 199_000_000, 4096);
        r.record(IoKind::Write, 150_000_000, 150_000_010, 250_000_000, 4096);
        r.flush(300_000_000);
        let got: Vec<(u64, u64)> = rx
            .iter()
            .map(|m| {
                let n = m.hists.get(IoKind::Write).map_or(0, |k| k.response.len());
                (m.index, n)
            })
            .collect();
        assert_eq!(got, [(0, 2), (1, 1)]);
    }

    #[test]
    fn a_failed_merge_leaves_the_histograms_untouched() {
        let mut a = Histograms::new();
        a.record(IoKind::Read, 1_000, 900, 100);
        // A write histogram that cannot hold more than 10 µs (no auto-resize).
        let small = Histogram::new_with_bounds(1, 10_000, 3).expect("bounds");
        a.kinds[kind_index(IoKind::Write)] = Some(KindHistograms {
            response: small.clone(),
            service: small.clone(),
            lateness: small,
        });
        let before = a.clone();
        let mut b = Histograms::new();
        b.record(IoKind::Read, 2_000, 1_900, 100);
        b.record(IoKind::Write, 5_000_000, 4_000_000, 1_000_000);
        let err = a
            .merge(&b)
            .expect_err("1 ms does not fit a 10 µs histogram");
        assert!(err.to_string().contains("write"), "{err}");
        // Read was merged before write failed: that must not show.
        assert_eq!(a, before);
        b.kinds[kind_index(IoKind::Write)] = None;
        a.merge(&b).expect("read only");
        assert_eq!(a.get(IoKind::Read).map(|h| h.response.len()), Some(2));
    }
}
