//! Dependencies between events, resolved on the reader thread in trace order:
//!
//! - An operation on an object waits until the operation that creates the object has
//!   completed ("the creating operation" is always the latest earlier create of that name);
//!   when that failed, the operation fails with `dependency_failed`.
//! - A delete waits until the trace's earlier *users* of the object have ended, whatever
//!   their outcome: `delete_volume` waits for the attaches of workloads using the volume (and
//!   their detach/abort/reschedule), snapshots, resizes, `io`/`io_phase` and clones of it;
//!   `delete_snapshot` for the restores from it. In the trace the user's operations ended
//!   before the delete; replayed open-loop, a slow attach would otherwise still be waiting
//!   for its pod when the delete removed the volume under it (on Kubernetes the scheduler
//!   then never places the pod: "persistentvolumeclaim … is being deleted"). The wait is the
//!   event's `dep_wait`, like a creator wait.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering::SeqCst};

use tokio::sync::Notify;
use trace_format::{Name, Op};

/// An object a trace names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    Volume(Name),
    Snapshot(Name),
    Workload(Name),
    /// The earlier users of a volume (the delete waits for them to end, whatever their
    /// outcome).
    VolumeUsers(Name),
    /// The earlier users of a snapshot (restores from it).
    SnapshotUsers(Name),
    /// A group snapshot.
    Group(Name),
    /// The earlier users of a group snapshot (restores of its members).
    GroupUsers(Name),
}

/// An `io_phase` not yet known to have begun (or ended), for its workload's next detach,
/// abort or reschedule ([`Deps::plan`]).
#[derive(Debug)]
struct PendingIo {
    /// Where the trace has its I/O end (`at + duration`, trace time); `None` when it is
    /// bounded by a count, not a duration.
    ends_at: Option<u64>,
    /// Released when its I/O begins (or it ends).
    started: Arc<Users>,
    /// Released when it ends.
    ended: Arc<Users>,
}

/// Nanoseconds since a process-wide anchor (set by the first call; the engine makes one
/// before each run's origin): the instant a wait was released, comparable across events
/// (the engine converts it to its run's clock).
pub(crate) fn mono_ns() -> u64 {
    static ANCHOR: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let anchor = *ANCHOR.get_or_init(std::time::Instant::now);
    crate::precise::ns_since(anchor, std::time::Instant::now())
}

/// Progress of a creating operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Pending,
    Ok,
    Failed,
}

/// The outcome of one creating operation, for the operations that need its object. (A
/// tokio `watch` channel did this before, at the cost of a channel per event.)
#[derive(Debug)]
pub(crate) struct Creation {
    state: AtomicU8,
    /// When it ended ([`mono_ns`]; 0 while pending).
    ended_at: AtomicU64,
    ended: Notify,
}

impl Creation {
    fn new(s: State) -> Arc<Self> {
        Arc::new(Self {
            state: AtomicU8::new(s as u8),
            ended_at: AtomicU64::new(0),
            ended: Notify::new(),
        })
    }

    pub fn state(&self) -> State {
        match self.state.load(SeqCst) {
            0 => State::Pending,
            1 => State::Ok,
            _ => State::Failed,
        }
    }

    /// Sets the outcome once (later calls change nothing) and wakes the waiters.
    fn end(&self, s: State) {
        // Before the state: a waiter that sees the end sees when it happened.
        self.ended_at.fetch_max(mono_ns(), SeqCst);
        if self
            .state
            .compare_exchange(State::Pending as u8, s as u8, SeqCst, SeqCst)
            .is_ok()
        {
            self.ended.notify_waiters();
        }
    }

    /// Waits until the creating operation has ended; its outcome.
    async fn ended(&self) -> State {
        loop {
            let mut n = std::pin::pin!(self.ended.notified());
            n.as_mut().enable();
            match self.state() {
                State::Pending => n.await,
                s => return s,
            }
        }
    }
}

