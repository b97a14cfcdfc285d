//! The group snapshot of `crate::group` on testenv's real node, through VolumeGroupSnapshot
//! and cnsreplay-csi's GroupController.

use crate::group::check_run;
use crate::{cnsreplay_within, kube_run_args, nothing_left, ok, real_node_cluster, run_id};

#[test]
fn a_group_snapshot_of_five_volumes_under_io_restores_consistent_members_on_the_real_node() {
    let Some(c) = real_node_cluster() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let kc = c.runner_kubeconfig_for(tmp.path(), "traces/group-snapshot.yaml");
    let run = tmp.path().join("run");
    let args = kube_run_args(&c, &kc, "traces/group-snapshot.yaml", &run, true, &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&cnsreplay_within(&args, 600));
    check_run(&run);
    // The driver took the group in one call, freezing all five mounted members together.
    let ops = std::fs::read_to_string(c.get("TESTENV_CSI_OPS_LOG")).expect("driver ops log");
    let group_calls: Vec<&str> = ops
        .lines()
        .filter(|l| l.contains("\"CreateVolumeGroupSnapshot\"") && l.contains("\"OK\""))
        .collect();
    assert!(
        group_calls
            .iter()
            .any(|l| l.contains("freeze-all") && l.matches("vol-").count() >= 5),
        "{group_calls:#?}"
    );
    let label = format!("cnsreplay.io/run={}", run_id(&run));
    let left = c.kubectl(&[
        "get",
        "volumegroupsnapshots",
        "-A",
        "-l",
        &label,
        "-o",
        "name",
    ]);
    assert!(left.trim().is_empty(), "left behind: {left}");
    nothing_left(&c, &run);
}
