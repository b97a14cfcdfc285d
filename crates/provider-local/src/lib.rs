//! The `local` provider: real storage work on this machine, no cluster.
//!
//! As root, a volume is an image file formatted with mkfs.ext4 (create = allocate + mkfs),
//! attached as a loop device and mounted (attach = losetup + mount); a snapshot is a reflink
//! copy of the image where the run directory's file system supports FICLONE, else a full copy
//! (each snapshot records which in its phase name); restore/clone copy the same way; resize
//! grows the file, `losetup -c` and resize2fs; detach unmounts and detaches the loop; delete
//! removes the file. Without root, volumes are plain directories holding one data file, with a
//! notice saying so. Everything lives under `RUNDIR/objects/`, and every object is in the
//! run's ledger before it exists, so cleanup removes exactly the run's objects.
//!
//! Nodes are only labels here: `cordon_node` marks one, `drain_node` reschedules its
//! workloads, and `reschedule` is detach + attach of the workload's volumes (its I/O is
//! stopped, like a pod that is moved). `io_phase` runs iogen on the volume — on a file-system
//! volume the target is one data file, `cnsreplay-io.dat`, on its mount; on a block volume the
//! loop device — and its results go to `RUNDIR/io/`.

mod cbt;
mod io;
mod ops;
mod ordered;
pub mod storage;
pub mod sys;
pub mod throttle;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use replay::ledger::LedgerEntry;
use replay::provider::CleanupReport;
use replay::{OpCtx, Provider, ProviderError, RunInfo};
use serde::{Deserialize, Serialize};
use trace_format::{Event, Name};

/// How volumes are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Loop devices when root, directories otherwise.
    Auto,
    /// Image + mkfs.ext4 + loop device + mount (needs root).
    Loop,
    /// Plain directories.
    Dir,
}

/// The local provider's configuration (recorded in the manifest).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LocalConfig {
    /// Requested mode.
    pub mode: Mode,
    /// Largest volume actually allocated; bigger requests are capped (the image is sparse,
    /// but mkfs and copies scale with it). 0 = no cap.
    pub max_volume_bytes: u64,
    /// iogen engine options for `io_phase`.
    pub io_engine: iogen::EngineChoice,
    /// Bare `io` streams: requests in flight at most per volume.
    #[serde(default = "default_stream_depth")]
    pub stream_depth: u32,
    /// Bare `io` streams: largest request (a buffer of this size per in-flight slot).
    #[serde(default = "default_stream_max_len")]
    pub stream_max_len: u64,
    /// Bare `io` streams: a sparse target up to this size is written once before the clock
    /// starts (0: never).
    #[serde(default = "default_stream_layout_max")]
    pub stream_layout_max: u64,
    /// Bare `io` streams: spin margin before each deadline, ns (`None`: iogen's 50 µs; 0:
    /// sleep to each deadline, for more busy volumes than spare CPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_spin_ns: Option<u64>,
    /// Bare `io` streams: the CPU of each stream's thread (its ring's kernel I/O workers go
    /// to the others).
    #[serde(default)]
    pub stream_cpus: StreamCpus,
}

/// Where the bare `io` streams run ([`iogen::CpuPlacement`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamCpus {
    /// When the stream's target is sparse (its writes allocate blocks, which the kernel
    /// hands to its I/O workers) and the header declares fewer volumes than the process may
    /// use CPUs: the i-th volume's stream on the i-th CPU from the last, every ring's kernel
    /// I/O workers on the CPUs left over. Otherwise, as `none`: a stream whose requests the
    /// submitting call carries out itself is better free to move away from whatever else
    /// wakes on its CPU (docs/performance-history.md, *Block-trace replay*).
    #[default]
    Auto,
    /// Wherever the scheduler puts them.
    None,
    /// The i-th volume's stream on `list[i % len]`; kernel I/O workers on the other CPUs.
    List(Vec<usize>),
}

fn default_stream_layout_max() -> u64 {
    8 << 30
}

/// Default of [`LocalConfig::stream_depth`]: deep enough for a Poisson burst at 50 k
/// requests/s on this machine's disk (docs/PERFORMANCE.md, Block-trace replay).
pub const DEFAULT_STREAM_DEPTH: u32 = 128;

fn default_stream_depth() -> u32 {
    DEFAULT_STREAM_DEPTH
}