/// The users of one object that have been planned and have not ended yet.
#[derive(Debug, Default)]
pub(crate) struct Users {
    running: AtomicU64,
    /// When the last user so far ended ([`mono_ns`]).
    ended_at: AtomicU64,
    /// Set by a delete waiting for `running` to reach 0 (only then does the last user's end
    /// take the notifier's lock).
    watched: AtomicBool,
    ended: Notify,
}

impl Users {
    fn pending(&self) -> bool {
        self.running.load(SeqCst) > 0
    }

    /// Waits until every user planned so far has ended.
    async fn ended(&self) {
        loop {
            let mut n = std::pin::pin!(self.ended.notified());
            n.as_mut().enable();
            self.watched.store(true, SeqCst);
            if !self.pending() {
                return;
            }
            n.await;
        }
    }
}

/// One user's hold on [`Users`]: released when the event ends or is dropped unrun.
#[derive(Debug)]
struct UserHold(Arc<Users>);

impl Drop for UserHold {
    fn drop(&mut self) {
        self.0.ended_at.fetch_max(mono_ns(), SeqCst);
        // SeqCst pairs with `ended`: either the waiter sees 0 or this sees `watched`.
        if self.0.running.fetch_sub(1, SeqCst) == 1 && self.0.watched.load(SeqCst) {
            self.0.ended.notify_waiters();
        }
    }
}

/// An `io_phase`'s hold on its workload's [`Key::WorkloadIo`]: released when its I/O has
/// begun (`OpCtx::io_started`) or, at the latest, when the event ends.
#[derive(Debug)]
pub(crate) struct StartedHold(#[allow(dead_code)] UserHold);

/// A creating operation's end, signalled with its outcome; dropped unsignalled (it never
/// ran) it counts as failed.
#[derive(Debug)]
struct Creates(Arc<Creation>);

impl Drop for Creates {
    fn drop(&mut self) {
        self.0.end(State::Failed);
    }
}

/// The creating operations seen so far, and the operations using each object.
#[derive(Debug, Default)]
pub(crate) struct Deps {
    creators: HashMap<Key, Arc<Creation>>,
    /// Per `Key::VolumeUsers`/`Key::SnapshotUsers`/`Key::GroupUsers`: the users not known to
    /// have ended.
    users: HashMap<Key, Arc<Users>>,
    /// The volumes of each attached workload (its detach, abort and reschedule use them).
    workload_volumes: HashMap<Name, Vec<Name>>,
    /// Per volume: the workloads holding it now (in trace order).
    holders: HashMap<Name, u32>,
    /// Per workload: its `io_phase`s planned since its last detach, abort or reschedule.
    workload_io: HashMap<Name, Vec<PendingIo>>,
}

/// Something an event must wait for.
#[derive(Debug)]
pub(crate) enum Wait {
    /// The operation creating this object.
    Creator(Key, Arc<Creation>),
    /// The earlier users of an object (they only have to end).
    Users(Arc<Users>),
}

impl Wait {
    /// When it happened ([`mono_ns`]), once it has.
    pub fn released_at(&self) -> u64 {
        match self {
            Wait::Creator(_, c) => c.ended_at.load(SeqCst),
            Wait::Users(u) => u.ended_at.load(SeqCst),
        }
    }

    /// Whether it has not happened yet.
    pub fn pending(&self) -> bool {
        match self {
            Wait::Creator(_, c) => c.state() == State::Pending,
            Wait::Users(u) => u.pending(),
        }
    }
}

/// What one event must wait for, and what its end signals: the objects it creates (with
/// its outcome) and its end as a user of objects. Dropped unrun, the creations count as
/// failed and the uses as ended. Small (two words), as it travels with the event from the
/// reader to the provider call: the common event uses one object and neither waits nor
/// creates, which needs no allocation.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    first_use: Option<UserHold>,
    more: Option<Box<More>>,
}

/// The rest of a [`Plan`].
#[derive(Debug, Default)]
struct More {
    waits: Vec<Wait>,
    creates: Vec<Creates>,
    uses: Vec<UserHold>,
    started: Option<StartedHold>,
}

