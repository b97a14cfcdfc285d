//! The provider trait: what a storage backend implements to be replayed against.
//!
//! Shaped for Kubernetes as much as for this machine: an operation is an async call that may
//! pass through named phases (`format`, `mount`; `bound`, `attached`, `running`) which it
//! reports through [`OpCtx::phase`]; every object it creates is first written to the run's
//! [`Ledger`] (a Kubernetes provider also labels the object with [`RunInfo::owner_label`]), so
//! [`Provider::cleanup`] can list and delete exactly the run-owned objects and nothing else,
//! even after a crash.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime};

use serde::{Deserialize, Serialize};
use trace_format::{Event, Header};

pub use crate::precise::ns_since;
pub use crate::record::ClientThrottling;

use crate::ledger::{Ledger, LedgerEntry};
use crate::record::{Phase, Retry};

/// A failed provider operation: a stable class (counted in the summary) and a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{class}: {message}")]
pub struct ProviderError {
    /// Stable, snake_case error class, e.g. `command_failed`, `not_found`, `io`, `unsupported`.
    pub class: String,
    /// Human-readable detail.
    pub message: String,
}

impl ProviderError {
    /// An error of class `class`.
    pub fn new(class: &str, message: impl Into<String>) -> Self {
        Self {
            class: class.to_owned(),
            message: message.into(),
        }
    }
}

/// What a provider knows about the run it serves.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunInfo {
    /// The run directory.
    pub run_dir: PathBuf,
    /// Unique run id (also the ownership label value).
    pub run_id: String,
    /// Trace header (defaults for sizes, classes, …).
    pub header: Header,
    /// The run's stop flag (Ctrl-C). Before the clock, in [`Provider::prepare`], a provider
    /// waiting for the cluster (a pre-flight pod) may end at once with class `cancelled`; in
    /// [`Provider::cleanup`] of a stopped run the user is waiting for the prompt, so it may
    /// skip waits that only confirm what is already certain (an empty namespace's
    /// finalization), never the removal of what the run made. None outside a run (the
    /// `cleanup` command).
    #[serde(skip)]
    pub stop: Option<Arc<AtomicBool>>,
}

impl RunInfo {
    /// Whether the run was asked to stop (its [`RunInfo::stop`] flag is set).
    pub fn stopped(&self) -> bool {
        self.stop.as_ref().is_some_and(|f| f.load(SeqCst))
    }

    /// The ownership label every object of this run carries (`key=value`).
    pub fn owner_label(&self) -> String {
        format!("cnsreplay.io/run={}", self.run_id)
    }
}

/// Times when snapshot operations were in flight, so I/O can be split by whether a snapshot
/// was running alongside it. Times are ns since the run origin.
#[derive(Debug, Default)]
pub struct SnapshotTimeline {
    windows: Mutex<Vec<(u64, Option<u64>)>>,
    active: AtomicU64,
    started: AtomicU64,
}

/// A point to compare against with [`SnapshotTimeline::overlapped_since`].
#[derive(Debug, Clone, Copy)]
pub struct SnapshotMark {
    active: u64,
    started: u64,
}

impl SnapshotTimeline {
    /// A snapshot started at `t`; returns its index for [`SnapshotTimeline::end`].
    pub fn begin(&self, t: u64) -> usize {
        let mut w = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        self.active.fetch_add(1, SeqCst);
        self.started.fetch_add(1, SeqCst);
        w.push((t, None));
        w.len() - 1
    }

    /// The snapshot `idx` ended at `t`.
    pub fn end(&self, idx: usize, t: u64) {
        let mut w = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = w.get_mut(idx) {
            slot.1 = Some(t);
            self.active.fetch_sub(1, SeqCst);
        }
    }

    /// Now, for a later [`SnapshotTimeline::overlapped_since`].
    pub fn mark(&self) -> SnapshotMark {
        SnapshotMark {
            active: self.active.load(SeqCst),
            started: self.started.load(SeqCst),
        }
    }

