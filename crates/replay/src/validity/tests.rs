//! The verdict's unit tests: the dispatch-rate windows and each check's judgement.

use std::collections::BTreeMap;

use super::*;

fn window(n: u64, at: u64, delay: u64) -> WindowSums {
    WindowSums {
        n,
        intended: u128::from(n) * u128::from(at),
        delay: u128::from(n) * u128::from(delay),
    }
}

#[test]
fn a_constant_delay_is_no_shortfall_and_a_growing_one_is() {
    let o = ValidityOptions::default();
    let s = 1_000_000_000;
    let steady: BTreeMap<_, _> = (0..10)
        .map(|k| (k, window(1000, k * s + s / 2, 5_000_000)))
        .collect();
    let r = dispatch_rate(&steady, &o).expect("rate");
    assert!((r.intended - 1000.0).abs() < 1e-6, "{r:?}");
    assert!((r.achieved - 1000.0).abs() < 1e-6, "{r:?}");
    // Falling 100 ms further behind every second: 1 / 1.1 of the rate.
    let behind: BTreeMap<_, _> = (0..10)
        .map(|k| (k, window(1000, k * s + s / 2, k * 100_000_000)))
        .collect();
    let r = dispatch_rate(&behind, &o).expect("rate");
    assert!((r.achieved / r.intended - 1.0 / 1.1).abs() < 1e-9, "{r:?}");
    let w = r.worst_window.expect("window");
    assert!((w.achieved / w.intended - 1.0 / 1.1).abs() < 1e-9, "{w:?}");
}

#[test]
fn sparse_windows_are_not_judged() {
    let o = ValidityOptions::default();
    let sparse: BTreeMap<_, _> = (0..10).map(|k| (k, window(99, k * 1_000, 0))).collect();
    assert_eq!(dispatch_rate(&sparse, &o), None);
}

fn measured<'a>(start: &'a Percentiles, none: &'a Percentiles) -> Measured<'a> {
    Measured {
        state: CompletionState::Complete,
        reason: None,
        operations: start.count,
        operations_ok: start.count,
        start_lateness: start,
        waited: 0,
        resume_lateness: none,
        completion_lateness: none,
        io_lateness: None,
        medians: vec![("attach", 1_000_000_000)],
        reported: Vec::new(),
        rate: None,
        workers_busy: Some(0.1),
        throttling: &[],
        streams: &[],
        host_steal_ns: None,
    }
}

#[test]
fn limits_scale_with_the_reference_within_their_bounds() {
    let o = ValidityOptions::default();
    let at = |r: u64| o.limits(Some(("attach", r)));
    // 1 % of 2 ms; of 1 ms it would be 10 µs, below the 20 µs floor; of 10 s, above the
    // 10 ms ceiling.
    assert_eq!(
        (at(2_000_000).p99_ns, at(2_000_000).p999_ns),
        (20_000, 200_000)
    );
    assert_eq!(at(50_000_000).p99_ns, 500_000);
    assert_eq!(at(1_000_000).p99_ns, 20_000);
    assert_eq!(at(10_000_000_000).p99_ns, 10_000_000);
    assert!(
        at(50_000_000)
            .basis
            .contains("attach median service time 50.000 ms")
    );
    // A given reference (a capacity search's smallest SLO) wins over the measured one, but
    // loosens a limit only up to 10 % of the measured latency; a fixed limit wins over both.
    let mut o = ValidityOptions::default();
    o.set("reference=1s").expect("reference");
    assert_eq!(o.limits(Some(("attach", 1_000_000_000))).p99_ns, 10_000_000);
    let capped = o.limits(Some(("attach", 1_000_000)));
    assert_eq!(capped.p99_ns, 100_000, "10 % of a 1 ms median: {capped:?}");
    assert!(
        capped
            .basis
            .contains("10.00 % of attach median service time 1.000 ms"),
        "{capped:?}"
    );
    assert_eq!(
        o.limits(Some(("attach", 1_000))).p99_ns,
        20_000,
        "the floor"
    );
    assert_eq!(o.limits(None).p99_ns, 10_000_000);
    o.set("start.p99=3ms").expect("fixed");
    let l = o.limits(None);
    assert_eq!((l.p99_ns, l.p999_ns), (3_000_000, 30_000_000));
}

