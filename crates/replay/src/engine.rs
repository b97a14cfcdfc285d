//! The engine: timing lanes dispatching events at absolute deadlines onto a tokio
//! multi-thread runtime, where each event waits for its dependencies and a concurrency slot,
//! runs on the provider under an optional timeout, and sends its record to the sink thread.
//!
//! Shutdown (signal, `--fail-fast`, or a trace read error) stops dispatching, gives in-flight
//! operations `grace` to finish, cancels the rest (recorded as `cancelled`), drops the runtime
//! (which waits for blocking provider work still running), then removes every object the
//! ledger says the run still owns, and writes the summary and final manifest.

mod prepare;
mod summary;

pub use crate::control::RunControl;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use tokio::sync::{Semaphore, watch};
use trace_format::{Name, OpType, TraceReader};

use crate::Error;
use crate::deps::Deps;
use crate::event::{self, Shared};
use crate::ledger::Ledger;
use crate::live::Live;
use crate::probe::Probe;
use crate::provider::{CleanupReport, Provider, RunInfo, SnapshotTimeline};
use crate::record::{Percentiles, Summary};
use crate::rundir::{Manifest, RunDir};
use crate::sink::{Sink, SinkResult, ToSink};
use crate::streams::{self};
use crate::timing;
use crate::validity::{self, ValidityOptions};
use prepare::prepare;
use summary::summarize;
use trace_format::units::fmt_ms;

/// Engine options (recorded in the manifest).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunOptions {
    /// Replay speed: the trace is compressed by it ([`trace_format::rewrite::compress`]):
    /// event `at` is dispatched at origin + at / speed, an `io_phase` lasts duration / speed.
    pub speed: f64,
    /// What the speed does to `io_phase` open-loop rates.
    #[serde(default)]
    pub io_rate: trace_format::rewrite::IoRate,
    /// Maximum operations of a type running at the provider at once.
    pub concurrency: BTreeMap<OpType, usize>,
    /// Per op type timeout of the provider call, ns.
    pub timeouts: BTreeMap<OpType, u64>,
    /// Stop dispatching at the first failed event.
    pub fail_fast: bool,
    /// After a stop, how long in-flight operations may still finish, ns.
    pub grace_ns: u64,
    /// Seed of random choices (recorded; providers take theirs from their config).
    pub seed: u64,
    /// tokio worker threads.
    pub workers: usize,
    /// Program name and version for the manifest.
    pub tool: String,
    /// How the timing lanes run.
    #[serde(default)]
    pub timing: timing::TimingOptions,
    /// Thresholds of the run's verdict.
    #[serde(default)]
    pub validity: ValidityOptions,
    /// Start the clock at this wall-clock instant (after setup), so that several drivers of
    /// one split trace run on one clock; `None`: as soon as setup is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<jiff::Timestamp>,
    /// How long to measure the host's timing floor before the clock starts, ns (0: not at
    /// all): the completion probe on the idle runtime (`manifest.host.timing_floor`).
    #[serde(default)]
    pub floor_probe_ns: u64,
    /// The user's labels of the run: recorded in the manifest's `labels` (not among the
    /// options, so that runs of different builds do not differ in their options).
    #[serde(skip)]
    pub labels: crate::rundir::Labels,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            speed: 1.0,
            io_rate: trace_format::rewrite::IoRate::Keep,
            concurrency: BTreeMap::new(),
            timeouts: BTreeMap::new(),
            fail_fast: false,
            grace_ns: 30_000_000_000,
            seed: 0,
            workers: 2,
            tool: format!("cnsreplay {}", env!("CARGO_PKG_VERSION")),
            timing: timing::TimingOptions::default(),
            validity: ValidityOptions::default(),
            start_at: None,
            floor_probe_ns: 0,
            labels: Default::default(),
        }
    }
}

