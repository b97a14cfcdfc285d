//! The bootstrap comparison on fabricated runs with known distributions.

use analyze::compare::{CompareOptions, Metric, Verdict, compare};
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
) -> std::path::PathBuf {
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

fn trace(dir: &std::path::Path) -> std::path::PathBuf {
    write_trace(
        dir,
        "t.jsonl",
        None,
        &[(0, r#""attach":{"workload":"w","volumes":[]}"#.into())],
    )
}

#[test]
fn twenty_percent_slower_attach_is_a_regression() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = trace(dir.path());
    let base = attach_run(dir.path(), "base", &t, 1, 1.0, 0);
    let new = attach_run(dir.path(), "new", &t, 1, 1.2, 0);
    let r = compare(&base, &new, &CompareOptions::default()).expect("compare");
    for m in [Metric::P50, Metric::P99, Metric::Mean] {
        let row = r.rows.iter().find(|x| x.metric == m).expect("row");
        assert!((row.change - 0.2).abs() < 0.01, "{row:?}");
        assert!(
            row.ci_low <= row.change && row.change <= row.ci_high,
            "{row:?}"
        );
        // The p99 of 400 values is too noisy for its CI to exclude zero; p50 and mean are not.
        let want = if m == Metric::P99 {
            Verdict::NoChange
        } else {
            Verdict::Regression
        };
        assert_eq!(row.verdict, want, "{row:?}");
    }
    assert_eq!(r.regressions, 2);
    // The same comparison reversed is an improvement.
    let r = compare(&new, &base, &CompareOptions::default()).expect("compare");
    assert_eq!((r.regressions, r.improvements), (0, 2));
}

#[test]
fn same_distribution_other_seed_is_no_change_and_reproducible() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = trace(dir.path());
    let base = attach_run(dir.path(), "base", &t, 1, 1.0, 4);
    let new = attach_run(dir.path(), "new", &t, 2, 1.0, 5);
    let r = compare(&base, &new, &CompareOptions::default()).expect("compare");
    assert!(
        r.rows.iter().all(|x| x.verdict == Verdict::NoChange),
        "{:#?}",
        r.rows
    );
    for row in &r.rows {
        assert!(
            row.ci_low <= row.change && row.change <= row.ci_high,
            "{row:?}"
        );
    }
    assert_eq!(
        r,
        compare(&base, &new, &CompareOptions::default()).expect("again")
    );
}

#[test]
fn error_rate_regression_and_different_traces_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = trace(dir.path());
    let base = attach_run(dir.path(), "base", &t, 1, 1.0, 0);
    let new = attach_run(dir.path(), "new", &t, 1, 1.0, 40);
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
    let elsewhere = attach_run(dir.path(), "other", &other, 1, 1.0, 0);
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

#[test]
fn thresholds_parse_and_reject() {
    let mut t = analyze::Thresholds::default();
    t.set("p99=20%").expect("p99");
    t.set("error_rate=0.02").expect("errors");
    assert_eq!((t.p99, t.error_rate), (0.2, 0.02));
    assert!(t.set("p75=1%").is_err());
    assert!(t.set("p99").is_err());
    assert!(t.set("p99=-1").is_err());
}
