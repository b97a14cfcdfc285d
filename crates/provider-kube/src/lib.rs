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
//!
//! ## Layers
//!
//! Lowest first; a module imports only from its own layer or below (checked by
//! `scripts/check-layers.py`).
//!
//! 1. `config` — the configuration ([`KubeConfig`]), its errors and the API client
//! 2. `kube` — the client level, knowing nothing of a run: watches, the foreign filter, the
//!    limiter, phase stamps, object builders, get/gone, discovery, node marks
//! 3. `context` — the shared `Kube` and its `State` as data, with the types
//!    `State` stores
//! 4. `pods` — one pod's life: failure verdicts, waits, start/stop/guard, logs, one iogen pod
//!    run to its end
//! 5. `ops` — the operations, by family, and their dispatcher
//! 6. `cleanup`, `preflight` — removing a run's objects; the checks before the clock
//! 7. `setup`, `fetch` — `prepare` (namespace, environment, watches, pull check); the fetch
//!    command's pod
//! 8. `provider` — [`KubeProvider`] and its `impl Provider`
//!
//! `kube` sits below `context` (not beside it) because the context holds the watches, the
//! limiter and the CRD types; what needs the run's context (the CSINode log's watch, the
//! WaitForFirstConsumer wait) is in `pods`, and the environment capture and the metric
//! scrapes are in `setup`.

mod cleanup;
mod config;
mod context;
pub mod fetch;
mod kube;
mod ops;
mod pods;
mod preflight;
mod provider;
mod setup;

pub use crate::config::{IoExec, KubeConfig, KubeError, PodOptions, default_timeouts};
pub use crate::context::{Pending, PullCheck};
pub use crate::kube::limiter::{self, ClientStats, Limiter};
pub use crate::kube::objects::{self, VolumeSnapshot, VolumeSnapshotSpec, VolumeSnapshotStatus};

pub use crate::pods::iogen::io_pod;
pub use crate::pods::logs::{pod_backend, split_log};
pub use crate::pods::verdict::{
    PodKind, WarningVerdict, pod_failure, pod_failure_as, pod_started, unschedulable,
    warning_class, warning_verdict,
};

pub use crate::preflight::access::{Grant, Piece, grants};
pub use crate::preflight::capability::{Capability, Need, NeedUses};
pub use crate::preflight::pull::pull_check_pod;
pub use crate::preflight::uses::TraceUses;
pub use crate::provider::KubeProvider;
