//! What a run records: one [`EventRecord`] per dispatched event (`events.jsonl`), and the
//! [`Summary`] (`summary.json`, also `run --json`). All instants are nanoseconds since the run
//! origin (the `Instant` the timing lanes start from); durations are nanoseconds.
//!
//! Every type the summary holds is defined here or in a submodule ([`verdict`]: the verdict
//! and its checks; [`stream`]: a bare-`io` stream's fidelity), so the record is the floor the
//! engine, the providers and the validity checks build on, and imports none of them.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use trace_format::OpType;

pub mod stream;
pub mod verdict;

pub use verdict::{Check, DispatchRate, Limits, OpValidity, Validity, Verdict};

/// Requests a provider's own client held back (a client-side rate limiter, a connection
/// pool): time the tool, not the system, added to the measured latencies. Reported through
/// [`Provider::client_throttling`]; any of it above the run's `throttled` threshold makes the
/// run `engine-bound`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ClientThrottling {
    /// What limited them, with its settings, e.g. `kube client rate limiter (--kube-qps 50,
    /// --kube-burst 100)`.
    pub limiter: String,
    /// Requests that went through it.
    pub requests: u64,
    /// Requests that had to wait.
    pub throttled: u64,
    /// Total time they waited, ns.
    pub waited_ns: u64,
    /// Longest single wait, ns.
    pub max_wait_ns: u64,
}

/// A provider-reported phase: its name and when it ended (ns since origin).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Phase {
    /// Phase name, e.g. `allocate`, `mkfs`, `losetup`, `mount`.
    pub name: String,
    /// When the phase ended, ns since the run origin.
    pub at: u64,
}

/// A failure the cluster reported about an operation and retried by itself (e.g. the kubelet's
/// `FailedMount` Warnings before a mount succeeded): counted, not an error of the operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Retry {
    /// The cluster's reason, e.g. `FailedMount`.
    pub reason: String,
    /// How many times it was reported.
    pub count: u32,
    /// Its last message.
    pub message: String,
}

/// How an event ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The operation succeeded.
    Ok,
    /// The operation failed; see `error_class`.
    Error,
}

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EventRecord {
    /// Trace event id.
    pub id: u64,
    /// Operation type.
    pub op: OpType,
    /// Intended time: origin + `at` / speed.
    pub intended: u64,
    /// When a timing lane handed the event over.
    pub dispatched: u64,
    /// When the provider call began (after dependency wait and queueing).
    pub started: u64,
    /// When the operation completed (or failed).
    pub completed: u64,
    /// Outcome.
    pub outcome: Outcome,
    /// Error class when failed: `timeout`, `dependency_failed`, `cancelled`, or the
    /// provider's class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<String>,
    /// Error message when failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Provider phases, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<Phase>,
    /// Time waiting for the operations that create the objects this one uses.
    pub dep_wait: u64,
    /// Time waiting for a concurrency slot of its op type.
    pub queue: u64,
    /// completed − intended.
    pub response: u64,
    /// completed − started: the provider's own time.
    pub service: u64,
    /// dispatched − intended.
    pub lateness: u64,
    /// Time from dispatch until the engine began the event: the timing lane that claimed it,
    /// or the runtime worker its batch was handed to, reaching it (their wake-ups and the batch's
    /// earlier events; part of `response`, not of `lateness` or `service`).
    #[serde(default)]
    pub pickup: u64,
    /// Whether the event waited for a dependency still being created or for a concurrency
    /// slot (then its start is not the engine's alone, and it has no `start_lateness`).
    #[serde(default)]
    pub waited: bool,
    /// started − intended, for an event that did not wait and reached the provider (or was
    /// a marker): the engine's whole delay as the provider sees it (lateness + pickup + the
    /// task's own set-up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_lateness: Option<u64>,
    /// A snapshot operation was in flight at some point while this operation ran.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub during_snapshot: bool,
    /// Failures the cluster retried while the operation ran (per reason: how many, the last
    /// message), whether it then succeeded or not; absent when there were none (boxed: most
    /// records have none, and the sink moves millions of records a second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<Box<[Retry]>>,
}

