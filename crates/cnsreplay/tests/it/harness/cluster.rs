//! The local test cluster (testenv, found by [`testkit`]) as the CLI's cluster tests use it:
//! a turn on its real node, `kubectl` as the admin, accounts bound to exactly the pieces of
//! `deploy/rbac/` a run needs, the arguments of a `cnsreplay run` there, and the check that
//! a run left nothing behind.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use provider_kube::Piece;
use testkit::TestEnv;

use super::cli::{s, workspace};
use super::runs::LENIENT;

/// The cluster and this test's turn on its real node ([`testkit::NodeTurn`], held by `env`):
/// shared, or the whole node for a test that shuts it down or lowers its attach limit. The
/// turn holds across the test processes of a run (scripts/test.sh runs other crates' cluster
/// tests beside these).
pub(crate) struct Cluster {
    env: TestEnv,
}

impl Cluster {
    pub(crate) fn get(&self, k: &str) -> &str {
        self.env.get(k)
    }

    /// `--iogen-seccomp-profile` with testenv's installed iogen profile (io_uring allowed),
    /// when it has one.
    pub(crate) fn seccomp(&self) -> Vec<String> {
        match self.get("TESTENV_IOGEN_SECCOMP") {
            "" => Vec::new(),
            p => vec!["--iogen-seccomp-profile".to_owned(), p.to_owned()],
        }
    }

    /// `kubectl` as the cluster admin; panics with its stderr on failure.
    pub(crate) fn kubectl(&self, args: &[&str]) -> String {
        self.env.kubectl().ok(args)
    }

    /// A kubeconfig, written 0600 in `dir` (a temporary directory the test removes), for the
    /// tests' account bound to exactly the pieces of `deploy/rbac/` that a `cnsreplay run` of
    /// `trace` (relative: to the workspace) in a run-owned namespace needs: what its pre-flight
    /// asks for ([`provider_kube::TraceUses::pieces`]). A piece missing from that mapping
    /// fails the test at pre-flight, naming the verb.
    pub(crate) fn runner_kubeconfig_for(&self, dir: &Path, trace: impl AsRef<Path>) -> PathBuf {
        let trace = workspace().join(trace);
        let cfg = provider_kube::KubeConfig::default();
        let pieces = provider_kube::TraceUses::scan(&cfg, &trace)
            .unwrap_or_else(|e| panic!("{e}"))
            .pieces(&cfg);
        self.pieces_kubeconfig(dir, &pieces)
    }

    /// A kubeconfig in `dir` (0600) for the tests' account bound to exactly `pieces`
    /// ([`runner_account`]; the account and its bindings are made once per test process, and
    /// idempotently: other processes make the same). For a test whose needs no trace names
    /// (`cnsreplay fetch`, say): it says which pieces, and why.
    pub(crate) fn pieces_kubeconfig(&self, dir: &Path, pieces: &BTreeSet<Piece>) -> PathBuf {
        static MADE: std::sync::Mutex<BTreeSet<String>> = std::sync::Mutex::new(BTreeSet::new());
        self.apply_rbac();
        let sa = runner_account(pieces);
        let mut made = MADE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !made.contains(&sa) {
            self.create_ok(&["serviceaccount", &sa, "-n", "cnsreplay"]);
            let subject = format!("--serviceaccount=cnsreplay:{sa}");
            for p in pieces {
                let binding = format!("{sa}-{}", p.role());
                if p.namespaced() {
                    let r = format!("--role={}", p.role());
                    self.create_ok(&["rolebinding", &binding, "-n", "cnsreplay", &r, &subject]);
                } else {
                    let r = format!("--clusterrole={}", p.role());
                    self.create_ok(&["clusterrolebinding", &binding, &r, &subject]);
                }
            }
            made.insert(sa.clone());
        }
        drop(made);
        self.account_kubeconfig("cnsreplay", &sa, &dir.join(format!("{sa}.kubeconfig")))
    }

