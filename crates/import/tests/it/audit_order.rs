//! The audit importer's order, memory and attach enrichment: nodes from `pods/binding`,
//! ReadWriteOnce sharing on one node, VolumeAttachment times in `observed`, the reorder
//! window, several files, and memory that does not grow with the log.

use std::io::Cursor;

use import::audit::{AuditImport, AuditOptions, read_audit};
use import::{ImportError, Policy};
use trace_format::{Event, Op};

fn read_files(files: &[(&str, String)], opts: AuditOptions) -> Result<AuditImport, ImportError> {
    read_audit(
        files
            .iter()
            .map(|(n, t)| ((*n).to_owned(), Cursor::new(t.as_bytes().to_vec())))
            .collect(),
        opts,
        Policy::default(),
    )
}

fn read(lines: &[String]) -> AuditImport {
    read_files(&[("audit.log", lines.join("\n"))], AuditOptions::default()).expect("import")
}

/// A v1 event at `s` seconds, with `extra` members (a body) appended.
fn ev(s: f64, verb: &str, resource: &str, sub: &str, ns: &str, name: &str, extra: &str) -> String {
    let ts = jiff::Timestamp::from_nanosecond(1_700_000_000_000_000_000 + (s * 1e9) as i128)
        .expect("time");
    let ns = if ns.is_empty() {
        String::new()
    } else {
        format!(r#""namespace":"{ns}","#)
    };
    let sub = if sub.is_empty() {
        String::new()
    } else {
        format!(r#","subresource":"{sub}""#)
    };
    format!(
        r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","stage":"ResponseComplete","verb":"{verb}","objectRef":{{"resource":"{resource}",{ns}"name":"{name}"{sub}}},"responseStatus":{{"code":200}},"requestReceivedTimestamp":"{ts:.6}","stageTimestamp":"{ts:.6}"{extra}}}"#
    )
}

fn pvc(s: f64, name: &str, mode: &str) -> String {
    ev(
        s,
        "create",
        "persistentvolumeclaims",
        "",
        "ns",
        name,
        &format!(
            r#","requestObject":{{"spec":{{"accessModes":["{mode}"],"resources":{{"requests":{{"storage":"1Gi"}}}}}}}}"#
        ),
    )
}

fn pv(s: f64, pv: &str, claim: &str) -> String {
    ev(
        s,
        "create",
        "persistentvolumes",
        "",
        "",
        pv,
        &format!(
            r#","requestObject":{{"spec":{{"claimRef":{{"namespace":"ns","name":"{claim}"}}}}}}"#
        ),
    )
}

fn pod(s: f64, name: &str, claim: &str) -> String {
    ev(
        s,
        "create",
        "pods",
        "",
        "ns",
        name,
        &format!(
            r#","requestObject":{{"spec":{{"volumes":[{{"name":"v","persistentVolumeClaim":{{"claimName":"{claim}"}}}}]}}}}"#
        ),
    )
}

fn bind(s: f64, pod: &str, node: &str) -> String {
    ev(
        s,
        "create",
        "pods",
        "binding",
        "ns",
        pod,
        &format!(
            r#","requestObject":{{"kind":"Binding","target":{{"kind":"Node","name":"{node}"}}}}"#
        ),
    )
}

fn va(s: f64, va: &str, pv: &str, node: &str) -> String {
    ev(
        s,
        "create",
        "volumeattachments",
        "",
        "",
        va,
        &format!(
            r#","requestObject":{{"spec":{{"attacher":"x","nodeName":"{node}","source":{{"persistentVolumeName":"{pv}"}}}}}}"#
        ),
    )
}

fn attached(s: f64, va: &str) -> String {
    ev(
        s,
        "patch",
        "volumeattachments",
        "status",
        "",
        va,
        r#","requestObject":{"status":{"attached":true}}"#,
    )
}

/// An attach: workload, volumes, node, observed.
type Seen = (String, Vec<String>, Option<String>, Option<u64>);

fn attaches(imp: &AuditImport) -> Vec<Seen> {
    imp.trace
        .events
        .iter()
        .filter_map(|e: &Event| match &e.op {
            Op::Attach(a) => Some((
                a.workload.to_string(),
                a.volumes.iter().map(ToString::to_string).collect(),
                a.node.as_ref().map(ToString::to_string),
                e.observed,
            )),
            _ => None,
        })
        .collect()
}

const MS: u64 = 1_000_000;

/// A pod's node comes from the scheduler's binding; its observed attach time runs from the
/// pod create to the VolumeAttachment attached; a second pod on the same node shares the
/// ReadWriteOnce volume (already attached: 0), a third on another node does not get it.
#[test]
fn bindings_give_nodes_and_volume_attachments_give_observed_times() {
    let imp = read(&[
        pvc(0.0, "data", "ReadWriteOnce"),
        pv(0.5, "pv-1", "data"),
        pod(1.0, "a", "data"),
        bind(1.1, "a", "n1"),
        va(1.2, "csi-1", "pv-1", "n1"),
        attached(1.75, "csi-1"),
        pod(2.0, "b", "data"),
        bind(2.2, "b", "n1"),
        pod(3.0, "c", "data"),
        bind(3.3, "c", "n2"),
    ]);
    assert_eq!(
        attaches(&imp),
        [
            (
                "ns/a".into(),
                vec!["ns/data".into()],
                Some("n1".into()),
                Some(750 * MS)
            ),
            (
                "ns/b".into(),
                vec!["ns/data".into()],
                Some("n1".into()),
                Some(0)
            ),
            ("ns/c".into(), vec![], Some("n2".into()), None),
        ]
    );
    let c = &imp.counts;
    assert_eq!(c.bindings, (3, 3));
    assert_eq!(c.attach_observed, (2, 1), "{c:?}");
    assert_eq!(
        c.fixes.values().sum::<u64>(),
        1,
        "only c's mount is left out: {c:?}"
    );
}

/// An attach waits for its volume at most the horizon; a pod deleted first, or a log that
/// ends first, gives no observed time — never a made-up one.
#[test]
fn attaches_wait_at_most_the_horizon() {
    let opts = AuditOptions {
        attach_horizon: 10_000 * MS,
        ..AuditOptions::default()
    };
    let lines = [
        pvc(0.0, "d1", "ReadWriteOnce"),
        pv(0.1, "pv-1", "d1"),
        pvc(0.2, "d2", "ReadWriteOnce"),
        pv(0.3, "pv-2", "d2"),
        pvc(0.4, "d3", "ReadWriteOnce"),
        pv(0.5, "pv-3", "d3"),
        pod(1.0, "late", "d1"),
        bind(1.1, "late", "n1"),
        pod(2.0, "gone", "d2"),
        bind(2.1, "gone", "n1"),
        ev(3.0, "delete", "pods", "", "ns", "gone", ""),
        va(5.0, "csi-1", "pv-1", "n1"),
        // 11.5 s after the create: past the 10 s horizon.
        attached(12.5, "csi-1"),
        pod(13.0, "last", "d3"),
        bind(13.1, "last", "n1"),
    ]
    .join("\n");
    let imp = read_files(&[("audit.log", lines)], opts).expect("import");
    let got: Vec<(String, Option<u64>)> = attaches(&imp)
        .into_iter()
        .map(|(w, _, _, o)| (w, o))
        .collect();
    assert_eq!(
        got,
        [
            ("ns/late".into(), None),
            ("ns/gone".into(), None),
            ("ns/last".into(), None)
        ]
    );
    assert_eq!(imp.counts.attach_observed, (0, 3));
    // Events stay in time order whatever waited.
    let ats: Vec<u64> = imp.trace.events.iter().map(|e| e.at).collect();
    assert!(ats.is_sorted(), "{ats:?}");
}

/// Requests out of order within the window are put in order; one further back is bad input
/// naming its file, line and field.
#[test]
fn the_reorder_window_sorts_or_names_the_line() {
    let lines = [
        pvc(100.0, "a", "ReadWriteOnce"),
        pvc(200.0, "b", "ReadWriteOnce"),
        // 30 s before b: inside the window.
        pvc(170.0, "c", "ReadWriteOnce"),
        pvc(400.0, "d", "ReadWriteOnce"),
        // 200 s before d, and before c was released: further than the 120 s window.
        pvc(150.0, "e", "ReadWriteOnce"),
    ];
    let text = lines.join("\n");
    let imp = read_files(&[("a.log", text.clone())], AuditOptions::default());
    let err = imp.expect_err("out of the window").to_string();
    assert!(
        err.contains("a.log:5: requestReceivedTimestamp: 250.000 s before"),
        "{err}"
    );
    assert!(err.contains("reorder window"), "{err}");
    let skip = Policy {
        skip_bad: true,
        ..Policy::default()
    };
    let imp = read_audit(
        vec![("a.log".to_owned(), Cursor::new(text.into_bytes()))],
        AuditOptions::default(),
        skip,
    )
    .expect("skipping");
    let vols: Vec<String> = imp
        .trace
        .events
        .iter()
        .map(|e| match &e.op {
            Op::CreateVolume(c) => c.volume.to_string(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(vols, ["ns/a", "ns/c", "ns/b", "ns/d"]);
    assert_eq!(imp.report.skipped, 1);
    assert_eq!(imp.counts.mapped, 4);
}

/// Several files (two API servers) are read side by side and merged by time.
#[test]
fn files_are_merged_by_time() {
    let one: Vec<String> = (0..50)
        .map(|i| pvc(f64::from(i * 2), &format!("x{i}"), "ReadWriteOnce"))
        .collect();
    let two: Vec<String> = (0..50)
        .map(|i| pvc(f64::from(i * 2 + 1), &format!("y{i}"), "ReadWriteOnce"))
        .collect();
    let imp = read_files(
        &[("one.log", one.join("\n")), ("two.log", two.join("\n"))],
        AuditOptions::default(),
    )
    .expect("import");
    let ats: Vec<u64> = imp.trace.events.iter().map(|e| e.at).collect();
    assert_eq!(
        ats,
        (0..100u64).map(|i| i * 1_000_000_000).collect::<Vec<_>>()
    );
}

/// Memory holds the reorder window and the waiting attaches, not the log: ten times more
/// cycles hold no more requests at once.
#[test]
fn memory_does_not_grow_with_the_log() {
    let held = |cycles: u64| {
        let log = import::testgen::audit_log(cycles);
        let imp = read_files(&[("audit.log", log)], AuditOptions::default()).expect("import");
        assert_eq!(imp.counts.written, imp.trace.events.len() as u64);
        (imp.counts.mapped, imp.counts.max_held)
    };
    let (mapped_small, held_small) = held(100);
    let (mapped_big, held_big) = held(1000);
    assert!(
        mapped_big >= 9 * mapped_small,
        "{mapped_small} {mapped_big}"
    );
    // 10 s cycles: the 120 s window holds about 13 cycles of ~13 requests.
    assert!(held_small < 250, "{held_small}");
    assert!(held_big <= held_small + 15, "{held_small} {held_big}");
}

/// What a real cluster logs around a pod's and a PVC's end (seen in the test cluster's log):
/// the kubelet's final pod delete after the graceful one, and the pvc-protection controller's
/// update removing its finalizer from the deleted PVC. Neither is a dropped request nor a
/// resize.
#[test]
fn final_deletes_and_finalizer_updates_are_bookkeeping() {
    let imp = read(&[
        pvc(0.0, "d", "ReadWriteOnce"),
        pod(1.0, "p", "d"),
        ev(2.0, "delete", "pods", "", "ns", "p", ""),
        ev(2.5, "delete", "pods", "", "ns", "p", ""),
        ev(3.0, "delete", "persistentvolumeclaims", "", "ns", "d", ""),
        ev(
            3.1,
            "update",
            "persistentvolumeclaims",
            "",
            "ns",
            "d",
            r#","requestObject":{"metadata":{"deletionTimestamp":"2023-11-14T22:13:23Z","finalizers":[]},"spec":{"resources":{"requests":{"storage":"1Gi"}}}}"#,
        ),
    ]);
    let ops: Vec<_> = imp.trace.events.iter().map(|e| e.op.op_type()).collect();
    use trace_format::OpType::*;
    assert_eq!(ops, [CreateVolume, Attach, Detach, DeleteVolume]);
    let c = &imp.counts;
    assert_eq!(
        c.fixes.keys().collect::<Vec<_>>(),
        ["repeated pod deletes (the kubelet's final delete after the graceful one) were ignored"],
        "{c:?}"
    );
    assert_eq!(c.unrelated, 1, "the finalizer update: {c:?}");
}
