//! One event: its dependencies, a concurrency slot, the provider call under an optional
//! timeout, and its record for the sink.
//!
//! A provider whose calls start inline ([`Provider::starts_inline`]: `noop`, `sim`) has each
//! event started by the timing lane that claimed it, in the runtime's context, as soon as it
//! claims it ([`OnLane`]: a lane that stalls mid-wake-up holds one claimed event, and the
//! rest stays unclaimed for the other lane); otherwise each wake-up's batch is started in
//! one go by one runtime task ([`Gathered`], [`run_batch`]). When nothing an
//! event depends on is still pending and a slot is free, the provider is called and the call
//! polled once. An operation that completes then (the `noop` provider, a marker, a failed
//! dependency) is finished there, and a wake-up's records go to the sink in one message;
//! the events that must wait are handed to the runtime in one task per batch: that task
//! waits for the batch's provider calls still running ([`run_calls`]), and gives an event
//! waiting for a dependency or a slot a task of its own. (A runtime task per event was half
//! of the engine's CPU at its maximum rate: allocating and copying each event's future,
//! registering and removing the task; and a runtime task per batch adds a worker wake-up to
//! every event's pickup.) Either way the instants mean the same: `pickup` ends when the
//! engine reaches the event, `started` is taken just before the provider call, and both
//! include the time spent on the batch's earlier events.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant, SystemTime};

use futures::FutureExt;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use trace_format::{Event, OpType};

use crate::control::RunControl;
use crate::deps::{self, Plan, Wait};
use crate::ledger::Ledger;
use crate::live::Live;
use crate::provider::{OpCtx, Provider, ProviderError, SnapshotMark, SnapshotTimeline, ns_since};
use crate::record::{EventRecord, Outcome};
use crate::sink::{Done, ToSink};
use crate::timing::{Dispatched, Due, MAX_BATCH, Starter};

mod handoff;
pub(crate) use handoff::{Handoff, HandoffThread, start as start_handoff};

/// What every event of a run shares.
pub(crate) struct Shared<P> {
    pub provider: Arc<P>,
    pub origin: Instant,
    /// `origin` on the wall clock (`manifest.origin`; `OpCtx::origin_wall`).
    pub origin_wall: SystemTime,
    pub ledger: Arc<Ledger>,
    pub snapshots: Arc<SnapshotTimeline>,
    pub done: futures::channel::mpsc::UnboundedSender<ToSink>,
    pub live: Arc<Live>,
    pub cancel: watch::Receiver<bool>,
    /// Per op type with a concurrency limit: its slots, and when one was last released
    /// ([`deps::mono_ns`]).
    pub sems: HashMap<OpType, (Arc<Semaphore>, Arc<AtomicU64>)>,
    /// Test hook (`CNSREPLAY_TEST_ENGINE_DELAY`): how long to hold up every dispatched
    /// batch before starting it, an engine delay the validity checks must catch.
    pub inject_delay: Option<Duration>,
    pub timeouts: HashMap<OpType, Duration>,
    pub fail_fast: bool,
    pub control: RunControl,
    /// How the timing lanes hand what continues to the runtime (a provider whose calls
    /// start inline); `None`: batches run on runtime tasks, which spawn directly.
    pub handoff: Option<Arc<Handoff>>,
}

impl<P> Shared<P> {
    fn now(&self) -> u64 {
        ns_since(self.origin, Instant::now())
    }

    /// Hands one finished event to the sink.
    fn send_one(&self, d: Done) {
        let _ = self.done.unbounded_send(ToSink::One(Box::new(d)));
        self.live.done.fetch_add(1, SeqCst);
    }

    /// Hands finished events to the sink in one message.
    fn send_batch(&self, finished: Vec<Done>) {
        if finished.is_empty() {
            return;
        }
        let n = finished.len() as u64;
        let _ = self.done.unbounded_send(ToSink::Batch(finished));
        // After the send: the drain must not see an event done before its record is queued.
        self.live.done.fetch_add(n, SeqCst);
    }
}

