//! The least-privilege mode of docs/kubernetes.md ("RBAC") on testenv's real node: an account
//! bound only by the Role of `deploy/rbac/base/role.yaml` — applied in one existing namespace
//! that enforces the `restricted` Pod Security level — and the read ClusterRole of
//! `deploy/rbac/base/read.yaml` runs the README's Experiment 2 there with `--namespace`: every
//! operation ok, and nothing of the run left (objects, mounts, loop devices). Its kubeconfig
//! holds a token: it is 0600 and removed. And `--image-pull-secret` without `--namespace` is
//! refused at pre-flight with the reason; a run whose account lacks a piece of `deploy/rbac/`
//! its trace needs is refused at pre-flight naming the verb and the piece. Skipped (one line)
//! without a real node unless `CNSREPLAY_REQUIRE_REAL_NODE=1`.

use std::os::unix::fs::PermissionsExt as _;

use crate::{Cluster, EXP2_OPS, nothing_left, real_node_cluster, run_args};
use crate::{cnsreplay, s, stdout};

/// The test's namespace and cluster-wide binding, deleted however the test ends.
struct Tenant<'a> {
    c: &'a Cluster,
    ns: String,
}

impl Drop for Tenant<'_> {
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(|| {
            self.c.kubectl(&[
                "delete",
                "clusterrolebinding",
                &self.ns,
                "--ignore-not-found",
            ]);
            self.c.kubectl(&[
                "delete",
                "namespace",
                &self.ns,
                "--ignore-not-found",
                "--wait=false",
            ]);
        });
    }
}

#[test]
fn the_least_privilege_account_runs_experiment2_in_one_restricted_namespace() {
    let Some(c) = real_node_cluster() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    // deploy/rbac applied (the ClusterRole cnsreplay-read among it).
    c.apply_rbac();
    let ns = format!(
        "lp-{}-{}",
        std::process::id(),
        jiff::Timestamp::now().as_millisecond() % 1_000_000
    );
    let tenant = Tenant {
        c: &c,
        ns: ns.clone(),
    };
    c.kubectl(&["create", "namespace", &ns]);
    c.kubectl(&[
        "label",
        "namespace",
        &ns,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
    ]);
    c.kubectl(&["create", "serviceaccount", "cnsreplay", "-n", &ns]);
    // The Role and its RoleBinding exactly as shipped, moved to this namespace.
    let role = std::fs::read_to_string(crate::workspace().join("deploy/rbac/base/role.yaml"))
        .expect("role.yaml")
        .replace("namespace: cnsreplay", &format!("namespace: {ns}"));
    c.kubectl_stdin(&["apply", "-f", "-"], &role);
    c.kubectl(&[
        "create",
        "clusterrolebinding",
        &ns,
        "--clusterrole=cnsreplay-read",
        &format!("--serviceaccount={ns}:cnsreplay"),
    ]);
    let kc = c.account_kubeconfig(&ns, "cnsreplay", &tmp.path().join("least.kubeconfig"));
    let mode = std::fs::metadata(&kc)
        .expect("kubeconfig")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "a kubeconfig with a token is the owner's only");
    // What the account may not do (the run must not need it).
    for (verb, what) in [
        ("create", "namespaces"),
        ("delete", "namespace/kube-system"),
        ("patch", "nodes"),
    ] {
        let can =
            std::process::Command::new(std::path::Path::new(c.get("TESTENV_BIN")).join("kubectl"))
                .arg(format!("--kubeconfig={}", s(&kc)))
                .args(["auth", "can-i", verb, what])
                .output()
                .expect("kubectl");
        assert_eq!(
            String::from_utf8_lossy(&can.stdout).trim(),
            "no",
            "{verb} {what}"
        );
    }

    let run = tmp.path().join("run");
    let mut args = run_args(&c, &kc, "traces/experiment2-short.yaml", &run);
    args.extend(["--namespace".to_owned(), ns.clone()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = cnsreplay(&args);
    std::fs::remove_file(&kc).expect("remove the kubeconfig");
    assert!(!kc.exists());
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("summary.json")).expect("summary"))
            .expect("json");
    assert_eq!(summary["state"], "complete", "{summary}");
    let failed: Vec<String> = std::fs::read_to_string(run.join("events.jsonl"))
        .expect("events")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["outcome"] != "ok")
        .map(|v| {
            format!(
                "{} {}: {} {}",
                v["id"], v["op"], v["error_class"], v["error"]
            )
        })
        .collect();
    for (op, n) in EXP2_OPS {
        assert_eq!(summary["ops"][op]["count"], n, "{op}: {summary}");
        assert_eq!(summary["ops"][op]["failed"], 0, "{op} failed: {failed:#?}");
    }
    // Every pod ran in the restricted namespace (none was refused admission), and the
    // existing namespace stays, empty of the run's objects.
    nothing_left(&c, &run);
    let left = c.kubectl(&["get", "pvc,pods,volumesnapshots", "-n", &ns, "-o", "name"]);
    assert!(left.trim().is_empty(), "left in {ns}: {left}");
    let phase = c.kubectl(&["get", "namespace", &ns, "-o", "jsonpath={.status.phase}"]);
    assert_eq!(phase, "Active", "--namespace is never deleted by the run");
    drop(tenant);
}

