//! The discrete-event generator: a priority queue of pending future events, drained in time
//! order into a stream of trace events.
//!
//! Pending items (a container's end, the next arrival, a snapshot tick, an I/O phase, …) sit
//! in a binary heap keyed by (time, sequence number); the sequence number is the insertion
//! order, so simultaneous items keep a deterministic order. Handling an item emits zero or
//! more events *at its own time* and schedules later items, so the output is sorted by
//! construction. The generator keeps only what is alive — containers, volumes, snapshots and
//! their pending items — never the trace: memory follows the cluster, not the duration.
//!
//! The generator mirrors the checker's view of every object it emits, so each event is valid
//! when it is written: snapshot and resize targets are drawn from live volumes, a stale
//! pending item of an aborted container is dropped, pool volumes are taken only when free.

use std::cmp::Ordering;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};

use trace_format::{
    Event, GroupSnapshot, GroupSnapshotRef, Header, Marker, ModifyVolume, Name, NodeRef, Op,
    Provenance, Reschedule, Resize, SnapshotRef, VolumeRef, VolumeSource, WorkloadRef,
};

mod arrivals;
mod policies;
mod volumes;

use crate::dist::{Dist, Distribution};
use crate::model::{Arrivals, End, Process, SnapshotPolicy};
use crate::plan::{Plan, node_names};
use crate::rng::{Stream, SynthRng};

/// Name of the generator recorded in trace headers.
pub const GENERATOR: &str = concat!("cnsreplay-synth ", env!("CARGO_PKG_VERSION"));

/// Seconds to nanoseconds, saturating far in the future.
fn ns(secs: f64) -> u64 {
    if secs.is_nan() || secs <= 0.0 {
        0
    } else if secs >= 1e9 {
        1_000_000_000_000_000_000
    } else {
        (secs * 1e9).round() as u64
    }
}

/// `Pend::BackupList::base` of a full listing (`snapshot_allocated`).
const NO_BASE: u64 = u64::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pend {
    Arrival,
    Batch(u32),
    SlotStart(u32),
    InitialAttach(u64),
    End(u64),
    DeleteVolume(u64),
    Io {
        container: u64,
        phase: u32,
    },
    RoundRobin(u32),
    PerVolume {
        policy: u32,
        vol: u64,
    },
    /// The next snapshot of a volume's incremental-backup chain.
    Backup {
        policy: u32,
        vol: u64,
    },
    /// The listing of a chain's snapshot `snap`: its delta from `base`, or its allocated
    /// blocks when `base` is [`NO_BASE`].
    BackupList {
        policy: u32,
        vol: u64,
        base: u64,
        snap: u64,
    },
    Resize,
    Modify,
    GroupSnapshot,
    DropGroup(u64),
    Abort,
    Reschedule,
    Restore,
    Clone,
    DropDerived(u64),
    Drain(u32),
    SteadyMarker,
}

#[derive(Debug, PartialEq, Eq)]
struct Item {
    at: u64,
    seq: u64,
    what: Pend,
}