type Failure = (String, String);

fn fail(class: &str, msg: impl Into<String>) -> Failure {
    (class.to_owned(), msg.into())
}

async fn cancelled(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|c| *c).await;
}

type Call = Pin<Box<dyn Future<Output = Result<(), ProviderError>> + Send>>;

/// Starts every event of a dispatched batch (on the timing lane in the runtime's context,
/// or on a runtime task), sends the records of those that finished at once to the
/// sink in one message, and hands the others to the runtime in one task.
pub(crate) fn run_batch<P: Provider>(sh: &Arc<Shared<P>>, batch: Vec<Dispatched>) {
    if let Some(d) = sh.inject_delay {
        std::thread::sleep(d);
    }
    let mut started = LaneBatch::with_capacity(batch.len());
    for (d, dispatched) in batch {
        start_one(sh, &mut started, d, dispatched);
    }
    end_batch(sh, started);
}

/// The events started together: those one timing lane started at one wake-up, or one
/// gathered batch ([`run_batch`]); what [`end_batch`] hands on.
pub(crate) struct LaneBatch {
    finished: Vec<Done>,
    later: Vec<Later>,
}

impl LaneBatch {
    fn with_capacity(n: usize) -> Self {
        Self {
            finished: Vec::new(),
            later: Vec::with_capacity(n),
        }
    }
}

/// Starts each event on the timing lane as soon as the lane claims it, in the runtime's
/// context: for a provider whose calls start inline. A lane that stalls mid-wake-up then
/// holds one claimed event, while what is still due stays unclaimed for the other lane.
pub(crate) struct OnLane<'a, P> {
    pub sh: &'a Arc<Shared<P>>,
    pub rt: &'a tokio::runtime::Handle,
}

impl<'a, P: Provider> Starter for OnLane<'a, P> {
    /// In the runtime's context from the wake-up's first event to its hand-over: entered
    /// once per wake-up (entering clones the runtime's handle, an atomic both lanes share).
    type Batch = (tokio::runtime::EnterGuard<'a>, LaneBatch);

    fn begin(&self, expected: usize) -> Self::Batch {
        (
            self.rt.enter(),
            LaneBatch::with_capacity(expected.clamp(1, MAX_BATCH)),
        )
    }

    fn add(&self, (_, batch): &mut Self::Batch, (d, dispatched): Dispatched) {
        start_one(self.sh, batch, d, dispatched);
    }

    fn end(&self, (_rt, batch): Self::Batch) {
        end_batch(self.sh, batch);
    }
}

/// Gathers a wake-up's events and starts them together ([`run_batch`]): on a runtime task
/// (a provider whose calls do not start inline), or on the lane after the test hook's delay
/// (`CNSREPLAY_TEST_ENGINE_DELAY`, which holds up each batch before it starts).
pub(crate) struct Gathered<'a, P> {
    pub sh: &'a Arc<Shared<P>>,
    pub rt: &'a tokio::runtime::Handle,
    pub on_lane: bool,
}

impl<P: Provider> Starter for Gathered<'_, P> {
    type Batch = Vec<Dispatched>;

    fn begin(&self, expected: usize) -> Vec<Dispatched> {
        // Sized once (not grown by doubling, a copy of the whole batch each time).
        Vec::with_capacity(expected.clamp(1, MAX_BATCH))
    }

    fn add(&self, batch: &mut Vec<Dispatched>, d: Dispatched) {
        batch.push(d);
    }

    fn end(&self, batch: Vec<Dispatched>) {
        if self.on_lane {
            let _rt = self.rt.enter();
            run_batch(self.sh, batch);
        } else {
            let sh = self.sh.clone();
            self.rt.spawn(async move { run_batch(&sh, batch) });
        }
    }
}

