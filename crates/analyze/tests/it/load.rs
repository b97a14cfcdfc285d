//! Scanning: parallel blocks equal a sequential read, torn last lines, located errors.

use analyze::load::Run;
use analyze::summary::RunStats;
use proptest::prelude::*;
use trace_format::OpType;

use crate::{rec, write_run, write_trace};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    /// The parallel scan sees every record exactly once, whatever the sizes.
    #[test]
    fn parallel_scan_equals_sequential(services in proptest::collection::vec(1u64..10_000_000, 0..3000)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let trace = write_trace(dir.path(), "t.jsonl", None, &[(0, r#""marker":{"name":"m"}"#.into())]);
        let recs: Vec<_> = services
            .iter()
            .enumerate()
            .map(|(i, &s)| rec(i as u64 + 1, OpType::ALL[i % 14], i as u64 * 1000, s))
            .collect();
        let run = Run::open(&write_run(&dir.path().join("run"), &trace, 1.0, &recs)).expect("open");
        let stats = RunStats::of(&run).expect("scan");
        prop_assert_eq!(stats.total().count, services.len() as u64);
        let mut n = 0u64;
        let mut sum = 0u64;
        run.for_each(|r| { n += 1; sum += r.service; Ok(()) }).expect("for_each");
        prop_assert_eq!(n, services.len() as u64);
        prop_assert_eq!(sum, services.iter().sum::<u64>());
        let max = stats.ops.values().filter_map(|a| a.service.as_ref()).map(|h| h.max()).max().unwrap_or(0);
        let want = services.iter().copied().max().unwrap_or(0);
        // HdrHistogram keeps 3 significant digits.
        prop_assert!(max.abs_diff(want) <= want / 500 + 1, "{max} vs {want}");
    }
}

#[test]
fn torn_last_line_is_ignored_and_bad_lines_are_located() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = write_trace(
        dir.path(),
        "t.jsonl",
        None,
        &[(0, r#""marker":{"name":"m"}"#.into())],
    );
    let recs: Vec<_> = (1..=5).map(|i| rec(i, OpType::Attach, i * 10, 5)).collect();
    let path = write_run(&dir.path().join("run"), &trace, 1.0, &recs);
    let events = path.join("events.jsonl");
    let mut text = fs_err::read_to_string(&events).expect("read");
    text.push_str(r#"{"id":6,"op":"att"#);
    fs_err::write(&events, &text).expect("write");
    let run = Run::open(&path).expect("open");
    assert_eq!(RunStats::of(&run).expect("scan").total().count, 5);

    let lines: Vec<&str> = text.lines().collect();
    let broken = format!(
        "{}\n{}\n{{\"id\":3,\"op\":\"nope\"}}\n{}\n",
        lines[0], lines[1], lines[2]
    );
    fs_err::write(&events, broken).expect("write");
    let err = RunStats::of(&run).expect_err("bad op").to_string();
    assert!(
        err.contains("events.jsonl:3:") && err.contains("nope"),
        "{err}"
    );
}

#[test]
fn not_a_run_directory_names_the_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = Run::open(&dir.path().join("nothing"))
        .expect_err("no manifest")
        .to_string();
    assert!(
        err.contains("nothing") && err.contains("not a readable run directory"),
        "{err}"
    );
}
