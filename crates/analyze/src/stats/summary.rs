//! `analyze summary`: per op type counts, errors by class, intended vs achieved rate, response
//! and service percentiles, lateness, dependency wait and queue time; I/O per unit from
//! `io/ID.json` (local provider); and, when the trace carried observed latencies (imported
//! from a recording), the observed percentiles beside the replayed ones.
//!
//! Rates, over each op type's active span: *intended* = (count − 1) / (last − first intended
//! instant of the op type), the rate the trace offered; *achieved* = (count − 1) / (last −
//! first completion), the rate at which operations finished. A system that keeps up has the
//! two equal; one that falls behind spaces its completions by its own service rate, and
//! achieved drops below intended. A span shorter than a second (a burst: every attach at t = 0)
//! counts as one second, so a burst reads as its size per second, never 0/s (nor a huge rate
//! from completions microseconds apart). Peaks: the most events intended, and completed, in
//! one second of the run (seconds from the origin).

use std::collections::BTreeMap;
use std::path::Path;

use hdrhistogram::Histogram;
use replay::{CompletionState, Outcome, Percentiles};
use serde::{Deserialize, Serialize};
use trace_format::{OpType, TraceReader};

use crate::Result;
use crate::stats::hist::{self, merge, pct, record};
use crate::stats::load::{Accumulator, Rec, Run};

/// Accumulated data of one op type.
#[derive(Debug, Clone, Default)]
pub struct OpAcc {
    /// Events.
    pub count: u64,
    /// Failed events.
    pub failed: u64,
    /// Failures per class.
    pub errors: BTreeMap<String, u64>,
    /// Response times.
    pub response: Option<Histogram<u64>>,
    /// Service times.
    pub service: Option<Histogram<u64>>,
    /// Lateness.
    pub lateness: Option<Histogram<u64>>,
    /// Dependency wait of the events that waited.
    pub dep_wait: Option<Histogram<u64>>,
    /// Queue time of the events that queued.
    pub queue: Option<Histogram<u64>>,
    /// First and last intended instant.
    pub intended: (u64, u64),
    /// First and last completion.
    pub completed: (u64, u64),
    /// Per second from the origin: [events intended, events completed] in it.
    pub per_second: BTreeMap<u64, [u64; 2]>,
}

impl OpAcc {
    fn add(&mut self, r: &Rec<'_>) {
        if self.count == 0 {
            self.intended = (r.intended, r.intended);
            self.completed = (r.completed, r.completed);
        }
        self.count += 1;
        self.intended = (
            self.intended.0.min(r.intended),
            self.intended.1.max(r.intended),
        );
        self.completed = (
            self.completed.0.min(r.completed),
            self.completed.1.max(r.completed),
        );
        if r.outcome == Outcome::Error {
            self.failed += 1;
            let class = r.error_class.as_deref().unwrap_or("unknown");
            match self.errors.get_mut(class) {
                Some(n) => *n += 1,
                None => {
                    self.errors.insert(class.to_owned(), 1);
                }
            }
        }
        self.per_second
            .entry(r.intended / 1_000_000_000)
            .or_default()[0] += 1;
        self.per_second
            .entry(r.completed / 1_000_000_000)
            .or_default()[1] += 1;
        record(&mut self.response, r.response);
        record(&mut self.service, r.service);
        record(&mut self.lateness, r.lateness);
        if r.dep_wait > 0 {
            record(&mut self.dep_wait, r.dep_wait);
        }
        if r.queue > 0 {
            record(&mut self.queue, r.queue);
        }
    }