impl Plan {
    fn more(&mut self) -> &mut More {
        self.more.get_or_insert_default()
    }

    /// Whether the event still has something to wait for.
    pub fn waits_pending(&self) -> bool {
        self.more
            .as_ref()
            .is_some_and(|m| m.waits.iter().any(Wait::pending))
    }

    /// Takes out what the event must wait for.
    pub fn take_waits(&mut self) -> Vec<Wait> {
        self.more
            .as_mut()
            .map(|m| std::mem::take(&mut m.waits))
            .unwrap_or_default()
    }

    /// Takes out an `io_phase`'s hold on its workload's I/O start, for the provider to
    /// release when its I/O begins.
    pub fn take_started(&mut self) -> Option<StartedHold> {
        self.more.as_mut().and_then(|m| m.started.take())
    }

    /// Signals the event's end: `ok` is its outcome for the objects it creates.
    pub fn end(self, ok: bool) {
        let s = if ok { State::Ok } else { State::Failed };
        for c in self.more.iter().flat_map(|m| &m.creates) {
            c.0.end(s);
        }
    }
}

impl Deps {
    /// Marks objects that exist before the trace starts.
    pub fn exists(&mut self, key: Key) {
        self.creators.insert(key, Creation::new(State::Ok));
    }

    /// Marks a workload that runs before the trace starts, with `volumes` mounted: its
    /// detach need not wait, and it holds its volumes like an attached one.
    pub fn running(&mut self, workload: &Name, volumes: &[Name]) {
        self.exists(Key::Workload(workload.clone()));
        for v in volumes {
            *self.holders.entry(v.clone()).or_default() += 1;
        }
        if let Some(old) = self
            .workload_volumes
            .insert(workload.clone(), volumes.to_vec())
        {
            self.release(&old);
        }
    }

    /// Whether a workload of the trace holds volume `v` at this point of the trace.
    pub fn attached(&self, v: &Name) -> bool {
        self.holders.get(v).is_some_and(|&n| n > 0)
    }

