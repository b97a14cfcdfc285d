//! Kubernetes audit log import: the generated fixture, wrappers, bad input, and the real
//! samples in ../shared (skipped when absent).

use std::io::Cursor;
use std::path::PathBuf;

use import::audit::{AuditCounts, AuditImport, AuditOptions, read_audit};
use import::{ImportError, Policy};
use trace_format::{Encoding, Op, OpType, VolumeSource};

fn read(text: &str, opts: AuditOptions, policy: Policy) -> Result<AuditImport, ImportError> {
    read_audit(
        vec![(
            "audit.log".to_owned(),
            Cursor::new(text.as_bytes().to_vec()),
        )],
        opts,
        policy,
    )
}

/// Asserts that the trace passes the checker, through its JSON Lines encoding.
fn assert_valid(imp: &AuditImport) {
    let bytes = imp.trace.to_bytes(Encoding::Jsonl).expect("encode");
    let reader = trace_format::TraceReader::from_reader(Cursor::new(bytes), None, "t.jsonl")
        .expect("decode");
    let r = trace_format::check_trace(reader, "t.jsonl", 10, |_| {}).expect("check");
    assert_eq!(r.problems, 0, "{:?}", r.diagnostics);
}

fn ops(imp: &AuditImport) -> Vec<OpType> {
    imp.trace.events.iter().map(|e| e.op.op_type()).collect()
}

#[test]
fn generated_log_maps_every_cycle_and_validates() {
    let log = import::testgen::audit_log(10);
    let imp = read(&log, AuditOptions::default(), Policy::default()).expect("import");
    assert_valid(&imp);
    let c = &imp.counts;
    let lines = log.lines().count() as u64;
    assert_eq!(c.events, lines);
    assert_eq!(c.other_stage, 10, "one RequestReceived per cycle");
    assert_eq!(c.failed, 10, "one 403 per cycle");
    // The PVC get of each cycle.
    assert_eq!(c.unrelated, 10, "{c:?}");
    assert_eq!(c.not_growing, 10, "the PV controller's binding update");
    // Every binding reached its pod; the VolumeAttachment create and status write of each
    // cycle were read and each status completed its pod's data volume. Pods of every fourth
    // cycle also mount `shared-<ns>`, which no VolumeAttachment names: no observed time.
    assert_eq!(c.bindings, (10, 10));
    assert_eq!(c.volume_attachments, (20, 10));
    assert_eq!(c.attach_observed, (7, 3));
    // shared-team-0/1/2 are used before any create.
    assert_eq!(c.preexisting, 3);
    assert_eq!(imp.trace.header.volumes.len(), 3);
    let count = |t: OpType| ops(&imp).iter().filter(|o| **o == t).count();
    assert_eq!(count(OpType::CreateVolume), 12, "10 PVCs + 2 restores");
    assert_eq!(count(OpType::DeleteVolume), 12);
    assert_eq!(count(OpType::Attach), 10);
    assert_eq!(count(OpType::Detach), 10);
    assert_eq!(count(OpType::Snapshot), 10);
    assert_eq!(count(OpType::DeleteSnapshot), 10);
    assert_eq!(count(OpType::Resize), 10);
    assert_eq!(c.written, imp.trace.events.len() as u64);
    assert_eq!(c.ignored() + c.mapped, c.events);
    // Ids sequential, times sorted, names qualified, tenants from namespaces, observed kept:
    // the API latency, but for an attach the time from the pod create (t + 2 s) to its
    // volume's VolumeAttachment attached (t + 2.8 s); the node from the scheduler's binding.
    for (i, e) in imp.trace.events.iter().enumerate() {
        assert_eq!(e.id, i as u64);
        assert!(e.tenant.as_deref().is_some_and(|t| t.starts_with("team-")));
        match &e.op {
            Op::Attach(a) => {
                let cycle: u64 = a
                    .workload
                    .as_str()
                    .rsplit('-')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                assert_eq!(
                    a.node.as_deref(),
                    Some(format!("node-{}", cycle % 2).as_str())
                );
                let shared = cycle.is_multiple_of(4);
                assert_eq!(a.volumes.len(), if shared { 2 } else { 1 }, "{e:?}");
                assert_eq!(e.observed, (!shared).then_some(800_000_000), "{e:?}");
            }
            _ => assert!(
                e.observed
                    .is_some_and(|o| (4_000_000..7_000_000).contains(&o))
            ),
        }
    }
    let first = &imp.trace.events[0];
    assert_eq!(first.at, 0);
    match &first.op {
        Op::CreateVolume(c) => {
            assert_eq!(c.volume.as_str(), "team-0/data-0");
            assert_eq!(c.size, Some(10 << 30));
            assert_eq!(c.storage_class.as_deref(), Some("csi-standard"));
            assert_eq!(c.access_mode, Some(trace_format::AccessMode::ReadWriteOnce));
            assert_eq!(c.volume_mode, Some(trace_format::VolumeMode::Filesystem));
        }
        other => panic!("first event {other:?}"),
    }
    let restore = imp.trace.events.iter().find_map(|e| match &e.op {
        Op::CreateVolume(c) if c.source.is_some() => Some(c.clone()),
        _ => None,
    });
    assert_eq!(
        restore.and_then(|c| c.source),
        Some(VolumeSource::Snapshot("team-0/snap-0".into()))
    );
    assert_eq!(
        imp.trace.header.origin.map(|o| o.to_string()),
        Some("2025-11-21T04:40:00Z".to_owned())
    );
}