    fn merge(&mut self, o: OpAcc) {
        if o.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = o;
            return;
        }
        self.count += o.count;
        self.failed += o.failed;
        for (k, v) in o.errors {
            *self.errors.entry(k).or_default() += v;
        }
        merge(&mut self.response, o.response);
        merge(&mut self.service, o.service);
        merge(&mut self.lateness, o.lateness);
        merge(&mut self.dep_wait, o.dep_wait);
        merge(&mut self.queue, o.queue);
        for (sec, c) in o.per_second {
            let e = self.per_second.entry(sec).or_default();
            e[0] += c[0];
            e[1] += c[1];
        }
        self.intended = (
            self.intended.0.min(o.intended.0),
            self.intended.1.max(o.intended.1),
        );
        self.completed = (
            self.completed.0.min(o.completed.0),
            self.completed.1.max(o.completed.1),
        );
    }

    /// Intended and achieved rate, per second (see the module docs).
    pub fn rates(&self) -> (f64, f64) {
        let per_s = |(a, b): (u64, u64)| {
            if self.count == 0 {
                0.0
            } else if b.saturating_sub(a) < 1_000_000_000 {
                self.count as f64
            } else {
                (self.count - 1) as f64 / ((b - a) as f64 / 1e9)
            }
        };
        (per_s(self.intended), per_s(self.completed))
    }

    /// The most events intended, and completed, in one second of the run.
    pub fn peaks(&self) -> (u64, u64) {
        self.per_second
            .values()
            .fold((0, 0), |(i, c), v| (i.max(v[0]), c.max(v[1])))
    }
}

/// Everything a scan of one run gathers: one [`OpAcc`] per op type.
#[derive(Debug, Clone, Default)]
pub struct RunStats {
    /// Per op type, indexed by its tag.
    pub ops: BTreeMap<OpType, OpAcc>,
    /// Highest event id seen.
    pub max_id: u64,
}

impl Accumulator for RunStats {
    fn add(&mut self, r: &Rec<'_>) {
        self.max_id = self.max_id.max(r.id);
        self.ops.entry(r.op).or_default().add(r);
    }

    fn merge(&mut self, other: Self) {
        self.max_id = self.max_id.max(other.max_id);
        for (op, a) in other.ops {
            self.ops.entry(op).or_default().merge(a);
        }
    }
}

impl RunStats {
    /// Scans a run.
    pub fn of(run: &Run) -> Result<Self> {
        run.scan(RunStats::default)
    }

    /// All events together.
    pub fn total(&self) -> OpAcc {
        let mut t = OpAcc::default();
        for a in self.ops.values() {
            t.merge(a.clone());
        }
        t
    }
}

/// Per op type results of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OpReport {
    /// Events recorded.
    pub count: u64,
    /// Succeeded.
    pub ok: u64,
    /// Failed.
    pub failed: u64,
    /// Failures per error class.
    pub errors: BTreeMap<String, u64>,
    /// Events per second of intended time.
    pub intended_rate: f64,
    /// Completions per second from the first to the last completion.
    pub achieved_rate: f64,
    /// Most events intended in one second.
    #[serde(default)]
    pub intended_peak: u64,
    /// Most completions in one second.
    #[serde(default)]
    pub achieved_peak: u64,
    /// Response time (completed − intended), ns.
    pub response: Percentiles,
    /// Service time (completed − started), ns.
    pub service: Percentiles,
    /// Dispatch lateness, ns.
    pub lateness: Percentiles,
    /// Dependency wait of the events that waited, ns.
    pub dep_wait: Percentiles,
    /// Queue time of the events that queued, ns.
    pub queue: Percentiles,
    /// Latency observed in the source recording (trace `observed`), when the trace carried it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<Percentiles>,
}

impl OpReport {
    /// The report of accumulated data.
    pub fn of(a: &OpAcc) -> Self {
        let (intended_rate, achieved_rate) = a.rates();
        let (intended_peak, achieved_peak) = a.peaks();
        Self {
            count: a.count,
            ok: a.count - a.failed,
            failed: a.failed,
            errors: a.errors.clone(),
            intended_rate,
            achieved_rate,
            intended_peak,
            achieved_peak,
            response: pct(a.response.as_ref()),
            service: pct(a.service.as_ref()),
            lateness: pct(a.lateness.as_ref()),
            dep_wait: pct(a.dep_wait.as_ref()),
            queue: pct(a.queue.as_ref()),
            observed: None,
        }
    }
}

