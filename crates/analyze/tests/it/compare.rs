//! The comparison on fabricated runs with known distributions, and its statistical properties
//! on synthetic per-run values: exact mirror under swap, A/A false alarms, power, minimum events.

use std::path::PathBuf;

use analyze::compare::{
    CompareOptions, Design, DesignKind, Metric, RunValue, Sample, Verdict, compare, design, judge,
};
use analyze::hist::Rng;
use trace_format::OpType;

use crate::{lognormal, rec, write_run, write_run_at, write_trace};

/// Runs that all started together (interleaved).
fn together(m: usize, k: usize) -> Design {
    design::detect(&vec![0.0; m], &vec![0.0; k], 0.05)
}

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
    assert_eq!(r.design.kind, DesignKind::Interleaved);
    assert_eq!(r.regressions, 0, "{:#?}", r.rows);
    // 400 events a run: p99 and p99.9 cannot be judged, and that keeps the exit code at 3.
    assert_eq!(r.insufficient, 2);
    assert_eq!(r.exit_code(), 3);
    // Every inconclusive row says how many runs would decide it.
    for x in r.rows.iter().filter(|x| x.verdict == Verdict::Inconclusive) {
        assert!(x.runs_needed.is_some_and(|n| n > 4), "{x:?}");
    }
    assert_eq!(
        r,
        compare(&base, &new, &CompareOptions::default()).expect("again")
    );
    // Left out, the percentiles no longer hold the exit code.
    let skip = CompareOptions {
        skip: vec![Metric::P99, Metric::P999],
        ..CompareOptions::default()
    };
    let s = compare(&base, &new, &skip).expect("compare");
    assert_eq!((s.insufficient, s.rows.len()), (0, 3));
    assert!(s.exit_code() != 1);
    // One run per side: no between-run variance, so no latency verdict either way.
    let one = compare(&base[..1], &new[..1], &CompareOptions::default()).expect("compare");
    assert!(!one.between_run_variance);
    assert!(one.notes.iter().any(|n| n.contains("one run per side")));
    assert!(one.rows.iter().all(|x| x.metric == Metric::ErrorRate
        || matches!(x.verdict, Verdict::Inconclusive | Verdict::InsufficientData)));
    assert_eq!(one.exit_code(), 3);
}

#[test]
fn no_change_needs_the_whole_interval_within_the_threshold() {
    let mut rng = Rng::new(5);
    let opts = CompareOptions::default();
    // Per-run noise 8 %, threshold 5 %: with 3 runs a side the interval is wider than ±5 %,
    // so even a small change is inconclusive, with the runs that would decide it.
    let rows = vec![sample(
        "attach",
        Metric::P50,
        side(&mut rng, 3, 1e8, 0.08, 1000),
        side(&mut rng, 3, 1e8, 0.08, 1000),
    )];
    let r = judge(&rows, &together(3, 3), &opts);
    let row = &r.rows[0];
    assert_eq!(row.verdict, Verdict::Inconclusive, "{row:?}");
    let n = row.runs_needed.expect("runs needed") as usize;
    // Planned on the upper 80 % bound of the noise from 3 runs a side (df 4: 2.4 × s²).
    assert!(n > 3 && n < 400, "{n}");
    assert_eq!((r.runs_needed, r.exit_code()), (Some(n as u64), 3));
    // With that many runs a side, no change is decided in most comparisons (80 % power aimed
    // at the observed change).
    let decided = (0..100)
        .filter(|_| {
            let rows = vec![sample(
                "attach",
                Metric::P50,
                side(&mut rng, n, 1e8, 0.08, 1000),
                side(&mut rng, n, 1e8, 0.08, 1000),
            )];
            judge(&rows, &together(n, n), &opts).exit_code() == 0
        })
        .count();
    assert!(decided >= 60, "{decided} of 100 with {n} runs a side");
}

