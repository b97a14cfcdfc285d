//! Volumes, snapshots and restores on real storage: what create, attach, snapshot, restore,
//! resize, detach and delete make, change and remove.

use std::os::unix::fs::FileExt;

use provider_local::Mode;

use crate::{HEADER, Run, has, loop_or_skip, loops_settled, sh};

const DATA_FILE: &str = "cnsreplay-io.dat";

/// Reads `len` bytes of `path` at `offset`.
fn read_at(path: &std::path::Path, offset: u64, len: usize) -> Vec<u8> {
    let f = fs_err::File::open(path).expect("open");
    let mut buf = vec![0u8; len];
    f.file().read_exact_at(&mut buf, offset).expect("read");
    buf
}

/// Without loop devices a volume is a directory holding one sparse data file of the volume's
/// size; a bare write lands in it; a snapshot and a restore copy it; resize and the rules of
/// a resize hold; delete removes each, and the ledger ends with only the objects directory.
#[test]
fn a_directory_volume_is_a_data_file_that_snapshots_restore_and_delete_copy_and_remove() {
    let run = Run::start(
        Mode::Dir,
        &format!(
            "{HEADER}events:
  - {{at: 0, id: 1, create_volume: {{volume: v, size: 4Mi}}}}
  - {{at: 0, id: 2, io: {{volume: v, kind: write, offset: 8192, len: 4096}}}}
  - {{at: 0, id: 3, snapshot: {{volume: v, snapshot: s}}}}
  - {{at: 0, id: 4, create_volume: {{volume: r, source: {{snapshot: s}}}}}}
  - {{at: 0, id: 5, resize: {{volume: v, size: 8Mi}}}}
  - {{at: 0, id: 6, resize: {{volume: v, size: 6Mi}}}}
  - {{at: 0, id: 7, attach: {{workload: w, volumes: [v]}}}}
  - {{at: 0, id: 8, delete_volume: {{volume: v}}}}
  - {{at: 0, id: 9, detach: {{workload: w}}}}
  - {{at: 0, id: 10, delete_snapshot: {{snapshot: s}}}}
  - {{at: 0, id: 11, delete_volume: {{volume: r}}}}
  - {{at: 0, id: 12, delete_volume: {{volume: v}}}}
"
        ),
    );
    assert_eq!(run.ok(1), ["allocate"]);
    let v = run.object("vol-v-");
    assert!(v.is_dir(), "a directory volume: {}", v.display());
    let data = v.join(DATA_FILE);
    assert_eq!(fs_err::metadata(&data).expect("data file").len(), 4 << 20);

    assert_eq!(run.ok(2), ["io"]);
    assert!(
        read_at(&data, 8192, 4096) == [0xA5; 4096],
        "the write is in the data file"
    );
    assert!(
        read_at(&data, 4096, 4096) == [0; 4096],
        "and nothing beside it"
    );

    let phases = run.ok(3);
    assert!(
        has(&phases, "copy-reflink") || has(&phases, "copy-full"),
        "a snapshot says how it copied: {phases:?}"
    );
    let s = run.object("snap-s-").join(DATA_FILE);
    assert!(
        fs_err::read(&s).expect("snapshot") == fs_err::read(&data).expect("volume"),
        "the snapshot holds the volume's bytes"
    );

    run.ok(4);
    let r = run.object("vol-r-").join(DATA_FILE);
    assert!(
        fs_err::read(&r).expect("restored") == fs_err::read(&data).expect("volume"),
        "a restore holds the snapshot's bytes"
    );

    run.ok(5);
    let e = run.fails(6);
    assert_eq!(e.class, "invalid", "{}", e.message);
    assert!(e.message.contains("does not grow it"), "{}", e.message);

    run.ok(7);
    let e = run.fails(8);
    assert_eq!(e.class, "still_attached", "{}", e.message);
    assert!(v.exists(), "a refused delete removes nothing");
    run.ok(9);

    for id in 10..=12 {
        run.ok(id);
    }
    assert!(!v.exists() && !run.has_object("vol-r-") && !run.has_object("snap-s-"));
    assert_eq!(run.leftovers(), ["root objects"]);
    let report = run.cleanup();
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert!(
        !run.objects().exists(),
        "cleanup removes the objects directory"
    );
    assert!(run.leftovers().is_empty(), "{:?}", run.leftovers());
}

