//! Cluster discovery (shared contract with the CSI driver's tests) and helpers: static
//! provisioning (a no-provisioner StorageClass and hostPath PVs), trace files, run records.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, Config};
use provider_kube::{KubeConfig, KubeProvider, Piece, TraceUses};
use replay::{EventRecord, Outcome, RunControl, RunOptions, RunOutcome};
use trace_format::OpType;

/// The local test cluster from `CNSREPLAY_TESTENV` (a `testenv.env` file), found by
/// [`testkit`]; what these tests add to it is [`KubeTestEnv`].
pub use testkit::TestEnv;

/// The cluster, or None after printing the skip notice (a failure when
/// `CNSREPLAY_REQUIRE_TESTENV=1`).
pub fn testenv() -> Option<TestEnv> {
    testkit::testenv()
}

/// [`testenv`] with the cluster to itself ([`testkit::testenv_alone`]): no other test of any
/// process holds a turn meanwhile.
pub fn testenv_alone() -> Option<TestEnv> {
    testkit::testenv_alone()
}

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

pub async fn client(env: &TestEnv) -> Client {
    let kc = kube::config::Kubeconfig::read_from(env.kubeconfig()).unwrap();
    let cfg = Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    Client::try_from(cfg).unwrap()
}

/// A unique suffix for test objects.
pub fn uniq(tag: &str) -> String {
    format!(
        "{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            % 1_000_000
    )
}

/// A StorageClass without a provisioner and `n` hostPath PVs of 1 GiB in it, labelled with
/// the class name so [`drop_static`] removes them.
pub async fn static_class(c: &Client, class: &str, n: usize) {
    let sc: StorageClass = serde_json::from_value(serde_json::json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": class, "labels": {"cnsreplay-test": class}},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "Immediate",
        "reclaimPolicy": "Retain",
    }))
    .unwrap();
    Api::<StorageClass>::all(c.clone())
        .create(&PostParams::default(), &sc)
        .await
        .unwrap();
    let api = Api::<PersistentVolume>::all(c.clone());
    for i in 0..n {
        let pv: PersistentVolume = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": format!("{class}-{i}"), "labels": {"cnsreplay-test": class}},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": class,
                "hostPath": {"path": format!("/tmp/{class}-{i}")},
            },
        }))
        .unwrap();
        api.create(&PostParams::default(), &pv).await.unwrap();
    }
}

pub async fn drop_static(c: &Client, class: &str) {
    let lp = ListParams::default().labels(&format!("cnsreplay-test={class}"));
    let _ = Api::<PersistentVolume>::all(c.clone())
        .delete_collection(&DeleteParams::default(), &lp)
        .await;
    let _ = Api::<StorageClass>::all(c.clone())
        .delete(class, &DeleteParams::default())
        .await;
}

/// Objects in the cluster that carry the run's label (pods, PVCs) in any namespace.
pub async fn run_objects(c: &Client, run_id: &str) -> Vec<String> {
    let lp = ListParams::default().labels(&format!("cnsreplay.io/run={run_id}"));
    let mut out = Vec::new();
    for p in Api::<Pod>::all(c.clone()).list(&lp).await.unwrap() {
        out.push(format!("pod {:?}", p.metadata.name));
    }
    for p in Api::<PersistentVolumeClaim>::all(c.clone())
        .list(&lp)
        .await
        .unwrap()
    {
        out.push(format!("pvc {:?}", p.metadata.name));
    }
    for n in Api::<k8s_openapi::api::core::v1::Namespace>::all(c.clone())
        .list(&lp)
        .await
        .unwrap()
    {
        out.push(format!("namespace {:?}", n.metadata.name));
    }
    out
}