#[test]
fn error_rates_are_compared_as_counts() {
    let opts = CompareOptions::default();
    let rate = |failed: u64, events: u64| RunValue {
        value: failed as f64 / events as f64,
        events,
    };
    // 0 % → 0.9 % failed attaches over 5 runs of 600: a regression, never no change.
    let rows = vec![sample(
        "attach",
        Metric::ErrorRate,
        vec![rate(0, 600); 5],
        vec![
            rate(5, 600),
            rate(6, 600),
            rate(5, 600),
            rate(5, 600),
            rate(6, 600),
        ],
    )];
    let r = judge(&rows, &together(5, 5), &opts);
    assert_eq!(r.rows[0].verdict, Verdict::Regression, "{:?}", r.rows[0]);
    assert_eq!(r.rows[0].counts, Some((0, 3000, 27, 3000)));
    // The same rates from one run of 200 a side: too few events to tell, so inconclusive
    // (0 of 200 against 2 of 200), with the runs that would decide it.
    let rows = vec![sample(
        "attach",
        Metric::ErrorRate,
        vec![rate(0, 200)],
        vec![rate(2, 200)],
    )];
    let r = judge(&rows, &together(1, 1), &opts);
    assert_eq!(r.rows[0].verdict, Verdict::Inconclusive, "{:?}", r.rows[0]);
    assert!(r.rows[0].runs_needed.is_some());
    // No failures on either side over 3000 events: the interval is within ±0.5 points.
    let rows = vec![sample(
        "attach",
        Metric::ErrorRate,
        vec![rate(0, 600); 5],
        vec![rate(0, 600); 5],
    )];
    assert_eq!(
        judge(&rows, &together(5, 5), &opts).rows[0].verdict,
        Verdict::NoChange
    );
    // The relative threshold: 10 % → 10.3 % is within 20 % of 10 % (tolerance 2 points).
    let rows = vec![sample(
        "attach",
        Metric::ErrorRate,
        vec![rate(600, 6000); 5],
        vec![rate(618, 6000); 5],
    )];
    let r = judge(&rows, &together(5, 5), &opts);
    assert!((r.rows[0].tolerance - 0.02).abs() < 1e-12);
    assert_eq!(r.rows[0].verdict, Verdict::NoChange, "{:?}", r.rows[0]);
}

#[test]
fn separate_batches_need_a_change_beyond_the_batch_shift() {
    let mut rng = Rng::new(17);
    let opts = CompareOptions::default();
    // Base then new, one batch each; the new batch 4 % slower for no reason but its batch,
    // runs quiet (1 %): Welch alone would call this p50 +4 % significant; beyond 5 % p50
    // threshold it is not either way, so use a 3 % threshold to see the allowance at work.
    let opts = CompareOptions {
        thresholds: analyze::Thresholds {
            p50: 0.03,
            ..analyze::Thresholds::default()
        },
        ..opts
    };
    let t = |i: usize| i as f64 * 60.0;
    let separate = design::detect(
        &(0..5).map(t).collect::<Vec<_>>(),
        &(5..10).map(t).collect::<Vec<_>>(),
        0.05,
    );
    assert_eq!(separate.kind, DesignKind::SeparateBatches);
    let interleaved = design::detect(
        &(0..5).map(|i| t(2 * i)).collect::<Vec<_>>(),
        &(0..5).map(|i| t(2 * i + 1)).collect::<Vec<_>>(),
        0.05,
    );
    let rows = vec![sample(
        "attach",
        Metric::P50,
        side(&mut rng, 5, 1e8, 0.01, 1000),
        side(&mut rng, 5, 1.04e8, 0.01, 1000),
    )];
    assert_eq!(
        judge(&rows, &interleaved, &opts).rows[0].verdict,
        Verdict::Regression
    );
    let r = judge(&rows, &separate, &opts);
    let row = &r.rows[0];
    assert_eq!(row.verdict, Verdict::Inconclusive, "{row:?}");
    assert!((row.margin - 0.05).abs() < 1e-12);
    // The interval is widened by the allowance, and more runs cannot shrink that.
    assert!(
        row.ci_low.expect("ci") < -0.0 && row.ci_high.expect("ci") > 0.09,
        "{row:?}"
    );
    assert_eq!(row.runs_needed, None);
    assert!(
        r.notes.iter().any(|n| n.contains("cannot decide")),
        "{:?}",
        r.notes
    );
    // A +30 % change is beyond any batch shift: a regression in this design too.
    let rows = vec![sample(
        "attach",
        Metric::P50,
        side(&mut rng, 5, 1e8, 0.01, 1000),
        side(&mut rng, 5, 1.3e8, 0.01, 1000),
    )];
    assert_eq!(
        judge(&rows, &separate, &opts).rows[0].verdict,
        Verdict::Regression
    );
}

