//! The provider's configuration ([`KubeConfig`], recorded in the run's manifest and rebuilt
//! from it for cleanup), its errors ([`KubeError`]) and the API client it makes.

use std::collections::BTreeMap;
use std::path::PathBuf;

use kube::{Client, Config};
use serde::{Deserialize, Serialize};
use trace_format::{Event, OpType};

use k8s_openapi::api::core::v1::Toleration;

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
    /// counted on its record and quoted by its timeout (see `pods/verdict.rs`).
    pub failure_grace_ns: u64,
    /// How every pod runs (security context, placement, resources, pull secrets).
    pub pod: PodOptions,
    /// CSI sidecars' Prometheus endpoints (`http://HOST:PORT/metrics`) scraped when the clock
    /// starts and after the last operation: the run's CSI calls in the summary's `cluster`.
    pub csi_metrics: Vec<String>,
    /// Scrape the API server's `/metrics` the same way (needs `get` on `/metrics`).
    pub apiserver_metrics: bool,
    /// Before the clock starts, start one short-lived pod per target node with the images
    /// the run's pods use and iogen's seccomp profile (`preflight/pull.rs`); false:
    /// `--no-pull-check`.
    pub pull_check: bool,
    /// `NAMESPACE/NAME` of the ServiceAccount whose audience-scoped token changed-block
    /// tracking sends (`--cbt-account`); None: the run's own account when its credentials
    /// are a ServiceAccount, else `cnsreplay/cnsreplay` (`ops/cbt.rs`).
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

impl KubeConfig {
    /// The StorageClass used for a trace class (`None`: the trace names none): a
    /// `storage_class_map` entry for it, else `storage_class`, else the trace's; `None`
    /// means the cluster default.
    pub fn storage_class_for(&self, trace: Option<&str>) -> Option<String> {
        trace
            .and_then(|t| self.storage_class_map.get(t).cloned())
            .or_else(|| self.storage_class.clone())
            .or_else(|| trace.map(str::to_owned))
    }

    /// The VolumeGroupSnapshotClass used for a trace class: `--group-snapshot-class`, else
    /// the trace's class, else none (the cluster's default class).
    pub fn group_snapshot_class_for(&self, trace: Option<&str>) -> Option<String> {
        self.group_snapshot_class
            .clone()
            .or_else(|| trace.map(str::to_owned))
    }

    /// The VolumeSnapshotClass used for a trace class, as [`KubeConfig::storage_class_for`].
    pub fn snapshot_class_for(&self, trace: Option<&str>) -> Option<String> {
        trace
            .and_then(|t| self.snapshot_class_map.get(t).cloned())
            .or_else(|| self.snapshot_class.clone())
            .or_else(|| trace.map(str::to_owned))
    }
}

/// Where `io_phase` I/O runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IoExec {
    /// An iogen pod on the workload's node (a real cluster).
    #[default]
    Pod,
    /// iogen in this process on the attached device (test cluster with the driver on this
    /// machine; Block volumes only).
    Local,
}

/// How the provider's pods run: identity, placement, resources, pull secrets. Every pod
/// passes the `restricted` Pod Security Standard: non-root (UID/GID 65532, the iogen image's
/// user), no privilege escalation, every capability dropped, seccomp `RuntimeDefault`, only
/// PVC volumes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PodOptions {
    /// `runAsUser`/`runAsGroup` of every container.
    pub run_as_user: i64,
    /// Pod `fsGroup`: the kubelet makes a mounted file-system volume group-owned and
    /// group-writable by it (`fsGroupChangePolicy: OnRootMismatch`: only when its root does
    /// not match already), so a fresh volume is writable without root.
    pub fs_group: i64,
    /// Extra group of pods with raw block volumes: the group owning the block device on the
    /// node (Debian/Ubuntu: `disk`, 6; devices are `root:disk 0660`). fsGroup is a file-system
    /// operation of the kubelet's mounter and is not applied to raw block devices; the device
    /// node inside the container comes from the container runtime with the host device's
    /// owner and mode (unless containerd's `device_ownership_from_security_context` is set,
    /// which makes it the pod's runAsUser/runAsGroup).
    pub block_device_group: i64,
    /// `nodeSelector` of every pod.
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations of every pod.
    pub tolerations: Vec<Toleration>,
    /// Resource requests of every container (`cpu`, `memory`, …).
    pub requests: BTreeMap<String, String>,
    /// Resource limits of every container.
    pub limits: BTreeMap<String, String>,
    /// `imagePullSecrets` of every pod.
    pub image_pull_secrets: Vec<String>,
    /// Seccomp profile of iogen pods (`io_phase`, I/O streams): a `Localhost` profile's path
    /// under the kubelet's seccomp root (e.g. `deploy/seccomp/iogen.json` installed there).
    /// None: `RuntimeDefault`, whose containerd profile refuses io_uring, so iogen falls back
    /// to its thread-pool engine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iogen_seccomp_profile: Option<String>,
}

impl Default for PodOptions {
    fn default() -> Self {
        Self {
            run_as_user: 65532,
            fs_group: 65532,
            block_device_group: 6,
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
            requests: BTreeMap::new(),
            limits: BTreeMap::new(),
            image_pull_secrets: Vec::new(),
            iogen_seccomp_profile: None,
        }
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