/// As root a file-system volume is an ext4 image: attach gives it a loop device and a mount,
/// a snapshot freezes it around a copy, a resize grows the image, the loop device and the
/// mounted file system, a restore to a larger size grows the copy's file system, and detach
/// and delete take each step back.
#[test]
fn a_loop_volume_is_formatted_attached_snapshotted_grown_restored_and_removed() {
    let Some(mode) = loop_or_skip("a loop-device volume") else {
        return;
    };
    let run = Run::start(
        mode,
        &format!(
            "{HEADER}events:
  - {{at: 0, id: 1, create_volume: {{volume: v, size: 64Mi}}}}
  - {{at: 0, id: 2, attach: {{workload: w, volumes: [v]}}}}
  - {{at: 0, id: 3, io: {{volume: v, kind: write, offset: 0, len: 4096}}}}
  - {{at: 0, id: 4, snapshot: {{volume: v, snapshot: s}}}}
  - {{at: 0, id: 5, resize: {{volume: v, size: 128Mi}}}}
  - {{at: 0, id: 6, create_volume: {{volume: r, size: 96Mi, source: {{snapshot: s}}}}}}
  - {{at: 0, id: 7, detach: {{workload: w}}}}
  - {{at: 0, id: 8, delete_snapshot: {{snapshot: s}}}}
  - {{at: 0, id: 9, delete_volume: {{volume: r}}}}
  - {{at: 0, id: 10, delete_volume: {{volume: v}}}}
"
        ),
    );
    assert_eq!(run.ok(1), ["allocate", "mkfs"]);
    let image = run.object("vol-v-");
    assert_eq!(fs_err::metadata(&image).expect("image").len(), 64 << 20);
    assert_eq!(
        sh(
            "blkid",
            &["-o", "value", "-s", "TYPE", image.to_str().expect("utf-8")]
        ),
        "ext4"
    );

    assert_eq!(run.ok(2), ["losetup", "mount", "running"]);
    let devs = loops_settled(&image, 1);
    let mount = fs_err::read_dir(run.objects().join("mnt"))
        .expect("mount points")
        .next()
        .expect("one mount point")
        .expect("entry")
        .path();
    assert!(
        provider_local::sys::is_mounted(&mount),
        "{} is mounted",
        mount.display()
    );

    run.ok(3);
    assert!(
        read_at(&mount.join(DATA_FILE), 0, 4096) == [0xA5; 4096],
        "the write is in the data file on the mount"
    );

    let phases = run.ok(4);
    assert!(
        has(&phases, "freeze") && has(&phases, "thaw"),
        "a mounted volume is frozen around its copy: {phases:?}"
    );
    let snap = run.object("snap-s-");
    assert_eq!(fs_err::metadata(&snap).expect("snapshot").len(), 64 << 20);

    let phases = run.ok(5);
    assert!(
        has(&phases, "grow-file") && has(&phases, "losetup-c"),
        "resize grows the file and the loop device: {phases:?}"
    );
    assert!(
        has(&phases, "resize2fs-online") || has(&phases, "resize2fs-offline"),
        "and the file system: {phases:?}"
    );
    assert_eq!(fs_err::metadata(&image).expect("image").len(), 128 << 20);
    let dev = &devs[0];
    assert_eq!(
        sh("blockdev", &["--getsize64", dev]),
        (128u64 << 20).to_string()
    );
    let fs_size: u64 = sh(
        "df",
        &["-B1", "--output=size", mount.to_str().expect("utf-8")],
    )
    .lines()
    .last()
    .and_then(|l| l.trim().parse().ok())
    .expect("df's size");
    assert!(
        fs_size > 100 << 20,
        "the mounted file system grew: {fs_size} bytes"
    );
    assert!(
        provider_local::sys::is_mounted(&mount),
        "still mounted after the resize"
    );

    let phases = run.ok(6);
    assert!(
        has(&phases, "resize2fs"),
        "a larger restore grows its copy: {phases:?}"
    );
    let restored = run.object("vol-r-");
    assert_eq!(
        fs_err::metadata(&restored).expect("restored").len(),
        96 << 20
    );
    sh("e2fsck", &["-f", "-n", restored.to_str().expect("utf-8")]);

    assert_eq!(run.ok(7), ["io-stopped", "umount", "losetup-d"]);
    loops_settled(&image, 0);
    assert!(!provider_local::sys::is_mounted(&mount));

    for id in 8..=10 {
        run.ok(id);
    }
    assert!(!image.exists() && !snap.exists() && !restored.exists());
    assert_eq!(run.leftovers(), ["root objects"]);
}

