//! The dispatch path: a reader thread decoding the trace ahead of time, and timing lanes that
//! start events at their deadlines.
//!
//! Measured on the 2-core benchmark VM (docs/performance-history.md, Replay engine), three things
//! decide dispatch lateness at 100 k events/s:
//! - **The host stops a vCPU** for up to ~3 ms at a time, tens of times in 10 s
//!   (`cyclictest -p80` sees it with nothing else running). One timing thread stalls with its
//!   vCPU and every event due meanwhile is late: hundreds of events per stall, p99.9 above
//!   1 ms. So there are two timing **lanes**, pinned to different CPUs, sharing one feed:
//!   each looks at the next deadline, and whichever lane is awake when an event is due claims
//!   it (a compare-and-swap on a counter) and hands it over. No lane holds an event that is
//!   not due, so a stalled lane delays nothing but what it was handing over, and the other
//!   lane carries on. (A first version where each lane took the next event and slept with it
//!   still left that one event to the stalled lane: max lateness ~3 ms, p99.9 0.1–0.3 ms.)
//! - **A woken thread may wait for the CPU**: with one nice −10 lane the worst groups of late
//!   events lasted whole 4 ms scheduler ticks (3998–4066 µs). Our reading: the woken lane
//!   waited for the running thread's time slice to end. The lanes therefore run SCHED_FIFO
//!   (at a low real-time priority) when permitted, which preempts at once, and those groups
//!   were gone; otherwise nice −10, with a notice.
//! - **Wake-ups are expensive on a VM**: a lane woken for every event used 7.0 s of CPU for
//!   1 M events, nearly all system time (arming the timer, taking its interrupt): ~7 µs per
//!   wake-up, 70–80 % of a core at 100 k events/s, which left the runtime short of CPU. So each lane wakes at most once per point of its own grid, spaced
//!   [`TimingOptions::min_wake_ns`] (80 µs) apart, with the lanes' grids interleaved (lane
//!   `i` of `n` at phase `i·80/n` µs): together they look at the clock every 40 µs at high
//!   rates and hand over everything due then; events further apart wake a lane at their own
//!   deadline. The spacing trades lateness for the runtime's CPU: at 100 k events/s, 50 µs
//!   took 2.3–2.8 s of CPU per lane per 10 s and the runtime fell tens of ms behind in 2 of
//!   3 runs; 80 µs 1.7–2.0 s, and it kept up in 7 of 7.
//!
//! - **Every hand-off between threads is a wake-up, and wake-ups are what this host is
//!   short of**: a timer wake-up costs 15–29 µs of CPU here (the floor probe's `wake_cost`,
//!   docs/PERFORMANCE.md). A lane therefore starts what it claims itself: it sleeps to an
//!   absolute instant ([`precise::wait_until`]), claims every event due by then, stamps it
//!   as dispatched, and hands it to its [`Starter`]: for a provider whose calls start
//!   inline, started at once in the runtime's context, before the lane claims the next (a
//!   lane that stalls mid-wake-up then holds one claimed event, not all it would have
//!   claimed); otherwise gathered and started by one runtime task. The time until an
//!   event is begun is its `pickup`, recorded per event and summarised. Until 2026-12-04 a
//!   dispatch thread did that, woken by the lanes through a lock-free queue, so that a
//!   real-time lane would never wait for a lock held by a preempted thread (`perf` had shown
//!   a lane spawning onto tokio wait 3.5–5.4 ms in tokio's inject-queue and task-list
//!   locks). Side by side at 100 k events/s on the sim (`scripts/bench-replay-ab.sh`, 5
//!   rounds), starting on the lanes cut start lateness p99 from 238–1444 µs to 77–854 µs
//!   (lower in 5 of 5 pairs; the targets met in 2 of 5 rounds, against 0): the dispatch
//!   thread, one more thread to wake on two CPUs, was where events waited.
//! - The reader queues decoded events (dependencies already planned) in a lock-free bounded
//!   queue; when it is full the reader polls, so a lane never has to wake it.
//!
//! Two lanes can hand over events due at nearly the same time in either order; dependencies
//! are planned in trace order by the reader and waited for by the operations, so that order
//! does not matter.

use std::sync::Arc;
use std::sync::atomic::{
    AtomicBool, AtomicU64, Ordering::AcqRel, Ordering::Acquire, Ordering::Relaxed,
    Ordering::Release,
};
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;
use trace_format::error::{Diagnostic, Location};
use trace_format::rewrite::{CompressError, IoRate, compress};
use trace_format::{Event, TraceReader};

