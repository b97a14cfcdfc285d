use std::time::Duration;

use hdrhistogram::Histogram;
use iogen::{
    Arrival, EngineChoice, EngineOptions, Load, PhaseSpec, Rate, Stop, SyncStall, run_phase,
};

use crate::{opts, spec, target};

#[test]
fn open_loop_issues_the_whole_schedule() {
    // 2000 IOPS for 0.5 s, evenly spaced: exactly 1000 intended I/Os, all issued.
    let s = PhaseSpec {
        load: Load::Rate(Rate {
            iops: 2000.0,
            arrival: Arrival::Uniform,
        }),
        duration: Some(Duration::from_millis(500)),
        jobs: 2,
        ..spec()
    };
    let (_d, p) = target();
    let r = run_phase(&s, &p, &opts(EngineChoice::Auto), &Stop::new()).expect("run");
    assert_eq!(r.summary.ios, 1000);
    assert_eq!(r.summary.intended_iops, Some(2000.0));
    let offered = r.summary.offered_iops.expect("offered");
    assert!((offered - 2000.0).abs() < 1e-6, "{offered}");
    let h = r.histograms.get(iogen::IoKind::Read).expect("reads");
    assert_eq!(h.response.len(), 1000);
    assert_eq!(h.lateness.len(), 1000);
}

#[test]
fn poisson_arrivals_are_seeded() {
    let s = PhaseSpec {
        load: Load::Rate(Rate {
            iops: 1000.0,
            arrival: Arrival::Poisson,
        }),
        duration: Some(Duration::from_millis(300)),
        ..spec()
    };
    let run = || {
        let (_d, p) = target();
        run_phase(&s, &p, &opts(EngineChoice::Sync), &Stop::new())
            .expect("run")
            .summary
            .ios
    };
    let (a, b) = (run(), run());
    assert_eq!(a, b, "same seed, same schedule");
    assert!(a > 200 && a < 400, "about 300 arrivals, got {a}");
}

fn at_least(h: &Histogram<u64>, ns: u64) -> u64 {
    h.count_between(ns, h.max().max(ns))
}

#[test]
fn stall_shows_in_response_time_not_service_time() {
    // One pool thread and one slot: while I/O #100 stalls for 300 ms, the I/Os intended
    // during the stall cannot be issued. They must be charged the wait (response, lateness),
    // while their own service times stay short.
    let stall = Duration::from_millis(300);
    let s = PhaseSpec {
        load: Load::Rate(Rate {
            iops: 1000.0,
            arrival: Arrival::Uniform,
        }),
        duration: Some(Duration::from_millis(800)),
        max_inflight: 1,
        ..spec()
    };
    let o = EngineOptions {
        sync_stall: Some(SyncStall {
            at_io: 100,
            sleep: stall,
        }),
        ..opts(EngineChoice::Sync)
    };
    let (_d, p) = target();
    let r = run_phase(&s, &p, &o, &Stop::new()).expect("run");
    assert_eq!(r.summary.ios, 800, "the backlog is issued, not dropped");
    let h = r.histograms.get(iogen::IoKind::Read).expect("reads");
    let half = (stall / 2).as_nanos() as u64;
    // I/Os intended in the first half of the stall waited at least half of it.
    assert!(
        at_least(&h.response, half) >= 140,
        "response ≥ 150 ms: {}",
        at_least(&h.response, half)
    );
    assert!(
        at_least(&h.lateness, half) >= 140,
        "lateness ≥ 150 ms: {}",
        at_least(&h.lateness, half)
    );
    // Only the stalled I/O itself has a long service time.
    assert_eq!(at_least(&h.service, half), 1);
    assert!(h.response.max() >= stall.as_nanos() as u64);
}