/// Waits until `at` (wall clock); a notice when it had passed already (setup took longer).
fn wait_for_start(at: jiff::Timestamp, notices: &mut Vec<String>) {
    let now = jiff::Timestamp::now();
    match Duration::try_from(at.duration_since(now)) {
        Ok(d) => {
            tracing::info!("waiting {:.3} s for --start-at {at}", d.as_secs_f64());
            std::thread::sleep(d);
        }
        Err(_) => notices.push(format!(
            "the clock started {:.3} s after --start-at {at}: setup took longer",
            now.duration_since(at).as_secs_f64()
        )),
    }
}

/// How long before a `--start-at` instant the floor probe ends, and the shortest probe worth
/// taking (50 probes).
const FLOOR_MARGIN: Duration = Duration::from_millis(100);

/// The host's timing floor, before the clock: the completion probe on the idle runtime for
/// `floor_probe_ns` (like cyclictest: what waking a task costs on this host now, which every
/// tool on it pays). Logged, kept in the manifest, and when its p99 is already more than the
/// lateness limit's fraction (`start_fraction`, 1 %) of the provider's fastest expected
/// latency, said before the clock starts (and among the run's notices).
fn timing_floor<P: Provider>(
    p: &mut Prepared,
    provider: &P,
    opts: &RunOptions,
) -> Result<(), Error> {
    // With `--start-at` the probe ends in time for the shared origin (a margin before it), or
    // is skipped when there is no time left for at least 50 probes.
    let mut length = Duration::from_nanos(opts.floor_probe_ns);
    if let Some(at) = opts.start_at {
        let left = Duration::try_from(at.duration_since(jiff::Timestamp::now()))
            .unwrap_or_default()
            .saturating_sub(FLOOR_MARGIN);
        // The wake-cost measurement after the probe takes a fifth of its length more.
        length = length.min(left.mul_f64(5.0 / 6.0));
        if length < FLOOR_MARGIN {
            let n =
                format!("no time for the host's timing floor before --start-at {at}: not measured");
            tracing::info!("{n}");
            p.notices.push(n);
            return Ok(());
        }
    }
    let probe = Probe::start(p.rt.handle().clone(), None)?;
    std::thread::sleep(length);
    let floor = Percentiles::of(&probe.finish());
    tracing::info!(
        "host timing floor: wake-up p50 {}, p99 {}, p99.9 {}, max {} ({} probes in {})",
        fmt_ms(floor.p50, 3),
        fmt_ms(floor.p99, 3),
        fmt_ms(floor.p999, 3),
        fmt_ms(floor.max, 3),
        floor.count,
        fmt_ms(u64::try_from(length.as_nanos()).unwrap_or(u64::MAX), 0),
    );
    if let Some(fastest) = provider.expected_fastest_ns()
        && (floor.p99 as f64) > opts.validity.start_fraction * fastest as f64
    {
        let n = format!(
            "the host's timing floor (wake-up p99 {}) is already more than {:.0} % of the \
             fastest latency the provider is configured for ({}): those numbers will carry \
             a tool error of that size (their `tool_ns`)",
            fmt_ms(floor.p99, 3),
            opts.validity.start_fraction * 100.0,
            fmt_ms(fastest, 3)
        );
        tracing::warn!("{n}");
        p.notices.push(n);
    }
    p.manifest.host.timing_floor = Some(floor);
    p.manifest.host.wake_cost = wake_cost(opts, length);
    Ok(())
}

/// How long the wake-cost thread runs: a fifth of the floor probe, at most 200 ms (5 000
/// wake-ups at the default grid).
const WAKE_COST_MAX: Duration = Duration::from_millis(200);

