//! `analyze capacity SWEEPDIR`: over the runs of a sweep (`SWEEPDIR/<speed>/`, written by
//! `cnsreplay sweep`) or of a search (`cnsreplay capacity`), the highest offered rate the
//! system sustained, the rate where it stopped, and a one-sentence answer.
//!
//! The SLOs are [`Slo`]s ([`crate::slo`]). Each run is judged as a point
//! ([`crate::point`]): SLOs met, throughput kept up with the
//! offered rate (within 2 %), stationary, valid. The *maximum* is the highest offered rate of
//! a passing point such that every slower point passes too; the *limit* is the next point
//! above it, which failed, with its reasons. The report states that bracket and its width
//! (the *resolution*), and, where runs both passed and failed, the rate passing 90 % of runs
//! with its 95 % interval from a logistic fit over every run ([`crate::passprob`], as
//! `cnsreplay capacity` reports it). A point not decided (an SLO missed within the tool's
//! error bound of its figure) ends the passing run of points like a failure, is named as
//! not decided, and is left out of the fit.

use std::path::{Path, PathBuf};

use replay::RunIdentity;
use serde::{Deserialize, Serialize};

use crate::stats::load::Run;
use crate::stats::passprob;
use crate::stats::point::{PointEval, PointOptions, evaluate};
pub use crate::stats::slo::{Slo, SloTarget};
use crate::{Error, Result};

/// `analyze capacity --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CapacityReport {
    /// The sweep directory.
    pub sweep: String,
    /// SLOs.
    pub slos: Vec<Slo>,
    /// Runs judged as points, by offered rate.
    pub points: Vec<PointEval>,
    /// Highest offered rate (all events, per second) of a passing point with every slower
    /// point passing too.
    pub max_rate: Option<f64>,
    /// Speed of that run.
    pub max_speed: Option<f64>,
    /// Offered rate of the first failing point above it: the maximum is below this.
    pub limit_rate: Option<f64>,
    /// `(limit_rate − max_rate) / max_rate`: how precisely the sweep locates the maximum.
    pub resolution: Option<f64>,
    /// What failed at the limit point.
    pub limited_by: Vec<String>,
    /// The offered rate passing [`PASS_PROBABILITY`] of runs, with its 95 % interval
    /// (logistic fit over every run; None unless runs both passed and failed).
    pub estimate: Option<passprob::RateEstimate>,
    /// 95 % interval for the sustainable rate: `estimate`'s lower end to the upper end of
    /// the half-pass rate's interval.
    pub capacity_interval: Option<(Option<f64>, Option<f64>)>,
    /// The answer in one sentence.
    pub answer: String,
}

/// The pass probability of the reported sustained rate.
pub const PASS_PROBABILITY: f64 = 0.9;

/// The run directories of a sweep: subdirectories with a `manifest.json`, refused unless
/// they are points of one curve — one trace (or one model at several rates) on one provider
/// with one setup ([`replay::identity`], purpose `Points`).
pub fn sweep_runs(dir: &Path) -> Result<Vec<PathBuf>> {
    let runs = replay::rundir::run_dirs_in(dir).map_err(|e| match e {
        replay::Error::Io(e) => Error::Io(e),
        e => Error::Invalid(format!("{}: {e}", dir.display())),
    })?;
    if runs.is_empty() {
        return Err(Error::Invalid(format!(
            "{}: no run directories (subdirectories with manifest.json); create them with \
             `cnsreplay sweep`",
            dir.display()
        )));
    }
    check_points(&runs)?;
    Ok(runs)
}

/// `Err(Error::Combine)` unless `runs` are points of one capacity curve.
pub fn check_points(runs: &[PathBuf]) -> Result<()> {
    let ids = runs
        .iter()
        .map(|p| Ok((p.as_path(), RunIdentity::of(&Run::open(p)?.manifest))))
        .collect::<Result<Vec<_>>>()?;
    let pairs: Vec<(&Path, &RunIdentity)> = ids.iter().map(|(p, i)| (*p, i)).collect();
    replay::combinable(replay::Purpose::Points, &pairs)?;
    Ok(())
}

