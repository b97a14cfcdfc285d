//! Pre-flight asks the API server (SelfSubjectAccessReview) for every request the trace needs
//! and names the missing ones before anything is created. The least-privilege mode — the
//! Role `cnsreplay` in one existing namespace and the read ClusterRole, `--namespace` — passes
//! it (the namespace itself, which neither grants `get` on, is not refused); a trace with a
//! node operation, one declaring an attributes class the cluster lacks, or a run without
//! `--namespace`, is refused naming the verb, the operation needing it and the piece of
//! `deploy/rbac/` that grants it; `--image-pull-secret` without `--namespace` is refused with
//! the reason; the accounts the tests run each of those traces as (bound to the pieces
//! `TraceUses::pieces` names) pass. And the account the in-cluster Job's base binds may not delete `kube-system`
//! nor patch nodes, and may do what a run in its namespace does.

use provider_kube::{KubeConfig, KubeProvider};

use crate::common::*;

#[test]
fn preflight_names_each_request_the_credentials_may_not_make() {
    let Some(env) = testenv() else { return };
    // deploy/rbac/ applied (the namespace, the Role, the read ClusterRole).
    env.apply_rbac();
    let rt = rt();
    let c = rt.block_on(client(&env));
    let class = uniq("access");
    rt.block_on(static_class(&c, &class, 0));
    let sa = class.clone();
    env.kubectl()
        .ok(&["create", "serviceaccount", &sa, "-n", "cnsreplay"]);
    env.kubectl().ok(&[
        "create",
        "rolebinding",
        &sa,
        "-n",
        "cnsreplay",
        "--role=cnsreplay",
        &format!("--serviceaccount=cnsreplay:{sa}"),
    ]);
    env.kubectl().ok(&[
        "create",
        "clusterrolebinding",
        &sa,
        "--clusterrole=cnsreplay-read",
        &format!("--serviceaccount=cnsreplay:{sa}"),
    ]);
    let kc = env.service_account_kubeconfig(&sa);
    // Where the API server's audit log ends now: every request this account makes from here on
    // is appended after it.
    let audit = env.vars().get("TESTENV_AUDIT_LOG").cloned();
    let audit_from = audit
        .as_ref()
        .and_then(|a| std::fs::metadata(a).ok())
        .map_or(0, |m| m.len());
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
    let node = env
        .kubectl()
        .ok(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"]);
    let cordon = write(
        "cordon.yaml",
        &format!("  - {{at: 2s, cordon_node: {{node: {node}}}}}\n"),
    );
    // A header declaring an attributes class no cluster has: the run would create it.
    let vac = dir.path().join("vac.yaml");
    let missing_class = uniq("nope");
    std::fs::write(
        &vac,
        format!(
            "format: cnsreplay-trace\nversion: 2\ndefaults: {{volume_size: 64Mi}}\n\
             attributes_classes:\n  {missing_class}: {{read_iops: 200}}\nevents:\n  \
             - {{at: 0s, create_volume: {{volume: v}}}}\n  \
             - {{at: 1s, delete_volume: {{volume: v}}}}\n"
        ),
    )
    .unwrap();
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
             cnsreplay-nodes, deploy/rbac/nodes)"
        ),
        "{e}"
    );
    assert!(e.contains("nothing was created"), "{e}");
    // An attributes class to create needs the attributes-classes piece.
    let e = preflight(&cfg, &vac).unwrap_err();
    assert!(
        e.contains(&format!(
            "create volumeattributesclasses.storage.k8s.io (cluster-wide) (needed by the trace \
             header's attributes classes the cluster lacks: {missing_class}; granted by \
             ClusterRole cnsreplay-attributes-classes, deploy/rbac/attributes-classes)"
        )),
        "{e}"
    );
    // An image pull secret cannot reach a run-owned namespace: refused with the reason; in an
    // existing namespace it is the user's Secret there, not refused.
    let with_secret = |namespace: Option<&str>| {
        let cfg = KubeConfig {
            namespace: namespace.map(str::to_owned),
            pod: provider_kube::PodOptions {
                image_pull_secrets: vec!["regcred".into()],
                ..provider_kube::PodOptions::default()
            },
            ..cfg.clone()
        };
        KubeConfig {
            kubeconfig: Some(env.runner_kubeconfig_for(&cfg, &plain)),
            ..cfg
        }
    };
    let e = preflight(&with_secret(None), &plain).unwrap_err();
    assert!(
        e.contains(
            "--image-pull-secret regcred names a Secret in the run's namespace, and a \
             run-owned namespace (no --namespace) is created without Secrets"
        ) && e.contains("nothing was created"),
        "{e}"
    );
    let r = preflight(&with_secret(Some("cnsreplay")), &plain);
    assert!(
        r.as_ref()
            .err()
            .is_none_or(|e| !e.contains("image-pull-secret")),
        "{r:?}"
    );
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
         granted by ClusterRole cnsreplay-run-namespaces, deploy/rbac/run-namespaces)",
        "create pods in namespace cnsreplay-<run id> (needed by attach, io_phase; granted by \
         ClusterRole cnsreplay-run-namespaces, deploy/rbac/run-namespaces)",
        "get pods/log in namespace cnsreplay-<run id> (needed by io_phase;",
        "create volumesnapshots.snapshot.storage.k8s.io in namespace cnsreplay-<run id>",
    ] {
        assert!(e.contains(needle), "{needle:?} not in: {e}");
    }
    // Nothing was created by the refused pre-flights: the audit log holds no write of this
    // account but its SelfSubjectAccessReviews.
    if let Some(audit) = &audit {
        std::thread::sleep(std::time::Duration::from_secs(1)); // the log's writer lags
        // Only what was appended (the log is large); a rotated log is read from its start.
        let mut f = std::fs::File::open(audit).unwrap();
        let from = if f.metadata().unwrap().len() >= audit_from {
            audit_from
        } else {
            0
        };
        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(from)).unwrap();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut bytes).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        let user = format!("system:serviceaccount:cnsreplay:{sa}");
        let mut reviews = 0;
        let writes: Vec<String> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["user"]["username"] == user.as_str())
            .filter(|v| v["stage"] == "ResponseComplete")
            .filter(|v| !matches!(v["verb"].as_str(), Some("get" | "list" | "watch")))
            .filter(|v| {
                let review = v["objectRef"]["resource"] == "selfsubjectaccessreviews";
                reviews += usize::from(review);
                !review
            })
            .map(|v| format!("{} {}", v["verb"], v["requestURI"]))
            .collect();
        assert!(writes.is_empty(), "pre-flight wrote: {writes:#?}");
        assert!(
            reviews > 0,
            "no SelfSubjectAccessReview of {user} in {audit}"
        );
    }
    // The pieces each trace needs (what the tests run as) pass all three, in a run-owned
    // namespace and in `cnsreplay`.
    for namespace in [None, Some("cnsreplay".to_owned())] {
        for trace in [&plain, &cordon, &vac] {
            let cfg = KubeConfig {
                namespace: namespace.clone(),
                ..cfg.clone()
            };
            let kubeconfig = Some(env.runner_kubeconfig_for(&cfg, trace));
            let r = preflight(&KubeConfig { kubeconfig, ..cfg }, trace);
            assert_eq!(
                access_lines(r.clone()),
                "",
                "{namespace:?} {trace:?}: {r:?}"
            );
        }
    }
    let _ = std::fs::remove_file(&kc);
    let _ = env
        .kubectl()
        .command()
        .args(["delete", "clusterrolebinding", &sa])
        .output();
    let _ = env
        .kubectl()
        .command()
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

