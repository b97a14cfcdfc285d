//! The README's main job on the kube provider against testenv's real kubelet node: the
//! Experiment 2 trace as shipped (5 PVCs, a pod on each, iogen pods doing I/O on the mounted
//! ext4 volumes, snapshots round-robin), with only the cluster's classes, the node and the
//! image given on the command line, as an account bound to exactly the pieces of
//! `deploy/rbac/` the trace needs (`Cluster::runner_kubeconfig_for`). It must print
//! the same table as the local run, with I/O on both sides of the snapshot split, and leave
//! nothing behind. Skipped (one line) without a real node unless
//! `CNSREPLAY_REQUIRE_REAL_NODE=1`.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use provider_kube::Piece;

use crate::{LENIENT, cnsreplay_within, ok, s, stdout};

pub(crate) struct Cluster {
    vars: HashMap<String, String>,
    /// This test's turn on the real node: shared, or the whole node (a test that shuts it down).
    _turn: Turn,
}

/// Tests of this binary run in parallel; one that shuts the real node down (its kubelet) must
/// not run while others use the node, so it takes the node alone and the others share it.
static NODE: std::sync::RwLock<()> = std::sync::RwLock::new(());

pub(crate) enum Turn {
    Shared(#[allow(dead_code)] std::sync::RwLockReadGuard<'static, ()>),
    Alone(#[allow(dead_code)] std::sync::RwLockWriteGuard<'static, ()>),
}

impl Cluster {
    pub(crate) fn get(&self, k: &str) -> &str {
        self.vars.get(k).map_or("", String::as_str)
    }

    /// `--iogen-seccomp-profile` with testenv's installed iogen profile (io_uring allowed),
    /// when it has one.
    fn seccomp(&self) -> Vec<String> {
        match self.get("TESTENV_IOGEN_SECCOMP") {
            "" => Vec::new(),
            p => vec!["--iogen-seccomp-profile".to_owned(), p.to_owned()],
        }
    }

    /// `kubectl` as the cluster admin; panics with its stderr on failure.
    pub(crate) fn kubectl(&self, args: &[&str]) -> String {
        crate::kubectl(&self.vars, args)
    }

    /// A kubeconfig, written 0600 in `dir` (a temporary directory the test removes), for the
    /// tests' account bound to exactly the pieces of `deploy/rbac/` that a `cnsreplay run` of
    /// `trace` (relative: to the workspace) in a run-owned namespace needs: what its pre-flight
    /// asks for ([`provider_kube::TraceUses::pieces`]). A piece missing from that mapping
    /// fails the test at pre-flight, naming the verb.
    pub(crate) fn runner_kubeconfig_for(&self, dir: &Path, trace: impl AsRef<Path>) -> PathBuf {
        let trace = crate::workspace().join(trace);
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
        let dir = crate::workspace().join("deploy/rbac");
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
        let out = Command::new(Path::new(self.get("TESTENV_BIN")).join("kubectl"))
            .arg(format!("--kubeconfig={}", self.get("KUBECONFIG")))
            .arg("create")
            .args(args)
            .output()
            .expect("run kubectl");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() || err.contains("already exists"),
            "kubectl create {args:?}: {err}"
        );
    }

    /// `kubectl ARGS` as the admin with `input` on its stdin; panics with its stderr on failure.
    pub(crate) fn kubectl_stdin(&self, args: &[&str], input: &str) -> String {
        use std::io::Write as _;
        let mut child = Command::new(Path::new(self.get("TESTENV_BIN")).join("kubectl"))
            .arg(format!("--kubeconfig={}", self.get("KUBECONFIG")))
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run kubectl");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write kubectl's stdin");
        let out = child.wait_with_output().expect("kubectl");
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    }

