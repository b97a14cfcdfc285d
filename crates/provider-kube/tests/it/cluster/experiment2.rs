//! The seed paper's Experiment 2 shape through the cluster with the I/O executed on the backing
//! volumes (`io_exec: local`): 5 Block volumes from the CSI driver, an `io_phase` on each
//! (iogen in the test process on the loop device the driver attached, found through the
//! VolumeAttachment), snapshots round-robin while the I/O runs, then detaches and deletes. Runs
//! when the cluster has the `cnsreplay-csi` StorageClass and the driver keeps its state in
//! `TESTENV_CSI_ROOT` on this machine.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, ListParams};
use provider_kube::{IoExec, KubeConfig};
use trace_format::OpType;

use crate::common::*;

const VOLUMES: usize = 5;

/// The trace: 5 Block volumes, a workload on each, 3 s of I/O on each from 1 s, a snapshot of
/// one volume every 400 ms from 1.5 s (round-robin), then detach, delete snapshots, delete.
fn trace() -> String {
    let mut t = String::from(
        "format: cnsreplay-trace\nversion: 1\n\
         defaults: {storage_class: cnsreplay-csi, snapshot_class: cnsreplay-csi, \
         volume_size: 64Mi, volume_mode: block}\nevents:\n",
    );
    for i in 0..VOLUMES {
        let _ = writeln!(t, "  - {{at: 0s, create_volume: {{volume: v{i}}}}}");
        let _ = writeln!(
            t,
            "  - {{at: 0s, attach: {{workload: w{i}, volumes: [v{i}]}}}}"
        );
        let _ = writeln!(
            t,
            "  - {{at: 1s, io_phase: {{workload: w{i}, volume: v{i}, pattern: random, \
             read_pct: 50, block_size: 4Ki, load: {{depth: 2}}, duration: 3s, direct: true}}}}"
        );
    }
    for k in 0..VOLUMES {
        let at = 1500 + 400 * k;
        let _ = writeln!(
            t,
            "  - {{at: {at}ms, snapshot: {{volume: v{k}, snapshot: s{k}}}}}"
        );
    }
    for i in 0..VOLUMES {
        let _ = writeln!(t, "  - {{at: 6s, detach: {{workload: w{i}}}}}");
        let _ = writeln!(t, "  - {{at: 6s, delete_snapshot: {{snapshot: s{i}}}}}");
        let _ = writeln!(t, "  - {{at: 7s, delete_volume: {{volume: v{i}}}}}");
    }
    t
}

/// What the driver held for the run: volume ids → (image, loop device), snapshot images.
#[derive(Debug, Default)]
struct Backing {
    volumes: BTreeMap<String, (PathBuf, Option<String>)>,
    snapshots: BTreeMap<String, PathBuf>,
}

/// The run's PVC UIDs from its ledger (the provisioner names their volumes `pvc-<uid>`).
fn pvc_uids(run_dir: &Path) -> BTreeSet<String> {
    let Ok(text) = std::fs::read_to_string(run_dir.join("ledger.jsonl")) else {
        return BTreeSet::new();
    };
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "pvc")
        .filter_map(|v| v["detail"]["uid"].as_str().map(str::to_owned))
        .collect()
}