/// What looking at the clock costs on this host, at the grid the timing lanes keep at high
/// event rates (`min_wake` / lanes): logged and kept in the manifest. At rates that fill the
/// grid the lanes pay it and the rest of the engine gets what is left; a trace's rate is not
/// known before its clock starts, so this is not a notice.
fn wake_cost(opts: &RunOptions, probe: Duration) -> Option<crate::precise::WakeCost> {
    let lanes = opts.timing.lanes_for(crate::precise::allowed_cpus().len());
    let grid = Duration::from_nanos(opts.timing.min_wake_ns / lanes.max(1) as u64)
        .max(Duration::from_micros(10));
    let c = match crate::precise::wake_cost(grid, (probe / 5).min(WAKE_COST_MAX)) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("could not measure the cost of a timer wake-up: {e}");
            return None;
        }
    };
    tracing::info!(
        "a timer wake-up costs {} of CPU here: waking every {} (the timing lanes' grid at \
         event rates that fill it) takes {:.0} % of a CPU ({} wake-ups, {} apart)",
        fmt_ms(c.cpu_ns_per_wake, 3),
        fmt_ms(c.period_ns, 3),
        c.cpu_share() * 100.0,
        c.wakes,
        fmt_ms(c.wall_ns_per_wake, 3),
    );
    Some(c)
}

/// How far after setup the run's clock starts: the first events are not late because the
/// sink and the timing lanes were still being set up.
const START_LEAD: Duration = Duration::from_millis(5);

/// What a finished run returns.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The final manifest.
    pub manifest: Manifest,
    /// The summary (also in `summary.json`).
    pub summary: Summary,
}

/// Replays the trace at `trace` against `provider`, writing the run directory `run_dir`
/// (which must not exist or be empty). Blocks until the run has finished and been cleaned up.
///
/// The stages: [`prepare`] (options, run directory, manifest, provider, runtime, the
/// header's volumes), [`clock`] (the reader and the timing lanes until the trace ends or a
/// stop), [`drain`] (in-flight operations, cancelled after the grace
/// period of a stop), [`clean_up`] (the runtime, then every object the run still owns) and
/// [`summarize`] (summary and final manifest).
pub fn run<P: Provider>(
    trace: &Path,
    run_dir: &Path,
    provider: &Arc<P>,
    opts: &RunOptions,
    control: &RunControl,
) -> Result<RunOutcome, Error> {
    let mut prepared = prepare(trace, run_dir, provider, opts, control)?;
    if opts.floor_probe_ns > 0 {
        timing_floor(&mut prepared, provider.as_ref(), opts)?;
    }
    if let Some(at) = opts.start_at {
        wait_for_start(at, &mut prepared.notices);
    }
    provider.before_clock();
    let steal = validity::host::steal_ns();
    let clocked = clock(&mut prepared, provider, opts, control)?;
    drain(&control.live(), control, opts.grace_ns, &clocked.cancel);
    let host_steal_ns = validity::host::since(steal);
    let workers_busy = clocked.workers_busy(&prepared.rt);
    let completion_lateness = clocked.probe.finish();
    drop(clocked.handoff);
    let Prepared {
        rd,
        manifest,
        info,
        ledger,
        rt,
        notices,
        streams,
        ..
    } = prepared;
    // Before cleanup: its deletes are not the run's calls.
    let cluster = provider.cluster_timing();
    let (stopped, cleanup) = clean_up(rt, control, &ledger, provider.as_ref(), &info)?;
    let sunk = clocked
        .sink
        .join()
        .map_err(|_| std::io::Error::other("the record sink thread panicked"))??;
    summarize(Finished {
        rd: &rd,
        manifest,
        provider: provider.as_ref(),
        opts,
        control,
        stopped,
        workers_busy,
        completion_lateness: Percentiles::of(&completion_lateness),
        sunk,
        cleanup,
        notices,
        origin: clocked.origin,
        streams: std::mem::take(&mut *streams.lock().unwrap_or_else(PoisonError::into_inner)),
        cluster,
        host_steal_ns,
    })
}

