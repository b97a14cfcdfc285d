//! `analyze compare BASE... -- NEW...`: is NEW worse than BASE, beyond run-to-run noise?
//!
//! Each run contributes one value per row (op type × metric: p50, p99, p99.9, mean response
//! time, error rate; and `io KIND` rows from `io_phase` units' I/O histograms), so the spread
//! between runs — what a re-run with another seed changes — is what the test weighs, not the
//! spread of events inside one run. How the runs were collected (interleaved, or separate
//! batches, from each run's start time) decides what the test may assume (`design.rs`); the
//! per-row statistics are in `judge.rs`. Latencies are compared on the log scale, the error
//! rate as counts (Fisher's exact test). p-values are adjusted over all tested rows with
//! Holm's step-down method (family-wise error rate ≤ α). Swapping the sides negates every
//! difference and interval exactly and keeps the p-values, so verdicts mirror. A row is a
//! **regression** when Holm-significant and beyond its threshold; **no change** only when
//! its whole interval lies within ±threshold; otherwise **inconclusive**, with the runs per
//! side that would decide it; **insufficient data** when a run has too few events for the
//! metric (left out with `skip`). The method and its calibration: `docs/analyze.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::stats::hist::{at, mean};
use crate::stats::inference::holm;
use crate::stats::load::Run;
use crate::stats::phase_io::{RunIo, io_kind_name};
use crate::stats::summary::RunStats;
use crate::{Error, Result};

pub mod design;
mod differences;
pub mod example;
mod judge;
pub(crate) mod tool;

pub use design::{Design, DesignKind};
use differences::{label_differences, manifest_differences};
pub use judge::{DRIFT_ALPHA, MAX_RUNS, POWER};

/// The compared metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Median response time.
    P50,
    /// 99th percentile response time.
    P99,
    /// 99.9th percentile response time.
    #[serde(rename = "p99.9")]
    P999,
    /// Mean response time.
    Mean,
    /// Failed fraction of events.
    ErrorRate,
}

impl Metric {
    /// All metrics, in table order.
    pub const ALL: [Metric; 5] = [
        Metric::P50,
        Metric::P99,
        Metric::P999,
        Metric::Mean,
        Metric::ErrorRate,
    ];

    /// Its name (`p50`, `p99`, `p99.9`, `mean`, `error_rate`).
    pub fn name(self) -> &'static str {
        match self {
            Metric::P50 => "p50",
            Metric::P99 => "p99",
            Metric::P999 => "p99.9",
            Metric::Mean => "mean",
            Metric::ErrorRate => "error_rate",
        }
    }

    /// The percentile (0–100) of a percentile metric.
    pub fn percentile(self) -> Option<f64> {
        match self {
            Metric::P50 => Some(50.0),
            Metric::P99 => Some(99.0),
            Metric::P999 => Some(99.9),
            _ => None,
        }
    }

    /// Compared on the log scale (latencies), not as an absolute difference (error rate).
    pub fn is_latency(self) -> bool {
        self != Metric::ErrorRate
    }
}

/// Thresholds: the smallest change that counts, per metric (relative for latencies; for the
/// error rate an absolute fraction and a relative part, the larger applying).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Thresholds {
    /// p50, relative (0.05 = 5%).
    pub p50: f64,
    /// p99, relative.
    pub p99: f64,
    /// p99.9, relative.
    pub p99_9: f64,
    /// Mean, relative.
    pub mean: f64,
    /// Error rate, absolute (0.005 = half a percentage point).
    pub error_rate: f64,
    /// Error rate, relative to the smaller side's rate (0.2 = 20 %); the tolerance is the
    /// larger of this and `error_rate`.
    pub error_rate_rel: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            p50: 0.05,
            p99: 0.10,
            p99_9: 0.10,
            mean: 0.05,
            error_rate: 0.005,
            error_rate_rel: 0.2,
        }
    }
}

impl Thresholds {
    /// The threshold of a metric.
    pub fn of(&self, m: Metric) -> f64 {
        match m {
            Metric::P50 => self.p50,
            Metric::P99 => self.p99,
            Metric::P999 => self.p99_9,
            Metric::Mean => self.mean,
            Metric::ErrorRate => self.error_rate,
        }
    }

