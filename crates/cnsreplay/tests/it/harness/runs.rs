//! Traces and runs the tests make and read: hand-written traces, a local run, its records,
//! a report's figure, the verdict limits a loaded test machine cannot fail.

use std::path::{Path, PathBuf};

use super::cli::{cnsreplay, cnsreplay_within, ok, s};

/// Verdict limits a run on a loaded test machine cannot fail (four parallel builds on two
/// cores gave start lateness p99 of 20–60 ms here): runs that tests analyze are then `valid`,
/// which analysis requires. The verdict itself is tested with its own limits.
/// Thresholds no run fails by the machine's load: lateness limits of 10 s, no rate or
/// workers check, and a tool bound of up to 100 × its figure still `valid`.
pub(crate) const LENIENT: &str =
    "--validity=start.p99=10s,start.p99.9=10s,rate=100%,workers=100%,tool=10000%";

pub(crate) const BAD: &str = "crates/cnsreplay/tests/fixtures/three-problems.jsonl";

pub(crate) const QUICK: &str = "traces/quickstart.yaml";

/// The records of a run's `events.jsonl`.
pub(crate) fn run_events(run: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(run.join("events.jsonl"))
        .unwrap_or_else(|e| panic!("{}/events.jsonl: {e}", run.display()))
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// `n` attaches, one every `gap_ns` (evenly: the offered rate is exact at every speed).
pub(crate) fn attach_trace(dir: &Path, n: u64, gap_ns: u64) -> PathBuf {
    let mut text = testkit::trace::jsonl_header(r#""provenance":{"generator":"test"}"#);
    text.push('\n');
    for i in 0..n {
        text.push_str(&format!(
            "{{\"at\":{},\"id\":{},\"attach\":{{\"workload\":\"w{i}\",\"volumes\":[]}}}}\n",
            i * gap_ns,
            i + 1
        ));
    }
    let path = dir.join("attach.jsonl");
    fs_err::write(&path, text).expect("write trace");
    path
}

/// `cnsreplay run TRACE --provider local` (lenient verdict limits) into `run`, succeeding;
/// its records.
pub(crate) fn run_local(trace: &str, run: &Path) -> Vec<serde_json::Value> {
    ok(&cnsreplay_within(
        &["run", trace, "--provider", "local", LENIENT, "-o", s(run)],
        300,
    ));
    run_events(run)
}

/// `analyze report RUN --allow-invalid` into `dir`; the HTML of figure `id` (`cbt-1`).
pub(crate) fn report_figure(run: &Path, dir: &Path, id: &str) -> String {
    let html = dir.join("report.html");
    ok(&cnsreplay(&[
        "analyze",
        "report",
        s(run),
        "--allow-invalid",
        "-o",
        s(&html),
        "--svg",
        s(&dir.join("svg")),
    ]));
    let page = std::fs::read_to_string(&html).expect("report");
    page.split(&format!("<figure id=\"fig-{id}\""))
        .nth(1)
        .and_then(|f| f.split("</figure>").next())
        .unwrap_or_else(|| panic!("no figure {id} in the report"))
        .to_owned()
}

/// A block trace's lines (JSONL): the header declaring `volumes` (JSON objects, comma
/// separated), then `n` bare `io` requests 0.5 ms apart alternating over `d0` and `d1`: reads,
/// writes, trims and flushes of 8 KiB at scattered 4 KiB-aligned offsets, except request 11,
/// which is not sector-aligned (3000 bytes at 1000).
pub(crate) fn block_trace(volumes: &str, n: u64) -> Vec<String> {
    let mut lines = vec![testkit::trace::jsonl_header(&format!(
        r#""volumes":[{volumes}]"#
    ))];
    let kinds = [
        "read", "write", "write", "read", "trim", "read", "write", "flush",
    ];
    for i in 0..n {
        let (v, kind) = (i % 2, kinds[(i % 8) as usize]);
        let body = if kind == "flush" {
            format!(r#"{{"volume":"d{v}","kind":"flush"}}"#)
        } else if i == 11 {
            format!(r#"{{"volume":"d{v}","kind":"{kind}","offset":1000,"len":3000}}"#)
        } else {
            let off = (i * 7919 % 16_000) * 4096;
            format!(r#"{{"volume":"d{v}","kind":"{kind}","offset":{off},"len":8192}}"#)
        };
        lines.push(format!(
            r#"{{"at":{},"id":{},"io":{body}}}"#,
            i * 500_000,
            i + 1
        ));
    }
    lines
}

/// Fails when `CNSREPLAY_REQUIRE_SAMPLES=1` (CI: `.ci/run`) and a real trace sample a test
/// reads (`../shared/trace-samples`, beside the checkout) is missing.
pub(crate) fn require_samples(missing: &Path) {
    assert!(
        !testkit::skip::required("SAMPLES"),
        "CNSREPLAY_REQUIRE_SAMPLES=1 but {} is missing (the trace samples beside the checkout)",
        missing.display()
    );
}
