//! `analyze capacity SWEEPDIR`: over the runs of a sweep (`SWEEPDIR/<speed>/`, written by
//! `cnsreplay sweep`), the highest offered rate that meets every SLO, the throughput knee, and
//! a one-sentence answer.
//!
//! An SLO is `OP[.METRIC].PCT=LIMIT`: op type (or `all`), optional metric (`response`, the
//! default, or `service`), percentile (`p50`, `p90`, `p99`, `p99.9`, `max`) and a duration,
//! e.g. `attach.p99=30s`, `io.p99.9=10ms`. A run meets an SLO when the op type's percentile is
//! at most the limit (a run without that op type does not meet it). The *maximum* is the
//! highest intended rate (all events, (count − 1) per second of intended span) of a run meeting every SLO
//! such that every slower run meets them too. The *knee* is the last run, by intended rate,
//! before achieved throughput first falls below 95% of the intended rate.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use trace_format::OpType;

use crate::hist::at;
use crate::load::Run;
use crate::summary::{OpAcc, RunStats};
use crate::{Error, Result};

/// An SLO on one op type's latency percentile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Slo {
    /// The text as given.
    pub spec: String,
    /// Op type name, or `all`.
    pub op: String,
    /// `response` or `service`.
    pub metric: String,
    /// Percentile, 0–100 (100 = max).
    pub percentile: f64,
    /// Limit, ns.
    pub limit_ns: u64,
}

/// Parses a percentile name: `p50`, `p99.9`, `max`.
pub fn parse_percentile(s: &str) -> Option<f64> {
    if s == "max" {
        return Some(100.0);
    }
    let p: f64 = s.strip_prefix('p')?.parse().ok()?;
    (p > 0.0 && p <= 100.0).then_some(p)
}

impl Slo {
    /// Parses `OP[.METRIC].PCT=LIMIT`.
    pub fn parse(spec: &str) -> Result<Self> {
        let bad = |m: &str| {
            Error::Invalid(format!(
                "--slo {spec:?}: {m} (expected OP[.METRIC].PCT=LIMIT, e.g. attach.p99=30s)"
            ))
        };
        let (lhs, limit) = spec.split_once('=').ok_or_else(|| bad("no '='"))?;
        let limit_ns = trace_format::units::parse_duration(limit.trim())
            .map_err(|e| bad(&format!("limit: {e}")))?;
        let (op, rest) = lhs.split_once('.').ok_or_else(|| bad("no percentile"))?;
        if op != "all" && OpType::from_name(op).is_none() {
            return Err(bad(&format!("unknown op type {op:?}")));
        }
        let (metric, pct) = match rest.split_once('.') {
            Some((m @ ("response" | "service"), p)) => (m, p),
            _ => ("response", rest),
        };
        let percentile =
            parse_percentile(pct).ok_or_else(|| bad(&format!("bad percentile {pct:?}")))?;
        Ok(Self {
            spec: spec.to_owned(),
            op: op.to_owned(),
            metric: metric.to_owned(),
            percentile,
            limit_ns,
        })
    }

    /// The SLO's value in a run (None when the op type did not occur).
    pub fn value(&self, stats: &RunStats) -> Option<u64> {
        let total;
        let acc: &OpAcc = if self.op == "all" {
            total = stats.total();
            &total
        } else {
            stats.ops.get(&OpType::from_name(&self.op)?)?
        };
        let h = if self.metric == "service" {
            acc.service.as_ref()
        } else {
            acc.response.as_ref()
        }?;
        Some(at(h, self.percentile))
    }
}

/// An SLO evaluated in one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SloValue {
    /// The SLO as given.
    pub slo: String,
    /// Its value, ns (None when the op type did not occur).
    pub value_ns: Option<u64>,
    /// Whether the run meets it.
    pub met: bool,
}

/// One run of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SweepPoint {
    /// Run directory.
    pub run: String,
    /// Replay speed.
    pub speed: f64,
    /// Events per second of intended time.
    pub intended_rate: f64,
    /// Completions per second (first to last completion).
    pub achieved_rate: f64,
    /// Each SLO in this run.
    pub slos: Vec<SloValue>,
    /// Meets every SLO.
    pub meets_all: bool,
}

