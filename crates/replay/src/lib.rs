//! The open-loop replay engine: dispatches every trace event at its intended time, measures
//! response, service time and lateness from that time, and drives storage through one
//! provider trait ([`Provider`]). This crate holds the engine alone; the providers (`sim`,
//! `local`, `kube`) live in their own crates so the engine never sees their dependencies.
//!
//! Why open loop: a closed-loop tool waits for an operation before sending the next, so a stall
//! hides every operation that *would* have been sent during it (coordinated omission). Here a
//! dedicated timing lane hands each event over at `origin + at / speed` from one `Instant`
//! origin, whatever happened before, and every latency is measured from that intended instant.
//! The design and the run directory are described in `docs/replay.md` and `docs/run-dir.md`;
//! every file of a run directory has its one type here ([`files`] lists them), also the files
//! the providers write, which embed iogen's reports (the one dependency on iogen).
//!
//! ## Layers
//!
//! Lowest first; a module imports only from its own layer or below (checked by
//! `scripts/check-layers.py`).
//!
//! 1. `precise`, `cluster`, `turns` — clocks and deadlines; the cluster's own timing; a
//!    provider's turns per object name
//! 2. `record` — what a run writes: event records, the summary and every type it holds
//! 3. `ledger`, `line`, `rundir`, `deps`, `live`, `files`, `bound` — run-directory files,
//!    dependencies, live counters; the tool's error bound of a percentile
//! 4. `identity`, `control` — which runs combine; how a run is stopped and watched
//! 5. `provider`, `streams`, `timing` — the provider trait, bare-`io` streams, timing lanes
//! 6. `validity`, `noop`, `ordered` — the verdict judged from what was measured; the no-op
//!    provider; the opening every provider's ordered-writes check shares
//! 7. `sink` — the thread that writes and sums the records
//! 8. `probe`, `event` — the completion probe; one event's life on the runtime (or, started
//!    inline on a lane, on the hand-off thread)
//! 9. `engine`, `merge_runs` (apart) — a run from trace to summary; merging split runs
//!
//! Layer 5 is one layer because its modules need each other: a provider hands out
//! [`IoStream`]s and a stream's errors are [`ProviderError`]s; the timing lanes route `io`
//! events to the streams, which take the lanes' due instants.

pub mod bound;
pub mod cluster;
pub mod control;
mod deps;
pub mod engine;
mod event;
pub mod files;
pub mod identity;
pub mod ledger;
mod line;
pub mod live;
pub mod merge_runs;
pub mod noop;
pub mod ordered;
pub mod precise;
mod probe;
pub mod provider;
pub mod record;
pub mod rundir;
mod sink;
pub mod streams;
mod timing;
pub mod turns;
pub mod validity;

pub use control::RunControl;
pub use engine::{RunOptions, RunOutcome, run};
pub use identity::{CombineError, Purpose, RunIdentity, combinable};
pub use ledger::{Ledger, LedgerEntry};
pub use live::Live;
pub use provider::{ClientThrottling, OpCtx, Provider, ProviderError, RunInfo, SnapshotTimeline};
pub use record::{
    CompletionState, EventRecord, IoBackend, IoPhaseBackend, IoSplit, OpSummary, Outcome,
    Percentiles, Phase, Retry, Summary, ToolBound,
};
pub use rundir::{Labels, Manifest, RunDir, parse_labels};
pub use streams::{IoStream, IoStreamReport, StreamFidelity, Submit};
pub use timing::TimingOptions;
pub use validity::{Check, DispatchRate, Validity, ValidityOptions, Verdict};

/// Errors of the engine and the run directory.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file of the run directory or the trace could not be read or written.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] trace_format::Error),
    /// The run directory exists and is not empty.
    #[error("run directory {0} already exists and is not empty; choose a new one")]
    RunDirNotEmpty(std::path::PathBuf),
    /// A JSON file of the run directory is malformed.
    #[error("{file}: {source}")]
    Json {
        /// The file.
        file: std::path::PathBuf,
        /// What is wrong.
        source: serde_json::Error,
    },
    /// The provider could not start.
    #[error("provider {provider} could not start: {source}")]
    Provider {
        /// Provider name.
        provider: String,
        /// Its error.
        source: ProviderError,
    },
    /// Options are inconsistent.
    #[error("invalid option: {0}")]
    Options(String),
    /// Runs that may not be combined (merged): they do not belong together.
    #[error(transparent)]
    Combine(#[from] Box<CombineError>),
}