/// Latency percentiles of one I/O kind of an iogen unit, ns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct IoKindReport {
    /// I/Os completed.
    pub ios: u64,
    /// I/Os per second.
    pub iops: f64,
    /// MiB per second.
    pub mib_s: f64,
    /// Response time p50, ns.
    pub p50: u64,
    /// p90.
    pub p90: u64,
    /// p99.
    pub p99: u64,
    /// p99.9.
    pub p999: u64,
    /// Maximum.
    pub max: u64,
}

/// One I/O unit (`io_phase` event) of the local provider, from `io/ID.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct IoUnitReport {
    /// The `io_phase` event id.
    pub id: u64,
    /// I/Os completed.
    pub ios: u64,
    /// Failed I/Os.
    pub errors: u64,
    /// I/Os per second.
    pub iops: f64,
    /// MiB per second.
    pub mib_s: f64,
    /// Stopped early (detach or abort).
    pub partial: bool,
    /// Per kind (`read`, `write`, …).
    pub kinds: BTreeMap<String, IoKindReport>,
}

/// The summary of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunSummary {
    /// The run directory.
    pub run: String,
    /// Run id.
    pub run_id: String,
    /// Trace path as recorded.
    pub trace: String,
    /// SHA-256 of the trace.
    pub trace_sha256: String,
    /// The run's labels (`run --label KEY=VALUE`), in key order.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Provider name.
    pub provider: String,
    /// Replay speed.
    pub speed: f64,
    /// Completion state.
    pub state: CompletionState,
    /// Events recorded.
    pub events: u64,
    /// Failed events.
    pub failed: u64,
    /// Failures per class, all op types.
    pub errors: BTreeMap<String, u64>,
    /// All events: intended rate, per second.
    pub intended_rate: f64,
    /// All events: achieved rate, per second.
    pub achieved_rate: f64,
    /// Dispatch lateness over all events, ns.
    pub lateness: Percentiles,
    /// Per op type.
    pub ops: BTreeMap<String, OpReport>,
    /// I/O units (local provider `io_phase` events), by id.
    pub io_units: Vec<IoUnitReport>,
    /// Whether observed latencies from the trace are included (`ops.*.observed`).
    pub observed: bool,
    /// Remarks (e.g. why observed latencies are missing).
    pub notes: Vec<String>,
    /// The run's verdict and its checks (absent for a run without a readable summary or
    /// from before verdicts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validity: Option<replay::Validity>,
    /// Bare `io` events replayed through per-volume streams (from the run's summary): their
    /// requests are not in `events.jsonl`, so not in `ops`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub io_streams: Vec<replay::StreamFidelity>,
    /// Latency observed in the source recording (trace `observed`) of each streamed volume's
    /// `io` events, beside `io_streams[].response` (what the replay measured): recorded vs
    /// replayed, by volume.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub io_streams_observed: BTreeMap<String, Percentiles>,
    /// The cluster's own timing of the run's calls (CSI sidecars, API server; from the run's
    /// summary, when its provider scraped them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<replay::cluster::ClusterTiming>,
}

/// `analyze summary --json`: one summary per run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SummaryReport {
    /// The runs, in the order given.
    pub runs: Vec<RunSummary>,
}