    /// Applies `deploy/rbac/`: its base (the namespace, the Job's account `cnsreplay` with the
    /// Role and the read ClusterRole) and the definitions of every opt-in piece without their
    /// bindings: the tests bind pieces to accounts of their own
    /// ([`Cluster::pieces_kubeconfig`]), so the Job's account keeps only what the Job base
    /// binds. Once per test process: tests applying it at the same moment on a fresh cluster
    /// race to create the same objects, and all but one fail with AlreadyExists.
    pub(crate) fn apply_rbac(&self) {
        static RBAC: std::sync::OnceLock<()> = std::sync::OnceLock::new();
        RBAC.get_or_init(|| self.apply_rbac_now());
    }

    fn apply_rbac_now(&self) {
        let dir = workspace().join("deploy/rbac");
        self.kubectl(&["apply", "-k", s(&dir)]);
        let all = self.kubectl(&["kustomize", s(&dir.join("all"))]);
        let defs: Vec<&str> = all
            .split("\n---\n")
            .filter(|doc| {
                !doc.lines()
                    .any(|l| l == "kind: ClusterRoleBinding" || l == "kind: RoleBinding")
            })
            .collect();
        self.kubectl_stdin(&["apply", "-f", "-"], &defs.join("\n---\n"));
    }

    /// `kubectl create ARGS` as the admin; an object already there is fine.
    pub(crate) fn create_ok(&self, args: &[&str]) {
        self.env.kubectl().create(args);
    }

    /// `kubectl ARGS` as the admin with `input` on its stdin; panics with its stderr on failure.
    pub(crate) fn kubectl_stdin(&self, args: &[&str], input: &str) -> String {
        self.env.kubectl().ok_stdin(args, input)
    }

    /// A kubeconfig at `path` (0600: it holds a credential) for the service account `ns/sa`,
    /// with a token valid for an hour and without the admin's client certificate.
    pub(crate) fn account_kubeconfig(&self, ns: &str, sa: &str, path: &Path) -> PathBuf {
        self.env.account_kubeconfig(ns, sa, path)
    }
}

/// The tests' account (namespace `cnsreplay`) bound to exactly `pieces`:
/// `cnsreplay-tests-` and their names, e.g. `cnsreplay-tests-read-run-namespaces`.
pub(crate) fn runner_account(pieces: &BTreeSet<Piece>) -> String {
    let names: Vec<&str> = pieces.iter().map(|p| p.name()).collect();
    format!("cnsreplay-tests-{}", names.join("-"))
}

/// The cluster `env` of [`testkit::testenv`] (it holds a shared turn on the real node), for a
/// test that needs no real node but may place pods there.
pub(crate) fn shared_cluster(env: TestEnv) -> Cluster {
    Cluster { env }
}

pub(crate) fn real_node_cluster() -> Option<Cluster> {
    real_node(false)
}

/// The real node for a test that disturbs it (stops its kubelet, lowers its attach limit): no
/// other test, of this binary or another, uses the cluster meanwhile.
pub(crate) fn real_node_alone() -> Option<Cluster> {
    real_node(true)
}

fn real_node(alone: bool) -> Option<Cluster> {
    let Some(env) = TestEnv::from_env().filter(|e| e.real_node().is_some()) else {
        testkit::skip::missing(
            "REAL_NODE",
            "no local cluster with a real node (TESTENV_REAL_NODE=1 testenv/up.sh)",
        );
        return None;
    };
    Some(Cluster {
        env: env.with_turn(alone),
    })
}

/// `cnsreplay run TRACE --provider kube` as the runner `kc`, into `run`: the image and
/// iogen's seccomp profile, every pod on the real node when `pinned`, and the trace's own
/// classes (testenv's names) unless `extra` says otherwise.
pub(crate) fn kube_run_args(
    c: &Cluster,
    kc: &Path,
    trace: &str,
    run: &Path,
    pinned: bool,
    extra: &[&str],
) -> Vec<String> {
    let mut args: Vec<String> = [
        "run",
        trace,
        "--provider",
        "kube",
        "--kubeconfig",
        s(kc),
        "--iogen-image",
        c.get("TESTENV_IOGEN_IMAGE"),
        LENIENT,
        "-o",
        s(run),
    ]
    .map(str::to_owned)
    .into_iter()
    .chain(c.seccomp())
    .chain(extra.iter().map(|a| (*a).to_owned()))
    .collect();
    if pinned {
        args.push("--node-selector".to_owned());
        args.push(format!("{}=true", c.get("TESTENV_REAL_NODE_LABEL")));
    }
    args
}