#[test]
fn too_few_events_are_not_judged_and_a_run_with_nothing_judged_says_so() {
    let o = ValidityOptions::default();
    let none = Percentiles::default();
    // 44 events, the largest one hiccup of 17 ms: a p99 of 44 values is that hiccup.
    let hiccup = Percentiles {
        count: 44,
        p99: 17_000_000,
        p999: 17_000_000,
        max: 17_000_000,
        ..Percentiles::default()
    };
    let v = judge(&measured(&hiccup, &none), &o);
    assert_eq!(v.verdict, Verdict::NotJudged, "{v:#?}");
    assert_eq!(v.failed().count(), 0);
    let c = v
        .checks
        .iter()
        .find(|c| c.check == "start_lateness.p99")
        .expect("check");
    assert!(!c.judged);
    assert_eq!(
        c.message,
        "start lateness p99 not judged: 44 events that did not wait, fewer than the 100 a \
         p99 needs (measured 17.000 ms, limit 10.000 ms)"
    );
    // The same lateness over 100 events is judged, and fails: without a bound to size
    // it, the attach's numbers are imprecise (the schedule was kept: not engine-bound).
    let judged = Percentiles {
        count: 100,
        ..hiccup
    };
    let v = judge(&measured(&judged, &none), &o);
    assert_eq!(v.verdict, Verdict::Imprecise, "{v:#?}");
    // And a p99.9 needs 1000.
    assert!(v.not_judged().any(|c| c.check == "start_lateness.p99.9"));
}

#[test]
fn iogen_issue_lateness_is_judged_against_its_own_io() {
    let o = ValidityOptions::default();
    let none = Percentiles::default();
    let start = Percentiles {
        count: 1000,
        p99: 1_000,
        p999: 1_000,
        ..Percentiles::default()
    };
    // 1 ms of issue lateness against I/O of 200 µs: the limit is the 20 µs floor.
    let late = Percentiles {
        count: 5000,
        p99: 1_000_000,
        p999: 1_000_000,
        ..Percentiles::default()
    };
    let service = Percentiles {
        count: 5000,
        p50: 200_000,
        ..Percentiles::default()
    };
    let m = Measured {
        io_lateness: Some((&late, &service)),
        ..measured(&start, &none)
    };
    let v = judge(&m, &o);
    // The attach holds its own limits: only the I/O's numbers are the tool's.
    assert_eq!(v.verdict, Verdict::PartlyValid, "{v:#?}");
    let io = v.ops.iter().find(|x| x.op == IO_PHASE_IO).expect("io");
    assert_eq!(io.verdict, Verdict::Imprecise, "{v:#?}");
    let c = v
        .failed()
        .find(|c| c.check == "io_phase.lateness.p99")
        .expect("iogen check failed");
    assert_eq!(c.limit, 20_000.0);
    // The control operations' limit is the attach's (1 s: 10 ms), untouched.
    assert_eq!(v.limits.expect("limits").p99_ns, 10_000_000);
}

#[test]
fn worst_failed_check_decides_and_thresholds_parse() {
    let mut o = ValidityOptions::default();
    o.set("start.p99=100us").expect("set");
    o.set("throttled=5%").expect("set");
    assert_eq!((o.start_p99_ns, o.throttled), (Some(100_000), 0.05));
    assert!(o.set("rate=150%").is_err());
    assert!(o.set("colour=1").is_err());
    let late = Percentiles {
        count: 100,
        p99: 200_000,
        p999: 200_000,
        ..Percentiles::default()
    };
    let none = Percentiles::default();
    let m = Measured {
        state: CompletionState::Complete,
        reason: None,
        operations: 10,
        operations_ok: 10,
        start_lateness: &late,
        waited: 0,
        resume_lateness: &none,
        completion_lateness: &none,
        io_lateness: None,
        medians: Vec::new(),
        reported: Vec::new(),
        rate: None,
        workers_busy: Some(0.2),
        throttling: &[],
        streams: &[],
        host_steal_ns: Some(30_000_000),
    };
    // A lateness past its limit with no op type to size it against: imprecise.
    let v = judge(&m, &o);
    assert_eq!(v.verdict, Verdict::Imprecise);
    assert_eq!(
        v.failed().map(|c| c.check.as_str()).collect::<Vec<_>>(),
        ["start_lateness.p99"]
    );
    // The host's steal over the run is recorded and named as the likely cause.
    assert_eq!(v.host_steal_ns, Some(30_000_000));
    assert!(
        v.evidence().contains("hypervisor took 30 ms"),
        "{}",
        v.evidence()
    );
    let quiet = judge(
        &Measured {
            host_steal_ns: Some(200_000),
            ..m.clone()
        },
        &o,
    );
    assert!(
        !quiet.evidence().contains("hypervisor"),
        "under 1 ms: not named"
    );
    let m = Measured {
        state: CompletionState::Interrupted,
        operations_ok: 0,
        ..m
    };
    let v = judge(&m, &o);
    assert_eq!(v.verdict, Verdict::Incomplete);
    assert_eq!(v.failed().count(), 3, "{v:?}");
}
