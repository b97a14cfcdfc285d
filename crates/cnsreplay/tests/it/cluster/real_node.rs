//! The README's main job on the kube provider against testenv's real kubelet node: the
//! Experiment 2 trace as shipped (5 PVCs, a pod on each, iogen pods doing I/O on the mounted
//! ext4 volumes, snapshots round-robin), with only the cluster's classes, the node and the
//! image given on the command line, as an account bound to exactly the pieces of
//! `deploy/rbac/` the trace needs (`Cluster::runner_kubeconfig_for`). It must print
//! the same table as the local run, with I/O on both sides of the snapshot split, and leave
//! nothing behind. Skipped (one line) without a real node unless
//! `CNSREPLAY_REQUIRE_REAL_NODE=1`.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use crate::{
    Cluster, EXP2_OPS, RunWindow, cnsreplay_within, nothing_left, ok, real_node_cluster, run_args,
    s, stdout,
};

/// `cnsreplay run` of the README's Experiment 2 on the real node, into `run`.
fn exp2_args(c: &Cluster, kc: &Path, run: &Path) -> Vec<String> {
    run_args(c, kc, "traces/experiment2-short.yaml", run)
}

/// Experiment 2 on the real node as a child process (output piped), with `extra` arguments.
fn spawn_exp2(c: &Cluster, kc: &Path, run: &Path, extra: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_cnsreplay"))
        .args(exp2_args(c, kc, run))
        .args(extra)
        .current_dir(crate::workspace())
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn")
}