    /// Applies `METRIC=VALUE` (`p99=10%`, `mean=0.05`, `error_rate=0.5%`,
    /// `error_rate_rel=20%`; `all=…` sets every latency metric and the absolute error rate).
    pub fn set(&mut self, spec: &str) -> Result<()> {
        let bad = |m: &str| Error::Invalid(format!("--threshold {spec:?}: {m}"));
        let (k, v) = spec
            .split_once('=')
            .ok_or_else(|| bad("expected METRIC=VALUE, e.g. p99=10%"))?;
        let v = match v.strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
            None => v.trim().parse::<f64>(),
        }
        .map_err(|e| bad(&format!("value: {e}")))?;
        if !(v.is_finite() && v >= 0.0) {
            return Err(bad("value must be ≥ 0"));
        }
        match k.trim() {
            "p50" => self.p50 = v,
            "p99" => self.p99 = v,
            "p99.9" => self.p99_9 = v,
            "mean" => self.mean = v,
            "error_rate" | "errors" => self.error_rate = v,
            "error_rate_rel" => self.error_rate_rel = v,
            "all" => {
                *self = Self {
                    p50: v,
                    p99: v,
                    p99_9: v,
                    mean: v,
                    error_rate: v,
                    error_rate_rel: self.error_rate_rel,
                }
            }
            other => {
                return Err(bad(&format!(
                    "unknown metric {other:?}; expected p50, p99, p99.9, mean, error_rate, \
                     error_rate_rel or all"
                )));
            }
        }
        Ok(())
    }
}

/// Options of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CompareOptions {
    /// Allow runs of different traces (compare op types only).
    pub by_op_type: bool,
    /// Thresholds (practical significance).
    pub thresholds: Thresholds,
    /// Family-wise error rate over the rows (Holm), and 1 − the confidence of the intervals.
    pub alpha: f64,
    /// Fewest events per run for any verdict (mean, error rate, and the floor of percentiles).
    pub min_events: u64,
    /// Events beyond a percentile each run must have for its verdict: percentile p needs
    /// `min_tail / (1 − p)` events (5: p50 10, p99 500, p99.9 5000).
    pub min_tail: u64,
    /// Admit runs that did not finish or whose verdict is not `valid` ([`Run::check_valid`]).
    #[serde(default)]
    pub allow_invalid: bool,
    /// Metrics left out (no rows): e.g. p99.9 when runs are too short for it.
    #[serde(default)]
    pub skip: Vec<Metric>,
    /// The batch-shift allowance (relative) of the `separate_batches` design: the largest
    /// shift between two batches of identical runs assumed (measure it with A/A batches).
    #[serde(default = "default_batch_shift")]
    pub batch_shift: f64,
}

fn default_batch_shift() -> f64 {
    0.05
}

impl Default for CompareOptions {
    fn default() -> Self {
        Self {
            by_op_type: false,
            thresholds: Thresholds::default(),
            alpha: 0.05,
            min_events: 10,
            min_tail: 5,
            allow_invalid: false,
            skip: Vec::new(),
            batch_shift: default_batch_shift(),
        }
    }
}

impl CompareOptions {
    /// Events each run needs for a verdict on `m`.
    pub fn required_events(&self, m: Metric) -> u64 {
        let tail = m.percentile().map_or(0, |p| {
            (self.min_tail as f64 / (1.0 - p / 100.0)).round() as u64
        });
        tail.max(self.min_events)
    }
}

/// The verdict of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Worse beyond the threshold, significant after Holm's adjustment.
    Regression,
    /// Better beyond the threshold, significant after Holm's adjustment.
    Improvement,
    /// The whole interval within ±threshold (equivalence).
    NoChange,
    /// Neither: the interval reaches beyond the threshold without a significant change beyond
    /// it, or no between-run variance (one run per side): more runs (or batches) needed.
    Inconclusive,
    /// A run has fewer events than the metric needs.
    InsufficientData,
}

impl Verdict {
    /// The verdict with the sides swapped.
    pub fn mirrored(self) -> Self {
        match self {
            Verdict::Regression => Verdict::Improvement,
            Verdict::Improvement => Verdict::Regression,
            v => v,
        }
    }
}

