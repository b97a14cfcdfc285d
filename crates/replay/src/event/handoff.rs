//! The hand-off thread: where the calls that the timing lanes started inline (a provider
//! whose calls start inline: `noop`, `sim`) and that did not finish at once are waited for,
//! finished and recorded.
//!
//! A lane must never wait for a lock that a thread of normal priority holds: when that
//! thread is preempted holding it, the lane waits as long, and with it every event it has
//! claimed. A lane that spawned the rest of its batch onto tokio took the inject queue's, the
//! task list's and the idle workers' mutexes, which the workers and the sim's timer thread
//! take too. `perf sched` showed both lanes blocked 2.6 ms on one of them while the worker
//! holding it sat runnable behind the sink thread; `scripts/lane-waits.sh` counted ~200 such
//! waits per second per lane (docs/PERFORMANCE.md). So a lane sends the rest of a batch
//! down futures' unbounded channel, whose send never waits for another sender (a node
//! swapped onto a list, then this thread's waker taken and unparked: an atomic swap, and a
//! futex wake when it sleeps). Not crossbeam's `SegQueue` nor std's `mpsc`: there a sender
//! that finds the current block full spins until the sender that filled it links the next
//! one, and a real-time lane spinning on a thread it preempted keeps that thread off the CPU
//! (the probe's thread sends here too).
//!
//! This thread then waits for the batch's running calls itself, as a small executor whose
//! waker unparks it, rather than spawning them onto tokio: spawning would add a wake-up of
//! this thread to each batch's way to a worker, and on two CPUs that extra thread made
//! completions later (tried, not kept). A completion (the sim's timer firing a call's
//! channel) wakes this thread directly.
//! Events that wait for a dependency or a slot still get a runtime task each, spawned from
//! here. The completion probe measures this thread's wake-up delay for such a run (the path
//! its completions take), and its busy time counts as the workers' does.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, mpsc};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use futures::stream::{FuturesUnordered, StreamExt};

use super::{Exec, Later, Shared, Slot, cancelled, fail, spawn_waiting, timed};
use crate::precise::Unpark;
use crate::provider::Provider;

/// What the hand-off thread is given.
enum Item {
    /// What a lane left of a batch it started.
    Batch(Vec<Later>),
    /// A completion probe: the thread answers with the instant it got to it.
    Probe(mpsc::SyncSender<Instant>),
}

/// The channel between the lanes and the hand-off thread (`Shared::handoff`).
pub(crate) struct Handoff {
    tx: UnboundedSender<Item>,
    closed: AtomicBool,
    /// Time the thread spent working, ns.
    busy_ns: AtomicU64,
}

/// The receiving end of a [`Handoff`], for [`start`].
pub(crate) struct HandoffRx(UnboundedReceiver<Item>);

impl Handoff {
    /// A hand-off and the receiving end its thread takes.
    pub(crate) fn new() -> (Arc<Self>, HandoffRx) {
        let (tx, rx) = unbounded();
        let h = Self {
            tx,
            closed: AtomicBool::new(false),
            busy_ns: AtomicU64::new(0),
        };
        (Arc::new(h), HandoffRx(rx))
    }

    /// Queues what a lane left of a batch and wakes the thread; takes no lock.
    pub(super) fn batch(&self, later: Vec<Later>) {
        self.push(Item::Batch(later));
    }

    /// Queues a completion probe, answered with the instant the thread got to it.
    pub(crate) fn probe(&self, tx: mpsc::SyncSender<Instant>) {
        self.push(Item::Probe(tx));
    }

    /// Sends `item`; the channel wakes the thread. Takes no lock and never waits.
    fn push(&self, item: Item) {
        let _ = self.tx.unbounded_send(item);
    }

    /// Time the thread has spent working so far.
    pub(crate) fn busy(&self) -> Duration {
        Duration::from_nanos(self.busy_ns.load(Relaxed))
    }
}

/// The running hand-off thread of a run. Dropping it (after the drain) lets the thread
/// finish what is still queued or running, then waits for it to end.
pub(crate) struct HandoffThread {
    handoff: Arc<Handoff>,
    join: Option<JoinHandle<()>>,
}