impl EventRecord {
    /// A successful record without waits or phases, its derived fields filled: the shape
    /// analysis tests and generators need.
    pub fn ok(id: u64, op: OpType, intended: u64, dispatched: u64, completed: u64) -> Self {
        let mut r = EventRecord {
            id,
            op,
            intended,
            dispatched,
            started: dispatched,
            completed,
            outcome: Outcome::Ok,
            error_class: None,
            error: None,
            phases: Vec::new(),
            dep_wait: 0,
            queue: 0,
            response: 0,
            service: 0,
            lateness: 0,
            pickup: 0,
            waited: false,
            start_lateness: Some(dispatched.saturating_sub(intended)),
            during_snapshot: false,
            retries: None,
        };
        r.derive();
        r
    }

    /// Fills the derived fields from the instants.
    pub fn derive(&mut self) {
        self.response = self.completed.saturating_sub(self.intended);
        self.service = self.completed.saturating_sub(self.started);
        self.lateness = self.dispatched.saturating_sub(self.intended);
    }
}

/// Completion state of a run (manifest and summary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum CompletionState {
    /// The run is in progress (or crashed without a trace: see `crashed-detected`).
    Running,
    /// Every event was dispatched and finished.
    Complete,
    /// Stopped early (signal or `--fail-fast`); results are a valid prefix.
    Interrupted,
    /// A later command found the run `running` with its process gone.
    CrashedDetected,
}

impl CompletionState {
    /// The name as written in the manifest and summary (`complete`, `crashed-detected`).
    pub fn name(self) -> &'static str {
        match self {
            CompletionState::Running => "running",
            CompletionState::Complete => "complete",
            CompletionState::Interrupted => "interrupted",
            CompletionState::CrashedDetected => "crashed-detected",
        }
    }
}

impl std::fmt::Display for CompletionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Latency percentiles in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Percentiles {
    /// Number of values.
    pub count: u64,
    /// Minimum.
    pub min: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Maximum.
    pub max: u64,
    /// The most the tool's own delay could have added to each of these percentiles
    /// ([`crate::bound`]); absent where it was not measured, or is not a latency of the
    /// system (the engine's own lateness).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_ns: Option<ToolBound>,
}

/// The most the tool's own delay could have added to each reported percentile, ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ToolBound {
    /// Bound on the median's error.
    pub p50: u64,
    /// Bound on the 90th percentile's error.
    pub p90: u64,
    /// Bound on the 99th percentile's error.
    pub p99: u64,
    /// Bound on the 99.9th percentile's error.
    pub p999: u64,
    /// Bound on the maximum's error.
    pub max: u64,
}

impl ToolBound {
    /// The bounds beside the values they bound: `(name, value, bound)` for p50, p90, p99,
    /// p99.9 and max.
    pub fn beside(&self, p: &Percentiles) -> [(&'static str, u64, u64); 5] {
        [
            ("p50", p.p50, self.p50),
            ("p90", p.p90, self.p90),
            ("p99", p.p99, self.p99),
            ("p99.9", p.p999, self.p999),
            ("max", p.max, self.max),
        ]
    }

    /// The largest bound relative to its value (0 for an empty block), e.g. 0.03 when some
    /// percentile may be off by 3 % of itself.
    pub fn worst_ratio(&self, p: &Percentiles) -> f64 {
        self.beside(p)
            .iter()
            .map(|&(_, v, b)| if v == 0 { 0.0 } else { b as f64 / v as f64 })
            .fold(0.0, f64::max)
    }
}

impl Percentiles {
    /// Percentiles of a histogram (all zero when empty).
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        Self {
            count: h.len(),
            min: h.min(),
            mean: h.mean(),
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
            tool_ns: None,
        }
    }
}

/// Per op type results.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OpSummary {
    /// Events dispatched.
    pub count: u64,
    /// Succeeded.
    pub ok: u64,
    /// Failed (any class).
    pub failed: u64,
    /// Response time (completed − intended), all outcomes.
    pub response: Percentiles,
    /// Service time (completed − started).
    pub service: Percentiles,
    /// Dispatch lateness (dispatched − intended).
    pub lateness: Percentiles,
    /// Dependency wait of the events that waited.
    pub dep_wait: Percentiles,
    /// Queue time of the events that queued.
    pub queue: Percentiles,
}