    /// A kubeconfig at `path` (0600: it holds a credential) for the service account `ns/sa`,
    /// with a token valid for an hour and without the admin's client certificate.
    pub(crate) fn account_kubeconfig(&self, ns: &str, sa: &str, path: &Path) -> PathBuf {
        let token = self.kubectl(&["create", "token", sa, "-n", ns, "--duration=1h"]);
        let mut kc: serde_json::Value = serde_json::from_str(
            &self.kubectl(&["config", "view", "--raw", "--minify", "-o", "json"]),
        )
        .expect("kubeconfig json");
        for u in kc["users"].as_array_mut().expect("users") {
            u["user"] = serde_json::json!({ "token": token.trim() });
        }
        write_secret(path, &serde_json::to_vec(&kc).expect("json"));
        path.to_owned()
    }
}

/// The tests' account (namespace `cnsreplay`) bound to exactly `pieces`:
/// `cnsreplay-tests-` and their names, e.g. `cnsreplay-tests-read-run-namespaces`.
pub(crate) fn runner_account(pieces: &BTreeSet<Piece>) -> String {
    let names: Vec<&str> = pieces.iter().map(|p| p.name()).collect();
    format!("cnsreplay-tests-{}", names.join("-"))
}

/// Writes a credential readable by its owner only (0600 from its creation).
pub(crate) fn write_secret(path: &Path, bytes: &[u8]) {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    f.write_all(bytes)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// The cluster of testenv `vars` with a shared turn on its real node, for a test that needs
/// no real node but may place pods there.
pub(crate) fn shared_cluster(vars: HashMap<String, String>) -> Cluster {
    Cluster {
        vars,
        _turn: shared_turn(),
    }
}

pub(crate) fn real_node_cluster() -> Option<Cluster> {
    real_node(false)
}

/// The real node for a test that disturbs it (stops its kubelet): no other test of this
/// binary uses the node meanwhile.
pub(crate) fn real_node_alone() -> Option<Cluster> {
    real_node(true)
}

/// A shared turn on the real node for a test that may schedule pods there without asking for
/// it (hold it for the test's length).
pub(crate) fn shared_turn() -> Turn {
    Turn::Shared(
        NODE.read()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
}

fn real_node(alone: bool) -> Option<Cluster> {
    let require = std::env::var("CNSREPLAY_REQUIRE_REAL_NODE").as_deref() == Ok("1");
    let vars = crate::testenv_vars();
    if vars.get("TESTENV_REAL_NODE").is_none_or(String::is_empty) {
        assert!(
            !require,
            "CNSREPLAY_REQUIRE_REAL_NODE=1 but CNSREPLAY_TESTENV names no cluster with a real node"
        );
        #[allow(clippy::print_stderr)] // the skip line is the contract
        {
            eprintln!(
                "skipped: no local cluster with a real node (TESTENV_REAL_NODE=1 testenv/up.sh)"
            );
        }
        return None;
    }
    // A test that panicked while holding its turn poisons the lock: the node is still usable.
    let turn = if alone {
        Turn::Alone(
            NODE.write()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    } else {
        shared_turn()
    };
    Some(Cluster { vars, _turn: turn })
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

/// `cnsreplay run` of the README's Experiment 2 on the real node, into `run`.
fn exp2_args(c: &Cluster, kc: &Path, run: &Path) -> Vec<String> {
    run_args(c, kc, "traces/experiment2-short.yaml", run)
}

/// Experiment 2 on the real node as a child process (output piped), with `extra` arguments.
fn spawn_exp2(c: &Cluster, kc: &Path, run: &Path, extra: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_cnsreplay"))
        .args(exp2_args(c, kc, run))
        .args(extra)
        .current_dir(crate::workspace())
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn")
}

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

#[test]
fn experiment2_on_the_real_node_prints_the_local_table_and_leaves_nothing() {
    let Some(c) = real_node_cluster() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let kc = c.runner_kubeconfig_for(tmp.path(), "traces/experiment2-short.yaml");
    let run = tmp.path().join("run");
    // Its live metrics: the iogen pods' I/O of tenant `db` arrives while they run.
    let port = crate::prometheus::free_port();
    let metrics = format!("127.0.0.1:{port}");
    let child = spawn_exp2(&c, &kc, &run, &["--metrics-addr", &metrics]);
    let t0 = std::time::Instant::now();
    let live = loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
        let text = crate::prometheus::scrape(port).unwrap_or_default();
        let reads = crate::prometheus::sample(
            &text,
            "cnsreplay_io_requests_total{tenant=\"db\",kind=\"read\"}",
        );
        if reads > 0.0 || t0.elapsed() > std::time::Duration::from_secs(120) {
            break text;
        }
    };
    let out = crate::wait_within(child, "cnsreplay run", crate::deadline(600));
    ok(&out);
    assert!(
        crate::prometheus::sample(
            &live,
            "cnsreplay_io_requests_total{tenant=\"db\",kind=\"write\"}"
        ) > 0.0
            && crate::prometheus::sample(&live, "cnsreplay_op_done_total{op=\"io_phase\"}") == 0.0,
        "no live I/O of the iogen pods before the first io_phase ended:\n{live}"
    );
    let text = stdout(&out);
    for row in [
        "create_volume",
        "attach",
        "io_phase",
        "snapshot",
        "detach",
        "delete_volume",
    ] {
        assert!(text.contains(&format!("\n{row} ")), "no {row} row:\n{text}");
    }
    assert!(
        text.contains("I/O p99.9:") && text.contains("without a snapshot in flight"),
        "{text}"
    );

    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("summary.json")).expect("summary"))
            .expect("json");
    assert_eq!(summary["state"], "complete", "{summary}");
    // Failed operations, with their error, for the messages below.
    let failed: Vec<String> = std::fs::read_to_string(run.join("events.jsonl"))
        .expect("events")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["outcome"] != "ok")
        .map(|v| {
            format!(
                "{} {} at {} ns: {} {}",
                v["id"], v["op"], v["intended"], v["error_class"], v["error"]
            )
        })
        .collect();
    for (op, n) in EXP2_OPS {
        assert_eq!(summary["ops"][op]["count"], n, "{op}: {summary}");
        assert_eq!(summary["ops"][op]["failed"], 0, "{op} failed: {failed:#?}");
    }
    for side in ["with_snapshot", "without_snapshot"] {
        let n = summary["io"][side]["count"].as_u64().unwrap_or(0);
        assert!(n > 0, "no I/O {side}: {summary}");
    }
    // The run's pull check passed (it ran at all), and iogen's pods ran under testenv's
    // profile: io_uring, said per io_phase in the summary and the table, no fallback notice.
    if !c.seccomp().is_empty() {
        let backends = summary["io"]["backends"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            !backends.is_empty() && backends.iter().all(|b| b["backend"] == "io_uring"),
            "{summary}"
        );
        assert!(text.contains("I/O backend: io_uring in "), "{text}");
        assert!(
            !summary["notices"]
                .to_string()
                .contains("iogen used threads"),
            "{summary}"
        );
    }
    // Every attach went through the kubelet: VolumeAttachment attached, then Running.
    let events = std::fs::read_to_string(run.join("events.jsonl")).expect("events");
    let attaches: Vec<serde_json::Value> = events
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &serde_json::Value| v["op"] == "attach")
        .collect();
    assert_eq!(attaches.len(), 5);
    for a in &attaches {
        let phases: Vec<&str> = a["phases"]
            .as_array()
            .expect("phases")
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        for want in ["scheduled", "attached", "running"] {
            assert!(phases.contains(&want), "{want} missing in {a}");
        }
    }

    // The driver's node service did the mounting, on the real node, during the run.
    let RunWindow { from, to, ops, .. } = RunWindow::read(&c, &run);
    let mut count: HashMap<String, usize> = HashMap::new();
    for v in ops
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["node"] == c.get("TESTENV_REAL_NODE") && v["code"] == "OK")
        .filter(|v| {
            v["start_ns"]
                .as_u64()
                .is_some_and(|t| (from..=to).contains(&t))
        })
    {
        *count
            .entry(v["op"].as_str().unwrap_or("").to_owned())
            .or_default() += 1;
    }
    for (op, at_least) in [
        ("NodeStageVolume", 5),
        ("NodePublishVolume", 10),
        ("NodeUnpublishVolume", 10),
        ("NodeUnstageVolume", 5),
    ] {
        let n = count.get(op).copied().unwrap_or(0);
        assert!(
            n >= at_least,
            "{op}: {n} calls on the real node, want {at_least}: {count:?}"
        );
    }

    nothing_left(&c, &run);
}

