//! The `sim` provider: no data, no objects. Each operation takes a latency drawn from a
//! per-op-type distribution (constant, uniform, exponential, lognormal), and injected stalls
//! freeze every operation in flight or arriving while they last. It exists to test the engine
//! itself, at millions of events, and, with its queueing model, to give capacity searches a
//! system whose saturation rate is known.
//!
//! Latencies are served by one timer thread (a deadline heap it sleeps on), not tokio's
//! millisecond timer, so a 200 µs operation takes 200 µs plus the OS wake-up delay (tens of
//! µs), and the timer never competes with the timing lanes for a core. Each draw is a hash
//! of the seed and the event id, so a run's latencies do not depend on thread scheduling.
//!
//! An `io_phase` with a `duration` lasts that duration after its drawn latency: its modelled
//! I/O runs as long as the trace (compressed by the run's speed) says, so what the trace
//! places after it (a detach) waits for it as on a real provider.
//!
//! A stall `[t0, t0 + d)` (times from the run origin) stops all progress: an operation that
//! starts at `s` with service `l` and overlaps the stall completes at
//! `s + l + (t0 + d − max(s, t0))`, i.e. it resumes where it was when the stall ends.
//!
//! The queueing model (`servers`, `shared_servers`) turns the sim into a G/G/N FIFO system
//! per pool: an op type with `servers: {attach: 4}` has 4 servers of its own, every other
//! op type shares `shared_servers` (none: unlimited servers, the plain latency model). An
//! operation arriving at `a` (the instant it was due, [`OpCtx::due_ns`]: its scheduled time,
//! or when its dependency wait ended; not the provider call, so the engine's lateness on a
//! busy machine does not change the modelled system) takes the server that frees first, starts at
//! `s = max(a, free)` and completes at `s + service` (stalls applied): the wait is part of
//! the response time; phases `arrived` (the operation was due), `queue` (service began)
//! and `served` (the modelled completion) show it. Because the drawn service does not depend
//! on timing and a server's next start is computed from the previous completion as modelled
//! (not as the timer delivered it), a dedicated pool saturates at exactly
//! `N / E[service]` operations per second ([`SimConfig::saturation_rate`]); a shared pool
//! when `Σ rate(op) · E[service(op)]` reaches `N`.
//!
//! The pools keep time on one base for the provider's life (its creation), so the header's
//! setup operations, each called with its own origin before the clock starts, queue against
//! each other as they really ran. The setup is not measured: when the clock starts
//! ([`Provider::before_clock`]) every pool is emptied (the engine waited for every setup
//! operation, so any backlog left is the model's, not work in flight) and the finish notices
//! say how many setup operations went through it and what backlog was discarded. The
//! measured run starts with idle servers.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::path::Path;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicU64, fence};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use replay::ledger::LedgerEntry;
use replay::provider::{CleanupReport, OpCtx, Provider, ProviderError, RunInfo};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;
use trace_format::splitmix::splitmix64 as splitmix;
pub use trace_format::units::Dur;
use trace_format::{Event, OpType};

mod dist;
pub use dist::{Latency, Stall};
pub mod preset;

/// Errors of the sim provider's configuration.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration file could not be read.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The configuration is invalid.
    #[error("{file}: {message}")]
    Config {
        /// The file (or `--sim-*` flag) the configuration came from.
        file: String,
        /// What is wrong, with the field.
        message: String,
    },
}

fn default_latency() -> Latency {
    Latency::Constant { value: Dur(0) }
}