#[test]
fn failed_requests_can_be_kept() {
    let log = import::testgen::audit_log(2);
    let opts = AuditOptions {
        keep_failed: true,
        ..AuditOptions::default()
    };
    let imp = read(&log, opts, Policy::default()).expect("import");
    assert_eq!(imp.counts.failed, 0);
    assert_eq!(imp.counts.failed_kept, 2);
    // The forbidden PVC creates (level Metadata) now become volumes with default sizes.
    assert_eq!(imp.counts.metadata_volumes, 2);
    assert_valid(&imp);
}

/// A minimal v1 event line.
fn event(ts: &str, verb: &str, resource: &str, name: &str, extra: &str) -> String {
    format!(
        r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Request","stage":"ResponseComplete","verb":"{verb}","objectRef":{{"resource":"{resource}","namespace":"ns","name":"{name}"}},"responseStatus":{{"code":200}},"requestReceivedTimestamp":"{ts}","stageTimestamp":"{ts}"{extra}}}"#
    )
}

#[test]
fn lifecycle_fixes_keep_the_trace_valid() {
    let pod = |claims: &[&str]| {
        let vols: Vec<String> = claims
            .iter()
            .map(|c| format!(r#"{{"name":"{c}","persistentVolumeClaim":{{"claimName":"{c}"}}}}"#))
            .collect();
        format!(
            r#","requestObject":{{"spec":{{"volumes":[{}]}}}}"#,
            vols.join(",")
        )
    };
    let log = [
        // A pod using a PVC never created in the log: pre-existing.
        event(
            "2024-01-01T00:00:00.000001Z",
            "create",
            "pods",
            "p1",
            &pod(&["old"]),
        ),
        // Its PVC deleted while mounted: waits for the detach.
        event(
            "2024-01-01T00:00:01Z",
            "delete",
            "persistentvolumeclaims",
            "old",
            "",
        ),
        // A second pod on the same RWO volume without a node: the mount is left out.
        event(
            "2024-01-01T00:00:02Z",
            "create",
            "pods",
            "p2",
            &pod(&["old"]),
        ),
        event("2024-01-01T00:00:03Z", "delete", "pods", "p1", ""),
        // Unknown pod and snapshot deletes: dropped.
        event("2024-01-01T00:00:04Z", "delete", "pods", "ghost", ""),
        event(
            "2024-01-01T00:00:05Z",
            "delete",
            "volumesnapshots",
            "ghost",
            "",
        ),
        // Out of order in the file: sorted.
        event("2024-01-01T00:00:03.5Z", "delete", "pods", "p2", ""),
    ]
    .join("\n");
    let imp = read(&log, AuditOptions::default(), Policy::default()).expect("import");
    assert_valid(&imp);
    let got: Vec<(u64, OpType)> = imp
        .trace
        .events
        .iter()
        .map(|e| (e.at, e.op.op_type()))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, OpType::Attach),
            (1_999_999_000, OpType::Attach),
            (2_999_999_000, OpType::Detach),
            (2_999_999_000, OpType::DeleteVolume),
            (3_499_999_000, OpType::Detach),
        ]
    );
    assert_eq!(imp.trace.header.volumes[0].name.as_str(), "ns/old");
    let fixes: Vec<&String> = imp.counts.fixes.keys().collect();
    assert_eq!(fixes.len(), 4, "{fixes:?}");
}

