//! What `analyze report` leads with, looked at in headless Chromium as a user would: an
//! Experiment-2-shaped `local` run (database-like `io_phase` I/O with a snapshot in flight)
//! shows its I/O percentiles per kind with and without the snapshot and its IOPS, the
//! all-kinds figure being the run's own (`summary.json` `io`, what `run` prints); three runs
//! differ in colour and dash; the tables fit in 1 400 px. A block replay (bare I/O streams on
//! `local`, a trace that carries `observed`) shows recorded vs replayed latency and rate by
//! second in `summary` and `report`, and `export` and `qos`, which need per-request
//! records, refuse it by name (exit 2, nothing written).
//!
//! Set `CNSREPLAY_SCREENSHOTS=DIR` to keep the screenshots for a look.

use std::path::{Path, PathBuf};

use super::analyze::{coloured, decode_png, inked, local_phase_run, screenshot};
use super::{LENIENT, cnsreplay, ok, s, stdout};

/// The value of attribute `name` in `tag` (the text of one start tag).
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let pat = format!("{name}=\"");
    let i = tag.find(&pat)? + pat.len();
    tag[i..].split('"').next()
}

/// Every start tag of `page` that contains `marker` (e.g. `class=headline `).
fn tags<'a>(page: &'a str, marker: &str) -> Vec<&'a str> {
    page.match_indices(marker)
        .filter_map(|(i, _)| {
            let start = page[..=i].rfind('<')?;
            let end = i + page[i..].find('>')?;
            Some(&page[start..end])
        })
        .collect()
}

