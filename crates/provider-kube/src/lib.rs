//! The `kube` provider: replays a trace against a real Kubernetes cluster through kube-rs.
//!
//! `create_volume` is a PVC (done when Bound; under WaitForFirstConsumer when created, and the
//! binding is measured by the first `attach`), `attach` a pod using the PVCs (done when Running
//! and Ready), `detach` deletes it (done when it and its VolumeAttachments are gone),
//! `snapshot` a VolumeSnapshot (done when readyToUse), restore/clone a PVC with a dataSource,
//! `resize` patches the request (done when the status capacity reaches it), deletes are done
//! when the object and a Delete-policy PV are gone. Completion comes from one shared watch per
//! kind ([`watch`]), never from polling. Every object carries the run's label and is written to
//! the ledger before it is created; its UID is recorded after, and cleanup deletes only
//! recorded objects, with a UID precondition. See `docs/kubernetes.md`.

mod access;
mod capability;
mod cbt;
mod cleanup;
mod cluster_metrics;
mod env;
pub mod fetch;
mod foreign;
mod group;
mod io;
mod io_local;
pub mod limiter;
mod logs;
mod modify;
pub mod objects;
mod ops;
mod ordered;
mod outage;
mod pods;
mod preflight;
mod pullcheck;
mod room;
mod stamp;
mod stream;
mod watch;
mod wffc;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use k8s_openapi::api::core::v1::{
    Event as CoreEvent, Namespace, PersistentVolume, PersistentVolumeClaim, Pod,
};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::runtime::watcher;
use kube::{Client, Config};
use replay::ledger::LedgerEntry;
use replay::provider::CleanupReport;
use replay::{ClientThrottling, OpCtx, Provider, ProviderError, RunInfo};
use serde::{Deserialize, Serialize};
use trace_format::{Event, OpType};

pub use crate::access::{Grant, Piece, grants};
pub use crate::capability::{Capability, Need, NeedUses};
pub use crate::io::{io_pod, pod_backend, split_log};
pub use crate::io_local::IoExec;
pub use crate::limiter::{ClientStats, Limiter};
pub use crate::objects::{PodOptions, VolumeSnapshot, VolumeSnapshotSpec, VolumeSnapshotStatus};
pub use crate::pods::{
    PodKind, WarningVerdict, pod_failure, pod_failure_as, pod_started, unschedulable,
    warning_class, warning_verdict,
};
pub use crate::preflight::TraceUses;
pub use crate::pullcheck::{PullCheck, pull_check_pod};
use crate::watch::{Watch, keep_all};

/// The kube provider's configuration (recorded in the manifest; rebuilds it for cleanup).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct KubeConfig {
    /// Kubeconfig file; the usual inference (`KUBECONFIG`, `~/.kube/config`, in-cluster)
    /// when absent.
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context; its current context when absent.
    pub context: Option<String>,
    /// Namespace to work in; a run-owned namespace `cnsreplay-<run id>` when absent (created
    /// in `prepare`, deleted by cleanup).
    pub namespace: Option<String>,
    /// StorageClass of every volume, replacing the trace's classes (those of its events and
    /// header) except the ones `storage_class_map` remaps; None: the trace's class, else the
    /// cluster default class.
    pub storage_class: Option<String>,
    /// Trace StorageClass → cluster StorageClass (`--map-storage-class OLD=NEW`); beats
    /// `storage_class`.
    pub storage_class_map: BTreeMap<String, String>,
    /// VolumeSnapshotClass of every snapshot, as `storage_class`.
    pub snapshot_class: Option<String>,
    /// Trace VolumeSnapshotClass → cluster class (`--map-snapshot-class OLD=NEW`).
    pub snapshot_class_map: BTreeMap<String, String>,
    /// VolumeGroupSnapshotClass of every group snapshot, as `snapshot_class`.
    #[serde(default)]
    pub group_snapshot_class: Option<String>,
    /// Node to pin workloads to when the event names none.
    pub node: Option<String>,
    /// Client-side request rate limit (requests/s over our own requests; 0 = off).
    pub qps: f64,
    /// Client-side burst.
    pub burst: u32,
    /// Image of `io_phase` pods (runs `iogen`; see deploy/iogen.Containerfile).
    pub iogen_image: String,
    /// Image of workload pods (`attach`).
    pub pause_image: String,
    /// Where `io_phase` I/O runs: `pod` (an iogen pod) or `local` (iogen in this process on
    /// the device the CSI driver attached; test clusters only, Block volumes only).
    pub io_exec: IoExec,
    /// Per op type: how long an operation may take before it fails with class `timeout`
    /// and a message naming what it was waiting for (ns; an `io_phase` gets this on top of
    /// its own duration). Every op type has one ([`default_timeouts`]), so a run never waits
    /// forever; `--timeout OP=DUR` overrides.
    pub timeouts: BTreeMap<OpType, u64>,
    /// How long a pod may stay `Unschedulable` (class `unschedulable`, the scheduler's
    /// message) or its sandbox fail to be created (a `FailedCreatePodSandBox` Warning, class
    /// `sandbox_failed`) before the operation fails with it (ns). A condition that clears
    /// within it (the scheduler retries on cluster changes; a PV just being bound) passes.
    /// Other Warnings Kubernetes retries (`FailedMount`, `FailedAttachVolume`,
    /// `ProvisioningFailed` with a retriable gRPC code) never fail an operation: they are
    /// counted on its record and quoted by its timeout (see `pods.rs`).
    pub failure_grace_ns: u64,
    /// How every pod runs (security context, placement, resources, pull secrets).
    pub pod: PodOptions,
    /// CSI sidecars' Prometheus endpoints (`http://HOST:PORT/metrics`) scraped when the clock
    /// starts and after the last operation: the run's CSI calls in the summary's `cluster`.
    pub csi_metrics: Vec<String>,
    /// Scrape the API server's `/metrics` the same way (needs `get` on `/metrics`).
    pub apiserver_metrics: bool,
    /// Before the clock starts, start one short-lived pod per target node with the images
    /// the run's pods use and iogen's seccomp profile (`pullcheck.rs`); false:
    /// `--no-pull-check`.
    pub pull_check: bool,
    /// `NAMESPACE/NAME` of the ServiceAccount whose audience-scoped token changed-block
    /// tracking sends (`--cbt-account`); None: the run's own account when its credentials
    /// are a ServiceAccount, else `cnsreplay/cnsreplay` (`cbt.rs`).
    pub cbt_account: Option<String>,
}