impl Ord for Item {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap.
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

impl PartialOrd for Item {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// A set of ids with O(1) insert, remove and uniform pick; its order is deterministic.
#[derive(Debug, Default)]
struct IdSet {
    items: Vec<u64>,
    pos: HashMap<u64, usize>,
}

impl IdSet {
    fn insert(&mut self, id: u64) {
        self.pos.insert(id, self.items.len());
        self.items.push(id);
    }
    fn remove(&mut self, id: u64) {
        if let Some(i) = self.pos.remove(&id) {
            self.items.swap_remove(i);
            if let Some(&moved) = self.items.get(i) {
                self.pos.insert(moved, i);
            }
        }
    }
    fn pick(&self, rng: &mut SynthRng) -> Option<u64> {
        if self.items.is_empty() {
            None
        } else {
            Some(self.items[rng.below(self.items.len())])
        }
    }
}

#[derive(Debug)]
struct Container {
    name: Name,
    host: u32,
    slot: Option<u32>,
    tenant: Option<Name>,
    vols: Vec<u64>,
    end: u64,
}

#[derive(Debug)]
struct Vol {
    name: Name,
    size: u64,
    /// Its attributes class (index into the model's `modifies.classes`).
    class: Option<usize>,
    pool: bool,
    tenant: Option<Name>,
    /// Snapshots of this volume, oldest first, with the policy that took them.
    snaps: VecDeque<(u32, u64)>,
}

/// One volume's incremental-backup chain.
#[derive(Debug, Default, Clone, Copy)]
struct Chain {
    taken: u32,
    newest: Option<u64>,
}

#[derive(Debug)]
struct Snap {
    name: Name,
    vol: u64,
}

/// Counters of what was generated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Containers started (the initial population included).
    pub containers: u64,
    /// Containers alive at t = 0 (steady-state start).
    pub initial_containers: u64,
    /// Volumes created by `create_volume` (restores and clones included).
    pub volumes_created: u64,
    /// Pre-existing volumes declared in the header.
    pub volumes_declared: u64,
    /// Container volumes taken from the reuse pool.
    pub pool_reuses: u64,
}

/// The trace generator: an iterator of events in time order. Build it with
/// [`Generator::new`], write [`Generator::header`], then every event it yields.
#[derive(Debug)]
pub struct Generator {
    plan: Plan,
    header: Header,
    t0: u64,
    end: u64,
    nodes: Vec<Name>,
    drained: Vec<bool>,
    available: Vec<u32>,
    slots: Vec<u32>,
    interarrival: Option<Distribution>,
    r_arr: SynthRng,
    r_life: SynthRng,
    r_place: SynthRng,
    r_snap: SynthRng,
    r_fail: SynthRng,
    heap: BinaryHeap<Item>,
    seq: u64,
    next_id: u64,
    out: VecDeque<Event>,
    containers: HashMap<u64, Container>,
    running: IdSet,
    next_container: u64,
    vols: HashMap<u64, Vol>,
    live_vols: BTreeSet<u64>,
    live_pick: IdSet,
    next_vol: u64,
    pool: Vec<u64>,
    pool_free: VecDeque<u64>,
    snaps: HashMap<u64, Snap>,
    snap_pick: IdSet,
    next_snap: u64,
    rr_state: Vec<(u64, u32, VecDeque<u64>)>,
    /// Incremental-backup chains by (policy, volume): snapshots taken and the newest.
    chains: HashMap<(u32, u64), Chain>,
    /// Listings scheduled and not yet written, per snapshot they read: retention keeps
    /// such a snapshot.
    listing_uses: HashMap<u64, u32>,
    next_derived: u64,
    counts: Counts,
    done: bool,
}

impl Generator {
    /// Prepares a run: draws the initial population (whose volumes go into the header) and
    /// schedules the first pending items.
    pub fn new(plan: Plan) -> Self {
        let seed = plan.seed;
        let m = plan.model.clone();
        let nodes = node_names(&m);
        let t0 = m.warmup;
        let end = t0.saturating_add(m.duration);
        let interarrival = match &m.arrivals {
            Arrivals::Poisson { rate } => {
                Distribution::new(&Dist::Exponential { mean: 1.0 / rate.0 }, "arrivals").ok()
            }
            Arrivals::Renewal { rate, cv } => Distribution::new(
                &Dist::Gamma {
                    shape: 1.0 / (cv * cv),
                    scale: cv * cv / rate.0,
                },
                "arrivals",
            )
            .ok(),
            _ => None,
        };
        let mut header = Header {
            provenance: Provenance {
                generator: Some(GENERATOR.to_owned()),
                seed: Some(seed),
                parameters: plan.parameters(),
                ..Provenance::default()
            },
            attributes_classes: m
                .modifies
                .as_ref()
                .map(|x| x.classes.clone())
                .unwrap_or_default(),
            ..Header::default()
        };
        let mut g = Generator {
            header: Header::default(),
            t0,
            end,
            drained: vec![false; nodes.len()],
            available: (0..nodes.len() as u32).collect(),
            nodes,
            slots: Vec::new(),
            interarrival,
            r_arr: SynthRng::new(seed, Stream::Arrivals),
            r_life: SynthRng::new(seed, Stream::Lifetimes),
            r_place: SynthRng::new(seed, Stream::Placement),
            r_snap: SynthRng::new(seed, Stream::Snapshots),
            r_fail: SynthRng::new(seed, Stream::Failures),
            heap: BinaryHeap::new(),
            seq: 0,
            next_id: 0,
            out: VecDeque::new(),
            containers: HashMap::new(),
            running: IdSet::default(),
            next_container: 0,
            vols: HashMap::new(),
            live_vols: BTreeSet::new(),
            live_pick: IdSet::default(),
            next_vol: 0,
            pool: Vec::new(),
            pool_free: VecDeque::new(),
            snaps: HashMap::new(),
            snap_pick: IdSet::default(),
            next_snap: 0,
            rr_state: Vec::new(),
            chains: HashMap::new(),
            listing_uses: HashMap::new(),
            next_derived: 0,
            counts: Counts::default(),
            done: false,
            plan,
        };
        g.declare_pool(&mut header);
        g.initial_population(&mut header);
        g.schedule_processes();
        g.header = header;
        g
    }

