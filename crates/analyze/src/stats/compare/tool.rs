//! The tool's error bound in a comparison (docs/analyze.md, *The tool's error bound*).
//!
//! Each run's `summary.json` bounds what the tool's own delay could have added to each
//! latency percentile it reports (`tool_ns`, docs/replay.md). A side's value is the geometric
//! mean of its runs', so its error is at most the largest of its runs' relative bounds `r`:
//! on the log scale the tool added between 0 and `L = −ln(1 − r)`. The true difference then
//! lies in `[d − L_new, d + L_base]`, and a verdict must hold over that whole range:
//! - a **regression** must stay beyond the threshold after taking `L_new` off;
//! - an **improvement** after adding `L_base`;
//! - **no change** needs the interval widened by both to stay within ±threshold.
//!
//! A row whose verdict the bounds could make is `inconclusive` with that reason: more runs
//! do not decide it (`runs_needed` none), a quieter host does. Rows without a bound on
//! every run (the mean, the error rate, the I/O kinds, runs from before the bounds) are
//! judged as they were.

use std::collections::BTreeMap;
use std::path::Path;

use super::{CompareReport, Metric, Row, Verdict};
use crate::stats::load::Run;

/// Largest relative bound used (a bound of the whole figure would make `L` infinite).
const MAX_RATIO: f64 = 0.99;

/// A run's tool bounds beside the figures they bound, `(figure, bound)` in ns, per op type
/// and metric (the response time's percentiles that are compare's metrics: p50, p99, p99.9):
/// from the `summary.json` of the run directory `path`; empty without one.
pub(crate) fn bounds(path: &Path) -> BTreeMap<(String, Metric), (u64, u64)> {
    let mut out = BTreeMap::new();
    let Ok(summary) = replay::RunDir::open(path).summary() else {
        return out;
    };
    for (op, o) in &summary.ops {
        let Some(b) = &o.response.tool_ns else {
            continue;
        };
        for (name, value, bound) in b.beside(&o.response) {
            if let Some(m) = Metric::ALL.into_iter().find(|m| m.name() == name) {
                out.insert((op.clone(), m), (value, bound));
            }
        }
    }
    out
}

/// A run's tool bounds relative to their figures ([`bounds`]; figures of 0 left out).
pub(super) fn ratios(run: &Run) -> BTreeMap<(String, Metric), f64> {
    bounds(&run.path)
        .into_iter()
        .filter(|(_, (value, _))| *value > 0)
        .map(|(k, (value, bound))| (k, bound as f64 / value as f64))
        .collect()
}

/// Weighs every row against the sides' tool bounds (module docs), recounts the verdicts
/// and says which rows the bounds left undecided.
pub(super) fn weigh_report(r: &mut CompareReport, base: &[Run], new: &[Run]) {
    let (rb, rn): (Vec<_>, Vec<_>) = (
        base.iter().map(ratios).collect(),
        new.iter().map(ratios).collect(),
    );
    let mut undone = Vec::new();
    for row in &mut r.rows {
        let key = (row.op.clone(), row.metric);
        if weigh(row, side(&rb, &key), side(&rn, &key)) {
            undone.push(describe(row));
        }
    }
    if undone.is_empty() {
        return;
    }
    r.recount();
    r.notes.push(format!(
        "inconclusive because the tool's own delay could have made the verdict (each side's \
         error bound, from its runs' tool_ns; rerun on a quieter host, more runs do not \
         decide it): {}",
        undone.join(", ")
    ));
}

/// The largest relative bound over a side's runs for `key`; `None` when some run has none.
pub(super) fn side(
    runs: &[BTreeMap<(String, Metric), f64>],
    key: &(String, Metric),
) -> Option<f64> {
    runs.iter()
        .map(|r| r.get(key).copied())
        .try_fold(0.0f64, |acc, r| r.map(|r| acc.max(r)))
}

/// Weighs a judged row against the sides' relative bounds (module docs): records them, and
/// makes a verdict the bounds could have made `inconclusive`. Returns whether it did.
pub(super) fn weigh(row: &mut Row, base: Option<f64>, new: Option<f64>) -> bool {
    row.tool_base = base;
    row.tool_new = new;
    let (Some(rb), Some(rn)) = (base, new) else {
        return false;
    };
    if !row.metric.is_latency() {
        return false;
    }
    let (lb, ln) = (log_err(rb), log_err(rn));
    let t = row.tolerance;
    let change = |d: f64| d.exp() - 1.0;
    let undone = match row.verdict {
        Verdict::Regression => change(row.diff - ln) <= t,
        Verdict::Improvement => change(row.diff + lb) >= -t,
        Verdict::NoChange => match (row.ci_low, row.ci_high) {
            (Some(lo), Some(hi)) => {
                change((1.0 + lo).max(1e-300).ln() - ln) < -t
                    || change((1.0 + hi).max(1e-300).ln() + lb) > t
            }
            _ => false,
        },
        Verdict::Inconclusive | Verdict::InsufficientData => false,
    };
    if undone {
        row.tool_undecided = true;
        row.verdict = Verdict::Inconclusive;
        row.runs_needed = None;
    }
    undone
}

