//! An SLO on a latency percentile, as `--slo` gives it and `capacity`, `point` and `qos`
//! judge it.
//!
//! An SLO is `OP[.METRIC] PCT<=LIMIT` (`attach p99<=2s`, `io p99.9<=10ms`) or the older
//! `OP[.METRIC].PCT=LIMIT` (`attach.p99=30s`): op type (or `all`), optional metric
//! (`response`, the default, or `service`), percentile (`p50`, `p90`, `p99`, `p99.9`, `max`)
//! and a duration. `io` (optionally `io.read`, `io.write`, `io.trim`, `io.flush`) is I/O
//! response time: single `io` events and the I/Os of `io_phase` units, from iogen's
//! histograms, never a unit's duration. A run meets an SLO when the percentile is at most the
//! limit (a run without that op type does not meet it).

use serde::{Deserialize, Serialize};
use trace_format::{IoKind, OpType};

use crate::stats::hist::at;
use crate::stats::summary::{OpAcc, RunStats};
use crate::{Error, Result};

/// An SLO on one op type's latency percentile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Slo {
    /// The text as given.
    pub spec: String,
    /// Op type name, `all`, or `io` / `io.KIND` (I/O response time).
    pub op: String,
    /// `response` or `service`.
    pub metric: String,
    /// Percentile, 0–100 (100 = max).
    pub percentile: f64,
    /// Limit, ns.
    pub limit_ns: u64,
}

/// What an SLO is measured on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SloTarget {
    /// Control operations of one op type (None: every event).
    Op(Option<OpType>),
    /// I/O response time, of one kind or all (None).
    Io(Option<IoKind>),
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
    /// Parses `OP[.METRIC] PCT<=LIMIT` or `OP[.METRIC].PCT=LIMIT`.
    pub fn parse(spec: &str) -> Result<Self> {
        let bad = |m: &str| {
            Error::Invalid(format!(
                "--slo {spec:?}: {m} (expected OP[.METRIC] PCT<=LIMIT, e.g. 'attach p99<=2s' or \
                 'io p99.9<=10ms'; or OP.PCT=LIMIT, e.g. attach.p99=30s)"
            ))
        };
        let (lhs, limit) = match spec.split_once("<=") {
            Some(x) => x,
            None => spec.split_once('=').ok_or_else(|| bad("no '<=' or '='"))?,
        };
        let limit_ns = trace_format::units::parse_duration(limit.trim())
            .map_err(|e| bad(&format!("limit: {e}")))?;
        let lhs = lhs.trim();
        // The percentile is the last word (`attach p99`) or the last `.p…`/`.max` part.
        let (subject, pct) = match lhs.rsplit_once(char::is_whitespace) {
            Some((a, p)) => (a.trim(), p),
            None => {
                let i = lhs
                    .find(".p")
                    .or_else(|| lhs.find(".max"))
                    .ok_or_else(|| bad("no percentile"))?;
                (&lhs[..i], &lhs[i + 1..])
            }
        };
        let percentile =
            parse_percentile(pct).ok_or_else(|| bad(&format!("bad percentile {pct:?}")))?;
        let (op, metric) = match subject.split_once('.') {
            Some((o, m @ ("response" | "service"))) => (o.to_owned(), m),
            Some(("io", k)) if io_kind(k).is_some() => (subject.to_owned(), "response"),
            Some((_, m)) => return Err(bad(&format!("unknown metric {m:?}"))),
            None => (subject.to_owned(), "response"),
        };
        if op != "all" && !op.starts_with("io") && OpType::from_name(&op).is_none() {
            return Err(bad(&format!("unknown op type {op:?}")));
        }
        if op == "io_phase" {
            // Allowed: the unit's duration, asked for by name.
        } else if op.starts_with("io") && metric == "service" {
            return Err(bad("I/O SLOs are on response time"));
        }
        Ok(Self {
            spec: spec.to_owned(),
            op,
            metric: metric.to_owned(),
            percentile,
            limit_ns,
        })
    }

    /// What the SLO is measured on.
    pub fn target(&self) -> SloTarget {
        if self.op == "io" {
            return SloTarget::Io(None);
        }
        if let Some(k) = self.op.strip_prefix("io.").and_then(io_kind) {
            return SloTarget::Io(Some(k));
        }
        SloTarget::Op(OpType::from_name(&self.op))
    }

    /// The SLO's value in a run from its control-op histograms (None when the op type did
    /// not occur). I/O SLOs need the unit histograms: [`crate::point::evaluate`].
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

fn io_kind(s: &str) -> Option<IoKind> {
    Some(match s {
        "read" => IoKind::Read,
        "write" => IoKind::Write,
        "trim" => IoKind::Trim,
        "flush" => IoKind::Flush,
        _ => return None,
    })
}