/// A finished run: its manifest, its wall-clock span (ns since the epoch) and the CSI
/// driver's call log, to pick the driver calls made while it ran.
struct RunWindow {
    manifest: serde_json::Value,
    from: u64,
    to: u64,
    ops: String,
}

impl RunWindow {
    fn read(c: &Cluster, run: &Path) -> Self {
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
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let stale: Vec<&str> = mounts
        .lines()
        .filter(|l| pvs.iter().any(|pv| l.contains(pv.as_str())))
        .collect();
    assert!(stale.is_empty(), "mounts left: {stale:#?}");
    let loops = Command::new("losetup").arg("-a").output().expect("losetup");
    let loops = String::from_utf8_lossy(&loops.stdout);
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
    let attached: Vec<&str> = loops
        .lines()
        .filter(|l| staged.iter().any(|img| l.contains(img.as_str())))
        .collect();
    assert!(attached.is_empty(), "loop devices left: {attached:#?}");
    let pods: Vec<String> = ledger
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "pod")
        .filter_map(|v| v["detail"]["uid"].as_str().map(str::to_owned))
        .collect();
    // The kubelet removes a deleted pod's directory (volumes unmounted, containers gone) in
    // its housekeeping, within seconds.
    let kubelet_pods = Path::new(c.get("TESTENV_DIR")).join("kubelet/pods");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let left: Vec<&String> = pods
            .iter()
            .filter(|u| kubelet_pods.join(u).exists())
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "pod directories left on the node after 60 s: {left:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// Ctrl-C while the iogen pods run and a snapshot may be in flight: the run stops, says it
/// was interrupted, keeps its partial results, and leaves no object, mount, loop device or
/// pod of the run on the node.
#[test]
fn ctrl_c_on_the_real_node_leaves_nothing_of_the_run() {
    let Some(c) = real_node_cluster() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let kc = c.runner_kubeconfig_for(tmp.path(), "traces/experiment2-short.yaml");
    let run = tmp.path().join("run");
    let child = spawn_exp2(&c, &kc, &run, &[]);
    // Records are written when an operation ends, so watch the cluster: wait until iogen
    // pods run.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let pods = c.kubectl(&[
            "get",
            "pods",
            "-A",
            "-l",
            "cnsreplay.io/role=io",
            "--field-selector",
            "status.phase=Running",
            "-o",
            "name",
        ]);
        if pods.lines().count() >= 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no iogen pod ran within 90 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    std::thread::sleep(std::time::Duration::from_secs(3));
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::INT,
    )
    .expect("SIGINT");
    let o = crate::wait_within(child, "cnsreplay run", crate::deadline(600));
    assert_ne!(o.status.code(), Some(0), "{}", stdout(&o));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).expect("manifest"))
            .expect("json");
    assert_eq!(manifest["state"], "interrupted", "{manifest:#}");
    let events = std::fs::read_to_string(run.join("events.jsonl")).expect("events");
    assert!(
        events.lines().any(|l| l.contains("\"attach\"")),
        "the attaches done before the signal are recorded"
    );
    nothing_left(&c, &run);
}