use crate::control::RunControl;
use crate::deps::{Deps, Plan};
use crate::live::Live;
use crate::precise::ns_since;
use crate::precise::{self, wait_until};
use crate::streams::Router;

/// Most events a timing lane claims and starts per wake-up before it looks at the clock
/// again (one runtime task at most per batch).
pub const MAX_BATCH: usize = 256;

/// Dispatch lateness above which an event counts as late in the live counters, ns.
const LATE_NS: u64 = 1_000_000;

/// An event ready for dispatch: its intended instant (ns from the origin) and resolved
/// dependencies.
pub struct Due {
    /// Shared already (the provider takes it so), which keeps this small for the queues.
    pub ev: Arc<Event>,
    pub plan: Plan,
    pub intended: u64,
}

type Item = Result<Due, trace_format::Error>;

/// Decoded events between the reader and the timing lanes.
const FEED: usize = 1 << 14;

/// Most timing lanes a run may ask for (two are enough to ride out one stalled CPU).
pub const MAX_LANES: usize = 16;

/// Extra room in the event queue for events claimed but not yet taken (at most one per lane).
const FEED_SLACK: usize = MAX_LANES;

struct FeedQueue {
    events: ArrayQueue<Item>,
    /// The intended instant of event `n` (in trace order) at `n % FEED`; written before
    /// `published` counts the event, so lanes can look at the next deadline without taking
    /// the event.
    intended: Box<[AtomicU64]>,
    /// Events queued so far.
    published: AtomicU64,
    /// Events claimed by a lane so far; a lane claims event `n` (by moving this from `n` to
    /// `n + 1`) only when it is due.
    claimed: AtomicU64,
    /// Set by the reader once its first event is planned (queued, or taken by a stream).
    started: AtomicBool,
    /// Set by the reader after its last event is queued.
    done: AtomicBool,
    /// Set when the timing side is gone, so a reader waiting for room stops.
    closed: AtomicBool,
}

impl FeedQueue {
    fn slot(n: u64) -> usize {
        (n % FEED as u64) as usize
    }
}

/// What comes next in the feed.
enum Next {
    /// An event intended at this instant (ns from the origin).
    At(u64),
    /// Nothing decoded yet.
    Waiting,
    /// The trace has ended.
    End,
}

/// The timing side's end of the reader: events in trace order. Several lanes share it: each
/// looks at the next deadline, and whichever is awake when it is due claims the event (a
/// compare-and-swap on a counter) and takes it; nobody holds an event that is not due.
pub struct Feed {
    queue: Arc<FeedQueue>,
}

impl Feed {
    /// Waits until the reader has planned the first event or ended.
    pub fn wait_first(&self) {
        let q = &self.queue;
        while !q.started.load(Acquire) && !q.done.load(Acquire) {
            std::thread::sleep(Duration::from_micros(20));
        }
    }

    /// The next unclaimed event's deadline.
    fn next(&self) -> Next {
        let q = &self.queue;
        // `done` first: once it is set, `published` is final.
        let done = q.done.load(Acquire);
        let mut c = q.claimed.load(Acquire);
        loop {
            if c >= q.published.load(Acquire) {
                return if done { Next::End } else { Next::Waiting };
            }
            let at = q.intended[FeedQueue::slot(c)].load(Acquire);
            // Unchanged head: the slot still held event `c` (a lane that stalled between the
            // two loads could otherwise read the slot's next occupant, FEED events later).
            let now = q.claimed.load(Acquire);
            if now == c {
                return Next::At(at);
            }
            c = now;
        }
    }

    /// Claims and takes the next event if it is due by `now`.
    /// Events decoded and not yet claimed: at most this many can be due.
    fn queued(&self) -> usize {
        let q = &self.queue;
        let published = q.published.load(Acquire);
        usize::try_from(published.saturating_sub(q.claimed.load(Acquire))).unwrap_or(usize::MAX)
    }

    fn claim_due(&self, now: u64) -> Option<Item> {
        let q = &self.queue;
        let mut c = q.claimed.load(Acquire);
        loop {
            if c >= q.published.load(Acquire) || q.intended[FeedQueue::slot(c)].load(Relaxed) > now
            {
                return None;
            }
            // A failed exchange means another lane claimed `c` (or a stale slot was read):
            // look again at the new head.
            match q.claimed.compare_exchange_weak(c, c + 1, AcqRel, Acquire) {
                Ok(_) => break,
                Err(actual) => c = actual,
            }
        }
        // Every claimed event is queued already (it was published after being pushed); two
        // lanes claiming at once may take each other's, both due.
        loop {
            if let Some(item) = q.events.pop() {
                return Some(item);
            }
            std::hint::spin_loop();
        }
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.queue.closed.store(true, Release);
    }
}