/// What [`prepare`] sets up for the rest of the run.
struct Prepared {
    rd: RunDir,
    manifest: Manifest,
    info: RunInfo,
    ledger: Arc<Ledger>,
    rt: tokio::runtime::Runtime,
    snapshots: Arc<SnapshotTimeline>,
    /// Taken by [`clock`].
    reader: Option<(TraceReader, Deps)>,
    notices: Vec<String>,
    /// What the I/O streams left when they ended.
    streams: Arc<Mutex<streams::Collected>>,
    /// How long writing the manifest took in [`prepare`].
    manifest_write: Duration,
}

/// What [`clock`] leaves running: the sink (until the last record is in) and the means to
/// cancel operations still in flight.
struct Clocked {
    sink: std::thread::JoinHandle<std::io::Result<SinkResult>>,
    cancel: watch::Sender<bool>,
    origin: Instant,
    /// The workers' busy time when the clock started.
    busy_before: Duration,
    /// The completion-side probe, from just before the first event until the drain.
    probe: Probe,
    /// The hand-off thread of a provider whose calls start inline; dropped after the drain
    /// and the probe.
    handoff: Option<event::HandoffThread>,
}

impl Clocked {
    /// Mean busy fraction of the runtime's workers from the origin until now, or of the
    /// hand-off thread when that was busier (it finishes an inline provider's calls: its
    /// saturation delays their completions as the workers' would). `None` for a run too
    /// short to say.
    fn workers_busy(&self, rt: &tokio::runtime::Runtime) -> Option<f64> {
        let period = Instant::now().saturating_duration_since(self.origin);
        let workers = rt.metrics().num_workers();
        let busy = busy_time(rt.handle()).saturating_sub(self.busy_before);
        (period >= Duration::from_millis(1) && workers > 0).then(|| {
            let handoff = self.handoff.as_ref().map_or(0.0, |h| {
                h.handoff().busy().as_secs_f64() / period.as_secs_f64()
            });
            (busy.as_secs_f64() / (period.as_secs_f64() * workers as f64)).max(handoff)
        })
    }
}

