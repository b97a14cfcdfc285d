//! Each op type judged on its own, by the size of what the tool's delay could have done to
//! its numbers: the tool's error bound of every percentile it reports (`tool_ns`, module
//! `bound`) against `tool_tolerance` of the value. `valid` when every bound is within it,
//! `imprecise` (with the percentiles and their sizes) when some is not.
//!
//! Where no bound was measured (no completion probe; an I/O split a provider reports no
//! issue lateness for) the op type falls back on the lateness rule: the run's measured delays
//! (start, resume and completion lateness; iogen's issue lateness for `io_phase` I/O) against
//! limits scaled from the op type's own median. 1 ms is 3 % of a 30 ms attach's median but
//! more than a 0.9 ms `delete_snapshot`'s: `imprecise` when one is past its limits,
//! `not-judged` when no lateness percentile had enough values behind it.

use super::{Check, Measured, OpValidity, Reported, ValidityOptions, Verdict};
use trace_format::units::fmt_ms;

/// The entry of `io_phase` units' I/O in [`super::Validity::ops`].
pub const IO_PHASE_IO: &str = "io_phase I/O";

/// At most this many percentiles are named in an imprecise op type's evidence (the largest).
const NAMED: usize = 3;

/// Whether a check is one of the lateness checks (which op types are judged by).
pub(super) fn is_lateness(check: &str) -> bool {
    [
        "start_lateness.",
        "resume_lateness.",
        "completion_lateness.",
        "io_phase.lateness.",
    ]
    .iter()
    .any(|p| check.starts_with(p))
}

/// The op types' verdicts: from their bounds, else from the run's judged lateness checks.
pub(super) fn judge_ops(
    m: &Measured<'_>,
    o: &ValidityOptions,
    checks: &[Check],
) -> Vec<OpValidity> {
    let control: Vec<&Check> = checks
        .iter()
        .filter(|c| c.judged && is_lateness(&c.check) && !c.check.starts_with("io_phase."))
        .collect();
    let io: Vec<&Check> = checks
        .iter()
        .filter(|c| c.judged && c.check.starts_with("io_phase.lateness."))
        .collect();
    let reported = |op: &str| m.reported.iter().find(|r| r.op == op);
    let mut out: Vec<OpValidity> = m
        .medians
        .iter()
        .map(|&(op, median)| match sized(op, median, o, reported(op)) {
            Some(v) => v,
            None => by_lateness(op, median, o, &control),
        })
        .collect();
    if let Some((_, service)) = m.io_lateness
        && service.count > 0
    {
        out.push(
            sized(IO_PHASE_IO, service.p50, o, reported(IO_PHASE_IO))
                .unwrap_or_else(|| by_lateness(IO_PHASE_IO, service.p50, o, &io)),
        );
    }
    out
}

/// The verdict from the bounds of the op type's reported percentiles (`None` when no block
/// has one).
fn sized(
    op: &str,
    median: u64,
    o: &ValidityOptions,
    reported: Option<&Reported<'_>>,
) -> Option<OpValidity> {
    let mut worst: Option<f64> = None;
    let mut over: Vec<(f64, String)> = Vec::new();
    for (name, p) in reported?.blocks {
        let Some(b) = &p.tool_ns else { continue };
        if p.count == 0 {
            continue;
        }
        for (pct, value, bound) in b.beside(p) {
            let ratio = if value == 0 {
                0.0
            } else {
                bound as f64 / value as f64
            };
            worst = Some(worst.unwrap_or(0.0).max(ratio));
            if ratio > o.tool_tolerance {
                over.push((
                    ratio,
                    format!(
                        "{name} {pct} {}, tool ≤ {} ({:.1} %)",
                        fmt_ms(value, 3),
                        fmt_ms(bound, 3),
                        ratio * 100.0
                    ),
                ));
            }
        }
    }
    let worst = worst?;
    let limits = o.limits(Some((op, median)));
    over.sort_by(|a, b| b.0.total_cmp(&a.0));
    let evidence = if over.is_empty() {
        String::new()
    } else {
        let more = over.len().saturating_sub(NAMED);
        let named: Vec<&str> = over.iter().take(NAMED).map(|(_, t)| t.as_str()).collect();
        format!(
            "{}{} (tolerance {:.1} % of each figure)",
            named.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            },
            o.tool_tolerance * 100.0
        )
    };
    Some(OpValidity {
        op: op.to_owned(),
        median_ns: median,
        p99_limit_ns: limits.p99_ns,
        p999_limit_ns: limits.p999_ns,
        verdict: if over.is_empty() {
            Verdict::Valid
        } else {
            Verdict::Imprecise
        },
        tool_ratio: Some(worst),
        evidence,
    })
}

