//! Results: per-kind HdrHistograms of response, service and lateness times (nanoseconds,
//! 3 significant digits, up to a day), counters, the JSON summary, and the HdrHistogram V2
//! interval log (the format Java's `HistogramLogProcessor` reads).
//!
//! Histograms merge losslessly ([`Histograms::merge`]), so results of many jobs, runs or pods
//! combine into exact percentiles; [`write_histograms`]/[`read_histograms`] carry them between
//! processes as an interval log with one tag per kind and metric (`read.response`, …).

use std::collections::BTreeMap;
use std::sync::mpsc::Sender;
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use trace_format::IoKind;

mod interval_log;

pub(crate) use interval_log::IntervalLog;
pub use interval_log::{
    IntervalFeed, histograms_to_log, interval_responses, log_start_time, parse_histograms,
    read_histograms, split_responses, write_histograms,
};

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

#[cfg(test)]
mod tests {
    use super::*;

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
