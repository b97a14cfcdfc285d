//! The provider's shared context: [`Kube`] (configuration, client, limiter, watches, the run's
//! [`State`]) as data, with the accessors every layer above uses (`ns`, `run`, `watches`,
//! `state`, `call`, `create`). The types `State` stores live here, not in the operations that
//! fill them ([`Taken`], [`OrderedRun`], [`GroupState`], [`Written`], [`LocalIo`]): the ground
//! floor must not import the operations.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Instant;

use k8s_openapi::api::core::v1::{
    Event as CoreEvent, PersistentVolume, PersistentVolumeClaim, Pod,
};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, Resource};
use replay::{OpCtx, ProviderError, RunInfo};
use serde::Serialize;
use trace_format::{Name, OpType};

use crate::config::KubeConfig;
use crate::kube::limiter::Limiter;
use crate::kube::objects::{VolumeSnapshot, k8s_name};
use crate::kube::request::api_err;
use crate::kube::stamp::phase_at;
use crate::kube::watch::Watch;

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
    /// The cluster's metrics when the clock started (see `kube::metrics`).
    pub(crate) baseline: Mutex<Option<crate::kube::metrics::Scrape>>,
    /// Operations in flight: event id → what it is waiting for now.
    pub(crate) inflight: Mutex<BTreeMap<u64, Pending>>,
    /// Woken whenever `State::claim_node` changes.
    pub(crate) claim_node_changed: tokio::sync::Notify,
    /// Failures the cluster retried during the run's operations, per reason: operations, times
    /// reported (`KubeProvider::retry_notices`).
    pub(crate) retried: Mutex<BTreeMap<String, (u64, u64)>>,
    /// True once the run was asked to stop (`Kube::stopped`).
    pub(crate) stop: OnceLock<tokio::sync::watch::Receiver<bool>>,
    /// The pull check `prepare` runs, set by `KubeProvider::preflight` (`preflight/pull.rs`).
    pub(crate) pull_check: OnceLock<PullCheck>,
    /// The CSINode change log, started by the first attach that waits for room (`kube/room.rs`).
    pub(crate) csinodes: tokio::sync::OnceCell<Option<Arc<crate::kube::room::CsiNodeLog>>>,
    /// One turn per workload for the ops that stop or move its pod (`ops/workload.rs`).
    pub(crate) workload_turns: replay::turns::Turns<Name>,
}

/// The shared watches, one per kind.
#[derive(Debug)]
pub(crate) struct Watches {
    pub(crate) pvc: Arc<Watch<PersistentVolumeClaim>>,
    pub(crate) pv: Arc<Watch<PersistentVolume>>,
    pub(crate) pod: Arc<Watch<Pod>>,
    pub(crate) va: Arc<Watch<VolumeAttachment>>,
    pub(crate) snap: Option<Arc<Watch<VolumeSnapshot>>>,
    pub(crate) groups: Option<Arc<Watch<crate::kube::objects::VolumeGroupSnapshot>>>,
    /// Why there is no VolumeGroupSnapshot watch.
    pub(crate) groups_missing: Option<String>,
    /// Warning Events in the run's namespace, keyed by the involved object's name (None when
    /// the credentials may not watch them: failures then surface only as timeouts).
    pub(crate) events: Option<Arc<Watch<CoreEvent>>>,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) volumes: HashMap<Name, VolState>,
    pub(crate) workloads: HashMap<Name, WlState>,
    /// StorageClass name → volumeBindingMode is WaitForFirstConsumer.
    pub(crate) wffc_classes: HashMap<String, bool>,
    /// (PVC, node) → the UID of the last of the run's pods scheduled there with that claim,
    /// and when it was seen scheduled: a detach whose volume a newer pod holds on the same
    /// node sees no detach (the attach-detach controller keeps the VolumeAttachment).
    pub(crate) claim_node: HashMap<(String, String), (String, Instant)>,
    /// The run's group snapshots by trace name.
    pub(crate) groups: HashMap<Name, GroupState>,
    /// How each snapshot of the run was taken, by trace name (a restore's `taken`).
    pub(crate) snap_taken: HashMap<Name, Taken>,
    /// How the snapshot each restored volume came from was taken, by trace volume.
    pub(crate) taken: HashMap<Name, Taken>,
    /// Ordered-write logs by their trace name.
    pub(crate) ordered: HashMap<Name, OrderedRun>,
    /// One line each for the summary's notices: the cut checks, a missing CSINode watch.
    pub(crate) notices: Vec<String>,
    /// The written sets of verify-mode writers, in the order they started (`ops/cbt.rs`).
    pub(crate) written: Vec<Written>,
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
    pub(crate) volumes: Vec<Name>,
    pub(crate) node: Option<String>,
    pub(crate) tenant: Option<String>,
    /// I/O pods of `io_phase` events running in it.
    pub(crate) io_pods: Vec<String>,
    /// Stop flags of `io_phase` units running in this process (`io_exec: local`).
    pub(crate) io_local: Vec<LocalIo>,
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