/// After a stopped run (which deletes its namespace without waiting for the namespace
/// controller): nothing of run `run_id` is left but its namespace, which is already
/// terminating and is gone within 60 s.
pub async fn nothing_left_after_stop(c: &Client, run_id: &str) {
    let left: Vec<String> = run_objects(c, run_id)
        .await
        .into_iter()
        .filter(|o| !o.starts_with("namespace "))
        .collect();
    assert!(left.is_empty(), "left behind after the stop: {left:?}");
    let lp = ListParams::default().labels(&format!("cnsreplay.io/run={run_id}"));
    let api = Api::<k8s_openapi::api::core::v1::Namespace>::all(c.clone());
    let t0 = std::time::Instant::now();
    loop {
        let ns = api.list(&lp).await.unwrap().items;
        let Some(n) = ns.first() else { return };
        assert!(
            n.metadata.deletion_timestamp.is_some(),
            "the run's namespace {:?} was not deleted: {:?}",
            n.metadata.name,
            n.status
        );
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the run's namespace {:?} still terminating after 60 s: {:?}",
            n.metadata.name,
            n.status
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A provider running `trace` in `class` as the account its trace needs
/// ([`TestEnv::provider_for`]).
///
/// Its pods go to testenv's fake nodes only (`type: kwok`): a pod the scheduler places (a
/// drain's or a reschedule's without a node) could otherwise land on the real node, which
/// carries no taint and which the other lane's tests share, shut down and force-detach (the
/// likely cause of a cold CI run's drain test failing with `pod_deleted` and `not_found`
/// beside them).
pub fn provider(env: &TestEnv, class: &str, trace: &Path) -> KubeProvider {
    let mut cfg = KubeConfig {
        storage_class: Some(class.to_owned()),
        qps: 200.0,
        burst: 400,
        ..KubeConfig::default()
    };
    cfg.pod
        .node_selector
        .insert("type".to_owned(), "kwok".to_owned());
    env.provider_for(cfg, trace)
}

/// How long one replay of a cluster test may run (`CNSREPLAY_TEST_DEADLINE` seconds, default
/// 300) before the test fails listing the operations in flight and what each waited for.
pub fn deadline() -> Duration {
    Duration::from_secs(
        std::env::var("CNSREPLAY_TEST_DEADLINE")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(300),
    )
}

pub fn replay_run(trace: &Path, dir: &Path, p: KubeProvider) -> (RunOutcome, Arc<KubeProvider>) {
    let opts = RunOptions {
        grace_ns: 10_000_000_000,
        ..RunOptions::default()
    };
    replay_run_with(trace, dir, p, &opts)
}

/// `replay::run` under the test [`deadline`]: past it the run is stopped and the test
/// panics naming every operation still in flight and what it was waiting for.
pub fn replay_run_with(
    trace: &Path,
    dir: &Path,
    p: KubeProvider,
    opts: &RunOptions,
) -> (RunOutcome, Arc<KubeProvider>) {
    let p = Arc::new(p);
    let control = RunControl::new();
    let (tx, rx) = std::sync::mpsc::channel();
    let out = std::thread::scope(|s| {
        let (p2, c2) = (p.clone(), control.clone());
        let h = s.spawn(move || {
            let r = replay::run(trace, dir, &p2, opts, &c2);
            let _ = tx.send(());
            r
        });
        if rx.recv_timeout(deadline()).is_err() {
            let pending = p.pending();
            control.request_stop("test deadline");
            let _ = h.join();
            panic!(
                "the run did not end within the test deadline of {:?} \
                 (CNSREPLAY_TEST_DEADLINE); in flight: {}",
                deadline(),
                pending
                    .iter()
                    .map(|q| format!(
                        "event {} {}: waiting for {}",
                        q.event_id, q.op, q.waiting_for
                    ))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        h.join().unwrap()
    });
    let out = out.unwrap();
    // A test trace the reader rejects ends the run early; say so rather than let the test
    // look for records that were never made.
    if let Some(reason) = out
        .summary
        .reason
        .as_deref()
        .filter(|r| r.starts_with("trace read error"))
    {
        panic!("{}: {reason}", trace.display());
    }
    (out, p)
}

pub fn events(dir: &Path) -> Vec<EventRecord> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The phase names of a record, asserting it succeeded and its phase times never go
/// backwards.
pub fn ordered_phases(r: &EventRecord) -> Vec<&str> {
    assert_eq!(
        r.outcome,
        Outcome::Ok,
        "event {} ({}) failed: {:?}",
        r.id,
        r.op,
        r.error
    );
    let mut last = r.started;
    for p in &r.phases {
        assert!(
            p.at >= last && p.at <= r.completed,
            "event {} ({}) phase {} at {} out of order (previous {last}, completed {})",
            r.id,
            r.op,
            p.name,
            p.at,
            r.completed
        );
        last = p.at;
    }
    // The provider reports its completion: the instant its last phase was seen (a snapshot
    // delete completes at the arrival of the deletion, after its only phase `deleted`).
    if let Some(p) = r.phases.last()
        && r.op != OpType::DeleteSnapshot
    {
        assert_eq!(
            r.completed, p.at,
            "event {} ({}) completed at {}, its last phase {} at {}",
            r.id, r.op, r.completed, p.name, p.at
        );
    }
    r.phases.iter().map(|p| p.name.as_str()).collect()
}

/// Whether the cluster has the project's CSI driver (its `cnsreplay-csi` StorageClass) and,
/// when `local`, runs it on this machine (`TESTENV_CSI_ROOT`); otherwise prints the skip
/// notice (a failure when `CNSREPLAY_REQUIRE_CSI=1`) and returns None. Some: the driver's
/// root folder (empty when not `local` and unknown).
pub fn csi_driver(
    env: &TestEnv,
    rt: &tokio::runtime::Runtime,
    c: &Client,
    local: bool,
) -> Option<PathBuf> {
    let has_class = rt
        .block_on(Api::<StorageClass>::all(c.clone()).get_opt("cnsreplay-csi"))
        .unwrap()
        .is_some();
    let root = Some(env.get("TESTENV_CSI_ROOT"))
        .filter(|r| !r.is_empty())
        .map(PathBuf::from);
    if has_class && (root.is_some() || !local) {
        return Some(root.unwrap_or_default());
    }
    testkit::skip::missing(
        "CSI",
        &format!(
            "no cnsreplay-csi StorageClass in the cluster{} (CSI driver not running)",
            if local {
                " or its driver does not run on this machine (TESTENV_CSI_ROOT)"
            } else {
                ""
            }
        ),
    );
    None
}

/// Waits for a child process for at most the test [`deadline`]; past it kills it and panics
/// naming `what`.
pub fn wait_child(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    let t0 = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if t0.elapsed() > deadline() {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what} did not end within the test deadline of {:?} (CNSREPLAY_TEST_DEADLINE)",
                deadline()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs a command to its end within the test [`deadline`]; returns its status and stdout.
pub fn output_within(
    cmd: &mut std::process::Command,
    what: &str,
) -> (std::process::ExitStatus, String) {
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut child = cmd.stdout(out.reopen().unwrap()).spawn().unwrap();
    let status = wait_child(&mut child, what);
    (status, std::fs::read_to_string(out.path()).unwrap())
}

/// What the kube provider's tests do with the cluster beyond [`testkit::TestEnv`]: accounts
/// bound to exactly the pieces of `deploy/rbac/` a run needs, and providers running as them.
pub trait KubeTestEnv {
    /// A kubeconfig of the service account `<sa>` in namespace `cnsreplay`, with a fresh token.
    fn service_account_kubeconfig(&self, sa: &str) -> PathBuf;
    /// A kubeconfig of the service account `ns/sa` with a token valid for an hour, written
    /// 0600 (it is a credential): the caller removes it when done.
    fn namespaced_account_kubeconfig(&self, ns: &str, sa: &str) -> PathBuf;
    /// Applies `deploy/rbac/` once per test process (see the impl).
    fn apply_rbac(&self);
    /// A kubeconfig of the tests' account bound to exactly `pieces` (see the impl).
    fn pieces_kubeconfig(&self, pieces: &BTreeSet<Piece>) -> PathBuf;
    /// Binds the tests' account `sa` to `piece` (see the impl).
    fn bind(&self, sa: &str, piece: Piece, namespace: &str);
    /// The kubeconfig a test runs `trace` with `cfg` as (see the impl).
    fn runner_kubeconfig_for(&self, cfg: &KubeConfig, trace: &Path) -> PathBuf;
    /// A provider running `trace` with `cfg` as [`KubeTestEnv::runner_kubeconfig_for`]'s account.
    fn provider_for(&self, cfg: KubeConfig, trace: &Path) -> KubeProvider;
}

impl KubeTestEnv for TestEnv {
    fn service_account_kubeconfig(&self, sa: &str) -> PathBuf {
        self.namespaced_account_kubeconfig("cnsreplay", sa)
    }

    /// The token's kubeconfig at `cnsreplay-<ns>-<sa>-<pid>.kubeconfig` in the temporary
    /// folder ([`remove_stale_kubeconfigs`] removes those of ended processes).
    fn namespaced_account_kubeconfig(&self, ns: &str, sa: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!(
            "cnsreplay-{ns}-{sa}-{}.kubeconfig",
            std::process::id()
        ));
        self.account_kubeconfig(ns, sa, &path)
    }

    /// Applies `deploy/rbac/` once per test process: its base (the namespace, the Job's account
    /// `cnsreplay` with the Role and the read ClusterRole) and the definitions of every opt-in
    /// piece, whose bindings are not applied: the tests bind pieces to accounts of their own
    /// ([`KubeTestEnv::pieces_kubeconfig`]), so the Job's account keeps only what the Job base
    /// binds.
    fn apply_rbac(&self) {
        // Tests applying it at the same moment on a fresh cluster would race to create the
        // same objects.
        static RBAC: std::sync::OnceLock<()> = std::sync::OnceLock::new();
        RBAC.get_or_init(|| {
            remove_stale_kubeconfigs();
            let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/rbac");
            self.kubectl().ok(&["apply", "-k", dir]);
            let all = self.kubectl().ok(&["kustomize", &format!("{dir}/all")]);
            let defs: Vec<&str> = all
                .split("\n---\n")
                .filter(|doc| {
                    !doc.lines()
                        .any(|l| l == "kind: ClusterRoleBinding" || l == "kind: RoleBinding")
                })
                .collect();
            self.kubectl()
                .ok_stdin(&["apply", "-f", "-"], &defs.join("\n---\n"));
        });
    }

    /// A kubeconfig of the tests' account bound to exactly `pieces` of `deploy/rbac/`
    /// ([`runner_account`] names it; created once per test process and set of pieces, and
    /// idempotently: other test processes make the same), with a fresh token, 0600 (removed
    /// as [`remove_stale_kubeconfigs`] says). A namespaced piece is bound in `cnsreplay`.
    fn pieces_kubeconfig(&self, pieces: &BTreeSet<Piece>) -> PathBuf {
        static MADE: std::sync::Mutex<BTreeMap<Vec<Piece>, PathBuf>> =
            std::sync::Mutex::new(BTreeMap::new());
        self.apply_rbac();
        let key: Vec<Piece> = pieces.iter().copied().collect();
        let mut made = MADE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(p) = made.get(&key) {
            return p.clone();
        }
        let sa = runner_account(pieces);
        self.kubectl()
            .create(&["serviceaccount", &sa, "-n", "cnsreplay"]);
        for p in pieces {
            self.bind(&sa, *p, "cnsreplay");
        }
        let kc = self.service_account_kubeconfig(&sa);
        made.insert(key, kc.clone());
        kc
    }

    /// Binds the tests' account `sa` (namespace `cnsreplay`) to `piece`: a ClusterRole
    /// cluster-wide, a Role in `namespace` (the Role `cnsreplay` is copied there from
    /// `deploy/rbac/base/role.yaml` when it is another namespace, as a user running there
    /// would).
    fn bind(&self, sa: &str, piece: Piece, namespace: &str) {
        let subject = format!("--serviceaccount=cnsreplay:{sa}");
        let binding = format!("{sa}-{}", piece.role());
        if piece.namespaced() {
            if namespace != "cnsreplay" {
                let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
                let text = std::fs::read_to_string(format!("{file}{}", piece.path())).unwrap();
                let role = text
                    .split("\n---\n")
                    .find(|d| d.lines().any(|l| l == "kind: Role"))
                    .unwrap()
                    .replace("namespace: cnsreplay", &format!("namespace: {namespace}"));
                self.kubectl().ok_stdin(&["apply", "-f", "-"], &role);
            }
            let r = format!("--role={}", piece.role());
            self.kubectl()
                .create(&["rolebinding", &binding, "-n", namespace, &r, &subject]);
        } else {
            let r = format!("--clusterrole={}", piece.role());
            self.kubectl()
                .create(&["clusterrolebinding", &binding, &r, &subject]);
        }
    }

    /// The kubeconfig a test runs `trace` with `cfg` as: the account bound to exactly the
    /// pieces of `deploy/rbac/` the trace needs — what pre-flight asks for
    /// ([`provider_kube::TraceUses::pieces`]) — with the Role bound in `cfg`'s namespace
    /// when it names one. A piece missing from that mapping fails the test at pre-flight,
    /// naming the verb.
    fn runner_kubeconfig_for(&self, cfg: &KubeConfig, trace: &Path) -> PathBuf {
        let pieces = TraceUses::scan(cfg, trace)
            .unwrap_or_else(|e| panic!("{e}"))
            .pieces(cfg);
        let kc = self.pieces_kubeconfig(&pieces);
        if let Some(ns) = &cfg.namespace
            && pieces.contains(&Piece::Role)
            && ns != "cnsreplay"
        {
            self.bind(&runner_account(&pieces), Piece::Role, ns);
        }
        kc
    }

    /// A provider running `trace` with `cfg` as [`KubeTestEnv::runner_kubeconfig_for`]'s account.
    fn provider_for(&self, cfg: KubeConfig, trace: &Path) -> KubeProvider {
        let kubeconfig = Some(self.runner_kubeconfig_for(&cfg, trace));
        KubeProvider::new(KubeConfig { kubeconfig, ..cfg }).unwrap()
    }
}

/// A runner's kubeconfig lives as long as its test process (providers and the binaries the
/// tests start read it at any time), and a test process ends without running destructors of
/// statics: each process removes those of processes that have ended (and their tokens expire
/// within the hour anyway).
fn remove_stale_kubeconfigs() {
    let Ok(dir) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("cnsreplay-")
            .and_then(|n| n.strip_suffix(".kubeconfig"))
            .and_then(|n| n.rsplit('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The tests' account (namespace `cnsreplay`) bound to exactly `pieces`:
/// `cnsreplay-tests-` and their names, e.g. `cnsreplay-tests-read-run-namespaces`.
pub fn runner_account(pieces: &BTreeSet<Piece>) -> String {
    let names: Vec<&str> = pieces.iter().map(|p| p.name()).collect();
    format!("cnsreplay-tests-{}", names.join("-"))
}

/// Every record, one line each (for a failing test's message).
pub fn all_records(recs: &[EventRecord]) -> String {
    recs.iter()
        .map(|r| {
            format!(
                "{} {} {:?} {:?} {:?} retries {:?}",
                r.id, r.op, r.outcome, r.error_class, r.error, r.retries
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first record of `op`.
pub fn record(recs: &[EventRecord], op: OpType) -> &EventRecord {
    recs.iter()
        .find(|r| r.op == op)
        .unwrap_or_else(|| panic!("no {op} record among\n{}", all_records(recs)))
}

/// Asserts `r` failed with `class` in less than `secs` seconds of the cluster's verdict;
/// returns its message. The verdict (the kubelet's, a controller's) comes after the last
/// milestone the operation passed — its pod `scheduled`, its volume `attached` — or after
/// its call when it passed none: the time is measured from the latest of these, so a slow
/// provisioning or attach before the verdict (a loaded machine) is not counted against it.
pub fn failed_within<'a>(r: &'a EventRecord, class: &str, secs: u64) -> &'a str {
    assert_eq!(
        (r.outcome, r.error_class.as_deref()),
        (Outcome::Error, Some(class)),
        "event {} ({}): {:?}",
        r.id,
        r.op,
        r.error
    );
    let (from, since) = r
        .phases
        .iter()
        .filter(|p| matches!(p.name.as_str(), "scheduled" | "attached" | "sandbox-ready"))
        .map(|p| (p.at, p.name.as_str()))
        .filter(|&(at, _)| at >= r.started && at <= r.completed)
        .max()
        .unwrap_or((r.started, "its call"));
    let took = Duration::from_nanos(r.completed - from);
    assert!(
        took < Duration::from_secs(secs),
        "event {} ({}) failed {took:?} after {since} ({:?} after its call), not within {secs} s: \
         {:?}",
        r.id,
        r.op,
        Duration::from_nanos(r.completed - r.started),
        r.error
    );
    r.error.as_deref().unwrap_or_default()
}
