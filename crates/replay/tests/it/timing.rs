//! The timing lanes: every event handed over exactly once, never early, whatever the number of
//! lanes; and the minimum wake-up interval groups events as documented.

use std::collections::BTreeSet;

use replay::{RunOptions, TimingOptions};

use crate::{MS, cordon, records, run_sim};

const US: u64 = 1_000;

fn opts(lanes: usize, min_wake_ns: u64) -> RunOptions {
    RunOptions {
        timing: TimingOptions {
            lanes,
            min_wake_ns,
            // Tests run without root too: the lanes then fall back to nice values, with a
            // notice, and must dispatch the same events.
            ..TimingOptions::default()
        },
        ..RunOptions::default()
    }
}

/// `n` cordon events `gap` apart.
fn evenly(n: u64, gap: u64) -> Vec<(u64, trace_format::Op)> {
    (0..n).map(|i| (i * gap, cordon("n"))).collect()
}

#[test]
fn every_event_is_dispatched_once_and_never_early_with_any_number_of_lanes() {
    for lanes in [1, 2, 3] {
        let dir = tempfile::tempdir().expect("tempdir");
        // 3000 events 20 µs apart (50 k/s): the lanes race for them all the time. (With the
        // default minimum wake-up interval: without it, real-time lanes waking for every
        // event take the CPUs from the tests running beside this one.)
        let out = run_sim(
            dir.path(),
            &evenly(3000, 20 * US),
            "default: {dist: constant, value: 0}\n",
            &opts(lanes, TimingOptions::default().min_wake_ns),
        );
        assert_eq!(out.summary.dispatched, 3000, "{lanes} lanes");
        let recs = records(&dir.path().join("run"));
        let ids: BTreeSet<u64> = recs.iter().map(|r| r.id).collect();
        assert_eq!(recs.len(), 3000, "{lanes} lanes: one record per event");
        assert_eq!(ids.len(), 3000, "{lanes} lanes: no event twice");
        for r in &recs {
            assert!(
                r.dispatched >= r.intended,
                "{lanes} lanes: event {} dispatched {} ns before its time",
                r.id,
                r.intended - r.dispatched
            );
            assert_eq!(r.intended, r.id * 20 * US);
        }
        let timing = &out.manifest.options["timing"];
        assert_eq!(timing["lanes"], lanes, "the manifest records the lanes");
    }
}

#[test]
fn automatic_lanes_resolve_to_a_count_in_the_manifest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run_sim(
        dir.path(),
        &evenly(10, MS),
        "default: {dist: constant, value: 0}\n",
        &opts(0, TimingOptions::default().min_wake_ns),
    );
    let lanes = out.manifest.options["timing"]["lanes"]
        .as_u64()
        .expect("lanes");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    assert_eq!(lanes, cpus.clamp(1, 2));
}

/// The dispatch instants of a run grouped into wake-ups: a lane stamps each event as it
/// claims it, microseconds apart within a wake-up, so a gap longer than `gap` starts a new
/// one. Returns each wake-up's first instant.
fn wakeups(recs: &[replay::EventRecord], gap: u64) -> Vec<u64> {
    let mut stamps: Vec<u64> = recs.iter().map(|r| r.dispatched).collect();
    stamps.sort_unstable();
    let mut out: Vec<u64> = Vec::new();
    let mut last = None;
    for s in stamps {
        if last.is_none_or(|l| s - l > gap) {
            out.push(s);
        }
        last = Some(s);
    }
    out
}

/// Replays `n` events 50 µs apart with `lanes` lanes on grids `period` apart; checks that
/// every event was dispatched, none early, and returns the records.
fn grid_run(n: u64, lanes: usize, period: u64) -> Vec<replay::EventRecord> {
    let dir = tempfile::tempdir().expect("tempdir");
    run_sim(
        dir.path(),
        &evenly(n, 50 * US),
        "default: {dist: constant, value: 0}\n",
        &opts(lanes, period),
    );
    let recs = records(&dir.path().join("run"));
    assert_eq!(recs.len() as u64, n);
    assert!(recs.iter().all(|r| r.dispatched >= r.intended));
    recs
}

#[test]
fn a_lane_wakes_at_most_once_per_point_of_its_grid() {
    // 2000 events over 100 ms; one lane whose grid points are 10 ms apart.
    let period = 10 * MS;
    let wakes = wakeups(&grid_run(2000, 1, period), period / 2);
    // The first wake-up is at the first deadline; after that, one per grid period at most.
    let periods: Vec<u64> = wakes.iter().map(|w| w / period).collect();
    for w in periods.windows(2) {
        assert!(w[0] < w[1], "two wake-ups in one grid period: {wakes:?}");
    }
    // So events went out in groups: about 100 ms / 10 ms wake-ups for 2000 events (more
    // when a loaded host made the lane late and the run longer: one per period still).
    assert!(wakes.len() <= 40, "{} wake-ups: {wakes:?}", wakes.len());
}

#[test]
fn two_lanes_take_turns_on_their_grids() {
    // 4000 events over 200 ms; two lanes with 10 ms periods, at phases 0 and 5 ms: together
    // they wake about every 5 ms, so no event waits a whole period.
    let period = 10 * MS;
    let wakes = wakeups(&grid_run(4000, 2, period), period / 5);
    // Per lane at most its first wake-up (at the first deadline) and one per grid point up
    // to a period past the last event: 1 + 21.
    assert!(wakes.len() <= 2 * (1 + 21), "{} wake-ups", wakes.len());
    // Both phases were used: wake-ups in the first and in the second half of a period.
    let halves: BTreeSet<bool> = wakes.iter().map(|w| w % period >= period / 2).collect();
    assert_eq!(
        halves.len(),
        2,
        "wake-ups only in one half of the period: {wakes:?}"
    );
}

#[test]
fn too_many_lanes_is_an_options_error_before_anything_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = crate::write_trace(dir.path(), &evenly(3, MS));
    let cfg = provider_sim::SimConfig::default();
    let p = std::sync::Arc::new(provider_sim::SimProvider::new(cfg).expect("sim"));
    let err = replay::run(
        &trace,
        &dir.path().join("run"),
        &p,
        &opts(17, 0),
        &replay::RunControl::new(),
    )
    .expect_err("17 lanes");
    assert!(
        matches!(&err, replay::Error::Options(m) if m.contains("at most 16 timing lanes, got 17")),
        "{err}"
    );
    assert!(!dir.path().join("run").exists(), "no run directory");
}