#[test]
fn experiment2_on_the_real_node_prints_the_local_table_and_leaves_nothing() {
    let Some(c) = real_node_cluster() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let kc = c.runner_kubeconfig_for(tmp.path(), "traces/experiment2-short.yaml");
    let run = tmp.path().join("run");
    // Its live metrics: the iogen pods' I/O of tenant `db` arrives while they run.
    let port = crate::prometheus::free_port();
    let metrics = format!("127.0.0.1:{port}");
    let child = spawn_exp2(&c, &kc, &run, &["--metrics-addr", &metrics]);
    let t0 = std::time::Instant::now();
    let live = loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
        let text = crate::prometheus::scrape(port).unwrap_or_default();
        let reads = crate::prometheus::sample(
            &text,
            "cnsreplay_io_requests_total{tenant=\"db\",kind=\"read\"}",
        );
        if reads > 0.0 || t0.elapsed() > std::time::Duration::from_secs(120) {
            break text;
        }
    };
    let out = crate::wait_within(child, "cnsreplay run", crate::deadline(600));
    ok(&out);
    assert!(
        crate::prometheus::sample(
            &live,
            "cnsreplay_io_requests_total{tenant=\"db\",kind=\"write\"}"
        ) > 0.0
            && crate::prometheus::sample(&live, "cnsreplay_op_done_total{op=\"io_phase\"}") == 0.0,
        "no live I/O of the iogen pods before the first io_phase ended:\n{live}"
    );
    let text = stdout(&out);
    for row in [
        "create_volume",
        "attach",
        "io_phase",
        "snapshot",
        "detach",
        "delete_volume",
    ] {
        assert!(text.contains(&format!("\n{row} ")), "no {row} row:\n{text}");
    }
    assert!(
        text.contains("I/O p99.9:") && text.contains("without a snapshot in flight"),
        "{text}"
    );

    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("summary.json")).expect("summary"))
            .expect("json");
    assert_eq!(summary["state"], "complete", "{summary}");
    // Failed operations, with their error, for the messages below.
    let failed: Vec<String> = std::fs::read_to_string(run.join("events.jsonl"))
        .expect("events")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["outcome"] != "ok")
        .map(|v| {
            format!(
                "{} {} at {} ns: {} {}",
                v["id"], v["op"], v["intended"], v["error_class"], v["error"]
            )
        })
        .collect();
    for (op, n) in EXP2_OPS {
        assert_eq!(summary["ops"][op]["count"], n, "{op}: {summary}");
        assert_eq!(summary["ops"][op]["failed"], 0, "{op} failed: {failed:#?}");
    }
    for side in ["with_snapshot", "without_snapshot"] {
        let n = summary["io"][side]["count"].as_u64().unwrap_or(0);
        assert!(n > 0, "no I/O {side}: {summary}");
    }
    // The run's pull check passed (it ran at all), and iogen's pods ran under testenv's
    // profile: io_uring, said per io_phase in the summary and the table, no fallback notice.
    if !c.seccomp().is_empty() {
        let backends = summary["io"]["backends"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            !backends.is_empty() && backends.iter().all(|b| b["backend"] == "io_uring"),
            "{summary}"
        );
        assert!(text.contains("I/O backend: io_uring in "), "{text}");
        assert!(
            !summary["notices"]
                .to_string()
                .contains("iogen used threads"),
            "{summary}"
        );
    }
    // Every attach went through the kubelet: VolumeAttachment attached, then Running.
    let events = std::fs::read_to_string(run.join("events.jsonl")).expect("events");
    let attaches: Vec<serde_json::Value> = events
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &serde_json::Value| v["op"] == "attach")
        .collect();
    assert_eq!(attaches.len(), 5);
    for a in &attaches {
        let phases: Vec<&str> = a["phases"]
            .as_array()
            .expect("phases")
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        for want in ["scheduled", "attached", "running"] {
            assert!(phases.contains(&want), "{want} missing in {a}");
        }
    }

    // The driver's node service did the mounting, on the real node, during the run.
    let RunWindow { from, to, ops, .. } = RunWindow::read(&c, &run);
    let mut count: HashMap<String, usize> = HashMap::new();
    for v in ops
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["node"] == c.get("TESTENV_REAL_NODE") && v["code"] == "OK")
        .filter(|v| {
            v["start_ns"]
                .as_u64()
                .is_some_and(|t| (from..=to).contains(&t))
        })
    {
        *count
            .entry(v["op"].as_str().unwrap_or("").to_owned())
            .or_default() += 1;
    }
    for (op, at_least) in [
        ("NodeStageVolume", 5),
        ("NodePublishVolume", 10),
        ("NodeUnpublishVolume", 10),
        ("NodeUnstageVolume", 5),
    ] {
        let n = count.get(op).copied().unwrap_or(0);
        assert!(
            n >= at_least,
            "{op}: {n} calls on the real node, want {at_least}: {count:?}"
        );
    }

    nothing_left(&c, &run);
}

/// Ctrl-C while the iogen pods run and a snapshot may be in flight: the run stops, says it
/// was interrupted, keeps its partial results, and leaves no object, mount, loop device or
/// pod of the run on the node.
#[test]
fn ctrl_c_on_the_real_node_leaves_nothing_of_the_run() {
    let Some(c) = real_node_cluster() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let kc = c.runner_kubeconfig_for(tmp.path(), "traces/experiment2-short.yaml");
    let run = tmp.path().join("run");
    let child = spawn_exp2(&c, &kc, &run, &[]);
    // Records are written when an operation ends, so watch the cluster: wait until iogen
    // pods run.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let pods = c.kubectl(&[
            "get",
            "pods",
            "-A",
            "-l",
            "cnsreplay.io/role=io",
            "--field-selector",
            "status.phase=Running",
            "-o",
            "name",
        ]);
        if pods.lines().count() >= 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no iogen pod ran within 90 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    std::thread::sleep(std::time::Duration::from_secs(3));
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::INT,
    )
    .expect("SIGINT");
    let o = crate::wait_within(child, "cnsreplay run", crate::deadline(600));
    assert_ne!(o.status.code(), Some(0), "{}", stdout(&o));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).expect("manifest"))
            .expect("json");
    assert_eq!(manifest["state"], "interrupted", "{manifest:#}");
    let events = std::fs::read_to_string(run.join("events.jsonl")).expect("events");
    assert!(
        events.lines().any(|l| l.contains("\"attach\"")),
        "the attaches done before the signal are recorded"
    );
    nothing_left(&c, &run);
}

