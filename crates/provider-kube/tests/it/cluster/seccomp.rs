//! `deploy/seccomp` on testenv's real node: its DaemonSet puts iogen's profile where the
//! kubelet finds Localhost profiles, byte for byte, and an `io_phase` whose pod names it runs
//! io_uring. Applied as an overlay of the test's own (its own namespace and profile file name,
//! the hostPath at testenv's kubelet root, busybox from testenv's local-path helper image) and
//! removed afterwards, so it changes nothing others use.

use std::path::{Path, PathBuf};

use replay::Outcome;
use trace_format::OpType;

use super::pod_path::{on_real_node, real_node, write_trace};
use crate::common::*;

/// Removes the overlay's objects and the profile file it installed, also after a failure.
struct Installed<'a> {
    env: &'a TestEnv,
    overlay: PathBuf,
    file: PathBuf,
}

impl Drop for Installed<'_> {
    fn drop(&mut self) {
        let _ = self
            .env
            .kubectl()
            .command()
            .args([
                "delete",
                "--wait=true",
                "--timeout=60s",
                "--ignore-not-found",
                "-k",
            ])
            .arg(&self.overlay)
            .output();
        let _ = std::fs::remove_file(&self.file);
    }
}

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to)
        .unwrap_or_else(|e| panic!("{} → {}: {e}", from.display(), to.display()));
}

#[test]
fn deploy_seccomp_installs_iogens_profile_and_io_phases_run_io_uring_under_it() {
    let Some(env) = testenv() else { return };
    let Some(node) = real_node(&env) else { return };
    let var = |k: &str| env.vars().get(k).cloned().unwrap_or_default();
    if var("TESTENV_LOCAL_PATH_CLASS").is_empty() {
        #[allow(clippy::print_stderr)] // the skip notice is the contract
        {
            eprintln!(
                "skipped: no busybox image (testenv's local-path helper; TESTENV_LOCAL_PATH=1)"
            );
        }
        return;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/seccomp");
    let tag = uniq("seccomp-test");
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    let overlay = dir.path().join("overlay");
    std::fs::create_dir_all(&base).unwrap();
    std::fs::create_dir_all(&overlay).unwrap();
    for f in [
        "kustomization.yaml",
        "namespace.yaml",
        "daemonset.yaml",
        "iogen.json",
    ] {
        copy(&src.join(f), &base.join(f));
    }
    let profile = format!("{tag}.json");
    copy(&src.join("iogen.json"), &overlay.join(&profile));
    let host_dir = Path::new(&var("TESTENV_DIR")).join("kubelet/seccomp/cnsreplay");
    std::fs::write(
        overlay.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             resources: [../base]\nnamespace: {tag}\n\
             configMapGenerator:\n  - {{name: iogen-seccomp, behavior: replace, files: [{profile}]}}\n\
             images:\n  - {{name: busybox, newName: {reg}/cnsreplay/local-path-helper, newTag: testenv}}\n\
             patches:\n\
             \x20 - target: {{kind: DaemonSet, name: iogen-seccomp}}\n\
             \x20   patch: |\n\
             \x20     - {{op: replace, path: /spec/template/spec/volumes/1/hostPath/path, value: {host}}}\n\
             \x20     - {{op: add, path: /spec/template/spec/nodeSelector, value: {{\"{label}\": \"true\"}}}}\n\
             \x20 - target: {{kind: Namespace, name: cnsreplay-seccomp}}\n\
             \x20   patch: |\n\
             \x20     - {{op: replace, path: /metadata/name, value: {tag}}}\n",
            reg = var("TESTENV_REGISTRY"),
            host = host_dir.display(),
            label = var("TESTENV_REAL_NODE_LABEL"),
        ),
    )
    .unwrap();
    let installed = Installed {
        env: &env,
        overlay: overlay.clone(),
        file: host_dir.join(&profile),
    };
    let t0 = std::time::Instant::now();
    env.kubectl()
        .ok(&["apply", "-k", overlay.to_str().unwrap()]);
    env.kubectl().ok(&[
        "-n",
        &tag,
        "rollout",
        "status",
        "ds/iogen-seccomp",
        "--timeout=120s",
    ]);
    let rolled = t0.elapsed();
    let want = std::fs::read(src.join("iogen.json")).unwrap();
    let have = std::fs::read(&installed.file)
        .unwrap_or_else(|e| panic!("{}: {e}", installed.file.display()));
    assert!(
        have == want,
        "{} differs from deploy/seccomp/iogen.json",
        installed.file.display()
    );

    let dir2 = tempfile::tempdir().unwrap();
    let trace = write_trace(
        dir2.path(),
        "",
        "  - {at: 0s, create_volume: {volume: v}}\n  \
         - {at: 0s, attach: {workload: w, volumes: [v]}}\n  \
         - {at: 0s, io_phase: {workload: w, volume: v, pattern: random, read_pct: 50, block_size: 4Ki, load: {depth: 1}, duration: 1s, region: 16Mi}}\n  \
         - {at: 12s, detach: {workload: w}}\n  \
         - {at: 12s, delete_volume: {volume: v}}\n",
    );
    let mut cfg = on_real_node(&env, &node);
    cfg.pod.iogen_seccomp_profile = Some(format!("cnsreplay/{profile}"));
    let run_dir = dir2.path().join("run");
    let (out, _p) = replay_run(&trace, &run_dir, env.provider_for(cfg, &trace));
    let recs = events(&run_dir);
    let io = record(&recs, OpType::IoPhase);
    assert_eq!(io.outcome, Outcome::Ok, "{}", all_records(&recs));
    let b = &out.summary.io.backends;
    assert!(
        b.len() == 1 && b[0].backend == "io_uring" && b[0].event == io.id,
        "{b:?}"
    );
    #[allow(clippy::print_stderr)] // the number the docs quote
    {
        eprintln!("deploy/seccomp applied and rolled out in {rolled:?}");
    }
    drop(installed);
    assert!(
        !host_dir.join(&profile).exists(),
        "the test's profile was removed"
    );
}