/// One run's value of one row.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunValue {
    /// The statistic: ns for latencies, a fraction for the error rate.
    pub value: f64,
    /// Events it was computed from.
    pub events: u64,
}

/// One row to judge: per-run values of both sides.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Row label: op type, or `io KIND` for `io_phase` I/O.
    pub op: String,
    /// Metric.
    pub metric: Metric,
    /// One value per base run.
    pub base: Vec<RunValue>,
    /// One value per new run.
    pub new: Vec<RunValue>,
}

/// One op type (or I/O kind) and metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Row {
    /// Op type, or `io read` etc. for the I/O of `io_phase` units.
    pub op: String,
    /// Metric.
    pub metric: Metric,
    /// Base: geometric mean of the runs' values (latency, ns) or mean failed fraction.
    pub base: f64,
    /// New, likewise.
    pub new: f64,
    /// Change: `new / base − 1` for latencies, `new − base` for the error rate.
    pub change: f64,
    /// Latencies: ln(new / base), the tested difference (exactly negated when the sides swap).
    /// Error rate: the absolute difference (same as `change`).
    pub diff: f64,
    /// Interval (1 − α) of `change`, low end, widened by `margin` in the `separate_batches`
    /// design (none with one run per side).
    pub ci_low: Option<f64>,
    /// High end.
    pub ci_high: Option<f64>,
    /// Degrees of freedom of the test (0: one run per side untested); for the error rate, the
    /// events compared (Fisher's exact test has none).
    pub df: f64,
    /// Two-sided p-value of "no difference" (beyond `margin`); Fisher's for the error rate.
    pub p: f64,
    /// p-value after Holm's adjustment over the tested rows.
    pub p_holm: f64,
    /// Threshold given.
    pub threshold: f64,
    /// Tolerance applied: the threshold; for the error rate the larger of the absolute and
    /// the relative threshold.
    pub tolerance: f64,
    /// Batch-shift allowance the change was tested against (relative; 0 unless
    /// `separate_batches`).
    pub margin: f64,
    /// Drift over the run order the difference was adjusted for (relative change per run):
    /// always in the `separate_batches` design, when significant in the interleaved one.
    pub drift_per_run: Option<f64>,
    /// Interval (1 − α) of the drift per run, low end.
    #[serde(default)]
    pub drift_ci_low: Option<f64>,
    /// High end.
    #[serde(default)]
    pub drift_ci_high: Option<f64>,
    /// Verdict.
    pub verdict: Verdict,
    /// When inconclusive: runs per side that would decide the row at the observed noise (80 %
    /// power; in the `batch_baseline` design, as batches of the runs' batch size); none when
    /// more runs of this design cannot (the batch-shift allowance is as large as the
    /// threshold).
    pub runs_needed: Option<u64>,
    /// Per-run values, base then new.
    pub base_runs: Vec<RunValue>,
    /// Per-run values of the new side.
    pub new_runs: Vec<RunValue>,
    /// Events each run needed for this metric.
    pub required_events: u64,
    #[serde(skip)]
    pub(crate) est: Option<judge::Est>,
    /// Error rate: failed and events, base then new, pooled over the runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts: Option<(u64, u64, u64, u64)>,
    /// The most the tool's own delay could have added to the base side's value, relative
    /// (its runs' largest `tool_ns` ÷ figure, from `summary.json`); absent when some run
    /// has no bound for this row (module `tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_base: Option<f64>,
    /// Likewise for the new side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_new: Option<f64>,
    /// Whether the row is inconclusive because the sides' tool bounds could have made its
    /// verdict (a quieter host decides it, not more runs).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tool_undecided: bool,
}

