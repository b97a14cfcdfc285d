//! The data-path I/O generator: an io_uring engine on dedicated threads with open-loop,
//! coordinated-omission-safe latency recording, plus a portable pread/pwrite fallback.
//!
//! Every I/O carries three instants: when it was *intended* to start (its slot in the
//! open-loop schedule or trace), when it was actually *submitted*, and when it *completed*.
//! Response time (completion − intended), service time (completion − submission) and issue
//! lateness (submission − intended) each go into their own HdrHistogram per operation kind, so
//! a stall shows up in the response time of every request that should have started during it,
//! not just the one that hit it. Falling behind never lowers the offered rate: the backlog is
//! issued as fast as possible and the delay is charged to the requests that waited.
//!
//! Entry points: [`run_phase`] (one `io_phase` profile, closed or open loop),
//! [`start_stream`] (single requests, e.g. a trace's `io` events, at intended times) and
//! [`run_suite`] (the storage summary). Only [`ring`] holds `unsafe`; see `docs/iogen.md`.
//!
//! ## Layers
//!
//! Lowest first; a module imports only from its own layer or below (checked by
//! `scripts/check-layers.py`).
//!
//! 1. `error`, `ring`, `generate`, `placement`, `written` — errors, io_uring, data, placement
//! 2. `backend`, `verify`, `layout`, `written_wire`, `delta_check` — engines' backends, checks
//! 3. `stats`, `ordered` — histograms and summaries; ordered writes and their log
//! 4. `engine`, `wire`, `cut` — the I/O engine; result lines; a crash-consistent cut judged
//! 5. `phase`, `cut_wire` — one `io_phase`; a cut scan as text lines
//! 6. `stream`, `suite` — single requests at intended times; the storage summary
//! 7. `replay`, `report` — a trace's `io` replayed; the tables

mod backend;
pub mod cut;
pub mod cut_wire;
pub mod delta_check;
mod engine;
mod error;
mod generate;
mod layout;
pub mod ordered;
mod phase;
mod placement;
mod replay;
mod report;
#[allow(unsafe_code)]
mod ring;
mod stats;
mod stream;
mod suite;
mod verify;
mod wire;
pub mod written;
pub mod written_wire;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use cut::{CutReport, CutVerdict, verify_cut};
pub use error::Error;
pub use layout::DEFAULT_NEW_FILE_SIZE;
pub use ordered::{OrderedLog, OrderedResult, OrderedSpec, run_ordered};
pub use phase::{PhaseResult, direct_alignment, run_phase, run_phase_recording};
pub use placement::{Placement, allowed_cpus, target_len};
pub use replay::{
    ReplayOptions, ReplayResult, VolumeReplay, parse_phase_snippet, parse_size, replay_from,
    replay_trace,
};
pub use report::{engine_in_table, render_phase, render_stream, render_suite};
pub use stats::BUCKET_NS;
pub use stats::{
    CpuTime, EngineInfo, Histograms, IntervalFeed, KindHistograms, KindSummary, Percentiles,
    Summary, histograms_to_log, interval_responses, log_start_time, parse_histograms,
    read_histograms, split_responses, write_histograms,
};
pub use stream::{IoRequest, IoSubmitter, STREAM_QUEUE, StreamHandle, StreamResult, start_stream};
pub use suite::{SuiteEntry, SuiteOptions, run_suite};
pub use verify::{Mismatch, MismatchKind, VerifySummary};
pub use wire::{RESULT_PREFIX, StreamLine, WallAnchor};

pub use trace_format::{Arrival, BlockSize, BlockSizeShare, IoKind, Load, Pattern, Rate};

/// The output file of one part of a run with several (a phase, a suite test, a replayed
/// volume): `part` inserted before the extension, `out.hlog` → `out.PART.hlog` (`out` →
/// `out.PART`), so the parts never overwrite each other.
pub fn part_path(path: &std::path::Path, part: &str) -> PathBuf {
    let safe: String = part
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = match (path.file_stem(), path.extension()) {
        (Some(stem), Some(ext)) => format!(
            "{}.{safe}.{}",
            stem.to_string_lossy(),
            ext.to_string_lossy()
        ),
        _ => format!(
            "{}.{safe}",
            path.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        ),
    };
    path.with_file_name(name)
}