/// The located error of an event whose time (or `io_phase` end) overflows at `speed`:
/// `file`, its line or record, `events[N].at` or `events[N].io_phase.duration`.
fn overflow(file: &str, loc: Location, n: u64, e: CompressError) -> trace_format::Error {
    Diagnostic {
        file: file.to_owned(),
        location: loc,
        path: format!("events[{}].{}", loc.record.unwrap_or(n), e.field),
        problem: e.problem,
    }
    .into()
}

/// Starts the reader thread: decodes `reader`'s events, compresses each by `speed`
/// ([`compress`]: its time becomes its intended instant, an `io_phase`'s duration and rate
/// follow, so dependencies are planned and providers run on the compressed trace), plans
/// their dependencies with `deps` (in trace order, which is dispatch order) and queues them. Stops after the
/// first read error (which it passes on), when `stop` is set, or when the feed is dropped.
/// With a `router`, bare `io` events go to their volume's stream instead
/// ([`crate::streams`]), and the thread ends their streams before it ends.
pub(crate) fn spawn_reader(
    reader: TraceReader,
    file: String,
    mut deps: Deps,
    speed: f64,
    io_rate: IoRate,
    stop: Arc<AtomicBool>,
    mut router: Option<Router>,
) -> std::io::Result<(std::thread::JoinHandle<()>, Feed)> {
    let queue = Arc::new(FeedQueue {
        events: ArrayQueue::new(FEED + FEED_SLACK),
        intended: (0..FEED).map(|_| AtomicU64::new(0)).collect(),
        published: AtomicU64::new(0),
        claimed: AtomicU64::new(0),
        started: AtomicBool::new(false),
        done: AtomicBool::new(false),
        closed: AtomicBool::new(false),
    });
    let q = queue.clone();
    let handle = std::thread::Builder::new()
        .name("cnsreplay-reader".into())
        .spawn(move || {
            let gone = || q.closed.load(Acquire) || stop.load(Relaxed);
            let mut n = 0u64;
            'events: for item in reader {
                // A time the speed makes overflow is a located error, due at once (it stops
                // the run), never a saturated time.
                let item = item.and_then(|(mut ev, loc)| match compress(&mut ev, speed, io_rate) {
                    Ok(()) => Ok((ev.at, ev)),
                    Err(e) => Err(overflow(&file, loc, n, e)),
                });
                if let (Some(r), Ok((_, ev))) = (&mut router, &item) {
                    r.before(&ev.op);
                }
                let mut item = match item {
                    Ok((intended, ev)) => {
                        let due = Due {
                            intended,
                            plan: deps.plan(&ev.op, ev.at),
                            ev: Arc::new(ev),
                        };
                        let planned = || q.started.store(true, Release);
                        match &mut router {
                            Some(r) => match r.route(due, &deps, &planned) {
                                Some(due) => Ok(due),
                                // Taken by its stream (or dropped by a stop).
                                None if stop.load(Relaxed) => break 'events,
                                None => continue,
                            },
                            None => {
                                planned();
                                Ok(due)
                            }
                        }
                    }
                    Err(e) => Err(e),
                };
                let end = item.is_err() || stop.load(Relaxed);
                // Polls while FEED events are queued (a sixth of a second ahead at 100 k/s), so
                // the lanes never have to wake the reader. A read error is due at once.
                while n - q.claimed.load(Acquire) >= FEED as u64 {
                    if gone() {
                        break 'events;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                let at = item.as_ref().map_or(0, |d| d.intended);
                q.intended[FeedQueue::slot(n)].store(at, Release);
                // Room for FEED unclaimed events plus those claimed but not yet taken.
                loop {
                    match q.events.push(item) {
                        Ok(()) => break,
                        Err(back) if !gone() => {
                            item = back;
                            std::thread::sleep(Duration::from_micros(50));
                        }
                        Err(_) => break 'events,
                    }
                }
                n += 1;
                q.published.store(n, Release);
                if end {
                    break;
                }
            }
            q.done.store(true, Release);
            if let Some(r) = router {
                r.finish();
            }
        })?;
    Ok((handle, Feed { queue }))
}

/// A claimed event with its dispatch instant (ns from the origin).
pub type Dispatched = (Due, u64);

/// Where a timing lane puts the events it claims at one wake-up. The lane claims them one by
/// one, and a starter that starts each as it comes ([`Starter::add`]) leaves a lane that
/// stalls mid-way holding one claimed event, not the rest of the wake-up's: those stay
/// unclaimed, for the other lane.
pub trait Starter: Sync {
    /// What one wake-up's events gather in.
    type Batch;
    /// A wake-up's first claimed event is coming; about `expected` may follow.
    fn begin(&self, expected: usize) -> Self::Batch;
    /// One claimed event, stamped with its dispatch instant: started at once, or kept for
    /// [`Starter::end`].
    fn add(&self, batch: &mut Self::Batch, d: Dispatched);
    /// The wake-up's last event is claimed.
    fn end(&self, batch: Self::Batch);
}

/// How the timing lanes run (recorded in the manifest with the run options).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimingOptions {
    /// Timing lanes: threads that each sleep to the next deadline (or their next grid point)
    /// and hand over everything due by then. 0 = one per CPU the process may use, at most 2
    /// (see the module notes for why two).
    pub lanes: usize,
    /// Spacing of each lane's grid of wake-up points, ns: a lane wakes at most once per point
    /// (the lanes' grids interleaved), so at high rates events go out in small groups, each up
    /// to `min_wake_ns / lanes` late while all lanes run, instead of costing a wake-up each.
    /// Events further apart wake a lane at their own deadline. 0: every deadline.
    pub min_wake_ns: u64,
    /// Pin each lane to its own CPU (when there are as many CPUs as lanes).
    pub pin: bool,
    /// Run the lanes SCHED_FIFO (needs root or CAP_SYS_NICE; nice −10 otherwise).
    pub realtime: bool,
}