/// A block trace's shape (raw block volumes in the header, then only `io`) on the real node:
/// each volume's requests stream to an I/O pod of its own (`iogen replay` on the PVC's raw
/// device, fed over the pod's stdin), every request issued — reads, writes, trims, flushes —
/// none dropped or reordered, the fidelity report and rate curves written, `analyze report`
/// shows the streams, and nothing of the run is left.
#[test]
fn a_block_trace_replays_in_io_stream_pods_on_the_real_node() {
    let Some(c) = real_node_cluster() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let trace = tmp.path().join("block.jsonl");
    let n = 6000u64;
    let lines = crate::block_trace(
        r#"{"name":"d0","size":"64Mi","volume_mode":"block"},{"name":"d1","size":"64Mi","volume_mode":"block"}"#,
        n,
    );
    std::fs::write(&trace, lines.join("\n") + "\n").expect("write trace");
    let run = tmp.path().join("run");
    let kc = c.runner_kubeconfig_for(tmp.path(), &trace);
    let args = run_args(&c, &kc, s(&trace), &run);
    let seccomp = c.seccomp();
    let out = cnsreplay_within(&args.iter().map(String::as_str).collect::<Vec<_>>(), 600);
    let text = stdout(&out);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("summary.json")).expect("summary"))
            .expect("json");
    assert_eq!(summary["state"], "complete", "{text}\n{summary}");
    let streams = summary["io_streams"].as_array().expect("io_streams");
    assert_eq!(streams.len(), 2, "{text}\n{summary}");
    let mut requests = 0;
    for f in streams {
        assert_eq!(f["error"], serde_json::Value::Null, "{f}");
        requests += f["requests"].as_u64().unwrap_or(0);
        assert_eq!(f["dropped"], 0, "{f}");
        assert_eq!(f["reordered"], 0, "{f}");
        assert_eq!(f["errors"], 0, "{f}");
        assert_eq!(f["completed"], f["requests"], "{f}");
        assert_eq!(f["target"], "/dev/cnsreplay/0", "{f}");
        let flags = f["flags"].to_string();
        assert!(
            flags.contains("O_DIRECT") && flags.contains("in pod"),
            "{flags}"
        );
        // With iogen's seccomp profile the pod may use io_uring (RuntimeDefault refuses it).
        if !seccomp.is_empty() {
            assert_eq!(f["flags"][0], "io_uring", "{flags}");
        }
        assert!(f["windows"].as_u64().unwrap_or(0) >= 1, "{f}");
    }
    assert_eq!(requests, n);
    let adjusted: u64 = streams
        .iter()
        .map(|f| f["adjusted"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(adjusted, 1, "only the unaligned request is changed");
    assert_eq!(summary["ops"]["io"]["count"], n, "{summary}");
    assert_eq!(summary["ops"]["io"]["failed"], 0, "{summary}");
    // The pods' logs (with their result lines) and the per-second curves are in the run.
    let logs: Vec<String> = std::fs::read_dir(run.join("io/stream-pods"))
        .expect("io/stream-pods")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| std::fs::read_to_string(e.path()).expect("log"))
        .collect();
    assert_eq!(logs.len(), 2, "one log per stream pod");
    for l in &logs {
        assert!(l.contains("iogen-stream-result "), "{l}");
    }
    assert_eq!(
        std::fs::read_dir(run.join("io/streams"))
            .expect("io/streams")
            .count(),
        2,
        "one rate curve per stream"
    );
    let html = tmp.path().join("report.html");
    let o = cnsreplay_within(
        &[
            "analyze",
            "report",
            "--allow-invalid",
            s(&run),
            "-o",
            s(&html),
        ],
        600,
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let page = std::fs::read_to_string(&html).expect("report");
    assert!(page.contains("<th>I/O stream</th>"), "no stream table");
    nothing_left(&c, &run);
}