#[test]
fn design_and_manifest_differences_come_from_the_manifests() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = trace(dir.path());
    let mut rng = Rng::new(23);
    let mut run = |name: &str, started: &str, speed: f64| {
        let recs: Vec<_> = (1..=100u64)
            .map(|i| {
                rec(
                    i,
                    OpType::Attach,
                    i * 10_000_000,
                    lognormal(&mut rng, 20e6, 0.1),
                )
            })
            .collect();
        write_run_at(&dir.path().join(name), &t, speed, &recs, started)
    };
    // Two A/A batches of the base a day apart, then the new batch: batch baseline.
    let base: Vec<PathBuf> = (0..6)
        .map(|i| {
            let day = 1 + i / 3;
            run(
                &format!("b{i}"),
                &format!("2026-01-0{day}T10:0{}:00Z", i % 3),
                1.0,
            )
        })
        .collect();
    let new: Vec<PathBuf> = (0..3)
        .map(|i| run(&format!("n{i}"), &format!("2026-01-05T10:0{i}:00Z"), 1.0))
        .collect();
    let r = compare(&base, &new, &CompareOptions::default()).expect("compare");
    assert_eq!(r.design.kind, DesignKind::BatchBaseline);
    assert_eq!((r.design.base_batches, r.design.new_batches), (2, 1));
    assert!(
        r.manifest_differences.is_empty(),
        "{:?}",
        r.manifest_differences
    );
    // Another speed on the new side is named.
    let faster = vec![
        run("f0", "2026-01-05T11:00:00Z", 2.0),
        run("f1", "2026-01-05T11:01:00Z", 2.0),
    ];
    let r = compare(&base[..3], &faster, &CompareOptions::default()).expect("compare");
    assert_eq!(r.design.kind, DesignKind::SeparateBatches);
    assert_eq!(
        r.manifest_differences,
        vec!["options.speed: 1.0 vs 2.0".to_owned()]
    );
}

/// Sets `options.validity` of a run's manifest (as `run` writes it: what the user gave, and
/// the limits the run computed from its own latencies).
fn set_validity(run: &std::path::Path, validity: serde_json::Value) {
    let path = run.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_slice(&fs_err::read(&path).expect("manifest")).expect("json");
    m["options"]["validity"] = validity;
    fs_err::write(&path, serde_json::to_vec(&m).expect("json")).expect("write manifest");
}

