//! The pod path on a cluster: a pod that will not start ends its operation in seconds with the
//! kubelet's reason, Warnings the cluster retries are counted instead of failing, a
//! WaitForFirstConsumer claim that cannot be provisioned is quoted, and a stop while stream
//! pods start ends the run at once. The image and seccomp cases need testenv's real node
//! (`TESTENV_REAL_NODE=1`): kwok's nodes pull nothing and run no container.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use provider_kube::KubeConfig;
use replay::{EventRecord, Outcome, RunControl, RunOptions};
use trace_format::OpType;

use crate::common::*;

pub(crate) fn write_trace(dir: &Path, header: &str, body: &str) -> PathBuf {
    let t = format!(
        "format: cnsreplay-trace\nversion: 1\ndefaults: {{volume_size: 64Mi}}\n{header}events:\n{body}"
    );
    let p = dir.join("trace.yaml");
    std::fs::write(&p, t).unwrap();
    p
}

/// The real node's label selector (`KEY=true`), or None after the skip notice (a failure with
/// `CNSREPLAY_REQUIRE_REAL_NODE=1`).
pub(crate) fn real_node(env: &TestEnv) -> Option<(String, String)> {
    let label = env.vars().get("TESTENV_REAL_NODE_LABEL").filter(|l| {
        !l.is_empty()
            && env
                .vars()
                .get("TESTENV_REAL_NODE")
                .is_some_and(|n| !n.is_empty())
    });
    match label {
        Some(l) => Some((l.clone(), "true".to_owned())),
        None => {
            testkit::skip::missing(
                "REAL_NODE",
                "no real node (TESTENV_REAL_NODE=1 testenv/up.sh)",
            );
            None
        }
    }
}

/// A provider whose pods all go to the real node, with testenv's iogen image and profile.
pub(crate) fn on_real_node(env: &TestEnv, (key, value): &(String, String)) -> KubeConfig {
    let mut cfg = KubeConfig {
        storage_class: env.vars().get("TESTENV_STORAGE_CLASS").cloned(),
        iogen_image: env
            .vars()
            .get("TESTENV_IOGEN_IMAGE")
            .cloned()
            .unwrap_or_else(|| KubeConfig::default().iogen_image),
        ..KubeConfig::default()
    };
    cfg.pod.node_selector.insert(key.clone(), value.clone());
    cfg.pod.iogen_seccomp_profile = env
        .vars()
        .get("TESTENV_IOGEN_SECCOMP")
        .filter(|s| !s.is_empty())
        .cloned();
    cfg
}

/// An image name in testenv's registry that does not exist there.
pub(crate) fn missing_image(env: &TestEnv, tag: &str) -> String {
    let reg = env
        .vars()
        .get("TESTENV_REGISTRY")
        .map_or("127.0.0.1:5000", String::as_str);
    format!("{reg}/cnsreplay/no-such-image:{tag}")
}

