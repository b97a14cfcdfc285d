//! Pre-flight asks the API server (SelfSubjectAccessReview) for every request the trace needs
//! and names the missing ones before anything is created. The least-privilege mode — the
//! Role `cnsreplay` in one existing namespace and the read ClusterRole, `--namespace` — passes
//! it (the namespace itself, which neither grants `get` on, is not refused); a trace with a
//! node operation, or a run without `--namespace`, is refused naming the verb, the operation
//! needing it and the RBAC piece that grants it.

use provider_kube::{KubeConfig, KubeProvider};

use crate::common::*;

#[test]
fn preflight_names_each_request_the_credentials_may_not_make() {
    let Some(env) = testenv() else { return };
    // deploy/rbac/rbac.yaml applied (the namespace, the Role, the read ClusterRole).
    let _ = env.runner_kubeconfig();
    let rt = rt();
    let c = rt.block_on(client(&env));
    let class = uniq("access");
    rt.block_on(static_class(&c, &class, 0));
    let sa = class.clone();
    env.kubectl_ok(&["create", "serviceaccount", &sa, "-n", "cnsreplay"]);
    env.kubectl_ok(&[
        "create",
        "rolebinding",
        &sa,
        "-n",
        "cnsreplay",
        "--role=cnsreplay",
        &format!("--serviceaccount=cnsreplay:{sa}"),
    ]);
    env.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        &sa,
        "--clusterrole=cnsreplay-read",
        &format!("--serviceaccount=cnsreplay:{sa}"),
    ]);
    let kc = env.service_account_kubeconfig(&sa);
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, extra: &str| {
        let p = dir.path().join(name);
        std::fs::write(
            &p,
            format!(
                "format: cnsreplay-trace\nversion: 1\ndefaults: {{volume_size: 64Mi}}\nevents:\n  \
                 - {{at: 0s, create_volume: {{volume: v}}}}\n  \
                 - {{at: 0s, attach: {{workload: w, volumes: [v]}}}}\n  \
                 - {{at: 1s, io_phase: {{workload: w, volume: v, pattern: random, \
                 read_pct: 50, block_size: 4Ki, load: {{depth: 1}}, duration: 1s}}}}\n  \
                 - {{at: 1s, snapshot: {{volume: v, snapshot: s}}}}\n{extra}  \
                 - {{at: 3s, delete_snapshot: {{snapshot: s}}}}\n  \
                 - {{at: 3s, detach: {{workload: w}}}}\n  \
                 - {{at: 3s, delete_volume: {{volume: v}}}}\n"
            ),
        )
        .unwrap();
        p
    };
    let plain = write("plain.yaml", "");
    let node = env.kubectl_ok(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"]);
    let cordon = write(
        "cordon.yaml",
        &format!("  - {{at: 2s, cordon_node: {{node: {node}}}}}\n"),
    );
    let cfg = KubeConfig {
        kubeconfig: Some(kc.clone()),
        namespace: Some("cnsreplay".into()),
        storage_class: Some(class.clone()),
        ..KubeConfig::default()
    };
    let preflight = |cfg: &KubeConfig, trace: &std::path::Path| {
        KubeProvider::new(cfg.clone())
            .unwrap()
            .preflight(trace)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    // The least-privilege mode passes (the snapshot class aside, which this test's cluster
    // may lack: only access lines are looked at).
    let access_lines = |r: Result<(), String>| match r {
        Ok(()) => String::new(),
        Err(e) => e
            .split_once("the credentials may not")
            .and_then(|(_, a)| a.split("\n  - ").next())
            .map(str::to_owned)
            .unwrap_or_default(),
    };
    let r = preflight(&cfg, &plain);
    assert_eq!(access_lines(r.clone()), "", "{r:?}");
    assert!(
        r.as_ref()
            .err()
            .is_none_or(|e| !e.contains("namespace cnsreplay")),
        "{r:?}"
    );
    // A node operation needs the node piece.
    let e = preflight(&cfg, &cordon).unwrap_err();
    assert!(
        e.contains(
            "patch nodes (cluster-wide) (needed by cordon_node; granted by ClusterRole \
             cnsreplay-nodes)"
        ),
        "{e}"
    );
    assert!(e.contains("nothing was created"), "{e}");
    // A run-owned namespace needs the namespaces piece, and the Role's rules everywhere.
    let e = preflight(
        &KubeConfig {
            namespace: None,
            ..cfg.clone()
        },
        &plain,
    )
    .unwrap_err();
    for needle in [
        "create namespaces (cluster-wide) (needed by the run-owned namespace (no --namespace); \
         granted by ClusterRole cnsreplay-run-namespaces)",
        "create pods in namespace cnsreplay-<run id> (needed by attach, io_phase; granted by \
         ClusterRole cnsreplay-run-namespaces)",
        "get pods/log in namespace cnsreplay-<run id> (needed by io_phase;",
        "create volumesnapshots.snapshot.storage.k8s.io in namespace cnsreplay-<run id>",
    ] {
        assert!(e.contains(needle), "{needle:?} not in: {e}");
    }
    // The full set (the runner's) passes both.
    for trace in [&plain, &cordon] {
        let r = preflight(
            &KubeConfig {
                kubeconfig: Some(env.runner_kubeconfig()),
                namespace: None,
                ..cfg.clone()
            },
            trace,
        );
        assert_eq!(access_lines(r.clone()), "", "{r:?}");
    }
    let _ = std::fs::remove_file(&kc);
    let _ = env
        .kubectl()
        .args(["delete", "clusterrolebinding", &sa])
        .output();
    let _ = env
        .kubectl()
        .args([
            "delete",
            "rolebinding,serviceaccount",
            &sa,
            "-n",
            "cnsreplay",
        ])
        .output();
    rt.block_on(drop_static(&c, &class));
}