/// The default timeout of each op type (ns): generous for a real cloud's provisioning and
/// attach times, finite so nothing waits forever.
pub fn default_timeouts() -> BTreeMap<OpType, u64> {
    const S: u64 = 1_000_000_000;
    [
        (OpType::CreateVolume, 300 * S),
        (OpType::DeleteVolume, 300 * S),
        (OpType::Attach, 300 * S),
        (OpType::Detach, 300 * S),
        (OpType::AbortWorkload, 300 * S),
        (OpType::Snapshot, 600 * S),
        (OpType::DeleteSnapshot, 300 * S),
        (OpType::Resize, 300 * S),
        (OpType::ModifyVolume, 300 * S),
        (OpType::GroupSnapshot, 600 * S),
        (OpType::DeleteGroupSnapshot, 300 * S),
        (OpType::Reschedule, 600 * S),
        (OpType::CordonNode, 60 * S),
        (OpType::DrainNode, 900 * S),
        (OpType::IoPhase, 300 * S),
        (OpType::Io, 60 * S),
        (OpType::SnapshotAllocated, 300 * S),
        (OpType::SnapshotDelta, 300 * S),
    ]
    .into()
}

impl Default for KubeConfig {
    fn default() -> Self {
        Self {
            kubeconfig: None,
            context: None,
            namespace: None,
            storage_class: None,
            storage_class_map: BTreeMap::new(),
            snapshot_class: None,
            snapshot_class_map: BTreeMap::new(),
            group_snapshot_class: None,
            node: None,
            qps: 50.0,
            burst: 100,
            iogen_image: "cnsreplay/iogen:latest".into(),
            pause_image: "registry.k8s.io/pause:3.10".into(),
            io_exec: IoExec::Pod,
            timeouts: default_timeouts(),
            failure_grace_ns: 3_000_000_000,
            pod: PodOptions::default(),
            csi_metrics: Vec::new(),
            apiserver_metrics: false,
            pull_check: true,
            cbt_account: None,
        }
    }
}

impl KubeConfig {
    /// The timeout of operations of type `op`, without an `io_phase`'s own duration.
    pub fn op_timeout(&self, op: OpType) -> std::time::Duration {
        std::time::Duration::from_nanos(
            self.timeouts
                .get(&op)
                .copied()
                .or_else(|| default_timeouts().get(&op).copied())
                .unwrap_or(300_000_000_000),
        )
    }

    /// The timeout of an operation of type `op` (an `io_phase` adds its own duration).
    pub fn timeout(&self, ev: &Event) -> std::time::Duration {
        let op = ev.op.op_type();
        let base = self.op_timeout(op).as_nanos() as u64;
        let extra = match &ev.op {
            trace_format::Op::IoPhase(p) => p.duration.unwrap_or(0),
            _ => 0,
        };
        std::time::Duration::from_nanos(base.saturating_add(extra))
    }
}

