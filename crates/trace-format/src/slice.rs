//! Cutting a time window out of a trace (`cnsreplay trace slice`), so that what is left still
//! replays: the window of a long recording a user wants (its busiest minute, an incident), not
//! a list of events whose objects were made before it.
//!
//! Events in `[from, to)` are kept, their times shifted to start at 0 (the header's `origin`
//! moves by `from`), ids unchanged. What the events before the window left behind is carried
//! over as far as the format can say it: every volume alive at the cut (created and not
//! deleted, at its latest size) is declared in the header as pre-existing, and every workload
//! running at the cut (attached and not ended, on its latest node) as pre-running, so its
//! detach, abort, reschedule or `io_phase` in the window is kept. An `io_phase` started before
//! the window and still running at the cut (its workload not ended) is load of the window:
//! bounded by `duration` only, it is kept clipped — at 0 with the rest of its duration
//! ([`SliceReport::clipped`]); bounded by `bytes`, what is left of it depends on the storage,
//! so it is dropped and counted ([`DROPPED_BYTES_PHASE`]). An `io_phase` in the window is kept
//! whole, even where it runs past the window's end. Snapshots cannot be
//! declared, so an event in the window that needs one taken before the window (a restore from
//! or delete of an earlier snapshot) is dropped and counted by reason — never silently. A
//! name made again inside the window is the window's own from then on.
//!
//! A [`Filter`] keeps only some tenants' events (the event's tenant, else the header's
//! default namespace) or some op types, in one pass: an event it leaves out is dropped and
//! counted, and so is a kept event that needs an object only a left-out event made (an `io` on
//! a volume whose `create_volume` was filtered away) — the same rule as for the window's start.
//! A workload whose detach is left out keeps its volumes mounted in the output, so a kept
//! delete or attach of one of them is dropped the same way. Declared volumes stay declared
//! (they have no tenant).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::Error;
use crate::model::{Event, Header, Op, OpType, VolumeDecl, VolumeSource, WorkloadDecl};
use crate::units::Name;

/// Which events of the window a slice keeps (empty sets: all).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Tenants (namespaces) whose events are kept.
    pub tenants: HashSet<Name>,
    /// Op types kept.
    pub ops: HashSet<OpType>,
}

impl Filter {
    fn keeps(&self, ev: &Event, default_ns: Option<&Name>) -> bool {
        let tenant = ev.tenant.as_ref().or(default_ns);
        (self.tenants.is_empty() || tenant.is_some_and(|t| self.tenants.contains(t)))
            && (self.ops.is_empty() || self.ops.contains(&ev.op.op_type()))
    }

    fn is_empty(&self) -> bool {
        self.tenants.is_empty() && self.ops.is_empty()
    }
}

/// Objects made by events a filter left out, which kept events cannot use.
#[derive(Debug, Default)]
struct LeftOut {
    volumes: HashSet<Name>,
    workloads: HashSet<Name>,
    snapshots: HashSet<Name>,
    groups: HashSet<Name>,
    /// Volumes of the kept (or declared) workloads, by workload.
    mounts: HashMap<Name, Vec<Name>>,
    /// Volumes that stay mounted in the output because the detach of a workload using them
    /// was left out: a kept delete or attach of one would meet a volume still in use.
    held: HashSet<Name>,
}

impl LeftOut {
    /// Records what a left-out event makes (and forgets what it removes).
    fn left_out(&mut self, op: &Op) {
        match op {
            Op::CreateVolume(c) => {
                self.volumes.insert(c.volume.clone());
            }
            Op::Attach(a) => {
                self.workloads.insert(a.workload.clone());
            }
            Op::Detach(w) | Op::AbortWorkload(w) => {
                if let Some(vols) = self.mounts.remove(&w.workload) {
                    self.held.extend(vols);
                }
            }
            Op::Snapshot(s) => {
                self.snapshots.insert(s.snapshot.clone());
            }
            Op::GroupSnapshot(g) => {
                self.groups.insert(g.group.clone());
            }
            _ => {}
        }
    }