    /// The trace header (write it before the events).
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// What was generated so far.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    fn push(&mut self, at: u64, what: Pend) {
        self.seq += 1;
        self.heap.push(Item {
            at,
            seq: self.seq,
            what,
        });
    }

    fn emit(&mut self, at: u64, tenant: Option<Name>, op: Op) {
        let id = self.next_id;
        self.next_id += 1;
        self.out.push_back(Event {
            at,
            id,
            tenant,
            observed: None,
            op,
        });
    }

    /// Schedules the first snapshot of every incremental-backup chain of a container's
    /// volumes (pool volumes have none: they outlive their containers).
    fn start_backups(&mut self, at: u64, vols: &[u64], initial: bool) {
        let policies: Vec<(u32, u64, u64)> = self
            .plan
            .model
            .snapshots
            .iter()
            .enumerate()
            .filter_map(|(p, pol)| match pol {
                SnapshotPolicy::IncrementalBackup(b) => {
                    Some((p as u32, b.every, b.from.unwrap_or(b.every)))
                }
                _ => None,
            })
            .collect();
        for (policy, every, from) in policies {
            for &vol in vols {
                if self.vols.get(&vol).is_some_and(|v| !v.pool) {
                    let dt = if initial {
                        self.per_volume_gap(every, Process::Periodic, true)
                    } else {
                        from
                    };
                    self.push(at.saturating_add(dt), Pend::Backup { policy, vol });
                }
            }
        }
    }

    fn per_volume_gap(&mut self, every: u64, process: Process, first_in_steady: bool) -> u64 {
        match process {
            Process::Periodic if first_in_steady => (every as f64 * self.r_snap.uniform()) as u64,
            Process::Periodic => every,
            Process::Poisson => ns(every as f64 / 1e9 * self.r_snap.exp1()),
        }
    }

    fn start_new(&mut self, at: u64, slot: Option<u32>) {
        let host = match slot {
            Some(s) => {
                let h = self.slots[s as usize];
                if self.drained[h as usize] {
                    let nh = self.pick_host();
                    self.slots[s as usize] = nh;
                    nh
                } else {
                    h
                }
            }
            None => self.pick_host(),
        };
        let life = self.plan.lifetime.sample(&mut self.r_life);
        let id = self.allocate(at, host, slot, None);
        self.attach(id, at, at.saturating_add(ns(life)), false, None);
    }

    fn delete_volume(&mut self, at: u64, vid: u64) {
        let Some(v) = self.vols.remove(&vid) else {
            return;
        };
        for (_, s) in &v.snaps {
            if let Some(snap) = self.snaps.remove(s) {
                self.snap_pick.remove(*s);
                self.emit(
                    at,
                    v.tenant.clone(),
                    Op::DeleteSnapshot(SnapshotRef {
                        snapshot: snap.name,
                    }),
                );
            }
        }
        self.live_vols.remove(&vid);
        self.live_pick.remove(vid);
        for p in 0..self.plan.model.snapshots.len() as u32 {
            self.chains.remove(&(p, vid));
        }
        self.emit(at, v.tenant, Op::DeleteVolume(VolumeRef { volume: v.name }));
    }

    /// Ends a container: detach (or abort), release its volumes, replace it in its slot.
    fn finish_container(&mut self, at: u64, id: u64, abort: bool) {
        let Some(c) = self.containers.remove(&id) else {
            return;
        };
        self.running.remove(id);
        let w = WorkloadRef { workload: c.name };
        let op = if abort {
            Op::AbortWorkload(w)
        } else {
            Op::Detach(w)
        };
        self.emit(at, c.tenant, op);
        let delay = self
            .plan
            .model
            .volumes
            .as_ref()
            .map_or(0, |v| v.delete_after);
        for v in c.vols {
            if self.vols.get(&v).is_some_and(|v| v.pool) {
                self.pool_free.push_back(v);
            } else if delay == 0 {
                self.delete_volume(at, v);
            } else {
                self.push(at.saturating_add(delay), Pend::DeleteVolume(v));
            }
        }
        if let Some(slot) = c.slot
            && at < self.end
        {
            self.start_new(at, Some(slot));
        }
    }

    fn rate_process(&mut self, at: u64, what: Pend, rate: f64) {
        let t = at.saturating_add(ns(self.r_fail.exp1() / rate).max(1));
        self.push(t, what);
    }