/// How the snapshot a volume was restored from was taken, as the provider saw it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Taken {
    /// `snapshot NAME` or `group NAME`.
    pub(crate) by: String,
    /// The operation's call, ns since the run origin.
    pub(crate) requested_ns: u64,
    /// Ready to restore (the watch event that showed it), ns since the run origin.
    pub(crate) ready_ns: u64,
    /// The VolumeSnapshot's `status.creationTime` (RFC 3339, whole seconds), when given.
    pub(crate) created: Option<String>,
}

/// A writing phase's log, as a check finds it.
#[derive(Debug, Clone)]
pub(crate) struct OrderedRun {
    /// The volumes written, in order.
    pub(crate) volumes: Vec<Name>,
    /// Becomes `Some` when the writer's pod has ended: its rebuilt log, or why there is none.
    pub(crate) done: tokio::sync::watch::Receiver<Option<Result<PathBuf, String>>>,
}

/// A group snapshot of the run.
#[derive(Debug, Clone)]
pub(crate) struct GroupState {
    /// The VolumeGroupSnapshot's name and UID.
    pub(crate) name: String,
    pub(crate) uid: String,
    /// Trace volume → (member VolumeSnapshot, its restore size).
    pub(crate) members: HashMap<Name, (String, Option<u64>)>,
    /// Trace volume → how its member was taken.
    pub(crate) taken: HashMap<Name, Taken>,
}

/// A verify-mode writer's written set, as the kube provider learns it.
#[derive(Debug, Clone)]
pub(crate) struct Written {
    pub(crate) event: u64,
    pub(crate) volume: Name,
    /// `io/<event>.written` once the pod's log gave it back.
    pub(crate) record: Option<PathBuf>,
    /// Why its offsets cannot be checked against the service's, or why it is not complete.
    pub(crate) unchecked: Option<String>,
}

/// An `io_phase` unit running in this process.
#[derive(Debug, Clone)]
pub(crate) struct LocalIo {
    /// Stops it (detach, abort).
    pub(crate) stop: iogen::Stop,
    /// Closed when the unit ended (its device is closed).
    pub(crate) done: tokio::sync::watch::Receiver<()>,
}

impl LocalIo {
    /// Waits until the unit ended.
    pub(crate) async fn ended(&self) {
        let mut rx = self.done.clone();
        while rx.changed().await.is_ok() {}
    }
}

/// What the pull check starts: the images (container name, image) and the nodes (None: the
/// scheduler's pick within the run's node selection).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PullCheck {
    /// Container name → image.
    pub images: BTreeMap<String, String>,
    /// One pod per entry: a node the trace pins pods to, or None.
    pub targets: Vec<Option<String>>,
}

impl Kube {
    /// The member VolumeSnapshot (and its restore size) group `group` took of `volume`.
    pub(crate) fn group_member(
        &self,
        m: &trace_format::GroupMember,
    ) -> Result<(String, Option<u64>), ProviderError> {
        let st = self.state();
        let g = st.groups.get(&m.group).ok_or_else(|| {
            ProviderError::new(
                "not_found",
                format!("group snapshot {:?} was not taken", m.group),
            )
        })?;
        g.members.get(&m.volume).cloned().ok_or_else(|| {
            ProviderError::new(
                "not_found",
                format!(
                    "group snapshot {:?} has no member for volume {:?}",
                    m.group, m.volume
                ),
            )
        })
    }

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

    pub(crate) fn waiting_for(&self, id: u64) -> Option<String> {
        self.inflight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .map(|p| p.waiting_for.clone())
    }

