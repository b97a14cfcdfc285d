//! Tests of [`super::split`].

use super::*;
use crate::check::Checker;
use crate::io::{Encoding, Trace};

type Parts = BTreeMap<String, (Header, Vec<Event>)>;

fn run(text: &str) -> Result<(Parts, SplitReport), SplitError> {
    run_with(text, SplitOptions::default())
}

fn run_with(text: &str, opts: SplitOptions) -> Result<(Parts, SplitReport), SplitError> {
    let t = Trace::from_bytes(text.as_bytes(), Some(Encoding::Yaml)).expect("trace");
    split(
        &t.header,
        t.events.clone().into_iter().map(Ok),
        t.events.into_iter().map(Ok),
        opts,
        |_, h| Ok((h.clone(), Vec::new())),
        |s: &mut (Header, Vec<Event>), e| {
            s.1.push(e.clone());
            Ok(())
        },
    )
}

const TRACE: &str = "format: cnsreplay-trace
version: 1
volumes: [{name: pa, size: 1Gi}, {name: pb, size: 1Gi}, {name: unused, size: 1Gi}]
events:
  - {at: 0s, tenant: a, create_volume: {volume: v1, size: 1Gi}}
  - {at: 0s, tenant: b, attach: {workload: wb, volumes: [pb]}}
  - {at: 1s, tenant: a, attach: {workload: wa, volumes: [v1, pa]}}
  - {at: 2s, marker: {name: mid}}
  - {at: 3s, tenant: a, detach: {workload: wa}}
  - {at: 3s, tenant: a, delete_volume: {volume: v1}}
  - {at: 4s, tenant: b, create_volume: {volume: v1, size: 1Gi}}
  - {at: 5s, create_volume: {volume: d, size: 1Gi}}
";

#[test]
fn each_tenant_gets_its_events_and_declared_objects_and_every_marker() {
    let (parts, r) = run(TRACE).expect("split");
    assert_eq!(parts.keys().collect::<Vec<_>>(), ["a", "b", "default"]);
    let names = |p: &str| -> Vec<String> {
        parts[p]
            .0
            .volumes
            .iter()
            .map(|v| v.name.to_string())
            .collect()
    };
    assert_eq!(names("a"), ["pa"]);
    assert_eq!(names("b"), ["pb"]);
    assert_eq!(names("default"), ["unused"]);
    let ids = |p: &str| parts[p].1.iter().map(|e| e.id).collect::<Vec<_>>();
    assert_eq!(ids("a"), [0, 2, 3, 4, 5]);
    assert_eq!(ids("b"), [1, 3, 6]);
    assert_eq!(ids("default"), [3, 7]);
    assert_eq!((r.events, r.markers), (8, 1));
    assert_eq!(r.parts["a"].events, 5);
    // Every part replays on its own.
    for (p, (h, evs)) in &parts {
        let findings = Checker::findings_of(h, evs);
        assert!(findings.is_empty(), "{p}: {findings:?}");
    }
}

#[test]
fn an_object_two_tenants_use_is_named() {
    let t = TRACE.replace(
        "  - {at: 3s, tenant: a, detach: {workload: wa}}",
        "  - {at: 2500ms, tenant: b, snapshot: {volume: v1, snapshot: s}}\n  - {at: 3s, tenant: a, detach: {workload: wa}}",
    );
    let tenant = SplitOptions {
        by: Some(By::Tenant),
        parts: None,
    };
    let e = run_with(&t, tenant).expect_err("shared");
    let msg = e.to_string();
    assert!(
        msg.contains("event 4 (id 4): volume \"v1\" belongs to tenant \"a\" (since event 0) but tenant \"b\" uses it"),
        "{msg}"
    );
    // Left to choose, the split goes by lineage and says why; it needs a number of parts.
    let e = run(&t).expect_err("no --parts");
    assert!(
        matches!(e, SplitError::NeedParts { lineages: 4, .. }),
        "{e}"
    );
    let (parts, r) = run_with(
        &t,
        SplitOptions {
            by: None,
            parts: Some(2),
        },
    )
    .expect("by lineage");
    assert_eq!(r.by, By::Lineage);
    assert!(
        r.reason.contains(
            "the tenants share objects: volume \"v1\" of tenant \"a\" is used by tenant \"b\""
        ),
        "{}",
        r.reason
    );
    assert_eq!(parts.keys().collect::<Vec<_>>(), ["part-1", "part-2"]);
    assert_valid_partition(&t, &parts);
}

