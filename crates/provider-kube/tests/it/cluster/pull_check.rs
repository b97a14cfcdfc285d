//! The pre-flight pull check (`pullcheck.rs`) on testenv: a missing iogen image or seccomp
//! profile ends the run before its clock with its own class, a stop during the check ends
//! the run at once, and with what exists the summary names the I/O backend of each
//! `io_phase` and stream (io_uring under iogen's profile, threads under `RuntimeDefault`).

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use provider_kube::KubeConfig;
use replay::{Outcome, RunControl, RunOptions};
use trace_format::OpType;

use super::pod_path::{missing_image, nothing_left, on_real_node, real_node, write_trace};
use crate::common::*;

/// `replay::run` of `trace` after the provider's pre-flight (which plans the pull check),
/// bounded by the test deadline: the run's result and how long the run took.
fn preflighted_run(
    env: &TestEnv,
    trace: &Path,
    run_dir: &Path,
    cfg: KubeConfig,
) -> (Result<replay::RunOutcome, replay::Error>, Duration) {
    let p = env.provider_for(cfg, trace);
    p.preflight(trace)
        .expect("the trace's classes and nodes exist");
    let p = std::sync::Arc::new(p);
    let opts = RunOptions {
        grace_ns: 10_000_000_000,
        ..RunOptions::default()
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let control = RunControl::new();
    std::thread::scope(|s| {
        let (p2, c2, opts2) = (p.clone(), control.clone(), &opts);
        s.spawn(move || {
            let t0 = Instant::now();
            let r = replay::run(trace, run_dir, &p2, opts2, &c2);
            let _ = tx.send((r, t0.elapsed()));
        });
        rx.recv_timeout(deadline()).unwrap_or_else(|_| {
            control.request_stop("test deadline");
            panic!(
                "the run did not end within the test deadline {:?}",
                deadline()
            )
        })
    })
}

fn run_id_of(run_dir: &Path) -> String {
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("manifest.json")).unwrap()).unwrap();
    m["run_id"].as_str().unwrap().to_owned()
}

