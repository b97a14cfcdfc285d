//! Changed-block tracking through Kubernetes, on testenv's real node: cnsreplay-csi's
//! SnapshotMetadata behind testenv's stand-in for the external-snapshot-metadata sidecar
//! (`testenv/README.md`), called as a backup application calls it — the driver's
//! SnapshotMetadataService, an audience-scoped token of the runner's own ServiceAccount, TLS.
//!
//! `traces/incremental-backup-node.yaml`: 8 MiB of verify blocks, snapshot s1, random 4 KiB
//! verify rewrites of them, snapshot s2. So s1's allocated blocks must be exactly [0, 8 MiB),
//! and the delta must be exactly the second writer's written set — which its pod printed on
//! its log — computed here from `io/5.written`, independently of the provider's check. The
//! service's refusals (a token for another audience, an account that
//! may not read the namespace's snapshots, a request without a snapshot) are checked with the
//! published client directly, and through a run (the op's class and message).

use std::path::Path;

use crate::{cnsreplay_within, ok};

const MIB: u64 = 1 << 20;

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("json")
}

fn record(events: &[serde_json::Value], id: u64) -> &serde_json::Value {
    events
        .iter()
        .find(|e| e["id"] == id)
        .unwrap_or_else(|| panic!("no record of event {id}"))
}

fn served(c: &crate::Cluster) -> bool {
    if c.get("TESTENV_SNAPSHOT_METADATA").is_empty() {
        testkit::skip::missing(
            "CSI",
            "testenv serves no SnapshotMetadataService (TESTENV_SNAPSHOT_METADATA is empty: was \
             cnsreplay-snapshot-metadata-sidecar built before testenv/up.sh?)",
        );
        return false;
    }
    true
}