    fn handle(&mut self, at: u64, what: Pend) {
        let m = &self.plan.model;
        match what {
            Pend::SteadyMarker => self.emit(
                at,
                None,
                Op::Marker(Marker {
                    name: "steady-state".into(),
                }),
            ),
            Pend::InitialAttach(id) => {
                let end = self.containers.get(&id).map_or(at, |c| c.end.max(at));
                self.attach(id, at, end, true, None);
            }
            Pend::Arrival => {
                self.start_new(at, None);
                if let Some(t) = self.next_arrival(at, false) {
                    self.push(t, Pend::Arrival);
                }
            }
            Pend::SlotStart(slot) => self.start_new(at, Some(slot)),
            Pend::Batch(n) => {
                for _ in 0..n {
                    self.start_new(at, None);
                }
            }
            Pend::End(id) => {
                if self.containers.get(&id).is_some_and(|c| c.end == at) {
                    self.finish_container(at, id, false);
                }
            }
            Pend::DeleteVolume(v) => self.delete_volume(at, v),
            Pend::Io { container, phase } => self.io_phase(at, container, phase),
            Pend::RoundRobin(p) => self.round_robin(at, p),
            Pend::PerVolume { policy, vol } => self.per_volume(at, policy, vol),
            Pend::Backup { policy, vol } => self.backup_snapshot(at, policy, vol),
            Pend::BackupList {
                policy,
                vol,
                base,
                snap,
            } => self.backup_listing(at, policy, vol, base, snap),
            Pend::Resize => {
                let (rate, factor) = m
                    .failures
                    .resize
                    .as_ref()
                    .map_or((1.0, 2.0), |r| (r.rate.0, r.factor));
                if let Some(v) = self.live_pick.pick(&mut self.r_fail)
                    && let Some(vol) = self.vols.get_mut(&v)
                {
                    let mib = 1u64 << 20;
                    let want = (vol.size as f64 * factor).min(1e18) as u64;
                    let new = want.div_ceil(mib).saturating_mul(mib).max(vol.size + mib);
                    vol.size = new;
                    let (name, tenant) = (vol.name.clone(), vol.tenant.clone());
                    self.emit(
                        at,
                        tenant,
                        Op::Resize(Resize {
                            volume: name,
                            size: new,
                        }),
                    );
                }
                self.rate_process(at, Pend::Resize, rate);
            }
            Pend::Modify => {
                let Some((rate, classes)) = m
                    .modifies
                    .as_ref()
                    .map(|x| (x.rate.0, x.classes.keys().cloned().collect::<Vec<Name>>()))
                else {
                    return;
                };
                let n = classes.len();
                if let Some(v) = self.live_pick.pick(&mut self.r_fail)
                    && let Some(vol) = self.vols.get_mut(&v)
                    && n > 1
                {
                    // Uniformly among the classes other than its current one.
                    let mut c = self.r_fail.below(n - usize::from(vol.class.is_some()));
                    if vol.class.is_some_and(|cur| c >= cur) {
                        c += 1;
                    }
                    vol.class = Some(c);
                    let (name, tenant) = (vol.name.clone(), vol.tenant.clone());
                    if let Some(class) = classes.get(c).cloned() {
                        self.emit(
                            at,
                            tenant,
                            Op::ModifyVolume(ModifyVolume {
                                volume: name,
                                class,
                            }),
                        );
                    }
                }
                self.rate_process(at, Pend::Modify, rate);
            }
            Pend::Abort => {
                let rate = m.failures.abort.as_ref().map_or(1.0, |r| r.rate.0);
                if let Some(c) = self.running.pick(&mut self.r_fail) {
                    self.finish_container(at, c, true);
                }
                self.rate_process(at, Pend::Abort, rate);
            }
            Pend::Reschedule => {
                let rate = m.failures.reschedule.as_ref().map_or(1.0, |r| r.rate.0);
                let pin = m.cluster.pin_nodes;
                if let Some(id) = self.running.pick(&mut self.r_fail) {
                    let nh = self.available[self.r_fail.below(self.available.len())];
                    if let Some(c) = self.containers.get_mut(&id) {
                        c.host = nh;
                        let node = pin.then(|| self.nodes[nh as usize].clone());
                        let (w, t) = (c.name.clone(), c.tenant.clone());
                        self.emit(at, t, Op::Reschedule(Reschedule { workload: w, node }));
                    }
                }
                self.rate_process(at, Pend::Reschedule, rate);
            }
            Pend::Restore => {
                let (rate, keep) = m.restores.as_ref().map_or((1.0, 0), |r| (r.rate.0, r.keep));
                if let Some(s) = self.snap_pick.pick(&mut self.r_snap) {
                    let src = self.snaps.get(&s).map(|s| {
                        (
                            s.name.clone(),
                            self.vols.get(&s.vol).and_then(|v| v.tenant.clone()),
                        )
                    });
                    if let Some((sname, tenant)) = src {
                        self.derived(at, keep, tenant, "restore", VolumeSource::Snapshot(sname));
                    }
                }
                self.rate_process(at, Pend::Restore, rate);
            }
            Pend::Clone => {
                let (rate, keep) = m.clones.as_ref().map_or((1.0, 0), |r| (r.rate.0, r.keep));
                if let Some(v) = self.live_pick.pick(&mut self.r_snap)
                    && let Some(vol) = self.vols.get(&v)
                {
                    let (n, t) = (vol.name.clone(), vol.tenant.clone());
                    self.derived(at, keep, t, "clone", VolumeSource::Volume(n));
                }
                self.rate_process(at, Pend::Clone, rate);
            }
            Pend::DropDerived(v) => self.delete_volume(at, v),
            Pend::GroupSnapshot => {
                let Some((rate, want, keep)) = m
                    .group_snapshots
                    .as_ref()
                    .map(|g| (g.rate.0, g.volumes as usize, g.keep))
                else {
                    return;
                };
                // Distinct live volumes, a few draws each.
                let mut picked: Vec<u64> = Vec::with_capacity(want);
                for _ in 0..want * 4 {
                    if picked.len() == want {
                        break;
                    }
                    if let Some(v) = self.live_pick.pick(&mut self.r_fail)
                        && !picked.contains(&v)
                    {
                        picked.push(v);
                    }
                }
                picked.sort_unstable();
                let volumes: Vec<Name> = picked
                    .iter()
                    .filter_map(|v| self.vols.get(v).map(|x| x.name.clone()))
                    .collect();
                if !volumes.is_empty() {
                    let id = self.next_derived;
                    self.next_derived += 1;
                    self.emit(
                        at,
                        None,
                        Op::GroupSnapshot(GroupSnapshot {
                            group: Name::from(format!("group-{id}")),
                            volumes,
                            class: None,
                        }),
                    );
                    self.push(at.saturating_add(keep), Pend::DropGroup(id));
                }
                self.rate_process(at, Pend::GroupSnapshot, rate);
            }
            Pend::DropGroup(id) => {
                self.emit(
                    at,
                    None,
                    Op::DeleteGroupSnapshot(GroupSnapshotRef {
                        group: Name::from(format!("group-{id}")),
                    }),
                );
            }
            Pend::Drain(i) => {
                let node = m.drains[i as usize].node.clone();
                if let Some(h) = self.nodes.iter().position(|n| **n == *node)
                    && !self.drained[h]
                {
                    self.drained[h] = true;
                    self.available.retain(|&x| x as usize != h);
                    let name = self.nodes[h].clone();
                    self.emit(at, None, Op::DrainNode(NodeRef { node: name }));
                    // The orchestrator moves the evicted containers; later placement avoids
                    // the node.
                    for id in self.running.items.clone() {
                        if self
                            .containers
                            .get(&id)
                            .is_some_and(|c| c.host as usize == h)
                        {
                            let nh = self.pick_host();
                            if let Some(c) = self.containers.get_mut(&id) {
                                c.host = nh;
                            }
                        }
                    }
                }
            }
        }
    }