/// Errors building the provider.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig: {0}")]
    Config(String),
    /// The client could not be built.
    #[error("kube client: {0}")]
    Client(String),
    /// The recorded configuration is not a kube configuration.
    #[error("provider config: {0}")]
    BadConfig(#[from] serde_json::Error),
    /// The provider's runtime could not start.
    #[error("tokio runtime: {0}")]
    Runtime(#[from] std::io::Error),
    /// The trace could not be read for the checks before the run.
    #[error("{0}")]
    Trace(String),
    /// The cluster lacks a class, node or namespace the trace needs.
    #[error("{0}")]
    Preflight(String),
    /// Listing a run's objects for a cleanup without its ledger failed.
    #[error("finding the run's objects: {0}")]
    Cleanup(String),
}

/// The shared watches, one per kind.
#[derive(Debug)]
pub(crate) struct Watches {
    pub(crate) pvc: Arc<Watch<PersistentVolumeClaim>>,
    pub(crate) pv: Arc<Watch<PersistentVolume>>,
    pub(crate) pod: Arc<Watch<Pod>>,
    pub(crate) va: Arc<Watch<VolumeAttachment>>,
    pub(crate) snap: Option<Arc<Watch<VolumeSnapshot>>>,
    pub(crate) groups: Option<Arc<Watch<group::VolumeGroupSnapshot>>>,
    /// Why there is no VolumeGroupSnapshot watch.
    pub(crate) groups_missing: Option<String>,
    /// Warning Events in the run's namespace, keyed by the involved object's name (None when
    /// the credentials may not watch them: failures then surface only as timeouts).
    pub(crate) events: Option<Arc<Watch<CoreEvent>>>,
}

/// What the provider knows about a volume of the trace.
#[derive(Debug, Clone)]
pub(crate) struct VolState {
    pub(crate) pvc: String,
    pub(crate) block: bool,
    /// Created under WaitForFirstConsumer and not bound yet.
    pub(crate) wffc: bool,
}

/// A running workload.
#[derive(Debug, Clone, Default)]
pub(crate) struct WlState {
    pub(crate) pod: String,
    pub(crate) volumes: Vec<trace_format::Name>,
    pub(crate) node: Option<String>,
    pub(crate) tenant: Option<String>,
    /// I/O pods of `io_phase` events running in it.
    pub(crate) io_pods: Vec<String>,
    /// Stop flags of `io_phase` units running in this process (`io_exec: local`).
    pub(crate) io_local: Vec<io_local::LocalIo>,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) volumes: HashMap<trace_format::Name, VolState>,
    pub(crate) workloads: HashMap<trace_format::Name, WlState>,
    /// StorageClass name → volumeBindingMode is WaitForFirstConsumer.
    pub(crate) wffc_classes: HashMap<String, bool>,
    /// (PVC, node) → the UID of the last of the run's pods scheduled there with that claim,
    /// and when it was seen scheduled: a detach whose volume a newer pod holds on the same
    /// node sees no detach (the attach-detach controller keeps the VolumeAttachment).
    pub(crate) claim_node: HashMap<(String, String), (String, std::time::Instant)>,
    /// The run's group snapshots by trace name.
    pub(crate) groups: HashMap<trace_format::Name, group::GroupState>,
    /// How each snapshot of the run was taken, by trace name (a restore's `taken`).
    pub(crate) snap_taken: HashMap<trace_format::Name, ordered::Taken>,
    /// How the snapshot each restored volume came from was taken, by trace volume.
    pub(crate) taken: HashMap<trace_format::Name, ordered::Taken>,
    /// Ordered-write logs by their trace name.
    pub(crate) ordered: HashMap<trace_format::Name, ordered::OrderedRun>,
    /// One line each for the summary's notices: the cut checks, a missing CSINode watch.
    pub(crate) notices: Vec<String>,
    /// The written sets of verify-mode writers, in the order they started (`cbt.rs`).
    pub(crate) written: Vec<cbt::Written>,
}

/// The kube provider.
pub struct KubeProvider {
    inner: Arc<Kube>,
    /// The provider's own runtime: the client's connections, the watches and every operation
    /// run here (the engine's runtime has no I/O driver), and it serves the blocking
    /// `prepare`/`cleanup`.
    rt: tokio::runtime::Runtime,
}

/// The provider's state, shared with the tasks running its operations.
pub(crate) struct Kube {
    pub(crate) config: KubeConfig,
    pub(crate) client: Client,
    pub(crate) limiter: Arc<Limiter>,
    pub(crate) run: OnceLock<RunInfo>,
    pub(crate) ns: OnceLock<String>,
    pub(crate) watches: OnceLock<Watches>,
    pub(crate) environment: OnceLock<serde_json::Value>,
    pub(crate) state: Mutex<State>,
    /// The cluster's metrics when the clock started (see `cluster_metrics`).
    pub(crate) baseline: Mutex<Option<cluster_metrics::Scrape>>,
    /// Operations in flight: event id → what it is waiting for now.
    pub(crate) inflight: Mutex<BTreeMap<u64, Pending>>,
    /// Woken whenever `State::claim_node` changes.
    pub(crate) claim_node_changed: tokio::sync::Notify,
    /// Failures the cluster retried during the run's operations, per reason: operations, times
    /// reported (`KubeProvider::retry_notices`).
    pub(crate) retried: Mutex<BTreeMap<String, (u64, u64)>>,
    /// True once the run was asked to stop (`Kube::stopped`).
    pub(crate) stop: OnceLock<tokio::sync::watch::Receiver<bool>>,
    /// The pull check `prepare` runs, set by `KubeProvider::preflight` (`pullcheck.rs`).
    pub(crate) pull_check: OnceLock<PullCheck>,
    /// The CSINode change log, started by the first attach that waits for room (`room.rs`).
    pub(crate) csinodes: tokio::sync::OnceCell<Option<Arc<room::CsiNodeLog>>>,
}

