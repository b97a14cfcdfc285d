//! The engine: timing lanes dispatching events at absolute deadlines onto a tokio
//! multi-thread runtime, where each event waits for its dependencies and a concurrency slot,
//! runs on the provider under an optional timeout, and sends its record to the sink thread.
//!
//! Shutdown (signal, `--fail-fast`, or a trace read error) stops dispatching, gives in-flight
//! operations `grace` to finish, cancels the rest (recorded as `cancelled`), drops the runtime
//! (which waits for blocking provider work still running), then removes every object the
//! ledger says the run still owns, and writes the summary and final manifest.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, mpsc};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use tokio::sync::{Semaphore, watch};
use trace_format::{Attach, CreateVolume, Event, Name, Op, OpType, TraceReader};

use crate::Error;
use crate::deps::{Deps, Key};
use crate::event::{self, Shared};
use crate::ledger::Ledger;
use crate::live::Live;
use crate::probe::Probe;
use crate::provider::{CleanupReport, OpCtx, Provider, RunInfo, SnapshotTimeline};
use crate::record::{CompletionState, Percentiles, Summary};
use crate::rundir::{HostInfo, Manifest, ProviderInfo, RunDir, TraceInfo, sha256_file};
use crate::sink::{Sink, SinkResult, ToSink};
use crate::streams::{self, StreamFidelity};
use crate::timing;
use crate::validity::{self, Measured, ValidityOptions, Verdict};

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

/// Stops a run from outside (signal handlers, tests) and exposes its live counters.
#[derive(Debug, Clone, Default)]
pub struct RunControl {
    stop: Arc<AtomicBool>,
    reason: Arc<Mutex<Option<String>>>,
    live: Arc<Live>,
}

impl RunControl {
    /// A fresh control.
    pub fn new() -> Self {
        Self::default()
    }

    /// The stop flag, for `signal_hook::flag::register` (a set flag without a reason reads
    /// as "interrupted by a signal").
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Requests a stop; the first reason given wins.
    pub fn request_stop(&self, reason: impl Into<String>) {
        let mut r = self.reason.lock().unwrap_or_else(PoisonError::into_inner);
        if r.is_none() {
            *r = Some(reason.into());
        }
        self.stop.store(true, SeqCst);
    }

    /// Whether a stop was requested.
    pub fn is_stopped(&self) -> bool {
        self.stop.load(SeqCst)
    }

    /// Live counters.
    pub fn live(&self) -> Arc<Live> {
        self.live.clone()
    }

    fn reason(&self) -> String {
        self.reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| "interrupted by a signal".to_owned())
    }
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
/// header's volumes), [`clock`] (the reader, the timing lanes and the dispatch thread until
/// the trace ends or a stop), [`drain`] (in-flight operations, cancelled after the grace
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