/// `cnsreplay run TRACE` on the real node as the runner `kc`, into `run`, with the cluster's
/// classes for every class the trace names.
pub(crate) fn run_args(c: &Cluster, kc: &Path, trace: &str, run: &Path) -> Vec<String> {
    kube_run_args(
        c,
        kc,
        trace,
        run,
        true,
        &[
            "--storage-class",
            c.get("TESTENV_STORAGE_CLASS"),
            "--snapshot-class",
            c.get("TESTENV_SNAPSHOT_CLASS"),
        ],
    )
}

/// The run id of a run directory (its manifest's).
pub(crate) fn run_id(run: &Path) -> String {
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).expect("manifest"))
            .expect("json");
    m["run_id"].as_str().expect("run_id").to_owned()
}

/// Experiment 2's operations and how many of each it has (`traces/experiment2-short.yaml`).
pub(crate) const EXP2_OPS: [(&str, u64); 6] = [
    ("create_volume", 5),
    ("attach", 5),
    ("io_phase", 5),
    ("snapshot", 8),
    ("detach", 5),
    ("delete_volume", 5),
];

/// The objects (PVCs, pods, VolumeSnapshots, any namespace) labelled for run `run_id`.
pub(crate) fn run_objects_left(c: &Cluster, run_id: &str) -> String {
    let label = format!("cnsreplay.io/run={run_id}");
    c.kubectl(&[
        "get",
        "pvc,pods,volumesnapshots",
        "-A",
        "-l",
        &label,
        "-o",
        "name",
    ])
}

/// A finished run: its manifest, its wall-clock span (ns since the epoch) and the CSI
/// driver's call log, to pick the driver calls made while it ran.
pub(crate) struct RunWindow {
    pub(crate) manifest: serde_json::Value,
    pub(crate) from: u64,
    pub(crate) to: u64,
    pub(crate) ops: String,
}

impl RunWindow {
    pub(crate) fn read(c: &Cluster, run: &Path) -> Self {
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(run.join("manifest.json")).expect("manifest"))
                .expect("json");
        let wall_ns = |k: &str| {
            manifest[k]
                .as_str()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .map(|t| u64::try_from(t.as_nanosecond()).unwrap_or(0))
                .unwrap_or_else(|| panic!("manifest {k}: {manifest}"))
        };
        let (from, to) = (wall_ns("started"), wall_ns("finished"));
        let ops = std::fs::read_to_string(c.get("TESTENV_CSI_OPS_LOG")).expect("driver ops log");
        Self {
            manifest,
            from,
            to,
            ops,
        }
    }
}

