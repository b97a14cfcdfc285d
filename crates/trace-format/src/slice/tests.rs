//! Tests of [`super::slice`] and [`super::busiest`].

use super::*;
use crate::check::Checker;
use crate::io::{Encoding, Trace};

const TRACE: &str = "format: cnsreplay-trace
version: 1
origin: 2026-01-01T00:00:00Z
volumes: [{name: pre, size: 1Gi}]
events:
  - {at: 0s, create_volume: {volume: v1, size: 1Gi}}
  - {at: 1s, attach: {workload: w1, volumes: [v1]}}
  - {at: 2s, snapshot: {volume: v1, snapshot: s1}}
  - {at: 2500ms, resize: {volume: v1, size: 2Gi}}
  - {at: 3s, delete_volume: {volume: pre}}
  - {at: 4s, detach: {workload: w1}}
  - {at: 5s, create_volume: {volume: r1, size: 2Gi, source: {snapshot: s1}}}
  - {at: 6s, create_volume: {volume: v2, size: 1Gi}}
  - {at: 7s, attach: {workload: w2, volumes: [v1, v2]}}
  - {at: 8s, delete_snapshot: {snapshot: s1}}
  - {at: 9s, io: {volume: v1, kind: write, offset: 0, len: 4096}}
  - {at: 9500ms, detach: {workload: w2}}
  - {at: 11s, delete_volume: {volume: v1}}
";

fn cut(w: Window) -> (Header, Vec<Event>, SliceReport) {
    cut_with(w, &Filter::default())
}

fn cut_with(w: Window, f: &Filter) -> (Header, Vec<Event>, SliceReport) {
    let t = Trace::from_bytes(TRACE.as_bytes(), Some(Encoding::Yaml)).expect("trace");
    let ((h, evs), r) = slice(
        &t.header,
        t.events.into_iter().map(Ok),
        w,
        f,
        "t.yaml",
        |h| Ok((h.clone(), Vec::new())),
        |s: &mut (Header, Vec<Event>), e| {
            s.1.push(e.clone());
            Ok(())
        },
    )
    .expect("slice");
    (h, evs, r)
}

#[test]
fn a_slice_declares_what_lives_at_the_cut_and_drops_what_needs_earlier_objects() {
    let s = 1_000_000_000;
    let (h, evs, r) = cut(Window {
        from: 3 * s + 500_000_000,
        to: 10 * s,
    });
    // v1 at its resized size; `pre` was deleted before the cut.
    let vols: Vec<_> = h
        .volumes
        .iter()
        .map(|v| (v.name.as_str(), v.size))
        .collect();
    assert_eq!(vols, [("v1", Some(2 << 30))]);
    // w1 runs at the cut: declared, so its detach in the window is kept.
    let wls: Vec<_> = h
        .workloads
        .iter()
        .map(|w| (w.name.as_str(), w.volumes.clone()))
        .collect();
    assert_eq!(wls, [("w1", vec![Name::from("v1")])]);
    assert_eq!(r.workloads, 1);
    assert_eq!(
        h.origin.map(|o| o.to_string()).as_deref(),
        Some("2026-01-01T00:00:03.5Z")
    );
    let kept: Vec<_> = evs.iter().map(|e| (e.at, e.op.op_type().name())).collect();
    assert_eq!(
        kept,
        [
            (500_000_000, "detach"),
            (2_500_000_000, "create_volume"),
            (3_500_000_000, "attach"),
            (5_500_000_000, "io"),
            (6_000_000_000, "detach"),
        ]
    );
    assert_eq!(r.before, 5);
    assert!(r.truncated);
    assert_eq!(
        r.dropped,
        BTreeMap::from([
            (
                "restore from a snapshot taken before the window".to_owned(),
                1
            ),
            ("snapshot taken before the window".to_owned(), 1),
        ])
    );
    // What is left replays: the checker finds no problem.
    let findings = Checker::findings_of(&h, &evs);
    assert!(findings.is_empty(), "{findings:?}");
}