pub(crate) fn nothing_left(rt: &tokio::runtime::Runtime, c: &kube::Client, run_id: &str) {
    let left = rt.block_on(run_objects(c, run_id));
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The trace of one workload with an `io_phase` on a file-system volume, and the rest of its
/// life (the detach late enough that an `io_phase` that cannot start has failed by then, also
/// when a loaded CI takes 15 s to attach the workload's volume first: a detach deletes the
/// workload's I/O pods).
const IO_PHASE_TRACE: &str = "  - {at: 0s, create_volume: {volume: v}}\n  \
     - {at: 0s, attach: {workload: w, volumes: [v]}}\n  \
     - {at: 0s, io_phase: {workload: w, volume: v, pattern: random, read_pct: 50, block_size: 4Ki, load: {depth: 1}, duration: 3s}}\n  \
     - {at: 30s, detach: {workload: w}}\n  \
     - {at: 30s, delete_volume: {volume: v}}\n";

/// A new user's first run: an image no registry has. The workload's pod, an `io_phase`'s pod
/// and an I/O stream's pod each end in seconds with `image_pull_failed` naming the image (not
/// a 300 s timeout waiting "for its first API call"), the trace's later operations are not
/// held up by them, and nothing is left.
#[test]
fn missing_images_end_workload_io_phase_and_stream_pods_in_seconds() {
    let Some(env) = testenv() else { return };
    let Some(node) = real_node(&env) else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    let dir = tempfile::tempdir().unwrap();

    // The workload's image.
    let pause = missing_image(&env, "pause");
    let trace = write_trace(
        dir.path(),
        "",
        "  - {at: 0s, create_volume: {volume: v}}\n  \
         - {at: 0s, attach: {workload: w, volumes: [v]}}\n  \
         - {at: 1s, delete_volume: {volume: v}}\n",
    );
    let run_dir = dir.path().join("workload");
    let cfg = KubeConfig {
        pause_image: pause.clone(),
        ..on_real_node(&env, &node)
    };
    let (out, _p) = replay_run(&trace, &run_dir, env.provider_for(cfg, &trace));
    let recs = events(&run_dir);
    // From `attached` the real node's kubelet mounts the volume only after its next
    // volumes-in-use report (up to its 10 s status period, docs/PERFORMANCE.md "Pod start on
    // the real node"), then pulls: the verdict comes within 20 s, the op's timeout is minutes.
    let msg = failed_within(record(&recs, OpType::Attach), "image_pull_failed", 20);
    assert!(msg.contains(&pause), "the image is named: {msg}");
    let delete = record(&recs, OpType::DeleteVolume);
    assert_eq!(delete.outcome, Outcome::Ok, "{}", all_records(&recs));
    nothing_left(&rt, &c, &out.manifest.run_id);

    // The io_phase's image, and the stream's: a raw block volume of the header with bare io.
    let iogen = missing_image(&env, "iogen");
    let mut body = String::from(IO_PHASE_TRACE);
    for i in 0..20 {
        let _ = writeln!(
            body,
            "  - {{at: {}ms, io: {{volume: b, kind: read, offset: 0, len: 4096}}}}",
            100 * i
        );
    }
    let trace = write_trace(
        dir.path(),
        "volumes:\n  - {name: b, size: 64Mi, volume_mode: block}\n",
        &body,
    );
    let run_dir = dir.path().join("iogen");
    let cfg = KubeConfig {
        iogen_image: iogen.clone(),
        ..on_real_node(&env, &node)
    };
    let t0 = Instant::now();
    let (out, _p) = replay_run(&trace, &run_dir, env.provider_for(cfg, &trace));
    let took = t0.elapsed();
    let recs = events(&run_dir);
    let msg = failed_within(record(&recs, OpType::IoPhase), "image_pull_failed", 20);
    assert!(msg.contains(&iogen), "the image is named: {msg}");
    for op in [OpType::Attach, OpType::Detach, OpType::DeleteVolume] {
        let r = record(&recs, op);
        assert_eq!(r.outcome, Outcome::Ok, "{}", all_records(&recs));
    }
    // The stream's pod failed before the clock started: a notice with the class, the image
    // and how long its start took.
    let notice = out
        .summary
        .notices
        .iter()
        .find(|n| n.contains("volume \"b\""))
        .unwrap_or_else(|| panic!("no notice about the stream: {:?}", out.summary.notices));
    assert!(
        notice.contains("image_pull_failed") && notice.contains(&iogen),
        "{notice}"
    );
    // From its last milestone: its raw block volume's attach and mount come first (up to
    // 10 s on testenv's node, its kubelet's volumesInUse cycle), then the kubelet's verdict:
    // within 20 s, as for the io_phase's pod above (16.5 s after `scheduled` was seen in a
    // cold CI run with the cluster tests in two lanes), not the op's minutes.
    let (secs, since) = started_after(notice);
    assert!(
        secs < 20.0 && ["scheduled", "sandbox-ready"].contains(&since.as_str()),
        "the stream pod failed {secs} s after {since}: {notice}"
    );
    assert!(
        took < Duration::from_secs(120),
        "the whole run took {took:?}: {notice}"
    );
    nothing_left(&rt, &c, &out.manifest.run_id);
}

/// The seconds and milestone in "did not start after N.N s (M.M s after MILESTONE): …" of a
/// stream's failed start.
fn started_after(notice: &str) -> (f64, String) {
    let parsed = (|| {
        let (_, rest) = notice.split_once(" s (")?;
        let (secs, rest) = rest.split_once(" s after ")?;
        let (since, _) = rest.split_once(')')?;
        Some((secs.parse().ok()?, since.to_owned()))
    })();
    parsed.unwrap_or_else(|| panic!("no milestone in: {notice}"))
}

/// iogen's Localhost seccomp profile is not on the node (copied to the kubelet's seccomp root
/// by hand, or not at all): the `io_phase` ends in seconds with its own class naming the
/// profile.
#[test]
fn a_missing_seccomp_profile_ends_the_io_phase_in_seconds() {
    let Some(env) = testenv() else { return };
    let Some(node) = real_node(&env) else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "", IO_PHASE_TRACE);
    let mut cfg = on_real_node(&env, &node);
    cfg.pod.iogen_seccomp_profile = Some("cnsreplay/no-such-profile.json".into());
    let run_dir = dir.path().join("run");
    let (out, _p) = replay_run(&trace, &run_dir, env.provider_for(cfg, &trace));
    let recs = events(&run_dir);
    let msg = failed_within(
        record(&recs, OpType::IoPhase),
        "seccomp_profile_missing",
        10,
    );
    assert!(msg.contains("no-such-profile.json"), "{msg}");
    let delete = record(&recs, OpType::DeleteVolume);
    assert_eq!(delete.outcome, Outcome::Ok, "{}", all_records(&recs));
    nothing_left(&rt, &c, &out.manifest.run_id);
}