/// Default of [`TimingOptions::min_wake_ns`].
pub const MIN_WAKE_NS: u64 = 80_000;

impl Default for TimingOptions {
    fn default() -> Self {
        Self {
            lanes: 0,
            min_wake_ns: MIN_WAKE_NS,
            pin: true,
            realtime: true,
        }
    }
}

impl TimingOptions {
    /// The same options with `lanes` resolved for this process.
    pub fn resolved(self) -> Self {
        self.resolved_for(precise::allowed_cpus().len())
    }

    /// How many lanes run on a process that may use `cpus` CPUs.
    pub fn lanes_for(&self, cpus: usize) -> usize {
        self.resolved_for(cpus).lanes
    }

    /// The same options with `lanes` resolved for a process that may use `cpus` CPUs.
    fn resolved_for(self, cpus: usize) -> Self {
        Self {
            lanes: match self.lanes {
                0 => cpus.clamp(1, 2),
                n => n,
            },
            ..self
        }
    }
}

/// Runs the dispatch path until the trace ends or a stop is requested: timing lanes that
/// wait for each deadline `origin + intended`, claim every event due by then and hand each
/// to `starter` as they claim it, one batch per wake-up, on the lane itself. Returns notices
/// about settings that could not be made.
#[expect(
    clippy::needless_pass_by_value,
    reason = "the feed is dropped here, which tells a reader still waiting for room to stop"
)]
pub fn dispatch(
    feed: Feed,
    origin: Instant,
    opts: TimingOptions,
    control: &RunControl,
    live: &Live,
    starter: impl Starter,
) -> std::io::Result<Vec<String>> {
    let mut notices = Vec::new();
    let _cpu_latency = precise::request_cpu_latency()
        .map_err(|n| notices.push(n))
        .ok();
    let cpus = precise::allowed_cpus();
    let opts = opts.resolved_for(cpus.len());
    // Pinned only when each lane gets a CPU of its own.
    let pin = opts.pin && opts.lanes > 1 && cpus.len() >= opts.lanes;
    let (feed, starter) = (&feed, &starter);
    std::thread::scope(|scope| {
        let mut threads = Vec::new();
        for lane in 0..opts.lanes {
            let cpu = cpus.get(lane).filter(|_| pin).copied();
            let t = std::thread::Builder::new()
                .name(format!("cnsreplay-timing-{lane}"))
                .spawn_scoped(scope, move || {
                    let mut notices = precise::prepare_timing_thread(opts.realtime);
                    if let Some(cpu) = cpu
                        && let Err(e) = precise::pin_to_cpu(cpu)
                    {
                        notices.push(format!(
                            "could not pin timing lane {lane} to CPU {cpu} ({e})"
                        ));
                    }
                    lane_loop(
                        feed,
                        origin,
                        Grid {
                            period: opts.min_wake_ns,
                            phase: opts.min_wake_ns * lane as u64 / opts.lanes as u64,
                        },
                        control,
                        live,
                        starter,
                    );
                    precise::leave_timing_thread();
                    notices
                });
            match t {
                Ok(t) => threads.push(t),
                // The lanes already running carry the run (less well); none at all is an error.
                Err(e) if !threads.is_empty() => {
                    notices.push(format!(
                        "could not start timing lane {lane} ({e}); running with {lane}"
                    ));
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        for t in threads {
            for n in t.join().unwrap_or_default() {
                if !notices.contains(&n) {
                    notices.push(n);
                }
            }
        }
        Ok(notices)
    })
}

/// When a lane may wake: on its own points `phase + k·period` (ns from the origin), at
/// most one wake-up per point, so lanes take turns (lane `i` of `n` at phase `i·period/n`)
/// and events go out at most `period / n` after they are due while every lane is running;
/// or at a deadline itself when that is later. `period` 0: at every deadline.
#[derive(Debug, Clone, Copy)]
struct Grid {
    period: u64,
    phase: u64,
}

impl Grid {
    /// The first instant after `last_wake` this lane may wake for an event due at `due`.
    fn wake_at(self, last_wake: Option<u64>, due: u64) -> u64 {
        let Some(t) = last_wake.filter(|_| self.period > 0) else {
            return due;
        };
        let point = if t < self.phase {
            self.phase
        } else {
            ((t - self.phase) / self.period + 1) * self.period + self.phase
        };
        due.max(point)
    }
}

/// One timing lane: looks at the next deadline, sleeps until it (or the lane's next grid
/// point, if later), then claims every event due by then, each stamped with its dispatch
/// instant and handed to `starter` as it is claimed.
fn lane_loop<S: Starter>(
    feed: &Feed,
    origin: Instant,
    grid: Grid,
    control: &RunControl,
    live: &Live,
    starter: &S,
) {
    let stop = control.stop_flag();
    let mut last_wake = None;
    let mut behind = 0u32;
    loop {
        if stop.load(Relaxed) {
            break;
        }
        let due = match feed.next() {
            Next::At(at) => {
                // The poll interval falls back to 20 µs only once the reader is ahead again
                // (an event not yet due). An event already overdue after a poll means the
                // reader is still the bottleneck: the next poll keeps its spacing, so the lane
                // gathers what the reader decoded meanwhile instead of waking every 20 µs for
                // a few events (each wake-up preempting the reader on a shared CPU: noop at
                // its maximum on one core, docs/PERFORMANCE.md). The clock is read only after
                // a poll, not on every pass of this loop.
                if behind > 0 && ns_since(origin, Instant::now()) < at {
                    behind = 0;
                }
                at
            }
            Next::End => break,
            Next::Waiting => {
                // Only when the reader is behind (a trace decoding slower than it
                // dispatches): poll rather than make the reader wake us, from 20 µs up to
                // 320 µs apart while it stays behind. (Every 20 µs, at the noop provider's
                // maximum rate on one CPU, these wake-ups and the hand-offs they caused were
                // a third of the CPU time, most of it in the kernel.)
                std::thread::sleep(Duration::from_micros(20 << behind.min(4)));
                behind += 1;
                continue;
            }
        };
        let deadline = origin + Duration::from_nanos(grid.wake_at(last_wake, due));
        if !wait_until(deadline, || stop.load(Relaxed)) {
            break;
        }
        // Every event due by `now` goes out (up to MAX_BATCH per look at the clock).
        let now = ns_since(origin, Instant::now());
        let mut batch = None;
        let (mut claimed, mut late, mut worst) = (0usize, 0u64, 0u64);
        while claimed < MAX_BATCH {
            let d = match feed.claim_due(now) {
                None => break,
                Some(Ok(d)) => d,
                Some(Err(e)) => {
                    control.request_stop(format!("trace read error: {e}"));
                    if let Some(b) = batch {
                        starter.end(b);
                    }
                    return;
                }
            };
            // Stamped when claimed, not with the wake-up's clock reading: a lane stopped
            // mid-batch must not make the rest of the batch look on time. (It also covers two
            // lanes claiming at once and taking each other's event, which was due by the other
            // lane's earlier reading.)
            let at = ns_since(origin, Instant::now());
            let lateness = at.saturating_sub(d.intended);
            worst = worst.max(lateness);
            late += u64::from(lateness > LATE_NS);
            // Counted before the event starts, so `in_flight` never sees it done but not
            // dispatched.
            live.dispatched_op(d.ev.op.op_type());
            let b = batch.get_or_insert_with(|| starter.begin(feed.queued() + 1));
            starter.add(b, (d, at));
            claimed += 1;
        }
        // A full batch: look at the clock again at once.
        last_wake = (claimed < MAX_BATCH).then_some(now);
        if let Some(b) = batch {
            if late > 0 {
                live.late.fetch_add(late, Relaxed);
            }
            live.worst_lag_ns.fetch_max(worst, Relaxed);
            starter.end(b);
        }
    }
}