/// A block trace's shape (raw block volumes in the header, then only `io`) on the real node:
/// each volume's requests stream to an I/O pod of its own (`iogen replay` on the PVC's raw
/// device, fed over the pod's stdin), every request issued — reads, writes, trims, flushes —
/// none dropped or reordered, the fidelity report and rate curves written, `analyze report`
/// shows the streams, and nothing of the run is left.
#[test]
fn a_block_trace_replays_in_io_stream_pods_on_the_real_node() {
    let Some(c) = real_node_cluster() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let trace = tmp.path().join("block.jsonl");
    let n = 6000u64;
    let lines = crate::block_trace(
        r#"{"name":"d0","size":"64Mi","volume_mode":"block"},{"name":"d1","size":"64Mi","volume_mode":"block"}"#,
        n,
    );
    std::fs::write(&trace, lines.join("\n") + "\n").expect("write trace");
    let run = tmp.path().join("run");
    let kc = c.runner_kubeconfig_for(tmp.path(), &trace);
    let args = run_args(&c, &kc, s(&trace), &run);
    let seccomp = c.seccomp();
    let out = cnsreplay_within(&args.iter().map(String::as_str).collect::<Vec<_>>(), 600);
    let text = stdout(&out);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("summary.json")).expect("summary"))
            .expect("json");
    assert_eq!(summary["state"], "complete", "{text}\n{summary}");
    let streams = summary["io_streams"].as_array().expect("io_streams");
    assert_eq!(streams.len(), 2, "{text}\n{summary}");
    let mut requests = 0;
    for f in streams {
        assert_eq!(f["error"], serde_json::Value::Null, "{f}");
        requests += f["requests"].as_u64().unwrap_or(0);
        assert_eq!(f["dropped"], 0, "{f}");
        assert_eq!(f["reordered"], 0, "{f}");
        assert_eq!(f["errors"], 0, "{f}");
        assert_eq!(f["completed"], f["requests"], "{f}");
        assert_eq!(f["target"], "/dev/cnsreplay/0", "{f}");
        let flags = f["flags"].to_string();
        assert!(
            flags.contains("O_DIRECT") && flags.contains("in pod"),
            "{flags}"
        );
        // With iogen's seccomp profile the pod may use io_uring (RuntimeDefault refuses it).
        if !seccomp.is_empty() {
            assert_eq!(f["flags"][0], "io_uring", "{flags}");
        }
        assert!(f["windows"].as_u64().unwrap_or(0) >= 1, "{f}");
    }
    assert_eq!(requests, n);
    let adjusted: u64 = streams
        .iter()
        .map(|f| f["adjusted"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(adjusted, 1, "only the unaligned request is changed");
    assert_eq!(summary["ops"]["io"]["count"], n, "{summary}");
    assert_eq!(summary["ops"]["io"]["failed"], 0, "{summary}");
    // The pods' logs (with their result lines) and the per-second curves are in the run.
    let logs: Vec<String> = std::fs::read_dir(run.join("io/stream-pods"))
        .expect("io/stream-pods")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| std::fs::read_to_string(e.path()).expect("log"))
        .collect();
    assert_eq!(logs.len(), 2, "one log per stream pod");
    for l in &logs {
        assert!(l.contains("iogen-stream-result "), "{l}");
    }
    assert_eq!(
        std::fs::read_dir(run.join("io/streams"))
            .expect("io/streams")
            .count(),
        2,
        "one rate curve per stream"
    );
    let html = tmp.path().join("report.html");
    let o = cnsreplay_within(
        &[
            "analyze",
            "report",
            "--allow-invalid",
            s(&run),
            "-o",
            s(&html),
        ],
        600,
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let page = std::fs::read_to_string(&html).expect("report");
    assert!(page.contains("<th>I/O stream</th>"), "no stream table");
    nothing_left(&c, &run);
}
