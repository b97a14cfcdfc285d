//! A cluster that does not serve an optional API (here the VolumeGroupSnapshot CRDs, absent
//! from most clusters) costs the run nothing: discovery says so in one request, no watch
//! retries a 404 until its list timeout, and no "observed late" notice is raised.
//!
//! The test removes testenv's three group snapshot CRDs for its duration and puts them back
//! (a drop guard, also on panic), with the VolumeGroupSnapshotClasses their deletion took
//! along (the CLI's group snapshot tests need testenv's default class afterwards). Deleting a
//! CRD deletes every object of it, so the test holds the cluster alone
//! ([`testenv_alone`]): the CLI suite's group snapshot tests, run beside this binary by
//! scripts/test.sh, lost their VolumeGroupSnapshot to it mid-run (`delete_group_snapshot`
//! answered `not found`) while it took only a shared turn. scripts/test.sh runs it before its
//! two lanes of cluster tests, so that its wait for the cluster does not hold them up.

use std::time::{Duration, Instant};

use crate::common::*;

const GROUP_CRDS: [&str; 3] = [
    "volumegroupsnapshotclasses.groupsnapshot.storage.k8s.io",
    "volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io",
    "volumegroupsnapshots.groupsnapshot.storage.k8s.io",
];

/// Puts the removed CRDs back and waits until they are established.
struct Restore<'a> {
    env: &'a TestEnv,
    saved: tempfile::NamedTempFile,
    classes: tempfile::NamedTempFile,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        let path = self.saved.path().to_str().unwrap().to_owned();
        let out = self
            .env
            .kubectl()
            .command()
            .args(["apply", "-f", &path])
            .output();
        let ok = out.as_ref().is_ok_and(|o| o.status.success());
        let mut wait = vec!["wait", "--for=condition=Established", "--timeout=60s"];
        let names: Vec<String> = GROUP_CRDS.iter().map(|n| format!("crd/{n}")).collect();
        wait.extend(names.iter().map(String::as_str));
        let waited = self.env.kubectl().command().args(&wait).output();
        let classes = self.classes.path().to_str().unwrap().to_owned();
        let put = self
            .env
            .kubectl()
            .command()
            .args(["apply", "-f", &classes])
            .output();
        if !std::thread::panicking() {
            assert!(ok, "restoring the group snapshot CRDs: {out:?}");
            assert!(
                waited.as_ref().is_ok_and(|o| o.status.success()),
                "waiting for the restored group snapshot CRDs: {waited:?}"
            );
            assert!(
                put.as_ref().is_ok_and(|o| o.status.success()),
                "restoring the VolumeGroupSnapshotClasses: {put:?}"
            );
        }
    }
}

/// The CRDs as a List the API server takes back (`kubectl apply`): server-set fields cut.
fn saved_crds(env: &TestEnv) -> tempfile::NamedTempFile {
    let mut args = vec!["get", "-o", "json"];
    let names: Vec<String> = GROUP_CRDS.iter().map(|n| format!("crd/{n}")).collect();
    args.extend(names.iter().map(String::as_str));
    saved(env, &args)
}

/// The output of `kubectl ARGS` (a List in JSON) with server-set fields cut, in a file.
fn saved(env: &TestEnv, args: &[&str]) -> tempfile::NamedTempFile {
    let mut list: serde_json::Value = serde_json::from_str(&env.kubectl().ok(args)).unwrap();
    for item in list["items"].as_array_mut().unwrap() {
        let item = item.as_object_mut().unwrap();
        item.remove("status");
        let meta = item["metadata"].as_object_mut().unwrap();
        for k in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "generation",
            "managedFields",
        ] {
            meta.remove(k);
        }
    }
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), serde_json::to_vec(&list).unwrap()).unwrap();
    f
}

#[test]
fn a_cluster_without_group_snapshots_costs_no_stall_and_no_notice() {
    let Some(env) = testenv_alone() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    let class = uniq("nogroup");
    rt.block_on(static_class(&c, &class, 2));
    let _restore = Restore {
        env: &env,
        saved: saved_crds(&env),
        classes: saved(&env, &["get", "volumegroupsnapshotclasses", "-o", "json"]),
    };
    let mut del = vec!["delete", "--wait=true", "--timeout=60s"];
    let names: Vec<String> = GROUP_CRDS.iter().map(|n| format!("crd/{n}")).collect();
    del.extend(names.iter().map(String::as_str));
    env.kubectl().ok(&del);
    // Discovery drops the group version once its last CRD is gone.
    let gone = Instant::now();
    while env
        .kubectl()
        .command()
        .args(["get", "--raw", "/apis/groupsnapshot.storage.k8s.io/v1"])
        .output()
        .unwrap()
        .status
        .success()
    {
        assert!(
            gone.elapsed() < Duration::from_secs(30),
            "groupsnapshot.storage.k8s.io/v1 still served 30 s after its CRDs were deleted"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.yaml");
    std::fs::write(
        &trace,
        "format: cnsreplay-trace\nversion: 1\ndefaults: {volume_size: 1Gi}\nevents:\n\
         - {at: 0s, create_volume: {volume: v}}\n\
         - {at: 1s, delete_volume: {volume: v}}\n",
    )
    .unwrap();
    let out_dir = dir.path().join("run");
    let started = Instant::now();
    let (out, p) = replay_run(&trace, &out_dir, provider(&env, &class, &trace));
    let took = started.elapsed();
    rt.block_on(drop_static(&c, &class));
    let recs = events(&out_dir);
    assert_eq!(recs.len(), 2, "records: {recs:?}");
    for r in &recs {
        assert_eq!(
            r.outcome,
            replay::Outcome::Ok,
            "event {} {}: {:?}",
            r.id,
            r.op,
            r.error
        );
    }
    // The stall was the group watch's 30 s list timeout; the whole run (set-up, 1 s of
    // trace, teardown) takes a few seconds without it.
    assert!(
        took < Duration::from_secs(25),
        "the run took {took:?}: set-up waited on the missing API"
    );
    let late: Vec<&String> = out
        .summary
        .notices
        .iter()
        .filter(|n| n.contains("observed late") || n.contains("watch"))
        .collect();
    assert!(late.is_empty(), "notices about watches: {late:?}");
    assert_eq!(
        p.client_stats().watch_errors,
        0,
        "a missing API counted as watch errors"
    );
}