/// `--image-pull-secret` names a Secret of the run's namespace, and a run-owned namespace is
/// created without one: `run` refuses the combination at pre-flight, saying why and what to do,
/// before a run directory or any object exists.
#[test]
fn an_image_pull_secret_without_namespace_is_refused_at_preflight() {
    let Some(c) = real_node_cluster() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let kc = c.runner_kubeconfig_for(tmp.path(), "traces/experiment2-short.yaml");
    let run = tmp.path().join("run");
    let mut args = run_args(&c, &kc, "traces/experiment2-short.yaml", &run);
    args.extend(["--image-pull-secret".to_owned(), "regcred".to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = cnsreplay(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    for needle in [
        "--image-pull-secret regcred names a Secret in the run's namespace, and a run-owned \
         namespace (no --namespace) is created without Secrets",
        "run with --namespace NS, a namespace where the Secret exists",
        "nothing was created",
    ] {
        assert!(err.contains(needle), "{needle:?} not in:\n{err}");
    }
    assert!(!run.exists(), "the run started: {}", run.display());
}

/// The tests run each trace as an account bound to exactly the pieces of `deploy/rbac/` it
/// needs (`Cluster::runner_kubeconfig_for`): one piece short — a `cordon_node` trace as the
/// account of a trace without one — `run` is refused at pre-flight naming the verb, the
/// operation and the piece, before a run directory or any object exists; as the account its
/// own trace gets, the same pre-flight passes.
#[test]
fn a_run_whose_account_lacks_a_piece_its_trace_needs_is_refused_at_preflight() {
    let Some(c) = real_node_cluster() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let node = c.kubectl(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"]);
    let trace = tmp.path().join("cordon.yaml");
    std::fs::write(
        &trace,
        format!(
            "format: cnsreplay-trace\nversion: 1\ndefaults: {{volume_size: 64Mi}}\nevents:\n  \
             - {{at: 0s, create_volume: {{volume: v}}}}\n  \
             - {{at: 1s, cordon_node: {{node: {node}}}}}\n  \
             - {{at: 2s, delete_volume: {{volume: v}}}}\n"
        ),
    )
    .expect("trace");
    let run = tmp.path().join("run");
    let preflight = |kc: &std::path::Path| {
        let mut args = run_args(&c, kc, s(&trace), &run);
        args.push("--preflight-only".to_owned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cnsreplay(&args)
    };
    // Experiment 2's account: its pieces have no node patch.
    let short = c.runner_kubeconfig_for(tmp.path(), "traces/experiment2-short.yaml");
    let mode = std::fs::metadata(&short)
        .expect("kubeconfig")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "a kubeconfig with a token is the owner's only");
    let out = preflight(&short);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for needle in [
        "patch nodes (cluster-wide) (needed by cordon_node; granted by ClusterRole \
         cnsreplay-nodes, deploy/rbac/nodes)",
        "nothing was created",
    ] {
        assert!(err.contains(needle), "{needle:?} not in:\n{err}");
    }
    assert!(!run.exists(), "the run started: {}", run.display());
    // Its own account (the node piece among its pieces) passes.
    let own = c.runner_kubeconfig_for(tmp.path(), &trace);
    let out = preflight(&own);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout(&out).contains("pre-flight passed"),
        "{}",
        stdout(&out)
    );
    assert!(!run.exists(), "--preflight-only made {}", run.display());
}