    /// Whether a snapshot was in flight at some point between `mark` and now: one was active
    /// then, or one has started since. O(1), for per-request use.
    pub fn overlapped_since(&self, mark: SnapshotMark) -> bool {
        mark.active > 0 || self.started.load(SeqCst) > mark.started
    }

    /// Whether any snapshot was in flight at some point of `[start, end]`.
    pub fn overlaps(&self, start: u64, end: u64) -> bool {
        let w = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        w.iter()
            .any(|&(s, e)| s <= end && e.is_none_or(|e| e >= start))
    }
}

/// Per-operation context handed to [`Provider::execute`].
#[derive(Debug)]
pub struct OpCtx {
    origin: Instant,
    /// Set by the engine; `None`: mapped from `origin` when asked (no clock reads per event).
    origin_wall: Option<SystemTime>,
    phases: Mutex<Vec<Phase>>,
    retries: Mutex<Vec<Retry>>,
    ledger: Arc<Ledger>,
    snapshots: Arc<SnapshotTimeline>,
    io: Mutex<Vec<IoReport>>,
    /// Where live I/O goes (`io_phase` events; see [`OpCtx::io_interval`]), with the event's
    /// tenant.
    live_io: Option<(Arc<crate::Live>, String)>,
    completed: Mutex<Option<Instant>>,
    /// The run's stop flag (set by Ctrl-C or `RunControl::request_stop`), when the engine gave
    /// it.
    stop: Option<Arc<AtomicBool>>,
    /// Set once the provider reported anything above, so the engine takes no lock for an
    /// operation that reported nothing (most, at high rates).
    reported: AtomicBool,
    /// When the operation was due (ns since the origin), set by the engine: see
    /// [`OpCtx::due_ns`].
    due: Option<u64>,
    /// An `io_phase`'s hold on its workload's I/O start (see [`OpCtx::io_started`]).
    started: Mutex<Option<crate::deps::StartedHold>>,
    /// Trace id of the event.
    pub event_id: u64,
}

/// I/O latencies a provider measured for an `io`/`io_phase` event, already split by whether a
/// snapshot was in flight (see [`SnapshotTimeline`]).
#[derive(Debug, Clone)]
pub struct IoReport {
    /// Latencies (ns) of requests with no snapshot in flight.
    pub without_snapshot: hdrhistogram::Histogram<u64>,
    /// Latencies (ns) of requests with a snapshot in flight.
    pub with_snapshot: hdrhistogram::Histogram<u64>,
    /// The I/O engine's own issue lateness (submission − intended, ns) and service times,
    /// when the provider has them (iogen's per-kind histograms): judged as
    /// `io_phase.lateness` against the service times' median.
    pub issue: Option<IssueLateness>,
    /// The I/O engine the event ran on, when the provider knows it (the run's summary lists
    /// it per event: [`crate::IoSplit::backends`]).
    pub backend: Option<crate::record::IoBackend>,
}

/// An I/O engine's issue lateness and service times of one `io`/`io_phase` event (ns).
#[derive(Debug, Clone)]
pub struct IssueLateness {
    /// Submission − intended.
    pub lateness: hdrhistogram::Histogram<u64>,
    /// Completion − submission.
    pub service: hdrhistogram::Histogram<u64>,
}

impl OpCtx {
    /// A context for event `event_id` of a run started at `origin`.
    pub fn new(
        origin: Instant,
        event_id: u64,
        ledger: Arc<Ledger>,
        snapshots: Arc<SnapshotTimeline>,
    ) -> Self {
        Self {
            origin,
            origin_wall: None,
            phases: Mutex::new(Vec::new()),
            retries: Mutex::new(Vec::new()),
            ledger,
            snapshots,
            io: Mutex::new(Vec::new()),
            live_io: None,
            completed: Mutex::new(None),
            stop: None,
            reported: AtomicBool::new(false),
            due: None,
            started: Mutex::new(None),
            event_id,
        }
    }

    pub(crate) fn with_started(self, hold: Option<crate::deps::StartedHold>) -> Self {
        *self.started.lock().unwrap_or_else(PoisonError::into_inner) = hold;
        self
    }