/// A workload whose detach the filter leaves out keeps its volumes mounted in the output:
/// kept deletes and attaches of them are dropped, so the slice still validates, whether
/// the workload was attached in the window or declared running at the cut.
#[test]
fn a_left_out_detach_holds_its_volumes() {
    let s = 1_000_000_000;
    let f = Filter {
        ops: [OpType::CreateVolume, OpType::Attach, OpType::DeleteVolume].into(),
        ..Filter::default()
    };
    for from in [0, 3 * s + 500_000_000] {
        let (h, evs, r) = cut_with(Window { from, to: u64::MAX }, &f);
        let kept: Vec<_> = evs.iter().map(|e| e.op.op_type().name()).collect();
        // From 0: v1, w1 (its detach left out), pre's delete, v2; from 3.5 s: w1 is
        // declared running and v2 is kept.
        let (expect, needs): (&[&str], u64) = if from == 0 {
            (
                &["create_volume", "attach", "delete_volume", "create_volume"],
                3, // the restore from the left-out snapshot, w2's attach, v1's delete
            )
        } else {
            (&["create_volume"], 2) // w2's attach, v1's delete
        };
        assert_eq!(kept, expect, "from {from}");
        assert_eq!(
            r.dropped
                .get("needs an object of an event the filter left out")
                .copied(),
            Some(needs),
            "from {from}: {r:?}"
        );
        let findings = Checker::findings_of(&h, &evs);
        assert!(findings.is_empty(), "from {from}: {findings:?}");
    }
}

#[test]
fn a_filter_drops_what_it_leaves_out_and_what_needs_it() {
    let all = Window {
        from: 0,
        to: u64::MAX,
    };
    let f = Filter {
        ops: [OpType::Io, OpType::DeleteVolume].into(),
        ..Filter::default()
    };
    let (h, evs, r) = cut_with(all, &f);
    // `pre` is declared, so its delete is kept; v1 was made by a left-out create.
    let kept: Vec<_> = evs.iter().map(|e| e.op.op_type().name()).collect();
    assert_eq!(kept, ["delete_volume"]);
    assert_eq!(h.volumes.len(), 1);
    assert_eq!(
        r.dropped,
        BTreeMap::from([
            ("not selected by the filter".to_owned(), 10),
            (
                "needs an object of an event the filter left out".to_owned(),
                2
            ),
        ])
    );
    assert!(h.provenance.parameters["slice_filter"].contains("io"));
    // Tenants: the header's default namespace stands for events without one.
    let f = Filter {
        tenants: [Name::from("nobody")].into(),
        ..Filter::default()
    };
    let (_, evs, r) = cut_with(all, &f);
    assert!(evs.is_empty());
    assert_eq!(r.dropped["not selected by the filter"], 13);
}