/// Starts one claimed event into `batch`.
fn start_one<P: Provider>(sh: &Shared<P>, batch: &mut LaneBatch, d: Due, dispatched: u64) {
    match start(sh, d, dispatched) {
        Started::Finished(done) => batch.finished.push(done),
        Started::Later(l) => batch.later.push(l),
    }
}

/// Sends the records of a batch's events that finished at once to the sink in one message,
/// and hands the others on in one piece.
fn end_batch<P: Provider>(sh: &Arc<Shared<P>>, batch: LaneBatch) {
    let LaneBatch { finished, later } = batch;
    sh.send_batch(finished);
    if !later.is_empty() {
        // One hand-over (and at most one thread woken) per batch, not per event: from a
        // timing lane to the hand-off thread, which takes no lock a lane could wait for;
        // from a runtime task to the runtime.
        match &sh.handoff {
            Some(h) => h.batch(later),
            None => {
                tokio::spawn(continue_later(sh.clone(), later));
            }
        }
    }
}

/// A batch's events that continue on the runtime, on one task: it waits for the batch's
/// running calls itself; an event waiting for a dependency or a slot gets a task of its
/// own (spawned from inside the runtime, onto that worker's own queue).
async fn continue_later<P: Provider>(sh: Arc<Shared<P>>, later: Vec<Later>) {
    let running = spawn_waiting(&sh, &tokio::runtime::Handle::current(), later);
    if !running.is_empty() {
        run_calls(&sh, running).await;
    }
}

/// Gives each event of `later` that waits for a dependency or a slot a task of its own on
/// `rt`; returns the calls still running.
fn spawn_waiting<P: Provider>(
    sh: &Arc<Shared<P>>,
    rt: &tokio::runtime::Handle,
    later: Vec<Later>,
) -> Vec<(Exec, Call, Option<Slot>)> {
    let mut running = Vec::new();
    for l in later {
        match l {
            Later::Waiting {
                x,
                ev,
                waits,
                queued_since,
            } => {
                rt.spawn(run_waiting(sh.clone(), x, ev, waits, queued_since));
            }
            Later::Running { x, call, permit } => running.push((x, call, permit)),
        }
    }
    running
}

/// Waits for a batch's calls still running, each under its op's timeout, all of them on
/// this one task and until the run is cancelled, and sends each record as its call ends.
///
/// One task per batch, not per event: a task per pending call cost a spawn (an allocation
/// and the runtime's task-list lock) and a registration with the run's cancel signal (its
/// waiter-list lock, shared by every worker) per event, which at 100 k events/s on two
/// cores left the workers saturated. The calls are polled independently (each wakes only
/// itself), so one slow call holds up none of the others.
async fn run_calls<P: Provider>(sh: &Arc<Shared<P>>, calls: Vec<(Exec, Call, Option<Slot>)>) {
    let mut execs = Vec::with_capacity(calls.len());
    let mut pending = FuturesUnordered::new();
    for (i, (x, call, permit)) in calls.into_iter().enumerate() {
        pending.push(timed(sh, &x, call).map(move |r| (i, r)));
        execs.push(Some((x, permit)));
    }
    let cancel = cancelled(sh.cancel.clone());
    tokio::pin!(cancel);
    loop {
        tokio::select! {
            next = pending.next() => {
                let Some((i, r)) = next else { return };
                if let Some((x, permit)) = execs[i].take() {
                    drop(permit);
                    let done = x.finish(sh, r.map_err(|e| (e.class, e.message)));
                    sh.send_one(done);
                }
            }
            () = &mut cancel => break,
        }
    }
    drop(pending);
    for (x, permit) in execs.into_iter().flatten() {
        drop(permit);
        let done = x.finish(
            sh,
            Err(fail("cancelled", "run stopped after the grace period")),
        );
        sh.send_one(done);
    }
}