/// Every part replays on its own, and together they hold every event but the markers once
/// (markers in every part).
fn assert_valid_partition(text: &str, parts: &Parts) {
    let t = Trace::from_bytes(text.as_bytes(), Some(Encoding::Yaml)).expect("trace");
    let mut ids = Vec::new();
    for (p, (h, evs)) in parts {
        let findings = Checker::findings_of(h, evs);
        assert!(findings.is_empty(), "{p}: {findings:?}");
        for e in evs {
            if matches!(e.op, Op::Marker(_)) {
                continue;
            }
            ids.push(e.id);
        }
        let markers: Vec<u64> = evs
            .iter()
            .filter(|e| matches!(e.op, Op::Marker(_)))
            .map(|e| e.id)
            .collect();
        let want: Vec<u64> = t
            .events
            .iter()
            .filter(|e| matches!(e.op, Op::Marker(_)))
            .map(|e| e.id)
            .collect();
        assert_eq!(markers, want, "{p}: markers");
    }
    ids.sort_unstable();
    let want: Vec<u64> = t
        .events
        .iter()
        .filter(|e| !matches!(e.op, Op::Marker(_)))
        .map(|e| e.id)
        .collect();
    assert_eq!(ids, want);
    // Declared objects: each in exactly one part.
    let mut vols: Vec<String> = parts
        .values()
        .flat_map(|(h, _)| h.volumes.iter().map(|v| v.name.to_string()))
        .collect();
    vols.sort();
    let mut want: Vec<String> = t
        .header
        .volumes
        .iter()
        .map(|v| v.name.to_string())
        .collect();
    want.sort();
    assert_eq!(vols, want, "declared volumes");
}

/// Two database volumes with their snapshots, a restore and a clone, a group snapshot and a
/// workload joining two lineages, a name deleted and made again as another volume, a node
/// drained: no tenants, so by lineage.
const LINEAGES: &str = "format: cnsreplay-trace
version: 3
defaults: {volume_size: 1Gi, namespace: ns}
volumes: [{name: d0}, {name: idle}]
workloads: [{name: dw, volumes: [d0]}]
events:
  - {at: 0s, create_volume: {volume: a}}
  - {at: 0s, create_volume: {volume: b}}
  - {at: 0s, create_volume: {volume: c}}
  - {at: 1s, attach: {workload: wa, volumes: [a]}}
  - {at: 1s, attach: {workload: wb, volumes: [b]}}
  - {at: 2s, snapshot: {volume: a, snapshot: sa}}
  - {at: 2s, marker: {name: mid}}
  - {at: 3s, create_volume: {volume: ra, source: {snapshot: sa}}}
  - {at: 3s, create_volume: {volume: cb, source: {volume: b}}}
  - {at: 4s, group_snapshot: {group: g, volumes: [c, d0]}}
  - {at: 5s, create_volume: {volume: gr, source: {group_member: {group: g, volume: c}}}}
  - {at: 6s, io: {volume: ra, kind: write, offset: 0, len: 4096}}
  - {at: 6s, drain_node: {node: n1}}
  - {at: 7s, detach: {workload: wa}}
  - {at: 7s, delete_volume: {volume: a}}
  - {at: 8s, create_volume: {volume: a}}
  - {at: 9s, attach: {workload: late, volumes: [a, cb]}}
  - {at: 10s, io: {volume: gr, kind: read, offset: 0, len: 4096}}
";

