//! `history` on fabricated runs: the values table written and read back (CSV and Parquet),
//! bad tables named by file, row and column, builds grouped and ordered by a label, a shift
//! found at its build, the gate's JUnit and Markdown from the same report.

use std::collections::BTreeMap;

use analyze::compare::{Metric, RunValue};
use analyze::gate::{self, Outcome};
use analyze::history::{self, HistoryOptions, Latest, Order, RunPoint, table};

fn point(build: &str, run: usize, p50_ms: f64, sha: &str) -> RunPoint {
    let mut values = BTreeMap::new();
    for m in Metric::ALL {
        let value = match m {
            Metric::ErrorRate => 0.001,
            Metric::P50 => p50_ms * 1e6,
            _ => p50_ms * 3e6,
        };
        values.insert(
            ("attach".to_owned(), m),
            RunValue {
                value,
                events: 100_000,
            },
        );
    }
    RunPoint {
        source: format!("runs/{build}-{run}"),
        run_id: format!("{build}-{run}"),
        started: format!("2026-12-01T10:{:02}:{:02}Z", build.len() * 10 + run, run),
        trace_sha256: sha.to_owned(),
        labels: [
            ("build".to_owned(), build.to_owned()),
            ("team".to_owned(), "a|b".to_owned()),
        ]
        .into(),
        tool: [(("attach".to_owned(), Metric::P99), 250_000 + run as u64)].into(),
        imprecise: Default::default(),
        values,
    }
}

/// Builds `v1` … `vN` (natural order differs from text order past v9), 3 runs each, p50
/// 100 ms ± a little, ×1.3 from build `shift` on.
fn series(n: usize, shift: Option<usize>) -> Vec<RunPoint> {
    let mut out = Vec::new();
    for b in 1..=n {
        for r in 0..3 {
            let wobble = 1.0 + 0.01 * (((b * 7 + r * 3) % 5) as f64 - 2.0);
            let f = if shift.is_some_and(|s| b >= s) {
                1.3
            } else {
                1.0
            };
            out.push(point(&format!("v{b}"), r, 100.0 * wobble * f, "t"));
        }
    }
    out
}

fn opts() -> HistoryOptions {
    HistoryOptions {
        by: Some("build".to_owned()),
        order: Order::Natural,
        ..HistoryOptions::default()
    }
}

#[test]
fn a_shift_is_named_at_its_build_in_natural_order_and_the_gate_fails_it() {
    // 16 builds, the shift at v10: 7 builds after it, room for the permutation test (its
    // smallest p is 2 / C(n, k) for k builds of n after the change).
    let r = history::judge(&series(16, Some(10)), &opts()).expect("history");
    let builds: Vec<&str> = r.builds.iter().map(|b| b.build.as_str()).collect();
    assert_eq!(builds[8..12], ["v9", "v10", "v11", "v12"]);
    let p50 = r
        .series
        .iter()
        .find(|s| s.metric == Metric::P50)
        .expect("p50");
    assert_eq!(p50.change_points.len(), 1, "{p50:#?}");
    let c = &p50.change_points[0];
    assert_eq!((c.build.as_str(), c.previous.as_str()), ("v10", "v9"));
    assert!((0.25..0.35).contains(&c.change), "{c:?}");
    assert!(c.ci_low > 0.2 && c.ci_high < 0.4, "{c:?}");
    assert!(c.still_past);
    assert_eq!(p50.latest, Latest::Regression);
    assert_eq!(r.exit_code(), 1);
    // The error rate did not move: no change point there.
    let err = r
        .series
        .iter()
        .find(|s| s.metric == Metric::ErrorRate)
        .expect("error rate");
    assert!(err.change_points.is_empty() && err.latest == Latest::Steady);

    let g = gate::history(&r);
    let failed: Vec<&str> = g
        .cases
        .iter()
        .filter(|c| c.outcome == Outcome::Failure)
        .map(|c| c.name.as_str())
        .collect();
    assert!(
        failed.contains(&"p50") && !failed.contains(&"error_rate"),
        "{g:#?}"
    );
    let xml = g.junit();
    assert!(xml.contains(&format!(
        "tests=\"{}\" failures=\"{}\"",
        g.cases.len(),
        failed.len()
    )));
    let md = g.markdown();
    let first_row = md
        .lines()
        .find(|l| l.starts_with("| ❌"))
        .expect("a failure row");
    assert!(
        first_row.contains("since v10") || first_row.contains("v10"),
        "{md}"
    );
    // Failures come before passes.
    let pos = |s: &str| md.find(s).expect(s);
    assert!(pos("| ❌") < pos("| ✅"), "{md}");
}

