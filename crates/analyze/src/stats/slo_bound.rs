//! The tool's error bound of an SLO's figure (docs/analyze.md, *The tool's error bound*).
//!
//! A run's `summary.json` bounds what the tool's own delay could have added to each latency
//! percentile it reports (`tool_ns` beside p50, p90, p99, p99.9 and max; docs/replay.md). The
//! tool only ever adds delay, so a met SLO is met whatever the bound; a missed one whose
//! figure minus its bound is within the limit could be the tool's, and is not decided.
//!
//! An SLO at a reported percentile takes that percentile's bound; between two, the larger of
//! theirs (the bound is not monotone in the percentile: with few events a median's
//! neighbours are further apart than the max's). `all` takes the largest over the op types,
//! the I/O SLOs the larger of the I/O split's (with and without a snapshot in flight). None
//! when some figure it needs has no bound.

use replay::{Percentiles, Summary};
use trace_format::OpType;

use crate::stats::slo::{Slo, SloTarget};

/// The bound of percentile `q` (0–100) of a block, ns.
fn at(p: &Percentiles, q: f64) -> Option<u64> {
    let b = p.tool_ns.as_ref()?;
    let points = [
        (50.0, b.p50),
        (90.0, b.p90),
        (99.0, b.p99),
        (99.9, b.p999),
        (100.0, b.max),
    ];
    let below = points.iter().rev().find(|(x, _)| *x <= q).map(|(_, v)| *v);
    let above = points.iter().find(|(x, _)| *x >= q).map(|(_, v)| *v);
    below.into_iter().chain(above).max()
}

/// The bound of `slo`'s figure in a run with this summary, ns.
pub fn of(summary: &Summary, slo: &Slo) -> Option<u64> {
    let q = slo.percentile;
    let block = |o: &replay::OpSummary| {
        if slo.metric == "service" {
            o.service.clone()
        } else {
            o.response.clone()
        }
    };
    match slo.target() {
        SloTarget::Op(Some(op)) => at(&block(summary.ops.get(op.name())?), q),
        SloTarget::Op(None) => summary
            .ops
            .iter()
            .filter(|(op, o)| *op != OpType::Marker.name() && o.count > 0)
            .map(|(_, o)| at(&block(o), q))
            .try_fold(0u64, |acc, b| b.map(|b| acc.max(b))),
        SloTarget::Io(_) => {
            let io = &summary.io;
            [&io.with_snapshot, &io.without_snapshot]
                .into_iter()
                .filter(|p| p.count > 0)
                .map(|p| at(p, q))
                .try_fold(0u64, |acc, b| b.map(|b| acc.max(b)))
                .filter(|_| io.with_snapshot.count + io.without_snapshot.count > 0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use replay::ToolBound;

    /// A reported percentile takes its own bound, one between two the larger of theirs.
    #[test]
    fn a_percentile_between_two_reported_ones_takes_the_larger_bound() {
        let p = Percentiles {
            count: 100,
            tool_ns: Some(ToolBound {
                p50: 5,
                p90: 3,
                p99: 7,
                p999: 20,
                max: 40,
            }),
            ..Percentiles::default()
        };
        assert_eq!(at(&p, 50.0), Some(5));
        assert_eq!(at(&p, 95.0), Some(7));
        assert_eq!(at(&p, 75.0), Some(5));
        assert_eq!(at(&p, 100.0), Some(40));
        assert_eq!(at(&p, 10.0), Some(5));
        assert_eq!(at(&Percentiles::default(), 50.0), None);
    }
}