#[test]
fn a_trace_without_tenants_splits_by_lineage_into_balanced_parts() {
    let e = run(LINEAGES).expect_err("no --parts");
    assert!(
        e.to_string()
            .starts_with("a split by lineage needs the number of parts (--parts N): the trace has 3 lineages with events"),
        "{e}"
    );
    let (parts, r) = run_with(
        LINEAGES,
        SplitOptions {
            by: None,
            parts: Some(3),
        },
    )
    .expect("split");
    assert_eq!(r.by, By::Lineage);
    assert_eq!(r.reason, "one tenant (\"ns\") to split by");
    assert_eq!(r.units, 3);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_valid_partition(LINEAGES, &parts);
    let ids = |p: &str| {
        parts[p]
            .1
            .iter()
            .filter(|e| !matches!(e.op, Op::Marker(_)))
            .map(|e| e.id)
            .collect::<Vec<_>>()
    };
    // a's lineage (its snapshot, the restore and its I/O, the first `a`'s workload; the
    // later `a` is another volume): 7 events; b's (its clone, the workload joining the new
    // `a` to the clone): 5; c's (the group with the declared d0 and its workload, the
    // group's restore): 4. The drain goes to the first part, which then is the lightest
    // for the last lineage.
    assert_eq!(ids("part-1"), [2, 9, 10, 12, 17]);
    assert_eq!(ids("part-2"), [0, 3, 5, 7, 11, 13, 14]);
    assert_eq!(ids("part-3"), [1, 4, 8, 15, 16]);
    assert_eq!(parts["part-1"].0.workloads.len(), 1);
    // The unused declared volume is a lineage without events: in some part, declared once.
    assert_eq!(r.parts.values().map(|p| p.lineages).sum::<u64>(), 4);
    // More parts than lineages: refused, saying how many there are.
    let e = run_with(
        LINEAGES,
        SplitOptions {
            by: None,
            parts: Some(4),
        },
    )
    .expect_err("too many parts");
    assert_eq!(
        e.to_string(),
        "cannot make 4 parts: the trace has 3 lineages with events (the largest holds 7 of \
         their 16); ask for at most 3 parts"
    );
    // One part: written, with a warning.
    let (parts, r) = run_with(
        LINEAGES,
        SplitOptions {
            by: None,
            parts: Some(1),
        },
    )
    .expect("one part");
    assert_eq!(parts.len(), 1);
    assert_eq!(
        r.warnings,
        ["one part: nothing was split (by lineage: one part was asked for)"]
    );
}

/// Tenants balanced over fewer parts: whole tenants per part.
#[test]
fn tenants_are_balanced_over_the_parts_asked_for() {
    let (parts, r) = run_with(
        TRACE,
        SplitOptions {
            by: None,
            parts: Some(2),
        },
    )
    .expect("split");
    assert_eq!(r.by, By::Tenant);
    assert_eq!(r.parts["part-1"].tenants, ["a"]);
    assert_eq!(r.parts["part-2"].tenants, ["b", "default"]);
    assert_valid_partition(TRACE, &parts);
    // More parts than tenants: by lineage, when not asked otherwise.
    let four = SplitOptions {
        by: None,
        parts: Some(4),
    };
    let (parts, r) = run_with(TRACE, four).expect("split");
    assert_eq!(
        (r.by, r.reason.as_str()),
        (By::Lineage, "3 tenants for 4 parts")
    );
    assert_eq!(parts.len(), 4);
    assert_valid_partition(TRACE, &parts);
    let by_tenant = SplitOptions {
        by: Some(By::Tenant),
        ..four
    };
    let e = run_with(TRACE, by_tenant).expect_err("3 tenants");
    assert!(
        e.to_string()
            .starts_with("cannot make 4 parts: the trace has 3 tenants with events"),
        "{e}"
    );
    // A tenant with a declared workload and no event keeps it in a part of its own.
    let idle = TRACE.replace(
        "events:\n",
        "workloads: [{name: wc, tenant: c, volumes: [unused]}]\nevents:\n",
    );
    let (parts, r) = run(&idle).expect("split");
    assert_eq!(parts.keys().collect::<Vec<_>>(), ["a", "b", "c", "default"]);
    assert_eq!(parts["c"].0.workloads.len(), 1);
    assert_eq!(parts["c"].0.volumes[0].name.as_str(), "unused");
    assert_eq!(r.units, 3);
    assert_valid_partition(&idle, &parts);
    // One tenant asked to split by tenant: one part, and a warning.
    let one = "format: cnsreplay-trace\nversion: 1\nevents:\n  - {at: 0s, tenant: a, create_volume: {volume: v}}\n";
    let (parts, r) = run_with(
        one,
        SplitOptions {
            by: Some(By::Tenant),
            parts: None,
        },
    )
    .expect("split");
    assert_eq!(parts.keys().collect::<Vec<_>>(), ["a"]);
    assert_eq!(
        r.warnings,
        ["one part: nothing was split (by tenant: 1 tenant(s) with events)"]
    );
}
