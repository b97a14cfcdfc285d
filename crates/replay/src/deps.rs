//! Dependencies between events: an operation on an object waits until the operation that
//! creates the object has completed. Resolved on the reader thread in trace
//! order, so "the creating operation" is always the latest earlier create of that name.

use std::collections::HashMap;

use tokio::sync::watch;
use trace_format::{Name, Op};

/// An object a trace names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    Volume(Name),
    Snapshot(Name),
    Workload(Name),
}

/// Progress of a creating operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Pending,
    Ok,
    Failed,
}

/// The creating operations seen so far.
#[derive(Debug, Default)]
pub(crate) struct Deps {
    creators: HashMap<Key, watch::Receiver<State>>,
}

/// What one event must wait for, and the objects it creates.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub waits: Vec<(Key, watch::Receiver<State>)>,
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
        let vol = |n: &Name| Key::Volume(n.clone());
        let wl = |n: &Name| Key::Workload(n.clone());
        match op {
            Op::CreateVolume(c) => {
                match &c.source {
                    Some(trace_format::VolumeSource::Snapshot(s)) => {
                        needs.push(Key::Snapshot(s.clone()));
                    }
                    Some(trace_format::VolumeSource::Volume(v)) => needs.push(vol(v)),
                    None => {}
                }
                creates.push(vol(&c.volume));
            }
            Op::DeleteVolume(v) => {
                needs.push(vol(&v.volume));
                removes.push(vol(&v.volume));
            }
            Op::Attach(a) => {
                needs.extend(a.volumes.iter().map(vol));
                creates.push(wl(&a.workload));
            }
            Op::Detach(w) | Op::AbortWorkload(w) => {
                needs.push(wl(&w.workload));
                removes.push(wl(&w.workload));
            }
            Op::Snapshot(s) => {
                needs.push(vol(&s.volume));
                creates.push(Key::Snapshot(s.snapshot.clone()));
            }
            Op::DeleteSnapshot(s) => {
                needs.push(Key::Snapshot(s.snapshot.clone()));
                removes.push(Key::Snapshot(s.snapshot.clone()));
            }
            Op::Resize(r) => needs.push(vol(&r.volume)),
            Op::Reschedule(r) => needs.push(wl(&r.workload)),
            Op::Io(io) => needs.push(vol(&io.volume)),
            Op::IoPhase(p) => {
                needs.push(wl(&p.workload));
                needs.push(vol(&p.volume));
            }
            Op::CordonNode(_) | Op::DrainNode(_) | Op::Marker(_) => {}
        }
        let mut plan = Plan::default();
        for k in needs {
            if let Some(rx) = self.creators.get(&k)
                && *rx.borrow() != State::Ok
            {
                plan.waits.push((k, rx.clone()));
            }
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

/// Waits for every creator in `waits`; `Err` names the first object whose creation failed.
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
            });
        }
    }
    Ok(())
}
