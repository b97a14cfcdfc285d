//! Issue 35's second must-show on the local provider (as root): the changed blocks between two
//! snapshots equal the written set the writer recorded. `traces/incremental-backup.yaml` fills
//! 8 MiB of a raw block volume, snapshots it, rewrites random blocks, snapshots again, and
//! lists the allocated blocks of the first and the delta between them. No write straddles a
//! snapshot there, so the delta must be exactly the blocks of the second phase's written set,
//! computed here from `io/3.written` independently of the provider's own check. (The check
//! failing on a block the delta lacks is `provider_local`'s unit test: the storage gives no
//! way to lose one on purpose.)

use std::collections::BTreeSet;
use std::path::Path;

use crate::{ok, s};

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("json")
}

fn blocks_of(ranges: &serde_json::Value, block: u64) -> BTreeSet<u64> {
    let mut out = BTreeSet::new();
    for r in ranges.as_array().expect("ranges") {
        let (off, len) = (r[0].as_u64().expect("offset"), r[1].as_u64().expect("len"));
        assert_eq!((off % block, len % block), (0, 0), "unaligned range {r}");
        out.extend((off..off + len).step_by(block as usize));
    }
    out
}

#[test]
fn the_delta_between_two_snapshots_is_the_written_set() {
    if crate::skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    let events = crate::run_local("traces/incremental-backup.yaml", &run);
    for e in &events {
        assert_eq!(e["outcome"], "ok", "{e}");
    }
    // The listings (and every other file of the run) as their schemas have them.
    crate::assert_run_dir_matches_schemas(&run);
    // The allocated blocks of s1: the 8 MiB the first phase wrote, nothing else (the image of
    // a raw block volume is sparse).
    let alloc = json(&run.join("cbt/5.json"));
    assert_eq!(
        alloc["ranges"],
        serde_json::json!([[0, 8 << 20]]),
        "{alloc:#}"
    );
    // The delta: exactly the blocks of the second phase's recorded writes.
    let delta = json(&run.join("cbt/6.json"));
    let block = delta["block_size"].as_u64().expect("block_size");
    let got = blocks_of(&delta["ranges"], block);
    let records = iogen::written::read_records(&run.join("io/3.written")).expect("written set");
    let want: BTreeSet<u64> = records
        .iter()
        .flat_map(|w| (w.offset / block * block..w.offset + w.len).step_by(block as usize))
        .collect();
    assert!(!want.is_empty(), "the second phase wrote nothing");
    assert_eq!(
        got.symmetric_difference(&want).take(10).collect::<Vec<_>>(),
        Vec::<&u64>::new(),
        "delta blocks and written blocks differ (first 10 of the difference shown); \
         {} delta blocks, {} written",
        got.len(),
        want.len()
    );
    // The provider's own check agrees, with the second phase's writes all inside the window.
    let c = &delta["check"];
    assert_eq!(c["missing"], 0, "{c:#}");
    assert_eq!(c["extra_blocks"], 0, "{c:#}");
    assert_eq!(c["writes_in_window"], records.len(), "{c:#}");
    assert_eq!(c["blocks_in_window"], want.len(), "{c:#}");
    // Timed as a client sees it.
    for f in [&alloc, &delta] {
        let t = &f["timing"];
        let first = t["first_range_ns"].as_u64().expect("first range");
        let total = t["total_ns"].as_u64().expect("total");
        assert!(first <= total, "{t}");
        assert_eq!(
            t["ranges"],
            f["ranges"].as_array().map(Vec::len).unwrap_or(0),
            "{t}"
        );
    }
    let summary = json(&run.join("summary.json"));
    let notices = summary["notices"].to_string();
    assert!(
        notices.contains("changed blocks (event 6, snapshot_delta s1 → s2, volume data): ")
            && notices.contains(&format!(
                "written set: 0 of {} blocks written between the snapshots missing, 0 extra",
                want.len()
            )),
        "{notices}"
    );
}

