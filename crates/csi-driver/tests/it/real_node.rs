//! On testenv's real node (`TESTENV_REAL_NODE=1`): a PVC of class `cnsreplay-csi` mounted by
//! the kubelet through our driver's NodeStage/NodePublish into pods running the iogen image
//! from the local registry, as UID 65532 with an fsGroup; and a missing image reported in the
//! pod's status. Skipped (one line) when the cluster has no real node, unless
//! `CNSREPLAY_REQUIRE_REAL_NODE=1`.

#![allow(clippy::print_stderr)] // the skip line is the contract

use crate::cluster::{TestEnv, loops_of, pvc_yaml, testenv};

fn real_node() -> Option<(TestEnv, String)> {
    let env = testenv()?;
    let node = env.get("TESTENV_REAL_NODE").to_owned();
    if node.is_empty() {
        assert!(
            std::env::var("CNSREPLAY_REQUIRE_REAL_NODE").as_deref() != Ok("1"),
            "CNSREPLAY_REQUIRE_REAL_NODE=1 but the cluster has no real node (TESTENV_REAL_NODE=1 testenv/up.sh)"
        );
        eprintln!("skipped: the local cluster has no real node (TESTENV_REAL_NODE=1)");
        return None;
    }
    Some((env, node))
}

/// A pod pinned to the real node by its label, running `image` with `args` as UID 65532,
/// the volume's files group-owned by GID 65532 (fsGroup), never restarted.
fn iogen_pod(name: &str, label: &str, image: &str, pvc: &str, args: &[&str]) -> String {
    let args = args
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  \
         nodeSelector: {{{label}: \"true\"}}\n  restartPolicy: Never\n  \
         securityContext: {{runAsUser: 65532, runAsGroup: 65532, fsGroup: 65532, \
         runAsNonRoot: true, seccompProfile: {{type: RuntimeDefault}}}}\n  \
         containers:\n  - name: iogen\n    image: {image}\n    args: [{args}]\n    \
         securityContext: {{allowPrivilegeEscalation: false, capabilities: {{drop: [ALL]}}}}\n    \
         volumeMounts: [{{name: v, mountPath: /data}}]\n  \
         volumes: [{{name: v, persistentVolumeClaim: {{claimName: {pvc}}}}}]\n"
    )
}

const IOGEN_ARGS: [&str; 15] = [
    "run",
    "--target",
    "/data/iogen.dat",
    "--bs",
    "4k",
    "--size",
    "8m",
    "--bytes",
    "8m",
    "--iodepth",
    "4",
    "--engine",
    "sync",
    "--verify",
    "--verify-state",
];

fn phase_or_failure(env: &TestEnv, ns: &str, pod: &str) -> Option<String> {
    let phase = env.get_path(ns, &format!("pod/{pod}"), "{.status.phase}");
    (phase == "Succeeded" || phase == "Failed").then_some(phase)
}

#[test]
fn iogen_pods_write_then_verify_on_a_csi_volume_mounted_by_the_kubelet() {
    let Some((env, node)) = real_node() else {
        return;
    };
    let label = env.get("TESTENV_REAL_NODE_LABEL").to_owned();
    let image = env.get("TESTENV_IOGEN_IMAGE").to_owned();
    let ns = env.namespace("real-node-io");
    env.apply(&ns, &pvc_yaml("data", "cnsreplay-csi", "64Mi", false, None));
    env.wait_path(&ns, "pvc/data", "{.status.phase}", "Bound");
    let (_, image_file) = env.backing(&ns, "data");

    let mut write = IOGEN_ARGS.to_vec();
    write.extend(["/data/state.json", "--rw", "write"]);
    env.apply(&ns, &iogen_pod("writer", &label, &image, "data", &write));
    let phase = env.wait("writer finished", || phase_or_failure(&env, &ns, "writer"));
    let log = env
        .kubectl(&["-n", &ns, "logs", "writer"], None)
        .unwrap_or_default();
    assert_eq!(phase, "Succeeded", "writer pod: {log}");
    assert_eq!(env.get_path(&ns, "pod/writer", "{.spec.nodeName}"), node);
    assert_eq!(loops_of(&image_file).len(), 1, "attached: one loop device");
    env.k(&["-n", &ns, "delete", "pod", "writer", "--wait=true"]);

    let mut read = IOGEN_ARGS.to_vec();
    read.extend(["/data/state.json", "--rw", "read"]);
    env.apply(&ns, &iogen_pod("reader", &label, &image, "data", &read));
    let phase = env.wait("reader finished", || phase_or_failure(&env, &ns, "reader"));
    let log = env
        .kubectl(&["-n", &ns, "logs", "reader"], None)
        .unwrap_or_default();
    assert_eq!(phase, "Succeeded", "reader pod (verify): {log}");

    // The kubelet called our node service: NodeStage, NodePublish and their undo.
    env.k(&["-n", &ns, "delete", "pod", "reader", "--wait=true"]);
    let ops = fs_err::read_to_string(env.root().join("ops.jsonl")).unwrap();
    for op in [
        "NodeStageVolume",
        "NodePublishVolume",
        "NodeUnpublishVolume",
    ] {
        assert!(
            ops.contains(&format!("\"{op}\"")),
            "{op} in the driver's call log"
        );
    }
    env.k(&["delete", "namespace", &ns, "--wait=true"]);
}

#[test]
fn a_missing_image_is_reported_in_the_pod_status() {
    let Some((env, _node)) = real_node() else {
        return;
    };
    let label = env.get("TESTENV_REAL_NODE_LABEL").to_owned();
    let registry = env.get("TESTENV_REGISTRY").to_owned();
    let ns = env.namespace("real-node-noimage");
    let image = format!("{registry}/cnsreplay/does-not-exist:1");
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: noimage}}\nspec:\n  \
         nodeSelector: {{{label}: \"true\"}}\n  restartPolicy: Never\n  \
         containers: [{{name: c, image: \"{image}\"}}]\n"
    );
    env.apply(&ns, &pod);
    let reason = env.wait("ErrImagePull or ImagePullBackOff", || {
        let r = env.get_path(
            &ns,
            "pod/noimage",
            "{.status.containerStatuses[0].state.waiting.reason}",
        );
        (r == "ErrImagePull" || r == "ImagePullBackOff").then_some(r)
    });
    let msg = env.get_path(
        &ns,
        "pod/noimage",
        "{.status.containerStatuses[0].state.waiting.message}",
    );
    assert!(msg.contains("does-not-exist"), "{reason}: {msg}");
    env.k(&["delete", "namespace", &ns, "--wait=true"]);
}