/// Checks the options, creates the run directory and its manifest (`running`), prepares the
/// provider, builds the runtime, creates the volumes the trace header declares and then
/// attaches the workloads it declares (before the clock starts, unmeasured, up to
/// [`SETUP_IN_FLIGHT`] at a time). If one of those fails, what was made is cleaned up and the
/// manifest says `interrupted`.
fn prepare<P: Provider>(
    trace: &Path,
    run_dir: &Path,
    provider: &Arc<P>,
    opts: &RunOptions,
    control: &RunControl,
) -> Result<Prepared, Error> {
    check_options(opts)?;
    let sha256 = sha256_file(trace)?;
    let reader = TraceReader::open(trace)?;
    let rd = RunDir::create(run_dir)?;
    let abs_dir = fs_err::canonicalize(run_dir)?;
    let header = reader.header().clone();
    let started_wall = jiff::Timestamp::now();
    let info = RunInfo {
        run_dir: abs_dir,
        // Unique per run, also for several runs started by one process in one millisecond.
        run_id: {
            static RUNS: AtomicU64 = AtomicU64::new(0);
            let n = RUNS.fetch_add(1, Relaxed);
            format!(
                "{}-{}-{n}",
                started_wall.as_millisecond(),
                std::process::id()
            )
        },
        header: header.clone(),
        stop: Some(control.stop_flag()),
    };
    let mut manifest = Manifest {
        tool: opts.tool.clone(),
        run_id: info.run_id.clone(),
        trace: TraceInfo {
            path: trace.display().to_string(),
            sha256,
            header: header.clone(),
        },
        // With the lane count this machine resolved `lanes: 0` to.
        options: serde_json::to_value(RunOptions {
            timing: opts.timing.resolved(),
            ..opts.clone()
        })
        .unwrap_or_default(),
        seed: opts.seed,
        host: HostInfo::current(),
        provider: ProviderInfo {
            name: provider.name().to_owned(),
            config: provider.config(),
            environment: serde_json::Value::Null,
        },
        started: started_wall,
        origin: None,
        finished: None,
        state: CompletionState::Running,
        reason: None,
        pid: std::process::id(),
        merged: None,
    };
    let written = Instant::now();
    rd.write_manifest(&manifest)?;
    // The manifest holds the trace header, which for a steady-state trace declares hundreds
    // of thousands of objects (tens of MB of JSON): it is written again with the origin just
    // before the clock starts, and that must not make the first events late.
    let manifest_write = written.elapsed();
    let ledger = Arc::new(Ledger::open(rd.path())?);
    let notices = provider.prepare(&info).map_err(|source| Error::Provider {
        provider: provider.name().to_owned(),
        source,
    })?;
    manifest.provider.environment = provider.environment();
    if !manifest.provider.environment.is_null() {
        rd.write_manifest(&manifest)?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(opts.workers.max(1))
        .enable_time()
        .thread_name("cnsreplay-worker")
        .build()?;
    let snapshots = Arc::new(SnapshotTimeline::default());
    let mut deps = Deps::default();
    // Pre-existing volumes first, then the pre-running workloads that mount them.
    let n_vol = header.volumes.len();
    let setup: Vec<Arc<Event>> = header
        .volumes
        .iter()
        .map(|v| {
            Op::CreateVolume(CreateVolume {
                volume: v.name.clone(),
                size: v.size,
                storage_class: v.storage_class.clone(),
                access_mode: v.access_mode,
                volume_mode: v.volume_mode,
                source: None,
            })
        })
        .chain(header.workloads.iter().map(|w| {
            Op::Attach(Attach {
                workload: w.name.clone(),
                volumes: w.volumes.clone(),
                node: w.node.clone(),
                wait_for_room: false,
            })
        }))
        .enumerate()
        .map(|(i, op)| {
            let tenant = i
                .checked_sub(n_vol)
                .and_then(|j| header.workloads[j].tenant.clone());
            Arc::new(Event {
                at: 0,
                id: u64::MAX - i as u64,
                tenant,
                observed: None,
                op,
            })
        })
        .collect();
    let (volumes, workloads) = setup.split_at(n_vol);
    // Pre-existing volumes with an attributes class get it by a modify once they exist.
    let classes: Vec<Arc<Event>> = header
        .volumes
        .iter()
        .filter_map(|v| Some((v, v.attributes_class.clone()?)))
        .enumerate()
        .map(|(i, (v, class))| {
            Arc::new(Event {
                at: 0,
                id: u64::MAX - (setup.len() + i) as u64,
                tenant: None,
                observed: None,
                op: Op::ModifyVolume(trace_format::ModifyVolume {
                    volume: v.name.clone(),
                    class,
                }),
            })
        })
        .collect();
    // In order, each stage once the one before has succeeded.
    let failed = [
        (volumes, "pre-existing volumes"),
        (&classes[..], "attributes classes of pre-existing volumes"),
        (workloads, "pre-running workloads"),
    ]
    .into_iter()
    .find_map(|(evs, what)| set_up(&rt, provider, &ledger, &snapshots, evs, what).err());
    if let Some((ev, source)) = failed {
        // Nothing was replayed, but objects may exist already (this one half-made, or
        // earlier ones): remove them before reporting, and leave the run marked.
        drop(rt);
        let leftovers = ledger.live()?;
        if !leftovers.is_empty() {
            provider.cleanup(&info, &leftovers);
        }
        manifest.state = CompletionState::Interrupted;
        manifest.reason = Some(match ev.as_ref().map(|e| &e.op) {
            Some(Op::CreateVolume(c)) => {
                format!("creating pre-existing volume {} failed: {source}", c.volume)
            }
            Some(Op::Attach(a)) => {
                format!(
                    "attaching pre-running workload {} failed: {source}",
                    a.workload
                )
            }
            Some(Op::ModifyVolume(m)) => format!(
                "giving pre-existing volume {} attributes class {} failed: {source}",
                m.volume, m.class
            ),
            _ => format!("setting up the header's objects failed: {source}"),
        });
        manifest.finished = Some(jiff::Timestamp::now());
        rd.write_manifest(&manifest)?;
        return Err(Error::Provider {
            provider: provider.name().to_owned(),
            source,
        });
    }
    for v in &header.volumes {
        deps.exists(Key::Volume(v.name.clone()));
    }
    for w in &header.workloads {
        deps.running(&w.name, &w.volumes);
    }
    Ok(Prepared {
        rd,
        manifest,
        info,
        ledger,
        rt,
        snapshots,
        reader: Some((reader, deps)),
        notices,
        streams: Arc::default(),
        manifest_write,
    })
}

/// Most setup operations (pre-existing volumes, pre-running workloads) in flight at once: a
/// steady-state trace declares tens of thousands, which one at a time would take hours on a
/// cluster.
const SETUP_IN_FLIGHT: usize = 64;

/// Runs the setup events `evs` on the provider, unmeasured, up to [`SETUP_IN_FLIGHT`] at a
/// time, logging progress. At the first failure it starts no more, waits for those in flight
/// and returns the failed event (`None` for a task that panicked) with its error.
fn set_up<P: Provider>(
    rt: &tokio::runtime::Runtime,
    provider: &Arc<P>,
    ledger: &Arc<Ledger>,
    snapshots: &Arc<SnapshotTimeline>,
    evs: &[Arc<Event>],
    what: &str,
) -> Result<(), (Option<Arc<Event>>, crate::provider::ProviderError)> {
    if evs.is_empty() {
        return Ok(());
    }
    let started = Instant::now();
    tracing::info!("setting up {} {what} before the clock", evs.len());
    let result = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        let mut next = evs.iter().cloned();
        let mut failed = None;
        let (mut done, mut logged) = (0usize, Instant::now());
        loop {
            while failed.is_none() && set.len() < SETUP_IN_FLIGHT {
                let Some(ev) = next.next() else { break };
                let p = provider.clone();
                let ctx = Arc::new(OpCtx::new(
                    Instant::now(),
                    ev.id,
                    ledger.clone(),
                    snapshots.clone(),
                ));
                set.spawn(async move {
                    let r = p.execute(ev.clone(), ctx).await;
                    (ev, r)
                });
            }
            let Some(joined) = set.join_next().await else {
                break;
            };
            done += 1;
            let err = match joined {
                Ok((_, Ok(()))) => None,
                Ok((ev, Err(e))) => Some((Some(ev), e)),
                Err(e) => Some((
                    None,
                    crate::provider::ProviderError::new("internal", format!("setup task: {e}")),
                )),
            };
            if failed.is_none() {
                failed = err;
            }
            if logged.elapsed() >= Duration::from_secs(5) {
                logged = Instant::now();
                tracing::info!("{what}: {done} of {} set up", evs.len());
            }
        }
        failed.map_or(Ok(()), Err)
    });
    if result.is_ok() {
        tracing::info!(
            "{} {what} set up in {:.1} s",
            evs.len(),
            started.elapsed().as_secs_f64()
        );
    }
    result
}

