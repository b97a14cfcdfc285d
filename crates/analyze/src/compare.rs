//! `analyze compare BASE NEW`: per op type and metric (p50, p99, mean response time, error
//! rate) the change from BASE to NEW with a seeded bootstrap 95% confidence interval, and a
//! verdict against per-metric thresholds.
//!
//! Latency metrics report the *relative* change (new/base − 1); the error rate the *absolute*
//! change in the failed fraction. Each of `resamples` (default 1000) replicates resamples both
//! runs independently (Poisson bootstrap over histogram bins, [`crate::hist`]) and recomputes
//! the change; the CI is the 2.5th–97.5th percentile of the replicates. A row is a
//! **regression** when the change exceeds its threshold *and* the CI lies entirely above zero,
//! an **improvement** when it is below −threshold with the CI entirely below zero, and
//! otherwise **no significant change**: significant and material, both.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::hist::{Rng, bins, mean, quantile, resample, sorted_pct};
use crate::load::Run;
use crate::summary::{OpAcc, RunStats};
use crate::{Error, Result};

/// The compared metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Median response time.
    P50,
    /// 99th percentile response time.
    P99,
    /// Mean response time.
    Mean,
    /// Failed fraction of events.
    ErrorRate,
}

impl Metric {
    /// All metrics, in table order.
    pub const ALL: [Metric; 4] = [Metric::P50, Metric::P99, Metric::Mean, Metric::ErrorRate];