#[test]
fn gke_and_aks_wrappers_are_unwrapped() {
    let inner = event(
        "2024-01-01T00:00:00Z",
        "create",
        "persistentvolumeclaims",
        "a",
        r#","requestObject":{"spec":{"resources":{"requests":{"storage":"5Gi"}}}}"#,
    );
    let aks = serde_json::json!({"category": "kube-audit", "properties": {"log": inner}});
    let other =
        serde_json::json!({"category": "kube-apiserver", "properties": {"log": "I0101 started"}});
    let records = serde_json::json!({"records": [aks, other]});
    let gke = serde_json::json!({
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "methodName": "io.k8s.core.v1.persistentvolumeclaims.delete",
            "resourceName": "core/v1/namespaces/ns/persistentvolumeclaims/a",
            "status": {"code": 0}
        },
        "timestamp": "2024-01-01T00:00:02.5Z",
        "resource": {"type": "k8s_cluster"}
    });
    let gke_snap = serde_json::json!({
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "methodName": "io.k8s.storage.snapshot.v1.volumesnapshots.create",
            "resourceName": "snapshot.storage.k8s.io/v1/namespaces/ns/volumesnapshots/s",
            "request": {"spec": {"source": {"persistentVolumeClaimName": "a"}}},
            "status": {"code": 0}
        },
        "timestamp": "2024-01-01T00:00:01Z"
    });
    let gke_denied = serde_json::json!({
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "methodName": "io.k8s.core.v1.persistentvolumeclaims.create",
            "resourceName": "core/v1/namespaces/ns/persistentvolumeclaims/b",
            "status": {"code": 7, "message": "forbidden"}
        },
        "timestamp": "2024-01-01T00:00:01Z"
    });
    let log = format!("{records}\n{gke}\n{gke_snap}\n{gke_denied}\n");
    let imp = read(&log, AuditOptions::default(), Policy::default()).expect("import");
    assert_valid(&imp);
    assert_eq!(
        ops(&imp),
        vec![OpType::CreateVolume, OpType::Snapshot, OpType::DeleteVolume]
    );
    assert_eq!(imp.counts.foreign, 1);
    assert_eq!(imp.counts.failed, 1);
    assert_eq!(imp.trace.events[2].at, 2_500_000_000);
    // A pretty-printed records document (the whole file is one value).
    let pretty = serde_json::to_string_pretty(&records).expect("json");
    let imp = read(&pretty, AuditOptions::default(), Policy::default()).expect("import");
    assert_eq!(ops(&imp), vec![OpType::CreateVolume]);
}

#[test]
fn bad_lines_name_file_line_and_field() {
    let good = event("2024-01-01T00:00:00Z", "delete", "pods", "x", "");
    let bad_size = event(
        "2024-01-01T00:00:01Z",
        "create",
        "persistentvolumeclaims",
        "a",
        r#","requestObject":{"spec":{"resources":{"requests":{"storage":"ten gigs"}}}}"#,
    );
    let bad_time = event("yesterday", "delete", "persistentvolumeclaims", "b", "");
    let log = format!("{good}\n{{not json\n{bad_size}\n{bad_time}\n[1]\n");
    let e = read(&log, AuditOptions::default(), Policy::default()).expect_err("bad");
    assert!(
        e.to_string().starts_with("audit.log:2: line: not JSON"),
        "{e}"
    );
    let policy = Policy {
        skip_bad: true,
        keep_first: 10,
    };
    let imp = read(&log, AuditOptions::default(), policy).expect("skip");
    let located: Vec<String> = imp
        .report
        .first_skipped
        .iter()
        .map(|b| format!("{}:{}", b.line, b.field))
        .collect();
    assert_eq!(
        located,
        [
            "2:line",
            "3:requestObject.spec.resources.requests.storage",
            "4:requestReceivedTimestamp",
            "5:line"
        ]
    );
    assert_eq!(imp.report.skipped, 4);
}

fn shared() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/trace-samples/k8s-audit-jsonl");
    dir.exists().then_some(dir)
}

#[expect(
    clippy::print_stderr,
    reason = "the skip note when ../shared is absent"
)]
fn skip() {
    crate::require_samples(std::path::Path::new(
        "../shared/trace-samples/k8s-audit-jsonl",
    ));
    eprintln!("skipped: ../shared/trace-samples/k8s-audit-jsonl does not exist");
}