/// The bindings a rendered kustomization makes for the service account `ns/name`: (kind, name)
/// of each roleRef.
fn bound_to(rendered: &str, ns: &str, name: &str) -> std::collections::BTreeSet<(String, String)> {
    let mut out = std::collections::BTreeSet::new();
    for doc in rendered.split("\n---\n") {
        let v: serde_json::Value = serde_saphyr::from_str(doc).unwrap();
        if !matches!(
            v["kind"].as_str(),
            Some("RoleBinding" | "ClusterRoleBinding")
        ) {
            continue;
        }
        let ours =
            v["subjects"].as_array().into_iter().flatten().any(|s| {
                s["kind"] == "ServiceAccount" && s["name"] == name && s["namespace"] == ns
            });
        if ours {
            out.insert((
                v["roleRef"]["kind"].as_str().unwrap().to_owned(),
                v["roleRef"]["name"].as_str().unwrap().to_owned(),
            ));
        }
    }
    out
}

#[test]
fn the_job_account_may_not_delete_kube_system_nor_patch_nodes() {
    let Some(env) = testenv() else { return };
    // deploy/rbac/ applied (its Roles and ClusterRoles exist).
    env.apply_rbac();
    let base = env.kubectl().ok(&[
        "kustomize",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/kustomize/base"),
    ]);
    assert!(
        base.contains("serviceAccountName: cnsreplay\n"),
        "the Job runs as cnsreplay/cnsreplay: {base}"
    );
    // Its namespace enforces the `restricted` Pod Security level, and the Job's pod is the
    // one that mounts a token.
    assert!(
        base.contains("pod-security.kubernetes.io/enforce: restricted\n")
            && base.contains("automountServiceAccountToken: true\n"),
        "{base}"
    );
    // The Job base binds its account to the namespaced Role and the cluster-wide reads only.
    let bound = bound_to(&base, "cnsreplay", "cnsreplay");
    let want: std::collections::BTreeSet<(String, String)> = [
        ("ClusterRole".to_owned(), "cnsreplay-read".to_owned()),
        ("Role".to_owned(), "cnsreplay".to_owned()),
    ]
    .into();
    assert_eq!(
        bound, want,
        "what deploy/kustomize/base binds to the Job's account"
    );
    // The shared test cluster's `cnsreplay/cnsreplay` may carry other bindings (older test
    // harnesses bound every piece to it): an account bound exactly as the Job base binds
    // stands for it. It lives in the Job's namespace, so the RoleBinding reaches it alike.
    let sa = uniq("job-account");
    env.kubectl()
        .ok(&["create", "serviceaccount", &sa, "-n", "cnsreplay"]);
    let subject = format!("--serviceaccount=cnsreplay:{sa}");
    env.kubectl().ok(&[
        "create",
        "rolebinding",
        &sa,
        "-n",
        "cnsreplay",
        "--role=cnsreplay",
        &subject,
    ]);
    env.kubectl().ok(&[
        "create",
        "clusterrolebinding",
        &sa,
        "--clusterrole=cnsreplay-read",
        &subject,
    ]);
    let can_i_as = |account: &str, args: &[&str]| -> String {
        let out = env
            .kubectl()
            .command()
            .args(["auth", "can-i"])
            .args(args)
            .arg(format!("--as=system:serviceaccount:cnsreplay:{account}"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let can_i = |args: &[&str]| can_i_as(&sa, args);
    // The Job's account itself, when the cluster binds it to nothing else (a cluster these
    // harnesses set up: they bind the opt-in pieces to their own account).
    let others: Vec<String> = {
        let all: serde_json::Value = serde_json::from_str(&env.kubectl().ok(&[
            "get",
            "clusterrolebindings,rolebindings",
            "-A",
            "-o",
            "json",
        ]))
        .unwrap();
        all["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| {
                b["subjects"].as_array().into_iter().flatten().any(|s| {
                    s["kind"] == "ServiceAccount"
                        && s["name"] == "cnsreplay"
                        && s["namespace"] == "cnsreplay"
                })
            })
            .map(|b| {
                let r = &b["roleRef"];
                format!(
                    "{} {}",
                    r["kind"].as_str().unwrap_or_default(),
                    r["name"].as_str().unwrap_or_default()
                )
            })
            .filter(|r| r != "ClusterRole cnsreplay-read" && r != "Role cnsreplay")
            .collect()
    };
    if others.is_empty() {
        for args in [
            &["delete", "namespace/kube-system"][..],
            &["patch", "nodes"],
        ] {
            assert_eq!(
                can_i_as("cnsreplay", args),
                "no",
                "the Job's account: {args:?}"
            );
        }
    } else {
        #[allow(clippy::print_stderr)] // says what was not checked, and why
        {
            eprintln!(
                "cnsreplay/cnsreplay itself not checked: this cluster also binds it to {others:?}"
            );
        }
    }
    let mut wrong = Vec::new();
    for (args, want) in [
        // What it must not do.
        (&["delete", "namespace/kube-system"][..], "no"),
        (&["delete", "namespaces"], "no"),
        (&["create", "namespaces"], "no"),
        (&["patch", "nodes"], "no"),
        (&["create", "pods", "-n", "kube-system"], "no"),
        (&["delete", "pods", "-n", "kube-system"], "no"),
        (&["create", "persistentvolumeclaims", "-n", "default"], "no"),
        (&["get", "secrets", "-n", "cnsreplay"], "no"),
        (
            &["create", "pods", "--subresource=exec", "-n", "cnsreplay"],
            "no",
        ),
        (&["create", "volumeattributesclasses.storage.k8s.io"], "no"),
        (&["create", "rolebindings", "-n", "cnsreplay"], "no"),
        // What a run in its namespace does.
        (
            &["create", "persistentvolumeclaims", "-n", "cnsreplay"],
            "yes",
        ),
        (
            &["patch", "persistentvolumeclaims", "-n", "cnsreplay"],
            "yes",
        ),
        (
            &["delete", "persistentvolumeclaims", "-n", "cnsreplay"],
            "yes",
        ),
        (&["create", "pods", "-n", "cnsreplay"], "yes"),
        (&["delete", "pods", "-n", "cnsreplay"], "yes"),
        (
            &["get", "pods", "--subresource=log", "-n", "cnsreplay"],
            "yes",
        ),
        (
            &["create", "pods", "--subresource=attach", "-n", "cnsreplay"],
            "yes",
        ),
        (&["watch", "events", "-n", "cnsreplay"], "yes"),
        (
            &[
                "create",
                "volumesnapshots.snapshot.storage.k8s.io",
                "-n",
                "cnsreplay",
            ],
            "yes",
        ),
        (&["watch", "persistentvolumes"], "yes"),
        (&["watch", "volumeattachments.storage.k8s.io"], "yes"),
        (&["list", "storageclasses.storage.k8s.io"], "yes"),
        (&["list", "nodes"], "yes"),
    ] {
        let got = can_i(args);
        if got != want {
            wrong.push(format!("can-i {args:?}: {got:?}, want {want:?}"));
        }
    }
    let _ = env
        .kubectl()
        .command()
        .args(["delete", "clusterrolebinding", &sa])
        .output();
    let _ = env
        .kubectl()
        .command()
        .args([
            "delete",
            "rolebinding,serviceaccount",
            &sa,
            "-n",
            "cnsreplay",
        ])
        .output();
    assert!(
        wrong.is_empty(),
        "as the Job base's account:\n{}",
        wrong.join("\n")
    );
}

/// The Job base's pod passes the `restricted` Pod Security level its namespace enforces (a
/// server-side dry run of a pod with the Job's template in a namespace enforcing it), and the
/// testenv overlay's host-network pod would not: that overlay alone lowers the level.
#[test]
fn the_job_base_pod_is_admitted_where_its_namespace_enforces_restricted() {
    use k8s_openapi::api::core::v1::{Namespace, Pod};
    use kube::api::{Api, DeleteParams, PostParams};
    let Some(env) = testenv() else { return };
    let rt = rt();
    let c = rt.block_on(client(&env));
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/kustomize");
    let job_pod = |kustomization: &str, ns: &str| -> (Pod, serde_json::Value) {
        let rendered = env
            .kubectl()
            .ok(&["kustomize", &format!("{dir}/{kustomization}")]);
        let docs: Vec<serde_json::Value> = rendered
            .split("\n---\n")
            .map(|d| serde_saphyr::from_str(d).unwrap())
            .collect();
        let job = docs.iter().find(|d| d["kind"] == "Job").unwrap();
        let namespace = docs
            .iter()
            .find(|d| d["kind"] == "Namespace")
            .unwrap()
            .clone();
        let pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "job-pod", "namespace": ns},
            "spec": job["spec"]["template"]["spec"],
        }))
        .unwrap();
        (pod, namespace)
    };
    let ns = uniq("psa-job");
    let (base, base_ns) = job_pod("base", &ns);
    let labels = &base_ns["metadata"]["labels"];
    assert_eq!(
        labels["pod-security.kubernetes.io/enforce"], "restricted",
        "{base_ns}"
    );
    let obj: Namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": ns, "labels": labels},
    }))
    .unwrap();
    rt.block_on(Api::<Namespace>::all(c.clone()).create(&PostParams::default(), &obj))
        .unwrap();
    let sa: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "cnsreplay"}})).unwrap();
    rt.block_on(
        Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(c.clone(), &ns)
            .create(&PostParams::default(), &sa),
    )
    .unwrap();
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let pods: Api<Pod> = Api::namespaced(c.clone(), &ns);
    let admitted = rt.block_on(pods.create(&dry, &base));
    let (testenv_pod, testenv_ns) = job_pod("overlays/testenv", &ns);
    let refused = rt.block_on(pods.create(&dry, &testenv_pod));
    let _ = rt.block_on(Api::<Namespace>::all(c).delete(&ns, &DeleteParams::default()));
    admitted.expect("the Job base's pod under `restricted`");
    let e = refused.expect_err("a host-network pod is not `restricted`");
    assert!(e.to_string().contains("hostNetwork"), "{e}");
    assert_eq!(
        testenv_ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "privileged",
        "{testenv_ns}"
    );
}