/// `io_phase` units running across the cut: one bounded by duration is kept from the
/// cut with the rest of its duration, one bounded by bytes is dropped and counted; ones
/// that ended (by their duration or with their workload) before the cut are neither.
#[test]
fn io_phases_running_at_the_cut_are_clipped_or_counted() {
    const PHASES: &str = "format: cnsreplay-trace
version: 1
volumes: [{name: v1, size: 1Gi}, {name: v2, size: 1Gi}]
events:
  - {at: 1s, attach: {workload: w1, volumes: [v1]}}
  - {at: 1s, attach: {workload: w2, volumes: [v2]}}
  - {at: 1s, io_phase: {workload: w1, volume: v1, pattern: random, read_pct: 100, block_size: 4Ki, load: {depth: 1}, duration: 2s}}
  - {at: 1500ms, io_phase: {workload: w2, volume: v2, pattern: random, read_pct: 100, block_size: 4Ki, load: {depth: 1}, duration: 100s}}
  - {at: 2s, io_phase: {workload: w1, volume: v1, pattern: random, read_pct: 70, block_size: 4Ki, load: {rate: {iops: 100}}, duration: 10s}}
  - {at: 2s, io_phase: {workload: w1, volume: v1, pattern: sequential, read_pct: 0, block_size: 64Ki, load: {depth: 4}, bytes: 1Gi}}
  - {at: 4s, detach: {workload: w2}}
  - {at: 6s, io_phase: {workload: w1, volume: v1, pattern: random, read_pct: 100, block_size: 4Ki, load: {depth: 2}, duration: 100s}}
  - {at: 7s, detach: {workload: w1}}
";
    let s = 1_000_000_000;
    let t = Trace::from_bytes(PHASES.as_bytes(), Some(Encoding::Yaml)).expect("trace");
    let ((h, evs), r) = slice(
        &t.header,
        t.events.into_iter().map(Ok),
        Window {
            from: 5 * s,
            to: u64::MAX,
        },
        &Filter::default(),
        "p.yaml",
        |h| Ok((h.clone(), Vec::new())),
        |st: &mut (Header, Vec<Event>), e| {
            st.1.push(e.clone());
            Ok(())
        },
    )
    .expect("slice");
    let kept: Vec<_> = evs
        .iter()
        .map(|e| match &e.op {
            Op::IoPhase(p) => (e.id, e.at, "io_phase", p.duration),
            op => (e.id, e.at, op.op_type().name(), None),
        })
        .collect();
    assert_eq!(
        kept,
        [
            (4, 0, "io_phase", Some(7 * s)),
            (7, s, "io_phase", Some(100 * s)),
            (8, 2 * s, "detach", None),
        ]
    );
    assert_eq!((r.clipped, r.kept, r.before), (1, 3, 7));
    assert_eq!(
        r.dropped,
        BTreeMap::from([(DROPPED_BYTES_PHASE.to_owned(), 1)])
    );
    assert!(h.provenance.parameters["slice"].contains("1 io_phase unit(s)"));
    let findings = Checker::findings_of(&h, &evs);
    assert!(findings.is_empty(), "{findings:?}");
}

#[test]
fn the_busiest_window_is_the_densest_one() {
    let ms = 1_000_000u64;
    let times = || [0, 100, 2000, 2010, 2020, 2030, 2990, 5000].map(|t| Ok(t * ms));
    let (w, n) = busiest(times().into_iter(), times().into_iter(), 1000 * ms)
        .unwrap()
        .unwrap();
    assert_eq!((w.from, w.to, n), (2000 * ms, 3000 * ms, 5));
    assert!(
        busiest(std::iter::empty(), std::iter::empty(), 5)
            .unwrap()
            .is_none()
    );
}

/// An event out of time order in the window is an error naming it, whether it falls before
/// the window's start (it used to wrap around when shifted) or inside it; it is never
/// dropped.
#[test]
fn an_event_out_of_time_order_is_an_error_not_dropped() {
    let s = 1_000_000_000;
    for (late, window) in [
        (
            "2s",
            Window {
                from: 3 * s,
                to: 20 * s,
            },
        ),
        (
            "6500ms",
            Window {
                from: 0,
                to: 20 * s,
            },
        ),
    ] {
        let text = TRACE.replace(
            "  - {at: 9s, io:",
            &format!("  - {{at: {late}, marker: {{name: late}}}}\n  - {{at: 9s, io:"),
        );
        let t = Trace::from_bytes(text.as_bytes(), Some(Encoding::Yaml)).expect("trace");
        let e = slice(
            &t.header,
            t.events.into_iter().map(Ok),
            window,
            &Filter::default(),
            "t.yaml",
            |_| Ok(0u64),
            |n, _| {
                *n += 1;
                Ok(())
            },
        )
        .expect_err("out of order");
        let Error::Invalid(d) = e else { panic!("{e}") };
        assert_eq!(d.path, "events[10].at", "{late}: {d}");
        assert!(
            matches!(d.problem, crate::error::Problem::TimeInversion { previous, .. } if previous == 8 * s),
            "{late}: {d}"
        );
    }
}