/// Each run scales its lateness limits from its own medians (`options.validity.limits`):
/// values no user set differ between any two runs and are no reason to warn. A threshold the
/// user set differently is.
#[test]
fn limits_each_run_computed_are_not_manifest_differences() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = trace(dir.path());
    let base = runs(dir.path(), "b", &t, 0..2, 1.0, 0);
    let new = runs(dir.path(), "n", &t, 10..12, 1.0, 0);
    for (i, r) in base.iter().chain(&new).enumerate() {
        let median = 20_000_000 + i as u64 * 1_234;
        set_validity(
            r,
            serde_json::json!({
                "start_fraction": 0.01,
                "limits": {
                    "p99_ns": median / 100,
                    "p999_ns": median / 10,
                    "reference_ns": median,
                    "basis": format!("1.00 % of attach median service time {median} ns"),
                    "min_events": 100
                }
            }),
        );
    }
    let r = compare(&base, &new, &CompareOptions::default()).expect("compare");
    assert!(
        r.manifest_differences.is_empty(),
        "computed limits reported as differences: {:?}",
        r.manifest_differences
    );
    set_validity(
        &new[0],
        serde_json::json!({"start_fraction": 0.1, "limits": {"basis": "other"}}),
    );
    set_validity(
        &new[1],
        serde_json::json!({"start_fraction": 0.1, "limits": {"basis": "another"}}),
    );
    let r = compare(&base, &new, &CompareOptions::default()).expect("compare");
    assert_eq!(
        r.manifest_differences,
        vec!["options.validity.start_fraction: 0.01 vs 0.1".to_owned()]
    );
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
    assert!(
        matches!(
            &err,
            analyze::Error::Combine(c) if matches!(**c, replay::CombineError::Differ {
                field: "trace.sha256",
                ..
            })
        ),
        "{err}"
    );
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
        // Interleaved, separate batches (with a drift to adjust for), batch baseline.
        let times = |n: usize, off: f64, step: f64| -> Vec<f64> {
            (0..n).map(|i| off + i as f64 * step).collect()
        };
        let (tb, tn) = match trial % 3 {
            0 => (times(runs.0, 0.0, 120.0), times(runs.1, 60.0, 120.0)),
            1 => (times(runs.0, 0.0, 60.0), times(runs.1, 1e4, 60.0)),
            _ => {
                let mut b = times(runs.0 / 2 + 1, 0.0, 60.0);
                b.extend(times(runs.0 - b.len(), 86_400.0, 60.0));
                (b, times(runs.1, 2.0 * 86_400.0, 60.0))
            }
        };
        let (da, db) = (
            design::detect(&tb, &tn, 0.05),
            design::detect(&tn, &tb, 0.05),
        );
        assert_eq!(da.kind, db.kind);
        let (a, b) = (judge(&rows, &da, &opts), judge(&swapped, &db, &opts));
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
        judge(&rows, &together(5, 5), &opts)
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
    let r = judge(&rows, &together(5, 5), &opts);
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
        judge(&rows, &together(5, 5), &opts).rows[0].verdict,
        Verdict::InsufficientData
    );
    new[2].events = 500;
    let rows = vec![sample(
        "attach",
        Metric::P99,
        side(&mut rng, 5, 1e8, 0.05, 600),
        new,
    )];
    assert_eq!(
        judge(&rows, &together(5, 5), &opts).rows[0].verdict,
        Verdict::Regression
    );
}

#[test]
fn thresholds_parse_and_reject() {
    let mut t = analyze::Thresholds::default();
    t.set("p99=20%").expect("p99");
    t.set("error_rate=0.02").expect("errors");
    t.set("error_rate_rel=50%").expect("relative");
    assert_eq!(t.error_rate_rel, 0.5);
    assert_eq!((t.p99, t.error_rate), (0.2, 0.02));
    t.set("p99.9=25%").expect("p99.9");
    assert_eq!(t.p99_9, 0.25);
    assert!(t.set("p75=1%").is_err());
    assert!(t.set("p99").is_err());
    assert!(t.set("p99=-1").is_err());
}

/// Base runs at ranks 1..=n, new runs at n+1..=2n (one batch each, a minute apart).
fn before_after(n: usize) -> Design {
    let t = |i: usize| i as f64 * 60.0;
    design::detect(
        &(0..n).map(t).collect::<Vec<_>>(),
        &(n..2 * n).map(t).collect::<Vec<_>>(),
        0.05,
    )
}

/// `runs` values `median · (1 + drift)^(first + i) · e^(sd·z)`.
fn drifting(
    rng: &mut Rng,
    runs: usize,
    first: usize,
    median: f64,
    drift: f64,
    sd: f64,
) -> Vec<RunValue> {
    (0..runs)
        .map(|i| RunValue {
            value: lognormal(rng, median, sd) as f64 * (1.0 + drift).powi((first + i) as i32),
            events: 1000,
        })
        .collect()
}

