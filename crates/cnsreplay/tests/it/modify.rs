//! Issue 18's control operations on testenv's real node: `traces/modify-and-recover.yaml` as
//! shipped, with testenv's own classes, as the account of the pieces of `deploy/rbac/` the trace
//! needs. Attributes-class changes under I/O must change the I/O rate the way the class says (seen
//! in iogen's own intervals, not in the API), a class the driver cannot apply must fail as
//! `infeasible` and change nothing, a resize the backend refuses must fail as `infeasible` and its
//! lowered request must then succeed and leave the volume usable beyond its old size; nothing of
//! the run may be left, the VolumeAttributesClasses it created included.

use std::path::Path;

use crate::{LENIENT, cnsreplay_within, ok, s};

pub(crate) fn events(run: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(run.join("events.jsonl"))
        .expect("events")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

pub(crate) fn phases(e: &serde_json::Value) -> Vec<String> {
    e["phases"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The local provider: a class change under running I/O throttles it from the next request
/// (the kernel's block throttle on the volume's loop device), a lifted limit lets it go again,
/// and the run's blkio cgroup is gone afterwards. Without root or a cgroup v1 blkio
/// hierarchy the change fails as `unsupported`, naming why.
#[test]
fn a_class_change_throttles_local_io_mid_flight() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("t.yaml");
    std::fs::write(
        &trace,
        "format: cnsreplay-trace\nversion: 2\ndefaults: {volume_size: 256Mi}\n\
         attributes_classes:\n  bronze: {write_iops: 200}\n  open: {write_iops: unlimited}\n\
         events:\n\
         - {at: 0, id: 1, create_volume: {volume: data}}\n\
         - {at: 1s, id: 2, attach: {workload: app, volumes: [data]}}\n\
         - {at: 2s, id: 3, io_phase: {workload: app, volume: data, pattern: random, read_pct: 0, \
            block_size: 4Ki, load: {depth: 4}, duration: 8s, direct: true}}\n\
         - {at: 5s, id: 4, modify_volume: {volume: data, class: bronze}}\n\
         - {at: 8s, id: 5, modify_volume: {volume: data, class: open}}\n\
         - {at: 11s, id: 6, detach: {workload: app}}\n\
         - {at: 12s, id: 7, delete_volume: {volume: data}}\n",
    )
    .expect("trace");
    let run = dir.path().join("run");
    let out = cnsreplay_within(
        &[
            "run",
            s(&trace),
            "--provider",
            "local",
            LENIENT,
            "-o",
            s(&run),
        ],
        600,
    );
    ok(&out);
    let evs = events(&run);
    let blkio = provider_local::throttle::blkio_root();
    if !provider_local::sys::is_root() || blkio.is_none() {
        let m = evs.iter().find(|e| e["id"] == 4).expect("modify record");
        assert_eq!(m["error_class"], "unsupported", "{m}");
        assert!(
            m["error"].as_str().is_some_and(|e| e.contains("cgroup v1")),
            "{m}"
        );
        return;
    }
    for e in &evs {
        assert_eq!(e["outcome"], "ok", "{e}");
    }
    let r = analyze::load::Run::open(&run).expect("open run");
    let effects = analyze::modify::effects(&r)
        .expect("effects")
        .expect("trace found");
    let w = |id: u64| {
        effects
            .iter()
            .find(|e| e.id == id)
            .and_then(|e| e.kinds.iter().find(|k| k.kind == "write").cloned())
            .unwrap_or_else(|| panic!("no writes around {id}: {effects:#?}"))
    };
    let (down, up) = (w(4), w(5));
    assert!(down.before.is_some_and(|b| b > 2000.0), "{down:?}");
    assert!(
        down.after.is_some_and(|a| a > 0.0 && a <= 220.0),
        "{down:?}"
    );
    let holds = effects
        .iter()
        .find(|e| e.id == 4)
        .and_then(|e| e.holds_after_ns);
    assert!(holds.is_some_and(|h| h <= 400_000_000), "{holds:?}");
    assert!(up.after.is_some_and(|a| a > 2000.0), "{up:?}");
    // The run's cgroup went with its volume.
    let run_id = serde_json::from_slice::<serde_json::Value>(
        &std::fs::read(run.join("manifest.json")).expect("manifest"),
    )
    .expect("json")["run_id"]
        .as_str()
        .expect("run id")
        .to_owned();
    let cg = blkio.expect("blkio").join("cnsreplay").join(run_id);
    assert!(!cg.exists(), "{} is left", cg.display());
}
