//! The dispatch path: a reader thread decoding the trace ahead of time, the timing thread
//! that hands events over at their deadlines, and a dispatch thread that gives them to the
//! runtime.
//!
//! The timing thread must never wait for another thread: it runs at a higher priority than
//! everything else, so when it blocks on a lock held by a thread that was preempted, it waits
//! until that thread gets a CPU again, milliseconds on a busy 2-core machine. `perf` showed
//! exactly that with the timing thread spawning onto tokio itself: futex waits in tokio's
//! inject-queue and task-list locks (~16 a second at nice −10, ~125 real-time), some 3.5–5.4 ms
//! long. So:
//! - The reader hands over chunks of up to [`CHUNK`] decoded events (dependencies already
//!   planned) through a lock-free bounded queue; when it is full the reader polls, so the
//!   timing thread never has to wake it (waking a sender blocked on a full `sync_channel`
//!   took a lock and a syscall, and per event cost the reader a fifth of a core).
//! - The timing thread sleeps to each absolute deadline ([`precise::wait_until`]), stamps every
//!   event due by then as dispatched, pushes it onto a lock-free queue, and unparks the
//!   dispatch thread (an atomic swap and, when it sleeps, one futex wake: no lock).
//! - The dispatch thread takes what is queued and spawns it onto the runtime in one batch; it
//!   is the one that takes tokio's locks. The time an event waits there is part of its
//!   `pickup` (dispatched → started), which is recorded per event and summarised.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;
use trace_format::{Event, TraceReader};

use crate::deps::{Deps, Plan};
use crate::engine::RunControl;
use crate::live::Live;
use crate::precise::{self, wait_until};
use crate::provider::ns_since;

/// Most events the reader hands over at once.
pub const CHUNK: usize = 1024;

/// Chunks buffered between the reader and the timing thread (so up to `CHUNKS × CHUNK`
/// events are decoded ahead).
const CHUNKS: usize = 16;

/// Most events the timing thread hands over per wake-up before it looks at the clock again,
/// and the dispatch thread spawns per runtime task.
pub const MAX_BATCH: usize = 256;

/// Events handed over but not yet spawned before the timing thread waits for the dispatch
/// thread (82 ms at 100 k events/s: a runtime that far behind is the run's bottleneck, and
/// the lateness it then causes is recorded).
const HANDOFF: usize = 1 << 13;

/// Dispatch lateness above which an event counts as late in the live counters, ns.
const LATE_NS: u64 = 1_000_000;

/// An event ready for dispatch: its intended instant (ns from the origin) and resolved
/// dependencies.
pub struct Due {
    pub ev: Event,
    pub plan: Plan,
    pub intended: u64,
}

type Item = Result<Due, trace_format::Error>;

struct FeedQueue {
    chunks: ArrayQueue<Vec<Item>>,
    /// Set by the reader after its last chunk is queued.
    done: AtomicBool,
    /// Set when the timing side is gone, so a reader waiting for room stops.
    closed: AtomicBool,
}

/// The timing thread's end of the reader: events in trace order, a chunk at a time.
pub struct Feed {
    queue: Arc<FeedQueue>,
    cur: std::vec::IntoIter<Item>,
}

impl Feed {
    /// The next event, waiting for the reader if it has none decoded; `None` at the end.
    pub fn next_blocking(&mut self) -> Option<Item> {
        loop {
            if let Some(item) = self.try_next() {
                return Some(item);
            }
            if self.queue.done.load(Acquire) {
                // Everything the reader queued is visible once `done` is.
                return self.try_next();
            }
            // Only when the reader is behind (the first events, or a trace decoding slower
            // than it dispatches): poll rather than make the reader wake us.
            std::thread::sleep(Duration::from_micros(20));
        }
    }

    /// The next event if one is decoded already.
    fn try_next(&mut self) -> Option<Item> {
        loop {
            if let Some(item) = self.cur.next() {
                return Some(item);
            }
            self.cur = self.queue.chunks.pop()?.into_iter();
        }
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.queue.closed.store(true, Release);
    }
}

fn intended_ns(at: u64, speed: f64) -> u64 {
    if speed == 1.0 {
        at
    } else {
        (at as f64 / speed) as u64
    }
}

/// Starts the reader thread: decodes `reader`'s events, plans their dependencies with `deps`
/// (in trace order, which is dispatch order) and queues them in chunks. Stops after the
/// first read error (which it passes on), when `stop` is set, or when the feed is dropped.
pub fn spawn_reader(
    reader: TraceReader,
    mut deps: Deps,
    speed: f64,
    stop: Arc<AtomicBool>,
) -> std::io::Result<(std::thread::JoinHandle<()>, Feed)> {
    let queue = Arc::new(FeedQueue {
        chunks: ArrayQueue::new(CHUNKS),
        done: AtomicBool::new(false),
        closed: AtomicBool::new(false),
    });
    let q = queue.clone();
    let handle = std::thread::Builder::new()
        .name("cnsreplay-reader".into())
        .spawn(move || {
            let push = |mut chunk: Vec<Item>| -> bool {
                loop {
                    match q.chunks.push(chunk) {
                        Ok(()) => return true,
                        Err(back) if !(q.closed.load(Acquire) || stop.load(Relaxed)) => {
                            chunk = back;
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        Err(_) => return false,
                    }
                }
            };
            // The first chunk holds only the first event, so the clock starts without waiting
            // for a whole chunk to decode.
            let mut chunk = Vec::with_capacity(1);
            for item in reader.events() {
                let item = item.map(|ev| Due {
                    intended: intended_ns(ev.at, speed),
                    plan: deps.plan(&ev.op),
                    ev,
                });
                let end = item.is_err() || stop.load(Relaxed);
                chunk.push(item);
                if chunk.len() == chunk.capacity() || end {
                    let full = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK));
                    if !push(full) {
                        break;
                    }
                }
                if end {
                    break;
                }
            }
            if !chunk.is_empty() {
                push(chunk);
            }
            q.done.store(true, Release);
        })?;
    Ok((
        handle,
        Feed {
            queue,
            cur: Vec::new().into_iter(),
        },
    ))
}

