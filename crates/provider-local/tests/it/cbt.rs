//! Changed blocks between two snapshots, listed from the snapshot images themselves.

use crate::{HEADER, Run, modes};

/// The `[offset, length]` ranges of `cbt/ID.json`.
fn ranges(run: &Run, id: u64) -> Vec<(u64, u64)> {
    let path = run.run_dir().join(format!("cbt/{id}.json"));
    let v: serde_json::Value = serde_json::from_slice(&fs_err::read(&path).expect("cbt file"))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    v["ranges"]
        .as_array()
        .unwrap_or_else(|| panic!("{} has no ranges: {v}", path.display()))
        .iter()
        .map(|r| {
            (
                r[0].as_u64().expect("offset"),
                r[1].as_u64().expect("length"),
            )
        })
        .collect()
}

/// Blocks written before the first snapshot are its allocated blocks; the delta to the second
/// holds exactly the blocks written between them (merged where adjacent), not the earlier
/// ones; each listing is a `cbt/ID.json` file and a notice. In directory mode the listing is
/// of the data file; as root also of a raw block volume's image.
#[test]
fn the_delta_between_two_snapshots_is_the_blocks_written_between_them() {
    for mode in modes() {
        let run = Run::start(
            mode,
            &format!(
                "{HEADER}events:
  - {{at: 0, id: 1, create_volume: {{volume: d, size: 16Mi, volume_mode: block}}}}
  - {{at: 0, id: 2, io: {{volume: d, kind: write, offset: 0, len: 4096}}}}
  - {{at: 0, id: 3, io: {{volume: d, kind: write, offset: 1Mi, len: 4096}}}}
  - {{at: 0, id: 4, snapshot: {{volume: d, snapshot: s1}}}}
  - {{at: 0, id: 5, io: {{volume: d, kind: write, offset: 4Mi, len: 4096}}}}
  - {{at: 0, id: 6, io: {{volume: d, kind: write, offset: 8Mi, len: 8192}}}}
  - {{at: 0, id: 7, io: {{volume: d, kind: write, offset: 8200Ki, len: 4096}}}}
  - {{at: 0, id: 8, snapshot: {{volume: d, snapshot: s2}}}}
  - {{at: 0, id: 9, snapshot_allocated: {{snapshot: s1}}}}
  - {{at: 0, id: 10, snapshot_delta: {{base: s1, snapshot: s2}}}}
"
            ),
        );
        for id in 1..=8 {
            run.ok(id);
        }
        let phases = run.ok(9);
        assert_eq!(phases, ["first-range", "listed"], "{mode:?}");
        assert_eq!(
            ranges(&run, 9),
            [(0, 4096), (1 << 20, 4096)],
            "{mode:?}: s1's allocated blocks are the two written before it"
        );
        run.ok(10);
        assert_eq!(
            ranges(&run, 10),
            [(4 << 20, 4096), (8 << 20, 12288)],
            "{mode:?}: the delta is what was written between the snapshots, adjacent blocks \
             merged, nothing written before s1"
        );
        let notices = run.notices();
        assert!(
            notices
                .iter()
                .any(|n| n.contains("snapshot_delta s1 → s2") && n.contains("2 ranges")),
            "{mode:?}: {notices:?}"
        );
    }
}