/// `analyze compare --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CompareReport {
    /// Base run directories.
    pub base: Vec<String>,
    /// New run directories.
    pub new: Vec<String>,
    /// Whether all runs replayed the same trace (same SHA-256).
    pub same_trace: bool,
    /// Options used.
    pub options: CompareOptions,
    /// Whether between-run variance could be estimated (at least two runs on one side).
    pub between_run_variance: bool,
    /// How the runs were collected and what the test assumes.
    pub design: Design,
    /// Fields in which the runs' manifests differ besides the seed and the start time
    /// (`options.speed: 1 vs 2`): anything but the system under test makes the comparison
    /// suspect.
    pub manifest_differences: Vec<String>,
    /// Labels (`run --label`) whose values differ between the sides or within one
    /// (`build: 1041 vs 1042`): what the comparison is about, not a reason to suspect it.
    #[serde(default)]
    pub label_differences: Vec<String>,
    /// Largest `runs_needed` of the inconclusive rows.
    pub runs_needed: Option<u64>,
    /// Rows, by op type then metric.
    pub rows: Vec<Row>,
    /// Rows (`op metric`) missing from some run, so not compared.
    pub unmatched: Vec<String>,
    /// Op types a run calls imprecise with no tool bound to weigh them by (`op: run:
    /// evidence`; runs from before the bounds said `engine-bound`): their rows are not
    /// judged, and keep the exit code at 3. Imprecise op types with bounds are judged, and
    /// their rows weighed by them (`Row::tool_undecided`).
    #[serde(default)]
    pub engine_bound: Vec<String>,
    /// Rows tested (not insufficient data, variance known): Holm's family size.
    pub tested: usize,
    /// Rows with a regression.
    pub regressions: usize,
    /// Rows with an improvement.
    pub improvements: usize,
    /// Rows that are inconclusive.
    pub inconclusive: usize,
    /// Rows with insufficient data.
    pub insufficient: usize,
    /// Notes for the reader (e.g. why everything is inconclusive).
    pub notes: Vec<String>,
}

impl CompareReport {
    /// The verdict counts and the largest `runs_needed` of the inconclusive rows, from the
    /// rows (after a pass that changed verdicts: the tool's bounds, identical sides).
    pub(crate) fn recount(&mut self) {
        let count = |v: Verdict| self.rows.iter().filter(|x| x.verdict == v).count();
        self.regressions = count(Verdict::Regression);
        self.improvements = count(Verdict::Improvement);
        self.inconclusive = count(Verdict::Inconclusive);
        self.insufficient = count(Verdict::InsufficientData);
        self.runs_needed = self
            .rows
            .iter()
            .filter(|x| x.verdict == Verdict::Inconclusive)
            .filter_map(|x| x.runs_needed)
            .max();
    }

    /// The exit code a gate uses: 1 regression, 3 inconclusive, insufficient data or
    /// nothing judged, 0 otherwise (every row no change or improvement).
    pub fn exit_code(&self) -> u8 {
        if self.regressions > 0 {
            1
        } else if self.inconclusive > 0
            || self.insufficient > 0
            || self.tested == 0
            || !self.engine_bound.is_empty()
        {
            3
        } else {
            0
        }
    }
}

/// Opens every run (the one place where runs enter `compare`: a run-validity check belongs
/// here).
fn open_runs(paths: &[PathBuf], allow_invalid: bool) -> Result<Vec<Run>> {
    paths
        .iter()
        .map(|p| Run::open_for_analysis(p, allow_invalid))
        .collect()
}

