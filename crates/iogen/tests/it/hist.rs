use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use iogen::{
    EngineChoice, EngineOptions, Histograms, IoKind, Load, PhaseSpec, Stop, read_histograms,
    run_phase, write_histograms,
};
use proptest::prelude::*;

use crate::{opts, spec, target};

proptest! {
    #[test]
    fn merge_equals_recording_everything(a in prop::collection::vec((0u8..4, 1u64..10_000_000_000), 0..200),
                                         b in prop::collection::vec((0u8..4, 1u64..10_000_000_000), 0..200)) {
        let kind = |k: u8| [IoKind::Read, IoKind::Write, IoKind::Trim, IoKind::Flush][k as usize];
        let (mut ha, mut hb, mut all) = (Histograms::new(), Histograms::new(), Histograms::new());
        for &(k, v) in &a { ha.record(kind(k), v, v / 2, v / 3); all.record(kind(k), v, v / 2, v / 3); }
        for &(k, v) in &b { hb.record(kind(k), v, v / 3, v / 4); all.record(kind(k), v, v / 3, v / 4); }
        ha.merge(&hb).unwrap();
        prop_assert_eq!(&ha, &all);
        // And through a file, as between pods.
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("h.hlog");
        write_histograms(&f, &ha).unwrap();
        prop_assert_eq!(read_histograms(&f).unwrap(), all);
    }
}

#[test]
fn interval_log_parses_back() {
    let (d, p) = target();
    let log = d.path().join("iv.hlog");
    let o = EngineOptions {
        interval_log: Some(log.clone()),
        interval: std::time::Duration::from_millis(100),
        ..opts(EngineChoice::Auto)
    };
    let s = PhaseSpec {
        read_pct: 50,
        duration: Some(std::time::Duration::from_millis(350)),
        load: Load::Depth(2),
        jobs: 2,
        ..spec()
    };
    let r = run_phase(&s, &p, &o, &Stop::new()).expect("run");
    let bytes = std::fs::read(&log).expect("log");
    let mut intervals = 0;
    let mut reads = 0;
    for e in IntervalLogIterator::new(&bytes) {
        if let LogEntry::Interval(iv) = e.expect("valid log entry") {
            intervals += 1;
            if iv.tag().map(|t| t.as_str()) == Some("read.response") {
                assert!(!iv.encoded_histogram().is_empty());
                reads += 1;
            }
        }
    }
    assert!(
        intervals >= 4 * 6,
        "≥ 4 intervals × 2 kinds × 3 metrics, got {intervals}"
    );
    assert!(reads >= 4);
    // Summing the intervals gives exactly the run's histograms.
    let back = read_histograms(&log).expect("read back");
    assert_eq!(back, r.histograms);
}