    /// Whether a kept event needs an object only a left-out event made; a kept event that
    /// makes a name again owns it from then on.
    fn needs(&mut self, op: &Op) -> bool {
        let v = |n: &Name| self.volumes.contains(n);
        let held = |n: &Name| self.held.contains(n);
        let needs = match op {
            Op::CreateVolume(c) => match &c.source {
                Some(VolumeSource::Snapshot(s)) => self.snapshots.contains(s),
                Some(VolumeSource::Volume(x)) => v(x),
                Some(VolumeSource::GroupMember(m)) => self.groups.contains(&m.group),
                None => false,
            },
            Op::DeleteVolume(r) => v(&r.volume) || held(&r.volume),
            Op::Attach(a) => a.volumes.iter().any(|n| v(n) || held(n)),
            Op::Detach(w) | Op::AbortWorkload(w) => self.workloads.contains(&w.workload),
            Op::Reschedule(r) => self.workloads.contains(&r.workload),
            Op::Snapshot(s) => v(&s.volume),
            Op::DeleteSnapshot(s) => self.snapshots.contains(&s.snapshot),
            Op::SnapshotAllocated(s) => self.snapshots.contains(&s.snapshot),
            Op::SnapshotDelta(s) => {
                self.snapshots.contains(&s.base) || self.snapshots.contains(&s.snapshot)
            }
            Op::Resize(r) => v(&r.volume),
            Op::ModifyVolume(m) => v(&m.volume),
            Op::GroupSnapshot(g) => g.volumes.iter().any(v),
            Op::DeleteGroupSnapshot(g) => self.groups.contains(&g.group),
            Op::Io(io) => v(&io.volume),
            Op::IoPhase(p) => self.workloads.contains(&p.workload) || p.volumes().any(v),
            Op::CordonNode(_) | Op::DrainNode(_) | Op::ForceDetach(_) | Op::Marker(_) => false,
        };
        if needs {
            // What it would have made is as unusable as its source.
            self.left_out(op);
        } else {
            match op {
                Op::CreateVolume(c) => {
                    self.volumes.remove(&c.volume);
                }
                Op::Attach(a) => {
                    self.workloads.remove(&a.workload);
                    self.mounts.insert(a.workload.clone(), a.volumes.clone());
                }
                Op::Detach(w) | Op::AbortWorkload(w) => {
                    self.mounts.remove(&w.workload);
                }
                Op::Snapshot(s) => {
                    self.snapshots.remove(&s.snapshot);
                }
                Op::GroupSnapshot(g) => {
                    self.groups.remove(&g.group);
                }
                _ => {}
            }
        }
        needs
    }
}

/// A window of trace time, ns: `[from, to)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First instant kept.
    pub from: u64,
    /// First instant no longer kept.
    pub to: u64,
}

/// The window of `len` ns holding the most events (the earliest of equals), from the events'
/// times in order; `None` for no events. `times` and `again` are two passes over the same
/// times (two readers of one file): the second trails the first by the window, so memory is
/// constant however many events a window holds.
pub fn busiest(
    times: impl Iterator<Item = Result<u64, Error>>,
    again: impl Iterator<Item = Result<u64, Error>>,
    len: u64,
) -> Result<Option<(Window, u64)>, Error> {
    let mut again = again.peekable();
    // Events in (the trailing pass's time, the leading pass's time].
    let (mut n, mut best): (u64, Option<(Window, u64)>) = (0, None);
    for t in times {
        let t = t?;
        n += 1;
        // Drop from the window what is `len` or more before this event.
        loop {
            match again.peek() {
                Some(Ok(f)) if t - *f >= len => {
                    again.next();
                    n -= 1;
                }
                Some(Err(_)) => {
                    if let Some(Err(e)) = again.next() {
                        return Err(e);
                    }
                }
                _ => break,
            }
        }
        if best.is_none_or(|(_, b)| n > b) {
            let from = match again.peek() {
                Some(Ok(f)) => *f,
                _ => t,
            };
            best = Some((
                Window {
                    from,
                    to: from.saturating_add(len),
                },
                n,
            ));
        }
    }
    Ok(best)
}