/// A block volume is a raw image: no file system is made, attach gives it a loop device and
/// no mount, and bare I/O on it while attached goes to the device.
#[test]
fn a_block_volume_gets_a_loop_device_and_no_file_system() {
    let Some(mode) = loop_or_skip("a block volume") else {
        return;
    };
    let run = Run::start(
        mode,
        &format!(
            "{HEADER}events:
  - {{at: 0, id: 1, create_volume: {{volume: b, size: 16Mi, volume_mode: block}}}}
  - {{at: 0, id: 2, attach: {{workload: w, volumes: [b]}}}}
  - {{at: 0, id: 3, io: {{volume: b, kind: write, offset: 65536, len: 4096}}}}
  - {{at: 0, id: 4, detach: {{workload: w}}}}
  - {{at: 0, id: 5, delete_volume: {{volume: b}}}}
"
        ),
    );
    assert_eq!(run.ok(1), ["allocate"]);
    let image = run.object("vol-b-");
    let o = std::process::Command::new("blkid")
        .arg(&image)
        .output()
        .expect("blkid");
    assert!(
        o.stdout.is_empty(),
        "no file system on a block volume: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(run.ok(2), ["losetup", "running"]);
    let dev = loops_settled(&image, 1).remove(0);
    run.ok(3);
    assert!(
        read_at(std::path::Path::new(&dev), 65536, 4096) == [0xA5; 4096],
        "the write is on the loop device {dev}"
    );
    assert_eq!(run.ok(4), ["io-stopped", "losetup-d"]);
    // The device's last opener flushes its cache into the image; something else (udev, say)
    // may hold it a moment longer.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while read_at(&image, 65536, 4096) != [0xA5; 4096] {
        assert!(
            std::time::Instant::now() < deadline,
            "the write never reached the image behind {dev}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    run.ok(5);
    assert!(!image.exists());
}

/// A group snapshot freezes every mounted member before the first copy and thaws them after
/// the last, so the copies share one instant; a member restored from it holds what its volume
/// held; deleting the group removes every member's copy.
#[test]
fn a_group_snapshot_copies_its_frozen_members_and_restores_one_of_them() {
    let Some(mode) = loop_or_skip("a group snapshot of mounted volumes") else {
        return;
    };
    let run = Run::start(
        mode,
        &format!(
            "{HEADER}events:
  - {{at: 0, id: 1, create_volume: {{volume: data, size: 32Mi}}}}
  - {{at: 0, id: 2, create_volume: {{volume: log, size: 32Mi}}}}
  - {{at: 0, id: 3, attach: {{workload: db, volumes: [data, log]}}}}
  - {{at: 0, id: 4, io: {{volume: log, kind: write, offset: 4096, len: 4096}}}}
  - {{at: 0, id: 5, group_snapshot: {{group: g, volumes: [log, data]}}}}
  - {{at: 0, id: 6, create_volume: {{volume: back, source: {{group_member: {{group: g, volume: log}}}}}}}}
  - {{at: 0, id: 7, attach: {{workload: check, volumes: [back]}}}}
  - {{at: 0, id: 8, detach: {{workload: check}}}}
  - {{at: 0, id: 9, detach: {{workload: db}}}}
  - {{at: 0, id: 10, delete_group_snapshot: {{group: g}}}}
"
        ),
    );
    for id in 1..=4 {
        run.ok(id);
    }
    let phases = run.ok(5);
    let at = |name: &str| phases.iter().position(|p| p == name);
    assert!(
        matches!((at("freeze-all"), at("thaw-all")), (Some(f), Some(t)) if f < t),
        "every member frozen, then all thawed: {phases:?}"
    );
    assert!(
        has(&phases, "copy-reflink") || has(&phases, "copy-full"),
        "{phases:?}"
    );
    let (gdata, glog) = (run.object("group-g-data-"), run.object("group-g-log-"));
    sh("e2fsck", &["-f", "-n", glog.to_str().expect("utf-8")]);

    run.ok(6);
    run.ok(7);
    let mnt = run.objects().join("mnt");
    let mounted: Vec<_> = fs_err::read_dir(&mnt)
        .expect("mount points")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("back-"))
        })
        .collect();
    assert_eq!(mounted.len(), 1, "{mounted:?}");
    assert!(
        read_at(&mounted[0].join(DATA_FILE), 4096, 4096) == [0xA5; 4096],
        "the restored member holds the write made before the group snapshot"
    );
    run.ok(8);
    run.ok(9);
    run.ok(10);
    assert!(
        !gdata.exists() && !glog.exists(),
        "the group's copies are removed"
    );
}