/// I/O latency split by whether a snapshot was in flight.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct IoSplit {
    /// I/O with no snapshot in flight.
    pub without_snapshot: Percentiles,
    /// I/O with a snapshot in flight.
    pub with_snapshot: Percentiles,
    /// The I/O engine of each `io_phase` whose provider reported it (iogen's: `io_uring`, or
    /// `threads` when it fell back to its thread pool), in event order; absent when none did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backends: Vec<IoPhaseBackend>,
}

/// The I/O engine one `io_phase` (or `io`) event's I/O ran on, as its provider reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct IoBackend {
    /// `io_uring`, or `threads` (iogen's thread-pool engine).
    pub backend: String,
    /// Why it is not `io_uring`, for a fallback (e.g. io_uring refused by the seccomp
    /// profile the I/O ran under).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The I/O engine of one event (see [`IoSplit::backends`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct IoPhaseBackend {
    /// Trace event id.
    pub event: u64,
    /// `io_uring`, or `threads` (iogen's thread-pool engine).
    pub backend: String,
    /// Why it is not `io_uring`, for a fallback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl IoSplit {
    /// The run's notice when any `io_phase` ran on iogen's thread pool instead of io_uring
    /// (`io_phases`: how many the run dispatched): how many, which events and why — a
    /// fallback changes what the I/O numbers measure, so it is never silent. `None` when
    /// every reported one ran on io_uring.
    pub fn backend_notice(&self, io_phases: u64) -> Option<String> {
        let threads: Vec<&IoPhaseBackend> = self
            .backends
            .iter()
            .filter(|b| b.backend != "io_uring")
            .collect();
        if threads.is_empty() {
            return None;
        }
        let mut events: Vec<String> = threads
            .iter()
            .take(10)
            .map(|b| b.event.to_string())
            .collect();
        if threads.len() > 10 {
            events.push("…".into());
        }
        let mut reasons: Vec<&str> = Vec::new();
        for r in threads.iter().filter_map(|b| b.reason.as_deref()) {
            if !reasons.contains(&r) {
                reasons.push(r);
            }
        }
        let mut kinds: Vec<&str> = Vec::new();
        for b in &threads {
            if !kinds.contains(&b.backend.as_str()) {
                kinds.push(&b.backend);
            }
        }
        Some(format!(
            "iogen used {} in {} of {} io_phases (events {}){}{}",
            kinds.join("/"),
            threads.len(),
            io_phases.max(self.backends.len() as u64),
            events.join(", "),
            if reasons.is_empty() { "" } else { ": " },
            reasons.join("; ")
        ))
    }

    /// How many events ran on each backend, by name.
    pub fn backend_counts(&self) -> BTreeMap<&str, u64> {
        let mut m = BTreeMap::new();
        for b in &self.backends {
            *m.entry(b.backend.as_str()).or_default() += 1;
        }
        m
    }
}