/// What a slice kept and dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SliceReport {
    /// Window start, ns of the source trace.
    pub from: u64,
    /// Window end (exclusive), ns of the source trace.
    pub to: u64,
    /// Events before the window (read for the state at the cut).
    pub before: u64,
    /// Events kept.
    pub kept: u64,
    /// Whether the trace goes on past the window (it is not read further).
    pub truncated: bool,
    /// Volumes declared in the header (alive at the cut, or declared already).
    pub volumes: u64,
    /// Workloads declared in the header (running at the cut, or declared already).
    pub workloads: u64,
    /// `io_phase` units started before the window and still running at its start (bounded
    /// by `duration` only), kept clipped: at 0 with the rest of their duration (counted in
    /// `kept` too).
    pub clipped: u64,
    /// Events dropped, by reason: events of the window, and `io_phase` units running at its
    /// start that cannot be clipped (bounded by `bytes`).
    pub dropped: BTreeMap<String, u64>,
}

/// Why an `io_phase` running at the cut is dropped: bounded by bytes, what is left of it
/// after the cut depends on the storage's speed.
pub const DROPPED_BYTES_PHASE: &str =
    "io_phase bounded by bytes running at the window's start (what is left of it is unknown)";

/// The `io_phase` units started before the window that may still run at its start, in
/// trace order, and what happens to them.
#[derive(Debug, Default)]
struct Running {
    /// (event, clippable: bounded by duration only).
    phases: Vec<(Event, bool)>,
}

impl Running {
    /// Notes an event before the window starting at `from`.
    fn apply(&mut self, ev: &Event, from: u64) {
        match &ev.op {
            Op::IoPhase(p) => match (p.duration, p.bytes) {
                (Some(d), None) if ev.at.saturating_add(d) > from => {
                    self.phases.push((ev.clone(), true));
                }
                (Some(d), Some(_)) if ev.at.saturating_add(d) > from => {
                    self.phases.push((ev.clone(), false));
                }
                (None, Some(_)) => self.phases.push((ev.clone(), false)),
                _ => {}
            },
            // A phase ends with its workload.
            Op::Detach(w) | Op::AbortWorkload(w) => self
                .phases
                .retain(|(e, _)| !matches!(&e.op, Op::IoPhase(p) if p.workload == w.workload)),
            _ => {}
        }
    }
}

/// The objects alive at a point of the trace.
#[derive(Debug, Default)]
struct Alive {
    volumes: Vec<VolumeDecl>,
    index: HashMap<Name, usize>,
    /// Running workloads by when they started (the header's first), for a stable order.
    workloads: BTreeMap<u64, WorkloadDecl>,
    started: HashMap<Name, u64>,
    next: u64,
    snapshots: HashSet<Name>,
    groups: HashSet<Name>,
}

impl Alive {
    fn of(header: &Header) -> Self {
        let mut a = Alive::default();
        for v in &header.volumes {
            a.add_volume(v.clone());
        }
        for w in &header.workloads {
            a.add_workload(w.clone());
        }
        a
    }

    fn add_workload(&mut self, w: WorkloadDecl) {
        self.remove_workload(&w.name);
        self.started.insert(w.name.clone(), self.next);
        self.workloads.insert(self.next, w);
        self.next += 1;
    }

    fn remove_workload(&mut self, n: &Name) -> bool {
        match self.started.remove(n) {
            Some(k) => self.workloads.remove(&k).is_some(),
            None => false,
        }
    }

    fn add_volume(&mut self, v: VolumeDecl) {
        match self.index.get(&v.name) {
            Some(&i) => self.volumes[i] = v,
            None => {
                self.index.insert(v.name.clone(), self.volumes.len());
                self.volumes.push(v);
            }
        }
    }

    fn remove_volume(&mut self, n: &Name) {
        if let Some(i) = self.index.remove(n) {
            self.volumes.remove(i);
            for j in self.index.values_mut() {
                if *j > i {
                    *j -= 1;
                }
            }
        }
    }