/// An operation in flight, as [`KubeProvider::pending`] reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pending {
    /// Trace event id.
    pub event_id: u64,
    /// Op type.
    pub op: OpType,
    /// What it waits for now (e.g. `pod w3 Running`), with the last reason the cluster gave.
    pub waiting_for: String,
}

impl std::fmt::Debug for KubeProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeProvider")
            .field("config", &self.inner.config)
            .field("namespace", &self.inner.ns.get())
            .field("watches", &self.inner.watches.get())
            .finish_non_exhaustive()
    }
}

/// A client for `config`'s kubeconfig and context (the usual inference without them).
pub(crate) async fn client_for(config: &KubeConfig) -> Result<Client, KubeError> {
    let opts = kube::config::KubeConfigOptions {
        context: config.context.clone(),
        ..Default::default()
    };
    let cfg = match &config.kubeconfig {
        Some(p) => {
            let kc = kube::config::Kubeconfig::read_from(p)
                .map_err(|e| KubeError::Config(format!("{}: {e}", p.display())))?;
            Config::from_custom_kubeconfig(kc, &opts)
                .await
                .map_err(|e| KubeError::Config(format!("{}: {e}", p.display())))?
        }
        None if config.context.is_some() => Config::from_kubeconfig(&opts)
            .await
            .map_err(|e| KubeError::Config(e.to_string()))?,
        None => Config::infer()
            .await
            .map_err(|e| KubeError::Config(e.to_string()))?,
    };
    Client::try_from(cfg).map_err(|e| KubeError::Client(e.to_string()))
}

impl KubeProvider {
    /// Builds the provider (reads the kubeconfig; contacts nothing yet).
    pub fn new(config: KubeConfig) -> Result<Self, KubeError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("cnsreplay-kube")
            .build()?;
        let client = rt.block_on(client_for(&config))?;
        let inner = Arc::new(Kube {
            limiter: Arc::new(Limiter::new(config.qps, config.burst)),
            config,
            client,
            run: OnceLock::new(),
            ns: OnceLock::new(),
            watches: OnceLock::new(),
            environment: OnceLock::new(),
            state: Mutex::new(State::default()),
            baseline: Mutex::new(None),
            inflight: Mutex::new(BTreeMap::new()),
            claim_node_changed: tokio::sync::Notify::new(),
            stop: OnceLock::new(),
            retried: Mutex::new(BTreeMap::new()),
            pull_check: OnceLock::new(),
            csinodes: tokio::sync::OnceCell::new(),
        });
        Ok(Self { inner, rt })
    }

    /// Rebuilds the provider from the configuration a manifest recorded.
    pub fn from_config(v: &serde_json::Value) -> Result<Self, KubeError> {
        Self::new(serde_json::from_value(v.clone())?)
    }

    /// The configuration.
    pub fn kube_config(&self) -> &KubeConfig {
        &self.inner.config
    }

    /// Throttling counters so far.
    pub fn client_stats(&self) -> ClientStats {
        self.inner.limiter.stats()
    }

    /// Notices about throttling for the run summary (empty when there was none).
    pub fn throttle_notices(&self) -> Vec<String> {
        self.client_stats()
            .notices(self.inner.config.qps, self.inner.config.burst)
    }

    /// A notice of the failures the cluster retried during the run's operations (none when
    /// there were none): they were not failures of those operations, and their records list
    /// them under `retries`.
    pub fn retry_notices(&self) -> Vec<String> {
        let r = self
            .inner
            .retried
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if r.is_empty() {
            return Vec::new();
        }
        let each: Vec<String> = r
            .iter()
            .map(|(reason, (ops, n))| {
                format!(
                    "{reason} {n} time{} in {ops} operation{}",
                    if *n == 1 { "" } else { "s" },
                    if *ops == 1 { "" } else { "s" }
                )
            })
            .collect();
        vec![format!(
            "kube: the cluster reported failures it retried by itself: {}; not counted as \
             failed operations (each record lists them under `retries`)",
            each.join(", ")
        )]
    }

    /// The namespace of the run (after `prepare`).
    pub fn namespace(&self) -> Option<&str> {
        self.inner.ns.get().map(String::as_str)
    }

    /// The names of the PersistentVolumes and VolumeAttachments the provider's watches hold
    /// now (after `prepare`; empty before): the run's, never the rest of the cluster's.
    pub fn cached_volume_objects(&self) -> (Vec<String>, Vec<String>) {
        let Some(w) = self.inner.watches.get() else {
            return (Vec::new(), Vec::new());
        };
        let names = |v: Vec<Option<String>>| {
            let mut v: Vec<String> = v.into_iter().flatten().collect();
            v.sort();
            v
        };
        (
            names(
                w.pv.store()
                    .state()
                    .iter()
                    .map(|o| o.metadata.name.clone())
                    .collect(),
            ),
            names(
                w.va.store()
                    .state()
                    .iter()
                    .map(|o| o.metadata.name.clone())
                    .collect(),
            ),
        )
    }

    /// The cluster as captured by `prepare` (server version, nodes, classes, drivers).
    pub fn environment(&self) -> serde_json::Value {
        self.inner.environment()
    }

    /// Checks before the clock starts that every StorageClass, VolumeSnapshotClass, node and
    /// namespace `trace` will use (after the header's defaults and this configuration)
    /// exists and is usable; the error names each missing one, where the trace uses it and
    /// what the cluster has. Also plans the pull check `prepare` runs once the run's
    /// namespace exists (unless `pull_check` is off; `pullcheck.rs`).
    pub fn preflight(&self, trace: &std::path::Path) -> Result<TraceUses, KubeError> {
        let uses = TraceUses::scan(&self.inner.config, trace).map_err(KubeError::Trace)?;
        self.rt
            .block_on(self.inner.preflight(&uses))
            .map_err(KubeError::Preflight)?;
        if self.inner.config.pull_check
            && let Some(c) = PullCheck::plan(&self.inner.config, &uses)
        {
            let _ = self.inner.pull_check.set(c);
        }
        Ok(uses)
    }

    /// The operations in flight and what each waits for (for a deadline's report).
    pub fn pending(&self) -> Vec<Pending> {
        self.inner
            .inflight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }
}