    /// Adds an operation's retried failures (`OpCtx::retries`) to the run's.
    pub(crate) fn count_retries(&self, ctx: &OpCtx) {
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

    /// The attached workload `name` as the state holds it now (`not_found` when it is not).
    pub(crate) fn attached(&self, name: &Name) -> Result<WlState, ProviderError> {
        self.state().workloads.get(name).cloned().ok_or_else(|| {
            ProviderError::new("not_found", format!("workload {name:?} is not attached"))
        })
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

    pub(crate) fn header_defaults(&self) -> Result<&trace_format::Defaults, ProviderError> {
        Ok(&self.run()?.header.defaults)
    }

    pub(crate) fn volume(&self, name: &Name) -> VolState {
        self.state()
            .volumes
            .get(name)
            .cloned()
            .unwrap_or_else(|| VolState {
                pvc: k8s_name(name),
                block: false,
                wffc: false,
            })
    }

    /// Writes the object to the ledger, creates it, records its UID. An object that already
    /// exists is not ours: its ledger entry is released and the operation fails.
    pub(crate) async fn create<K>(
        &self,
        ctx: &OpCtx,
        kind: &str,
        obj: &K,
        watch: Option<&Watch<K>>,
    ) -> Result<K, ProviderError>
    where
        K: Resource<DynamicType = ()>
            + Clone
            + Serialize
            + serde::de::DeserializeOwned
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
        K: Resource<Scope = kube::core::NamespaceResourceScope>,
    {
        let ns = self.ns()?;
        let id = format!("{ns}/{}", obj.meta().name.as_deref().unwrap_or_default());
        blocking(|| ctx.ledger().intend(kind, &id, serde_json::Value::Null)).map_err(io_err)?;
        let api: Api<K> = Api::namespaced(self.client.clone(), ns);
        match self.call(api.create(&PostParams::default(), obj)).await {
            Ok(o) => {
                // The phase first: the ledger's fsync must not count as API latency. The
                // object's ADDED watch event may have been seen before this task got to run
                // with the response: the earlier of the two.
                let now = Instant::now();
                let seen = watch
                    .zip(o.meta().name.as_deref().zip(o.meta().uid.as_deref()))
                    .and_then(|(w, (n, u))| w.first_seen(n, u));
                phase_at(ctx, "created", seen.map_or(now, |s| s.min(now)));
                blocking(|| ctx.ledger().intend(kind, &id, uid_detail(o.meta())))
                    .map_err(io_err)?;
                Ok(o)
            }
            Err(e) if e.class == "already_exists" => {
                let _ = blocking(|| ctx.ledger().release(kind, &id));
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Whether a StorageClass (None: the cluster default) binds on first consumer.
    pub(crate) fn class_is_wffc(&self, class: Option<&str>) -> bool {
        if let Some(c) = class
            && let Some(&w) = self.state().wffc_classes.get(c)
        {
            return w;
        }
        let env = self.environment();
        let found = env["storage_classes"].as_array().and_then(|a| {
            a.iter().find(|s| match class {
                Some(c) => s["name"] == c,
                None => s["default"] == true,
            })
        });
        let w = found.is_some_and(|s| s["volume_binding_mode"] == "WaitForFirstConsumer");
        if let Some(c) = class {
            self.state().wffc_classes.insert(c.to_owned(), w);
        }
        w
    }

    /// Whether a StorageClass (None: the cluster default) has a provisioner that creates
    /// volumes: its `ProvisioningFailed` Events are the provisioner's errors, judged by
    /// `warning_verdict` (`pods::verdict`) (a final one ends the create or the attach that waits
    /// for the claim, a retried one is counted). A static class (`kubernetes.io/no-provisioner`)
    /// only waits for a matching PV; the PV controller's Events about it are not failures.
    pub(crate) fn class_provisions(&self, class: Option<&str>) -> bool {
        let env = self.environment();
        env["storage_classes"]
            .as_array()
            .and_then(|a| {
                a.iter().find(|s| match class {
                    Some(c) => s["name"] == c,
                    None => s["default"] == true,
                })
            })
            .is_none_or(|s| s["provisioner"] != "kubernetes.io/no-provisioner")
    }

    pub(crate) fn csi_attach_required(&self, driver: &str) -> bool {
        let env = self.environment();
        env["csi_drivers"]
            .as_array()
            .and_then(|a| a.iter().find(|d| d["name"] == driver))
            .is_none_or(|d| d["attach_required"] != false)
    }
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