    /// Applies an event (of `tenant`) before the window.
    fn apply(&mut self, op: &Op, tenant: Option<&Name>) {
        match op {
            Op::CreateVolume(c) => self.add_volume(VolumeDecl {
                name: c.volume.clone(),
                size: c.size,
                storage_class: c.storage_class.clone(),
                access_mode: c.access_mode,
                volume_mode: c.volume_mode,
                attributes_class: None,
            }),
            Op::DeleteVolume(v) => self.remove_volume(&v.volume),
            Op::Resize(r) => {
                if let Some(&i) = self.index.get(&r.volume) {
                    self.volumes[i].size = Some(r.size);
                }
            }
            Op::ModifyVolume(m) => {
                if let Some(&i) = self.index.get(&m.volume) {
                    self.volumes[i].attributes_class = Some(m.class.clone());
                }
            }
            Op::Attach(a) => self.add_workload(WorkloadDecl {
                name: a.workload.clone(),
                volumes: a.volumes.clone(),
                node: a.node.clone(),
                tenant: tenant.cloned(),
            }),
            Op::Detach(w) | Op::AbortWorkload(w) => {
                self.remove_workload(&w.workload);
            }
            Op::Reschedule(r) => {
                if let Some(k) = self.started.get(&r.workload)
                    && let Some(w) = self.workloads.get_mut(k)
                {
                    w.node.clone_from(&r.node);
                }
            }
            Op::Snapshot(s) => {
                self.snapshots.insert(s.snapshot.clone());
            }
            Op::DeleteSnapshot(s) => {
                self.snapshots.remove(&s.snapshot);
            }
            Op::GroupSnapshot(g) => {
                self.groups.insert(g.group.clone());
            }
            Op::DeleteGroupSnapshot(g) => {
                self.groups.remove(&g.group);
            }
            _ => {}
        }
    }
}

/// Why an event of the window cannot be kept, or `None`; updates what was made before the
/// window for names the window makes again.
fn needs_earlier(op: &Op, earlier: &mut Alive) -> Option<&'static str> {
    match op {
        Op::Snapshot(s) => {
            earlier.snapshots.remove(&s.snapshot);
            None
        }
        Op::DeleteSnapshot(s) => earlier
            .snapshots
            .remove(&s.snapshot)
            .then_some("snapshot taken before the window"),
        Op::GroupSnapshot(g) => {
            earlier.groups.remove(&g.group);
            None
        }
        Op::DeleteGroupSnapshot(g) => earlier
            .groups
            .remove(&g.group)
            .then_some("group snapshot taken before the window"),
        Op::SnapshotAllocated(s) => earlier
            .snapshots
            .contains(&s.snapshot)
            .then_some("snapshot taken before the window"),
        Op::SnapshotDelta(s) => (earlier.snapshots.contains(&s.base)
            || earlier.snapshots.contains(&s.snapshot))
        .then_some("snapshot taken before the window"),
        Op::CreateVolume(c) => match &c.source {
            Some(VolumeSource::Snapshot(s)) if earlier.snapshots.contains(s) => {
                Some("restore from a snapshot taken before the window")
            }
            Some(VolumeSource::GroupMember(m)) if earlier.groups.contains(&m.group) => {
                Some("restore from a group snapshot taken before the window")
            }
            _ => None,
        },
        _ => None,
    }
}