/// The sim configuration (YAML via `--sim-config`, or flags).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    /// Seed of the latency draws.
    #[serde(default)]
    pub seed: u64,
    /// Latency of op types not listed in `ops`.
    #[serde(default = "default_latency")]
    pub default: Latency,
    /// Latency per op type (by name, e.g. `create_volume`).
    #[serde(default)]
    pub ops: BTreeMap<OpType, Latency>,
    /// Probability (0–1) that an op of the type fails with class `sim_injected`.
    #[serde(default)]
    pub errors: BTreeMap<OpType, f64>,
    /// Injected stalls.
    #[serde(default)]
    pub stalls: Vec<Stall>,
    /// Queueing model: servers of an op type's own FIFO pool (e.g. `attach: 4`).
    #[serde(default)]
    pub servers: BTreeMap<OpType, u32>,
    /// Queueing model: one FIFO pool of this many servers shared by every op type not in
    /// `servers` (absent: unlimited servers).
    #[serde(default)]
    pub shared_servers: Option<u32>,
    /// Every drawn service time multiplied by this (1: as drawn): a run-wide slowdown, the
    /// run-to-run and batch-to-batch variation a real provider has (the cluster's state, the
    /// host), for calibrating `analyze compare` (`scripts/calibrate-compare.sh`).
    #[serde(default = "default_slowdown")]
    pub slowdown: f64,
}

fn default_slowdown() -> f64 {
    1.0
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            default: default_latency(),
            ops: BTreeMap::new(),
            errors: BTreeMap::new(),
            stalls: Vec::new(),
            servers: BTreeMap::new(),
            shared_servers: None,
            slowdown: default_slowdown(),
        }
    }
}

impl SimConfig {
    /// Reads a YAML configuration file.
    pub fn from_file(path: &Path) -> Result<Self, Error> {
        let text = fs_err::read_to_string(path)?;
        Self::from_yaml(&text, &path.display().to_string())
    }

    /// Parses YAML; `file` names it in errors.
    pub fn from_yaml(text: &str, file: &str) -> Result<Self, Error> {
        let c: SimConfig = serde_saphyr::from_str(text).map_err(|e| Error::Config {
            file: file.to_owned(),
            message: e.to_string(),
        })?;
        c.check(file)?;
        Ok(c)
    }

    /// The op types of `ops` this configuration gives no latency (a constant 0, the sim's
    /// default): on them a run measures the tool alone, not a storage system, so `run` says
    /// so before its clock starts. Markers (the engine's own events) are left out.
    pub fn without_latency(&self, ops: impl IntoIterator<Item = OpType>) -> Vec<OpType> {
        ops.into_iter()
            .filter(|op| *op != OpType::Marker)
            .filter(|op| {
                matches!(
                    self.ops.get(op).unwrap_or(&self.default),
                    Latency::Constant { value: Dur(0) }
                )
            })
            .collect()
    }

    /// Checks distributions and probabilities.
    pub fn check(&self, file: &str) -> Result<(), Error> {
        let bad = |message: String| Error::Config {
            file: file.to_owned(),
            message,
        };
        self.default
            .check()
            .map_err(|e| bad(format!("default: {e}")))?;
        for (op, l) in &self.ops {
            l.check().map_err(|e| bad(format!("ops.{op}: {e}")))?;
        }
        for (op, n) in &self.servers {
            if *n == 0 {
                return Err(bad(format!("servers.{op}: needs at least 1 server")));
            }
        }
        if self.shared_servers == Some(0) {
            return Err(bad("shared_servers: needs at least 1 server".into()));
        }
        if !(self.slowdown.is_finite() && self.slowdown > 0.0) {
            return Err(bad(format!(
                "slowdown: {} is not a positive factor",
                self.slowdown
            )));
        }
        for (op, p) in &self.errors {
            if !(0.0..=1.0).contains(p) {
                return Err(bad(format!(
                    "errors.{op}: {p} is not a probability in [0, 1]"
                )));
            }
        }
        Ok(())
    }

    /// The latency distribution of an op type.
    pub fn latency(&self, op: OpType) -> &Latency {
        self.ops.get(&op).unwrap_or(&self.default)
    }

    /// The rate (ops/s) at which an op type with a dedicated pool saturates, `N / E[service]`
    /// (None without a dedicated pool, or with a zero mean service).
    pub fn saturation_rate(&self, op: OpType) -> Option<f64> {
        let n = *self.servers.get(&op)?;
        let mean = self.latency(op).mean() * self.slowdown;
        (mean > 0.0).then(|| f64::from(n) * 1e9 / mean)
    }