/// Without a bound: the run's lateness against limits scaled from the op type's median.
fn by_lateness(op: &str, median: u64, o: &ValidityOptions, judged: &[&Check]) -> OpValidity {
    let limits = o.limits(Some((op, median)));
    let over: Vec<String> = judged
        .iter()
        .filter_map(|c| {
            let limit = if c.check.ends_with(".p99.9") {
                limits.p999_ns
            } else {
                limits.p99_ns
            };
            (c.value > limit as f64).then(|| {
                let (what, pct) = c.check.rsplit_once(".p").unwrap_or((&c.check, "99"));
                format!(
                    "{} p{pct} {} > {}",
                    what.replace(['_', '.'], " "),
                    fmt_ms(c.value, 3),
                    fmt_ms(limit, 3)
                )
            })
        })
        .collect();
    let verdict = if judged.is_empty() {
        Verdict::NotJudged
    } else if over.is_empty() {
        Verdict::Valid
    } else {
        Verdict::Imprecise
    };
    let evidence = if over.is_empty() {
        String::new()
    } else {
        format!(
            "{} (no tool bound measured; its median {}; limits {})",
            over.join(", "),
            fmt_ms(median, 3),
            limits.basis
        )
    };
    OpValidity {
        op: op.to_owned(),
        median_ns: median,
        p99_limit_ns: limits.p99_ns,
        p999_limit_ns: limits.p999_ns,
        verdict,
        tool_ratio: None,
        evidence,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Measured, ValidityOptions, Verdict, judge};
    use crate::record::{CompletionState, Percentiles};

    fn pct(count: u64, p99: u64, p999: u64) -> Percentiles {
        Percentiles {
            count,
            p99,
            p999,
            ..Percentiles::default()
        }
    }

    fn measured<'a>(
        start: &'a Percentiles,
        completion: &'a Percentiles,
        none: &'a Percentiles,
        medians: Vec<(&'a str, u64)>,
    ) -> Measured<'a> {
        Measured {
            state: CompletionState::Complete,
            reason: None,
            operations: 1000,
            operations_ok: 1000,
            start_lateness: start,
            waited: 0,
            resume_lateness: none,
            completion_lateness: completion,
            io_lateness: None,
            medians,
            reported: Vec::new(),
            rate: None,
            workers_busy: Some(0.1),
            throttling: &[],
            streams: &[],
            host_steal_ns: None,
        }
    }

    /// The README's main job on a busy machine: 1 ms of completion lateness sinks a 0.9 ms
    /// op's numbers and nothing else's.
    #[test]
    fn lateness_that_sinks_only_the_fastest_op_type_is_partly_valid() {
        let o = ValidityOptions::default();
        let (start, none) = (pct(50, 5_000_000, 5_000_000), Percentiles::default());
        let completion = pct(50_000, 1_000_000, 2_500_000);
        let m = measured(
            &start,
            &completion,
            &none,
            vec![("attach", 30_000_000), ("delete_snapshot", 900_000)],
        );
        let v = judge(&m, &o);
        // attach: 1 % of 30 ms = 0.3 ms < 1 ms: over too, so no op type holds. Without
        // bounds the lateness decides, and it makes the numbers imprecise, not the engine's.
        assert_eq!(v.verdict, Verdict::Imprecise, "{v:#?}");
        let by = |op: &str| v.ops.iter().find(|x| x.op == op).expect("op");
        assert_eq!(by("attach").p99_limit_ns, 300_000);
        assert_eq!(by("attach").verdict, Verdict::Imprecise, "{v:#?}");
        assert_eq!(by("delete_snapshot").verdict, Verdict::Imprecise);
        // With a 200 ms attach (2 ms limit) the attach holds: partly valid.
        let m = measured(
            &start,
            &completion,
            &none,
            vec![("attach", 200_000_000), ("delete_snapshot", 900_000)],
        );
        let v = judge(&m, &o);
        assert_eq!(v.verdict, Verdict::PartlyValid, "{v:#?}");
        let by = |op: &str| v.ops.iter().find(|x| x.op == op).expect("op");
        assert_eq!(by("attach").verdict, Verdict::Valid, "{v:#?}");
        let d = by("delete_snapshot");
        assert_eq!(d.verdict, Verdict::Imprecise);
        assert!(
            d.evidence
                .contains("completion lateness p99 1.000 ms > 0.020 ms"),
            "{}",
            d.evidence
        );
        assert!(
            v.evidence().contains("valid for attach"),
            "{}",
            v.evidence()
        );
    }

    #[test]
    fn every_op_type_over_its_limits_is_imprecise_and_none_over_is_valid() {
        let o = ValidityOptions::default();
        let none = Percentiles::default();
        let start = pct(50, 0, 0);
        let late = pct(50_000, 5_000_000, 5_000_000);
        let m = measured(&start, &late, &none, vec![("attach", 30_000_000)]);
        assert_eq!(judge(&m, &o).verdict, Verdict::Imprecise);
        let quick = pct(50_000, 100_000, 500_000);
        let m = measured(&start, &quick, &none, vec![("attach", 30_000_000)]);
        let v = judge(&m, &o);
        assert_eq!(v.verdict, Verdict::Valid, "{v:#?}");
        assert_eq!(v.ops[0].verdict, Verdict::Valid);
        // Nothing judged: the op type is not judged either.
        let m = measured(&start, &none, &none, vec![("attach", 30_000_000)]);
        let v = judge(&m, &o);
        assert_eq!(v.ops[0].verdict, Verdict::NotJudged, "{v:#?}");
    }

    /// A failure that is not lateness (the dispatch rate, the workers) hurts every op type:
    /// the run stays engine-bound whatever the op types' own limits say.
    #[test]
    fn a_failed_rate_check_is_engine_bound_even_with_valid_op_types() {
        let o = ValidityOptions::default();
        let none = Percentiles::default();
        let start = pct(50, 0, 0);
        let late = pct(50_000, 1_000_000, 2_000_000);
        let m = Measured {
            workers_busy: Some(0.99),
            ..measured(
                &start,
                &late,
                &none,
                vec![("attach", 200_000_000), ("delete_snapshot", 900_000)],
            )
        };
        let v = judge(&m, &o);
        assert_eq!(v.verdict, Verdict::EngineBound, "{v:#?}");
    }

    /// `--validity reference=1s` on operations of 1 ms: the reference would allow 10 ms of
    /// lateness, but 0.4 ms is 40 % of what was measured. The run is not `valid`, and its
    /// evidence says the delay against the measured latency; an op type slow enough for the
    /// reference keeps its own verdict.
    #[test]
    fn a_given_reference_loosens_the_limits_only_up_to_a_share_of_the_measured_latency() {
        let mut o = ValidityOptions::default();
        o.set("reference=1s").expect("reference");
        let none = Percentiles::default();
        let start = pct(1000, 400_000, 450_000);
        let v = judge(
            &measured(&start, &none, &none, vec![("attach", 1_000_000)]),
            &o,
        );
        assert_eq!(v.verdict, Verdict::Imprecise, "{v:#?}");
        let e: Vec<&str> = v.failed().map(|c| c.message.as_str()).collect();
        let e = e.join("; ");
        assert!(
            e.contains(
                "start lateness p99 0.400 ms (limit 0.100 ms) over 1000 events that did not \
                 wait; 40.0 % of the measured attach median service time 1.000 ms"
            ),
            "{e}"
        );
        let v = judge(
            &measured(
                &start,
                &none,
                &none,
                vec![("attach", 1_000_000_000), ("delete_snapshot", 1_000_000)],
            ),
            &o,
        );
        assert_eq!(v.verdict, Verdict::PartlyValid, "{v:#?}");
        assert_eq!(v.valid_ops(), "attach", "{v:#?}");
        // Without the reference the 1 ms operations' limit is 1 % of them (the 20 µs floor):
        // the reference did loosen it, from 20 µs to 100 µs.
        let v = judge(
            &measured(
                &pct(1000, 90_000, 90_000),
                &none,
                &none,
                vec![("attach", 1_000_000)],
            ),
            &o,
        );
        assert_eq!(v.verdict, Verdict::Valid, "{v:#?}");
    }

    fn sized(p50: u64, p99: u64, max: u64, tool: [u64; 5]) -> Percentiles {
        Percentiles {
            count: 2000,
            p50,
            p90: p50,
            p99,
            p999: max,
            max,
            tool_ns: Some(crate::record::ToolBound {
                p50: tool[0],
                p90: tool[1],
                p99: tool[2],
                p999: tool[3],
                max: tool[4],
            }),
            ..Percentiles::default()
        }
    }

    /// With bounds the verdict is their size: lateness past every limit but bounds within
    /// 5 % of each figure is `valid`; a bound past 5 % of one figure makes the op type
    /// `imprecise`, naming the figure and the size; neither is the engine's.
    #[test]
    fn the_bounds_decide_an_op_types_verdict_whatever_the_lateness_limits_say() {
        use super::super::Reported;
        let o = ValidityOptions::default();
        let none = Percentiles::default();
        let late = pct(50_000, 2_000_000, 9_000_000);
        let start = pct(2000, 2_000_000, 2_000_000);
        // attach 200 ms, its bounds ≤ 4 ms (2 %); snapshot 20 ms, its p99.9/max bound 3 ms
        // (10 % of 30 ms).
        let attach = sized(200_000_000, 300_000_000, 400_000_000, [4_000_000; 5]);
        let snap = sized(
            20_000_000,
            25_000_000,
            30_000_000,
            [500_000, 500_000, 500_000, 3_000_000, 3_000_000],
        );
        let base = measured(
            &start,
            &late,
            &none,
            vec![("attach", 200_000_000), ("snapshot", 20_000_000)],
        );
        let m = Measured {
            reported: vec![
                Reported {
                    op: "attach",
                    blocks: [("response", &attach), ("service", &attach)],
                },
                Reported {
                    op: "snapshot",
                    blocks: [("response", &snap), ("service", &snap)],
                },
            ],
            ..base.clone()
        };
        let v = judge(&m, &o);
        assert_eq!(v.verdict, Verdict::PartlyValid, "{v:#?}");
        let by = |op: &str| v.ops.iter().find(|x| x.op == op).expect("op").clone();
        let a = by("attach");
        assert_eq!(a.verdict, Verdict::Valid, "{a:#?}");
        assert!((a.tool_ratio.expect("ratio") - 0.02).abs() < 1e-9, "{a:#?}");
        let s = by("snapshot");
        assert_eq!(s.verdict, Verdict::Imprecise, "{s:#?}");
        assert!(
            s.evidence
                .starts_with("response p99.9 30.000 ms, tool ≤ 3.000 ms (10.0 %)"),
            "{}",
            s.evidence
        );
        assert!(s.evidence.contains("and 1 more"), "{}", s.evidence);
        assert!(
            v.evidence()
                .contains("valid for attach; imprecise for snapshot"),
            "{}",
            v.evidence()
        );
        // A tolerance of 10 %: both valid, though every lateness check failed.
        let mut wide = o;
        wide.set("tool=10%").expect("tool");
        let v = judge(&m, &wide);
        assert_eq!(v.verdict, Verdict::Valid, "{v:#?}");
        assert!(v.failed().count() > 0, "{v:#?}");
        // Without bounds the lateness limits decide: 2 ms is within 1 % of the attach's
        // 200 ms, not of the snapshot's 20 ms.
        let v = judge(&base, &o);
        assert_eq!(v.verdict, Verdict::PartlyValid, "{v:#?}");
        let s = v.ops.iter().find(|x| x.op == "snapshot").expect("snapshot");
        assert_eq!(
            (s.verdict, s.tool_ratio),
            (Verdict::Imprecise, None),
            "{s:#?}"
        );
        assert!(
            s.evidence.contains("no tool bound measured"),
            "{}",
            s.evidence
        );
    }
}