    /// Says that this `io_phase`'s I/O has begun (its iogen runs): a later detach, abort or
    /// reschedule of its workload waits for this (or for the event's end), so the trace's
    /// order holds when a slow attach released both at once. Providers call it the moment
    /// the I/O starts; once is enough (later calls do nothing).
    pub fn io_started(&self) {
        drop(
            self.started
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
    }

    /// Sets when the operation was due (ns since the origin; see [`OpCtx::due_ns`]).
    #[must_use]
    pub fn with_due(mut self, ns: u64) -> Self {
        self.due = Some(ns);
        self
    }

    /// When the operation was due, ns since the origin: its scheduled instant in the trace,
    /// or, for one that waited for a dependency or a concurrency slot, the later instant that
    /// wait was released. The engine's own lateness is the call's time ([`OpCtx::now_ns`])
    /// minus this. `None` outside a run's clock (the header's setup operations).
    pub fn due_ns(&self) -> Option<u64> {
        self.due
    }

    /// Nanoseconds since the run origin.
    pub fn now_ns(&self) -> u64 {
        ns_since(self.origin, Instant::now())
    }

    /// The run origin.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Sets the run origin's wall-clock instant (the engine's, fixed once per run; without
    /// it, [`OpCtx::origin_wall`] maps `origin` to the wall clock when asked).
    #[must_use]
    pub fn with_origin_wall(mut self, at: SystemTime) -> Self {
        self.origin_wall = Some(at);
        self
    }

    /// Sends this operation's [`OpCtx::io_interval`]s to `live` as the I/O of `tenant`.
    pub fn with_live_io(mut self, live: Arc<crate::Live>, tenant: &str) -> Self {
        self.live_io = Some((live, tenant.to_owned()));
        self
    }

    /// Gives the operation the run's stop flag (see [`OpCtx::stop_flag`]).
    #[must_use]
    pub fn with_stop(mut self, stop: Arc<AtomicBool>) -> Self {
        self.stop = Some(stop);
        self
    }

    /// The run's stop flag, set once the run was asked to stop (Ctrl-C): an operation that
    /// is only waiting for the cluster to start something (a pod) may then end at once, with
    /// class `cancelled`, rather than wait out the stop's grace. `None` outside a run.
    pub fn stop_flag(&self) -> Option<&Arc<AtomicBool>> {
        self.stop.as_ref()
    }

    /// One interval histogram (response times, ns) of the I/O of `kind` (`read`, `write`, …)
    /// this operation is doing, as it arrives (iogen writes one per interval): the live
    /// per-tenant I/O metrics. Nothing without a live sink.
    pub fn io_interval(&self, kind: &str, h: &hdrhistogram::Histogram<u64>) {
        if let Some((live, tenant)) = &self.live_io {
            live.observe_io(tenant, kind, h);
        }
    }

    /// The run origin on the wall clock: where a clock stamp from elsewhere (an iogen
    /// interval log's `#[StartTime]`, written by the node's clock) meets run time.
    pub fn origin_wall(&self) -> SystemTime {
        self.origin_wall.unwrap_or_else(|| wall_of(self.origin))
    }

    /// Marks the end of phase `name` now.
    pub fn phase(&self, name: &str) {
        self.phase_at(name, Instant::now());
    }

    /// Marks the end of phase `name` at `when`: the instant the provider learned of it (e.g.
    /// when the watch event that showed it arrived), which may be earlier than now.
    pub fn phase_at(&self, name: &str, when: Instant) {
        let at = ns_since(self.origin, when);
        self.reported.store(true, SeqCst);
        self.phases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Phase {
                name: name.to_owned(),
                at,
            });
    }