#[test]
fn stationary_builds_and_too_few_builds() {
    let r = history::judge(&series(16, None), &opts()).expect("history");
    assert_eq!(r.change_points, 0, "{r:#?}");
    assert_eq!(r.exit_code(), 0);
    let r = history::judge(&series(3, Some(2)), &opts()).expect("history");
    assert!(r.series.iter().all(|s| s.latest == Latest::Untested));
    assert_eq!(r.exit_code(), 3);
    assert!(
        r.notes.iter().any(|n| n.contains("too few")),
        "{:?}",
        r.notes
    );
    let g = gate::history(&r);
    assert!(g.cases.iter().all(|c| c.outcome == Outcome::Skipped));
}

#[test]
fn runs_without_the_label_or_of_another_trace_are_refused_by_name() {
    let mut pts = series(4, None);
    pts[5].labels.remove("build");
    let e = history::judge(&pts, &opts())
        .expect_err("no label")
        .to_string();
    assert!(
        e.contains("runs/v2-2") && e.contains("no label \"build\""),
        "{e}"
    );
    let mut pts = series(4, None);
    pts[7].trace_sha256 = "other".into();
    let e = history::judge(&pts, &opts())
        .expect_err("traces")
        .to_string();
    assert!(
        e.contains("different traces") && e.contains("--by-op-type"),
        "{e}"
    );
    let by_op = HistoryOptions {
        by_op_type: true,
        ..opts()
    };
    history::judge(&pts, &by_op).expect("by op type");
}

#[test]
fn the_values_table_round_trips_through_csv_and_parquet() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut pts = series(3, None);
    pts[1].imprecise.insert("attach".to_owned());
    let csv = dir.path().join("v.csv");
    let n = table::write_csv(&pts, &mut fs_err::File::create(&csv).expect("create")).expect("csv");
    assert_eq!(n as usize, pts.len() * Metric::ALL.len());
    let pq = dir.path().join("v.parquet");
    table::write_parquet(&pts, fs_err::File::create(&pq).expect("create")).expect("parquet");
    for path in [&csv, &pq] {
        let back = table::read(path).expect("read");
        assert_eq!(back.len(), pts.len());
        for p in &pts {
            let q = back
                .iter()
                .find(|q| q.run_id == p.run_id)
                .expect("run back");
            assert_eq!(
                (&q.labels, &q.started, &q.trace_sha256),
                (&p.labels, &p.started, &p.trace_sha256)
            );
            assert!(q.source.contains(&p.source), "{}", q.source);
            assert_eq!((&q.tool, &q.imprecise), (&p.tool, &p.imprecise));
            for (k, v) in &p.values {
                let w = q.values[k];
                assert_eq!(w.events, v.events);
                assert!(
                    (w.value - v.value).abs() <= 1e-9 * v.value,
                    "{k:?}: {w:?} vs {v:?}"
                );
            }
        }
    }
}

/// An exported run's imprecise rows travel with their bounds; a history reads them and
/// leaves them out (that run's build is missing from the series), the rest stays.
#[test]
fn a_history_leaves_out_the_rows_a_run_calls_imprecise() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut pts = series(3, None);
    pts[0].imprecise.insert("attach".to_owned());
    pts[0].values.insert(
        ("io read".to_owned(), Metric::P50),
        RunValue {
            value: 1e5,
            events: 1000,
        },
    );
    let csv = dir.path().join("v.csv");
    table::write_csv(&pts, &mut fs_err::File::create(&csv).expect("create")).expect("csv");
    let text = fs_err::read_to_string(&csv).expect("read");
    assert!(
        text.lines()
            .next()
            .is_some_and(|h| h.contains(",tool,imprecise")),
        "{text}"
    );
    let loaded = history::load(&[csv], false).expect("load");
    let first = loaded
        .iter()
        .find(|p| p.run_id == pts[0].run_id)
        .expect("the first run");
    assert!(
        first.values.keys().all(|(op, _)| op == "io read") && first.tool.is_empty(),
        "{first:?}"
    );
    let second = loaded
        .iter()
        .find(|p| p.run_id == pts[1].run_id)
        .expect("the second run");
    assert_eq!(second.values.len(), Metric::ALL.len());
}