#[test]
fn changed_blocks_through_the_snapshot_metadata_service_on_the_real_node() {
    let Some(c) = crate::real_node_cluster() else {
        return;
    };
    if !served(&c) {
        return;
    }
    let trace = "traces/incremental-backup-node.yaml";
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = c.runner_kubeconfig_for(dir.path(), trace);
    let run = dir.path().join("run");
    let args = crate::kube_run_args(&c, &kc, trace, &run, true, &[]);
    ok(&cnsreplay_within(&args, 600));
    let ev = crate::run_events(&run);
    for e in &ev {
        assert_eq!(e["outcome"], "ok", "{e}");
    }
    // The kube provider's listings (and every other file of the run) as their schemas have
    // them, as the local provider's.
    crate::assert_run_dir_matches_schemas(&run);
    // Open loop: each writer must have ended before the next snapshot was requested, or the
    // expected sets below would not hold (the trace leaves 23 s for an I/O pod to start).
    for (writer, snap) in [(3, 4), (5, 6)] {
        let (w, s) = (record(&ev, writer), record(&ev, snap));
        assert!(
            w["completed"].as_u64() < s["started"].as_u64(),
            "writer {writer} ended after snapshot {snap} was requested: {w} / {s}"
        );
    }
    let mut accounts = std::collections::BTreeSet::new();
    // The second writer's written set, back from its pod's log, as blocks of 4 KiB.
    let written = iogen::written::read_records(&run.join("io/5.written")).expect("io/5.written");
    assert!(!written.is_empty(), "the writer's pod gave back no writes");
    let mut rewritten: Vec<u64> = written
        .iter()
        .flat_map(|w| (w.offset / 4096..(w.offset + w.len).div_ceil(4096)).map(|b| b * 4096))
        .collect();
    rewritten.sort_unstable();
    rewritten.dedup();
    let blocks = |ranges: &serde_json::Value| -> Vec<u64> {
        ranges
            .as_array()
            .expect("ranges")
            .iter()
            .flat_map(|r| {
                let (o, l) = (r[0].as_u64().unwrap(), r[1].as_u64().unwrap());
                (o / 4096..(o + l) / 4096).map(|b| b * 4096)
            })
            .collect()
    };
    for (id, op, base) in [
        (7, "snapshot_allocated", None),
        (8, "snapshot_delta", Some("s1")),
    ] {
        let f = json(&run.join(format!("cbt/{id}.json")));
        assert_eq!(f["op"], op, "{f:#}");
        assert_eq!(f["volume"], "data", "{f:#}");
        assert_eq!(f["base"].as_str(), base, "{f:#}");
        if base.is_none() {
            assert_eq!(
                f["ranges"],
                serde_json::json!([[0, 8 * MIB]]),
                "the service must list exactly the 8 MiB written ({f:#})"
            );
        } else {
            assert_eq!(
                blocks(&f["ranges"]),
                rewritten,
                "the delta must be exactly the blocks the second writer wrote ({} of them)",
                rewritten.len()
            );
            let c = &f["check"];
            assert_eq!(c["phases"], serde_json::json!([3, 5]), "{c:#}");
            assert_eq!(
                (c["missing"].as_u64(), c["extra_blocks"].as_u64()),
                (Some(0), Some(0)),
                "{c:#}"
            );
            assert_eq!(c["blocks_in_window"], rewritten.len(), "{c:#}");
        }
        assert_eq!(f["image_size"], 64 * MIB, "{f:#}");
        assert_eq!(f["service"]["name"], c.get("TESTENV_CSI_DRIVER"), "{f:#}");
        assert_eq!(
            f["service"]["address"],
            c.get("TESTENV_SNAPSHOT_METADATA"),
            "{f:#}"
        );
        // The token was the runner's own account's (the pieces' account in `cnsreplay`).
        let acct = f["account"].as_str().expect("account");
        assert!(acct.starts_with("cnsreplay/"), "{f:#}");
        accounts.insert(acct.replace('/', ":"));
        // Each step a client waits for, in order, inside the op.
        let r = record(&ev, id);
        let names: Vec<&str> = r["phases"]
            .as_array()
            .expect("phases")
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        let want: &[&str] = if base.is_some() {
            &[
                "resolved",
                "token",
                "connected",
                "first-range",
                "listed",
                "checked",
            ]
        } else {
            &["resolved", "token", "connected", "first-range", "listed"]
        };
        assert_eq!(names, want, "{r}");
        let first = f["timing"]["first_range_ns"].as_u64().expect("first range");
        assert!(first <= f["timing"]["total_ns"].as_u64().unwrap(), "{f:#}");
    }
    // The stand-in authorized the runner's account for each call.
    let log =
        std::fs::read_to_string(Path::new(c.get("TESTENV_DIR")).join("logs/snapshot-metadata.log"))
            .expect("sidecar log");
    let ns = format!("cnsreplay-{}", crate::run_id(&run));
    assert_eq!(
        accounts.len(),
        1,
        "one account for both calls: {accounts:?}"
    );
    let who = format!("system:serviceaccount:{}", accounts.first().unwrap());
    assert!(
        log.contains(&format!("GetMetadataAllocated {ns}/s1 for {who}"))
            && log.contains(&format!("→ {ns}/s2 for {who}")),
        "the sidecar's log lacks the run's calls as {who}:\n{log}"
    );
    crate::nothing_left(&c, &run);
}

