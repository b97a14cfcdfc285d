//! The provider runs with the privileges of `deploy/rbac/`: every cluster test runs it as an
//! account bound to exactly the pieces its trace needs (`TestEnv::runner_kubeconfig_for`);
//! here, an account
//! with only the namespaced Role and the read ClusterRole (the least-privilege mode) runs a
//! trace in its namespace, and the node operation those do not grant fails with class
//! `forbidden` naming the verb and resource.

use replay::Outcome;
use trace_format::OpType;

use crate::common::*;

#[test]
fn an_operation_the_role_does_not_grant_is_refused_as_forbidden() {
    let Some(env) = testenv() else { return };
    // deploy/rbac/ applied (the namespace, the Role, the read ClusterRole).
    env.apply_rbac();
    let rt = rt();
    let c = rt.block_on(client(&env));
    let class = uniq("rbac");
    rt.block_on(static_class(&c, &class, 1));
    let sa = "cnsreplay-limited";
    let _ = env
        .kubectl()
        .command()
        .args(["create", "serviceaccount", sa, "-n", "cnsreplay"])
        .output();
    let _ = env
        .kubectl()
        .command()
        .args([
            "create",
            "rolebinding",
            sa,
            "-n",
            "cnsreplay",
            "--role=cnsreplay",
            &format!("--serviceaccount=cnsreplay:{sa}"),
        ])
        .output();
    let _ = env
        .kubectl()
        .command()
        .args([
            "create",
            "clusterrolebinding",
            sa,
            "--clusterrole=cnsreplay-read",
            &format!("--serviceaccount=cnsreplay:{sa}"),
        ])
        .output();
    let kc = env.service_account_kubeconfig(sa);
    let node = rt
        .block_on(
            kube::Api::<k8s_openapi::api::core::v1::Node>::all(c.clone()).list(&Default::default()),
        )
        .unwrap()
        .items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.yaml");
    std::fs::write(
        &trace,
        format!(
            "format: cnsreplay-trace\nversion: 1\ndefaults: {{volume_size: 64Mi}}\nevents:\n  \
             - {{at: 0s, create_volume: {{volume: v}}}}\n  \
             - {{at: 0s, attach: {{workload: w, volumes: [v]}}}}\n  \
             - {{at: 0s, cordon_node: {{node: {node}}}}}\n  \
             - {{at: 1s, detach: {{workload: w}}}}\n  \
             - {{at: 1s, delete_volume: {{volume: v}}}}\n"
        ),
    )
    .unwrap();
    let p = provider_kube::KubeProvider::new(provider_kube::KubeConfig {
        kubeconfig: Some(kc.clone()),
        namespace: Some("cnsreplay".into()),
        storage_class: Some(class.clone()),
        ..provider_kube::KubeConfig::default()
    })
    .unwrap();
    let run_dir = dir.path().join("run");
    let (out, _p) = replay_run(&trace, &run_dir, p);
    let recs = events(&run_dir);
    for r in &recs {
        if r.op == OpType::CordonNode {
            assert_eq!(r.error_class.as_deref(), Some("forbidden"), "{:?}", r.error);
            let msg = r.error.as_deref().unwrap_or_default();
            assert!(
                msg.contains("nodes") && msg.contains("patch") && msg.contains(sa),
                "the message names the verb, resource and user: {msg}"
            );
        } else {
            assert_eq!(r.outcome, Outcome::Ok, "{} {}: {:?}", r.id, r.op, r.error);
        }
    }
    let _ = std::fs::remove_file(&kc);
    assert_eq!(out.summary.errors.get("forbidden"), Some(&1));
    let _ = env
        .kubectl()
        .command()
        .args(["delete", "clusterrolebinding", sa])
        .output();
    rt.block_on(drop_static(&c, &class));
}
