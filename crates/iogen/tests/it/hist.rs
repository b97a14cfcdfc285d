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
    let before = std::time::SystemTime::now();
    let r = run_phase(&s, &p, &o, &Stop::new()).expect("run");
    let after = std::time::SystemTime::now();
    let bytes = std::fs::read(&log).expect("log");
    let mut intervals = 0;
    let mut reads = 0;
    let mut start_time = None;
    let mut last_end = std::time::Duration::ZERO;
    for e in IntervalLogIterator::new(&bytes) {
        if let LogEntry::StartTime(t) = e.as_ref().expect("valid log entry") {
            start_time = Some(std::time::UNIX_EPOCH + *t);
        }
        if let LogEntry::Interval(iv) = e.expect("valid log entry") {
            last_end = last_end.max(iv.start_timestamp() + iv.duration());
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
    // The StartTime is the jobs' base on the wall clock: inside the call, and the intervals
    // placed from it (the last, partial one with its true length) end no later than the call
    // returned. 2 ms: the format prints StartTime, starts and lengths to the millisecond.
    let ms = std::time::Duration::from_millis(2);
    let start = start_time.expect("a #[StartTime] line");
    assert!(
        start + ms >= before && start <= after,
        "{start:?} within the call"
    );
    assert!(
        start + last_end <= after + ms,
        "intervals end by the time the call returned: {:?} after",
        (start + last_end).duration_since(after).unwrap_or_default()
    );
    // Summing the intervals gives exactly the run's histograms.
    let back = read_histograms(&log).expect("read back");
    assert_eq!(back, r.histograms);
}

/// The HdrHistogram jar `scripts/install-java-hdr.sh` downloads, when it and `java` exist.
fn java_hdr() -> Option<std::path::PathBuf> {
    let jar = std::env::var_os("CNSREPLAY_HDR_JAR").map_or_else(
        || {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/cnsreplay/java/HdrHistogram-2.2.2.jar")
        },
        std::path::PathBuf::from,
    );
    let java = std::process::Command::new("java").arg("-version").output();
    if jar.is_file() && java.is_ok_and(|o| o.status.success()) {
        return Some(jar);
    }
    testkit::skip::missing(
        "JAVA",
        &format!(
            "no java + HdrHistogram jar {} (scripts/install-java-hdr.sh)",
            jar.display()
        ),
    );
    None
}

/// `#[Mean = …, …]` and `#[Max = …, Total count = …]` of a HistogramLogProcessor `.hgrm`.
fn hgrm_stats(text: &str) -> (f64, f64, u64) {
    let field = |name: &str| -> String {
        let at = text
            .find(name)
            .unwrap_or_else(|| panic!("{name} in {text}"));
        let rest = &text[at + name.len()..];
        let rest = rest.trim_start_matches([' ', '=']);
        rest.split([',', ']'])
            .next()
            .expect("value")
            .trim()
            .to_owned()
    };
    (
        field("Mean").parse().expect("mean"),
        field("Max").parse().expect("max"),
        field("Total count").parse().expect("count"),
    )
}

/// Java's own reader, the one the HdrHistogram log format is defined by, reads iogen's
/// interval log and sees the same histograms iogen reports: count, mean and max per tag.
#[test]
fn java_histogram_log_processor_reads_the_interval_log() {
    let Some(jar) = java_hdr() else { return };
    let (d, p) = target();
    let log = d.path().join("iv.hlog");
    let o = EngineOptions {
        interval_log: Some(log.clone()),
        interval: std::time::Duration::from_millis(100),
        ..opts(EngineChoice::Auto)
    };
    let s = PhaseSpec {
        read_pct: 70,
        duration: Some(std::time::Duration::from_millis(450)),
        load: Load::Depth(4),
        ..spec()
    };
    let r = run_phase(&s, &p, &o, &Stop::new()).expect("run");
    let mut checked = 0;
    for (kind, h) in r.histograms.iter() {
        for (metric, hist) in [("response", &h.response), ("service", &h.service)] {
            let name = match kind {
                IoKind::Read => "read",
                IoKind::Write => "write",
                IoKind::Trim => "trim",
                IoKind::Flush => "flush",
            };
            let tag = format!("{name}.{metric}");
            let out = d.path().join(&tag);
            let st = std::process::Command::new("java")
                .arg("-cp")
                .arg(&jar)
                .arg("org.HdrHistogram.HistogramLogProcessor")
                .arg("-i")
                .arg(&log)
                .args(["-tag", &tag, "-outputValueUnitRatio", "1000", "-o"])
                .arg(&out)
                .output()
                .expect("run java");
            assert!(st.status.success(), "{st:?}");
            let text = fs_err::read_to_string(format!("{}.hgrm", out.display())).expect("hgrm");
            let (mean, max, count) = hgrm_stats(&text);
            assert_eq!(count, hist.len(), "{tag} count");
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-3 * b.max(1.0);
            assert!(
                close(mean, hist.mean() / 1000.0),
                "{tag} mean {mean} vs {}",
                hist.mean() / 1000.0
            );
            assert!(
                close(max, hist.max() as f64 / 1000.0),
                "{tag} max {max} vs {}",
                hist.max()
            );
            checked += 1;
        }
    }
    assert!(checked >= 4, "read and write, response and service");
}