/// The run summary (`summary.json`; `cnsreplay run --json` prints it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Summary {
    /// Completion state.
    pub state: CompletionState,
    /// Why the run stopped early, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Provider name.
    pub provider: String,
    /// Replay speed factor.
    pub speed: f64,
    /// Events dispatched.
    pub dispatched: u64,
    /// Events that succeeded.
    pub ok: u64,
    /// Events that failed.
    pub failed: u64,
    /// Failures per error class.
    pub errors: BTreeMap<String, u64>,
    /// Wall time from origin to the last completion, seconds.
    pub wall_seconds: f64,
    /// Completions per second of wall time.
    pub ops_per_second: f64,
    /// Dispatch lateness over all events.
    pub lateness: Percentiles,
    /// Pickup delay over all events: dispatch until the runtime began the event.
    #[serde(default)]
    pub pickup: Percentiles,
    /// Start lateness (provider call − intended) of the events that did not wait.
    #[serde(default)]
    pub start_lateness: Percentiles,
    /// Events that waited for a dependency or a concurrency slot (not in `start_lateness`).
    #[serde(default)]
    pub waited: u64,
    /// Resume lateness of the events that waited and reached the provider: provider call −
    /// max(intended, the instant what they waited for was released).
    #[serde(default)]
    pub resume_lateness: Percentiles,
    /// Completion lateness: how late the runtime ran a task woken from outside it (the
    /// engine's probe, every 2 ms of the run).
    #[serde(default)]
    pub completion_lateness: Percentiles,
    /// Achieved against intended dispatch rate (absent when fewer than two windows had
    /// enough events to judge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_rate: Option<DispatchRate>,
    /// Mean busy fraction of the runtime's workers from the origin until every event had
    /// finished, or of the hand-off thread (which finishes the calls of a provider that starts
    /// them inline) when it was busier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers_busy: Option<f64>,
    /// Client-side throttling the provider reported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_throttling: Vec<ClientThrottling>,
    /// The verdict and the checks behind it (`docs/replay.md`, Run validity). Absent in
    /// summaries written before verdicts existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validity: Option<Validity>,
    /// Per operation type, keyed by its name.
    pub ops: BTreeMap<String, OpSummary>,
    /// I/O latency with and without a snapshot in flight (`io` events and iogen phases).
    pub io: IoSplit,
    /// Bare `io` events replayed through per-volume streams: their fidelity (see
    /// `replay::streams`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub io_streams: Vec<stream::StreamFidelity>,
    /// The cluster's own timing of the run's calls (CSI sidecars, API server), when the
    /// provider scraped it (kube with `--csi-metrics` or API server metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<crate::cluster::ClusterTiming>,
    /// Objects removed at the end because the run still owned them.
    pub cleaned_up: u64,
    /// Objects cleanup could not remove (they are still in the ledger).
    pub cleanup_failures: Vec<String>,
    /// Notices from the provider (e.g. a fallback it took).
    pub notices: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::{IoPhaseBackend, IoSplit};

    fn b(event: u64, backend: &str, reason: Option<&str>) -> IoPhaseBackend {
        IoPhaseBackend {
            event,
            backend: backend.to_owned(),
            reason: reason.map(str::to_owned),
        }
    }

    /// Any io_phase on threads gives a notice naming how many, which events and why (each
    /// reason once); all io_uring gives none; the counts are per backend.
    #[test]
    fn a_fallback_to_threads_is_never_silent() {
        let refused = "io_uring setup failed (EPERM); fell back to the thread-pool engine";
        let mut io = IoSplit {
            backends: vec![
                b(3, "io_uring", None),
                b(5, "threads", Some(refused)),
                b(9, "threads", Some(refused)),
            ],
            ..IoSplit::default()
        };
        assert_eq!(
            io.backend_notice(5).as_deref(),
            Some(
                "iogen used threads in 2 of 5 io_phases (events 5, 9): io_uring setup failed \
                 (EPERM); fell back to the thread-pool engine"
            )
        );
        assert_eq!(
            io.backend_counts().into_iter().collect::<Vec<_>>(),
            vec![("io_uring", 1), ("threads", 2)]
        );
        io.backends.retain(|x| x.backend == "io_uring");
        assert_eq!(io.backend_notice(1), None);
        // Serialized only when there are any: older summaries and snapshots stay as they were.
        assert!(
            !serde_json::to_string(&IoSplit::default())
                .unwrap()
                .contains("backends")
        );
    }

    /// People read the state as the manifest writes it (`complete`), not as Rust spells the
    /// variant (`Complete`).
    #[test]
    fn a_state_prints_as_the_manifest_writes_it() {
        use super::CompletionState as S;
        for s in [S::Running, S::Complete, S::Interrupted, S::CrashedDetected] {
            let json = serde_json::to_value(s).expect("json");
            assert_eq!(json.as_str(), Some(s.to_string().as_str()));
        }
        assert_eq!(S::CrashedDetected.to_string(), "crashed-detected");
    }
}