/// Compares BASE runs with NEW runs (run directories).
pub fn compare(base: &[PathBuf], new: &[PathBuf], opts: &CompareOptions) -> Result<CompareReport> {
    if base.is_empty() || new.is_empty() {
        return Err(Error::Invalid(
            "compare needs at least one BASE and one NEW run".into(),
        ));
    }
    let (b, n) = (
        open_runs(base, opts.allow_invalid)?,
        open_runs(new, opts.allow_invalid)?,
    );
    let ids: Vec<(&Path, replay::RunIdentity)> = b
        .iter()
        .chain(&n)
        .map(|r| (r.path.as_path(), replay::RunIdentity::of(&r.manifest)))
        .collect();
    let pairs: Vec<(&Path, &replay::RunIdentity)> = ids.iter().map(|(p, i)| (*p, i)).collect();
    replay::combinable(
        replay::Purpose::Compare {
            by_op_type: opts.by_op_type,
        },
        &pairs,
    )?;
    let same_trace = ids
        .iter()
        .all(|(_, i)| i.trace_sha256 == ids[0].1.trace_sha256);
    let values = |runs: &[Run]| -> Result<Vec<BTreeMap<(String, Metric), RunValue>>> {
        runs.iter().map(run_values).collect()
    };
    let (bv, nv) = (values(&b)?, values(&n)?);
    // Op types a run calls imprecise without a bound to weigh them by: their rows are left
    // out, and said.
    let mut engine_bound = Vec::new();
    let mut bound_ops = BTreeSet::new();
    for r in b.iter().chain(&n) {
        for (op, why) in r.unsized_ops() {
            engine_bound.push(format!("{op}: {}: {why}", r.path.display()));
            bound_ops.insert(op);
        }
    }
    let is_bound = |op: &str| {
        bound_ops.contains(op)
            || (op.starts_with("io ") && bound_ops.contains(replay::validity::IO_PHASE_IO))
    };
    let keys: BTreeSet<&(String, Metric)> = bv.iter().chain(&nv).flat_map(|m| m.keys()).collect();
    let mut samples = Vec::new();
    let mut unmatched = Vec::new();
    for key in keys {
        let side = |v: &[BTreeMap<(String, Metric), RunValue>]| -> Option<Vec<RunValue>> {
            v.iter().map(|m| m.get(key).copied()).collect()
        };
        match (side(&bv), side(&nv)) {
            _ if is_bound(&key.0) => {}
            (Some(base), Some(new)) => samples.push(Sample {
                op: key.0.clone(),
                metric: key.1,
                base,
                new,
            }),
            _ => unmatched.push(format!("{} {}", key.0, key.1.name())),
        }
    }
    let paths = |v: &[PathBuf]| v.iter().map(|p| p.display().to_string()).collect();
    let started = |runs: &[Run]| -> Vec<f64> {
        runs.iter()
            .map(|r| r.manifest.started.as_nanosecond() as f64 / 1e9)
            .collect()
    };
    let design = design::detect(&started(&b), &started(&n), opts.batch_shift);
    let mut r = judge(&samples, &design, opts);
    let run_ids = |runs: &[Run]| -> BTreeSet<String> {
        runs.iter().map(|x| x.manifest.run_id.clone()).collect()
    };
    if run_ids(&b) == run_ids(&n) && b.len() == n.len() {
        judge::identical(&mut r);
    } else {
        tool::weigh_report(&mut r, &b, &n);
    }
    r.base = paths(base);
    r.new = paths(new);
    r.same_trace = same_trace;
    r.unmatched = unmatched;
    if !engine_bound.is_empty() {
        r.notes.push(format!(
            "not judged, imprecise in a run without a tool bound to weigh them by (exit \
             code 3): {}",
            engine_bound.join("; ")
        ));
    }
    r.engine_bound = engine_bound;
    r.manifest_differences = manifest_differences(&b, &n);
    r.label_differences = label_differences(&b, &n);
    Ok(r)
}

/// Every row value of one run: per op type p50/p99/p99.9/mean response time and error rate;
/// per I/O kind of its `io_phase` units the same latencies (from `io/ID.hlog`).
pub fn run_values(run: &Run) -> Result<BTreeMap<(String, Metric), RunValue>> {
    let stats = RunStats::of(run)?;
    let mut out = BTreeMap::new();
    let mut latencies = |op: &str, h: &hdrhistogram::Histogram<u64>| {
        let bins: Vec<(f64, f64)> = h
            .iter_recorded()
            .map(|v| (v.value_iterated_to() as f64, v.count_at_value() as f64))
            .collect();
        for m in Metric::ALL {
            let value = match m.percentile() {
                Some(p) => at(h, p) as f64,
                None if m == Metric::Mean => mean(&bins),
                None => continue,
            };
            out.insert(
                (op.to_owned(), m),
                RunValue {
                    value: value.max(1.0),
                    events: h.len(),
                },
            );
        }
    };
    for (op, acc) in &stats.ops {
        if let Some(h) = acc.response.as_ref().filter(|h| !h.is_empty()) {
            latencies(op.name(), h);
        }
    }
    if let Some(io) = RunIo::read(&run.path)? {
        for (k, h) in io.kinds() {
            if !h.is_empty() {
                latencies(&format!("io {}", io_kind_name(k)), h);
            }
        }
    }
    for (op, acc) in &stats.ops {
        out.insert(
            (op.name().to_owned(), Metric::ErrorRate),
            RunValue {
                value: acc.failed as f64 / acc.count.max(1) as f64,
                events: acc.count,
            },
        );
    }
    Ok(out)
}