    /// Plans one event (at trace time `at`): which creators to wait for and which objects it
    /// creates.
    ///
    /// A `detach`, `abort_workload` or `reschedule` also waits for the workload's earlier
    /// `io_phase`s: for the end of those the trace has ending by its instant, and for the I/O
    /// of the others to have begun (`OpCtx::io_started`, or their end). When a slow attach
    /// releases both at once, the operation the trace put later can then neither cut off I/O
    /// the trace let finish, nor overtake I/O it interrupts before that I/O ran.
    pub fn plan(&mut self, op: &Op, at: u64) -> Plan {
        // The common case, without the general case's lists.
        if let Op::Io(io) = op {
            let mut plan = Plan::default();
            self.need(&mut plan, Key::Volume(io.volume.clone()));
            self.user(&mut plan, Key::VolumeUsers(io.volume.clone()));
            return plan;
        }
        let mut needs: Vec<Key> = Vec::new();
        let mut creates: Vec<Key> = Vec::new();
        let mut removes: Vec<Key> = Vec::new();
        // Objects this event uses (a later delete of them waits for it to end) and the
        // objects whose earlier users it waits for (a delete).
        let mut uses: Vec<Key> = Vec::new();
        let mut after_users: Option<Key> = None;
        let vol = |n: &Name| Key::Volume(n.clone());
        let wl = |n: &Name| Key::Workload(n.clone());
        let vol_users = |n: &Name| Key::VolumeUsers(n.clone());
        let wl_volumes = |w: &Name| {
            self.workload_volumes
                .get(w)
                .into_iter()
                .flatten()
                .map(vol_users)
                .collect::<Vec<_>>()
        };
        match op {
            Op::CreateVolume(c) => {
                match &c.source {
                    Some(trace_format::VolumeSource::Snapshot(s)) => {
                        needs.push(Key::Snapshot(s.clone()));
                        uses.push(Key::SnapshotUsers(s.clone()));
                    }
                    Some(trace_format::VolumeSource::Volume(v)) => {
                        needs.push(vol(v));
                        uses.push(vol_users(v));
                    }
                    Some(trace_format::VolumeSource::GroupMember(m)) => {
                        needs.push(Key::Group(m.group.clone()));
                        uses.push(Key::GroupUsers(m.group.clone()));
                    }
                    None => {}
                }
                creates.push(vol(&c.volume));
            }
            Op::DeleteVolume(v) => {
                needs.push(vol(&v.volume));
                removes.push(vol(&v.volume));
                after_users = Some(vol_users(&v.volume));
            }
            Op::Attach(a) => {
                needs.extend(a.volumes.iter().map(vol));
                creates.push(wl(&a.workload));
                uses.extend(a.volumes.iter().map(vol_users));
            }
            Op::Detach(w) | Op::AbortWorkload(w) => {
                needs.push(wl(&w.workload));
                removes.push(wl(&w.workload));
                uses.extend(wl_volumes(&w.workload));
            }
            Op::Snapshot(s) => {
                needs.push(vol(&s.volume));
                creates.push(Key::Snapshot(s.snapshot.clone()));
                uses.push(vol_users(&s.volume));
            }
            Op::DeleteSnapshot(s) => {
                needs.push(Key::Snapshot(s.snapshot.clone()));
                removes.push(Key::Snapshot(s.snapshot.clone()));
                after_users = Some(Key::SnapshotUsers(s.snapshot.clone()));
            }
            // Listing blocks reads the snapshots: a delete of them waits for it.
            Op::SnapshotAllocated(s) => {
                needs.push(Key::Snapshot(s.snapshot.clone()));
                uses.push(Key::SnapshotUsers(s.snapshot.clone()));
            }
            Op::SnapshotDelta(d) => {
                for s in [&d.base, &d.snapshot] {
                    needs.push(Key::Snapshot(s.clone()));
                    uses.push(Key::SnapshotUsers(s.clone()));
                }
            }
            Op::Resize(r) => {
                needs.push(vol(&r.volume));
                uses.push(vol_users(&r.volume));
            }
            Op::ModifyVolume(m) => {
                needs.push(vol(&m.volume));
                uses.push(vol_users(&m.volume));
            }
            Op::GroupSnapshot(g) => {
                needs.extend(g.volumes.iter().map(vol));
                creates.push(Key::Group(g.group.clone()));
                uses.extend(g.volumes.iter().map(vol_users));
            }
            Op::DeleteGroupSnapshot(g) => {
                needs.push(Key::Group(g.group.clone()));
                removes.push(Key::Group(g.group.clone()));
                after_users = Some(Key::GroupUsers(g.group.clone()));
            }
            Op::Reschedule(r) => {
                needs.push(wl(&r.workload));
                uses.extend(wl_volumes(&r.workload));
            }
            Op::Io(io) => {
                needs.push(vol(&io.volume));
                uses.push(vol_users(&io.volume));
            }
            Op::IoPhase(p) => {
                needs.push(wl(&p.workload));
                for v in p.volumes() {
                    needs.push(vol(v));
                    uses.push(vol_users(v));
                }
            }
            Op::CordonNode(_) | Op::DrainNode(_) | Op::ForceDetach(_) | Op::Marker(_) => {}
        }
        match op {
            Op::Attach(a) => {
                for v in &a.volumes {
                    *self.holders.entry(v.clone()).or_default() += 1;
                }
                if let Some(old) = self
                    .workload_volumes
                    .insert(a.workload.clone(), a.volumes.clone())
                {
                    self.release(&old);
                }
            }
            Op::Detach(w) | Op::AbortWorkload(w) => {
                if let Some(old) = self.workload_volumes.remove(&w.workload) {
                    self.release(&old);
                }
            }
            _ => {}
        }
        let mut plan = Plan::default();
        for k in needs {
            self.need(&mut plan, k);
        }
        if let Some(k) = after_users
            && let Some(u) = self.users.remove(&k)
            && u.pending()
        {
            plan.more().waits.push(Wait::Users(u));
        }
        for k in uses {
            self.user(&mut plan, k);
        }
        match op {
            Op::IoPhase(p) => {
                let (started, ended) = (Arc::new(Users::default()), Arc::new(Users::default()));
                started.running.fetch_add(1, SeqCst);
                ended.running.fetch_add(1, SeqCst);
                plan.more().started = Some(StartedHold(UserHold(started.clone())));
                plan.more().uses.push(UserHold(ended.clone()));
                self.workload_io
                    .entry(p.workload.clone())
                    .or_default()
                    .push(PendingIo {
                        ends_at: p.duration.map(|d| at.saturating_add(d)),
                        started,
                        ended,
                    });
            }
            Op::Detach(trace_format::WorkloadRef { workload: w })
            | Op::AbortWorkload(trace_format::WorkloadRef { workload: w })
            | Op::Reschedule(trace_format::Reschedule { workload: w, .. }) => {
                for io in self.workload_io.remove(w).unwrap_or_default() {
                    let u = if io.ends_at.is_some_and(|e| e <= at) {
                        io.ended
                    } else {
                        io.started
                    };
                    if u.pending() {
                        plan.more().waits.push(Wait::Users(u));
                    }
                }
            }
            _ => {}
        }
        for k in removes {
            self.creators.remove(&k);
        }
        for k in creates {
            let c = Creation::new(State::Pending);
            self.creators.insert(k, c.clone());
            plan.more().creates.push(Creates(c));
        }
        plan
    }