    fn finish(&mut self) {
        let end = self.end;
        if self.plan.model.end == End::CleanUp {
            let mut ids = self.running.items.clone();
            ids.sort_unstable();
            for id in ids {
                self.finish_container_final(end, id);
            }
            let mut rest: Vec<u64> = self
                .vols
                .iter()
                .filter(|(_, v)| !v.pool)
                .map(|(k, _)| *k)
                .collect();
            rest.sort_unstable();
            for v in rest {
                self.delete_volume(end, v);
            }
            let mut snaps: Vec<u64> = self.snaps.keys().copied().collect();
            snaps.sort_unstable();
            for s in snaps {
                self.delete_snapshot(end, s);
            }
        }
        self.emit(end, None, Op::Marker(Marker { name: "end".into() }));
        self.heap.clear();
    }

    fn finish_container_final(&mut self, at: u64, id: u64) {
        // Like `finish_container`, without replacement (we are at the end).
        if let Some(c) = self.containers.get_mut(&id) {
            c.slot = None;
        }
        self.finish_container(at, id, false);
    }
}

impl Iterator for Generator {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.out.pop_front() {
                return Some(e);
            }
            if self.done {
                return None;
            }
            match self.heap.pop() {
                Some(item) if item.at <= self.end => self.handle(item.at, item.what),
                _ => {
                    self.finish();
                    self.done = true;
                }
            }
        }
    }
}