/// Nothing of the run in `run` is left: no object with its label, no mount of its PVs, no
/// loop device of the volumes the driver staged while it ran, no pod directory (containers,
/// volumes) of its pods on the node.
pub(crate) fn nothing_left(c: &Cluster, run: &Path) {
    let RunWindow {
        manifest,
        from,
        to,
        ops,
    } = RunWindow::read(c, run);
    let run_id = manifest["run_id"].as_str().expect("run_id");
    let left = run_objects_left(c, run_id);
    assert!(left.trim().is_empty(), "left behind: {left}");
    // The run's own cleanup failed at nothing (a request it is forbidden there is a piece of
    // deploy/rbac/ its account lacks, and pre-flight does not ask for).
    if let Ok(text) = std::fs::read_to_string(run.join("summary.json")) {
        let summary: serde_json::Value = serde_json::from_str(&text).expect("summary json");
        let failures = &summary["cleanup_failures"];
        assert!(
            failures.as_array().is_none_or(Vec::is_empty),
            "the run's cleanup failed: {failures}"
        );
    }
    // A stopped run deletes its namespace without waiting for the namespace controller's
    // sweep: terminating then is fine, as long as it goes.
    let t0 = std::time::Instant::now();
    let ns = format!("cnsreplay-{run_id}");
    loop {
        let phase = c.kubectl(&[
            "get",
            "namespaces",
            "--field-selector",
            &format!("metadata.name={ns}"),
            "-o",
            "jsonpath={.items[*].status.phase}",
        ]);
        if phase.trim().is_empty() {
            break;
        }
        assert!(
            phase.trim() == "Terminating" && t0.elapsed() < std::time::Duration::from_secs(60),
            "the run's namespace {ns} is left (phase {phase:?}, {:?} after the run)",
            t0.elapsed()
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    // Publish mounts are named after the PV (`pvc-<uid>`); staging is a loop device of the
    // driver's image of the volume.
    let ledger = std::fs::read_to_string(run.join("ledger.jsonl")).expect("ledger");
    let pvs: Vec<String> = ledger
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "pvc")
        .filter_map(|v| v["detail"]["uid"].as_str().map(|u| format!("pvc-{u}")))
        .collect();
    assert!(!pvs.is_empty(), "{ledger}");
    // The run's volumes: the driver ids its NodePublish calls for the run's PVs named.
    let staged: Vec<String> = ops
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["op"] == "NodePublishVolume")
        .filter(|v| {
            v["start_ns"]
                .as_u64()
                .is_some_and(|t| (from..=to).contains(&t))
        })
        .filter(|v| {
            let path = v["path"].as_str().unwrap_or("");
            pvs.iter().any(|pv| path.contains(pv.as_str()))
        })
        .filter_map(|v| v["volume"].as_str().map(|id| format!("/volumes/{id}.img")))
        .collect();
    let pods: Vec<String> = ledger
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "pod")
        .filter_map(|v| v["detail"]["uid"].as_str().map(str::to_owned))
        .collect();
    // The kubelet unpublishes, unstages and removes a deleted pod's directory in its
    // housekeeping, within seconds; after a node outage it does so for the pods it finds on
    // disk when it comes back, after the run may have ended. So the node side is waited for.
    let kubelet_pods = Path::new(c.get("TESTENV_DIR")).join("kubelet/pods");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
        let stale: Vec<&str> = mounts
            .lines()
            .filter(|l| pvs.iter().any(|pv| l.contains(pv.as_str())))
            .collect();
        let loops = Command::new("losetup").arg("-a").output().expect("losetup");
        let loops = String::from_utf8_lossy(&loops.stdout);
        let attached: Vec<&str> = loops
            .lines()
            .filter(|l| staged.iter().any(|img| l.contains(img.as_str())))
            .collect();
        let dirs: Vec<&String> = pods
            .iter()
            .filter(|u| kubelet_pods.join(u).exists())
            .collect();
        if stale.is_empty() && attached.is_empty() && dirs.is_empty() {
            break;
        }
        if std::time::Instant::now() >= deadline {
            // What the driver was asked for those volumes, after the run's start.
            let now_ops = std::fs::read_to_string(c.get("TESTENV_CSI_OPS_LOG")).unwrap_or_default();
            let calls: Vec<String> = now_ops
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter(|v| v["start_ns"].as_u64().is_some_and(|t| t >= from))
                .filter(|v| {
                    let img = v["volume"].as_str().map(|id| format!("/volumes/{id}.img"));
                    img.is_some_and(|img| staged.contains(&img))
                })
                .map(|v| format!("{} {} {} {}", v["op"], v["volume"], v["code"], v["detail"]))
                .collect();
            panic!(
                "left on the node 90 s after the run: mounts {stale:#?}, loop devices \
                 {attached:#?}, pod directories {dirs:?}; the driver's calls for those volumes: \
                 {calls:#?}"
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}