/// Judges rows of per-run values collected in `design` (the statistics alone; see the
/// module docs). Run paths, trace, manifest differences and unmatched rows of the report are
/// left empty.
pub fn judge(samples: &[Sample], design: &Design, opts: &CompareOptions) -> CompareReport {
    let samples: Vec<&Sample> = samples
        .iter()
        .filter(|s| !opts.skip.contains(&s.metric))
        .collect();
    let between = samples.iter().any(|s| s.base.len().max(s.new.len()) >= 2);
    let mut rows: Vec<Row> = samples
        .iter()
        .map(|s| judge::test_row(s, design, opts))
        .collect();
    // Holm over the rows that got a test.
    let tested: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].verdict != Verdict::InsufficientData && rows[i].df > 0.0)
        .collect();
    let adj = holm(&tested.iter().map(|&i| rows[i].p).collect::<Vec<_>>());
    for (&i, &a) in tested.iter().zip(&adj) {
        rows[i].p_holm = a;
    }
    for row in &mut rows {
        judge::verdict(row, design, opts, tested.len());
    }
    let mut notes = Vec::new();
    if !between && !samples.is_empty() {
        notes.push(
            "one run per side: the variance between runs cannot be estimated, so no latency row \
             gets a verdict (inconclusive); give at least 2 runs per side (5 recommended)"
                .to_owned(),
        );
    }
    let undecidable: Vec<&Row> = rows
        .iter()
        .filter(|r| r.verdict == Verdict::Inconclusive && r.runs_needed.is_none() && r.df > 0.0)
        .collect();
    if !undecidable.is_empty() {
        let no_room = undecidable
            .iter()
            .any(|r| r.margin > 0.0 && r.margin >= r.tolerance);
        let undecidable: Vec<String> = undecidable
            .iter()
            .map(|r| format!("{} {}", r.op, r.metric.name()))
            .collect();
        notes.push(format!(
            "more runs of this design cannot decide {}: {}",
            undecidable.join(", "),
            if no_room {
                "the batch-shift allowance leaves no room within the threshold; interleave \
                 the sides, or collect A/A batches of the base (docs/analyze.md)"
                    .to_owned()
            } else {
                format!(
                    "it would take more than {MAX_RUNS} runs a side at the observed noise \
                     (the change sits at the threshold, or the noise is too large to plan \
                     from: interleave the sides, or collect A/A batches of the base)"
                )
            }
        ));
    }
    let drifting: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            let d = r.drift_per_run?;
            let ci = match (r.drift_ci_low, r.drift_ci_high) {
                (Some(l), Some(h)) => format!(" [{:+.2}%, {:+.2}%]", l * 100.0, h * 100.0),
                _ => String::new(),
            };
            Some(format!(
                "{} {} {:+.2}%/run{ci}",
                r.op,
                r.metric.name(),
                d * 100.0
            ))
        })
        .collect();
    if !drifting.is_empty() {
        notes.push(format!(
            "drift adjustment applied ({}): the difference is taken net of a linear drift over \
             the run order, estimated inside each side, and its interval carries the slope's \
             uncertainty; slope per run [{:.0}% interval]: {}",
            if design.kind == DesignKind::SeparateBatches {
                "separate batches: always"
            } else {
                "the drift is significant"
            },
            (1.0 - opts.alpha) * 100.0,
            drifting.join(", ")
        ));
    }
    if rows.iter().any(|r| r.verdict == Verdict::InsufficientData) {
        notes.push(
            "rows with insufficient data keep the exit code at 3: give longer runs, or leave \
             the percentile out (--skip p99.9)"
                .to_owned(),
        );
    }
    let mut report = CompareReport {
        base: Vec::new(),
        new: Vec::new(),
        same_trace: true,
        options: opts.clone(),
        between_run_variance: between,
        design: design.clone(),
        manifest_differences: Vec::new(),
        label_differences: Vec::new(),
        runs_needed: None,
        tested: tested.len(),
        regressions: 0,
        improvements: 0,
        inconclusive: 0,
        insufficient: 0,
        rows,
        unmatched: Vec::new(),
        engine_bound: Vec::new(),
        notes,
    };
    report.recount();
    report
}