#[test]
fn a_bad_values_table_is_named_by_file_row_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let head = "run,run_id,started,trace_sha256,op,metric,value,events,label.build\n";
    let good = "r1,id1,2026-12-01T10:00:00Z,t,attach,p50,1000,20,7\n";
    let cases = [
        (
            format!("{head}{good}r1,id1,2026-12-01T10:00:00Z,t,attach,p42,1000,20,7\n"),
            "row 2, column metric",
        ),
        (
            format!("{head}{good}r1,id1,2026-12-01T10:00:00Z,t,attach,p99,-5,20,7\n"),
            "row 2, column value",
        ),
        (
            format!("{head}{good}r1,id1,2026-12-01T10:00:00Z,t,attach,p99,1000,many,7\n"),
            "row 2, column events",
        ),
        (
            format!("{head}r1,,2026-12-01T10:00:00Z,t,attach,p50,1000,20,7\n"),
            "row 1, column run_id: empty",
        ),
        (
            format!("{head}{good}r1,id1,2026-12-01T10:00:00Z,t,attach,p99,1000,20,8\n"),
            "row 2: run id1 has another start, trace or labels",
        ),
        (
            format!("{head}{good}{good}"),
            "row 2: run id1 has attach p50 twice",
        ),
        ("run,op\nx,y\n".to_owned(), "no column \"run_id\""),
        (
            "run,run_id,started,trace_sha256,op,metric,value,events,tool,imprecise\n\
             r1,id1,2026-12-01T10:00:00Z,t,attach,p50,1000,20,1.5,false\n"
                .to_owned(),
            "row 1, column tool",
        ),
        (
            "run,run_id,started,trace_sha256,op,metric,value,events,tool,imprecise\n\
             r1,id1,2026-12-01T10:00:00Z,t,attach,p50,1000,20,,maybe\n"
                .to_owned(),
            "row 1, column imprecise",
        ),
        (
            format!("{head}r1,id1,2026-12-01T10:00:00Z,t,attach,p50,1000,20,bad\u{7}\n"),
            "row 1, column label.build",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let p = dir.path().join(format!("bad{i}.csv"));
        fs_err::write(&p, text).expect("write");
        let e = table::read(&p).expect_err(want).to_string();
        assert!(
            e.contains(&p.display().to_string()) && e.contains(want),
            "{e}"
        );
    }
    let other = dir.path().join("values.txt");
    fs_err::write(&other, "x").expect("write");
    let e = table::read(&other).expect_err("extension").to_string();
    assert!(
        e.contains("values.txt") && e.contains(".csv or .parquet"),
        "{e}"
    );
}

#[test]
fn junit_and_markdown_escape_what_their_formats_would_misread() {
    let r = history::judge(&series(16, Some(10)), &opts()).expect("history");
    let mut g = gate::history(&r);
    g.cases[0].outcome = Outcome::Failure;
    g.cases[0].message = "a < b & \"c\" | d\u{1}".into();
    let xml = g.junit();
    assert!(xml.contains("a &lt; b &amp; &quot;c&quot; | d"), "{xml}");
    assert!(!xml.contains('\u{1}'));
    let md = g.markdown();
    assert!(md.contains("a \\< b & \"c\" \\| d"), "{md}");
    // Every table row has the header's cell count.
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
    let cells = |l: &str| l.replace("\\|", "").matches('|').count();
    assert!(rows.iter().all(|l| cells(l) == cells(rows[0])), "{md}");
}