impl Kube {
    /// Records what operation `ctx` waits for now (named in its timeout error and in
    /// [`KubeProvider::pending`]).
    pub(crate) fn waiting(&self, ctx: &OpCtx, what: impl Into<String>) {
        if let Some(p) = self
            .inflight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(&ctx.event_id)
        {
            p.waiting_for = what.into();
        }
    }

    fn waiting_for(&self, id: u64) -> Option<String> {
        self.inflight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .map(|p| p.waiting_for.clone())
    }

    /// Adds an operation's retried failures (`OpCtx::retries`) to the run's.
    fn count_retries(&self, ctx: &OpCtx) {
        let retries = ctx.retries();
        if retries.is_empty() {
            return;
        }
        let mut r = self.retried.lock().unwrap_or_else(PoisonError::into_inner);
        for x in retries {
            let e = r.entry(x.reason).or_default();
            e.0 += 1;
            e.1 += u64::from(x.count);
        }
    }

    pub(crate) fn environment(&self) -> serde_json::Value {
        self.environment.get().cloned().unwrap_or_default()
    }

    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn run(&self) -> Result<&RunInfo, ProviderError> {
        self.run
            .get()
            .ok_or_else(|| ProviderError::new("not_prepared", "prepare was not called"))
    }

    pub(crate) fn ns(&self) -> Result<&str, ProviderError> {
        self.ns
            .get()
            .map(String::as_str)
            .ok_or_else(|| ProviderError::new("not_prepared", "prepare was not called"))
    }

    pub(crate) fn watches(&self) -> Result<&Watches, ProviderError> {
        self.watches
            .get()
            .ok_or_else(|| ProviderError::new("not_prepared", "prepare was not called"))
    }

    /// Runs one API request through the client-side limiter and counts 429s.
    pub(crate) async fn call<T>(
        &self,
        f: impl Future<Output = kube::Result<T>>,
    ) -> Result<T, ProviderError> {
        self.limiter.acquire().await;
        f.await.map_err(|e| self.api_err(&e))
    }

    pub(crate) fn api_err(&self, e: &kube::Error) -> ProviderError {
        api_err(&self.limiter, e)
    }