/// The offered rate of all events of a point.
pub fn offered(p: &PointEval) -> f64 {
    p.total().map_or(0.0, |t| t.offered_rate)
}

/// The steepest pass curve a set of runs can show: [`passprob::max_slope`] of the
/// fewest events of a run.
pub fn fit_slope<'a>(points: impl IntoIterator<Item = &'a PointEval>) -> f64 {
    passprob::max_slope(
        points
            .into_iter()
            .filter_map(|p| p.total().map(|t| t.count))
            .min()
            .unwrap_or(1),
    )
}

/// Evaluates a sweep against SLOs.
pub fn capacity(dir: &Path, slos: &[Slo], opts: &PointOptions) -> Result<CapacityReport> {
    let mut points = Vec::new();
    for path in sweep_runs(dir)? {
        points.push(evaluate(&path, slos, opts)?);
    }
    points.sort_by(|a, b| offered(a).total_cmp(&offered(b)));
    let best = points.iter().take_while(|p| p.pass).last();
    let limit = points.iter().find(|p| !p.pass);
    let max_rate = best.map(offered);
    let limit_rate = limit.map(offered);
    let resolution = max_rate
        .zip(limit_rate)
        .map(|(m, l)| (l - m) / m.max(f64::MIN_POSITIVE));
    let slo_text = if slos.is_empty() {
        "no SLO (throughput only)".to_owned()
    } else {
        slos.iter()
            .map(|s| s.spec.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut answer = match best {
        Some(p) => format!(
            "This system sustains {:.2} ops/s (speed {}) while meeting {slo_text} and keeping \
             up with the offered rate",
            offered(p),
            p.speed
        ),
        None => format!("No run of the sweep passes ({slo_text}, throughput kept up, valid)"),
    };
    let did_not = |l: &PointEval| {
        if l.decided {
            "it did not"
        } else {
            "it is not decided whether it did"
        }
    };
    match (limit, resolution) {
        (Some(l), Some(r)) => answer.push_str(&format!(
            "; at {:.2} ops/s {} ({}). The maximum lies in [{:.2}, {:.2}) ops/s: \
             resolution {:.1} %; sweep finer between them for a sharper answer.",
            offered(l),
            did_not(l),
            l.reasons.join("; "),
            max_rate.unwrap_or(0.0),
            offered(l),
            r * 100.0
        )),
        (Some(l), None) => {
            answer.push_str(&format!(
                " — at {:.2} ops/s: {}.",
                offered(l),
                l.reasons.join("; ")
            ));
        }
        (None, _) => answer.push_str(
            " at every rate swept: the maximum is above the sweep, which gives only a lower bound.",
        ),
    }
    // A point not decided (an SLO missed within the tool's bound) is neither a pass nor a
    // failure of the fit.
    let fit: Vec<(f64, bool)> = points
        .iter()
        .filter(|p| p.decided)
        .map(|p| (offered(p), p.pass))
        .filter(|r| r.0 > 0.0)
        .collect();
    let slope = fit_slope(&points);
    let estimate = passprob::estimate(&fit, PASS_PROBABILITY, slope);
    let half = passprob::estimate(&fit, 0.5, slope);
    let capacity_interval = estimate
        .as_ref()
        .map(|e| (e.low, half.as_ref().and_then(|h| h.high)));
    if let (Some(e), Some((l, h))) = (&estimate, capacity_interval) {
        let f = |x: Option<f64>| x.map_or("unbounded".to_owned(), |x| format!("{x:.2}"));
        answer.push_str(&format!(
            " Fitted over the {} runs: {:.2} ops/s passes {:.0} % of runs; the limit lies in \
             [{}, {}] ops/s (95 %).",
            fit.len(),
            e.rate,
            PASS_PROBABILITY * 100.0,
            f(l),
            f(h)
        ));
    }
    Ok(CapacityReport {
        estimate,
        capacity_interval,
        sweep: dir.display().to_string(),
        slos: slos.to_vec(),
        max_speed: best.map(|p| p.speed),
        max_rate,
        limit_rate,
        resolution,
        limited_by: limit.map(|l| l.reasons.clone()).unwrap_or_default(),
        points,
        answer,
    })
}