/// An event handed to the dispatch thread, with its dispatch instant (ns from the origin).
pub type Dispatched = (Due, u64);

/// Runs the dispatch path until the trace ends or a stop is requested: a timing thread that
/// waits for each deadline `origin + intended` and hands over every event due by then, and
/// a dispatch thread that passes them to `spawn` in batches. `first` is an event the caller
/// took from `feed` already. Returns the notices of [`precise::prepare_timing_thread`] and
/// [`precise::request_cpu_latency`].
pub fn dispatch(
    feed: Feed,
    first: Option<Item>,
    origin: Instant,
    control: &RunControl,
    live: &Live,
    mut spawn: impl FnMut(Vec<Dispatched>) + Send,
) -> std::io::Result<Vec<String>> {
    let handoff = ArrayQueue::<Dispatched>::new(HANDOFF);
    let finished = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (handoff, finished) = (&handoff, &finished);
        let dispatcher = std::thread::Builder::new()
            .name("cnsreplay-dispatch".into())
            .spawn_scoped(scope, move || {
                // Behind the timing thread, ahead of the workers: on the 2-core benchmark
                // (with a real-time timing thread) events waited here 0.4–1.0 ms (pickup p50)
                // at nice 0, 64–159 µs at nice −10.
                // Without permission it stays at nice 0; the timing thread's notice says so.
                let _ = precise::raise_priority();
                loop {
                    let mut batch = Vec::new();
                    while batch.len() < MAX_BATCH {
                        match handoff.pop() {
                            Some(d) => batch.push(d),
                            None => break,
                        }
                    }
                    if !batch.is_empty() {
                        spawn(batch);
                    } else if finished.load(Acquire) {
                        // Everything pushed before `finished` is visible now.
                        if handoff.is_empty() {
                            return;
                        }
                    } else {
                        std::thread::park();
                    }
                }
            })?;
        let waker = dispatcher.thread().clone();
        // Owned by the timing thread: however it ends (trace end, stop, panic, or failing to
        // start at all), the dispatch thread is told to drain and exit, so the scope ends.
        let finish = FinishDispatch {
            finished,
            waker: waker.clone(),
        };
        let timing = std::thread::Builder::new()
            .name("cnsreplay-timing".into())
            .spawn_scoped(scope, move || {
                let _finish = finish;
                timing_loop(
                    feed,
                    first,
                    origin,
                    control,
                    live,
                    |mut d| {
                        while let Err(back) = handoff.push(d) {
                            d = back;
                            waker.unpark();
                            std::thread::sleep(Duration::from_micros(50));
                        }
                    },
                    || waker.unpark(),
                )
            })?;
        let notices = timing.join().unwrap_or_default();
        let _ = dispatcher.join();
        Ok(notices)
    })
}

/// Tells the dispatch thread that nothing more will be handed over, when dropped.
struct FinishDispatch<'a> {
    finished: &'a AtomicBool,
    waker: std::thread::Thread,
}

impl Drop for FinishDispatch<'_> {
    fn drop(&mut self) {
        self.finished.store(true, Release);
        self.waker.unpark();
    }
}

/// The timing loop proper: `hand_off` each due event with its dispatch instant, then
/// `flush` once per wake-up.
fn timing_loop(
    mut feed: Feed,
    first: Option<Item>,
    origin: Instant,
    control: &RunControl,
    live: &Live,
    mut hand_off: impl FnMut(Dispatched),
    flush: impl Fn(),
) -> Vec<String> {
    let mut notices = precise::prepare_timing_thread();
    let _cpu_latency = precise::request_cpu_latency()
        .map_err(|n| notices.push(n))
        .ok();
    let stop = control.stop_flag();
    let mut next = first;
    loop {
        let head = match next.take().or_else(|| feed.next_blocking()) {
            Some(Ok(d)) => d,
            Some(Err(e)) => {
                control.request_stop(format!("trace read error: {e}"));
                break;
            }
            None => break,
        };
        let deadline = origin + Duration::from_nanos(head.intended);
        if !wait_until(deadline, || stop.load(Relaxed)) {
            break;
        }
        // Every event due by `now` goes out stamped with it (up to MAX_BATCH per look at
        // the clock, so a backlog cannot age the stamp).
        let now = ns_since(origin, Instant::now());
        let (mut n, mut late, mut worst) = (0u64, 0u64, 0u64);
        let mut due = Some(head);
        while let Some(d) = due.take() {
            let lateness = now.saturating_sub(d.intended);
            worst = worst.max(lateness);
            late += u64::from(lateness > LATE_NS);
            n += 1;
            // Counted before the hand-off, so `in_flight` never sees it done but not dispatched.
            live.dispatched.fetch_add(1, Relaxed);
            hand_off((d, now));
            if n as usize == MAX_BATCH {
                break;
            }
            match feed.try_next() {
                Some(Ok(d)) if d.intended <= now => due = Some(d),
                other => next = other,
            }
        }
        flush();
        if late > 0 {
            live.late.fetch_add(late, Relaxed);
        }
        live.worst_lag_ns.fetch_max(worst, Relaxed);
    }
    notices
}