/// A run whose token account may not read the run's snapshots: the listing fails with class
/// `forbidden`, the service's PERMISSION_DENIED quoted; nothing is left.
#[test]
fn an_account_that_may_not_read_snapshots_is_refused_by_the_service() {
    let Some(c) = crate::real_node_cluster() else {
        return;
    };
    if !served(&c) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("cbt-denied.yaml");
    std::fs::write(
        &trace,
        "format: cnsreplay-trace\nversion: 3\nprovenance: {generator: hand-written}\n\
         defaults: {storage_class: cnsreplay-csi, snapshot_class: cnsreplay-csi, volume_size: 16Mi}\n\
         events:\n\
         - {at: 0, id: 1, create_volume: {volume: v, volume_mode: block}}\n\
         - {at: 0, id: 2, snapshot: {volume: v, snapshot: s1}}\n\
         - {at: 0, id: 3, snapshot_allocated: {snapshot: s1}}\n\
         - {at: 1s, id: 4, delete_snapshot: {snapshot: s1}}\n\
         - {at: 1s, id: 5, delete_volume: {volume: v}}\n",
    )
    .expect("trace");
    let trace = trace.to_str().expect("utf-8");
    let sa = format!("cbt-denied-{}", std::process::id());
    c.apply_rbac();
    c.kubectl(&["create", "serviceaccount", &sa, "-n", "cnsreplay"]);
    let kc = c.runner_kubeconfig_for(dir.path(), trace);
    let run = dir.path().join("run");
    let account = format!("cnsreplay/{sa}");
    let args = crate::kube_run_args(&c, &kc, trace, &run, false, &["--cbt-account", &account]);
    let out = cnsreplay_within(&args, 300);
    c.kubectl(&["delete", "serviceaccount", &sa, "-n", "cnsreplay"]);
    assert!(
        run.join("events.jsonl").exists(),
        "no run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ev = crate::run_events(&run);
    let r = record(&ev, 3);
    assert_eq!(r["outcome"], "error", "{r}");
    assert_eq!(r["error_class"], "forbidden", "{r}");
    let msg = r["error"].as_str().unwrap_or_default();
    assert!(
        msg.contains("PermissionDenied")
            && msg.contains(&format!(
                "system:serviceaccount:cnsreplay:{sa} may not get volumesnapshots"
            )),
        "{msg}"
    );
    assert!(
        !run.join("cbt/3.json").exists(),
        "a refused listing writes no result"
    );
    crate::nothing_left(&c, &run);
}

/// Pre-flight: a trace listing changed blocks of snapshots whose driver advertises no
/// SnapshotMetadataService is refused before anything is created, naming the driver and the
/// event.
#[test]
fn a_driver_without_a_snapshot_metadata_service_is_refused_before_the_clock() {
    let Some(c) = crate::real_node_cluster() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let class = format!("cbt-no-service-{}", std::process::id());
    let driver = "no-service.cnsreplay.dev";
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshotClass\nmetadata: \
             {{name: {class}}}\ndriver: {driver}\ndeletionPolicy: Delete\n"
        ),
    );
    let trace = dir.path().join("cbt-no-service.yaml");
    std::fs::write(
        &trace,
        format!(
            "format: cnsreplay-trace\nversion: 3\nprovenance: {{generator: hand-written}}\n\
             defaults: {{storage_class: cnsreplay-csi, volume_size: 16Mi}}\n\
             events:\n\
             - {{at: 0, id: 1, create_volume: {{volume: v}}}}\n\
             - {{at: 0, id: 2, snapshot: {{volume: v, snapshot: s1, class: {class}}}}}\n\
             - {{at: 0, id: 3, snapshot_allocated: {{snapshot: s1}}}}\n"
        ),
    )
    .expect("trace");
    let trace = trace.to_str().expect("utf-8");
    let kc = c.runner_kubeconfig_for(dir.path(), trace);
    let run = dir.path().join("run");
    let args = crate::kube_run_args(&c, &kc, trace, &run, false, &[]);
    let out = cnsreplay_within(&args, 120);
    c.kubectl(&["delete", "volumesnapshotclass", &class]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("the cluster lacks what the trace needs (nothing was created)")
            && err.contains(&format!(
                "the trace lists changed blocks (snapshot_allocated, snapshot_delta) of \
                 snapshots of CSI driver {driver} ({trace}: event 2 (at 0.000s)): no \
                 SnapshotMetadataService \"{driver}\""
            )),
        "{err}"
    );
}

