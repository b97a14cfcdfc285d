//! `io_phase` units on the run's time axis: the interval histograms iogen wrote to
//! `io/ID.hlog` (response time per I/O kind, one interval per 200 ms of the unit) placed at
//! run instants, so the report's I/O timeline and `qos` cover `io_phase` runs too.
//!
//! An interval's timestamps are relative to iogen's clock start (its *base*), not to the run
//! origin. The log's `#[StartTime]` is that base on the wall clock of the machine iogen ran on;
//! `manifest.origin` is the run origin on ours. [`replay::provider::interval_base_ns`] maps
//! one to the other, clamped to what the `io_phase` record allows (not before the call
//! `started`, not after `completed − elapsed`, `elapsed` = iogen's last completion since its
//! base, `ID.json`): the same convention the providers use to split a unit's I/O by
//! snapshot windows, so `analyze` and the run's own summary agree.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use trace_format::{IoKind, Op, OpType, TraceReader};

use crate::stats::load::{Accumulator, Rec, Run};
use crate::{Error, Result};

/// One interval of one unit: the response times of one I/O kind.
#[derive(Debug, Clone)]
pub struct PhaseInterval {
    /// Start, ns since the run origin.
    pub start_ns: u64,
    /// End, ns since the run origin.
    pub end_ns: u64,
    /// The I/O kind.
    pub kind: IoKind,
    /// Response times (completion − intended) of the kind's I/Os completed in the interval.
    pub response: Histogram<u64>,
}

impl PhaseInterval {
    /// The interval's midpoint, ns since the run origin: where a window or bucket takes it.
    pub fn mid_ns(&self) -> u64 {
        self.start_ns + (self.end_ns - self.start_ns) / 2
    }
}

/// One `io_phase` unit's interval log on the run's time axis.
#[derive(Debug, Clone)]
pub struct PhaseUnit {
    /// Trace event id.
    pub id: u64,
    /// iogen's clock start, ns since the run origin (see the module docs).
    pub base_ns: u64,
    /// The intervals, in log order.
    pub intervals: Vec<PhaseInterval>,
}

/// `io_phase` records of a run: event id → (`started`, `completed`).
#[derive(Debug, Default)]
pub struct Spans(pub HashMap<u64, (u64, u64)>);

impl Accumulator for Spans {
    fn add(&mut self, r: &Rec<'_>) {
        if r.op == OpType::IoPhase {
            self.0.insert(r.id, (r.started, r.completed));
        }
    }

    fn merge(&mut self, o: Self) {
        self.0.extend(o.0);
    }
}

/// `io/<event id>.<ext>` files of a run: (event id, path), by id (none without `io/`).
pub fn unit_files(run_dir: &Path, ext: &str) -> Result<Vec<(u64, PathBuf)>> {
    let dir = run_dir.join("io");
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut out: Vec<(u64, PathBuf)> = fs_err::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .filter_map(|p| Some((p.file_stem()?.to_str()?.parse().ok()?, p)))
        .collect();
    out.sort();
    Ok(out)
}

fn logs(run_dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    unit_files(run_dir, "hlog")
}

/// Whether the run has `io_phase` interval logs.
pub fn has_units(run_dir: &Path) -> Result<bool> {
    Ok(!logs(run_dir)?.is_empty())
}

/// An I/O kind by its name in iogen's tags (`read`, `write`, `trim`, `flush`).
pub fn io_kind(name: &str) -> Option<IoKind> {
    Some(match name {
        "read" => IoKind::Read,
        "write" => IoKind::Write,
        "trim" => IoKind::Trim,
        "flush" => IoKind::Flush,
        _ => return None,
    })
}

/// A parsed log: StartTime (ns since the epoch) and `(start, length, kind, response)` with
/// times relative to the base.
type Parsed = (Option<i128>, Vec<(u64, u64, IoKind, Histogram<u64>)>);