    async fn prepare_async(&self, run: &RunInfo) -> Result<Vec<String>, ProviderError> {
        let mut notices = Vec::new();
        let ns = match &self.config.namespace {
            Some(ns) => ns.clone(),
            None => {
                let ns = format!("cnsreplay-{}", run.run_id);
                let ledger = replay::Ledger::open(&run.run_dir).map_err(io_err)?;
                let id = ns.clone();
                ledger
                    .intend("namespace", &id, serde_json::Value::Null)
                    .map_err(io_err)?;
                let obj = Namespace {
                    metadata: ObjectMeta {
                        name: Some(ns.clone()),
                        labels: Some([(objects::RUN_LABEL.to_owned(), run.run_id.clone())].into()),
                        ..ObjectMeta::default()
                    },
                    ..Namespace::default()
                };
                let created = self
                    .call(
                        Api::<Namespace>::all(self.client.clone())
                            .create(&PostParams::default(), &obj),
                    )
                    .await?;
                ledger
                    .intend("namespace", &id, uid_detail(&created.metadata))
                    .map_err(io_err)?;
                ns
            }
        };
        let _ = self.ns.set(ns.clone());
        let env = env::capture(self).await;
        if env.get("volume_snapshot_classes").is_none() {
            notices.push(
                "kube: the VolumeSnapshot API is not installed; snapshot operations will fail"
                    .to_owned(),
            );
        }
        let _ = self.environment.set(env);
        notices.extend(self.ensure_attributes_classes(run).await?);
        let labels = run.owner_label();
        let cfg = watcher::Config::default().labels(&labels);
        let err = |e: String| ProviderError::new("watch_failed", e);
        let l = self.limiter.clone();
        let c = self.client.clone();
        let pvc = Watch::start(
            Api::namespaced(c.clone(), &ns),
            cfg.clone(),
            name_key,
            keep_all,
            l.clone(),
        );
        // A pod's spec is read only for its node: the rest (containers, volumes, the
        // admission's tolerations and token projection) is most of a pod's size, and the
        // watch holds every pod of the run.
        let pod = Watch::start(
            Api::namespaced(c.clone(), &ns),
            cfg.clone(),
            name_key,
            ops::pod_node_only,
            l.clone(),
        );
        // PersistentVolumes and VolumeAttachments are made by controllers and carry no run
        // label: these two watches are cluster-wide and cache only the run's objects
        // (foreign.rs). The VolumeAttachment watch starts once the PVs are listed, so that
        // it knows which PVs are foreign. Their lists come in pages of 100, not kube's 500:
        // each page is decoded whole before the filter drops the foreign objects, and with
        // 10 000 foreign PVs and VolumeAttachments 500 cost ~6–13 MB more peak RSS
        // (docs/performance-history.md, watch memory); 10 000 objects take 100 list requests, not 20.
        let foreign = foreign::Foreign::default();
        let pv_va = async {
            let pv = Watch::start_filtered(
                Api::all(c.clone()),
                watcher::Config::default().page_size(100),
                name_key,
                keep_all,
                Some(foreign::keep_pv(ns.clone(), foreign.clone())),
                l.clone(),
            )
            .await?;
            let va = Watch::start_filtered(
                Api::all(c.clone()),
                watcher::Config::default().page_size(100),
                va_key,
                keep_all,
                Some(foreign::keep_va(foreign)),
                l.clone(),
            )
            .await?;
            Ok::<_, String>((pv, va))
        };
        let (pvc, pod, (pv, va)) = futures::try_join!(pvc, pod, pv_va).map_err(err)?;
        let events = match Watch::start(
            Api::namespaced(c.clone(), &ns),
            watcher::Config::default().fields("type=Warning"),
            event_key,
            keep_all,
            l.clone(),
        )
        .await
        {
            Ok(w) => Some(w),
            Err(e) => {
                notices.push(format!(
                    "kube: no Event watch ({e}); failures (ProvisioningFailed, FailedMount, …) \
                     will only show as timeouts"
                ));
                None
            }
        };
        // An optional API the cluster does not serve is known from discovery in one request;
        // starting its watch would instead retry a 404 until the list timeout.
        let snap_served = serves(&c, "snapshot.storage.k8s.io/v1", "volumesnapshots").await;
        let snap = match snap_served {
            Served::No(why) => {
                notices.push(format!(
                    "kube: no VolumeSnapshot watch ({why}); snapshots will fail"
                ));
                None
            }
            Served::Yes | Served::Unknown => match Watch::start(
                Api::namespaced(c.clone(), &ns),
                cfg.clone(),
                name_key,
                keep_all,
                l.clone(),
            )
            .await
            {
                Ok(w) => Some(w),
                Err(e) => {
                    notices.push(format!(
                        "kube: no VolumeSnapshot watch ({e}); snapshots will fail"
                    ));
                    None
                }
            },
        };
        // A cluster without the group snapshot API is common: no notice here, a group
        // snapshot then fails saying why.
        let (groups, groups_missing) = match serves(
            &c,
            "groupsnapshot.storage.k8s.io/v1",
            "volumegroupsnapshots",
        )
        .await
        {
            Served::No(why) => (None, Some(why)),
            Served::Yes | Served::Unknown => {
                match Watch::start(Api::namespaced(c, &ns), cfg, name_key, keep_all, l).await {
                    Ok(w) => (Some(w), None),
                    Err(e) => (None, Some(e)),
                }
            }
        };
        let _ = self.watches.set(Watches {
            pvc,
            pv,
            pod,
            va,
            snap,
            groups,
            groups_missing,
            events,
        });
        if let Some(check) = self.pull_check.get() {
            let t0 = std::time::Instant::now();
            if let Err(e) = self.pull_check(run, check).await {
                // The run ends before its clock: nothing it made stays (its namespace).
                if let Ok(l) = replay::Ledger::open(&run.run_dir)
                    && let Ok(live) = l.live()
                {
                    cleanup::remove_all(self, &run.run_id, Some(&l), &live, true).await;
                }
                return Err(e);
            }
            tracing::info!(
                pods = check.targets.len(),
                seconds = t0.elapsed().as_secs_f64(),
                "pre-flight pull check passed"
            );
        }
        Ok(notices)
    }
}

