//! Cleanup from the ledger after a run that ended without undoing its work (a crash): the
//! run's mounts, loop devices, images and directories go, nothing else does.

use provider_local::Mode;

use crate::{HEADER, Run, loops_settled, modes};

/// Volumes left attached and snapshots left behind are removed from the ledger alone, newest
/// first; a file in the objects directory that the ledger does not name survives (and keeps
/// the directory), and a ledger entry outside the run directory is refused, untouched.
#[test]
fn cleanup_after_a_crash_removes_the_runs_objects_and_nothing_else() {
    for mode in modes() {
        let run = Run::start(
            mode,
            &format!(
                "{HEADER}events:
  - {{at: 0, id: 1, create_volume: {{volume: a, size: 16Mi}}}}
  - {{at: 0, id: 2, create_volume: {{volume: b, size: 16Mi, volume_mode: block}}}}
  - {{at: 0, id: 3, attach: {{workload: w, volumes: [a, b]}}}}
  - {{at: 0, id: 4, snapshot: {{volume: a, snapshot: s}}}}
"
            ),
        );
        for id in 1..=4 {
            run.ok(id);
        }
        let (a, b, s) = (
            run.object("vol-a-"),
            run.object("vol-b-"),
            run.object("snap-s-"),
        );
        if mode == Mode::Loop {
            loops_settled(&a, 1);
            loops_settled(&b, 1);
        }
        let decoy = run.objects().join("decoy.txt");
        fs_err::write(&decoy, "not the run's").expect("decoy");
        let outside = run.dir.path().join("outside.txt");
        fs_err::write(&outside, "outside the run directory").expect("outside");
        replay::Ledger::open(run.run_dir())
            .expect("ledger")
            .intend(
                "file",
                outside.to_str().expect("utf-8"),
                serde_json::Value::Null,
            )
            .expect("intend");

        let report = run.cleanup();
        assert_eq!(
            report.failed.len(),
            2,
            "{mode:?}: the outside entry and the objects directory kept by the decoy: {:?}",
            report.failed
        );
        assert!(
            report
                .failed
                .iter()
                .any(|f| f.contains("outside the run directory, not touched")),
            "{:?}",
            report.failed
        );
        assert!(
            outside.exists() && decoy.exists(),
            "{mode:?}: nothing not the run's is removed"
        );
        assert!(
            !a.exists() && !b.exists() && !s.exists(),
            "{mode:?}: images removed"
        );
        loops_settled(&a, 0);
        loops_settled(&b, 0);
        assert!(
            !run.objects().join("mnt").exists(),
            "{mode:?}: mount points removed"
        );
        let left = run.leftovers();
        assert_eq!(left.len(), 2, "{mode:?}: {left:?}");
        assert!(left.iter().any(|l| l == "root objects"), "{left:?}");

        // Without the decoy and the foreign entry, a second cleanup finishes the job.
        fs_err::remove_file(&decoy).expect("decoy");
        let live: Vec<_> = run
            .live()
            .into_iter()
            .filter(|e| e.kind == "root")
            .collect();
        let report = provider_local::cleanup(&run.info, &live);
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        assert!(!run.objects().exists());
        assert!(outside.exists());
    }
}
