//! The cluster-wide PV and VolumeAttachment watches hold the run's objects and none of the
//! cluster's others, whether those existed before the run (the watches' first list) or
//! appeared while the watches ran (their events).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, DeleteParams, PostParams};
use trace_format::OpType;

use crate::common::*;

/// A hostPath PV, bound to a claim in `claim_ns` when given.
fn pv(name: &str, claim_ns: Option<&str>) -> PersistentVolume {
    let claim = claim_ns.map_or(String::new(), |ns| {
        format!(r#", "claimRef": {{"namespace": "{ns}", "name": "none"}}"#)
    });
    serde_json::from_str(&format!(
        r#"{{"metadata": {{"name": "{name}"}},
            "spec": {{"capacity": {{"storage": "1Gi"}}, "accessModes": ["ReadWriteOnce"],
                      "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "foreign-none",
                      "hostPath": {{"path": "/tmp/{name}"}}{claim}}}}}"#
    ))
    .unwrap()
}

/// A VolumeAttachment no driver acts on.
fn va(name: &str, pv: &str) -> VolumeAttachment {
    serde_json::from_str(&format!(
        r#"{{"metadata": {{"name": "{name}"}},
            "spec": {{"attacher": "foreign.invalid", "nodeName": "foreign-node",
                      "source": {{"persistentVolumeName": "{pv}"}}}}}}"#
    ))
    .unwrap()
}

#[test]
fn the_volume_watches_hold_only_the_runs_objects() {
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    if csi_driver(&env, &rt, &c, false).is_none() {
        return;
    }
    let pvs: Api<PersistentVolume> = Api::all(c.clone());
    let vas: Api<VolumeAttachment> = Api::all(c.clone());
    let tag = uniq("foreign");
    let (mut made_pvs, mut made_vas) = (Vec::new(), Vec::new());
    let make = |pvs_: &mut Vec<String>,
                vas_: &mut Vec<String>,
                p: PersistentVolume,
                a: Option<VolumeAttachment>| {
        let pn = p.metadata.name.clone().unwrap();
        rt.block_on(pvs.create(&PostParams::default(), &p)).unwrap();
        pvs_.push(pn);
        if let Some(a) = a {
            let an = a.metadata.name.clone().unwrap();
            rt.block_on(vas.create(&PostParams::default(), &a)).unwrap();
            vas_.push(an);
        }
    };
    // Before the run: an unbound PV and one bound in another namespace, each attached.
    for (i, ns) in [None, Some("default")].into_iter().enumerate() {
        let p = format!("{tag}-pv-{i}");
        make(
            &mut made_pvs,
            &mut made_vas,
            pv(&p, ns),
            Some(va(&format!("{tag}-va-{i}"), &p)),
        );
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
    let (out, p) = replay_run(&trace, &run_dir, provider(&env, "cnsreplay-csi"));
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
    make(
        &mut made_pvs,
        &mut made_vas,
        pv(&format!("{tag}-pv-2"), None),
        Some(va(&format!("{tag}-va-2"), &format!("{tag}-pv-2"))),
    );
    let (kept_pv, kept_va) = (format!("{tag}-pv-runs"), format!("{tag}-va-unseen"));
    make(&mut made_pvs, &mut made_vas, pv(&kept_pv, Some(&ns)), None);
    rt.block_on(vas.create(
        &PostParams::default(),
        &va(&kept_va, &format!("{tag}-pv-unseen")),
    ))
    .unwrap();
    made_vas.push(kept_va.clone());
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
    for n in &made_vas {
        rt.block_on(vas.delete(n, &DeleteParams::default()))
            .unwrap();
    }
    for n in &made_pvs {
        rt.block_on(pvs.delete(n, &DeleteParams::default()))
            .unwrap();
    }
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