    /// The phases marked so far, in the order they were marked (the record gets them when
    /// the operation ends): where an operation that is still going, or never gets a record
    /// (an I/O stream's start), spent its time.
    pub fn phases_so_far(&self) -> Vec<Phase> {
        self.phases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Reports a failure the cluster retried by itself while the operation ran (e.g. the
    /// kubelet's `FailedMount` Warnings): `count` is how many times `reason` was reported so
    /// far (the latest report per reason wins, so it may be reported again as it grows) and
    /// `message` its last message. They go to the record's `retries`.
    pub fn retried(&self, reason: &str, count: u32, message: &str) {
        self.reported.store(true, SeqCst);
        let mut r = self.retries.lock().unwrap_or_else(PoisonError::into_inner);
        match r.iter_mut().find(|x| x.reason == reason) {
            Some(x) => {
                x.count = x.count.max(count);
                message.clone_into(&mut x.message);
            }
            None => r.push(Retry {
                reason: reason.to_owned(),
                count,
                message: message.to_owned(),
            }),
        }
    }

    /// The retried failures reported so far (see [`OpCtx::retried`]).
    pub fn retries(&self) -> Vec<Retry> {
        self.retries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Reports the instant the operation completed (e.g. when the watch event that showed
    /// its completion arrived), which may be earlier than when `execute` returns. The engine
    /// uses it for a successful operation's `completed`, kept within `[started, return]`;
    /// the last call wins.
    pub fn completed_at(&self, when: Instant) {
        self.reported.store(true, SeqCst);
        *self
            .completed
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(when);
    }

    /// The completion instant reported with [`OpCtx::completed_at`], as ns since the origin.
    pub(crate) fn completed_ns(&self) -> Option<u64> {
        if !self.reported.load(SeqCst) {
            return None;
        }
        self.completed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .map(|t| ns_since(self.origin, t))
    }

    /// The run's ledger: write every object to it *before* creating it.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// When snapshots were in flight.
    pub fn snapshots(&self) -> &SnapshotTimeline {
        &self.snapshots
    }

    /// Adds measured I/O latencies to the run's I/O split.
    pub fn report_io(&self, r: IoReport) {
        self.reported.store(true, SeqCst);
        self.io
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(r);
    }

    pub(crate) fn take(&self) -> (Vec<Phase>, Vec<IoReport>, Vec<Retry>) {
        if !self.reported.load(SeqCst) {
            return (Vec::new(), Vec::new(), Vec::new());
        }
        (
            std::mem::take(&mut *self.phases.lock().unwrap_or_else(PoisonError::into_inner)),
            std::mem::take(&mut *self.io.lock().unwrap_or_else(PoisonError::into_inner)),
            std::mem::take(&mut *self.retries.lock().unwrap_or_else(PoisonError::into_inner)),
        )
    }
}

/// The wall-clock instant of a monotonic instant, through the present.
pub fn wall_of(t: Instant) -> SystemTime {
    let (now, wall) = (Instant::now(), SystemTime::now());
    if t >= now {
        wall + (t - now)
    } else {
        wall.checked_sub(now - t).unwrap_or(SystemTime::UNIX_EPOCH)
    }
}

/// Nanoseconds since the Unix epoch (negative before it).
pub fn epoch_ns(t: SystemTime) -> i128 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

/// Where an `io_phase` unit's interval log starts on the run's time axis (ns since the run
/// origin): the one convention of both providers and `analyze`.
///
/// Interval timestamps are offsets from iogen's base (its time 0); the log's `#[StartTime]`
/// (`log_start`, ns since the epoch) is that base on the clock of the machine iogen ran on
/// (a pod's node). `base ≈ log_start − origin_wall`, kept within what the run itself
/// observed: not before the `io_phase` call started (`span.0`), not after its end minus
/// iogen's own run time (`span.1 − elapsed`). The clamp bounds a node clock's skew; without
/// a StartTime the upper bound is used, else the call's start.
pub fn interval_base_ns(
    log_start: Option<i128>,
    origin_wall: i128,
    span: Option<(u64, u64)>,
    elapsed: Option<u64>,
) -> u64 {
    let lo = span.map(|s| s.0);
    let hi = span.zip(elapsed).map(|((_, c), e)| c.saturating_sub(e));
    let est = log_start.map(|s| u64::try_from((s - origin_wall).max(0)).unwrap_or(u64::MAX));
    let mut b = est.or(hi).or(lo).unwrap_or(0);
    if let Some(lo) = lo {
        b = b.max(lo);
    }
    if let Some(hi) = hi {
        b = b.min(hi.max(lo.unwrap_or(0)));
    }
    b
}

/// An `io_phase`'s I/O report from iogen's interval log (`bytes`): the response histograms of
/// every kind summed apart for the intervals during which a snapshot was in flight and the
/// rest. The intervals are placed on the run's time axis by [`interval_base_ns`] (`span` the
/// `io_phase` call, `elapsed` iogen's own run time when known), as `analyze` places them. The
/// log carries response times only: no issue lateness, no backend.
pub fn io_report_from_interval_log(
    bytes: &[u8],
    ctx: &OpCtx,
    span: (u64, u64),
    elapsed: Option<u64>,
) -> Result<IoReport, ProviderError> {
    let base = interval_base_ns(
        iogen::log_start_time(bytes),
        epoch_ns(ctx.origin_wall()),
        Some(span),
        elapsed,
    );
    let (with_snapshot, without_snapshot) = iogen::split_responses(bytes, |start, len| {
        let s = base + (start * 1e9) as u64;
        ctx.snapshots().overlaps(s, s + (len * 1e9) as u64)
    })
    .map_err(|e| ProviderError::new("io_failed", e.to_string()))?;
    Ok(IoReport {
        with_snapshot,
        without_snapshot,
        issue: None,
        backend: None,
    })
}

/// What cleanup did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CleanupReport {
    /// Ledger entries removed.
    pub removed: u64,
    /// Ledger entries that were already gone.
    pub already_gone: u64,
    /// Entries that could not be removed, with the reason.
    pub failed: Vec<String>,
}

/// A storage backend the engine replays against.
///
/// `execute` is called on a tokio multi-thread runtime once per event (after the event's
/// dependencies completed and a concurrency slot was free); blocking work belongs in
/// `tokio::task::spawn_blocking` or the provider's own threads. A provider must be able to
/// serve many operations at once.
pub trait Provider: Send + Sync + 'static {
    /// Short name (`sim`, `local`, …), recorded in the manifest.
    fn name(&self) -> &'static str;

    /// The provider's configuration as recorded in the manifest (enough to rebuild it for
    /// `cleanup`).
    fn config(&self) -> serde_json::Value;

    /// Called once before the clock starts. Returns notices to show the user (e.g. a fallback).
    fn prepare(&self, run: &RunInfo) -> Result<Vec<String>, ProviderError>;

    /// What the provider found about its environment during `prepare` (for a cluster: server
    /// version, nodes, storage and snapshot classes, CSI drivers), for the run manifest.
    /// `Null` when it has nothing to say.
    fn environment(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// Called once after the header's objects are set up, just before the clock starts (e.g.
    /// to take the baseline of [`Provider::cluster_timing`]).
    fn before_clock(&self) {}

    /// The smallest typical latency (median, ns) this provider is configured to have, when it
    /// knows one before the run (the sim, from its configuration): the engine compares the
    /// host's timing floor with it before the clock starts.
    fn expected_fastest_ns(&self) -> Option<u64> {
        None
    }

    /// The cluster's own timing of the run's calls (CSI sidecars, API server), asked once
    /// after the last operation and before cleanup; `None` when the provider has none.
    fn cluster_timing(&self) -> Option<crate::cluster::ClusterTiming> {
        None
    }

    /// Notices about the run as a whole, asked once after the last operation (e.g. client-side
    /// throttling that delayed requests); they join the summary's notices.
    fn finish_notices(&self) -> Vec<String> {
        Vec::new()
    }

    /// Client-side limits that held back the provider's own requests during the run, asked
    /// once after the last operation (one entry per limiter; empty when it has none). They
    /// go into the run's verdict: see the `validity` module.
    fn client_throttling(&self) -> Vec<ClientThrottling> {
        Vec::new()
    }

    /// Whether every call of [`Provider::execute`] is cheap and never blocks up to its first
    /// `.await` that waits (no blocking I/O, no `block_in_place`, no long computation), so
    /// the engine may begin calls on its timing lanes, polling each once there and giving
    /// a runtime task only to a call still pending. Otherwise (the default) each batch of
    /// due events is handed to a runtime worker first, where a blocking call stalls only
    /// that worker (and shows in `workers_busy`). Starting inline saves a worker wake-up per
    /// batch: the engine's maximum rate and start lateness (docs/PERFORMANCE.md).
    fn starts_inline(&self) -> bool {
        false
    }

    /// Opens a stream for the bare `io` events of `volume` (no workload holds it), attaching
    /// the volume implicitly: see [`crate::streams`]. Called on the reader thread, ahead of
    /// the first request's time; may block briefly. `None` (the default): the provider takes
    /// `io` events one [`Provider::execute`] call at a time.
    fn open_io_stream(
        &self,
        volume: &trace_format::Name,
    ) -> Result<Option<Box<dyn crate::streams::IoStream>>, ProviderError> {
        let _ = volume;
        Ok(None)
    }

    /// Opens the streams of several volumes (see [`Provider::open_io_stream`]), one answer
    /// per volume in their order. A provider whose streams take long to set up (a pod each)
    /// opens them together; once `stop` is set (the run was stopped) it returns promptly,
    /// leaving nothing behind, with class `cancelled` for what it did not open. The default
    /// opens them one after another.
    fn open_io_streams(
        &self,
        volumes: &[trace_format::Name],
        stop: &AtomicBool,
    ) -> Vec<Result<Option<Box<dyn crate::streams::IoStream>>, ProviderError>> {
        volumes
            .iter()
            .map(|v| {
                if stop.load(SeqCst) {
                    Err(ProviderError::new("cancelled", "the run was stopped"))
                } else {
                    self.open_io_stream(v)
                }
            })
            .collect()
    }

    /// Performs one event's operation. Markers are never passed here.
    fn execute(
        &self,
        ev: Arc<Event>,
        ctx: Arc<OpCtx>,
    ) -> impl Future<Output = Result<(), ProviderError>> + Send;

    /// Removes the run-owned objects named by `leftovers` (ledger entries created and not
    /// released, oldest first) and only those. Blocking; idempotent.
    fn cleanup(&self, run: &RunInfo, leftovers: &[LedgerEntry]) -> CleanupReport;
}

#[cfg(test)]
mod tests {
    use super::interval_base_ns;

    #[test]
    fn the_interval_base_is_the_log_start_clamped_to_the_record() {
        let origin = 1_000_000_000_000i128;
        // StartTime 5.004 s after the origin; record 5.002…95.05 s; elapsed 90 s.
        let span = Some((5_002_000_000, 95_050_000_000));
        let el = Some(90_000_000_000);
        let base = |start: Option<i128>| interval_base_ns(start, origin, span, el);
        assert_eq!(base(Some(origin + 5_004_000_000)), 5_004_000_000);
        // A StartTime before the call started (a node clock behind ours): the call start.
        assert_eq!(base(Some(origin + 1_000_000_000)), 5_002_000_000);
        // After the latest possible base (a node clock ahead): the latest possible base.
        assert_eq!(base(Some(origin + 9_000_000_000)), 5_050_000_000);
        // No StartTime: completed − elapsed.
        assert_eq!(base(None), 5_050_000_000);
        assert_eq!(interval_base_ns(None, origin, None, None), 0);
        // Without elapsed only the lower bound holds.
        assert_eq!(
            interval_base_ns(Some(origin + 7_000_000_000), origin, span, None),
            7_000_000_000
        );
        // An elapsed longer than the call (iogen's clock ran before the record started?) never
        // puts the base before the call.
        assert_eq!(
            interval_base_ns(None, origin, span, Some(100_000_000_000)),
            5_002_000_000
        );
    }
}