fn default_stream_max_len() -> u64 {
    1 << 20
}

impl Default for LocalConfig {
    fn default() -> Self {
        Self {
            mode: Mode::Auto,
            max_volume_bytes: 0,
            // io_uring when the kernel offers it, the thread pool otherwise (iogen probes).
            io_engine: iogen::EngineChoice::Auto,
            stream_depth: DEFAULT_STREAM_DEPTH,
            stream_max_len: default_stream_max_len(),
            stream_layout_max: default_stream_layout_max(),
            stream_spin_ns: None,
            stream_cpus: StreamCpus::Auto,
        }
    }
}

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
    pub(crate) ordered: HashMap<Name, ordered::OrderedRun>,
    /// One line per cut check, for the summary's notices.
    pub(crate) cut_notices: Vec<String>,
    /// Phases that recorded their written set, for the changed-block checks.
    pub(crate) written: Vec<cbt::WrittenPhase>,
    /// One line per changed-block listing, for the summary's notices.
    pub(crate) cbt_notices: Vec<String>,
    pub(crate) workloads: HashMap<Name, Workload>,
    pub(crate) cordoned: Vec<Name>,
}

/// The local provider.
#[derive(Debug)]
pub struct LocalProvider {
    pub(crate) config: LocalConfig,
    pub(crate) run: OnceLock<RunInfo>,
    pub(crate) loop_mode: OnceLock<bool>,
    pub(crate) state: Mutex<State>,
    pub(crate) seq: AtomicU64,
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

impl Provider for LocalProvider {
    fn name(&self) -> &'static str {
        "local"
    }

    fn config(&self) -> serde_json::Value {
        serde_json::to_value(&self.config).unwrap_or_default()
    }

    fn prepare(&self, run: &RunInfo) -> Result<Vec<String>, ProviderError> {
        let root = sys::is_root();
        let mut notices = Vec::new();
        let loop_mode = match self.config.mode {
            Mode::Loop if !root => {
                return Err(ProviderError::new(
                    "not_root",
                    "mode loop needs root (loop devices, mount)",
                ));
            }
            Mode::Loop => true,
            Mode::Dir => false,
            Mode::Auto => {
                if !root {
                    notices.push(
                        "local: not running as root, so volumes are plain directories (no \
                         mkfs, loop devices or mounts); control-op latencies are not those of \
                         real block volumes"
                            .to_owned(),
                    );
                }
                root
            }
        };
        let _ = self.loop_mode.set(loop_mode);
        let _ = self.run.set(run.clone());
        let objects = run.run_dir.join("objects");
        run_ledger_dir(run, &objects)?;
        Ok(notices)
    }

    async fn execute(&self, ev: Arc<Event>, ctx: Arc<OpCtx>) -> Result<(), ProviderError> {
        ops::execute(self, ev, ctx).await
    }

    fn finish_notices(&self) -> Vec<String> {
        let st = self.state();
        st.cut_notices
            .iter()
            .chain(&st.cbt_notices)
            .cloned()
            .collect()
    }

    fn open_io_stream(
        &self,
        volume: &Name,
    ) -> Result<Option<Box<dyn replay::IoStream>>, ProviderError> {
        io::open_stream(self, volume).map(Some)
    }

    fn cleanup(&self, run: &RunInfo, leftovers: &[LedgerEntry]) -> CleanupReport {
        // I/O units still running would keep their volumes busy.
        for w in self.state().workloads.values() {
            for stop in &w.io {
                stop.request();
            }
        }
        cleanup(run, leftovers)
    }
}

fn run_ledger_dir(run: &RunInfo, objects: &std::path::Path) -> Result<(), ProviderError> {
    // The objects directory is itself a ledger entry, so cleanup removes it last.
    let ledger = replay::Ledger::open(&run.run_dir).map_err(sys::io_err)?;
    ledger
        .intend("root", sys::path_str(objects)?, serde_json::Value::Null)
        .map_err(sys::io_err)?;
    fs_err::create_dir_all(objects.join("mnt")).map_err(sys::io_err)?;
    Ok(())
}

/// How long cleanup retries a busy unmount before it detaches the mount lazily.
pub const UNMOUNT_PATIENCE: std::time::Duration = std::time::Duration::from_secs(15);