/// Whether the API server serves a resource, from discovery.
#[derive(Debug)]
pub(crate) enum Served {
    Yes,
    /// Not served, and why (the group version is unknown, or lacks the resource).
    No(String),
    /// Discovery failed for another reason: try the resource and let its own error tell.
    Unknown,
}

/// Asks discovery whether `group_version` (e.g. `snapshot.storage.k8s.io/v1`) serves
/// `plural`. One GET; a 404 means the group version is not installed (no CRD).
pub(crate) async fn serves(client: &Client, group_version: &str, plural: &str) -> Served {
    match client.list_api_group_resources(group_version).await {
        Ok(list) if list.resources.iter().any(|r| r.name == plural) => Served::Yes,
        Ok(_) => Served::No(format!("{group_version} is served without {plural}")),
        Err(kube::Error::Api(st)) if st.code == 404 => {
            Served::No(format!("the API server does not serve {group_version}"))
        }
        Err(e) => {
            tracing::debug!("discovery of {group_version}: {e}; trying its watch");
            Served::Unknown
        }
    }
}

fn name_key<K: kube::Resource>(o: &K) -> Option<String> {
    o.meta().name.clone()
}

fn event_key(o: &CoreEvent) -> Option<String> {
    o.involved_object.name.clone()
}

fn va_key(o: &VolumeAttachment) -> Option<String> {
    o.spec.source.persistent_volume_name.clone()
}

pub(crate) fn uid_detail(m: &ObjectMeta) -> serde_json::Value {
    serde_json::json!({ "uid": m.uid })
}

/// Runs blocking work (the ledger's fsync, file writes) without stalling the other tasks of
/// this worker thread: they would otherwise stamp their phases late.
pub(crate) fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

#[allow(clippy::needless_pass_by_value)] // used as `.map_err(io_err)`
pub(crate) fn io_err(e: std::io::Error) -> ProviderError {
    ProviderError::new("io", e.to_string())
}

pub(crate) fn api_err(limiter: &Limiter, e: &kube::Error) -> ProviderError {
    match e {
        kube::Error::Api(s) if s.code == 429 => {
            limiter
                .api_429
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            ProviderError::new("throttled", s.message.clone())
        }
        kube::Error::Api(s) if s.code == 404 => ProviderError::new("not_found", s.message.clone()),
        kube::Error::Api(s) if s.code == 409 => {
            ProviderError::new("already_exists", s.message.clone())
        }
        kube::Error::Api(s) if s.code == 403 => ProviderError::new("forbidden", s.message.clone()),
        kube::Error::Api(s) => {
            ProviderError::new("api_error", format!("{}: {}", s.code, s.message))
        }
        other => ProviderError::new("client_error", other.to_string()),
    }
}

impl Provider for KubeProvider {
    fn name(&self) -> &'static str {
        "kube"
    }

    fn config(&self) -> serde_json::Value {
        serde_json::to_value(&self.inner.config).unwrap_or_default()
    }

    fn prepare(&self, run: &RunInfo) -> Result<Vec<String>, ProviderError> {
        let _ = self.inner.run.set(run.clone());
        self.rt.block_on(self.inner.prepare_async(run))
    }

    fn environment(&self) -> serde_json::Value {
        KubeProvider::environment(self)
    }

    fn before_clock(&self) {
        if self.inner.config.csi_metrics.is_empty() && !self.inner.config.apiserver_metrics {
            return;
        }
        let s = self.inner.scrape(&self.rt);
        *self
            .inner
            .baseline
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(s);
    }

    fn cluster_timing(&self) -> Option<replay::cluster::ClusterTiming> {
        let before = self
            .inner
            .baseline
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        let after = self.inner.scrape(&self.rt);
        Some(cluster_metrics::timing(&before, &after))
    }

    /// The client rate limiter's waits: they go into the run's verdict (any throttled
    /// request makes the run `engine-bound` by default).
    fn client_throttling(&self) -> Vec<ClientThrottling> {
        let s = self.client_stats();
        let c = &self.inner.config;
        vec![ClientThrottling {
            limiter: format!(
                "kube client rate limiter (--kube-qps {}, --kube-burst {})",
                c.qps, c.burst
            ),
            requests: s.requests,
            throttled: s.throttled_requests,
            waited_ns: (s.throttled_seconds * 1e9) as u64,
            max_wait_ns: (s.max_wait_seconds * 1e9) as u64,
        }]
    }

    fn open_io_stream(
        &self,
        volume: &trace_format::Name,
    ) -> Result<Option<Box<dyn replay::IoStream>>, ProviderError> {
        self.rt
            .block_on(stream::open(self.inner.clone(), volume.clone()))
    }

    /// The volumes' pods start together; a stop deletes the ones still starting.
    fn open_io_streams(
        &self,
        volumes: &[trace_format::Name],
        stop: &std::sync::atomic::AtomicBool,
    ) -> Vec<Result<Option<Box<dyn replay::IoStream>>, ProviderError>> {
        self.rt
            .block_on(stream::open_all(self.inner.clone(), volumes, stop))
    }

    fn finish_notices(&self) -> Vec<String> {
        let mut notices = self.throttle_notices();
        notices.extend(self.retry_notices());
        notices.extend(self.inner.state().notices.clone());
        for n in &notices {
            tracing::warn!("{n}");
        }
        notices
    }

    async fn execute(&self, ev: Arc<Event>, ctx: Arc<OpCtx>) -> Result<(), ProviderError> {
        // The client's connections are made where its futures are polled, and the engine's
        // runtime has no I/O driver: run the operation on the provider's runtime. Dropping
        // the returned future (timeout, cancel) aborts it. The task is spawned by a plain
        // function so that this future holds only its handle (see `spawn_op`).
        let _inflight = Inflight::new(&self.inner, ctx.event_id, ev.op.op_type());
        let mut task = self.spawn_op(ev, ctx);
        match (&mut task.0).await {
            Ok(r) => r,
            Err(e) => Err(ProviderError::new("panic", e.to_string())),
        }
    }

    fn cleanup(&self, run: &RunInfo, leftovers: &[LedgerEntry]) -> CleanupReport {
        self.rt
            .block_on(cleanup::cleanup(&self.inner, run, leftovers))
    }
}

