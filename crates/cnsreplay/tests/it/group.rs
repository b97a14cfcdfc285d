//! Issue 18's group snapshot, `traces/group-snapshot.yaml` as shipped: five volumes written
//! with verifiable blocks, one group snapshot of them mid-write, each member restored and read
//! back in full. Every restored member must hold only whole, in-place blocks (iogen's verify,
//! 0 mismatches) and hold some; nothing of the run may be left. Locally (as root) and on
//! testenv's real node through VolumeGroupSnapshot and cnsreplay-csi's GroupController.

use std::path::Path;

use crate::{LENIENT, cnsreplay_within, ok, s};

/// The restored members' verification, from their iogen logs (`intact`, `MISMATCHES`).
fn verified(run: &Path, ids: std::ops::RangeInclusive<u64>) -> Vec<(u64, u64, u64)> {
    ids.map(|id| {
        let json = run.join(format!("io/{id}.json"));
        let text = if json.is_file() {
            std::fs::read_to_string(&json).expect("summary")
        } else {
            std::fs::read_to_string(run.join(format!("io/{id}.log"))).expect("log")
        };
        let num = |after: &str| -> u64 {
            let line = text
                .lines()
                .find(|l| l.contains("MISMATCHES"))
                .map(str::to_owned)
                .unwrap_or_default();
            line.split(after)
                .next()
                .and_then(|h| h.rsplit(' ').find(|w| !w.is_empty()))
                .and_then(|w| w.parse().ok())
                .unwrap_or(u64::MAX)
        };
        if json.is_file() {
            let v: serde_json::Value = serde_json::from_str(&text).expect("json");
            let f = |k: &str| v["verify"][k].as_u64().unwrap_or(u64::MAX);
            (id, f("intact"), f("mismatches"))
        } else {
            (id, num(" intact"), num(" MISMATCHES"))
        }
    })
    .collect()
}

pub(crate) fn check_run(run: &Path) {
    let events: Vec<serde_json::Value> = std::fs::read_to_string(run.join("events.jsonl"))
        .expect("events")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for e in &events {
        assert_eq!(e["outcome"], "ok", "{e}");
    }
    let group = events
        .iter()
        .find(|e| e["op"] == "group_snapshot")
        .expect("group_snapshot record");
    // Taken while the writers ran: its completion inside every writer's span.
    for w in events
        .iter()
        .filter(|e| (7..=11).contains(&e["id"].as_u64().unwrap_or(0)))
    {
        let (s0, e0) = (w["started"].as_u64(), w["completed"].as_u64());
        let (gs, ge) = (group["started"].as_u64(), group["completed"].as_u64());
        assert!(
            s0 < gs && ge < e0,
            "the group snapshot {gs:?}..{ge:?} is not inside writer {} {s0:?}..{e0:?}",
            w["id"]
        );
    }
    for (id, intact, bad) in verified(run, 19..=23) {
        assert_eq!(bad, 0, "restored member of event {id}: {bad} mismatches");
        assert!(
            intact > 0 && intact != u64::MAX,
            "restored member of event {id} holds no iogen block ({intact})"
        );
    }
}

#[test]
fn a_group_snapshot_of_five_volumes_under_io_restores_consistent_members_locally() {
    if crate::skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    ok(&cnsreplay_within(
        &[
            "run",
            "traces/group-snapshot.yaml",
            "--provider",
            "local",
            LENIENT,
            "-o",
            s(&run),
        ],
        600,
    ));
    check_run(&run);
    let ev = std::fs::read_to_string(run.join("events.jsonl")).expect("events");
    let group = ev
        .lines()
        .find(|l| l.contains("\"group_snapshot\""))
        .expect("group record");
    // All five frozen together, then thawed together.
    assert!(
        group.contains("freeze-all") && group.contains("thaw-all"),
        "{group}"
    );
}