fn import_files(paths: &[PathBuf]) -> AuditCounts {
    let out = tempfile::NamedTempFile::new().expect("tmp");
    let o = out.path().to_owned();
    let (_, counts) = import::audit::import_audit(
        paths,
        AuditOptions::default(),
        Policy::default(),
        move |h| trace_format::TraceWriter::create(&o, Some(Encoding::Jsonl), &h),
    )
    .expect("import");
    let r = trace_format::check_trace(
        trace_format::TraceReader::open(out.path()).expect("open"),
        "out",
        10,
        |_| {},
    )
    .expect("check");
    assert_eq!(r.problems, 0);
    counts
}

/// Expected counts derived independently with python3 from the files:
/// `stage == ResponseComplete`, then `responseStatus.code >= 400`; the rest concern no
/// storage object (the only pod requests are three `list`s).
#[test]
fn real_audit2rbac_logs() {
    let Some(dir) = shared() else { return skip() };
    let c = import_files(&[dir.join("audit2rbac-demo.log")]);
    assert_eq!(
        (c.events, c.other_stage, c.failed, c.unrelated),
        (37, 0, 11, 26)
    );
    assert_eq!(c.written, 0);
    let c = import_files(&[dir.join("audit2rbac-demo-original-v1beta1.log")]);
    assert_eq!(
        (c.events, c.other_stage, c.failed, c.unrelated),
        (757, 320, 101, 336)
    );
    assert_eq!(c.mapped, 0);
}

/// Falco's single-event captures: one pod create without PVCs, one exec at stage
/// ResponseStarted, four completed requests on other resources.
#[test]
fn real_falco_events() {
    let Some(dir) = shared() else { return skip() };
    let mut files: Vec<PathBuf> = fs_err::read_dir(dir.join("falco"))
        .expect("falco/")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let c = import_files(&files);
    assert_eq!(c.events, 6);
    assert_eq!(c.other_stage, 1);
    assert_eq!(c.pods_without_pvcs, 1);
    assert_eq!(c.unrelated, 4);
    assert_eq!(c.written, 0);
}

/// A real audit log written by the local test cluster's kube-apiserver v1.36.3
/// (`testenv/smoke.sh`, committed as `testenv/fixtures/audit-local.jsonl`): one PVC on a
/// pre-created PV, a pod using it, a snapshot, a resize request, then teardown.
/// Counts derived independently with python3 from the file: 87 events, 18 at stage
/// ResponseStarted (watches), 15 failed (404s of `get` and one pod delete).
#[test]
fn real_local_cluster_audit_log() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testenv/fixtures/audit-local.jsonl");
    let text = fs_err::read_to_string(&path).expect("fixture");
    let imp = read(&text, AuditOptions::default(), Policy::default()).expect("import");
    assert_valid(&imp);
    let c = &imp.counts;
    assert_eq!((c.events, c.other_stage, c.failed), (87, 18, 15));
    assert_eq!(
        ops(&imp),
        [
            OpType::CreateVolume,
            OpType::Attach,
            OpType::Snapshot,
            OpType::DeleteSnapshot,
            OpType::Resize,
            OpType::Detach,
            OpType::DeleteVolume,
        ]
    );
    // Every kept request carries its API latency (requestReceived → stageTimestamp), and
    // the namespace is the tenant. The attach has its node from the scheduler's binding, and
    // no observed time: the smoke test's volume is a pre-created PV no attacher handles, so no
    // VolumeAttachment reports it attached.
    for e in &imp.trace.events {
        assert!(e.tenant.is_some(), "{e:?}");
        match &e.op {
            Op::Attach(a) => {
                assert_eq!(a.node.as_deref(), Some("testenv-node-1"));
                assert_eq!(e.observed, None);
            }
            _ => assert!(e.observed.is_some(), "{e:?}"),
        }
    }
    assert_eq!(imp.counts.bindings, (1, 1));
    assert_eq!(imp.counts.attach_observed, (0, 1));
}

/// One completed request as an API server logs it at level RequestResponse.
#[allow(clippy::needless_pass_by_value)] // called with `json!` bodies
fn request_line(
    s: u64,
    verb: &str,
    group: &str,
    resource: &str,
    ns: Option<&str>,
    name: &str,
    body: serde_json::Value,
) -> String {
    let t = |us: u64| {
        format!(
            "{:.6}",
            jiff::Timestamp::from_microsecond(1_763_700_000_000_000 + us as i64).unwrap()
        )
    };
    let mut object_ref =
        serde_json::json!({"resource": resource, "name": name, "apiVersion": "v1"});
    if !group.is_empty() {
        object_ref["apiGroup"] = group.into();
    }
    if let Some(ns) = ns {
        object_ref["namespace"] = ns.into();
    }
    serde_json::json!({
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "RequestResponse",
        "auditID": format!("00000000-0000-4000-8000-{s:012x}"), "stage": "ResponseComplete",
        "requestURI": "/", "verb": verb, "user": {"username": "alice"},
        "objectRef": object_ref, "responseStatus": {"metadata": {}, "code": 200},
        "requestReceivedTimestamp": t(s * 1_000_000),
        "stageTimestamp": t(s * 1_000_000 + 5_000),
        "requestObject": body,
    })
    .to_string()
}