/// Summarises one run from its scan.
pub fn summarize(run: &Run, stats: &RunStats) -> Result<RunSummary> {
    let total = stats.total();
    let (mut intended_rate, mut achieved_rate) = total.rates();
    let mut ops: BTreeMap<String, OpReport> = stats
        .ops
        .iter()
        .map(|(op, a)| (op.name().to_owned(), OpReport::of(a)))
        .collect();
    let mut notes = Vec::new();
    let run_summary = replay::RunDir::open(&run.path).summary().ok();
    let io_streams = run_summary
        .as_ref()
        .map(|s| s.io_streams.clone())
        .unwrap_or_default();
    // Requests replayed through streams have no record in events.jsonl: their counts and
    // latencies are the run's own (summary.json), added to the `io` row and the totals.
    let (mut events, mut failed, mut errors) = (total.count, total.failed, total.errors.clone());
    if let Some(rs) = run_summary.as_ref().filter(|_| !io_streams.is_empty()) {
        let streamed: u64 = io_streams.iter().map(|f| f.requests).sum();
        let streamed_failed: u64 = io_streams
            .iter()
            .map(|f| f.requests - f.completed.min(f.requests))
            .sum();
        events += streamed;
        failed += streamed_failed;
        for (class, n) in [
            (
                "io_failed",
                io_streams.iter().map(|f| f.errors).sum::<u64>(),
            ),
            ("io_dropped", io_streams.iter().map(|f| f.dropped).sum()),
        ] {
            if n > 0 {
                *errors.entry(class.to_owned()).or_default() += n;
            }
        }
        let row = ops.entry(OpType::Io.name().to_owned()).or_insert_with(|| {
            let mut r = OpReport::of(&OpAcc::default());
            if let Some(o) = rs.ops.get(OpType::Io.name()) {
                r.response = o.response.clone();
                r.service = o.service.clone();
                r.lateness = o.lateness.clone();
            }
            r
        });
        row.count += streamed;
        row.ok += streamed - streamed_failed;
        row.failed += streamed_failed;
        let (si, sa) = (
            io_streams.iter().map(|f| f.intended_rate).sum::<f64>(),
            io_streams.iter().map(|f| f.achieved_rate).sum::<f64>(),
        );
        row.intended_rate += si;
        row.achieved_rate += sa;
        intended_rate += si;
        achieved_rate += sa;
        // Peaks: the streams' requests per second (intended, issued) summed over volumes.
        let mut per_second: BTreeMap<u64, [u64; 2]> = BTreeMap::new();
        for c in stream_curves(&run.path)? {
            for (k, v) in c.per_second.iter().enumerate() {
                let e = per_second.entry(c.first_second + k as u64).or_default();
                e[0] += v[0];
                e[1] += v[1];
            }
        }
        let (pi, pa) = per_second
            .values()
            .fold((0, 0), |(i, a), v| (i.max(v[0]), a.max(v[1])));
        row.intended_peak = row.intended_peak.max(pi);
        row.achieved_peak = row.achieved_peak.max(pa);
        notes.push(format!(
            "{streamed} io request(s) were replayed through per-volume I/O streams: they are in \
             the io row and under I/O streams, with the run's own latency percentiles, but have \
             no per-request records (export, qos and the timelines do not see them)"
        ));
    }
    // The run's tool error bounds (`tool_ns`, docs/replay.md) beside the percentiles
    // recomputed here from the same events.
    if let Some(rs) = &run_summary {
        for (op, r) in &mut ops {
            if let Some(o) = rs.ops.get(op) {
                r.response.tool_ns = o.response.tool_ns;
                r.service.tool_ns = o.service.tool_ns;
            }
        }
    }
    let streamed = !io_streams.is_empty() && run.manifest.state == CompletionState::Complete;
    let observed = observed_latencies(run, stats.max_id, streamed, &mut notes)?;
    let has_observed = !observed.by_op.is_empty();
    for (op, h) in observed.by_op {
        if let Some(r) = ops.get_mut(op.name()) {
            r.observed = Some(Percentiles::of(&h));
        }
    }
    let io_streams_observed = observed
        .by_volume
        .into_iter()
        .filter(|(v, _)| io_streams.iter().any(|f| &f.volume == v))
        .map(|(v, h)| (v, Percentiles::of(&h)))
        .collect();
    Ok(RunSummary {
        run: run.path.display().to_string(),
        run_id: run.manifest.run_id.clone(),
        trace: run.manifest.trace.path.clone(),
        trace_sha256: run.manifest.trace.sha256.clone(),
        labels: run.manifest.labels.clone(),
        provider: run.manifest.provider.name.clone(),
        speed: run.speed(),
        state: run.manifest.state,
        events,
        failed,
        errors,
        intended_rate,
        achieved_rate,
        lateness: pct(total.lateness.as_ref()),
        ops,
        io_units: io_units(&run.path)?,
        observed: has_observed,
        notes,
        validity: run.validity.clone(),
        io_streams,
        io_streams_observed,
        cluster: run_summary.and_then(|s| s.cluster),
    })
}