/// `L = −ln(1 − r)`: the most the tool added to a figure, on the log scale.
fn log_err(r: f64) -> f64 {
    -(1.0 - r.clamp(0.0, MAX_RATIO)).ln()
}

/// The row in words for the report's note: `attach p50 +6.1 % (tool ≤ 0.5 % base, 4.0 % new)`.
pub(super) fn describe(row: &Row) -> String {
    format!(
        "{} {} {:+.1} % (tool ≤ {:.1} % base, {:.1} % new)",
        row.op,
        row.metric.name(),
        row.change * 100.0,
        row.tool_base.unwrap_or(0.0) * 100.0,
        row.tool_new.unwrap_or(0.0) * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(verdict: Verdict, change: f64, ci: Option<(f64, f64)>) -> Row {
        Row {
            op: "attach".into(),
            metric: Metric::P50,
            base: 100.0,
            new: 100.0 * (1.0 + change),
            change,
            diff: (1.0 + change).ln(),
            ci_low: ci.map(|c| c.0),
            ci_high: ci.map(|c| c.1),
            df: 8.0,
            p: 0.001,
            p_holm: 0.001,
            threshold: 0.05,
            tolerance: 0.05,
            margin: 0.0,
            drift_per_run: None,
            drift_ci_low: None,
            drift_ci_high: None,
            verdict,
            runs_needed: Some(7),
            base_runs: Vec::new(),
            new_runs: Vec::new(),
            required_events: 1,
            est: None,
            counts: None,
            tool_base: None,
            tool_new: None,
            tool_undecided: false,
        }
    }

    /// A +12 % regression stands against bounds of 1 % but not against a new side that
    /// may be 8 % the tool's (12 % − 8 % is within the 5 % threshold); an improvement of
    /// −12 % likewise against the base side's bound; a row without bounds is untouched.
    #[test]
    fn a_change_the_bounds_could_make_is_inconclusive_and_a_larger_one_stands() {
        let mut r = row(Verdict::Regression, 0.12, Some((0.08, 0.16)));
        assert!(!weigh(&mut r, Some(0.01), Some(0.01)));
        assert_eq!(r.verdict, Verdict::Regression);
        let mut r = row(Verdict::Regression, 0.12, Some((0.08, 0.16)));
        assert!(weigh(&mut r, Some(0.0), Some(0.08)));
        assert_eq!((r.verdict, r.runs_needed), (Verdict::Inconclusive, None));
        assert!(r.tool_undecided);
        assert_eq!(
            describe(&r),
            "attach p50 +12.0 % (tool ≤ 0.0 % base, 8.0 % new)"
        );
        // The new side's bound does not help an improvement; the base side's does.
        let mut r = row(Verdict::Improvement, -0.12, Some((-0.16, -0.08)));
        assert!(!weigh(&mut r, Some(0.0), Some(0.5)));
        let mut r = row(Verdict::Improvement, -0.12, Some((-0.16, -0.08)));
        assert!(weigh(&mut r, Some(0.09), Some(0.0)));
        // No change within ±2 % stands with bounds of 1 %, not with 4 % on one side.
        let mut r = row(Verdict::NoChange, 0.0, Some((-0.02, 0.02)));
        assert!(!weigh(&mut r, Some(0.01), Some(0.01)));
        let mut r = row(Verdict::NoChange, 0.0, Some((-0.02, 0.02)));
        assert!(weigh(&mut r, Some(0.04), Some(0.0)));
        let mut r = row(Verdict::Regression, 0.12, None);
        assert!(!weigh(&mut r, None, Some(0.5)));
        assert_eq!(r.verdict, Verdict::Regression);
    }

    /// A side's bound is its worst run's, and unknown when any run has none.
    #[test]
    fn a_sides_bound_is_its_largest_and_needs_every_run() {
        let key = ("attach".to_owned(), Metric::P50);
        let with = |r: f64| BTreeMap::from([(key.clone(), r)]);
        assert_eq!(side(&[with(0.01), with(0.03)], &key), Some(0.03));
        assert_eq!(side(&[with(0.01), BTreeMap::new()], &key), None);
    }
}
