//! Each op type judged on its own: the tool's measured delays (start, resume and completion
//! lateness for the control operations; iogen's issue lateness for `io_phase` I/O) against
//! limits scaled from that op type's own median, as the run's limits are from the smallest.
//!
//! The delays are the run's, not an op type's: the same runtime starts and completes every
//! operation, so one distribution applies to all. What differs is what the delay does to each
//! measurement: 1 ms is 3 % of a 30 ms attach's median but more than a 0.9 ms
//! `delete_snapshot`'s. So an op type is `valid` when every judged lateness percentile is
//! within its own limits, `engine-bound` when one is not, `not-judged` when no lateness
//! percentile had enough values behind it.

use super::{Check, Measured, OpValidity, ValidityOptions, Verdict};
use trace_format::units::fmt_ms;

/// The entry of `io_phase` units' I/O in [`super::Validity::ops`].
pub const IO_PHASE_IO: &str = "io_phase I/O";

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

/// The op types' verdicts, from the run's judged lateness checks.
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
    let mut out: Vec<OpValidity> = m
        .medians
        .iter()
        .map(|&(op, median)| one(op, median, o, &control))
        .collect();
    if let Some((_, service)) = m.io_lateness
        && service.count > 0
    {
        out.push(one(IO_PHASE_IO, service.p50, o, &io));
    }
    out
}

fn one(op: &str, median: u64, o: &ValidityOptions, judged: &[&Check]) -> OpValidity {
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
        Verdict::EngineBound
    };
    let evidence = if over.is_empty() {
        String::new()
    } else {
        format!(
            "{} (its median {}; limits {})",
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
        // attach: 1 % of 30 ms = 0.3 ms < 1 ms: over too, so no op type holds.
        assert_eq!(v.verdict, Verdict::EngineBound, "{v:#?}");
        let by = |op: &str| v.ops.iter().find(|x| x.op == op).expect("op");
        assert_eq!(by("attach").p99_limit_ns, 300_000);
        assert_eq!(by("attach").verdict, Verdict::EngineBound, "{v:#?}");
        assert_eq!(by("delete_snapshot").verdict, Verdict::EngineBound);
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
        assert_eq!(d.verdict, Verdict::EngineBound);
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
    fn every_op_type_over_its_limits_is_engine_bound_and_none_over_is_valid() {
        let o = ValidityOptions::default();
        let none = Percentiles::default();
        let start = pct(50, 0, 0);
        let late = pct(50_000, 5_000_000, 5_000_000);
        let m = measured(&start, &late, &none, vec![("attach", 30_000_000)]);
        assert_eq!(judge(&m, &o).verdict, Verdict::EngineBound);
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
        assert_eq!(v.verdict, Verdict::EngineBound, "{v:#?}");
        let e = v.evidence();
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
}