fn num(tag: &str, name: &str) -> f64 {
    attr(tag, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no numeric {name} in {tag}"))
}

/// Copies a screenshot to `$CNSREPLAY_SCREENSHOTS` when set.
fn keep(png: &Path) {
    if let Some(dir) = std::env::var_os("CNSREPLAY_SCREENSHOTS") {
        let dir = PathBuf::from(dir);
        fs_err::create_dir_all(&dir).expect("screenshot dir");
        fs_err::copy(png, dir.join(png.file_name().expect("name"))).expect("keep screenshot");
    }
}

/// Screenshots the page 1 700 px wide and checks that nothing is drawn right of 1 400 px
/// (the page's text wraps at 1 400 px; a table that does not fit would stick out).
fn screenshot_fits(html: &Path, png: &Path, height: u32) -> (u32, u32, Vec<[u8; 3]>) {
    let (w, h, px) = screenshot(html, png, &format!("1700,{height}"));
    keep(png);
    assert_eq!((w, h), (1700, height));
    let beyond = inked(&px, w, (1400, 1700), (0, h));
    assert_eq!(
        beyond,
        0,
        "{}: something is drawn right of 1400 px",
        png.display()
    );
    (w, h, px)
}

#[test]
fn the_report_leads_with_io_with_and_without_a_snapshot_per_kind_and_iops() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = local_phase_run(dir.path());
    let summary: serde_json::Value =
        serde_json::from_slice(&fs_err::read(run.join("summary.json")).expect("summary"))
            .expect("summary json");
    let (without, with) = (
        &summary["io"]["without_snapshot"],
        &summary["io"]["with_snapshot"],
    );
    assert!(
        without["count"].as_u64() > Some(0) && with["count"].as_u64() > Some(0),
        "the snapshot ran while db's unit did, so I/O falls on both sides: {:#}",
        summary["io"]
    );
    let html = dir.path().join("exp2-report.html");
    let svgs = dir.path().join("svg");
    ok(&cnsreplay(&[
        "analyze",
        "report",
        s(&run),
        s(&run),
        s(&run),
        "-o",
        s(&html),
        "--svg",
        s(&svgs),
    ]));
    let page = fs_err::read_to_string(&html).expect("html");

    // The results come first, before any figure.
    let results = page.find("<h2>Results</h2>").expect("a Results section");
    let first_figure = page.find("data-figure=").expect("figures");
    let table = page
        .find("class=headline-table")
        .expect("the headline table");
    assert!(
        results < table && table < first_figure,
        "results do not lead"
    );

    // The sentence `run` prints, with the run's own numbers, once per run.
    let heads = tags(&page, "class=headline ");
    assert_eq!(heads.len(), 3, "{heads:?}");
    for (i, h) in heads.iter().enumerate() {
        assert_eq!(attr(h, "data-run"), Some((i + 1).to_string().as_str()));
        assert_eq!(
            num(h, "data-p999-without"),
            without["p999"].as_f64().unwrap()
        );
        assert_eq!(num(h, "data-p999-with"), with["p999"].as_f64().unwrap());
        assert_eq!(
            num(h, "data-ios-without"),
            without["count"].as_f64().unwrap()
        );
        assert_eq!(num(h, "data-ios-with"), with["count"].as_f64().unwrap());
    }
    assert!(page.contains("without a snapshot in flight"));

    // Per kind: read and write rows whose I/Os add up to the all-kinds row, which has the
    // run's counts on each side; IOPS near what the trace asked for (300 + 200 for 3 s).
    let rows: Vec<&str> = tags(&page, "data-kind=")
        .into_iter()
        .filter(|t| attr(t, "data-run") == Some("1"))
        .collect();
    let kinds: Vec<&str> = rows.iter().filter_map(|t| attr(t, "data-kind")).collect();
    assert_eq!(kinds, ["read", "write", "all"], "{rows:?}");
    let cells = |kind: &str| -> Vec<String> {
        let at = page
            .find(&format!("data-run=\"1\" data-kind=\"{kind}\""))
            .expect("row");
        let row = &page[at..at + page[at..].find("</tr>").expect("row end")];
        row.split("<td>")
            .skip(1)
            .map(|c| c.split("</td>").next().unwrap_or("").to_owned())
            .collect()
    };
    // Cells: run, kind, I/Os, IOPS, then I/Os p50 p99 p99.9 max without, the same with.
    let count = |kind: &str, col: usize| -> u64 { cells(kind)[col].parse().expect("a count") };
    for col in [2, 4, 9] {
        assert_eq!(
            count("read", col) + count("write", col),
            count("all", col),
            "column {col}"
        );
    }
    assert_eq!(count("all", 4), without["count"].as_u64().unwrap());
    assert_eq!(count("all", 9), with["count"].as_u64().unwrap());
    let all = rows
        .iter()
        .find(|t| attr(t, "data-kind") == Some("all"))
        .expect("all");
    let iops = num(all, "data-iops");
    assert!((250.0..=600.0).contains(&iops), "IOPS {iops}");
    // No empty columns: the trace carries no observed latency, so no observed column.
    assert!(
        !page.contains("observed (recorded)"),
        "an empty observed column"
    );

    // Runs differ by colour AND dash: the CDF's lines of the three runs' snapshot.
    let cdf = fs_err::read_to_string(svgs.join("cdf.svg")).expect("cdf svg");
    let lines: Vec<(String, String)> = tags(&cdf, "<polyline")
        .iter()
        .map(|t| {
            (
                attr(t, "stroke").unwrap_or("").to_owned(),
                attr(t, "stroke-dasharray").unwrap_or("none").to_owned(),
            )
        })
        .collect();
    let per_run = lines.len() / 3;
    assert!(per_run >= 1, "{lines:?}");
    for a in 0..3 {
        for b in a + 1..3 {
            let (x, y) = (&lines[a * per_run], &lines[b * per_run]);
            assert!(
                x.0 != y.0 && x.1 != y.1,
                "runs {} and {} are told apart by colour and dash: {x:?} {y:?}",
                a + 1,
                b + 1
            );
        }
    }

    // As a user sees it: the headline table at the top, drawn figures, nothing past 1400 px.
    let png = dir.path().join("exp2-report.png");
    let (w, h, px) = screenshot_fits(&html, &png, 4200);
    // The table's text in the first screenful under the run list.
    assert!(
        inked(&px, w, (24, 900), (60, 420)) > 2000,
        "no results table at the top"
    );
    assert!(
        coloured(&px) > 20_000,
        "figures without data: {}",
        coloured(&px)
    );
    let _ = h;
}

/// A block trace in the shape an import gives (provenance with a source format, volumes in
/// the header, only `io` with `observed`): volume d0 observed 100 µs … 190 µs, d1 1 ms.
fn block_trace_with_observed(dir: &Path, n: u64) -> PathBuf {
    let mut lines = vec![
        r#"{"format":"cnsreplay-trace","version":1,"provenance":{"source_format":"test-block","generator":"test"},"volumes":[{"name":"d0","size":"64Mi"},{"name":"d1","size":"64Mi"}]}"#
            .to_owned(),
    ];
    for i in 0..n {
        let v = i % 2;
        let kind = if i % 4 == 1 { "write" } else { "read" };
        let observed = if v == 0 {
            100_000 + (i / 2 % 10) * 10_000
        } else {
            1_000_000
        };
        lines.push(format!(
            r#"{{"at":{},"id":{},"observed":{observed},"io":{{"volume":"d{v}","kind":"{kind}","offset":{},"len":8192}}}}"#,
            i * 1_000_000,
            i + 1,
            (i * 7919 % 16_000) * 4096
        ));
    }
    let path = dir.join("block.jsonl");
    fs_err::write(&path, lines.join("\n") + "\n").expect("trace");
    path
}