fn driver_state(root: &Path) -> serde_json::Value {
    std::fs::read_to_string(root.join("state.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// Adds the driver's records of the run's volumes (and snapshots of them) to `b`.
fn observe(root: &Path, run_dir: &Path, b: &mut Backing) {
    let uids = pvc_uids(run_dir);
    let st = driver_state(root);
    for (id, v) in st["volumes"].as_object().into_iter().flatten() {
        let name = v["name"].as_str().unwrap_or_default();
        if uids.iter().any(|u| name == format!("pvc-{u}")) {
            let img = PathBuf::from(v["image"].as_str().unwrap_or_default());
            let dev = v["loop_dev"].as_str().map(str::to_owned);
            let e = b.volumes.entry(id.clone()).or_insert((img, None));
            if dev.is_some() {
                e.1 = dev;
            }
        }
    }
    for (id, s) in st["snapshots"].as_object().into_iter().flatten() {
        if b.volumes
            .contains_key(s["source_volume"].as_str().unwrap_or_default())
        {
            let img = PathBuf::from(s["image"].as_str().unwrap_or_default());
            b.snapshots.insert(id.clone(), img);
        }
    }
}

/// Loop devices whose backing file is `image` (also when it was deleted under them).
fn loops_of(image: &Path) -> Vec<String> {
    let out = std::process::Command::new("losetup")
        .args(["--list", "--noheadings", "--output", "NAME,BACK-FILE"])
        .output()
        .unwrap();
    let image = image.to_string_lossy();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|b| b == image.as_ref())
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn experiment2_io_on_the_backing_volumes_with_round_robin_snapshots() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    let Some(root) = csi_driver(&env, &rt, &c, true) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let trace_path = dir.path().join("exp2.yaml");
    std::fs::write(&trace_path, trace()).unwrap();
    let run_dir = dir.path().join("run");
    let p = env.provider_for(
        KubeConfig {
            qps: 200.0,
            burst: 400,
            io_exec: IoExec::Local,
            ..KubeConfig::default()
        },
        &trace_path,
    );

    // Watch the driver's state while the run goes on, to know its images and loop devices.
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (done, root, run_dir) = (done.clone(), root.clone(), run_dir.clone());
        std::thread::spawn(move || {
            let mut b = Backing::default();
            while !done.load(Ordering::Relaxed) {
                observe(&root, &run_dir, &mut b);
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            b
        })
    };
    let (out, p) = replay_run(&trace_path, &run_dir, p);
    done.store(true, Ordering::Relaxed);
    let backing = watcher.join().unwrap();
    let ns = p.namespace().unwrap().to_owned();

    // Every operation succeeded, with ordered phases.
    let recs = events(&run_dir);
    assert_eq!(out.summary.failed, 0, "{:?}", out.summary.errors);
    assert_eq!(recs.len(), VOLUMES * 6 + VOLUMES);
    for r in &recs {
        let names = ordered_phases(r);
        match r.op {
            OpType::IoPhase => assert_eq!(names, ["running", "io-done"], "event {}", r.id),
            OpType::Attach => assert!(names.contains(&"attached"), "{names:?}"),
            OpType::Detach => assert!(names.contains(&"detached"), "{names:?}"),
            _ => {}
        }
    }

    // I/O ran on every unit, on the driver's loop devices.
    let io: Vec<_> = recs.iter().filter(|r| r.op == OpType::IoPhase).collect();
    assert_eq!(io.len(), VOLUMES);
    for r in &io {
        let s: serde_json::Value = serde_json::from_slice(
            &std::fs::read(run_dir.join(format!("io/{}.json", r.id))).unwrap(),
        )
        .unwrap();
        assert!(s["ios"].as_u64().unwrap() > 0, "event {}: {s}", r.id);
        assert_eq!(s["errors"].as_u64(), Some(0), "event {}: {s}", r.id);
        let target = s["target"].as_str().unwrap();
        assert!(target.starts_with("/dev/loop"), "event {}: {target}", r.id);
        assert!(
            backing
                .volumes
                .values()
                .any(|(_, d)| d.as_deref() == Some(target)),
            "event {}: {target} is not one of the run's loop devices {backing:?}",
            r.id
        );
        assert!(run_dir.join(format!("io/{}.hlog", r.id)).is_file());
    }
    assert!(out.summary.io.without_snapshot.count + out.summary.io.with_snapshot.count > 0);

    // The snapshots overlapped the I/O (and the run's I/O split has a with-snapshot side).
    for s in recs.iter().filter(|r| r.op == OpType::Snapshot) {
        assert!(
            io.iter()
                .any(|r| r.started <= s.completed && s.started <= r.completed),
            "snapshot {} [{}, {}] overlaps no I/O",
            s.id,
            s.started,
            s.completed
        );
    }
    assert!(
        out.summary.io.with_snapshot.count > 0,
        "{:?}",
        out.summary.io
    );
    assert!(io.iter().all(|r| r.during_snapshot));

    // Nothing of the run is left: API objects, PVs, VolumeAttachments, and on the driver's
    // side the volume and snapshot records, image files and loop devices.
    assert_eq!(backing.volumes.len(), VOLUMES, "{backing:?}");
    assert_eq!(backing.snapshots.len(), VOLUMES, "{backing:?}");
    let left = rt.block_on(run_objects(&c, &out.manifest.run_id));
    assert!(left.is_empty(), "left behind: {left:?}");
    // The provisioner names each PV `pvc-<PVC uid>`.
    let run_pvs: BTreeSet<String> = pvc_uids(&run_dir)
        .iter()
        .map(|u| format!("pvc-{u}"))
        .collect();
    assert_eq!(run_pvs.len(), VOLUMES);
    let pvs = rt
        .block_on(Api::<PersistentVolume>::all(c.clone()).list(&ListParams::default()))
        .unwrap();
    for pv in &pvs {
        let name = pv.metadata.name.clone().unwrap_or_default();
        let claim_ns = pv
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref()?.namespace.clone());
        assert!(
            !run_pvs.contains(&name) && claim_ns.as_deref() != Some(ns.as_str()),
            "PV left: {name}"
        );
    }
    let vas = rt
        .block_on(Api::<VolumeAttachment>::all(c).list(&ListParams::default()))
        .unwrap();
    for va in &vas {
        let pv = va
            .spec
            .source
            .persistent_volume_name
            .clone()
            .unwrap_or_default();
        assert!(
            !run_pvs.contains(&pv),
            "VolumeAttachment left: {:?}",
            va.metadata.name
        );
    }
    let st = driver_state(&root);
    for (id, (img, _)) in &backing.volumes {
        assert!(st["volumes"].get(id).is_none(), "driver still has {id}");
        assert!(!img.exists(), "image {} left", img.display());
        assert_eq!(loops_of(img), Vec::<String>::new(), "loop device left");
    }
    for (id, img) in &backing.snapshots {
        assert!(st["snapshots"].get(id).is_none(), "driver still has {id}");
        assert!(!img.exists(), "snapshot image {} left", img.display());
    }
}
