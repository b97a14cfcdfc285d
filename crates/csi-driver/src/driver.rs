//! The driver every service shares ([`Driver`]): its configuration, its state (persisted
//! after every change), the keys of calls in flight, and a call's life — the injected latency
//! drawn and slept before it, its record appended to `ops.jsonl` after it ([`Call`]).

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tonic::Status;

use crate::latency::{LatencyConfig, Plan, Rng};
use crate::state::{OpLog, OpRecord, State, StateError, VolumeRec, now_ns};

/// The driver's configuration.
#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// CSI driver name (GetPluginInfo), e.g. `csi.cnsreplay.dev`.
    pub name: String,
    /// Root directory: state file, call log, images.
    pub root: PathBuf,
    /// This node's id (NodeGetInfo).
    pub node_id: String,
    /// Node ids ControllerPublishVolume accepts besides `node_id` (others: NOT_FOUND).
    pub nodes: Vec<String>,
    /// Advertise VOLUME_ACCESSIBILITY_CONSTRAINTS: NodeGetInfo reports `<topology_key>:
    /// <node_id>` and volumes are accessible where the CreateVolume request prefers. Off: no
    /// topology anywhere, so PVs carry no node affinity (one machine backs every fake node).
    pub topology: bool,
    /// Topology key of NodeGetInfo's segment (`<key>: <node_id>`).
    pub topology_key: String,
    /// Injected latency defaults.
    pub latency: LatencyConfig,
    /// Loop devices and mounts: `None` = when root.
    pub loop_mode: Option<bool>,
    /// Capacity when CreateVolume gives none.
    pub default_size: u64,
    /// The blkio directory holding the kubelet's pod cgroups, where volumes' I/O limits are
    /// written; `None`: `BLKIO/kubepods` (the kubelet's cgroupfs default).
    pub pod_cgroups: Option<PathBuf>,
    /// NodeGetInfo's `max_volumes_per_node` (0: no limit), unless `max_volumes_file` says
    /// otherwise.
    pub max_volumes_per_node: u64,
    /// A file holding the per-node volume limit, read at every NodeGetInfo, so the limit can
    /// change while the driver runs (the kubelet refreshes the node's CSINode from it every
    /// CSIDriver `nodeAllocatableUpdatePeriodSeconds`); absent file: `max_volumes_per_node`.
    pub max_volumes_file: Option<PathBuf>,
}

impl DriverConfig {
    /// Defaults for a root directory: name `csi.cnsreplay.dev`, node id `node-1`, no
    /// topology, 1 GiB.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            name: "csi.cnsreplay.dev".to_owned(),
            root: root.into(),
            node_id: "node-1".to_owned(),
            nodes: Vec::new(),
            topology: false,
            topology_key: "topology.csi.cnsreplay.dev/node".to_owned(),
            latency: LatencyConfig::default(),
            loop_mode: None,
            default_size: 1 << 30,
            pod_cgroups: None,
            max_volumes_per_node: 0,
            max_volumes_file: None,
        }
    }
}

/// Why the driver could not start.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The state file.
    #[error("state: {0}")]
    State(#[from] StateError),
    /// Files, socket.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The latency config.
    #[error("latency config: {0}")]
    Latency(#[from] crate::latency::LatencyError),
    /// Loop mode asked for without root.
    #[error("loop mode needs root (losetup, mount)")]
    NotRoot,
    /// A registration socket the kubelet's client could not reach (see `registration`).
    #[error(
        "registration socket {path}: the kubelet would send :authority {authority:?}, which \
         the gRPC server rejects; put an `@` before a plain host name in the file name, \
         e.g. csi.cnsreplay.dev@reg.sock"
    )]
    RegistrationSocketName {
        /// The socket path given.
        path: PathBuf,
        /// The authority the kubelet would send.
        authority: String,
    },
    /// The server failed.
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// The driver: shared by the three services.
#[derive(Debug, Clone)]
pub struct Driver {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    cfg: DriverConfig,
    loop_mode: bool,
    state: Mutex<State>,
    busy: Mutex<HashSet<String>>,
    log: Mutex<OpLog>,
    rng: Mutex<Rng>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Driver {
    /// Opens the root directory (creates it), loads the state and finds loop devices again.
    pub fn open(cfg: DriverConfig) -> Result<Self, DriverError> {
        cfg.latency.validate()?;
        let root_user = local_storage::is_root();
        let loop_mode = match cfg.loop_mode {
            Some(true) if !root_user => return Err(DriverError::NotRoot),
            Some(m) => m,
            None => root_user,
        };
        for d in ["volumes", "snapshots"] {
            fs_err::create_dir_all(cfg.root.join(d))?;
        }
        let mut state = State::load(&cfg.root.join("state.json"))?;
        if loop_mode {
            for v in state.volumes.values_mut() {
                let mut loops = local_storage::loops_of(&v.image);
                v.loop_dev = if v.published.is_empty() {
                    None
                } else {
                    loops.drain(..1.min(loops.len())).next()
                };
                // Extra devices (a crash between losetup and the state write) are released.
                for dev in loops {
                    let _ = local_storage::detach_loop(&dev);
                }
            }
        }
        let log = OpLog::open(&cfg.root.join("ops.jsonl"))?;
        let seed = cfg.latency.seed.unwrap_or_else(now_ns);
        let d = Self {
            inner: Arc::new(Inner {
                loop_mode,
                state: Mutex::new(state),
                busy: Mutex::new(HashSet::new()),
                log: Mutex::new(log),
                rng: Mutex::new(Rng::new(seed)),
                cfg,
            }),
        };
        lock(&d.inner.state).save(&d.inner.cfg.root.join("state.json"))?;
        Ok(d)
    }

    /// The configuration.
    pub fn config(&self) -> &DriverConfig {
        &self.inner.cfg
    }

    /// Whether volumes get loop devices and mounts.
    pub fn loop_mode(&self) -> bool {
        self.inner.loop_mode
    }

    /// Where the image of volume or snapshot `id` lives (`dir`: `volumes` or `snapshots`).
    pub(crate) fn image_path(&self, dir: &str, id: &str) -> PathBuf {
        self.inner.cfg.root.join(dir).join(format!("{id}.img"))
    }

    /// Where a file-system volume is mounted: its staging path first, then its targets.
    pub(crate) fn fs_mounts(&self, v: &VolumeRec) -> Vec<PathBuf> {
        if !self.loop_mode() || v.block {
            return Vec::new();
        }
        v.staged.iter().chain(&v.targets).cloned().collect()
    }

    /// A copy of the current state.
    pub fn snapshot_state(&self) -> State {
        lock(&self.inner.state).clone()
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.inner.state)
    }