impl KubeProvider {
    /// Cleans up run `run_id` without its ledger: finds its objects on the cluster by its run
    /// label (in the configured namespace when there is one, else in all, with the run-owned
    /// namespaces; and the nodes it cordoned by their annotation) and removes them as a ledger
    /// cleanup would, each by the UID it was found with. Returns what was found and the report.
    pub fn cleanup_run_id(
        &self,
        run_id: &str,
    ) -> Result<(Vec<LedgerEntry>, CleanupReport), KubeError> {
        self.rt.block_on(async {
            let ns = self.inner.config.namespace.as_deref();
            let found = cleanup::find_run_objects(&self.inner, run_id, ns)
                .await
                .map_err(KubeError::Cleanup)?;
            let report = cleanup::remove_all(&self.inner, run_id, None, &found, false).await;
            Ok((found, report))
        })
    }

    /// Spawns one operation on the provider's runtime under its timeout.
    ///
    /// Memory per operation in flight is what a run waiting on a slow cluster holds tens of
    /// thousands of. `ops::execute` boxes each op's own future, so the task holds a few
    /// hundred bytes and its op's box; and this is a plain function because a future built
    /// in an `async` body and moved into another stays in that body's state as well:
    /// `execute`'s state held the spawned future a second time (19 KB an operation before,
    /// for any op).
    fn spawn_op(&self, ev: Arc<Event>, ctx: Arc<OpCtx>) -> AbortOnDrop<Result<(), ProviderError>> {
        let this = self.inner.clone();
        let id = ctx.event_id;
        let timeout = this.config.timeout(&ev);
        let op = ev.op.op_type();
        let call = ops::execute(this.clone(), ev, ctx.clone());
        AbortOnDrop(self.rt.spawn(stamp::scope(async move {
            let r = tokio::time::timeout(timeout, call).await;
            this.count_retries(&ctx);
            match r {
                Ok(r) => r,
                Err(_) => Err(ProviderError::new(
                    "timeout",
                    format!(
                        "{op} did not complete within {timeout:?} (--timeout {op}=DUR); \
                         waiting for {}",
                        this.waiting_for(id)
                            .unwrap_or_else(|| "nothing recorded".into())
                    ),
                )),
            }
        })))
    }
}

/// An operation's entry in `Kube::inflight`, removed when it ends (or is dropped).
struct Inflight {
    kube: Arc<Kube>,
    id: u64,
}

impl Inflight {
    fn new(kube: &Arc<Kube>, id: u64, op: OpType) -> Self {
        kube.inflight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                id,
                Pending {
                    event_id: id,
                    op,
                    waiting_for: "its first API call".into(),
                },
            );
        Self {
            kube: kube.clone(),
            id,
        }
    }
}

impl Drop for Inflight {
    fn drop(&mut self) {
        self.kube
            .inflight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
    }
}

/// Aborts its task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Deletes `name` with a UID precondition (so an object of the same name that is not ours is
/// never touched) and a propagation policy of Background.
pub(crate) fn delete_params(uid: Option<String>, grace: Option<u32>) -> DeleteParams {
    DeleteParams {
        preconditions: uid.map(|uid| kube::api::Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        grace_period_seconds: grace,
        ..DeleteParams::background()
    }
}
