//! `analyze compare BASE... -- NEW...`: is NEW worse than BASE, beyond run-to-run noise?
//!
//! Each run contributes one value per row (op type × metric: p50, p99, p99.9, mean response
//! time, error rate; and `io KIND` rows from `io_phase` units' I/O histograms), so the spread
//! between runs — what a re-run with another seed changes — is what the test weighs, not the
//! spread of events inside one run. Latencies are compared on the log scale: Welch's t test
//! on the per-run `ln(value)`, giving the ratio NEW/BASE (geometric means) with a confidence
//! interval; the error rate on the per-run failed fraction (absolute difference). Swapping the
//! sides negates the log ratio and its interval exactly and keeps the p-value, so verdicts
//! mirror (regression ↔ improvement). p-values are adjusted over all tested rows with Holm's
//! step-down method (family-wise error rate ≤ α). A row is a **regression** when its adjusted
//! p-value is below α *and* the change exceeds the practical threshold; **inconclusive** when
//! the change exceeds the threshold without significance, or with one run per side (no
//! between-run variance to weigh it against); **insufficient data** when a run has too few
//! events for the metric (a percentile p needs `min_tail` events beyond it: p99 500, p99.9
//! 5000 by default). The method and its calibration: `docs/analyze.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::hist::{at, mean};
use crate::inference::{TTest, holm};
use crate::load::Run;
use crate::phase_io::{RunIo, io_kind_name};
use crate::summary::RunStats;
use crate::{Error, Result};

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