/// A StorageClass of the project's CSI driver whose `op` fails `rate` of its calls with
/// `code` (the driver's fault injection, docs/csi-driver.md).
async fn faulty_class(
    c: &kube::Client,
    name: &str,
    binding: &str,
    op: &str,
    rate: &str,
    code: &str,
) {
    let sc: StorageClass = serde_json::from_value(serde_json::json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "csi.cnsreplay.dev",
        "volumeBindingMode": binding,
        "reclaimPolicy": "Delete",
        "parameters": {
            "nodeExpansion": "false",
            format!("failRate.{op}"): rate,
            format!("failCode.{op}"): code,
        },
    }))
    .unwrap();
    Api::<StorageClass>::all(c.clone())
        .create(&PostParams::default(), &sc)
        .await
        .unwrap();
}

async fn drop_class(c: &kube::Client, name: &str) {
    let _ = Api::<StorageClass>::all(c.clone())
        .delete(name, &DeleteParams::default())
        .await;
}

/// Warnings the kubelet retries do not fail an attach: NodeStageVolume failing 60 % of its
/// calls with UNAVAILABLE gives no failed operation, and the retries are on the attaches'
/// records; failing every call with INVALID_ARGUMENT (final) fails the attach within 10 s.
#[test]
fn nodestage_faults_are_retried_and_counted_and_final_ones_fail_in_seconds() {
    let Some(env) = testenv() else { return };
    let Some(node) = real_node(&env) else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    if csi_driver(&env, &rt, &c, false).is_none() {
        return;
    }
    let flaky = uniq("flakystage");
    let broken = uniq("badstage");
    rt.block_on(faulty_class(
        &c,
        &flaky,
        "Immediate",
        "NodeStageVolume",
        "0.6",
        "UNAVAILABLE",
    ));
    rt.block_on(faulty_class(
        &c,
        &broken,
        "Immediate",
        "NodeStageVolume",
        "1",
        "INVALID_ARGUMENT",
    ));
    let dir = tempfile::tempdir().unwrap();
    // Six attaches: all of them succeed on their first try 0.4^6 = 0.4 % of the time.
    let mut body = String::new();
    for i in 0..6 {
        let _ = write!(
            body,
            "  - {{at: 0s, create_volume: {{volume: v{i}, storage_class: {flaky}}}}}\n  \
             - {{at: 0s, attach: {{workload: w{i}, volumes: [v{i}]}}}}\n  \
             - {{at: 1s, detach: {{workload: w{i}}}}}\n  \
             - {{at: 1s, delete_volume: {{volume: v{i}}}}}\n"
        );
    }
    let _ = write!(
        body,
        "  - {{at: 0s, create_volume: {{volume: bad, storage_class: {broken}}}}}\n  \
         - {{at: 0s, attach: {{workload: wbad, volumes: [bad]}}}}\n  \
         - {{at: 1s, delete_volume: {{volume: bad}}}}\n"
    );
    let trace = write_trace(dir.path(), "", &body);
    let run_dir = dir.path().join("run");
    // No --storage-class: it would replace the classes the events name.
    let cfg = KubeConfig {
        storage_class: None,
        ..on_real_node(&env, &node)
    };
    let (out, _p) = replay_run(&trace, &run_dir, env.provider_for(cfg, &trace));
    let recs = events(&run_dir);
    let bad_attach = recs
        .iter()
        .find(|r| r.op == OpType::Attach && r.outcome == Outcome::Error)
        .unwrap_or_else(|| {
            panic!(
                "the attach of the broken class failed:\n{}",
                all_records(&recs)
            )
        });
    // It ends at the kubelet's first FailedMount: no retry of it was counted (a retried
    // reason would be, and would wait out the grace). The deadline runs from the attach's
    // last milestone (its VolumeAttachment attached); the kubelet's own way to its first
    // MountDevice (the node status listing the volume, ~10 s on testenv's node, longer on a
    // loaded CI) comes before that first Warning and is not the provider's to shorten.
    let msg = failed_within(bad_attach, "mount_failed", 30);
    assert!(
        msg.contains("FailedMount") && msg.contains("InvalidArgument"),
        "{msg}"
    );
    assert!(
        bad_attach
            .retries
            .iter()
            .flatten()
            .all(|x| x.reason != "FailedMount"),
        "the final FailedMount was retried first: {:?}",
        bad_attach.retries
    );
    let failed: Vec<&EventRecord> = recs
        .iter()
        .filter(|r| r.outcome == Outcome::Error && r.id != bad_attach.id)
        .collect();
    assert!(
        failed.is_empty(),
        "only the broken attach fails:\n{}",
        all_records(&recs)
    );
    let retried: u32 = recs
        .iter()
        .filter(|r| r.op == OpType::Attach && r.outcome == Outcome::Ok)
        .flat_map(|r| r.retries.iter().flatten())
        .filter(|x| x.reason == "FailedMount")
        .map(|x| x.count)
        .sum();
    assert!(
        retried > 0,
        "the kubelet's retries are counted:\n{}",
        all_records(&recs)
    );
    assert_eq!(out.summary.failed, 1, "{:?}", out.summary.errors);
    assert!(
        out.summary
            .notices
            .iter()
            .any(|n| n.contains("retried by itself") && n.contains("FailedMount")),
        "the run's notices say so: {:?}",
        out.summary.notices
    );
    #[allow(clippy::print_stderr)] // the numbers the docs quote
    {
        eprintln!(
            "60 % UNAVAILABLE: {retried} FailedMount retries over 6 attaches, 0 failed; \
             100 % INVALID_ARGUMENT: failed after {:.1} s",
            (bad_attach.completed - bad_attach.started) as f64 / 1e9
        );
    }
    nothing_left(&rt, &c, &out.manifest.run_id);
    rt.block_on(drop_class(&c, &flaky));
    rt.block_on(drop_class(&c, &broken));
}