impl HandoffThread {
    pub(crate) fn handoff(&self) -> &Arc<Handoff> {
        &self.handoff
    }
}

impl Drop for HandoffThread {
    fn drop(&mut self) {
        self.handoff.closed.store(true, SeqCst);
        if let Some(j) = self.join.take() {
            // After `closed`: the thread looks at the channel once more before it ends.
            j.thread().unpark();
            let _ = j.join();
        }
    }
}

/// Starts the hand-off thread of `sh` with the receiving end of its [`Handoff`] (none
/// without one).
pub(crate) fn start<P: Provider>(
    sh: &Arc<Shared<P>>,
    rx: Option<HandoffRx>,
    rt: tokio::runtime::Handle,
) -> std::io::Result<Option<HandoffThread>> {
    let (Some(handoff), Some(HandoffRx(rx))) = (sh.handoff.clone(), rx) else {
        return Ok(None);
    };
    let (sh, h) = (sh.clone(), handoff.clone());
    let join = std::thread::Builder::new()
        .name("cnsreplay-handoff".into())
        .spawn(move || run(&sh, &h, rx, &rt))?;
    Ok(Some(HandoffThread {
        handoff,
        join: Some(join),
    }))
}

/// The thread: takes what is queued, polls the calls that were woken, sends what finished
/// to the sink in one message, and parks until it is woken again.
fn run<P: Provider>(
    sh: &Arc<Shared<P>>,
    h: &Handoff,
    mut rx: UnboundedReceiver<Item>,
    rt: &tokio::runtime::Handle,
) {
    // Timeouts are tokio timers, and waiting events are spawned onto the runtime.
    let _rt = rt.enter();
    let waker = Waker::from(Arc::new(Unpark::current()));
    let mut cx = Context::from_waker(&waker);
    let mut running = FuturesUnordered::new();
    // The calls' events by slot; `free`: slots to reuse.
    let mut execs: Vec<Option<(Exec, Option<Slot>)>> = Vec::new();
    let mut free = Vec::new();
    let mut cancel = Box::pin(cancelled(sh.cancel.clone()));
    let mut stopped = false;
    let mut finished = Vec::new();
    loop {
        let woke = Instant::now();
        // Until Pending, which leaves this thread's waker with the channel.
        while let Poll::Ready(Some(item)) = rx.poll_next_unpin(&mut cx) {
            let later = match item {
                Item::Probe(tx) => {
                    let _ = tx.send(Instant::now());
                    continue;
                }
                Item::Batch(later) => later,
            };
            for (x, call, permit) in spawn_waiting(sh, rt, later) {
                if stopped {
                    drop((call, permit));
                    finished.push(x.finish(sh, Err(cancelled_call())));
                    continue;
                }
                let i = free.pop().unwrap_or_else(|| {
                    execs.push(None);
                    execs.len() - 1
                });
                running.push(timed(sh, &x, call).map(move |r| (i, r)));
                execs[i] = Some((x, permit));
            }
        }
        if !stopped && cancel.as_mut().poll(&mut cx).is_ready() {
            stopped = true;
            running.clear();
            for (x, permit) in execs.iter_mut().filter_map(Option::take) {
                drop(permit);
                finished.push(x.finish(sh, Err(cancelled_call())));
            }
            free = (0..execs.len()).collect();
        }
        while let Poll::Ready(Some((i, r))) = running.poll_next_unpin(&mut cx) {
            if let Some((x, permit)) = execs[i].take() {
                drop(permit);
                finished.push(x.finish(sh, r.map_err(|e| (e.class, e.message))));
                free.push(i);
            }
        }
        sh.send_batch(std::mem::take(&mut finished));
        let worked = u64::try_from(woke.elapsed().as_nanos()).unwrap_or(u64::MAX);
        h.busy_ns.fetch_add(worked, Relaxed);
        if h.closed.load(SeqCst) && running.is_empty() {
            // The lanes are done (and joined) when `closed` is set; anything the probe sent
            // since is answered or dropped with the channel.
            return;
        }
        std::thread::park();
    }
}

fn cancelled_call() -> (String, String) {
    fail("cancelled", "run stopped after the grace period")
}