/// A call still running, under its op's timeout from `started` (when it has one).
fn timed<P: Provider>(
    sh: &Shared<P>,
    x: &Exec,
    call: Call,
) -> impl Future<Output = Result<(), ProviderError>> + Send + 'static {
    let deadline = sh
        .timeouts
        .get(&x.op)
        .map(|&d| (sh.origin + Duration::from_nanos(x.started) + d, d));
    async move {
        match deadline {
            Some((at, d)) => match tokio::time::timeout_at(at.into(), call).await {
                Ok(r) => r,
                Err(_) => Err(ProviderError::new(
                    "timeout",
                    format!("no completion within {d:?}"),
                )),
            },
            None => call.await,
        }
    }
}

/// A concurrency slot held: when it is released, the instant is kept for the next waiter's
/// resume lateness.
struct Slot {
    permit: Option<OwnedSemaphorePermit>,
    released: Arc<AtomicU64>,
}

impl Slot {
    fn new(permit: OwnedSemaphorePermit, released: &Arc<AtomicU64>) -> Self {
        Self {
            permit: Some(permit),
            released: released.clone(),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Before the permit returns: the waiter it wakes sees this instant or a later one.
        self.released.fetch_max(deps::mono_ns(), SeqCst);
        drop(self.permit.take());
    }
}

/// How [`start`] left an event.
enum Started {
    /// It finished: its record.
    Finished(Done),
    /// It continues on a runtime task.
    Later(Later),
}

/// An event that continues on a runtime task.
enum Later {
    /// It waits for a dependency or a slot (`queued_since`: when it found no free slot).
    Waiting {
        x: Exec,
        ev: Arc<Event>,
        waits: Vec<Wait>,
        queued_since: Option<u64>,
    },
    /// Its provider call is still running (waited for by its batch's task).
    Running {
        x: Exec,
        call: Call,
        permit: Option<Slot>,
    },
}

/// Starts one event: finished at once, or to be continued on a runtime task.
fn start<P: Provider>(sh: &Shared<P>, d: Due, dispatched: u64) -> Started {
    let t0 = sh.now();
    let Due {
        ev,
        mut plan,
        intended,
    } = d;
    let waits = plan.take_waits();
    let mut x = Exec {
        id: ev.id,
        op: ev.op.op_type(),
        plan,
        intended,
        due: intended,
        dispatched,
        t0,
        dep_wait: 0,
        queue: 0,
        started: t0,
        // Whether the start depends on more than the engine: a creator or user still
        // running now, or (below) no free slot.
        waited: waits.iter().any(Wait::pending),
        reached: false,
        snap_idx: None,
        mark: sh.snapshots.mark(),
        ctx: None,
        resume: None,
    };
    if x.waited {
        return Started::Later(Later::Waiting {
            x,
            ev,
            waits,
            queued_since: None,
        });
    }
    if !waits.is_empty() {
        let r = deps::check_all(&waits);
        x.dep_wait = sh.now() - t0;
        if let Err(m) = r {
            return Started::Finished(x.finish(sh, Err(fail("dependency_failed", m))));
        }
    }
    let permit = match sh.sems.get(&x.op) {
        None => None,
        Some((sem, released)) => {
            let q0 = sh.now();
            match sem.clone().try_acquire_owned() {
                Ok(p) => {
                    x.queue = sh.now() - q0;
                    Some(Slot::new(p, released))
                }
                Err(_) => {
                    x.waited = true;
                    return Started::Later(Later::Waiting {
                        x,
                        ev,
                        waits: Vec::new(),
                        queued_since: Some(q0),
                    });
                }
            }
        }
    };
    // With nothing to wait for or to queue at, the event starts when the timing lane
    // reached it (a few nanoseconds of bookkeeping earlier): one clock reading fewer.
    let started = if waits.is_empty() && permit.is_none() {
        t0
    } else {
        sh.now()
    };
    match x.call(sh, ev, started) {
        Ok(result) => {
            drop(permit);
            Started::Finished(x.finish(sh, result))
        }
        Err(call) => Started::Later(Later::Running { x, call, permit }),
    }
}

/// An event that waits for a dependency or a slot (`queued_since`: when an inline attempt
/// found no free slot), on its own task.
async fn run_waiting<P: Provider>(
    sh: Arc<Shared<P>>,
    mut x: Exec,
    ev: Arc<Event>,
    waits: Vec<Wait>,
    queued_since: Option<u64>,
) {
    let result: Result<(), Failure> = async {
        // When what the event waited for was released (`deps::mono_ns`; 0: nothing).
        let mut released = 0;
        if !waits.is_empty() {
            let r = tokio::select! {
                r = deps::wait_all(&waits) => r.map_err(|m| fail("dependency_failed", m)),
                () = cancelled(sh.cancel.clone()) => Err(fail("cancelled", "run stopped while waiting for a dependency")),
            };
            x.dep_wait = sh.now() - x.t0;
            r?;
            released = waits.iter().map(Wait::released_at).max().unwrap_or(0);
        }
        let _permit = match sh.sems.get(&x.op) {
            Some((sem, slot_released)) => {
                let q0 = queued_since.unwrap_or_else(|| sh.now());
                let free = if queued_since.is_some() {
                    None
                } else {
                    sem.clone().try_acquire_owned().ok()
                };
                let p = match free {
                    Some(p) => Ok(p),
                    None => {
                        x.waited = true;
                        let p = tokio::select! {
                            p = sem.clone().acquire_owned() => p.map_err(|_| fail("cancelled", "semaphore closed")),
                            () = cancelled(sh.cancel.clone()) => Err(fail("cancelled", "run stopped while queued")),
                        };
                        released = released.max(slot_released.load(SeqCst));
                        p
                    }
                };
                x.queue = sh.now() - q0;
                Some(Slot::new(p?, slot_released))
            }
            None => None,
        };
        let started = sh.now();
        if x.waited {
            // The run's origin on the `mono_ns` clock, from two readings taken together.
            let origin = deps::mono_ns().saturating_sub(sh.now());
            let from = released.saturating_sub(origin).max(x.intended);
            x.resume = Some(started.saturating_sub(from));
            x.due = from;
        }
        match x.call(&sh, ev, started) {
            Ok(r) => r,
            Err(call) => x.complete(&sh, call).await,
        }
    }
    .await;
    let done = x.finish(&sh, result);
    sh.send_one(done);
}

/// What an event carries from its start to its record.
struct Exec {
    id: u64,
    op: OpType,
    /// What its end signals (the waits taken out).
    plan: Plan,
    intended: u64,
    /// When it was due: `intended`, or when its dependency or slot wait was released.
    due: u64,
    dispatched: u64,
    /// When the runtime reached it.
    t0: u64,
    dep_wait: u64,
    queue: u64,
    started: u64,
    waited: bool,
    /// Whether it got as far as the provider call (or was a marker).
    reached: bool,
    snap_idx: Option<usize>,
    mark: SnapshotMark,
    ctx: Option<Arc<OpCtx>>,
    /// For an event that waited: provider call − max(intended, when the wait was released).
    resume: Option<u64>,
}

impl Exec {
    /// Begins the provider call (nothing for a marker) at `started` and polls it once: `Ok`
    /// with its result when it finished then, else the call still running.
    fn call<P: Provider>(
        &mut self,
        sh: &Shared<P>,
        ev: Arc<Event>,
        started: u64,
    ) -> Result<Result<(), Failure>, Call> {
        self.started = started;
        self.reached = true;
        if self.op == OpType::Marker {
            return Ok(Ok(()));
        }
        // A group snapshot is a snapshot in flight too (of several volumes at once).
        if matches!(self.op, OpType::Snapshot | OpType::GroupSnapshot) {
            self.snap_idx = Some(sh.snapshots.begin(self.started));
        }
        let mut ctx = OpCtx::new(sh.origin, ev.id, sh.ledger.clone(), sh.snapshots.clone())
            .with_origin_wall(sh.origin_wall)
            .with_stop(sh.control.stop_flag())
            .with_due(self.due);
        if self.op == OpType::IoPhase {
            let tenant = ev.tenant.as_ref().map_or("", |t| t.as_str());
            ctx = ctx
                .with_live_io(sh.live.clone(), tenant)
                .with_started(self.plan.take_started());
        }
        let ctx = Arc::new(ctx);
        self.ctx = Some(ctx.clone());
        let provider = sh.provider.clone();
        let mut call: Call = Box::pin(async move { provider.execute(ev, ctx).await });
        // A waker that does nothing: a call still pending moves to its batch's task, whose
        // first poll registers that task's waker.
        match call.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(r) => Ok(r.map_err(|e| (e.class, e.message))),
            Poll::Pending => Err(call),
        }
    }