    /// Parses the flag form `OP=N` (or `shared=N`) into the configuration.
    pub fn set_servers(&mut self, flag: &str) -> Result<(), String> {
        let (op, n) = flag
            .split_once('=')
            .ok_or_else(|| format!("{flag:?}: expected OP=N or shared=N"))?;
        let n: u32 = n
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("{flag:?}: {n:?} is not a server count ≥ 1"))?;
        if op == "shared" {
            self.shared_servers = Some(n);
        } else {
            let op =
                OpType::from_name(op).ok_or_else(|| format!("{flag:?}: unknown op type {op:?}"))?;
            self.servers.insert(op, n);
        }
        Ok(())
    }

    /// When an op starting at `start` with service `service` completes, with the stalls.
    pub fn completion(&self, start: u64, service: u64) -> u64 {
        let mut end = start.saturating_add(service);
        let mut stalls = self.stalls.clone();
        stalls.sort_by_key(|s| s.at.0);
        for s in stalls {
            let (t0, t1) = (s.at.0, s.at.0.saturating_add(s.duration.0));
            if start < t1 && end > t0 {
                end = end.saturating_add(t1 - start.max(t0));
            }
        }
        end
    }
}

fn unit(x: u64) -> f64 {
    // 53 random bits into (0, 1).
    ((x >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

type TimerEntry = (Instant, oneshot::Sender<()>);

/// `N` FIFO servers: when each frees, as modelled (ns since the run origin).
#[derive(Debug)]
struct Pool {
    servers: u32,
    state: Mutex<PoolState>,
}

#[derive(Debug, Default)]
struct PoolState {
    /// When each server is next free (ns since the provider's time base).
    free: BinaryHeap<Reverse<u64>>,
    /// Start instants of admitted operations not yet started at the last arrival
    /// (non-decreasing: FIFO starts in arrival order).
    waiting: VecDeque<u64>,
    admitted: u64,
    peak_waiting: usize,
    max_wait: u64,
    /// Operations admitted before the clock started (the header's setup), not measured.
    setup_admitted: u64,
    /// The backlog the setup left when the clock started (ns), discarded.
    setup_backlog: u64,
}

impl Pool {
    fn new(servers: u32) -> Self {
        Self {
            servers,
            state: Mutex::new(PoolState {
                free: Self::idle(servers),
                ..PoolState::default()
            }),
        }
    }

    fn idle(servers: u32) -> BinaryHeap<Reverse<u64>> {
        (0..servers.max(1)).map(|_| Reverse(0)).collect()
    }

    /// Empties the queue when the clock starts at `now` (ns since the time base): every
    /// server idle, the counters of the measured run at zero. What went before is kept as
    /// the setup's: its operation count and the backlog it left (the latest server's free
    /// instant beyond `now`).
    fn start_clock(&self, now: u64) {
        let mut st = self.lock();
        let backlog = st
            .free
            .iter()
            .map(|Reverse(f)| f.saturating_sub(now))
            .max()
            .unwrap_or(0);
        *st = PoolState {
            free: Self::idle(self.servers),
            setup_admitted: st.setup_admitted + st.admitted,
            setup_backlog: st.setup_backlog.max(backlog),
            ..PoolState::default()
        };
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits an operation arriving at `arrive` with service `service`, both ns since its
    /// call's origin, which is `base` ns after the pool's time base: its (start, end) since
    /// that origin. Arrivals are admitted in the order they take the lock, i.e. FIFO.
    fn admit(&self, base: u64, arrive: u64, service: u64, config: &SimConfig) -> (u64, u64) {
        let mut st = self.lock();
        let Reverse(free) = st.free.pop().unwrap_or(Reverse(0));
        let start = arrive.max(free.saturating_sub(base));
        // Stalls are placed from the call's origin (the run origin for the measured run).
        let end = config.completion(start, service);
        st.free.push(Reverse(base.saturating_add(end)));
        let arrive_b = base.saturating_add(arrive);
        while st.waiting.front().is_some_and(|&s| s <= arrive_b) {
            st.waiting.pop_front();
        }
        if start > arrive {
            st.waiting.push_back(base.saturating_add(start));
        }
        st.admitted += 1;
        st.peak_waiting = st.peak_waiting.max(st.waiting.len());
        st.max_wait = st.max_wait.max(start - arrive);
        (start, end)
    }
}

/// The sim provider.
#[derive(Debug)]
pub struct SimProvider {
    config: SimConfig,
    timer: Arc<TimerQueue>,
    /// Dedicated pools by op type.
    pools: BTreeMap<OpType, Pool>,
    /// The pool of every other op type, with `shared_servers`.
    shared: Option<Pool>,
    /// The pools' time base.
    epoch: Instant,
}

impl SimProvider {
    /// A sim provider with this configuration; starts its timer thread.
    pub fn new(config: SimConfig) -> std::io::Result<Self> {
        let (timer, incoming) = TimerQueue::new();
        let timer = Arc::new(timer);
        let queue = timer.clone();
        let handle = std::thread::Builder::new()
            .name("cnsreplay-sim-timer".into())
            .spawn(move || queue.run(incoming))?;
        let _ = timer.thread.set(handle.thread().clone());
        let pools = config
            .servers
            .iter()
            .map(|(&op, &n)| (op, Pool::new(n)))
            .collect();
        let shared = config.shared_servers.map(Pool::new);
        Ok(Self {
            config,
            timer,
            pools,
            shared,
            epoch: Instant::now(),
        })
    }

    fn pool(&self, op: OpType) -> Option<&Pool> {
        self.pools.get(&op).or(self.shared.as_ref())
    }

    /// Every pool by the name its notices use.
    fn named_pools(&self) -> impl Iterator<Item = (String, &Pool)> {
        self.pools
            .iter()
            .map(|(op, p)| (op.name().to_owned(), p))
            .chain(self.shared.iter().map(|p| ("shared".to_owned(), p)))
    }

    fn draw(&self, ev: &Event) -> (u64, bool) {
        let op = ev.op.op_type();
        let h1 = splitmix(self.config.seed ^ splitmix(ev.id));
        let h2 = splitmix(h1);
        let h3 = splitmix(h2);
        let lat = self.config.latency(op);
        let fails = self.config.errors.get(&op).is_some_and(|&p| unit(h3) < p);
        let v = lat.sample(unit(h1), unit(h2));
        let v = if self.config.slowdown == 1.0 {
            v
        } else {
            (v as f64 * self.config.slowdown).round() as u64
        };
        // An `io_phase` runs its I/O for its duration (as the trace, compressed by the run's
        // speed, has it) after its drawn latency, as a workload would.
        let io = match &ev.op {
            trace_format::Op::IoPhase(p) => p.duration.unwrap_or(0),
            _ => 0,
        };
        (v.saturating_add(io), fails)
    }
}

impl Drop for SimProvider {
    fn drop(&mut self) {
        // The timer thread fires what is still pending, then exits.
        self.timer.close();
    }
}

#[derive(Default)]
struct Timers {
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    waiting: HashMap<u64, oneshot::Sender<()>>,
    seq: u64,
}

impl Timers {
    fn push(&mut self, (t, tx): TimerEntry) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq)));
        self.waiting.insert(self.seq, tx);
    }

    fn take_due(&mut self, now: Instant, due: &mut Vec<oneshot::Sender<()>>) {
        while let Some(&Reverse((t, id))) = self.heap.peek() {
            if t > now {
                break;
            }
            self.heap.pop();
            due.extend(self.waiting.remove(&id));
        }
    }

    fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((t, _))| *t)
    }
}