/// Starts the reader, waits for the first event, sets the origin, starts the sink and runs
/// the timing lanes until the trace ends or a stop is requested.
/// Events are started on the lanes as they are claimed ([`event::OnLane`]) or in one runtime
/// task per wake-up ([`event::Gathered`]); they may still be running when this returns.
fn clock<P: Provider>(
    p: &mut Prepared,
    provider: &Arc<P>,
    opts: &RunOptions,
    control: &RunControl,
) -> Result<Clocked, Error> {
    let (reader, deps) = p
        .reader
        .take()
        .ok_or_else(|| Error::Options("the run was clocked twice".into()))?;
    let origin_cell = Arc::new(OnceLock::new());
    let lead = Arc::new(AtomicU64::new(0));
    let opener = provider.clone();
    let router = streams::Router::new(
        Box::new(move |v: &[Name], stop: &AtomicBool| opener.open_io_streams(v, stop)),
        origin_cell.clone(),
        control.stop_flag(),
        p.streams.clone(),
        p.info
            .header
            .volumes
            .iter()
            .map(|v| v.name.clone())
            .collect(),
        lead.clone(),
        control.live(),
    );
    let file = p.manifest.trace.path.clone();
    let (reader_thread, feed) = timing::spawn_reader(
        reader,
        file,
        deps,
        opts.speed,
        opts.io_rate,
        control.stop_flag(),
        Some(router),
    )?;
    // The clock starts once the first event is decoded and planned (a YAML trace is parsed
    // whole before its first event, which must not count as lateness of the first events),
    // and START_LEAD later, so that setting up the sink and the timing lanes does not either;
    // with I/O streams open, at least their lookahead later, so that requests due at time 0
    // reach their streams as far ahead as later ones (a pod's stream is fed 250 ms ahead).
    feed.wait_first();

    // The clock of release instants (resume lateness) starts before the run's origin.
    let _ = crate::deps::mono_ns();
    // Recorded before the first event, so a crashed run's records can be placed too. The
    // manifest holds the trace header (a steady-state header of 554 k objects is ~125 MB of
    // JSON, about a second to write): the origin is chosen twice the last write's time ahead,
    // and if the write still ends after it, again, so the write is never
    // lateness of the first events.
    let base_lead = START_LEAD.max(Duration::from_nanos(lead.load(Relaxed)));
    // A small manifest's earlier write time says little (a loaded machine's hiccup would
    // push the origin past `--start-at`): it starts at the plain lead and is retried if late.
    let mut last_write = Some(p.manifest_write)
        .filter(|w| *w > Duration::from_millis(50))
        .unwrap_or_default();
    let (origin, origin_wall) = loop {
        let lead = base_lead.max(last_write * 2);
        let (origin, origin_wall) = (Instant::now() + lead, SystemTime::now() + lead);
        p.manifest.origin = jiff::Timestamp::try_from(origin_wall).ok();
        let t = Instant::now();
        p.rd.write_manifest(&p.manifest)?;
        last_write = t.elapsed();
        // With `--start-at` the drivers of a split trace share the origin: it is not moved
        // (a slow write then shows as the first events' lateness).
        if Instant::now() <= origin || opts.start_at.is_some() {
            break (origin, origin_wall);
        }
        tracing::debug!("the manifest took {last_write:?} to write, past the origin: again");
    };
    let _ = origin_cell.set(origin);
    let (done_tx, done_rx) = futures::channel::mpsc::unbounded::<ToSink>();
    let sink = Sink::create(
        p.rd.path(),
        origin,
        origin_wall,
        opts.validity.window_ns,
        control.live(),
    )?;
    let sink = std::thread::Builder::new()
        .name("cnsreplay-sink".into())
        .spawn(move || sink.run(done_rx))?;
    let (cancel_tx, cancel_rx) = watch::channel(false);
    let live = control.live();
    let inject_delay = injected_delay()?;
    if let Some(d) = inject_delay {
        p.notices.push(format!(
            "test hook {INJECT_DELAY_ENV}: every dispatched batch held up {d:?} (an engine \
             delay the validity checks must catch)"
        ));
    }
    // Calls that start inline continue on the hand-off thread, not on a runtime task.
    let (handoff, handoff_rx) = provider.starts_inline().then(event::Handoff::new).unzip();
    let shared = Arc::new(Shared {
        provider: provider.clone(),
        origin,
        origin_wall,
        ledger: p.ledger.clone(),
        snapshots: p.snapshots.clone(),
        done: done_tx,
        live: live.clone(),
        cancel: cancel_rx,
        sems: opts
            .concurrency
            .iter()
            .map(|(&op, &n)| (op, (Arc::new(Semaphore::new(n)), Arc::default())))
            .collect(),
        inject_delay,
        timeouts: opts
            .timeouts
            .iter()
            .map(|(&op, &ns)| (op, Duration::from_nanos(ns)))
            .collect(),
        fail_fast: opts.fail_fast,
        control: control.clone(),
        handoff,
    });

    // The timing lanes. Each batch of due events is started by the lane that claimed it, in
    // the runtime's context, when the provider's calls start inline (what continues goes to
    // the hand-off thread), else by a runtime task (what continues goes to the runtime).
    let handle = p.rt.handle().clone();
    let busy_before = busy_time(&handle);
    let inline = shared.handoff.is_some();
    let handoff = event::start_handoff(&shared, handoff_rx, handle.clone())?;
    let probe = Probe::start(
        handle.clone(),
        handoff.as_ref().map(|h| h.handoff().clone()),
    )?;
    let (sh, rt) = (&shared, &handle);
    let timing_notices = if inline && shared.inject_delay.is_none() {
        timing::dispatch(
            feed,
            origin,
            opts.timing,
            control,
            &live,
            event::OnLane { sh, rt },
        )
    } else {
        let starter = event::Gathered {
            sh,
            rt,
            on_lane: inline,
        };
        timing::dispatch(feed, origin, opts.timing, control, &live, starter)
    }?;
    p.notices.extend(timing_notices);
    let _ = reader_thread.join();
    Ok(Clocked {
        sink,
        cancel: cancel_tx,
        origin,
        busy_before,
        probe,
        handoff,
    })
}