/// The pre-flight pull check on the real node: an iogen image that does not exist, or a
/// Localhost seccomp profile that is not on the node, ends the run before its clock starts
/// (within 10 s, with its own class naming the image or profile, no operation run, nothing
/// left); with what exists the check passes, and the summary says which I/O backend each
/// `io_phase` ran on: io_uring under iogen's profile, threads under `RuntimeDefault` (with
/// the reason and a notice: never a silent fallback).
#[test]
fn the_pull_check_fails_before_the_clock_and_the_summary_names_each_io_phases_backend() {
    let Some(env) = testenv() else { return };
    let Some(node) = real_node(&env) else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    let dir = tempfile::tempdir().unwrap();
    // An io_phase that runs (a region that fits the 64Mi volume) and ends before the detach.
    let trace = write_trace(
        dir.path(),
        "",
        "  - {at: 0s, create_volume: {volume: v}}\n  \
         - {at: 0s, attach: {workload: w, volumes: [v]}}\n  \
         - {at: 0s, io_phase: {workload: w, volume: v, pattern: random, read_pct: 50, block_size: 4Ki, load: {depth: 1}, duration: 1s, region: 16Mi}}\n  \
         - {at: 12s, detach: {workload: w}}\n  \
         - {at: 12s, delete_volume: {volume: v}}\n",
    );
    let bounded = |mut cfg: KubeConfig| {
        // The check waits at most an attach's timeout: short here, within the test deadline.
        cfg.timeouts.insert(OpType::Attach, 60_000_000_000);
        cfg
    };
    let iogen = missing_image(&env, "pullcheck");
    let profile = "cnsreplay/no-such-profile-pullcheck.json";
    let failing = [
        (
            "image",
            KubeConfig {
                iogen_image: iogen.clone(),
                ..on_real_node(&env, &node)
            },
            "image_pull_failed",
            iogen.as_str(),
        ),
        (
            "profile",
            {
                let mut cfg = on_real_node(&env, &node);
                cfg.pod.iogen_seccomp_profile = Some(profile.into());
                cfg
            },
            "seccomp_profile_missing",
            profile,
        ),
    ];
    for (what, cfg, class, named) in failing {
        let run_dir = dir.path().join(what);
        let (r, took) = preflighted_run(&env, &trace, &run_dir, bounded(cfg));
        let err = match r {
            Err(replay::Error::Provider { source, .. }) => source,
            Err(e) => panic!("missing {what}: not the provider's error: {e}"),
            Ok(o) => panic!("missing {what}: the run went on: {:?}", o.summary),
        };
        assert_eq!(err.class, class, "missing {what}: {err}");
        assert!(
            err.message.contains(named) && err.message.contains("pull check"),
            "missing {what}: {err}"
        );
        assert!(
            took < Duration::from_secs(10),
            "missing {what}: the run took {took:?} to fail: {err}"
        );
        assert!(
            !run_dir.join("events.jsonl").exists(),
            "missing {what}: the clock never started"
        );
        // Its namespace is deleted without waiting for the namespace controller, as after a
        // stop.
        rt.block_on(nothing_left_after_stop(&c, &run_id_of(&run_dir)));
    }

    // What exists: the check passes; the backend per io_phase (and of a bare-io stream's pod),
    // with and without iogen's profile.
    let mut body = String::from(
        "  - {at: 0s, create_volume: {volume: v}}\n  \
         - {at: 0s, attach: {workload: w, volumes: [v]}}\n  \
         - {at: 0s, io_phase: {workload: w, volume: v, pattern: random, read_pct: 50, block_size: 4Ki, load: {depth: 1}, duration: 1s, region: 16Mi}}\n  \
         - {at: 12s, detach: {workload: w}}\n  \
         - {at: 12s, delete_volume: {volume: v}}\n",
    );
    for i in 0..5 {
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
    let with_profile = on_real_node(&env, &node);
    assert!(
        with_profile.pod.iogen_seccomp_profile.is_some(),
        "testenv installs iogen's profile (TESTENV_IOGEN_SECCOMP)"
    );
    let mut runtime_default = on_real_node(&env, &node);
    runtime_default.pod.iogen_seccomp_profile = None;
    for (what, cfg, backend) in [
        ("localhost", with_profile, "io_uring"),
        ("runtime-default", runtime_default, "threads"),
    ] {
        let run_dir = dir.path().join(what);
        let (r, _) = preflighted_run(&env, &trace, &run_dir, bounded(cfg));
        let out = r.unwrap_or_else(|e| panic!("{what}: {e}"));
        let recs = events(&run_dir);
        let io = record(&recs, OpType::IoPhase);
        assert_eq!(io.outcome, Outcome::Ok, "{}", all_records(&recs));
        let b = &out.summary.io.backends;
        assert_eq!(b.len(), 1, "{what}: {b:?}");
        assert_eq!(
            (b[0].event, b[0].backend.as_str()),
            (io.id, backend),
            "{what}: {b:?}"
        );
        let notice = out
            .summary
            .notices
            .iter()
            .find(|n| n.starts_with("iogen used"));
        if backend == "threads" {
            let reason = b[0].reason.as_deref().unwrap_or_default();
            assert!(
                reason.contains("io_uring setup failed") && reason.contains("RuntimeDefault"),
                "{reason}"
            );
            let n = notice.unwrap_or_else(|| panic!("no notice: {:?}", out.summary.notices));
            assert!(n.contains("threads in 1 of 1 io_phases"), "{n}");
        } else {
            assert_eq!(b[0].reason, None);
            assert_eq!(notice, None, "{:?}", out.summary.notices);
        }
        // The stream's engine is its first flag; threads give their own notice.
        let stream = out
            .summary
            .io_streams
            .first()
            .unwrap_or_else(|| panic!("{what}: no stream: {:?}", out.summary.notices));
        let engine = if backend == "threads" {
            "sync"
        } else {
            "io_uring"
        };
        assert_eq!(
            stream.flags.first().map(String::as_str),
            Some(engine),
            "{stream:?}"
        );
        let streams = out
            .summary
            .notices
            .iter()
            .find(|n| n.starts_with("iogen streams used threads"));
        if backend == "threads" {
            let n = streams.unwrap_or_else(|| panic!("no notice: {:?}", out.summary.notices));
            assert!(
                n.contains("1 of 1 volumes (b)") && n.contains("RuntimeDefault"),
                "{n}"
            );
        } else {
            assert_eq!(streams, None, "{:?}", out.summary.notices);
        }
        nothing_left(&rt, &c, &out.manifest.run_id);
    }
}

/// A stop (Ctrl-C) while the pull check's pod starts (it cannot be scheduled: a node selector
/// no node matches, the failure grace longer than the test) ends the run within 2 s with
/// `cancelled`, before its clock, leaving nothing.
#[test]
fn a_stop_during_the_pull_check_ends_the_run_in_2_s() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    if csi_driver(&env, &rt, &c, false).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(
        dir.path(),
        "",
        "  - {at: 0s, create_volume: {volume: v}}\n  \
         - {at: 0s, attach: {workload: w, volumes: [v]}}\n  \
         - {at: 1s, delete_volume: {volume: v}}\n",
    );
    let mut cfg = KubeConfig {
        storage_class: env.vars().get("TESTENV_STORAGE_CLASS").cloned(),
        failure_grace_ns: 600_000_000_000,
        ..KubeConfig::default()
    };
    cfg.pod
        .node_selector
        .insert("cnsreplay.io/no-such-label".into(), "x".into());
    let p = env.provider_for(cfg, &trace);
    p.preflight(&trace).expect("pre-flight passes");
    let p = std::sync::Arc::new(p);
    let control = RunControl::new();
    let run_dir = dir.path().join("run");
    let opts = RunOptions::default();
    let pods = Api::<Pod>::all(c.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    let (took, r) = std::thread::scope(|s| {
        let (p2, c2, run_dir2, opts2) = (p.clone(), control.clone(), &run_dir, &opts);
        s.spawn(move || {
            let r = replay::run(&trace, run_dir2, &p2, opts2, &c2);
            let _ = tx.send((Instant::now(), r));
        });
        let t0 = Instant::now();
        loop {
            assert!(
                t0.elapsed() < deadline(),
                "no pull check pod within the test deadline"
            );
            let checking = std::fs::read(run_dir.join("manifest.json"))
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .and_then(|m| m["run_id"].as_str().map(str::to_owned))
                .is_some_and(|id| {
                    let lp = ListParams::default().labels(&format!(
                        "cnsreplay.io/role=pull-check,cnsreplay.io/run={id}"
                    ));
                    !rt.block_on(pods.list(&lp)).unwrap().items.is_empty()
                });
            if checking {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let stop = Instant::now();
        control.request_stop("test: Ctrl-C during the pull check");
        let (ended, r) = rx
            .recv_timeout(deadline())
            .expect("the run ended after the stop");
        (ended.saturating_duration_since(stop), r)
    });
    match r {
        Err(replay::Error::Provider { source, .. }) => {
            assert_eq!(source.class, "cancelled", "{source}");
        }
        Err(e) => panic!("not the provider's error: {e}"),
        Ok(o) => panic!("the run went on: {:?}", o.summary),
    }
    assert!(
        took < Duration::from_secs(2),
        "the run took {took:?} to end after a stop during the pull check"
    );
    assert!(
        !run_dir.join("events.jsonl").exists(),
        "the clock never started"
    );
    rt.block_on(nothing_left_after_stop(&c, &run_id_of(&run_dir)));
}