/// The deadline queue between the operations and the timer thread, without a lock: an
/// operation sends its deadline down futures' unbounded channel (whose send never waits for
/// another sender; crossbeam's `SegQueue` makes a sender that finds its block full spin until
/// the sender that filled it links the next, and the operations' senders include the engine's
/// real-time lanes and its normal workers) and wakes the timer thread
/// (`Thread::unpark`, an atomic swap and at most one futex wake) only when that deadline is
/// earlier than the one the thread sleeps towards, so at 100 k ops/s the thread wakes about
/// once per expiry batch instead of once per operation (that per-send wake-up cost it a
/// third of a core on the engine benchmark). The deadline heap is the timer thread's alone.
///
/// Operations are called on the engine's real-time timing lanes. Until 2026-12-04 the heap
/// sat behind a mutex that the timer thread held while it took what was due: when that
/// thread was preempted holding it, both lanes waited behind it, 59 % of their lock waits
/// (`scripts/lane-waits.sh`, docs/PERFORMANCE.md).
struct TimerQueue {
    incoming: UnboundedSender<TimerEntry>,
    /// The instant the timer thread sleeps until (ns since `base`); `u64::MAX` while it is
    /// awake (it drains `incoming` before it sleeps again).
    sleeping_until: AtomicU64,
    base: Instant,
    /// Cleared when the provider is dropped.
    open: AtomicBool,
    thread: OnceLock<std::thread::Thread>,
}

