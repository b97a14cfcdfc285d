//! The two cases of `crate::group_cut` on testenv's real node through the kube provider and
//! cnsreplay-csi (`traces/*-cut-node.yaml`), the writer and the checker in pods.

use std::path::Path;

use crate::group_cut::{cut_file, origin_unix_ns, record};
use crate::{cnsreplay_within, ok};

/// The kube half on testenv's real node with cnsreplay-csi: the writer and the checker run in
/// pods (`iogen ordered --log -`, `iogen scan`) and the decision is made with the log the
/// writer's pod streamed. The trace's writer, group snapshot and check as on the local
/// provider, timed for pods (`traces/group-snapshot-cut-node.yaml`).
fn run_on_node(
    c: &crate::Cluster,
    trace: &str,
    dir: &Path,
) -> (Vec<serde_json::Value>, std::path::PathBuf) {
    let kc = c.runner_kubeconfig_for(dir, trace);
    let run = dir.join("run");
    let args = crate::kube_run_args(c, &kc, trace, &run, true, &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&cnsreplay_within(&args, 600));
    (crate::run_events(&run), run)
}

#[test]
fn a_group_snapshot_under_ordered_writes_restores_one_cut_on_the_real_node() {
    let Some(c) = crate::real_node_cluster() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (events, run) = run_on_node(&c, "traces/group-snapshot-cut-node.yaml", dir.path());
    for e in &events {
        assert_eq!(e["outcome"], "ok", "{e}");
    }
    let cut = cut_file(&run, 11, &events);
    let verdict = &cut["report"]["verdict"];
    assert_eq!(verdict["verdict"], "consistent", "{cut:#}");
    let seq = verdict["cut_seq"].as_u64().expect("cut_seq");
    let logged = cut["report"]["log_writes"].as_u64().expect("log_writes");
    assert!(
        seq > 0 && seq < logged,
        "the group snapshot must fall inside the writes: cut at {seq} of {logged} writes \
         (the writer's record: {})",
        record(&events, 5)
    );
    // The writer's log came back whole and is the binary log the local provider writes.
    let log = iogen::OrderedLog::read(&run.join("io/5.ordered.log")).expect("log");
    assert_eq!(log.records.len() as u64, logged);
    // Timing: each member taken by the group, inside the group snapshot's own record, with
    // a write pause measured around it.
    let g = record(&events, 6);
    let (started, completed) = (
        g["started"].as_u64().expect("started"),
        g["completed"].as_u64().expect("completed"),
    );
    let members = cut["members"].as_array().expect("members");
    assert_eq!(members.len(), 3, "{cut:#}");
    for m in members {
        let t = &m["taken"];
        assert_eq!(t["by"], "group g1", "{m}");
        let (r, y) = (
            t["requested_ns"].as_u64().expect("requested"),
            t["ready_ns"].as_u64().expect("ready"),
        );
        assert!(started <= r && r <= y && y <= completed, "{m} in {g}");
        assert!(
            t["api_creation_time"].as_str().is_some(),
            "creationTime: {m}"
        );
        assert!(m["pause_ns"].as_u64().is_some(), "{m}");
    }
    assert!(cut["request_to_ready_ns"].as_u64().is_some(), "{cut:#}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).expect("summary"))
            .expect("json");
    let notices = summary["notices"].to_string();
    assert!(
        notices.contains(&format!(
            "cut check (event 11, log db-writes): consistent: cut at sequence number {seq} "
        )) && notices.contains("group g1: request → ready "),
        "{notices}"
    );
    // cnsreplay-csi took the group in one call, the three mounted members frozen together.
    let ops = std::fs::read_to_string(c.get("TESTENV_CSI_OPS_LOG")).expect("driver ops log");
    let run_ns = crate::run_id(&run);
    assert!(
        ops.lines()
            .any(|l| l.contains("\"CreateVolumeGroupSnapshot\"")
                && l.contains("\"OK\"")
                && l.contains("freeze-all")
                && l.matches("vol-").count() >= 3),
        "no frozen group snapshot of three volumes in the driver's log (run {run_ns})"
    );
    #[allow(clippy::print_stderr)]
    {
        eprintln!("{}", cut["verdict"].as_str().unwrap_or_default());
    }
    crate::nothing_left(&c, &run);
}

#[test]
fn separate_snapshots_under_ordered_writes_are_reported_torn_on_the_real_node() {
    let Some(c) = crate::real_node_cluster() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    // The check fails (torn), the rest succeeds: the run completes with status 0.
    let (events, run) = run_on_node(&c, "traces/separate-snapshots-cut-node.yaml", dir.path());
    let cut = cut_file(&run, 13, &events);
    // What makes "torn" the one right answer, from the log and the provider's clock: for
    // snapshots X then Y, a write on X acknowledged after X was ready (so not in X's copy)
    // and a write on Y submitted after that and acknowledged before Y was requested (so in
    // Y's copy). 1 ms margins for the node's clock against the run's.
    let log = iogen::OrderedLog::read(&run.join("io/5.ordered.log")).expect("log");
    let shift = i128::from(log.header.start_unix_ns) - origin_unix_ns(&run);
    let on_run = |ns: u64| u64::try_from(shift + i128::from(ns)).unwrap_or(0);
    let taken = |i: u32, f: &str| {
        cut["members"][i as usize]["taken"][f]
            .as_u64()
            .unwrap_or_else(|| panic!("members[{i}].taken.{f}: {cut:#}"))
    };
    let ms = 1_000_000;
    let witness = (0..3u32)
        .flat_map(|x| (0..3u32).map(move |y| (x, y)))
        .find_map(|(x, y)| {
            if taken(x, "ready_ns") >= taken(y, "requested_ns") {
                return None;
            }
            let after = log
                .records
                .iter()
                .position(|r| r.volume == x && on_run(r.ack_ns) > taken(x, "ready_ns") + ms)?;
            log.records
                .iter()
                .find(|r| {
                    r.volume == y
                        && r.acked_before > after as u64
                        && on_run(r.ack_ns) + ms < taken(y, "requested_ns")
                })
                .map(|r| (x, after, y, r.seq))
        });
    assert!(
        witness.is_some(),
        "no write lies provably between two of the separate snapshots: {cut:#}"
    );
    let v = &cut["report"]["verdict"];
    assert_eq!(v["verdict"], "torn", "{cut:#}");
    let check = record(&events, 13);
    assert_eq!(check["outcome"], "error", "{check}");
    assert_eq!(check["error_class"], "inconsistent", "{check}");
    let missing = v["missing"]["position"].as_u64().expect("position") as usize;
    let rec = log.records[missing];
    let names = ["data", "wal", "index"];
    let msg = check["error"].as_str().unwrap_or_default();
    assert!(
        msg.contains(&format!(
            "torn: volume {} ({}) block {} lacks write {}",
            rec.volume, names[rec.volume as usize], rec.block, rec.seq
        )),
        "{msg}"
    );
    for e in events.iter().filter(|e| e["id"] != 13) {
        assert_eq!(e["outcome"], "ok", "{e}");
    }
    #[allow(clippy::print_stderr)]
    {
        eprintln!("{msg}");
    }
    crate::nothing_left(&c, &run);
}