#[test]
fn separate_batches_take_a_drift_out_of_the_difference() {
    let opts = CompareOptions::default();
    let d = before_after(15);
    assert_eq!(d.kind, DesignKind::SeparateBatches);
    let mut rng = Rng::new(29);
    let mut regressions = 0;
    for _ in 0..50 {
        // No side effect: 1 %/run drift over 30 runs, run noise 3 %.
        let rows = vec![sample(
            "attach",
            Metric::P50,
            drifting(&mut rng, 15, 0, 1e8, 0.01, 0.03),
            drifting(&mut rng, 15, 15, 1e8, 0.01, 0.03),
        )];
        let r = judge(&rows, &d, &opts);
        let row = &r.rows[0];
        // Unadjusted, the sides' geometric means are ≈ 16 % apart (1.01^15).
        assert!(row.new / row.base > 1.1, "{row:?}");
        let (l, h) = (
            row.drift_ci_low.expect("drift"),
            row.drift_ci_high.expect("drift"),
        );
        assert!(
            l < h && row.drift_per_run.is_some_and(|b| l <= b && b <= h),
            "{row:?}"
        );
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("drift adjustment applied")),
            "{:?}",
            r.notes
        );
        if row.verdict == Verdict::Regression {
            regressions += 1;
        }
        assert!(row.change.abs() < 0.1, "adjusted change {row:?}");
    }
    assert!(regressions <= 2, "{regressions} of 50 called a regression");
    // The slope is recovered: 1 %/run within its interval in most draws.
    let rows = vec![sample(
        "attach",
        Metric::P50,
        drifting(&mut rng, 15, 0, 1e8, 0.01, 0.03),
        drifting(&mut rng, 15, 15, 1e8, 0.01, 0.03),
    )];
    let row = &judge(&rows, &d, &opts).rows[0];
    let b = row.drift_per_run.expect("drift");
    assert!((b - 0.01).abs() < 0.004, "{row:?}");
    assert!(
        row.ci_low.expect("ci") < 0.0 && row.ci_high.expect("ci") > 0.0,
        "{row:?}"
    );
}

#[test]
fn separate_batches_find_a_side_effect_without_drift() {
    let opts = CompareOptions::default();
    let d = before_after(10);
    let mut rng = Rng::new(31);
    let mut found = 0;
    for _ in 0..20 {
        // +30 % p50 in the new batch, no drift, run noise 3 %.
        let rows = vec![sample(
            "attach",
            Metric::P50,
            drifting(&mut rng, 10, 0, 1e8, 0.0, 0.03),
            drifting(&mut rng, 10, 10, 1.3e8, 0.0, 0.03),
        )];
        let row = judge(&rows, &d, &opts).rows.remove(0);
        // The drift interval covers 0, and the change's interval covers +30 %.
        assert!(
            row.drift_ci_low.expect("drift") < 0.0 && row.drift_ci_high.expect("drift") > 0.0
                || row.verdict == Verdict::Regression,
            "{row:?}"
        );
        assert!(
            row.ci_low.expect("ci") < 0.3 && row.ci_high.expect("ci") > 0.3,
            "{row:?}"
        );
        if row.verdict == Verdict::Regression {
            found += 1;
        }
    }
    assert_eq!(found, 20, "+30 % found in {found} of 20");
}