#[test]
fn a_block_replay_shows_recorded_vs_replayed_and_record_tools_refuse_it_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = 3000;
    let trace = block_trace_with_observed(dir.path(), n);
    let run = dir.path().join("block-run");
    let o = cnsreplay(&[
        "-q",
        "run",
        s(&trace),
        "--provider",
        "local",
        "-o",
        s(&run),
        LENIENT,
    ]);
    // A loaded machine may make the streams' lateness engine-bound; what is read is tested.
    assert!(run.join("summary.json").is_file(), "{o:?}");

    // summary: every request, the totals and the recorded-vs-replayed comparison by volume.
    let o = cnsreplay(&["analyze", "summary", "--json", s(&run)]);
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let r = &v["runs"][0];
    assert_eq!(r["events"], n, "{r:#}");
    assert_eq!(r["ops"]["io"]["count"], n, "{r:#}");
    assert!(
        r["ops"]["io"]["response"]["p50"].as_u64() > Some(0),
        "{r:#}"
    );
    assert!(r["intended_rate"].as_f64() > Some(900.0), "{r:#}");
    assert_eq!(r["ops"]["io"]["observed"]["count"], n, "{r:#}");
    let rec = &r["io_streams_observed"];
    assert_eq!(rec["d0"]["count"], n / 2, "{r:#}");
    assert_eq!(rec["d1"]["count"], n / 2, "{r:#}");
    // d0's observed: 100…190 µs evenly, so p50 ≈ 140-150 µs; d1's all 1 ms (3 digits).
    let p50 = rec["d0"]["p50"].as_u64().expect("p50");
    assert!((139_000..=151_000).contains(&p50), "{p50}");
    assert!(
        rec["d1"]["p50"]
            .as_u64()
            .is_some_and(|v| v.abs_diff(1_000_000) < 1_000)
    );
    let o = cnsreplay(&["analyze", "summary", s(&run)]);
    ok(&o);
    let text = stdout(&o);
    assert!(
        text.contains(&format!("run: {n} events")) || text.contains(&format!(": {n} events")),
        "{text}"
    );
    assert!(
        text.contains("recorded (trace observed)") && text.contains("replayed (response)"),
        "{text}"
    );

    // export and qos need per-request records: refused by name, nothing written.
    let csv = dir.path().join("out.csv");
    let o = cnsreplay(&["analyze", "export", s(&run), "--csv", s(&csv)]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("per-volume I/O streams") && err.contains(&format!("{n} io request")),
        "{err}"
    );
    assert!(!csv.exists() && !dir.path().join("out.csv.tmp").exists());
    let qos = dir.path().join("qos.yaml");
    fs_err::write(&qos, "window: 1s\ntenants:\n  db:\n    read.p99: 10ms\n").expect("qos");
    let o = cnsreplay(&[
        "analyze",
        "qos",
        "--allow-invalid",
        s(&run),
        "--slo-file",
        s(&qos),
    ]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("per-volume I/O streams"));

    // report: recorded vs replayed per volume (table and figure), rate by second per volume;
    // the figures that need records are not drawn, and say so.
    let html = dir.path().join("block-report.html");
    ok(&cnsreplay(&[
        "analyze",
        "report",
        "--allow-invalid",
        s(&run),
        "-o",
        s(&html),
    ]));
    let page = fs_err::read_to_string(&html).expect("html");
    let p = tags(&page, "class=streams ");
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(num(p[0], "data-requests"), n as f64);
    for vol in ["d0", "d1"] {
        assert!(page.contains(&format!("data-volume=\"{vol}\"")), "{vol}");
    }
    assert!(page.contains("recorded latency") && page.contains("replayed response"));
    let figures: Vec<(&str, f64)> = tags(&page, "data-figure=")
        .iter()
        .map(|t| (attr(t, "data-figure").unwrap_or(""), num(t, "data-points")))
        .collect();
    let names: Vec<&str> = figures.iter().map(|f| f.0).collect();
    assert_eq!(
        names,
        ["replayed-1", "stream-1-1", "stream-1-2"],
        "{figures:?}"
    );
    assert!(figures.iter().all(|f| f.1 > 0.0), "{figures:?}");
    assert!(page.contains("Not drawn: no control operations"));
    let png = dir.path().join("block-report.png");
    let (w, _, px) = screenshot_fits(&html, &png, 2000);
    // Thin lines only (four percentile lines, four rate lines): a blank page has none.
    assert!(
        coloured(&px) > 2500,
        "figures without data: {}",
        coloured(&px)
    );
    assert!(
        inked(&px, w, (24, 900), (60, 300)) > 1500,
        "no recorded-vs-replayed table"
    );
    let _ = decode_png;
}
