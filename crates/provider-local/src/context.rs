//! The provider and the state its operations share: volumes, snapshots, workloads, and what
//! the cut and changed-block checks collect during a run. Types only the state stores live
//! here too ([`OrderedRun`], [`WrittenPhase`]), so no operation module is beneath another.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use local_storage::throttle;
use replay::turns::Turns;
use replay::{OpCtx, ProviderError, RunInfo};
use serde::{Deserialize, Serialize};
use trace_format::Name;

use crate::config::LocalConfig;
use crate::sys;

#[derive(Debug)]
pub(crate) struct Volume {
    pub(crate) image: PathBuf,
    pub(crate) size: u64,
    pub(crate) block: bool,
    /// Loop device and mount point while attached.
    pub(crate) loop_dev: Option<String>,
    pub(crate) mount: Option<PathBuf>,
    pub(crate) users: u32,
    /// The size last asked for and granted (uncapped): a later resize to at most this is
    /// refused, as Kubernetes refuses one to at most the claim's capacity.
    pub(crate) requested: u64,
    /// I/O limits of its attributes class (`modify_volume`), in force on its loop device.
    pub(crate) limits: throttle::Limits,
    /// Its blkio cgroup, which the I/O threads of the volume join, when the run can modify
    /// volumes (the trace declares attributes classes and this host has cgroup v1 blkio).
    pub(crate) cgroup: Option<PathBuf>,
    /// The snapshot it was restored from, if any (the cut check reports how it was taken).
    pub(crate) source: Option<Arc<Snap>>,
}

#[derive(Debug)]
pub(crate) struct Snap {
    pub(crate) image: PathBuf,
    pub(crate) size: u64,
    pub(crate) block: bool,
    pub(crate) taken: Taken,
    /// The volume it was taken of: its name then and its image (which tells a volume from a
    /// later one of the same name).
    pub(crate) volume: Name,
    pub(crate) of: PathBuf,
}

/// When a snapshot was taken, ns since the run origin (the clock of the run's records).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Taken {
    /// What took it: `snapshot NAME` or `group_snapshot NAME`.
    pub(crate) by: String,
    /// The operation began.
    pub(crate) requested_ns: u64,
    /// This member's own point in time: its freeze returned (unmounted: its copy began).
    pub(crate) created_ns: u64,
    /// The cut: every member of the operation frozen (a single snapshot: its own freeze).
    pub(crate) cut_ns: u64,
    /// Every member copied and thawed: ready to restore.
    pub(crate) ready_ns: u64,
}

