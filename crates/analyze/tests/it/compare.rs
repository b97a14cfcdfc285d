//! The comparison on fabricated runs with known distributions, and its statistical properties
//! on synthetic per-run values: exact mirror under swap, A/A false alarms, power, minimum events.

use std::path::PathBuf;

use analyze::compare::{CompareOptions, Metric, RunValue, Sample, Verdict, compare, judge};
use analyze::hist::Rng;
use trace_format::OpType;

use crate::{lognormal, rec, write_run, write_trace};

fn attach_run(
    dir: &std::path::Path,
    name: &str,
    trace: &std::path::Path,
    seed: u64,
    scale: f64,
    failures: u64,
) -> PathBuf {
    let mut rng = Rng::new(seed);
    let recs: Vec<_> = (1..=400u64)
        .map(|i| {
            let mut r = rec(
                i,
                OpType::Attach,
                i * 10_000_000,
                (lognormal(&mut rng, 20e6, 0.4) as f64 * scale) as u64,
            );
            if i <= failures {
                r.outcome = replay::Outcome::Error;
                r.error_class = Some("sim_injected".into());
            }
            r
        })
        .collect();
    write_run(&dir.join(name), trace, 1.0, &recs)
}

fn trace(dir: &std::path::Path) -> PathBuf {
    write_trace(
        dir,
        "t.jsonl",
        None,
        &[(0, r#""attach":{"workload":"w","volumes":[]}"#.into())],
    )
}

fn runs(
    dir: &std::path::Path,
    name: &str,
    t: &std::path::Path,
    seeds: std::ops::Range<u64>,
    scale: f64,
    failures: u64,
) -> Vec<PathBuf> {
    seeds
        .map(|seed| attach_run(dir, &format!("{name}{seed}"), t, seed, scale, failures))
        .collect()
}

#[test]
fn twenty_percent_slower_attach_is_a_regression_and_mirrors_when_swapped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = trace(dir.path());
    let base = runs(dir.path(), "base", &t, 1..5, 1.0, 0);
    let new = runs(dir.path(), "new", &t, 11..15, 1.2, 0);
    let r = compare(&base, &new, &CompareOptions::default()).expect("compare");
    for m in [Metric::P50, Metric::Mean] {
        let row = r.rows.iter().find(|x| x.metric == m).expect("row");
        assert!((row.change - 0.2).abs() < 0.05, "{row:?}");
        let (lo, hi) = (row.ci_low.expect("ci"), row.ci_high.expect("ci"));
        assert!(lo <= row.change && row.change <= hi, "{row:?}");
        assert_eq!(row.verdict, Verdict::Regression, "{row:?}");
    }
    // 400 events per run: too few for p99 (500) and p99.9 (5000).
    for m in [Metric::P99, Metric::P999] {
        let row = r.rows.iter().find(|x| x.metric == m).expect("row");
        assert_eq!(row.verdict, Verdict::InsufficientData, "{row:?}");
    }
    assert_eq!(r.regressions, 2);
    assert_eq!(r.exit_code(), 1);
    // The same comparison reversed: the mirror image.
    let s = compare(&new, &base, &CompareOptions::default()).expect("compare");
    assert_eq!((s.regressions, s.improvements), (0, 2));
    for (x, y) in r.rows.iter().zip(&s.rows) {
        assert_eq!(x.diff, -y.diff);
        assert_eq!((x.p, x.p_holm), (y.p, y.p_holm));
        assert_eq!(x.verdict, y.verdict.mirrored());
    }
}

#[test]
fn same_distribution_other_seeds_is_not_a_regression_and_one_run_is_inconclusive() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = trace(dir.path());
    let base = runs(dir.path(), "base", &t, 1..5, 1.0, 4);
    let new = runs(dir.path(), "new", &t, 11..15, 1.0, 5);
    let r = compare(&base, &new, &CompareOptions::default()).expect("compare");
    assert!(
        r.rows
            .iter()
            .all(|x| matches!(x.verdict, Verdict::NoChange | Verdict::InsufficientData)),
        "{:#?}",
        r.rows
    );
    assert_eq!(r.exit_code(), 0);
    assert_eq!(
        r,
        compare(&base, &new, &CompareOptions::default()).expect("again")
    );
    // One run per side: no between-run variance, so no verdict either way.
    let one = compare(&base[..1], &new[..1], &CompareOptions::default()).expect("compare");
    assert!(!one.between_run_variance);
    assert!(one.notes.iter().any(|n| n.contains("one run per side")));
    assert!(
        one.rows
            .iter()
            .all(|x| matches!(x.verdict, Verdict::Inconclusive | Verdict::InsufficientData))
    );
    assert_eq!(one.exit_code(), 3);
}