    fn release(&mut self, volumes: &[Name]) {
        for v in volumes {
            if let Some(n) = self.holders.get_mut(v) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.holders.remove(v);
                }
            }
        }
    }

    /// The event needs object `k`: it waits for its creator unless that succeeded already.
    fn need(&self, plan: &mut Plan, k: Key) {
        if let Some(c) = self.creators.get(&k)
            && c.state() != State::Ok
        {
            plan.more().waits.push(Wait::Creator(k, c.clone()));
        }
    }

    /// The event is a user of `k` (a `*Users` key): a later delete waits for its end.
    fn user(&mut self, plan: &mut Plan, k: Key) {
        let u = self.users.entry(k).or_default().clone();
        u.running.fetch_add(1, SeqCst);
        let hold = UserHold(u);
        match plan.first_use {
            None => plan.first_use = Some(hold),
            Some(_) => plan.more().uses.push(hold),
        }
    }
}

/// Whether every wait in `waits` has happened; `Err` names the first object whose creation
/// failed. Only for waits none of which is pending (see [`Wait::pending`]).
pub(crate) fn check_all(waits: &[Wait]) -> Result<(), String> {
    for w in waits {
        if let Wait::Creator(key, c) = w
            && c.state() != State::Ok
        {
            return Err(not_created(key));
        }
    }
    Ok(())
}

/// Waits for every creator and user in `waits`; `Err` names the first object whose creation
/// failed (users only have to end, whatever their outcome).
pub(crate) async fn wait_all(waits: &[Wait]) -> Result<(), String> {
    for w in waits {
        match w {
            Wait::Creator(key, c) => {
                if c.ended().await != State::Ok {
                    return Err(not_created(key));
                }
            }
            Wait::Users(u) => u.ended().await,
        }
    }
    Ok(())
}

fn not_created(key: &Key) -> String {
    match key {
        Key::Volume(n) => format!("volume {n:?} was not created"),
        Key::Snapshot(n) => format!("snapshot {n:?} was not created"),
        Key::Workload(n) => format!("workload {n:?} was not started"),
        Key::Group(n) => format!("group snapshot {n:?} was not created"),
        Key::VolumeUsers(n) | Key::SnapshotUsers(n) | Key::GroupUsers(n) => {
            format!("users of {n:?} did not end")
        }
    }
}