/// A WaitForFirstConsumer claim whose provisioning fails for good: its attach (the pod
/// Pending, never scheduled) ends within 10 s quoting the provisioner's reason from the
/// claim's events, not after 300 s "waiting for pod … to be scheduled".
#[test]
fn a_wffc_provisioning_failure_ends_the_attach_with_the_provisioners_reason() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    if csi_driver(&env, &rt, &c, false).is_none() {
        return;
    }
    let class = uniq("wffcfail");
    rt.block_on(faulty_class(
        &c,
        &class,
        "WaitForFirstConsumer",
        "CreateVolume",
        "1",
        "INVALID_ARGUMENT",
    ));
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(
        dir.path(),
        "",
        "  - {at: 0s, create_volume: {volume: v}}\n  \
         - {at: 0s, attach: {workload: w, volumes: [v]}}\n  \
         - {at: 1s, delete_volume: {volume: v}}\n",
    );
    let cfg = KubeConfig {
        storage_class: Some(class.clone()),
        ..KubeConfig::default()
    };
    let run_dir = dir.path().join("run");
    let (out, _p) = replay_run(&trace, &run_dir, env.provider_for(cfg, &trace));
    let recs = events(&run_dir);
    let msg = failed_within(record(&recs, OpType::Attach), "provisioning_failed", 10);
    assert!(
        msg.contains("ProvisioningFailed")
            && msg.contains("PersistentVolumeClaim")
            && msg.contains("InvalidArgument"),
        "{msg}"
    );
    let delete = record(&recs, OpType::DeleteVolume);
    assert_eq!(delete.outcome, Outcome::Ok, "{}", all_records(&recs));
    nothing_left(&rt, &c, &out.manifest.run_id);
    rt.block_on(drop_class(&c, &class));
}