impl TimerQueue {
    /// A queue and the receiving end its timer thread takes.
    fn new() -> (Self, UnboundedReceiver<TimerEntry>) {
        let (tx, rx) = unbounded();
        let q = Self {
            incoming: tx,
            sleeping_until: AtomicU64::new(u64::MAX),
            base: Instant::now(),
            open: AtomicBool::new(true),
            thread: OnceLock::new(),
        };
        (q, rx)
    }
}

impl std::fmt::Debug for TimerQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimerQueue").finish_non_exhaustive()
    }
}

impl TimerQueue {
    fn ns(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX - 1)
    }

    fn wake(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    fn schedule(&self, entry: TimerEntry) {
        let at = self.ns(entry.0);
        // Fails only once the timer thread is gone: the call's channel then closes, which
        // reports the sim stopped.
        let _ = self.incoming.unbounded_send(entry);
        // Pairs with the timer thread's fence between publishing its sleep and looking at
        // `incoming` once more: either it sees this entry, or this sees it asleep.
        fence(SeqCst);
        if at < self.sleeping_until.load(SeqCst) {
            self.wake();
        }
    }

    fn close(&self) {
        self.open.store(false, SeqCst);
        self.wake();
    }

    /// The timer thread. Sleep-only waits: the sim must not take a core from the timing
    /// thread, and a completion a few tens of µs late only lengthens that op's simulated
    /// service.
    fn run(&self, mut incoming: UnboundedReceiver<TimerEntry>) {
        let mut timers = Timers::default();
        let mut due = Vec::new();
        loop {
            while let Ok(e) = incoming.try_recv() {
                timers.push(e);
            }
            let now = Instant::now();
            timers.take_due(now, &mut due);
            if !due.is_empty() {
                for tx in due.drain(..) {
                    let _ = tx.send(());
                }
                continue;
            }
            let next = timers.next();
            if !self.open.load(SeqCst) && next.is_none() {
                match incoming.try_recv() {
                    Ok(e) => {
                        timers.push(e);
                        continue;
                    }
                    _ => return,
                }
            }
            let until = next.unwrap_or(now + Duration::from_millis(50));
            self.sleeping_until.store(self.ns(until), SeqCst);
            fence(SeqCst);
            // One more look after publishing the sleep: an entry sent before it saw the
            // thread awake and did not wake it.
            match incoming.try_recv() {
                Ok(e) => timers.push(e),
                _ if self.open.load(SeqCst) => {
                    std::thread::park_timeout(until.saturating_duration_since(now));
                }
                _ => {}
            }
            self.sleeping_until.store(u64::MAX, SeqCst);
        }
    }
}

