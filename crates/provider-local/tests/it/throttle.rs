//! `modify_volume`: an attributes class's limits on the kernel's block throttle of the
//! volume's loop device, in the volume's own blkio cgroup.

use provider_local::Mode;
use provider_local::throttle::{self, Limits};

use crate::{HEADER, Run, has, loop_or_skip, loops_settled};

const CLASSES: &str = "attributes_classes:
  bronze: {read_iops: 200, write_bps: 10Mi}
  gold: {read_iops: unlimited}
  platinum: {iops: 100000}
";

/// The limits in force for the volume's (only) loop device in its (only) cgroup.
fn in_force(run: &Run, image: &std::path::Path) -> Limits {
    let cgroups: Vec<String> = run
        .live()
        .into_iter()
        .filter(|e| e.kind == "cgroup")
        .map(|e| e.id)
        .collect();
    assert_eq!(
        cgroups.len(),
        1,
        "one cgroup for the one volume: {cgroups:?}"
    );
    let devs = loops_settled(image, 1);
    let num = throttle::dev_number(std::path::Path::new(&devs[0])).expect("device number");
    throttle::read(std::path::Path::new(&cgroups[0]), &num).expect("reading the throttle")
}

/// A class's limits are written for the attached loop device; a later class changes only the
/// keys it names (`unlimited` lifts one); a new loop device after detach and attach gets the
/// limits again; delete removes the cgroup.
#[test]
fn modify_volume_puts_the_class_limits_on_the_volumes_loop_device() {
    let Some(mode) = loop_or_skip("the block throttle") else {
        return;
    };
    if throttle::blkio_root().is_none() {
        #[allow(clippy::print_stderr)] // the skip line is the contract
        {
            eprintln!("skipped: no cgroup v1 blkio hierarchy on this host");
        }
        return;
    }
    let run = Run::start(
        mode,
        &format!(
            "{HEADER}{CLASSES}events:
  - {{at: 0, id: 1, create_volume: {{volume: v, size: 16Mi, volume_mode: block}}}}
  - {{at: 0, id: 2, attach: {{workload: w, volumes: [v]}}}}
  - {{at: 0, id: 3, modify_volume: {{volume: v, class: bronze}}}}
  - {{at: 0, id: 4, modify_volume: {{volume: v, class: gold}}}}
  - {{at: 0, id: 5, modify_volume: {{volume: v, class: platinum}}}}
  - {{at: 0, id: 6, detach: {{workload: w}}}}
  - {{at: 0, id: 7, attach: {{workload: w, volumes: [v]}}}}
  - {{at: 0, id: 8, detach: {{workload: w}}}}
  - {{at: 0, id: 9, delete_volume: {{volume: v}}}}
"
        ),
    );
    run.ok(1);
    let image = run.object("vol-v-");
    let cgroup = run
        .live()
        .into_iter()
        .find(|e| e.kind == "cgroup")
        .map(|e| std::path::PathBuf::from(e.id))
        .expect("a volume of a run with attributes classes has a cgroup");
    assert!(cgroup.is_dir(), "{}", cgroup.display());
    run.ok(2);
    assert_eq!(
        in_force(&run, &image),
        Limits::default(),
        "no class yet: no limit"
    );

    assert_eq!(run.ok(3), ["throttled"]);
    let bronze = Limits([Some(200), None, None, Some(10 << 20)]);
    assert_eq!(in_force(&run, &image), bronze);

    run.ok(4);
    assert_eq!(
        in_force(&run, &image),
        Limits([None, None, None, Some(10 << 20)]),
        "gold lifts read_iops and leaves write_bps"
    );

    let e = run.fails(5);
    assert_eq!(e.class, "infeasible", "{}", e.message);
    assert!(
        e.message.contains("unknown parameter \"iops\""),
        "{}",
        e.message
    );
    assert_eq!(
        in_force(&run, &image),
        Limits([None, None, None, Some(10 << 20)]),
        "a refused class changes nothing"
    );

    run.ok(6);
    let phases = run.ok(7);
    assert!(
        has(&phases, "throttle"),
        "a new loop device gets the limits: {phases:?}"
    );
    assert_eq!(
        in_force(&run, &image),
        Limits([None, None, None, Some(10 << 20)])
    );
    run.ok(8);
    run.ok(9);
    assert!(!cgroup.exists(), "delete removes the volume's cgroup");
}

/// Where the throttle cannot be used — volumes are directories — a valid class fails
/// `unsupported` saying why, and a class outside the vocabulary fails `infeasible` first.
#[test]
fn without_loop_devices_modify_volume_says_why_it_cannot() {
    let run = Run::start(
        Mode::Dir,
        &format!(
            "{HEADER}{CLASSES}events:
  - {{at: 0, id: 1, create_volume: {{volume: v, size: 4Mi}}}}
  - {{at: 0, id: 2, modify_volume: {{volume: v, class: bronze}}}}
  - {{at: 0, id: 3, modify_volume: {{volume: v, class: platinum}}}}
"
        ),
    );
    run.ok(1);
    let e = run.fails(2);
    assert_eq!(e.class, "unsupported", "{}", e.message);
    assert!(
        e.message.contains("cgroup v1 block throttle"),
        "{}",
        e.message
    );
    let e = run.fails(3);
    assert_eq!(e.class, "infeasible", "{}", e.message);
}