/// What a stop while pods start took: until the run's pods were gone (the start ended and
/// the pods deleted: the run's own reaction), and until the run ended (its cleanup then waits
/// for its claims and their PVs to go, at the pace of the cluster's controllers and the CSI
/// driver, which the other test lane shares).
#[derive(Debug)]
struct StopTook {
    pods_gone: Duration,
    ended: Duration,
}

/// Runs `trace` with pods that cannot be scheduled (a node selector no node matches, the
/// failure grace longer than the test) until `n` pods of the run with label `selector` exist,
/// all Pending; then stops the run (Ctrl-C: the run's stop request) and returns how long its
/// pods took to go and the run to end after that, having checked it left nothing.
fn stop_while_pods_start(
    env: &TestEnv,
    rt: &tokio::runtime::Runtime,
    c: &kube::Client,
    trace: &Path,
    selector: &str,
    n: usize,
) -> StopTook {
    let mut cfg = KubeConfig {
        storage_class: env.vars().get("TESTENV_STORAGE_CLASS").cloned(),
        failure_grace_ns: 600_000_000_000,
        ..KubeConfig::default()
    };
    cfg.pod
        .node_selector
        .insert("cnsreplay.io/no-such-label".into(), "x".into());
    let p = std::sync::Arc::new(env.provider_for(cfg, trace));
    let control = RunControl::new();
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let opts = RunOptions {
        grace_ns: 30_000_000_000,
        ..RunOptions::default()
    };
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let pods = Api::<Pod>::all(c.clone());
    let lp = ListParams::default().labels(selector);
    let run_id = || {
        std::fs::read(run_dir.join("manifest.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|m| m["run_id"].as_str().map(str::to_owned))
    };
    std::thread::scope(|s| {
        let (p2, c2, run_dir2, opts2) = (p.clone(), control.clone(), &run_dir, &opts);
        s.spawn(move || {
            let r = replay::run(trace, run_dir2, &p2, opts2, &c2);
            let _ = done_tx.send(Instant::now());
            r
        });
        let t0 = Instant::now();
        let starting = loop {
            assert!(
                t0.elapsed() < deadline(),
                "{n} pods ({selector}) were not created within the test deadline"
            );
            if let Some(id) = run_id() {
                let mine: Vec<Pod> = rt
                    .block_on(pods.list(&lp))
                    .unwrap()
                    .items
                    .into_iter()
                    .filter(|p| {
                        p.metadata
                            .labels
                            .as_ref()
                            .is_some_and(|l| l.get("cnsreplay.io/run") == Some(&id))
                    })
                    .collect();
                if mine.len() >= n {
                    break mine;
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(
            starting
                .iter()
                .all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending")),
            "the pods cannot start"
        );
        let stop = Instant::now();
        control.request_stop("test: Ctrl-C while pods start");
        // Unscheduled pods go as soon as they are deleted (no kubelet to wait for).
        let pods_gone = loop {
            let left = rt
                .block_on(pods.list(&lp))
                .unwrap()
                .items
                .into_iter()
                .any(|p| {
                    starting
                        .iter()
                        .any(|s| s.metadata.uid.is_some() && s.metadata.uid == p.metadata.uid)
                });
            if !left {
                break stop.elapsed();
            }
            assert!(
                stop.elapsed() < deadline(),
                "the run's pods still there {:?} after the stop",
                stop.elapsed()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let ended = done_rx
            .recv_timeout(deadline())
            .expect("the run ended after the stop");
        let ended = ended.saturating_duration_since(stop);
        rt.block_on(nothing_left_after_stop(c, &run_id().expect("run id")));
        StopTook { pods_gone, ended }
    })
}

/// A block trace's stream pods start together, and a stop while they start (Ctrl-C) ends
/// their start at once: the pods are gone within 2 s; so are an attach's. The run then ends
/// once its cleanup has seen its claims and their PVs go, at the cluster's pace (0.2–0.6 s
/// on a testenv with or without four CPU hogs beside it, 2.3 s once in CI beside the other
/// lane): it must end well before the run's 30 s grace for in-flight operations, which a run
/// waiting on its starting pods would wait out (and before their 600 s failure grace).
#[test]
fn pods_start_together_and_a_stop_while_they_start_deletes_them_in_2_s() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    if csi_driver(&env, &rt, &c, false).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut header = String::from("volumes:\n");
    let mut body = String::new();
    for v in 0..3 {
        let _ = writeln!(header, "  - {{name: d{v}, size: 64Mi, volume_mode: block}}");
        let _ = writeln!(
            body,
            "  - {{at: 0s, io: {{volume: d{v}, kind: read, offset: 0, len: 4096}}}}"
        );
    }
    let trace = write_trace(dir.path(), &header, &body);
    // All three stream pods exist while none has started: they were created together.
    let streams = stop_while_pods_start(&env, &rt, &c, &trace, "cnsreplay.io/role=io-stream", 3);
    let trace = write_trace(
        dir.path(),
        "",
        "  - {at: 0s, create_volume: {volume: v}}\n  \
         - {at: 0s, attach: {workload: w, volumes: [v]}}\n  \
         - {at: 60s, detach: {workload: w}}\n  \
         - {at: 60s, delete_volume: {volume: v}}\n",
    );
    let attach = stop_while_pods_start(&env, &rt, &c, &trace, "cnsreplay.io/run", 1);
    #[allow(clippy::print_stderr)] // the numbers the docs quote
    {
        eprintln!(
            "stop while 3 stream pods start: {streams:?}; while an attach's pod starts: \
             {attach:?}"
        );
    }
    for (what, took) in [("its stream pods", &streams), ("an attach's pod", &attach)] {
        assert!(
            took.pods_gone < Duration::from_secs(2),
            "a stop while {what} started: the pods were gone only {:?} later",
            took.pods_gone
        );
        assert!(
            took.ended < Duration::from_secs(15),
            "a stop while {what} started: the run ended only {:?} later (its pods gone \
             after {:?}): it waited for more than its cleanup",
            took.ended,
            took.pods_gone
        );
    }
}