fn parse(path: &Path) -> Result<Parsed> {
    let bytes = fs_err::read(path)?;
    let bad = |message: String| Error::IntervalLog {
        file: path.to_owned(),
        message,
    };
    let mut start = None;
    let mut out = Vec::new();
    let mut de = Deserializer::new();
    for (n, entry) in IntervalLogIterator::new(&bytes).enumerate() {
        let entry = entry.map_err(|e| bad(format!("log entry {}: {e:?}", n + 1)))?;
        let iv = match entry {
            LogEntry::StartTime(d) => {
                start = Some(d.as_nanos() as i128);
                continue;
            }
            LogEntry::BaseTime(_) => continue,
            LogEntry::Interval(iv) => iv,
        };
        let Some(tag) = iv.tag() else { continue };
        let Some(k) = tag.as_str().strip_suffix(".response").and_then(io_kind) else {
            continue;
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(iv.encoded_histogram().trim())
            .map_err(|e| bad(format!("log entry {}: tag {}: {e}", n + 1, tag.as_str())))?;
        let h: Histogram<u64> = de
            .deserialize(&mut raw.as_slice())
            .map_err(|e| bad(format!("log entry {}: tag {}: {e:?}", n + 1, tag.as_str())))?;
        out.push((
            iv.start_timestamp().as_nanos() as u64,
            iv.duration().as_nanos() as u64,
            k,
            h,
        ));
    }
    Ok((start, out))
}

/// Reads every `io/ID.hlog` of a run and places its intervals on the run's time axis;
/// `spans` are the run's `io_phase` records (a [`Spans`] scan).
pub fn units(run: &Run, spans: &Spans) -> Result<Vec<PhaseUnit>> {
    let origin = run.origin_ns();
    let mut out = Vec::new();
    for (id, path) in logs(&run.path)? {
        let (log_start, ivs) = parse(&path)?;
        let json = path.with_extension("json");
        let elapsed = if json.is_file() {
            let e: iogen::Summary =
                serde_json::from_slice(&fs_err::read(&json)?).map_err(|e| Error::IntervalLog {
                    file: json.clone(),
                    message: e.to_string(),
                })?;
            // 0: not given (a summary without its run time).
            Some(e.elapsed_s)
                .filter(|s| *s > 0.0)
                .map(|s| (s * 1e9) as u64)
        } else {
            None
        };
        let base = replay::provider::interval_base_ns(
            log_start,
            origin,
            spans.0.get(&id).copied(),
            elapsed,
        );
        let intervals = ivs
            .into_iter()
            .map(|(s, len, kind, response)| PhaseInterval {
                start_ns: base + s,
                end_ns: base + s + len.max(1),
                kind,
                response,
            })
            .collect();
        out.push(PhaseUnit {
            id,
            base_ns: base,
            intervals,
        });
    }
    Ok(out)
}

/// The I/O of a run's `io_phase` units as one distribution per I/O kind: the `<kind>.response`
/// histograms (completion − intended: CO-safe) of every interval of every `io/ID.hlog`, merged.
/// This is what I/O SLOs judge (`compare`'s `io KIND pPCT` rows, capacity's `io p99.9<=10ms`),
/// not the `io_phase` unit's duration.
#[derive(Debug, Clone)]
pub struct RunIo {
    /// Units (interval logs) read.
    pub units: usize,
    /// Merged response histograms (analyze's bounds, 1 ns … 1 h), indexed as [`IO_KINDS`].
    kinds: [Option<Histogram<u64>>; 4],
}

/// The I/O kinds in table order.
pub const IO_KINDS: [IoKind; 4] = [IoKind::Read, IoKind::Write, IoKind::Trim, IoKind::Flush];

fn kind_index(k: IoKind) -> usize {
    match k {
        IoKind::Read => 0,
        IoKind::Write => 1,
        IoKind::Trim => 2,
        IoKind::Flush => 3,
    }
}

/// The name of an I/O kind (`read`, `write`, `trim`, `flush`).
pub fn io_kind_name(k: IoKind) -> &'static str {
    ["read", "write", "trim", "flush"][kind_index(k)]
}

impl RunIo {
    /// Reads every `io/ID.hlog` of a run directory; `None` when it has none (no `io_phase`
    /// units ran with the local provider). A malformed log is an error naming the file.
    pub fn read(run_dir: &Path) -> Result<Option<Self>> {
        let logs = logs(run_dir)?;
        if logs.is_empty() {
            return Ok(None);
        }
        let mut kinds: [Option<Histogram<u64>>; 4] = Default::default();
        for (_, path) in &logs {
            let (_, ivs) = parse(path)?;
            for (_, _, k, h) in ivs {
                let dst = kinds[kind_index(k)].get_or_insert_with(crate::stats::hist::latency);
                crate::stats::hist::add_saturating(dst, &h);
            }
        }
        Ok(Some(Self {
            units: logs.len(),
            kinds,
        }))
    }