    /// Waits for a call still running, under the op's timeout (from `started`) and until
    /// the run is cancelled.
    async fn complete<P: Provider>(&self, sh: &Shared<P>, call: Call) -> Result<(), Failure> {
        tokio::select! {
            r = timed(sh, self, call) => r.map_err(|e| (e.class, e.message)),
            () = cancelled(sh.cancel.clone()) => Err(fail("cancelled", "run stopped after the grace period")),
        }
    }

    /// Ends the event: signals what it created and used, and builds its record.
    fn finish<P: Provider>(self, sh: &Shared<P>, result: Result<(), Failure>) -> Done {
        let now = sh.now();
        let (completed, phases, io, retries) = match &self.ctx {
            Some(ctx) => {
                // A provider may know the operation completed before `execute` returned (the
                // arrival of the watch event that showed it): use that, within [started, now].
                let completed = match ctx.completed_ns() {
                    Some(c) if result.is_ok() => c.clamp(self.started, now),
                    _ => now,
                };
                let (phases, io, retries) = ctx.take();
                (completed, phases, io, retries)
            }
            None => (now, Vec::new(), Vec::new(), Vec::new()),
        };
        if let Some(i) = self.snap_idx {
            sh.snapshots.end(i, completed);
        }
        if let Some(ctx) = self.ctx.as_ref().filter(|_| self.op == OpType::IoPhase) {
            // Its I/O never began (or the provider did not say): its end releases the wait.
            ctx.io_started();
        }
        self.plan.end(result.is_ok());
        let (outcome, error_class, error) = match result {
            Ok(()) => (Outcome::Ok, None, None),
            Err((c, m)) => (Outcome::Error, Some(c), Some(m)),
        };
        let op = self.op;
        let mut record = EventRecord {
            id: self.id,
            op,
            intended: self.intended,
            dispatched: self.dispatched,
            started: self.started,
            completed,
            outcome,
            error_class,
            error,
            phases,
            dep_wait: self.dep_wait,
            queue: self.queue,
            response: 0,
            service: 0,
            lateness: 0,
            pickup: self.t0.saturating_sub(self.dispatched),
            waited: self.waited,
            start_lateness: (self.reached && !self.waited)
                .then(|| self.started.saturating_sub(self.intended)),
            during_snapshot: matches!(op, OpType::Io | OpType::IoPhase)
                && sh.snapshots.overlapped_since(self.mark),
            retries: (!retries.is_empty()).then(|| retries.into_boxed_slice()),
        };
        record.derive();
        if outcome == Outcome::Error {
            sh.live.failed.fetch_add(1, Relaxed);
            if sh.fail_fast {
                sh.control.request_stop(format!(
                    "fail-fast: event {} ({op}) failed: {}",
                    self.id,
                    record.error_class.as_deref().unwrap_or("error")
                ));
            }
        }
        Done {
            resume_lateness: self.resume.filter(|_| self.reached),
            record,
            io,
        }
    }
}