impl From<&Taken> for replay::files::SnapshotTaken {
    /// As a cut check's member records it: every instant on the provider's own clock.
    fn from(t: &Taken) -> Self {
        Self {
            by: t.by.clone(),
            requested_ns: t.requested_ns,
            ready_ns: t.ready_ns,
            created_ns: Some(t.created_ns),
            cut_ns: Some(t.cut_ns),
            api_creation_time: None,
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Workload {
    pub(crate) volumes: Vec<Name>,
    pub(crate) node: Option<Name>,
    pub(crate) io: Vec<iogen::Stop>,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) volumes: HashMap<Name, Arc<Mutex<Volume>>>,
    pub(crate) snapshots: HashMap<Name, Arc<Snap>>,
    /// Group snapshots: member volume → its snapshot.
    pub(crate) groups: HashMap<Name, HashMap<Name, Arc<Snap>>>,
    /// Ordered-write logs by name: where they are and whether their writer has ended.
    pub(crate) ordered: HashMap<Name, OrderedRun>,
    /// One line per cut check, for the summary's notices.
    pub(crate) cut_notices: Vec<String>,
    /// Phases that recorded their written set, for the changed-block checks.
    pub(crate) written: Vec<WrittenPhase>,
    /// One line per changed-block listing, for the summary's notices.
    pub(crate) cbt_notices: Vec<String>,
    pub(crate) workloads: HashMap<Name, Workload>,
    pub(crate) cordoned: Vec<Name>,
}

/// A writing phase's log, as a check finds it.
#[derive(Debug, Clone)]
pub(crate) struct OrderedRun {
    /// The log file.
    pub(crate) log: PathBuf,
    /// The volumes written, in order.
    pub(crate) volumes: Vec<Name>,
    /// Becomes true when the writer has ended (its log is complete).
    pub(crate) done: tokio::sync::watch::Receiver<bool>,
}

/// A phase that records its written set.
#[derive(Debug, Clone)]
pub(crate) struct WrittenPhase {
    pub(crate) event: u64,
    /// The image of the volume it writes.
    pub(crate) volume: PathBuf,
    pub(crate) record: PathBuf,
    /// Why its offsets cannot be checked against an image's, if they cannot.
    pub(crate) unchecked: Option<&'static str>,
    pub(crate) done: bool,
}

/// The local provider.
#[derive(Debug)]
pub struct LocalProvider {
    pub(crate) config: LocalConfig,
    pub(crate) run: OnceLock<RunInfo>,
    pub(crate) loop_mode: OnceLock<bool>,
    pub(crate) state: Mutex<State>,
    pub(crate) seq: AtomicU64,
    /// A turn per workload, held by detach, abort, reschedule and a drain's move of it
    /// (`replay::turns`: a detach must not interleave with a move of its workload).
    pub(crate) workload_turns: Turns<Name>,
}

impl LocalProvider {
    /// A provider with this configuration.
    pub fn new(config: LocalConfig) -> Self {
        Self {
            config,
            run: OnceLock::new(),
            loop_mode: OnceLock::new(),
            state: Mutex::new(State::default()),
            seq: AtomicU64::new(0),
            workload_turns: Turns::default(),
        }
    }

    /// Rebuilds the provider from the configuration a manifest recorded.
    pub fn from_config(v: &serde_json::Value) -> Result<Self, serde_json::Error> {
        Ok(Self::new(serde_json::from_value(v.clone())?))
    }

    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn run(&self) -> Result<&RunInfo, ProviderError> {
        self.run
            .get()
            .ok_or_else(|| ProviderError::new("not_prepared", "prepare was not called"))
    }

    pub(crate) fn objects(&self) -> Result<PathBuf, ProviderError> {
        Ok(self.run()?.run_dir.join("objects"))
    }

    pub(crate) fn volume(&self, name: &Name) -> Result<Arc<Mutex<Volume>>, ProviderError> {
        self.state()
            .volumes
            .get(name)
            .cloned()
            .ok_or_else(|| missing("volume", name))
    }

    pub(crate) fn loop_mode(&self) -> bool {
        self.loop_mode.get().copied().unwrap_or(false)
    }

    /// A new volume's blkio cgroup (`BLKIO/cnsreplay/RUN_ID/vol-N`, in the ledger before it
    /// exists), when the run can modify volumes: the trace declares attributes classes, volumes
    /// are loop devices and the host has a cgroup v1 blkio hierarchy. `None` otherwise.
    pub(crate) fn volume_cgroup(&self, ctx: &OpCtx) -> Result<Option<PathBuf>, ProviderError> {
        let run = self.run()?;
        if run.header.attributes_classes.is_empty() || !self.loop_mode() {
            return Ok(None);
        }
        let Some(root) = throttle::blkio_root() else {
            return Ok(None);
        };
        let n = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cg = root
            .join("cnsreplay")
            .join(&run.run_id)
            .join(format!("vol-{n}"));
        ctx.ledger()
            .intend("cgroup", sys::path_str(&cg)?, serde_json::Value::Null)
            .map_err(sys::io_err)?;
        throttle::create(&cg).map_err(sys::io_err)?;
        Ok(Some(cg))
    }
}

/// Runs blocking work off the async workers.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ProviderError> + Send + 'static,
) -> Result<T, ProviderError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ProviderError::new("panic", e.to_string()))?
}

/// Locks a volume (a poisoned lock still holds the volume's last state).
pub(crate) fn lock(v: &Mutex<Volume>) -> std::sync::MutexGuard<'_, Volume> {
    v.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A `not_found` error naming what is missing.
pub(crate) fn missing(what: &str, name: &str) -> ProviderError {
    ProviderError::new("not_found", format!("{what} {name:?} does not exist"))
}