/// Test hook: a duration (`2ms`) by which the engine holds up every dispatched batch
/// before starting it — an engine delay of known size, for measuring whether the validity
/// checks catch one (`scripts/calibrate-validity.sh`). Never set it for a measurement.
pub const INJECT_DELAY_ENV: &str = "CNSREPLAY_TEST_ENGINE_DELAY";

fn injected_delay() -> Result<Option<Duration>, Error> {
    match std::env::var(INJECT_DELAY_ENV) {
        Ok(v) if !v.is_empty() => trace_format::units::parse_duration(&v)
            .map(|ns| Some(Duration::from_nanos(ns)))
            .map_err(|e| Error::Options(format!("{INJECT_DELAY_ENV}={v}: {e}"))),
        _ => Ok(None),
    }
}

/// Time the runtime's workers have spent busy (polling tasks) so far, all workers together.
/// tokio brings these counters up to date when a worker parks or every few dozen polls, so
/// they are read over a whole run, after the drain.
fn busy_time(rt: &tokio::runtime::Handle) -> Duration {
    let m = rt.metrics();
    (0..m.num_workers())
        .map(|w| m.worker_total_busy_duration(w))
        .sum()
}

/// Waits until everything in flight has finished; after a stop, only for `grace_ns`, then
/// cancels what is left (and waits up to 5 s more for the cancellations to be recorded).
fn drain(live: &Live, control: &RunControl, grace_ns: u64, cancel: &watch::Sender<bool>) {
    let mut grace_end: Option<Instant> = None;
    while live.in_flight() > 0 {
        if control.is_stopped() && grace_end.is_none() {
            grace_end = Some(Instant::now() + Duration::from_nanos(grace_ns));
        }
        if grace_end.is_some_and(|g| Instant::now() >= g) {
            let _ = cancel.send(true);
            let hard = Instant::now() + Duration::from_secs(5);
            while live.in_flight() > 0 && Instant::now() < hard {
                std::thread::sleep(Duration::from_millis(2));
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Drops the runtime, which waits for blocking provider work still running so nothing is
/// created behind cleanup's back, then removes whatever the run still owns: leftovers of an
/// interrupted run, or objects the trace never deleted. Returns whether the run had been
/// stopped by then, and what cleanup did.
fn clean_up<P: Provider>(
    rt: tokio::runtime::Runtime,
    control: &RunControl,
    ledger: &Ledger,
    provider: &P,
    info: &RunInfo,
) -> Result<(bool, CleanupReport), Error> {
    drop(rt);
    let stopped = control.is_stopped();
    let leftovers = ledger.live()?;
    let report = if leftovers.is_empty() {
        CleanupReport::default()
    } else {
        provider.cleanup(info, &leftovers)
    };
    Ok((stopped, report))
}

/// Everything [`summarize`] reads.
struct Finished<'a, P> {
    rd: &'a RunDir,
    manifest: Manifest,
    provider: &'a P,
    opts: &'a RunOptions,
    control: &'a RunControl,
    /// Whether a stop had been requested when the runtime was gone.
    stopped: bool,
    workers_busy: Option<f64>,
    completion_lateness: Percentiles,
    sunk: SinkResult,
    cleanup: CleanupReport,
    notices: Vec<String>,
    origin: Instant,
    streams: streams::Collected,
    cluster: Option<crate::cluster::ClusterTiming>,
    /// The machine's steal over the clock and the drain (`validity::host`).
    host_steal_ns: Option<u64>,
}