/// Snapshots every 2 s under a running writer (`traces/incremental-backup-under-load.yaml`):
/// writes straddle the snapshots, so a delta is no longer exactly a set of writes. Checked
/// here from the run's own records, with windows that do not depend on the provider's: every
/// block a write put there after the earlier snapshot's operation completed and acknowledged
/// before the later one's started is in the delta, and every delta block was written by a
/// write that overlaps the span from the earlier one's start to the later one's completion.
#[test]
fn deltas_under_a_running_writer_hold_the_window_and_nothing_unwritten() {
    if crate::skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    let events = crate::run_local("traces/incremental-backup-under-load.yaml", &run);
    for e in &events {
        assert_eq!(e["outcome"], "ok", "{e}");
    }
    let at = |id: u64, field: &str| {
        events
            .iter()
            .find(|e| e["id"] == id)
            .and_then(|e| e[field].as_u64())
            .unwrap_or_else(|| panic!("no {field} of event {id}"))
    };
    let records = iogen::written::read_records(&run.join("io/1.written")).expect("written set");
    // (delta event, earlier snapshot's event, later snapshot's event)
    for (delta_id, base, target) in [(5, 2, 3), (6, 3, 4)] {
        let delta = json(&run.join(format!("cbt/{delta_id}.json")));
        let block = delta["block_size"].as_u64().expect("block_size");
        let got = blocks_of(&delta["ranges"], block);
        let of = |w: &iogen::written::WriteRecord| {
            (w.offset / block * block..w.offset + w.len).step_by(block as usize)
        };
        let must: BTreeSet<u64> = records
            .iter()
            .filter(|w| {
                w.submitted_ns >= at(base, "completed") && w.acked_ns <= at(target, "started")
            })
            .flat_map(of)
            .collect();
        let may: BTreeSet<u64> = records
            .iter()
            .filter(|w| {
                w.acked_ns >= at(base, "started") && w.submitted_ns <= at(target, "completed")
            })
            .flat_map(of)
            .collect();
        assert!(
            must.len() > 100,
            "delta {delta_id}: the writer barely wrote between the snapshots"
        );
        let lacking: Vec<_> = must.difference(&got).take(10).collect();
        assert!(
            lacking.is_empty(),
            "delta {delta_id} lacks written blocks {lacking:?}"
        );
        let unwritten: Vec<_> = got.difference(&may).take(10).collect();
        assert!(
            unwritten.is_empty(),
            "delta {delta_id} has blocks no write touched: {unwritten:?}"
        );
        let c = &delta["check"];
        assert_eq!(
            (c["missing"].as_u64(), c["extra_blocks"].as_u64()),
            (Some(0), Some(0)),
            "{c:#}"
        );
    }
}

/// Issue 35's synth scenario end to end: `traces/synth/incremental-backup.yaml` (three raw
/// block volumes written in bursts, a snapshot of each every 4 s in the gaps, the first listed
/// in full, each later one as the delta from the previous one, `retain: 2`) synthesized at a
/// fixed seed, replayed on the local provider, then reported. Every delta is checked against
/// complete written sets of its volume's writers with nothing missing and nothing extra, and the
/// report's `cbt-1` figure draws every listing with that verdict in its title.
#[test]
fn a_synthesized_incremental_backup_runs_with_every_delta_checked_and_drawn() {
    if crate::skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("backup.jsonl");
    let o = crate::cnsreplay(&[
        "synth",
        "traces/synth/incremental-backup.yaml",
        "-o",
        s(&trace),
        "--seed",
        "7",
    ]);
    ok(&o);
    let text = std::fs::read_to_string(&trace).expect("trace");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).expect("event"))
        .collect();
    // The backup schedule, as synthesized: snapshots, listings, retention, the volumes' ends.
    let schedule: Vec<&str> = text
        .lines()
        .filter(|l| {
            ["\"snapshot", "\"delete_snapshot\"", "\"delete_volume\""]
                .iter()
                .any(|k| l.contains(k))
        })
        .collect();
    insta::assert_snapshot!("synth_incremental_backup_schedule", schedule.join("\n"));
    let ids = |op: &str| -> Vec<u64> {
        lines
            .iter()
            .filter(|e| e.get(op).is_some())
            .map(|e| e["id"].as_u64().expect("id"))
            .collect()
    };
    let (fulls, deltas) = (ids("snapshot_allocated"), ids("snapshot_delta"));
    assert_eq!((fulls.len(), deltas.len()), (3, 9));

    let run = dir.path().join("run");
    let events = crate::run_local(s(&trace), &run);
    assert_eq!(events.len(), lines.len());
    for e in &events {
        assert_eq!(e["outcome"], "ok", "{e}");
    }
    for id in &fulls {
        let f = json(&run.join(format!("cbt/{id}.json")));
        assert_eq!(f["op"], "snapshot_allocated", "{f:#}");
        // The first burst wrote before the full backup's snapshot.
        assert!(f["timing"]["bytes"].as_u64() > Some(1 << 20), "{f:#}");
    }
    for id in &deltas {
        let f = json(&run.join(format!("cbt/{id}.json")));
        let c = &f["check"];
        assert_eq!(f["block_size"], 4096, "{f:#}");
        assert!(
            !c["phases"].as_array().expect("phases").is_empty()
                && c["not_checked"].as_array().is_some_and(Vec::is_empty),
            "delta {id} not fully checked: {c:#}"
        );
        assert_eq!(
            (c["missing"].as_u64(), c["extra_blocks"].as_u64()),
            (Some(0), Some(0)),
            "delta {id}: {c:#}"
        );
        // A burst of 2.5 s at 400 writes/s over 4096 blocks lies between the snapshots.
        assert!(
            c["blocks_in_window"].as_u64() > Some(500),
            "delta {id}: the writers barely wrote between the snapshots: {c:#}"
        );
    }

    // The report draws every listing (above its bytes, below first range and total).
    let fig = crate::report_figure(&run, dir.path(), "cbt-1");
    assert!(
        fig.starts_with(" data-figure=\"cbt-1\" data-points=\"36\"")
            && fig.contains("Changed blocks: deltas: 9 checked, 0 missing<")
            && fig.contains("3 snapshot_allocated, 9 snapshot_delta"),
        "{fig}"
    );
    assert!(dir.path().join("svg/cbt-1.svg").is_file());
}
