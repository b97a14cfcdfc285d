//! The cluster-wide PV and VolumeAttachment watches hold the run's objects and none of the
//! cluster's others, whether those existed before the run (the watches' first list) or
//! appeared while the watches ran (their events).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use trace_format::OpType;

use crate::common::*;

/// A hostPath PV labelled `cnsreplay-test: tag`, bound to a claim in `claim_ns` when given.
fn pv(tag: &str, name: &str, claim_ns: Option<&str>) -> PersistentVolume {
    let claim = claim_ns.map_or(String::new(), |ns| {
        format!(r#", "claimRef": {{"namespace": "{ns}", "name": "none"}}"#)
    });
    serde_json::from_str(&format!(
        r#"{{"metadata": {{"name": "{name}", "labels": {{"cnsreplay-test": "{tag}"}}}},
            "spec": {{"capacity": {{"storage": "1Gi"}}, "accessModes": ["ReadWriteOnce"],
                      "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "foreign-none",
                      "hostPath": {{"path": "/tmp/{name}"}}{claim}}}}}"#
    ))
    .unwrap()
}

/// A VolumeAttachment labelled `cnsreplay-test: tag` that no driver acts on.
fn va(tag: &str, name: &str, pv: &str) -> VolumeAttachment {
    serde_json::from_str(&format!(
        r#"{{"metadata": {{"name": "{name}", "labels": {{"cnsreplay-test": "{tag}"}}}},
            "spec": {{"attacher": "foreign.invalid", "nodeName": "foreign-node",
                      "source": {{"persistentVolumeName": "{pv}"}}}}}}"#
    ))
    .unwrap()
}

/// Deletes the test's PVs and VolumeAttachments when the test ends, passed or not.
struct Made<'a> {
    rt: &'a tokio::runtime::Runtime,
    pvs: Api<PersistentVolume>,
    vas: Api<VolumeAttachment>,
    tag: String,
}

impl Made<'_> {
    fn pv(&self, name: &str, claim_ns: Option<&str>) {
        let p = pv(&self.tag, name, claim_ns);
        self.rt
            .block_on(self.pvs.create(&PostParams::default(), &p))
            .unwrap();
    }

    fn va(&self, name: &str, pv: &str) {
        let a = va(&self.tag, name, pv);
        self.rt
            .block_on(self.vas.create(&PostParams::default(), &a))
            .unwrap();
    }
}

impl Drop for Made<'_> {
    fn drop(&mut self) {
        let lp = ListParams::default().labels(&format!("cnsreplay-test={}", self.tag));
        let dp = DeleteParams::default();
        let _ = self.rt.block_on(self.vas.delete_collection(&dp, &lp));
        let _ = self.rt.block_on(self.pvs.delete_collection(&dp, &lp));
    }
}

#[test]
fn the_volume_watches_hold_only_the_runs_objects() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    if csi_driver(&env, &rt, &c, false).is_none() {
        return;
    }
    let tag = uniq("foreign");
    let made = Made {
        rt: &rt,
        pvs: Api::all(c.clone()),
        vas: Api::all(c.clone()),
        tag: tag.clone(),
    };
    // Before the run: an unbound PV and one bound in another namespace, each attached.
    for (i, ns) in [None, Some("default")].into_iter().enumerate() {
        let p = format!("{tag}-pv-{i}");
        made.pv(&p, ns);
        made.va(&format!("{tag}-va-{i}"), &p);
    }
    let t = "format: cnsreplay-trace\nversion: 1\n\
             defaults: {storage_class: cnsreplay-csi, volume_size: 64Mi}\n\
             events:\n\
             - {at: 0s, create_volume: {volume: a}}\n\
             - {at: 0s, attach: {workload: w, volumes: [a]}}\n\
             - {at: 1s, detach: {workload: w}}\n\
             - {at: 2s, delete_volume: {volume: a}}\n";
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("foreign.yaml");
    std::fs::write(&trace, t).unwrap();
    let run_dir = dir.path().join("run");
    let (out, p) = replay_run(&trace, &run_dir, provider(&env, "cnsreplay-csi", &trace));
    assert_eq!(out.summary.failed, 0, "{:?}", out.summary.errors);
    let recs = events(&run_dir);
    // The run's own PV and VolumeAttachment were in the caches: the attach waited for the
    // VolumeAttachment there, the detach for its removal, the delete for the PV's.
    assert!(
        ordered_phases(record(&recs, OpType::Attach)).contains(&"attached"),
        "{}",
        all_records(&recs)
    );
    assert!(
        ordered_phases(record(&recs, OpType::Detach)).contains(&"detached"),
        "{}",
        all_records(&recs)
    );
    assert!(
        ordered_phases(record(&recs, OpType::DeleteVolume)).contains(&"pv-gone"),
        "{}",
        all_records(&recs)
    );
    // While the watches run: another foreign pair, then a PV bound in the run's namespace and
    // an attachment of a PV never seen, which are kept. Each watch delivers its events in
    // order, so once those two are cached the foreign ones before them were decided on.
    let ns = p.namespace().unwrap().to_owned();
    made.pv(&format!("{tag}-pv-2"), None);
    made.va(&format!("{tag}-va-2"), &format!("{tag}-pv-2"));
    let (kept_pv, kept_va) = (format!("{tag}-pv-runs"), format!("{tag}-va-unseen"));
    made.pv(&kept_pv, Some(&ns));
    made.va(&kept_va, &format!("{tag}-pv-unseen"));
    let t0 = Instant::now();
    let (cached_pvs, cached_vas) = loop {
        let (cp, cv) = p.cached_volume_objects();
        if cp.contains(&kept_pv) && cv.contains(&kept_va) {
            break (cp, cv);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the watches did not deliver {kept_pv} and {kept_va} within 30 s: PVs {cp:?}, \
             VolumeAttachments {cv:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(p);
    // The run's PV is gone, and no PV outside its namespace is ever held.
    assert_eq!(cached_pvs, [kept_pv], "PVs held after the run");
    // Other users of the cluster may have attachments in flight, whose PVs the PV watch may
    // not have delivered yet (those are kept): only this test's are asserted on.
    let ours: Vec<&String> = cached_vas.iter().filter(|n| n.starts_with(&tag)).collect();
    assert_eq!(
        ours,
        [&kept_va],
        "VolumeAttachments held after the run: {cached_vas:?}"
    );
    let left = rt.block_on(run_objects(&c, &out.manifest.run_id));
    assert!(left.is_empty(), "left behind: {left:?}");
}