/// The per-second rate curves of a run's bare I/O streams (`io/streams/*.json`), by file
/// name (none without streams).
pub fn stream_curves(run_dir: &Path) -> Result<Vec<replay::streams::RateCurve>> {
    let dir = run_dir.join("io").join("streams");
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut paths: Vec<_> = fs_err::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let bytes = fs_err::read(&path)?;
            serde_json::from_slice(&bytes).map_err(|e| crate::Error::RunFile {
                file: path.clone(),
                message: e.to_string(),
            })
        })
        .collect()
}

/// Scans and summarises a run.
pub fn summary(path: &Path) -> Result<RunSummary> {
    let run = Run::open(path)?;
    let stats = RunStats::of(&run)?;
    summarize(&run, &stats)
}

/// Observed latencies of the trace: per op type, and of `io` events per volume.
#[derive(Default)]
struct Observed {
    by_op: BTreeMap<OpType, Histogram<u64>>,
    by_volume: BTreeMap<String, Histogram<u64>>,
}

/// Observed latencies of trace events with id ≤ `max_id` (of every `io` event too when
/// `all_io`: streamed requests have no record, so `max_id` does not bound them), read only
/// for imported traces (`provenance.source_format` set: a synthesized trace carries none).
fn observed_latencies(
    run: &Run,
    max_id: u64,
    all_io: bool,
    notes: &mut Vec<String>,
) -> Result<Observed> {
    let mut out = Observed::default();
    if run.manifest.trace.header.provenance.source_format.is_none() {
        return Ok(out);
    }
    let Some(path) = run.trace_path() else {
        notes.push(format!(
            "observed latencies not shown: trace {} not found with sha256 {}",
            run.manifest.trace.path, run.manifest.trace.sha256
        ));
        return Ok(out);
    };
    for ev in TraceReader::open(&path)?.events() {
        let ev = ev?;
        let io = match &ev.op {
            trace_format::Op::Io(io) => Some(io),
            _ => None,
        };
        if ev.id > max_id && !(all_io && io.is_some()) {
            if all_io {
                continue;
            }
            break;
        }
        if let Some(o) = ev.observed {
            out.by_op
                .entry(ev.op.op_type())
                .or_insert_with(hist::latency)
                .saturating_record(o.max(1));
            if let Some(io) = io {
                let v = io.volume.as_str();
                if !out.by_volume.contains_key(v) {
                    out.by_volume.insert(v.to_owned(), hist::latency());
                }
                if let Some(h) = out.by_volume.get_mut(v) {
                    h.saturating_record(o.max(1));
                }
            }
        }
    }
    Ok(out)
}

fn ns(us: f64) -> u64 {
    (us * 1000.0).round() as u64
}

/// Reads `io/ID.json` (iogen's [`iogen::Summary`]) of every I/O unit.
pub fn io_units(run_dir: &Path) -> Result<Vec<IoUnitReport>> {
    let mut out = Vec::new();
    for (id, p) in crate::stats::phase_io::unit_files(run_dir, "json")? {
        let text = fs_err::read(&p)?;
        let s: iogen::Summary =
            serde_json::from_slice(&text).map_err(|e| crate::Error::Config {
                file: p.clone(),
                message: e.to_string(),
            })?;
        let kinds = s
            .kinds
            .into_iter()
            .map(|(k, v)| {
                let r = &v.response;
                (
                    k,
                    IoKindReport {
                        ios: v.ios,
                        iops: v.iops,
                        mib_s: v.mib_s,
                        p50: ns(r.p50_us),
                        p90: ns(r.p90_us),
                        p99: ns(r.p99_us),
                        p999: ns(r.p99_9_us),
                        max: ns(r.max_us),
                    },
                )
            })
            .collect();
        out.push(IoUnitReport {
            id,
            ios: s.ios,
            errors: s.errors,
            iops: s.iops,
            mib_s: s.mib_s,
            partial: s.partial,
            kinds,
        });
    }
    Ok(out)
}