/// The service's own refusals, called with the published client as any backup application
/// would: a token for another audience (UNAUTHENTICATED), the right audience for an account
/// that may not read the namespace's snapshots (PERMISSION_DENIED), a request without a
/// snapshot name (INVALID_ARGUMENT), and an authorized account naming a snapshot that does
/// not exist (UNAVAILABLE, as upstream answers).
#[test]
fn the_service_checks_audience_access_and_request() {
    let Some(c) = crate::real_node_cluster() else {
        return;
    };
    if !served(&c) {
        return;
    }
    c.apply_rbac();
    let driver = c.get("TESTENV_CSI_DRIVER").to_owned();
    let audience = c
        .kubectl(&[
            "get",
            "snapshotmetadataservices.cbt.storage.k8s.io",
            &driver,
            "-o",
            "jsonpath={.spec.audience}",
        ])
        .trim()
        .to_owned();
    let sa = format!("cbt-audience-{}", std::process::id());
    let reader = format!("cbt-reader-{}", std::process::id());
    for a in [&sa, &reader] {
        c.kubectl(&["create", "serviceaccount", a, "-n", "cnsreplay"]);
    }
    let subject = format!("--serviceaccount=cnsreplay:{reader}");
    c.kubectl(&[
        "create",
        "rolebinding",
        &reader,
        "-n",
        "cnsreplay",
        "--role=cnsreplay",
        &subject,
    ]);
    let token = |account: &str, aud: &str| {
        c.kubectl(&[
            "create",
            "token",
            account,
            "-n",
            "cnsreplay",
            "--audience",
            aud,
        ])
        .trim()
        .to_owned()
    };
    let (wrong, denied, allowed) = (
        token(&sa, "not-the-snapshot-metadata-service"),
        token(&sa, &audience),
        token(&reader, &audience),
    );
    let svc = snapshot_metadata::Service {
        name: driver,
        audience,
        address: c.get("TESTENV_SNAPSHOT_METADATA").to_owned(),
        ca_cert: std::fs::read(c.get("TESTENV_CA")).expect("testenv CA"),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let answers: Vec<(tonic::Code, String)> = rt.block_on(async {
        let ch = snapshot_metadata::connect(&svc).await.expect("TLS channel");
        let mut client =
            snapshot_metadata::pb::snapshot_metadata_client::SnapshotMetadataClient::new(ch);
        let mut out = Vec::new();
        for (token, snapshot) in [
            (&wrong, "s1"),
            (&denied, "s1"),
            (&allowed, ""),
            (&allowed, "no-such-snapshot"),
        ] {
            let r = client
                .get_metadata_allocated(snapshot_metadata::pb::GetMetadataAllocatedRequest {
                    security_token: token.clone(),
                    namespace: "cnsreplay".to_owned(),
                    snapshot_name: snapshot.to_owned(),
                    starting_offset: 0,
                    max_results: 16,
                })
                .await;
            out.push(match r {
                Ok(_) => (tonic::Code::Ok, String::new()),
                Err(s) => (s.code(), s.message().to_owned()),
            });
        }
        out
    });
    c.kubectl(&["delete", "rolebinding", &reader, "-n", "cnsreplay"]);
    for a in [&sa, &reader] {
        c.kubectl(&["delete", "serviceaccount", a, "-n", "cnsreplay"]);
    }
    let codes: Vec<tonic::Code> = answers.iter().map(|a| a.0).collect();
    assert_eq!(
        codes,
        [
            tonic::Code::Unauthenticated,
            tonic::Code::PermissionDenied,
            tonic::Code::InvalidArgument,
            tonic::Code::Unavailable,
        ],
        "{answers:#?}"
    );
    assert!(
        answers[1].1.contains(&format!(
            "system:serviceaccount:cnsreplay:{sa} may not get volumesnapshots"
        )),
        "{answers:#?}"
    );
    assert_eq!(answers[2].1, "snapshot_name is required", "{answers:#?}");
    assert!(
        answers[3]
            .1
            .contains("cnsreplay/no-such-snapshot does not exist"),
        "{answers:#?}"
    );
}