#[test]
fn error_rate_regression_and_different_traces_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = trace(dir.path());
    let base = runs(dir.path(), "base", &t, 1..4, 1.0, 0);
    let new = runs(dir.path(), "new", &t, 11..14, 1.0, 40);
    let r = compare(&base, &new, &CompareOptions::default()).expect("compare");
    let row = r
        .rows
        .iter()
        .find(|x| x.metric == Metric::ErrorRate)
        .expect("row");
    assert_eq!(row.verdict, Verdict::Regression, "{row:?}");
    assert!((row.change - 0.1).abs() < 1e-9);

    let other = write_trace(
        dir.path(),
        "u.jsonl",
        None,
        &[(5, r#""attach":{"workload":"w","volumes":[]}"#.into())],
    );
    let elsewhere = vec![attach_run(dir.path(), "other", &other, 1, 1.0, 0)];
    let err = compare(&base, &elsewhere, &CompareOptions::default()).expect_err("different traces");
    assert!(matches!(err, analyze::Error::TraceMismatch { .. }));
    assert!(err.to_string().contains("--by-op-type"));
    let ok = compare(
        &base,
        &elsewhere,
        &CompareOptions {
            by_op_type: true,
            ..CompareOptions::default()
        },
    );
    assert!(!ok.expect("by op type").same_trace);
}

/// Per-run values of one row: `runs` runs of `events` events whose statistic is
/// `median · e^(sd·z)` (run-to-run noise).
fn side(rng: &mut Rng, runs: usize, median: f64, sd: f64, events: u64) -> Vec<RunValue> {
    (0..runs)
        .map(|_| RunValue {
            value: lognormal(rng, median, sd) as f64,
            events,
        })
        .collect()
}

fn sample(op: &str, metric: Metric, base: Vec<RunValue>, new: Vec<RunValue>) -> Sample {
    Sample {
        op: op.into(),
        metric,
        base,
        new,
    }
}

#[test]
fn verdicts_are_exact_mirrors_when_the_sides_swap() {
    let mut rng = Rng::new(7);
    let opts = CompareOptions::default();
    for trial in 0..200 {
        let shift = [1.0, 1.08, 1.2, 0.8][trial % 4];
        let runs = [(5, 5), (3, 6), (1, 4), (2, 2)][trial % 4];
        let rows: Vec<Sample> = [Metric::P50, Metric::P99, Metric::Mean]
            .into_iter()
            .map(|m| {
                sample(
                    "attach",
                    m,
                    side(&mut rng, runs.0, 1e8, 0.05, 1000),
                    side(&mut rng, runs.1, 1e8 * shift, 0.05, 1000),
                )
            })
            .collect();
        let swapped: Vec<Sample> = rows
            .iter()
            .map(|s| sample(&s.op, s.metric, s.new.clone(), s.base.clone()))
            .collect();
        let (a, b) = (judge(&rows, &opts), judge(&swapped, &opts));
        assert_eq!(a.exit_code() == 1, b.improvements > 0, "{a:#?} {b:#?}");
        for (x, y) in a.rows.iter().zip(&b.rows) {
            assert_eq!(x.diff, -y.diff, "{x:?} {y:?}");
            assert_eq!((x.p, x.p_holm, x.df), (y.p, y.p_holm, y.df));
            assert_eq!(x.verdict, y.verdict.mirrored(), "{x:?} {y:?}");
            if let (Some(l), Some(h)) = (x.ci_low, x.ci_high) {
                let (yl, yh) = (y.ci_low.expect("ci"), y.ci_high.expect("ci"));
                // Mirrored on the log scale.
                assert!(
                    (l.ln_1p() + yh.ln_1p()).abs() < 1e-12
                        && (h.ln_1p() + yl.ln_1p()).abs() < 1e-12
                );
            }
        }
    }
}

#[test]
fn identical_distributions_rarely_regress_and_a_shift_is_detected() {
    let mut rng = Rng::new(11);
    let opts = CompareOptions::default();
    let trial = |rng: &mut Rng, shift: f64| {
        let rows: Vec<Sample> = [("attach", 1e8), ("detach", 3e7), ("create_volume", 5e8)]
            .into_iter()
            .flat_map(|(op, med)| {
                [Metric::P50, Metric::P99, Metric::Mean]
                    .into_iter()
                    .map(move |m| (op, med, m))
            })
            .map(|(op, med, m)| {
                let f = if op == "attach" { shift } else { 1.0 };
                sample(
                    op,
                    m,
                    side(rng, 5, med, 0.06, 2000),
                    side(rng, 5, med * f, 0.06, 2000),
                )
            })
            .collect();
        judge(&rows, &opts)
    };
    let n = 400;
    let false_alarms = (0..n)
        .filter(|_| trial(&mut rng, 1.0).regressions > 0)
        .count();
    // Holm keeps the family-wise rate of any significant row ≤ α (two-sided); regressions are
    // one side of that.
    assert!(false_alarms * 100 <= 5 * n, "{false_alarms} of {n}");
    let detected = (0..100)
        .filter(|_| {
            let r = trial(&mut rng, 1.3);
            r.rows
                .iter()
                .filter(|x| x.op == "attach")
                .all(|x| x.verdict == Verdict::Regression)
                && r.regressions == 3
        })
        .count();
    assert!(detected >= 95, "{detected} of 100");
}

#[test]
fn tail_percentiles_need_events_beyond_them() {
    let opts = CompareOptions::default();
    assert_eq!(opts.required_events(Metric::P50), 10);
    assert_eq!(opts.required_events(Metric::P99), 500);
    assert_eq!(opts.required_events(Metric::P999), 5000);
    let mut rng = Rng::new(3);
    // A 3× slower p99 from 10 events per run: not judged.
    let rows = vec![sample(
        "attach",
        Metric::P99,
        side(&mut rng, 5, 1e8, 0.05, 10),
        side(&mut rng, 5, 3e8, 0.05, 10),
    )];
    let r = judge(&rows, &opts);
    assert_eq!(r.rows[0].verdict, Verdict::InsufficientData);
    assert_eq!((r.tested, r.exit_code()), (0, 3));
    // One run short on the new side is enough to withhold the verdict.
    let mut new = side(&mut rng, 5, 3e8, 0.05, 600);
    new[2].events = 499;
    let rows = vec![sample(
        "attach",
        Metric::P99,
        side(&mut rng, 5, 1e8, 0.05, 600),
        new.clone(),
    )];
    assert_eq!(
        judge(&rows, &opts).rows[0].verdict,
        Verdict::InsufficientData
    );
    new[2].events = 500;
    let rows = vec![sample(
        "attach",
        Metric::P99,
        side(&mut rng, 5, 1e8, 0.05, 600),
        new,
    )];
    assert_eq!(judge(&rows, &opts).rows[0].verdict, Verdict::Regression);
}

#[test]
fn thresholds_parse_and_reject() {
    let mut t = analyze::Thresholds::default();
    t.set("p99=20%").expect("p99");
    t.set("error_rate=0.02").expect("errors");
    assert_eq!((t.p99, t.error_rate), (0.2, 0.02));
    t.set("p99.9=25%").expect("p99.9");
    assert_eq!(t.p99_9, 0.25);
    assert!(t.set("p75=1%").is_err());
    assert!(t.set("p99").is_err());
    assert!(t.set("p99=-1").is_err());
}
