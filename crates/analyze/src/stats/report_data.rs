//! What `analyze report` shows of one run, gathered in one pass over each source: the run's
//! statistics and summary, its events bucketed over the run's time ([`Timeline`], for the I/O
//! timeline and rate figures), its `io_phase` units' response histograms per tenant and time
//! bucket, and its headline. `render/report.rs` draws them.

use std::collections::BTreeMap;
use std::path::Path;

use hdrhistogram::Histogram;
use trace_format::OpType;

use crate::Result;
use crate::stats::headline::{self, Headline};
use crate::stats::hist::{self, coarse};
use crate::stats::load::{Accumulator, Rec, Run};
use crate::stats::phase_io::{self, Spans};
use crate::stats::summary::{RunStats, RunSummary, summarize};

/// Time buckets per timeline figure.
pub const BUCKETS: u64 = 200;

/// A run's events over its time, in [`BUCKETS`] buckets of `width` ns from the origin (the
/// last bucket also holds what lies beyond).
pub(crate) struct Timeline {
    /// Bucket width, ns.
    pub(crate) width: u64,
    /// Response times of single `io` events, by bucket of completion.
    pub(crate) io: Vec<Option<Histogram<u64>>>,
    /// Events by bucket of intended instant.
    pub(crate) intended: Vec<u64>,
    /// Events by bucket of completion.
    pub(crate) completed: Vec<u64>,
    /// Control operations: op type, started, completed.
    pub(crate) control: Vec<(OpType, u64, u64)>,
    /// Where the `io_phase` records ran ([`phase_io::units`] places their intervals by them).
    pub(crate) spans: Spans,
}

impl Timeline {
    fn new(width: u64) -> Self {
        let n = BUCKETS as usize;
        Self {
            width,
            io: vec![None; n],
            intended: vec![0; n],
            completed: vec![0; n],
            control: Vec::new(),
            spans: Spans::default(),
        }
    }

    fn idx(&self, t: u64) -> usize {
        ((t / self.width) as usize).min(BUCKETS as usize - 1)
    }
}

impl Accumulator for Timeline {
    fn add(&mut self, r: &Rec<'_>) {
        let (i, c) = (self.idx(r.intended), self.idx(r.completed));
        self.intended[i] += 1;
        self.completed[c] += 1;
        if r.op == OpType::Io {
            self.io[c]
                .get_or_insert_with(coarse)
                .saturating_record(r.response.max(1));
        } else if r.op.is_control() {
            self.control.push((r.op, r.started, r.completed));
        }
        self.spans.add(r);
    }

    fn merge(&mut self, o: Self) {
        for (a, b) in self.io.iter_mut().zip(o.io) {
            hist::merge(a, b);
        }
        for (a, b) in self.intended.iter_mut().zip(o.intended) {
            *a += b;
        }
        for (a, b) in self.completed.iter_mut().zip(o.completed) {
            *a += b;
        }
        self.control.extend(o.control);
        self.spans.merge(o.spans);
    }
}

/// What the report shows of one run.
pub(crate) struct ReportData {
    /// The run.
    pub(crate) run: Run,
    /// Its per-op-type accumulators (the CDF figure's histograms).
    pub(crate) stats: RunStats,
    /// Its summary (the percentile tables).
    pub(crate) summary: RunSummary,
    /// Its events over time (the I/O timeline and rate figures).
    pub(crate) timeline: Timeline,
    /// `io_phase` response histograms per tenant and bucket of `phase_width` ns.
    pub(crate) phase: BTreeMap<String, BTreeMap<u64, Histogram<u64>>>,
    /// The bucket width of `phase`, ns: the timeline's, or the longest interval when longer.
    pub(crate) phase_width: u64,
    /// Its I/O with and without a snapshot in flight.
    pub(crate) headline: Headline,
}

impl ReportData {
    /// Opens and scans the run at `path` (refused unless valid or `allow_invalid`, see
    /// [`Run::open_for_analysis`]).
    pub(crate) fn load(path: &Path, allow_invalid: bool) -> Result<Self> {
        let run = Run::open_for_analysis(path, allow_invalid)?;
        let stats = RunStats::of(&run)?;
        let summary = summarize(&run, &stats)?;
        let total = stats.total();
        let end = total.completed.1.max(total.intended.1).max(1);
        let width = end.div_ceil(BUCKETS).max(1);
        let timeline = run.scan(|| Timeline::new(width))?;
        let (mut phase, mut phase_width) = (BTreeMap::new(), width);
        let mut units = Vec::new();
        if phase_io::has_units(&run.path)? {
            units = phase_io::units(&run, &timeline.spans)?;
            let tenants = match run.trace_path() {
                Some(t) => phase_io::tenants(&t)?,
                None => Default::default(),
            };
            // Buckets no shorter than an interval, so each bucket holds whole intervals.
            let longest = units
                .iter()
                .flat_map(|u| &u.intervals)
                .map(|iv| iv.end_ns - iv.start_ns)
                .max()
                .unwrap_or(0);
            phase_width = width.max(longest);
            phase = phase_io::by_tenant(&units, &tenants, phase_width);
        }
        let headline = headline::headline(&run, &units)?;
        Ok(Self {
            headline,
            run,
            stats,
            summary,
            timeline,
            phase,
            phase_width,
        })
    }
}