/// A cooperative stop request shared between the caller and the engine's threads.
///
/// Cloning shares the flag. Requesting a stop makes running phases stop issuing, wait for
/// in-flight I/O and return results marked partial.
#[derive(Debug, Clone, Default)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    /// A fresh, unrequested stop flag.
    pub fn new() -> Self {
        Self::default()
    }

    /// Requests a stop.
    pub fn request(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether a stop was requested.
    pub fn is_requested(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// The shared flag itself, e.g. for a signal handler that sets it.
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.0)
    }
}

/// Which I/O engine to run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineChoice {
    /// io_uring when the kernel allows it, else the thread-pool engine.
    #[default]
    Auto,
    /// io_uring only; setup failure is an error.
    IoUring,
    /// The portable thread-pool pread/pwrite engine.
    Sync,
}

/// Engine-wide options (not part of the workload description).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EngineOptions {
    /// Engine to use.
    pub engine: EngineChoice,
    /// Ask for a kernel submission-polling thread (SQPOLL).
    pub sqpoll: bool,
    /// Ask for completion polling (IOPOLL; needs O_DIRECT and a polled device).
    pub iopoll: bool,
    /// Write interval histograms (HdrHistogram V2 log) to this file.
    pub interval_log: Option<PathBuf>,
    /// Seed of every random choice (offsets, sizes, read/write mix, Poisson arrivals).
    pub seed: u64,
    /// Interval length of the interval log.
    #[serde(default = "default_interval")]
    pub interval: Duration,
    /// Fault injection for tests: the thread-pool engine sleeps this long before performing
    /// its `at_io`-th I/O (0-based, counted across the whole pool).
    #[serde(default)]
    pub sync_stall: Option<SyncStall>,
    /// Streams: requests in flight at most.
    #[serde(default = "default_stream_depth")]
    pub stream_depth: u32,
    /// Streams: largest read or write (longer ones are rejected and counted as errors).
    #[serde(default = "default_stream_max_len")]
    pub stream_max_len: u64,
    /// Open loops: how long before a deadline the worker stops sleeping and spins on the
    /// clock (default 50 µs). A spinning worker owns its CPU while requests are less than
    /// this apart; with more busy workers than spare CPUs they take each other's turns, and
    /// 0 (sleep to each deadline) is the better trade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spin: Option<Duration>,
    /// Open loops: how many workers of the process may spin before their deadlines at once
    /// (`None`: one fewer than the CPUs the process may use, at least one). A worker that
    /// finds them all spinning sleeps to its deadline. Shared by every worker of the process
    /// that reads the same limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spinners: Option<usize>,
    /// Streams: the CPU of the stream's thread and of its ring's kernel I/O workers (none:
    /// wherever the scheduler puts them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuPlacement>,
}

/// Where a stream runs. On a machine with few CPUs the kernel's I/O workers of the ring
/// (io-wq, which carry out requests the submitting call cannot finish without blocking: a
/// buffered write that allocates pages, an O_DIRECT write that allocates blocks) are woken
/// onto the spinning stream thread's CPU and delay its next request by the length of their
/// turn (docs/performance-history.md, *A real MSR Cambridge trace*). Binding the thread to a CPU of
/// its own and the workers to the others keeps them apart; the process's other threads are
/// left where the scheduler puts them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuPlacement {
    /// The stream thread's CPU.
    pub thread: usize,
    /// The CPUs of the ring's kernel I/O workers (empty: not set).
    pub kernel_workers: Vec<usize>,
}

impl CpuPlacement {
    /// Says where, for a stream's flags.
    pub fn describe(&self) -> String {
        let list = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
        if self.kernel_workers.is_empty() {
            format!("thread on CPU {}", self.thread)
        } else {
            format!(
                "thread on CPU {}, kernel I/O workers on CPU {}",
                self.thread,
                list(&self.kernel_workers)
            )
        }
    }
}