/// Attributes-class changes (a class created with its parameters, a PVC created with one, a
/// merge patch and a JSON patch changing it, an update repeating it) and a failed expansion
/// lowered again: `modify_volume` and the recovering `resize`, in a trace the checker accepts.
#[test]
fn class_changes_and_expansion_recovery_map_to_their_events() {
    use serde_json::json;
    let pvc = |class: &str, size: &str| {
        json!({"metadata": {"name": "db", "namespace": "shop"},
               "spec": {"accessModes": ["ReadWriteOnce"], "volumeAttributesClassName": class,
                        "resources": {"requests": {"storage": size}}}})
    };
    let log = [
        request_line(
            1,
            "create",
            "storage.k8s.io",
            "volumeattributesclasses",
            None,
            "gold",
            json!({"metadata": {"name": "gold"}, "driverName": "ebs.csi.aws.com",
                   "parameters": {"iops": "5000", "throughput": "250"}}),
        ),
        request_line(2, "create", "", "persistentvolumeclaims", Some("shop"), "db", pvc("silver", "10Gi")),
        request_line(3, "patch", "", "persistentvolumeclaims", Some("shop"), "db",
            json!({"spec": {"volumeAttributesClassName": "gold"}})),
        // A whole-object update that repeats the class: no change.
        request_line(4, "update", "", "persistentvolumeclaims", Some("shop"), "db", pvc("gold", "10Gi")),
        request_line(5, "patch", "", "persistentvolumeclaims", Some("shop"), "db",
            json!([{"op": "replace", "path": "/spec/volumeAttributesClassName", "value": "silver"}])),
        // An expansion the backend refuses, then the request lowered to above the old size.
        request_line(6, "patch", "", "persistentvolumeclaims", Some("shop"), "db",
            json!({"spec": {"resources": {"requests": {"storage": "100Ti"}}}})),
        request_line(7, "patch", "", "persistentvolumeclaims", Some("shop"), "db",
            json!({"spec": {"resources": {"requests": {"storage": "20Gi"}}}})),
        // Lowering again below the old size is not a recovery: counted, nothing written.
        request_line(8, "patch", "", "persistentvolumeclaims", Some("shop"), "db",
            json!({"spec": {"resources": {"requests": {"storage": "5Gi"}}}})),
    ]
    .join("\n");
    let imp = read(&log, AuditOptions::default(), Policy::default()).expect("import");
    assert_valid(&imp);
    let evs: Vec<String> = imp
        .trace
        .events
        .iter()
        .map(|e| match &e.op {
            Op::CreateVolume(c) => format!("{} create {}", e.at / 1_000_000_000, c.volume),
            Op::ModifyVolume(m) => {
                format!("{} modify {} {}", e.at / 1_000_000_000, m.volume, m.class)
            }
            Op::Resize(r) => format!("{} resize {} {}", e.at / 1_000_000_000, r.volume, r.size),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        evs,
        [
            // Times from the log's first request (the class create).
            "1 create shop/db",
            "1 modify shop/db silver",
            "2 modify shop/db gold",
            "4 modify shop/db silver",
            "5 resize shop/db 109951162777600",
            "6 resize shop/db 21474836480",
        ]
    );
    let classes = &imp.trace.header.attributes_classes;
    assert_eq!(
        classes.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
        ["gold", "silver"]
    );
    assert_eq!(classes["gold"]["iops"], "5000");
    assert!(
        classes["silver"].is_empty(),
        "not created in the log: {classes:?}"
    );
    // The whole-object update restating 10Gi, and the lowering to 5Gi.
    assert_eq!(imp.counts.not_growing, 2);
}

/// A group snapshot over labelled PVCs (its members made by the snapshot controller, one of
/// them restored), its delete, and a node put out of service: `group_snapshot` with the
/// volumes the selector matched, `create_volume` from a `group_member`, `delete_group_snapshot`
/// and `force_detach`, in a trace the checker accepts.
#[test]
fn group_snapshots_and_out_of_service_nodes_map_to_their_events() {
    use serde_json::json;
    let pvc = |name: &str, app: &str| {
        json!({"metadata": {"name": name, "namespace": "shop", "labels": {"app": app}},
               "spec": {"accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}}}})
    };
    let member = |name: &str, claim: &str| {
        json!({"metadata": {"name": name, "namespace": "shop",
                            "ownerReferences": [{"kind": "VolumeGroupSnapshot", "name": "g1",
                                                 "apiVersion": "groupsnapshot.storage.k8s.io/v1"}]},
               "spec": {"source": {"persistentVolumeClaimName": claim}}})
    };
    let snap_group = "groupsnapshot.storage.k8s.io";
    let log = [
        request_line(
            1,
            "create",
            "",
            "persistentvolumeclaims",
            Some("shop"),
            "data",
            pvc("data", "db"),
        ),
        request_line(
            2,
            "create",
            "",
            "persistentvolumeclaims",
            Some("shop"),
            "wal",
            pvc("wal", "db"),
        ),
        request_line(
            3,
            "create",
            "",
            "persistentvolumeclaims",
            Some("shop"),
            "web",
            pvc("web", "web"),
        ),
        request_line(
            4,
            "create",
            snap_group,
            "volumegroupsnapshots",
            Some("shop"),
            "g1",
            json!({"metadata": {"name": "g1"},
                   "spec": {"source": {"selector": {"matchLabels": {"app": "db"}}}}}),
        ),
        request_line(
            5,
            "create",
            "snapshot.storage.k8s.io",
            "volumesnapshots",
            Some("shop"),
            "snapshot-aa",
            member("snapshot-aa", "data"),
        ),
        request_line(
            6,
            "create",
            "snapshot.storage.k8s.io",
            "volumesnapshots",
            Some("shop"),
            "snapshot-bb",
            member("snapshot-bb", "wal"),
        ),
        request_line(
            7,
            "create",
            "",
            "persistentvolumeclaims",
            Some("shop"),
            "data-r",
            json!({"metadata": {"name": "data-r", "namespace": "shop"},
                   "spec": {"accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}},
                            "dataSource": {"kind": "VolumeSnapshot", "name": "snapshot-aa",
                                           "apiGroup": "snapshot.storage.k8s.io"}}}),
        ),
        request_line(
            8,
            "patch",
            "",
            "nodes",
            None,
            "node-7",
            json!({"spec": {"taints": [{"key": "node.kubernetes.io/out-of-service",
                                        "value": "nodeshutdown", "effect": "NoExecute"}]}}),
        ),
        // The same taint written again (another patch): still one outage.
        request_line(
            9,
            "patch",
            "",
            "nodes",
            None,
            "node-7",
            json!({"spec": {"taints": [{"key": "node.kubernetes.io/out-of-service",
                                        "value": "nodeshutdown", "effect": "NoExecute"}]}}),
        ),
        request_line(
            10,
            "delete",
            snap_group,
            "volumegroupsnapshots",
            Some("shop"),
            "g1",
            json!(null),
        ),
        request_line(
            11,
            "delete",
            "snapshot.storage.k8s.io",
            "volumesnapshots",
            Some("shop"),
            "snapshot-aa",
            json!(null),
        ),
        request_line(
            12,
            "delete",
            "snapshot.storage.k8s.io",
            "volumesnapshots",
            Some("shop"),
            "snapshot-bb",
            json!(null),
        ),
    ]
    .join("\n");
    let imp = read(&log, AuditOptions::default(), Policy::default()).expect("import");
    assert_valid(&imp);
    let evs: Vec<String> = imp
        .trace
        .events
        .iter()
        .map(|e| match &e.op {
            Op::CreateVolume(c) => format!("create {} {:?}", c.volume, c.source),
            Op::GroupSnapshot(g) => format!("group {} {:?}", g.group, g.volumes),
            Op::DeleteGroupSnapshot(g) => format!("delete group {}", g.group),
            Op::ForceDetach(n) => format!("force detach {}", n.node),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        evs,
        [
            "create shop/data None",
            "create shop/wal None",
            "create shop/web None",
            r#"group shop/g1 ["shop/data", "shop/wal"]"#,
            r#"create shop/data-r Some(GroupMember(GroupMember { group: "shop/g1", volume: "shop/data" }))"#,
            "force detach node-7",
            "delete group shop/g1",
        ]
    );
    // The controller's member deletes are part of the group's: nothing dropped.
    assert!(imp.counts.fixes.is_empty(), "{:?}", imp.counts.fixes);
}