/// Unmounts `p`, retrying while it is busy. A killed process's io_uring is torn down by the
/// kernel in the background (cancelling in-flight requests, then dropping its files), so the
/// file system stays busy for a moment after the process is gone; unmounting lazily at once
/// would leave the loop device attached behind it. Lazy unmount is the last resort, and says
/// so.
fn unmount_patiently(p: &std::path::Path) -> Result<(), String> {
    let err = match storage::unmount(p, UNMOUNT_PATIENCE) {
        Ok(()) => return Ok(()),
        Err(_) if !sys::is_mounted(p) => return Ok(()),
        Err(e) => e.to_string(),
    };
    match sys::cmd("umount", &["-l", &p.to_string_lossy()]) {
        Ok(_) => Err(format!(
            "still busy after {UNMOUNT_PATIENCE:?} ({err}); detached lazily, its loop device is \
             freed when the last user closes it"
        )),
        Err(e) => Err(format!("{err}; lazy unmount failed too: {}", e.message)),
    }
}

/// Removes the ledger's leftovers, newest first, touching only paths inside the run
/// directory: mounts (unmount), loop devices backed by a ledger image (`losetup -j`), files
/// and directories. Returns what happened; entries removed are released in the ledger.
pub fn cleanup(run: &RunInfo, leftovers: &[LedgerEntry]) -> CleanupReport {
    let mut report = CleanupReport::default();
    let ledger = replay::Ledger::open(&run.run_dir).ok();
    for e in leftovers.iter().rev() {
        let p = PathBuf::from(&e.id);
        if e.kind == "cgroup" {
            // The run's own cgroups only: BLKIO/cnsreplay/RUN_ID/….
            let r = match throttle::blkio_root() {
                Some(root) if p.starts_with(root.join("cnsreplay").join(&run.run_id)) => {
                    throttle::remove(&p, &root)
                        .map(|()| true)
                        .map_err(|e| e.to_string())
                }
                Some(_) => Err("not one of this run's cgroups, not touched".to_owned()),
                None => Ok(false),
            };
            match r {
                Ok(removed) => {
                    if removed {
                        report.removed += 1;
                    }
                    if let Some(l) = &ledger {
                        let _ = l.release(&e.kind, &e.id);
                    }
                }
                Err(msg) => report.failed.push(format!("{} {}: {msg}", e.kind, e.id)),
            }
            continue;
        }
        if !sys::inside(&run.run_dir, &p) {
            report.failed.push(format!(
                "{} {}: outside the run directory, not touched",
                e.kind, e.id
            ));
            continue;
        }
        let r: Result<bool, String> = match e.kind.as_str() {
            "mount" => {
                if sys::is_mounted(&p) {
                    unmount_patiently(&p).map(|()| {
                        let _ = fs_err::remove_dir(&p);
                        true
                    })
                } else {
                    let _ = fs_err::remove_dir(&p);
                    Ok(false)
                }
            }
            "loop" => {
                let devs = sys::loops_of(&p);
                let mut err = None;
                for d in &devs {
                    if let Err(e) = sys::cmd("losetup", &["-d", d]) {
                        err = Some(e.message);
                    }
                }
                err.map_or(Ok(!devs.is_empty()), Err)
            }
            "file" | "image" => match fs_err::remove_file(&p) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(e.to_string()),
            },
            // The run's objects directory: removed only when nothing else is left in it.
            "root" => match std::fs::remove_dir(p.join("mnt"))
                .or_else(|e| {
                    if e.kind() == std::io::ErrorKind::NotFound {
                        Ok(())
                    } else {
                        Err(e)
                    }
                })
                .and_then(|()| fs_err::remove_dir(&p))
            {
                Ok(()) => Ok(false),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(format!("kept: {e}")),
            },
            "dir" => match fs_err::remove_dir_all(&p) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(e.to_string()),
            },
            other => Err(format!("unknown ledger kind {other:?}")),
        };
        match r {
            Ok(removed) => {
                if removed {
                    report.removed += 1;
                } else {
                    report.already_gone += 1;
                }
                if let Some(l) = &ledger {
                    let _ = l.release(&e.kind, &e.id);
                }
            }
            Err(msg) => report.failed.push(format!("{} {}: {msg}", e.kind, e.id)),
        }
    }
    report
}