fn check_options(opts: &RunOptions) -> Result<(), Error> {
    if !(opts.speed.is_finite() && opts.speed > 0.0) {
        return Err(Error::Options(format!(
            "speed must be > 0, got {}",
            opts.speed
        )));
    }
    if opts.timing.lanes > timing::MAX_LANES {
        return Err(Error::Options(format!(
            "at most {} timing lanes, got {}",
            timing::MAX_LANES,
            opts.timing.lanes
        )));
    }
    if opts.concurrency.values().any(|&n| n == 0) {
        return Err(Error::Options(
            "a concurrency limit must be at least 1".into(),
        ));
    }
    Ok(())
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
}

impl Clocked {
    /// Mean busy fraction of the runtime's workers from the origin until now (`None` for a
    /// run too short to say).
    fn workers_busy(&self, rt: &tokio::runtime::Runtime) -> Option<f64> {
        let period = Instant::now().saturating_duration_since(self.origin);
        let workers = rt.metrics().num_workers();
        let busy = busy_time(rt.handle()).saturating_sub(self.busy_before);
        (period >= Duration::from_millis(1) && workers > 0)
            .then(|| busy.as_secs_f64() / (period.as_secs_f64() * workers as f64))
    }
}

/// Starts the reader, waits for the first event, sets the origin, starts the sink and runs
/// the timing lanes and the dispatch thread until the trace ends or a stop is requested.
/// Every batch of events becomes a task on the runtime ([`event::run_batch`]); they may still
/// be running when this returns.
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
    let (done_tx, done_rx) = mpsc::channel::<ToSink>();
    let sink = Sink::create(
        p.rd.path(),
        origin,
        origin_wall,
        opts.validity.window_ns,
        control.live(),
    )?;
    let sink = std::thread::Builder::new()
        .name("cnsreplay-sink".into())
        .spawn(move || sink.run(&done_rx))?;
    let (cancel_tx, cancel_rx) = watch::channel(false);
    let live = control.live();
    let inject_delay = injected_delay()?;
    if let Some(d) = inject_delay {
        p.notices.push(format!(
            "test hook {INJECT_DELAY_ENV}: every dispatched batch held up {d:?} (an engine \
             delay the validity checks must catch)"
        ));
    }
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
    });

    // The timing and dispatch threads. Each batch of due events is started by the dispatch
    // thread itself, in the runtime's context, when the provider's calls start inline, else
    // by a runtime task; either gives a runtime task of its own only to an event that waits.
    let handle = p.rt.handle().clone();
    let busy_before = busy_time(&handle);
    let probe = Probe::start(handle.clone())?;
    let inline = provider.starts_inline();
    let timing_notices = timing::dispatch(feed, origin, opts.timing, control, &live, |batch| {
        if inline {
            let _runtime = handle.enter();
            event::run_batch(&shared, batch);
        } else {
            let sh = shared.clone();
            handle.spawn(async move { event::run_batch(&sh, batch) });
        }
    })?;
    p.notices.extend(timing_notices);
    let _ = reader_thread.join();
    Ok(Clocked {
        sink,
        cancel: cancel_tx,
        origin,
        busy_before,
        probe,
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

/// Builds the summary, writes `summary.json` and the final manifest, and marks the live
/// counters finished.
fn summarize<P: Provider>(f: Finished<'_, P>) -> Result<RunOutcome, Error> {
    let Finished {
        rd,
        mut manifest,
        provider,
        opts,
        control,
        stopped,
        workers_busy,
        completion_lateness,
        sunk,
        cleanup,
        mut notices,
        origin,
        streams,
        cluster,
        host_steal_ns,
    } = f;
    let mut sunk = sunk;
    notices.extend(streams.notices);
    sunk.last_completed = sunk
        .last_completed
        .max(streams::last_end(&streams.ended, origin));
    let io_streams = stream_results(rd, &streams.ended, origin, opts, &mut sunk)?;
    let wall = sunk.last_completed as f64 / 1e9;
    notices.extend(provider.finish_notices());
    let io_phases = sunk.ops.get(OpType::IoPhase.name()).map_or(0, |o| o.count);
    notices.extend(sunk.io.backend_notice(io_phases));
    notices.extend(streams::threads_notice(&io_streams));
    let client_throttling = provider.client_throttling();
    let dispatch_rate = validity::dispatch_rate(&sunk.windows, &opts.validity);
    let state = if stopped {
        CompletionState::Interrupted
    } else {
        CompletionState::Complete
    };
    let reason = stopped.then(|| control.reason());
    let provider_ops = || {
        sunk.ops
            .iter()
            .filter(|(op, _)| *op != OpType::Marker.name())
    };
    // What the lateness is judged against: the median service time of each op type the
    // engine called (not `io_phase`, a unit of many I/Os; not stream-fed `io`, judged by its
    // streams).
    let medians: Vec<(&str, u64)> = sunk
        .ops
        .iter()
        .filter(|(op, o)| {
            o.service.count > 0
                && *op != OpType::Marker.name()
                && *op != OpType::IoPhase.name()
                && (*op != OpType::Io.name() || io_streams.is_empty())
        })
        .map(|(op, o)| (op.as_str(), o.service.p50))
        .collect();
    let validity = validity::judge(
        &Measured {
            state,
            reason: reason.as_deref(),
            operations: provider_ops().map(|(_, o)| o.count).sum(),
            operations_ok: provider_ops().map(|(_, o)| o.ok).sum(),
            start_lateness: &sunk.start_lateness,
            waited: sunk.waited,
            resume_lateness: &sunk.resume_lateness,
            completion_lateness: &completion_lateness,
            io_lateness: sunk.io_issue.as_ref().map(|(l, s)| (l, s)),
            medians,
            rate: dispatch_rate.as_ref(),
            workers_busy,
            throttling: &client_throttling,
            streams: &io_streams,
            host_steal_ns,
        },
        &opts.validity,
    );
    if matches!(
        validity.verdict,
        Verdict::EngineBound | Verdict::Failed | Verdict::PartlyValid
    ) {
        notices.push(format!(
            "verdict {}: {}",
            validity.verdict,
            validity.evidence()
        ));
    }
    let summary = Summary {
        state,
        reason,
        provider: provider.name().to_owned(),
        speed: opts.speed,
        dispatched: sunk.dispatched,
        ok: sunk.ok,
        failed: sunk.failed,
        errors: sunk.errors,
        wall_seconds: wall,
        ops_per_second: if wall > 0.0 {
            sunk.dispatched as f64 / wall
        } else {
            0.0
        },
        lateness: sunk.lateness,
        pickup: sunk.pickup,
        start_lateness: sunk.start_lateness,
        waited: sunk.waited,
        resume_lateness: sunk.resume_lateness,
        completion_lateness,
        dispatch_rate,
        workers_busy,
        client_throttling,
        validity: Some(validity),
        ops: sunk.ops,
        io: sunk.io,
        io_streams,
        cluster,
        cleaned_up: cleanup.removed,
        cleanup_failures: cleanup.failed,
        notices,
    };
    rd.write_summary(&summary)?;
    // The limits the run was held to, beside the options they were resolved from.
    if let (Some(l), Some(v)) = (
        summary.validity.as_ref().and_then(|v| v.limits.as_ref()),
        manifest.options.get_mut("validity"),
    ) && let (Some(obj), Ok(l)) = (v.as_object_mut(), serde_json::to_value(l))
    {
        obj.insert("limits".to_owned(), l);
    }
    manifest.state = summary.state;
    manifest.reason.clone_from(&summary.reason);
    manifest.finished = Some(jiff::Timestamp::now());
    rd.write_manifest(&manifest)?;
    control.live().finished.store(true, SeqCst);
    Ok(RunOutcome { manifest, summary })
}

/// The streams' fidelity for the summary; their rate curves go to `io/streams/`, and their
/// requests join the `io` row of the summary's operations (count, ok, failed; latencies
/// are in the fidelity).
fn stream_results(
    rd: &RunDir,
    ended: &[streams::Ended],
    origin: Instant,
    opts: &RunOptions,
    sunk: &mut SinkResult,
) -> Result<Vec<StreamFidelity>, Error> {
    if ended.is_empty() {
        return Ok(Vec::new());
    }
    let per_event_io = sunk.ops.get(OpType::Io.name()).is_some_and(|r| r.count > 0);
    let dir = rd.path().join("io").join("streams");
    fs_err::create_dir_all(&dir)?;
    let mut out = Vec::new();
    for (i, (f, curve)) in streams::fidelity(ended, origin, opts.validity.window_events)
        .into_iter()
        .enumerate()
    {
        if let Some(mut c) = curve {
            c.volume.clone_from(&f.volume);
            let safe: String = f
                .volume
                .chars()
                .map(|ch| {
                    if ch.is_ascii_alphanumeric() || "-_.".contains(ch) {
                        ch
                    } else {
                        '_'
                    }
                })
                .collect();
            let path = dir.join(format!("{i:03}-{safe}.json"));
            let bytes = serde_json::to_vec(&c).map_err(|source| Error::Json {
                file: path.clone(),
                source,
            })?;
            fs_err::write(&path, bytes)?;
        }
        let row = sunk.ops.entry(OpType::Io.name().to_owned()).or_default();
        row.count += f.requests;
        row.ok += f.completed;
        row.failed += f.requests - f.completed.min(f.requests);
        sunk.dispatched += f.requests;
        sunk.ok += f.completed;
        sunk.failed += f.requests - f.completed.min(f.requests);
        for (class, n) in [("io_failed", f.errors), ("io_dropped", f.dropped)] {
            if n > 0 {
                *sunk.errors.entry(class.to_owned()).or_default() += n;
            }
        }
        out.push(f);
    }
    if !per_event_io && let Some(row) = sunk.ops.get_mut(OpType::Io.name()) {
        let (response, service, lateness) = streams::merged(ended);
        row.response = Percentiles::of(&response);
        row.service = Percentiles::of(&service);
        row.lateness = Percentiles::of(&lateness);
    }
    Ok(out)
}