#[test]
fn runs_needed_in_separate_batches_counts_the_drift_adjustment() {
    // +10 % p50 (threshold 5 %) over runs spread ±10 % in a pattern with no trend inside a
    // side (x − mean = a, −a, 0, −a, a): inconclusive at 5 runs a side in both designs. The
    // runs needed are those of the adjusted standard error: `se² ∝ 2/n + gap²/Sxx ≈ 8/n`
    // against Welch's `2/n`, and the residual variance on N − 3 df (8/7 of the pooled one),
    // so ≈ 4.6× the interleaved figure.
    let opts = CompareOptions::default();
    let t = |i: usize| i as f64 * 60.0;
    let interleaved = design::detect(
        &(0..5).map(|i| t(2 * i)).collect::<Vec<_>>(),
        &(0..5).map(|i| t(2 * i + 1)).collect::<Vec<_>>(),
        0.0,
    );
    let separate = design::detect(
        &(0..5).map(t).collect::<Vec<_>>(),
        &(5..10).map(t).collect::<Vec<_>>(),
        0.0,
    );
    let side = |median: f64| -> Vec<RunValue> {
        [0.1, -0.1, 0.0, -0.1, 0.1]
            .iter()
            .map(|x: &f64| RunValue {
                value: median * x.exp(),
                events: 1000,
            })
            .collect()
    };
    let rows = vec![sample("attach", Metric::P50, side(1e8), side(1.1e8))];
    let (a, b) = (
        judge(&rows, &separate, &opts).rows.remove(0),
        judge(&rows, &interleaved, &opts).rows.remove(0),
    );
    assert_eq!(
        (a.verdict, b.verdict),
        (Verdict::Inconclusive, Verdict::Inconclusive)
    );
    assert!(
        a.drift_per_run.is_some() && b.drift_per_run.is_none(),
        "{a:?} {b:?}"
    );
    assert!(
        (a.diff - b.diff).abs() < 1e-12,
        "no trend: the same difference"
    );
    let (x, y) = (
        a.runs_needed.expect("separate") as f64,
        b.runs_needed.expect("interleaved") as f64,
    );
    assert!(
        (3.5 * y..5.5 * y).contains(&x),
        "separate {x}, interleaved {y}"
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// In separate batches, any linear drift over the run order (`e^(a·rank)` on every run)
    /// leaves the tested difference and its interval unchanged.
    #[test]
    fn a_linear_drift_does_not_move_the_separate_batches_estimate(
        base in proptest::collection::vec(0.5f64..2.0, 3..12),
        new in proptest::collection::vec(0.5f64..2.0, 3..12),
        a in -0.05f64..0.05,
    ) {
        let d = design::detect(
            &(0..base.len()).map(|i| i as f64 * 60.0).collect::<Vec<_>>(),
            &(0..new.len()).map(|i| (base.len() + i) as f64 * 60.0).collect::<Vec<_>>(),
            0.05,
        );
        proptest::prop_assume!(d.kind == DesignKind::SeparateBatches);
        let rv = |v: &[f64], r: &[f64], a: f64| -> Vec<RunValue> {
            v.iter()
                .zip(r)
                .map(|(x, r)| RunValue { value: 1e8 * x * (a * r).exp(), events: 1000 })
                .collect()
        };
        let row = |a: f64| {
            let s = sample("attach", Metric::P50, rv(&base, &d.base_rank, a), rv(&new, &d.new_rank, a));
            judge(&[s], &d, &CompareOptions::default()).rows.remove(0)
        };
        let (x, y) = (row(0.0), row(a));
        proptest::prop_assert!((x.diff - y.diff).abs() < 1e-9, "{x:?} {y:?}");
        let (xl, xh, yl, yh) = (
            x.ci_low.expect("ci").ln_1p(),
            x.ci_high.expect("ci").ln_1p(),
            y.ci_low.expect("ci").ln_1p(),
            y.ci_high.expect("ci").ln_1p(),
        );
        proptest::prop_assert!((xl - yl).abs() < 1e-9 && (xh - yh).abs() < 1e-9, "{x:?} {y:?}");
        let slope = |r: &analyze::compare::Row| r.drift_per_run.expect("drift").ln_1p();
        proptest::prop_assert!((slope(&y) - slope(&x) - a).abs() < 1e-9);
    }
}

#[test]
fn following_the_runs_needed_finds_the_change_in_separate_batches() {
    // Before/after pilots of 5 runs a side, +20 % p99 (threshold 10 %, batch-shift allowance
    // 5 %), run noise 11 %: the drift-adjusted difference's standard error is about as large
    // as the change, so a pilot's own estimate of the change is a poor plan. Each
    // inconclusive pilot's count is followed with fresh runs (one comparison each): the
    // change must be found in ≥ 80 % of them. Planned on the observed change itself (the
    // lower bound's confidence set to 0.5) this test found it in 86 of 116 (74 %).
    let opts = CompareOptions::default();
    let mut rng = Rng::new(41);
    let (mut given, mut found) = (0, 0);
    for _ in 0..150 {
        let pilot = vec![sample(
            "attach",
            Metric::P99,
            side(&mut rng, 5, 1e8, 0.11, 1000),
            side(&mut rng, 5, 1.2e8, 0.11, 1000),
        )];
        let row = judge(&pilot, &before_after(5), &opts).rows.remove(0);
        let Some(n) = row.runs_needed else { continue };
        let n = n as usize;
        given += 1;
        let rows = vec![sample(
            "attach",
            Metric::P99,
            side(&mut rng, n, 1e8, 0.11, 1000),
            side(&mut rng, n, 1.2e8, 0.11, 1000),
        )];
        if judge(&rows, &before_after(n), &opts).rows[0].verdict == Verdict::Regression {
            found += 1;
        }
    }
    assert!(given >= 50, "only {given} of 150 pilots were given a count");
    assert!(
        found * 100 >= given * 80,
        "found in {found} of the {given} comparisons that followed a pilot's count"
    );
}