    /// The kinds that have I/O, with their response histograms, in [`IO_KINDS`] order.
    pub fn kinds(&self) -> impl Iterator<Item = (IoKind, &Histogram<u64>)> {
        IO_KINDS
            .into_iter()
            .zip(&self.kinds)
            .filter_map(|(k, h)| h.as_ref().map(|h| (k, h)))
    }

    /// The response histogram of one kind, or of every kind merged (`None`); `None` when no
    /// I/O of that kind completed.
    pub fn response(&self, kind: Option<IoKind>) -> Option<Histogram<u64>> {
        match kind {
            Some(k) => self.kinds[kind_index(k)].clone(),
            None => {
                let mut all: Option<Histogram<u64>> = None;
                for (_, h) in self.kinds() {
                    crate::stats::hist::merge(&mut all, Some(h.clone()));
                }
                all
            }
        }
    }

    /// The response time at percentile `p` (0–100, 100 = max) of one kind or of all (`None`),
    /// ns; `None` when no such I/O completed.
    pub fn percentile(&self, kind: Option<IoKind>, p: f64) -> Option<u64> {
        self.response(kind)
            .filter(|h| !h.is_empty())
            .map(|h| crate::stats::hist::at(&h, p))
    }
}

/// Every `io_phase` unit of a run on its time axis ([`units`] after a [`Spans`] scan).
pub fn run_units(run: &Run) -> Result<Vec<PhaseUnit>> {
    if !has_units(&run.path)? {
        return Ok(Vec::new());
    }
    let spans = run.scan(Spans::default)?;
    units(run, &spans)
}

/// The I/O response times (iogen's, completion − intended: coordinated-omission safe) of
/// every unit merged into one histogram: only I/Os of `kind` when given, and only intervals
/// whose midpoint lies in `range` (`[start, end)` ns since the run origin) when given. The
/// one reader of `io_phase` I/O latency for SLOs (capacity) and run-to-run comparison.
pub fn response(
    units: &[PhaseUnit],
    kind: Option<IoKind>,
    range: Option<(u64, u64)>,
) -> Histogram<u64> {
    let mut h = crate::stats::hist::latency();
    for iv in units.iter().flat_map(|u| &u.intervals) {
        if kind.is_some_and(|k| k != iv.kind) {
            continue;
        }
        if range.is_some_and(|(a, b)| !(a..b).contains(&iv.mid_ns())) {
            continue;
        }
        crate::stats::hist::add_saturating(&mut h, &iv.response);
    }
    h
}

/// Tenants of the trace's `io_phase` events: event id → tenant.
pub fn tenants(trace: &Path) -> Result<HashMap<u64, String>> {
    let mut out = HashMap::new();
    for ev in TraceReader::open(trace)?.events() {
        let ev = ev?;
        if let (Op::IoPhase(_), Some(t)) = (&ev.op, &ev.tenant) {
            out.insert(ev.id, t.as_str().to_owned());
        }
    }
    Ok(out)
}

/// Label of units without a tenant.
pub const NO_TENANT: &str = "io_phase";

/// Response histograms of every unit merged per tenant and time bucket of `width` ns (an
/// interval goes to the bucket holding its midpoint), all I/O kinds together.
pub fn by_tenant(
    units: &[PhaseUnit],
    tenants: &HashMap<u64, String>,
    width: u64,
) -> BTreeMap<String, BTreeMap<u64, Histogram<u64>>> {
    let mut out: BTreeMap<String, BTreeMap<u64, Histogram<u64>>> = BTreeMap::new();
    for u in units {
        let t = tenants.get(&u.id).map_or(NO_TENANT, String::as_str);
        let per = out.entry(t.to_owned()).or_default();
        for iv in &u.intervals {
            let h = per
                .entry(iv.mid_ns() / width.max(1))
                .or_insert_with(crate::stats::hist::coarse);
            crate::stats::hist::add_saturating(h, &iv.response);
        }
    }
    out
}