/// Slices `events` (of a trace with `header`) to `w`: reads up to the window for the state at
/// the cut, then calls `start` with the new header and `write` with every kept event (times
/// shifted to start at 0). Stops at the first event past the window.
pub fn slice<S>(
    header: &Header,
    events: impl Iterator<Item = Result<Event, Error>>,
    w: Window,
    filter: &Filter,
    source: &str,
    start: impl FnOnce(&Header) -> Result<S, Error>,
    mut write: impl FnMut(&mut S, &Event) -> Result<(), Error>,
) -> Result<(S, SliceReport), Error> {
    let mut alive = Alive::of(header);
    let mut report = SliceReport {
        from: w.from,
        to: w.to,
        ..SliceReport::default()
    };
    let mut events = events.peekable();
    let mut running = Running::default();
    while let Some(ev) = events.next_if(|e| e.as_ref().is_ok_and(|e| e.at < w.from)) {
        let ev = ev?;
        alive.apply(&ev.op, ev.tenant.as_ref());
        running.apply(&ev, w.from);
        report.before += 1;
    }
    // `io_phase` units running across the cut: the window holds their load from its start,
    // so a phase bounded by duration is kept from the cut for the rest of it; one bounded by
    // bytes cannot be cut (how much it did before the cut depends on the storage) and is
    // dropped and counted.
    let default_ns = header.defaults.namespace.clone();
    let mut clipped = Vec::new();
    for (ev, clippable) in running.phases {
        let why = if !filter.keeps(&ev, default_ns.as_ref()) {
            "not selected by the filter"
        } else if !clippable {
            DROPPED_BYTES_PHASE
        } else {
            clipped.push(ev);
            continue;
        };
        *report.dropped.entry(why.to_owned()).or_default() += 1;
    }
    let mut h = header.clone();
    h.volumes.clone_from(&alive.volumes);
    h.workloads = alive.workloads.values().cloned().collect();
    report.volumes = h.volumes.len() as u64;
    report.workloads = h.workloads.len() as u64;
    h.origin = header.origin.and_then(|o| {
        o.checked_add(jiff::SignedDuration::from_nanos(
            i64::try_from(w.from).unwrap_or(i64::MAX),
        ))
        .ok()
    });
    h.provenance.parameters.insert(
        "slice".to_owned(),
        format!(
            "[{}, {}) ns of {source}, shifted to 0; volumes alive and workloads running at the \
             cut declared{}",
            w.from,
            w.to,
            match clipped.len() {
                0 => String::new(),
                n => format!("; {n} io_phase unit(s) running at the cut kept from it, clipped"),
            }
        ),
    );
    if !filter.is_empty() {
        let mut tenants: Vec<&str> = filter.tenants.iter().map(Name::as_str).collect();
        let mut ops: Vec<&str> = filter.ops.iter().map(|o| o.name()).collect();
        tenants.sort_unstable();
        ops.sort_unstable();
        h.provenance.parameters.insert(
            "slice_filter".to_owned(),
            format!(
                "tenants [{}], op types [{}] (empty: all)",
                tenants.join(", "),
                ops.join(", ")
            ),
        );
    }
    let mut left_out = LeftOut {
        mounts: h
            .workloads
            .iter()
            .map(|w| (w.name.clone(), w.volumes.clone()))
            .collect(),
        ..LeftOut::default()
    };
    let mut sink = start(&h)?;
    for mut ev in clipped {
        if let Op::IoPhase(p) = &mut ev.op {
            p.duration = p.duration.map(|d| ev.at.saturating_add(d) - w.from);
        }
        ev.at = 0;
        write(&mut sink, &ev)?;
        report.kept += 1;
        report.clipped += 1;
    }
    // Events before the window were read already; an event earlier than the window's start
    // after them is out of time order: an error, never dropped (the checker, unless the
    // user skipped it, stops such a trace before it gets here).
    let mut latest = w.from;
    for (index, ev) in (report.before..).zip(events) {
        let mut ev = ev?;
        if ev.at < latest {
            return Err(out_of_order(source, index, ev.at, latest));
        }
        latest = ev.at;
        if ev.at >= w.to {
            report.truncated = true;
            break;
        }
        if let Some(why) = needs_earlier(&ev.op, &mut alive) {
            *report.dropped.entry(why.to_owned()).or_default() += 1;
            continue;
        }
        if !filter.keeps(&ev, default_ns.as_ref()) {
            left_out.left_out(&ev.op);
            *report
                .dropped
                .entry("not selected by the filter".to_owned())
                .or_default() += 1;
            continue;
        }
        if left_out.needs(&ev.op) {
            *report
                .dropped
                .entry("needs an object of an event the filter left out".to_owned())
                .or_default() += 1;
            continue;
        }
        ev.at -= w.from;
        write(&mut sink, &ev)?;
        report.kept += 1;
    }
    Ok((sink, report))
}

/// An event of the window earlier than one before it, located by its index.
fn out_of_order(source: &str, index: u64, at: u64, previous: u64) -> Error {
    crate::error::Diagnostic {
        file: source.to_owned(),
        location: crate::error::Location {
            record: Some(index),
            ..Default::default()
        },
        path: format!("events[{index}].at"),
        problem: crate::error::Problem::TimeInversion { at, previous },
    }
    .into()
}

#[cfg(test)]
mod tests;
