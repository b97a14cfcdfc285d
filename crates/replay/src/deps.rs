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

use tokio::sync::watch;
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
}

/// Progress of a creating operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Pending,
    Ok,
    Failed,
}

/// The creating operations seen so far, and the operations using each object.
#[derive(Debug, Default)]
pub(crate) struct Deps {
    creators: HashMap<Key, watch::Receiver<State>>,
    /// Per `Key::VolumeUsers`/`Key::SnapshotUsers`: the users not known to have ended.
    users: HashMap<Key, Users>,
    /// The volumes of each attached workload (its detach, abort and reschedule use them).
    workload_volumes: HashMap<Name, Vec<Name>>,
}

/// The users of one object that may still be running.
#[derive(Debug, Default)]
struct Users {
    pending: Vec<watch::Receiver<State>>,
    /// Length after the last pruning: ended users are dropped when it doubles (amortised
    /// O(1) per user, so a volume with millions of `io` events stays small).
    pruned_at: usize,
}

impl Users {
    fn push(&mut self, rx: watch::Receiver<State>) {
        if self.pending.len() >= 2 * self.pruned_at.max(8) {
            self.pending.retain(|r| *r.borrow() == State::Pending);
            self.pruned_at = self.pending.len();
        }
        self.pending.push(rx);
    }
}

/// What one event must wait for, and the objects it creates.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub waits: Vec<(Key, watch::Receiver<State>)>,
    /// Signalled with the event's outcome when it ends (objects it creates, and its end as a
    /// user of objects); dropped unsent when it never ran, which also counts as ended for
    /// users.
    pub creates: Vec<watch::Sender<State>>,
}

impl Deps {
    /// Marks objects that exist before the trace starts.
    pub fn exists(&mut self, key: Key) {
        let (_tx, rx) = watch::channel(State::Ok);
        self.creators.insert(key, rx);
    }

    /// Plans one event: which creators to wait for and which objects it creates.
    pub fn plan(&mut self, op: &Op) -> Plan {
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
            Op::Resize(r) => {
                needs.push(vol(&r.volume));
                uses.push(vol_users(&r.volume));
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
                needs.push(vol(&p.volume));
                uses.push(vol_users(&p.volume));
            }
            Op::CordonNode(_) | Op::DrainNode(_) | Op::Marker(_) => {}
        }
        match op {
            Op::Attach(a) => {
                self.workload_volumes
                    .insert(a.workload.clone(), a.volumes.clone());
            }
            Op::Detach(w) | Op::AbortWorkload(w) => {
                self.workload_volumes.remove(&w.workload);
            }
            _ => {}
        }
        let mut plan = Plan::default();
        for k in needs {
            if let Some(rx) = self.creators.get(&k)
                && *rx.borrow() != State::Ok
            {
                plan.waits.push((k, rx.clone()));
            }
        }
        if let Some(k) = after_users
            && let Some(u) = self.users.remove(&k)
        {
            plan.waits.extend(
                u.pending
                    .into_iter()
                    .filter(|r| *r.borrow() == State::Pending)
                    .map(|r| (k.clone(), r)),
            );
        }
        if !uses.is_empty() {
            let (tx, rx) = watch::channel(State::Pending);
            for k in uses {
                self.users.entry(k).or_default().push(rx.clone());
            }
            plan.creates.push(tx);
        }
        for k in removes {
            self.creators.remove(&k);
        }
        for k in creates {
            let (tx, rx) = watch::channel(State::Pending);
            self.creators.insert(k, rx);
            plan.creates.push(tx);
        }
        plan
    }
}

/// Waits for every creator and user in `waits`; `Err` names the first object whose creation
/// failed (users only have to end, whatever their outcome).
pub(crate) async fn wait_all(waits: Vec<(Key, watch::Receiver<State>)>) -> Result<(), String> {
    for (key, mut rx) in waits {
        let ok = match rx.wait_for(|s| *s != State::Pending).await {
            Ok(s) => *s == State::Ok,
            Err(_) => false,
        };
        if !ok {
            return Err(match key {
                Key::Volume(n) => format!("volume {n:?} was not created"),
                Key::Snapshot(n) => format!("snapshot {n:?} was not created"),
                Key::Workload(n) => format!("workload {n:?} was not started"),
                Key::VolumeUsers(_) | Key::SnapshotUsers(_) => continue,
            });
        }
    }
    Ok(())
}