/// `analyze capacity --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CapacityReport {
    /// The sweep directory.
    pub sweep: String,
    /// SLOs.
    pub slos: Vec<Slo>,
    /// Runs, by intended rate.
    pub points: Vec<SweepPoint>,
    /// Highest intended rate meeting every SLO (every slower run meeting them too), ops/s.
    pub max_rate: Option<f64>,
    /// Speed of that run.
    pub max_speed: Option<f64>,
    /// Throughput knee: the last intended rate before achieved < 95% of intended, ops/s.
    pub knee_rate: Option<f64>,
    /// The answer in one sentence.
    pub answer: String,
}

/// The run directories of a sweep: subdirectories with a `manifest.json`.
pub fn sweep_runs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut runs: Vec<PathBuf> = fs_err::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("manifest.json").is_file())
        .collect();
    runs.sort();
    if runs.is_empty() {
        return Err(Error::Invalid(format!(
            "{}: no run directories (subdirectories with manifest.json); create them with \
             `cnsreplay sweep`",
            dir.display()
        )));
    }
    Ok(runs)
}

fn fmt_ns(ns: u64) -> String {
    crate::report::fmt_ns(ns as f64)
}

/// Evaluates a sweep against SLOs (refusing runs that are not valid unless `allow_invalid`,
/// see [`Run::check_valid`]).
pub fn capacity(dir: &Path, slos: &[Slo], allow_invalid: bool) -> Result<CapacityReport> {
    let mut points = Vec::new();
    for path in sweep_runs(dir)? {
        let run = Run::open_for_analysis(&path, allow_invalid)?;
        let stats = RunStats::of(&run)?;
        let (intended_rate, achieved_rate) = stats.total().rates();
        let values: Vec<SloValue> = slos
            .iter()
            .map(|s| {
                let v = s.value(&stats);
                SloValue {
                    slo: s.spec.clone(),
                    value_ns: v,
                    met: v.is_some_and(|v| v <= s.limit_ns),
                }
            })
            .collect();
        points.push(SweepPoint {
            run: path.display().to_string(),
            speed: run.speed(),
            intended_rate,
            achieved_rate,
            meets_all: values.iter().all(|v| v.met),
            slos: values,
        });
    }
    points.sort_by(|a, b| a.intended_rate.total_cmp(&b.intended_rate));
    let best = points.iter().take_while(|p| p.meets_all).last();
    let (max_rate, max_speed) = (best.map(|p| p.intended_rate), best.map(|p| p.speed));
    let knee_idx = points
        .iter()
        .position(|p| p.achieved_rate < 0.95 * p.intended_rate);
    let knee_rate = match knee_idx {
        Some(0) => None,
        Some(i) => Some(points[i - 1].intended_rate),
        None => points.last().map(|p| p.intended_rate),
    };
    let slo_text = slos
        .iter()
        .map(|s| s.spec.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let first_fail = points.iter().find(|p| !p.meets_all);
    let mut answer = match best {
        Some(p) => format!(
            "This system sustains {:.1} ops/s (speed {}) while meeting {slo_text}",
            p.intended_rate, p.speed
        ),
        None => format!("No run of the sweep meets {slo_text}"),
    };
    if let Some(f) = first_fail {
        let why: Vec<String> = f
            .slos
            .iter()
            .filter(|v| !v.met)
            .map(|v| match v.value_ns {
                Some(x) => format!("{} was {}", v.slo, fmt_ns(x)),
                None => format!("{} had no events", v.slo),
            })
            .collect();
        answer.push_str(&format!(
            "; at {:.1} ops/s {}",
            f.intended_rate,
            why.join(" and ")
        ));
    } else if best.is_some() {
        answer.push_str(" at every rate swept (the limit is above the sweep)");
    }
    match (knee_idx, knee_rate) {
        (Some(_), Some(k)) => answer.push_str(&format!("; throughput knee at {k:.1} ops/s.")),
        (Some(_), None) => answer.push_str("; throughput falls behind already at the slowest run."),
        _ => answer.push_str("; throughput kept up at every rate swept."),
    }
    Ok(CapacityReport {
        sweep: dir.display().to_string(),
        slos: slos.to_vec(),
        points,
        max_rate,
        max_speed,
        knee_rate,
        answer,
    })
}