fn default_stream_depth() -> u32 {
    32
}

fn default_stream_max_len() -> u64 {
    1 << 20
}

fn default_interval() -> Duration {
    Duration::from_secs(1)
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            engine: EngineChoice::Auto,
            sqpoll: false,
            iopoll: false,
            interval_log: None,
            seed: 0x10_6e_2e_9e,
            interval: default_interval(),
            sync_stall: None,
            stream_depth: default_stream_depth(),
            stream_max_len: default_stream_max_len(),
            spin: None,
            spinners: None,
            cpus: None,
        }
    }
}

/// Reads a spinner count ([`EngineOptions::spinners`]): a whole number ≥ 1, or `all` (no
/// limit). The error says what was wrong, for the caller to name its flag.
pub fn parse_spinners(s: &str) -> Result<usize, String> {
    match s.trim() {
        "all" => Ok(usize::MAX),
        t => match t.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(format!(
                "{t:?}: a count of at least 1, or `all` (a spin margin of 0 stops spinning \
                 instead)"
            )),
        },
    }
}

/// A deterministic stall injected into the thread-pool engine (see [`EngineOptions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncStall {
    /// Index of the I/O that stalls.
    pub at_io: u64,
    /// How long it stalls.
    pub sleep: Duration,
}

/// One I/O phase: the workload of a trace `io_phase` event, runnable against any target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseSpec {
    /// Random or sequential offsets.
    pub pattern: Pattern,
    /// Share of reads in percent.
    pub read_pct: u8,
    /// Block size, fixed or a weighted mix.
    pub block_size: BlockSize,
    /// Closed loop at a depth (per job) or open loop at a rate (total over all jobs).
    pub load: Load,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop after this many bytes (total over all jobs).
    pub bytes: Option<u64>,
    /// Region from offset 0 to use (`iogen run --size`); the whole target when absent, and
    /// [`DEFAULT_NEW_FILE_SIZE`] for a new or empty regular file. A regular file shorter than
    /// this is laid out to it first (see `docs/iogen.md`, "Target files").
    pub region: Option<u64>,
    /// Parallel jobs, each on its own thread and ring.
    pub jobs: u32,
    /// O_DIRECT.
    pub direct: bool,
    /// Write verifiable blocks and check them on read.
    pub verify: bool,
    /// Stop after this many I/Os (total over all jobs).
    #[serde(default)]
    pub ios: Option<u64>,
    /// Open loop: the most I/Os one job keeps in flight (the backlog waits beyond this).
    #[serde(default = "default_max_inflight")]
    pub max_inflight: u32,
    /// Verify mode: load the generation map from this file if it exists and save it at the end.
    #[serde(default)]
    pub verify_state: Option<PathBuf>,
}

fn default_max_inflight() -> u32 {
    256
}

impl Default for PhaseSpec {
    fn default() -> Self {
        Self {
            pattern: Pattern::Random,
            read_pct: 100,
            block_size: BlockSize::Fixed(4096),
            load: Load::Depth(1),
            duration: None,
            bytes: None,
            region: None,
            jobs: 1,
            direct: false,
            verify: false,
            ios: None,
            max_inflight: default_max_inflight(),
            verify_state: None,
        }
    }
}

impl PhaseSpec {
    /// The phase a trace's `io_phase` event describes (its workload and volume are the
    /// caller's business: they pick the target).
    pub fn from_trace(p: &trace_format::IoPhase) -> PhaseSpec {
        PhaseSpec {
            pattern: p.pattern,
            read_pct: p.read_pct,
            block_size: p.block_size.clone(),
            load: p.load.clone(),
            duration: p.duration.map(Duration::from_nanos),
            bytes: p.bytes,
            region: p.region,
            jobs: p.jobs,
            direct: p.direct,
            verify: p.verify,
            ..PhaseSpec::default()
        }
    }
}