impl Provider for SimProvider {
    fn name(&self) -> &'static str {
        "sim"
    }

    fn config(&self) -> serde_json::Value {
        serde_json::to_value(&self.config).unwrap_or_default()
    }

    fn prepare(&self, _run: &RunInfo) -> Result<Vec<String>, ProviderError> {
        Ok(Vec::new())
    }

    fn environment(&self) -> serde_json::Value {
        if self.pools.is_empty() && self.shared.is_none() {
            return serde_json::Value::Null;
        }
        let dedicated: BTreeMap<String, serde_json::Value> = self
            .config
            .servers
            .iter()
            .map(|(op, n)| {
                let mean = self.config.latency(*op).mean();
                (
                    op.name().to_owned(),
                    serde_json::json!({
                        "servers": n,
                        "mean_service_ns": mean,
                        "saturation_per_s": self.config.saturation_rate(*op),
                    }),
                )
            })
            .collect();
        serde_json::json!({
            "queueing": {
                "dedicated": dedicated,
                "shared_servers": self.config.shared_servers,
            }
        })
    }

    /// The measured run starts with empty queues: see the module docs.
    fn expected_fastest_ns(&self) -> Option<u64> {
        // The configured latencies that are not 0 (a 0 is the notice of `run`, not a floor).
        std::iter::once(&self.config.default)
            .chain(self.config.ops.values())
            .map(|l| l.median() as u64)
            .filter(|&m| m > 0)
            .min()
    }

    fn before_clock(&self) {
        let now = replay::provider::ns_since(self.epoch, Instant::now());
        for (_, p) in self.named_pools() {
            p.start_clock(now);
        }
    }

    fn finish_notices(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (name, p) in self.named_pools() {
            let st = p.lock();
            if st.setup_admitted > 0 {
                out.push(format!(
                    "sim queue {name}: {} setup operations of the header before the clock, not \
                     measured; the run started with the queue empty (setup backlog discarded: \
                     {})",
                    st.setup_admitted,
                    trace_format::units::fmt_secs(st.setup_backlog)
                ));
            }
            if st.admitted > 0 {
                out.push(format!(
                    "sim queue {name} ({} servers): {} operations, peak {} waiting, longest \
                     wait {}",
                    p.servers,
                    st.admitted,
                    st.peak_waiting,
                    trace_format::units::fmt_secs(st.max_wait)
                ));
            }
        }
        out
    }

    /// A call draws its latency, admits itself to its pool and schedules its timer, then
    /// waits: nothing blocks before that.
    fn starts_inline(&self) -> bool {
        true
    }

    async fn execute(&self, ev: Arc<Event>, ctx: Arc<OpCtx>) -> Result<(), ProviderError> {
        // The modelled I/O of an `io_phase` begins with its call.
        if ev.op.op_type() == OpType::IoPhase {
            ctx.io_started();
        }
        let (service, fails) = self.draw(&ev);
        let called = ctx.now_ns();
        let pool = self.pool(ev.op.op_type());
        let (arrive, start, end) = match pool {
            // Arrival in a queue at the instant the operation was due, not at the call: the
            // modelled system sees the trace's schedule, so its queue (and a capacity search's
            // truth) does not depend on how late this machine ran the engine; that lateness
            // is the tool's, judged by the run's validity. The pool serves in the order of the
            // calls, though: two calls that cross (an engine late by more than their spacing)
            // are served in the order they came. Setup operations (no due instant) arrive at
            // the call.
            Some(p) => {
                let arrive = ctx.due_ns().unwrap_or(called);
                let (start, end) = p.admit(
                    replay::provider::ns_since(self.epoch, ctx.origin()),
                    arrive,
                    service,
                    &self.config,
                );
                (arrive, start, end)
            }
            // Without a queue the drawn latency runs from the call.
            None => (called, called, self.config.completion(called, service)),
        };
        let (tx, rx) = oneshot::channel();
        self.timer
            .schedule((ctx.origin() + Duration::from_nanos(end), tx));
        rx.await
            .map_err(|_| ProviderError::new("sim_stopped", "the sim timer thread is gone"))?;
        if pool.is_some() {
            // The modelled instants, not the timer's delivery: the queue is exact.
            ctx.phase_at("arrived", ctx.origin() + Duration::from_nanos(arrive));
            ctx.phase_at("queue", ctx.origin() + Duration::from_nanos(start));
            // The modelled completion; the record's `completed` is this unless the engine
            // called the operation only after it (on a loaded machine), then the call.
            ctx.phase_at("served", ctx.origin() + Duration::from_nanos(end));
            ctx.completed_at(ctx.origin() + Duration::from_nanos(end));
        }
        if fails {
            return Err(ProviderError::new(
                "sim_injected",
                format!("injected failure of {}", ev.op.op_type()),
            ));
        }
        Ok(())
    }

    fn cleanup(&self, _run: &RunInfo, _leftovers: &[LedgerEntry]) -> CleanupReport {
        CleanupReport::default()
    }
}