    /// Its name (`p50`, `p99`, `mean`, `error_rate`).
    pub fn name(self) -> &'static str {
        match self {
            Metric::P50 => "p50",
            Metric::P99 => "p99",
            Metric::Mean => "mean",
            Metric::ErrorRate => "error_rate",
        }
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
            "mean" => self.mean = v,
            "error_rate" | "errors" => self.error_rate = v,
            "all" => {
                *self = Self {
                    p50: v,
                    p99: v,
                    mean: v,
                    error_rate: v,
                }
            }
            other => {
                return Err(bad(&format!(
                    "unknown metric {other:?}; expected p50, p99, mean, error_rate or all"
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
    /// Thresholds.
    pub thresholds: Thresholds,
    /// Bootstrap resamples.
    pub resamples: u32,
    /// Bootstrap seed.
    pub seed: u64,
    /// Fewest events of an op type, in each run, for a verdict other than no change.
    pub min_events: u64,
    /// Admit runs that did not finish or whose verdict is not `valid` ([`Run::check_valid`]).
    #[serde(default)]
    pub allow_invalid: bool,
}

impl Default for CompareOptions {
    fn default() -> Self {
        Self {
            by_op_type: false,
            thresholds: Thresholds::default(),
            resamples: 1000,
            seed: 0x00C0_FFEE,
            min_events: 10,
            allow_invalid: false,
        }
    }
}

/// The verdict of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Worse beyond the threshold, CI above zero.
    Regression,
    /// Better beyond the threshold, CI below zero.
    Improvement,
    /// Neither.
    NoChange,
}

/// One op type and metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Row {
    /// Op type.
    pub op: String,
    /// Metric.
    pub metric: Metric,
    /// Base value (ns, or a fraction for the error rate).
    pub base: f64,
    /// New value.
    pub new: f64,
    /// Change: relative for latencies, absolute for the error rate.
    pub change: f64,
    /// 95% CI of the change, low end.
    pub ci_low: f64,
    /// 95% CI of the change, high end.
    pub ci_high: f64,
    /// Threshold applied.
    pub threshold: f64,
    /// Verdict.
    pub verdict: Verdict,
    /// Events in base and new.
    pub n: (u64, u64),
    /// Fewer than `min_events` events on a side: no verdict (reported as no change).
    pub insufficient: bool,
}

/// `analyze compare --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CompareReport {
    /// Base run directory.
    pub base: String,
    /// New run directory.
    pub new: String,
    /// Whether both runs replayed the same trace (same SHA-256).
    pub same_trace: bool,
    /// Options used.
    pub options: CompareOptions,
    /// Rows, by op type then metric.
    pub rows: Vec<Row>,
    /// Op types present in only one run.
    pub unmatched: Vec<String>,
    /// Rows with a regression.
    pub regressions: usize,
    /// Rows with an improvement.
    pub improvements: usize,
}

/// Compares two run directories.
pub fn compare(base: &Path, new: &Path, opts: &CompareOptions) -> Result<CompareReport> {
    let (b, n) = (
        Run::open_for_analysis(base, opts.allow_invalid)?,
        Run::open_for_analysis(new, opts.allow_invalid)?,
    );
    let same_trace = b.manifest.trace.sha256 == n.manifest.trace.sha256;
    if !same_trace && !opts.by_op_type {
        return Err(Error::TraceMismatch {
            base: base.to_owned(),
            base_sha: b.manifest.trace.sha256,
            new: new.to_owned(),
            new_sha: n.manifest.trace.sha256,
        });
    }
    let (bs, ns) = (RunStats::of(&b)?, RunStats::of(&n)?);
    Ok(compare_stats(base, new, &bs, &ns, same_trace, opts))
}

/// Compares two scanned runs.
pub fn compare_stats(
    base: &Path,
    new: &Path,
    bs: &RunStats,
    ns: &RunStats,
    same_trace: bool,
    opts: &CompareOptions,
) -> CompareReport {
    let mut rows = Vec::new();
    let mut unmatched = Vec::new();
    let ops: std::collections::BTreeSet<_> = bs.ops.keys().chain(ns.ops.keys()).collect();
    let mut pairs = Vec::new();
    for op in ops {
        match (bs.ops.get(op), ns.ops.get(op)) {
            (Some(a), Some(b)) => pairs.push((*op, a, b)),
            _ => unmatched.push(op.name().to_owned()),
        }
    }
    // One thread per op type; a seed per op type, so the result does not depend on scheduling
    // and adding an op type does not change the others' CIs.
    let per_op: Vec<Vec<Row>> = std::thread::scope(|sc| {
        let handles: Vec<_> = pairs
            .iter()
            .map(|&(op, a, b)| {
                sc.spawn(move || {
                    let mut rng =
                        Rng::new(opts.seed ^ (op as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    let (points, mut reps) = bootstrap(a, b, opts, &mut rng);
                    Metric::ALL
                        .into_iter()
                        .enumerate()
                        .map(|(i, m)| row(op.name(), m, a, b, points[i], &mut reps[i], opts))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    rows.extend(per_op.into_iter().flatten());
    let count = |v: Verdict| rows.iter().filter(|r| r.verdict == v).count();
    CompareReport {
        base: base.display().to_string(),
        new: new.display().to_string(),
        same_trace,
        options: opts.clone(),
        regressions: count(Verdict::Regression),
        improvements: count(Verdict::Improvement),
        rows,
        unmatched,
    }
}

fn latency_stat(m: Metric, bins: &[(f64, f64)]) -> f64 {
    match m {
        Metric::P50 => quantile(bins, 0.5),
        Metric::P99 => quantile(bins, 0.99),
        _ => mean(bins),
    }
}

fn rel(base: f64, new: f64) -> f64 {
    if base > 0.0 { new / base - 1.0 } else { 0.0 }
}

/// Per metric (in [`Metric::ALL`] order): `(base, new, change)`.
type Estimates = [(f64, f64, f64); 4];

/// The point estimates `(base, new, change)` of every metric, and `resamples` bootstrap
/// replicates of each change. One resample of each run serves all three latency metrics.
fn bootstrap(
    a: &OpAcc,
    b: &OpAcc,
    opts: &CompareOptions,
    rng: &mut Rng,
) -> (Estimates, [Vec<f64>; 4]) {
    let resamples = opts.resamples.max(1) as usize;
    let mut reps: [Vec<f64>; 4] = std::array::from_fn(|_| Vec::with_capacity(resamples));
    let ba = a.response.as_ref().map(bins).unwrap_or_default();
    let bb = b.response.as_ref().map(bins).unwrap_or_default();
    let whole = |v: &[(f64, u64)]| v.iter().map(|&(x, c)| (x, c as f64)).collect::<Vec<_>>();
    let (wa0, wb0) = (whole(&ba), whole(&bb));
    let mut points = [(0.0, 0.0, 0.0); 4];
    for (i, m) in Metric::ALL[..3].iter().enumerate() {
        let (x, y) = (latency_stat(*m, &wa0), latency_stat(*m, &wb0));
        points[i] = (x, y, rel(x, y));
    }
    let rate = |x: &OpAcc| x.failed as f64 / x.count.max(1) as f64;
    points[3] = (rate(a), rate(b), rate(b) - rate(a));
    let (mut wa, mut wb) = (Vec::new(), Vec::new());
    let empty = |w: &[(f64, f64)]| w.iter().all(|x| x.1 == 0.0);
    // A resample with no weight at all (possible for tiny runs) is drawn again, a bounded
    // number of times.
    for _ in 0..resamples * 4 {
        if reps[0].len() == resamples {
            break;
        }
        resample(&ba, rng, &mut wa);
        resample(&bb, rng, &mut wb);
        if !(ba.is_empty() || bb.is_empty()) && (empty(&wa) || empty(&wb)) {
            continue;
        }
        for (i, m) in Metric::ALL[..3].iter().enumerate() {
            reps[i].push(rel(latency_stat(*m, &wa), latency_stat(*m, &wb)));
        }
    }
    let draw = |x: &OpAcc, rng: &mut Rng| {
        let f = rng.poisson(x.failed as f64);
        let o = rng.poisson((x.count - x.failed) as f64);
        if f + o > 0.0 { f / (f + o) } else { 0.0 }
    };
    for _ in 0..resamples {
        let ra = draw(a, rng);
        reps[3].push(draw(b, rng) - ra);
    }
    (points, reps)
}

fn row(
    op: &str,
    m: Metric,
    a: &OpAcc,
    b: &OpAcc,
    (base, new, change): (f64, f64, f64),
    reps: &mut [f64],
    opts: &CompareOptions,
) -> Row {
    reps.sort_by(f64::total_cmp);
    let (ci_low, ci_high) = (sorted_pct(reps, 2.5), sorted_pct(reps, 97.5));
    let threshold = opts.thresholds.of(m);
    let insufficient = a.count.min(b.count) < opts.min_events;
    let verdict = if insufficient {
        Verdict::NoChange
    } else if change > threshold && ci_low > 0.0 {
        Verdict::Regression
    } else if change < -threshold && ci_high < 0.0 {
        Verdict::Improvement
    } else {
        Verdict::NoChange
    };
    Row {
        op: op.to_owned(),
        metric: m,
        base,
        new,
        change,
        ci_low,
        ci_high,
        threshold,
        verdict,
        n: (a.count, b.count),
        insufficient,
    }
}