/// Thresholds: the smallest change that counts, per metric (relative for latencies, absolute
/// fraction for the error rate).
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
    /// Error rate, absolute (0.01 = one percentage point).
    pub error_rate: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            p50: 0.05,
            p99: 0.10,
            p99_9: 0.10,
            mean: 0.05,
            error_rate: 0.01,
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

    /// Applies `METRIC=VALUE` (`p99=10%`, `mean=0.05`, `error_rate=1%`; `all=…` sets every
    /// metric).
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
            "all" => {
                *self = Self {
                    p50: v,
                    p99: v,
                    p99_9: v,
                    mean: v,
                    error_rate: v,
                }
            }
            other => {
                return Err(bad(&format!(
                    "unknown metric {other:?}; expected p50, p99, p99.9, mean, error_rate or all"
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
    /// Not significant and within the threshold, or significant but within the threshold.
    NoChange,
    /// Beyond the threshold without significance, or no between-run variance (one run per
    /// side): more runs needed.
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
    /// Confidence interval (1 − α) of `change`, low end (none with one run per side).
    pub ci_low: Option<f64>,
    /// High end.
    pub ci_high: Option<f64>,
    /// Welch's degrees of freedom (0: one run per side).
    pub df: f64,
    /// Two-sided p-value of "no difference".
    pub p: f64,
    /// p-value after Holm's adjustment over the tested rows.
    pub p_holm: f64,
    /// Threshold applied.
    pub threshold: f64,
    /// Verdict.
    pub verdict: Verdict,
    /// Per-run values, base then new.
    pub base_runs: Vec<RunValue>,
    /// Per-run values of the new side.
    pub new_runs: Vec<RunValue>,
    /// Events each run needed for this metric.
    pub required_events: u64,
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
    /// Rows, by op type then metric.
    pub rows: Vec<Row>,
    /// Rows (`op metric`) missing from some run, so not compared.
    pub unmatched: Vec<String>,
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
    /// The exit code a gate uses: 1 regression, 3 inconclusive (or nothing could be judged),
    /// 0 otherwise.
    pub fn exit_code(&self) -> u8 {
        if self.regressions > 0 {
            1
        } else if self.inconclusive > 0 || self.tested == 0 {
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
    let first = &b[0];
    let mut same_trace = true;
    for r in b.iter().chain(&n) {
        if r.manifest.trace.sha256 != first.manifest.trace.sha256 {
            same_trace = false;
            if !opts.by_op_type {
                return Err(Error::TraceMismatch {
                    base: first.path.clone(),
                    base_sha: first.manifest.trace.sha256.clone(),
                    new: r.path.clone(),
                    new_sha: r.manifest.trace.sha256.clone(),
                });
            }
        }
    }
    let values = |runs: &[Run]| -> Result<Vec<BTreeMap<(String, Metric), RunValue>>> {
        runs.iter().map(run_values).collect()
    };
    let (bv, nv) = (values(&b)?, values(&n)?);
    let keys: BTreeSet<&(String, Metric)> = bv.iter().chain(&nv).flat_map(|m| m.keys()).collect();
    let mut samples = Vec::new();
    let mut unmatched = Vec::new();
    for key in keys {
        let side = |v: &[BTreeMap<(String, Metric), RunValue>]| -> Option<Vec<RunValue>> {
            v.iter().map(|m| m.get(key).copied()).collect()
        };
        match (side(&bv), side(&nv)) {
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
    let mut r = judge(&samples, opts);
    r.base = paths(base);
    r.new = paths(new);
    r.same_trace = same_trace;
    r.unmatched = unmatched;
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

/// Judges rows of per-run values (the statistics alone; see the module docs). Run paths,
/// trace and unmatched rows of the report are left empty.
pub fn judge(samples: &[Sample], opts: &CompareOptions) -> CompareReport {
    let between = samples.iter().any(|s| s.base.len().max(s.new.len()) >= 2);
    let mut rows: Vec<Row> = samples.iter().map(|s| test_row(s, opts)).collect();
    // Holm over the rows that got a test.
    let tested: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].verdict != Verdict::InsufficientData && rows[i].df > 0.0)
        .collect();
    let adj = holm(&tested.iter().map(|&i| rows[i].p).collect::<Vec<_>>());
    for (&i, &a) in tested.iter().zip(&adj) {
        rows[i].p_holm = a;
    }
    for row in &mut rows {
        if row.verdict == Verdict::InsufficientData {
            continue;
        }
        let limit = if row.metric.is_latency() {
            row.threshold.ln_1p()
        } else {
            row.threshold
        };
        let material = row.diff.abs() > limit;
        row.verdict = if row.df <= 0.0 {
            Verdict::Inconclusive
        } else if row.p_holm < opts.alpha && material {
            if row.diff > 0.0 {
                Verdict::Regression
            } else {
                Verdict::Improvement
            }
        } else if material {
            Verdict::Inconclusive
        } else {
            Verdict::NoChange
        };
    }
    let count = |v: Verdict| rows.iter().filter(|r| r.verdict == v).count();
    let mut notes = Vec::new();
    if !between && !samples.is_empty() {
        notes.push(
            "one run per side: the variance between runs cannot be estimated, so no row gets \
             a verdict (inconclusive); give at least 2 runs per side (5 recommended)"
                .to_owned(),
        );
    }
    CompareReport {
        base: Vec::new(),
        new: Vec::new(),
        same_trace: true,
        options: opts.clone(),
        between_run_variance: between,
        tested: tested.len(),
        regressions: count(Verdict::Regression),
        improvements: count(Verdict::Improvement),
        inconclusive: count(Verdict::Inconclusive),
        insufficient: count(Verdict::InsufficientData),
        rows,
        unmatched: Vec::new(),
        notes,
    }
}

/// The test of one row, before Holm's adjustment (verdict InsufficientData or a placeholder).
fn test_row(s: &Sample, opts: &CompareOptions) -> Row {
    let required = opts.required_events(s.metric);
    let enough = s.base.iter().chain(&s.new).all(|v| v.events >= required);
    let latency = s.metric.is_latency();
    let xs = |v: &[RunValue]| -> Vec<f64> {
        v.iter()
            .map(|r| {
                if latency {
                    r.value.max(1e-300).ln()
                } else {
                    r.value
                }
            })
            .collect()
    };
    let (xb, xn) = (xs(&s.base), xs(&s.new));
    // The error rate's per-side variance is at least the binomial variance of a run's failed
    // fraction, so runs that agree by chance (all zero failures) are not taken as noiseless.
    let floor = |v: &[RunValue], x: &[f64]| {
        if latency || v.is_empty() {
            return 0.0;
        }
        let f = x.iter().sum::<f64>() / x.len() as f64;
        let n = v.iter().map(|r| r.events as f64).sum::<f64>() / v.len() as f64;
        f * (1.0 - f) / n.max(1.0)
    };
    let t = TTest::welch(&xb, &xn, floor(&s.base, &xb), floor(&s.new, &xn));
    let ci = (t.df > 0.0).then(|| t.ci(opts.alpha));
    let centre = |x: &[f64]| {
        let m = x.iter().sum::<f64>() / x.len().max(1) as f64;
        if latency { m.exp() } else { m }
    };
    let (base, new) = (centre(&xb), centre(&xn));
    let to_change = |d: f64| if latency { d.exp() - 1.0 } else { d };
    Row {
        op: s.op.clone(),
        metric: s.metric,
        base,
        new,
        change: to_change(t.diff),
        diff: t.diff,
        ci_low: ci.map(|c| to_change(c.0)),
        ci_high: ci.map(|c| to_change(c.1)),
        df: t.df,
        p: t.p,
        p_holm: 1.0,
        threshold: opts.thresholds.of(s.metric),
        verdict: if enough {
            Verdict::NoChange
        } else {
            Verdict::InsufficientData
        },
        base_runs: s.base.clone(),
        new_runs: s.new.clone(),
        required_events: required,
    }
}