    pub(crate) fn save(&self, st: &State) -> Result<(), Status> {
        st.save(&self.inner.cfg.root.join("state.json"))
            .map_err(|e| Status::internal(format!("saving state: {e}")))
    }

    /// Changes the state under its lock and persists it.
    pub(crate) fn update<R>(&self, f: impl FnOnce(&mut State) -> R) -> Result<R, Status> {
        let mut st = self.state();
        let r = f(&mut st);
        self.save(&st)?;
        Ok(r)
    }

    /// Marks `keys` busy for the life of the guard; ABORTED when one already is.
    pub(crate) fn busy(&self, keys: &[&str]) -> Result<Busy, Status> {
        let mut b = lock(&self.inner.busy);
        if let Some(k) = keys.iter().find(|k| b.contains(**k)) {
            return Err(Status::aborted(format!(
                "an operation on {k:?} is already in progress"
            )));
        }
        let keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
        b.extend(keys.iter().cloned());
        Ok(Busy {
            inner: self.inner.clone(),
            keys,
        })
    }

    /// Starts a logged call: draws and sleeps the injected latency.
    pub(crate) async fn begin(&self, op: &'static str, params: &BTreeMap<String, String>) -> Call {
        let start_ns = now_ns();
        let plan = {
            let mut rng = lock(&self.inner.rng);
            self.inner.cfg.latency.plan(op, params, &mut rng)
        };
        if plan.total() > Duration::ZERO {
            tokio::time::sleep(plan.total()).await;
        }
        Call {
            rec: OpRecord {
                op: op.to_owned(),
                start_ns,
                injected_ns: u64::try_from(plan.total().as_nanos()).unwrap_or(u64::MAX),
                stalled: plan.stall > Duration::ZERO,
                ..OpRecord::default()
            },
            plan,
        }
    }

    /// Ends a logged call: appends its record to `ops.jsonl`.
    pub(crate) fn finish<T>(&self, mut call: Call, r: &Result<T, Status>) {
        call.rec.end_ns = now_ns();
        match r {
            Ok(_) => call.rec.code = "OK".to_owned(),
            Err(s) => {
                call.rec.code = format!("{:?}", s.code());
                call.rec.detail = s.message().to_owned();
            }
        }
        if let Err(e) = lock(&self.inner.log).append(&call.rec) {
            tracing::warn!("ops.jsonl: {e}");
        }
        tracing::debug!(?call.rec, "call");
    }
}

/// A call in flight: its log record and injection plan.
#[derive(Debug)]
pub(crate) struct Call {
    pub(crate) rec: OpRecord,
    pub(crate) plan: Plan,
}

impl Call {
    /// UNAVAILABLE when the plan says fail.
    pub(crate) fn injected_failure(&self) -> Result<(), Status> {
        if self.plan.fail {
            Err(Status::new(
                self.plan.fail_code,
                "injected failure (failRate)",
            ))
        } else {
            Ok(())
        }
    }

    pub(crate) fn detail(&mut self, d: impl Into<String>) {
        let d = d.into();
        if self.rec.detail.is_empty() {
            self.rec.detail = d;
        } else {
            self.rec.detail.push(',');
            self.rec.detail.push_str(&d);
        }
    }
}

/// Keys marked busy; released on drop.
#[derive(Debug)]
pub(crate) struct Busy {
    inner: Arc<Inner>,
    keys: Vec<String>,
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut b = lock(&self.inner.busy);
        for k in &self.keys {
            b.remove(k);
        }
    }
}

/// Runs blocking storage work off the async workers; storage errors become INTERNAL.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, local_storage::StorageError> + Send + 'static,
) -> Result<T, Status> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Status::internal(format!("storage task: {e}")))?
        .map_err(|e| Status::internal(e.to_string()))
}

pub(crate) fn required<'a>(field: &str, v: &'a str) -> Result<&'a str, Status> {
    if v.is_empty() {
        Err(Status::invalid_argument(format!("{field} is required")))
    } else {
        Ok(v)
    }
}
