//! `trace split`: one trace into one trace per tenant, for several drivers that together
//! replay what one could not (each started on the same wall-clock instant, `run --start-at`).
//!
//! An event goes to its tenant's part (the event's tenant, else the header's default
//! namespace, else `default`); markers go to every part, so each part keeps the trace's
//! phases. A part's header is the trace's, with only the declared volumes and workloads its
//! events use (unused declared volumes go to the default part), so no two drivers create the
//! same object. That is only sound when every object belongs to one tenant: the first pass
//! checks it and names the event where a volume, snapshot or workload of one tenant is used by
//! another (an object deleted may be made again by another tenant). The second pass writes
//! the parts, streaming; ids and times are kept, so the parts interleave back into the trace.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::error::Error;
use crate::model::{Event, Header, Op};
use crate::units::Name;

/// What one part holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PartReport {
    /// Events written (markers included).
    pub events: u64,
    /// Declared volumes.
    pub volumes: u64,
    /// Declared workloads.
    pub workloads: u64,
}

/// What `split` did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SplitReport {
    /// The parts by tenant.
    pub parts: BTreeMap<String, PartReport>,
    /// Events of the trace.
    pub events: u64,
    /// Markers, copied into every part.
    pub markers: u64,
}

/// Why a trace cannot be split by tenant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "event {index} (id {id}): {kind} {name:?} belongs to tenant {owner:?} (since event \
     {since}) but tenant {tenant:?} uses it; a split needs each object in one tenant"
)]
pub struct Shared {
    /// 0-based index of the event.
    pub index: u64,
    /// Its id.
    pub id: u64,
    /// `volume`, `snapshot` or `workload`.
    pub kind: &'static str,
    /// The object.
    pub name: String,
    /// The tenant that has it.
    pub owner: String,
    /// Where it became that tenant's.
    pub since: u64,
    /// The event's tenant.
    pub tenant: String,
}

/// A failure of [`split`]: reading or writing, or an object shared by tenants.
#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    /// Reading or writing a trace.
    #[error(transparent)]
    Trace(#[from] Error),
    /// An object used by two tenants.
    #[error(transparent)]
    Shared(#[from] Shared),
}

/// The objects an op names: (kind, name, whether the op ends it).
fn objects(op: &Op) -> Vec<(&'static str, &Name, bool)> {
    use crate::model::VolumeSource;
    match op {
        Op::CreateVolume(c) => {
            let mut v = vec![("volume", &c.volume, false)];
            match &c.source {
                Some(VolumeSource::Snapshot(s)) => v.push(("snapshot", s, false)),
                Some(VolumeSource::Volume(x)) => v.push(("volume", x, false)),
                Some(VolumeSource::GroupMember(m)) => {
                    v.push(("group snapshot", &m.group, false));
                }
                None => {}
            }
            v
        }
        Op::DeleteVolume(r) => vec![("volume", &r.volume, true)],
        Op::Attach(a) => std::iter::once(("workload", &a.workload, false))
            .chain(a.volumes.iter().map(|v| ("volume", v, false)))
            .collect(),
        Op::Detach(w) | Op::AbortWorkload(w) => vec![("workload", &w.workload, true)],
        Op::Reschedule(r) => vec![("workload", &r.workload, false)],
        Op::Snapshot(s) => vec![
            ("volume", &s.volume, false),
            ("snapshot", &s.snapshot, false),
        ],
        Op::DeleteSnapshot(s) => vec![("snapshot", &s.snapshot, true)],
        Op::SnapshotAllocated(s) => vec![("snapshot", &s.snapshot, false)],
        Op::SnapshotDelta(s) => vec![
            ("snapshot", &s.base, false),
            ("snapshot", &s.snapshot, false),
        ],
        Op::Resize(r) => vec![("volume", &r.volume, false)],
        Op::ModifyVolume(m) => vec![("volume", &m.volume, false)],
        Op::GroupSnapshot(g) => std::iter::once(("group snapshot", &g.group, false))
            .chain(g.volumes.iter().map(|v| ("volume", v, false)))
            .collect(),
        Op::DeleteGroupSnapshot(g) => vec![("group snapshot", &g.group, true)],
        Op::Io(io) => vec![("volume", &io.volume, false)],
        Op::IoPhase(p) => std::iter::once(("workload", &p.workload, false))
            .chain(p.volumes().map(|v| ("volume", v, false)))
            .collect(),
        Op::CordonNode(_) | Op::DrainNode(_) | Op::ForceDetach(_) | Op::Marker(_) => Vec::new(),
    }
}

/// The part an event goes to.
fn part_of(ev: &Event, default: &str) -> String {
    ev.tenant
        .as_ref()
        .map_or_else(|| default.to_owned(), |t| t.as_str().to_owned())
}

/// Splits `header` + events by tenant: `first` and `second` are two passes over the same
/// events; `open` makes a part's sink from its tenant and header, `write` writes to it.
/// Returns the sinks by tenant and the report.
pub fn split<S>(
    header: &Header,
    first: impl Iterator<Item = Result<Event, Error>>,
    second: impl Iterator<Item = Result<Event, Error>>,
    mut open: impl FnMut(&str, &Header) -> Result<S, Error>,
    mut write: impl FnMut(&mut S, &Event) -> Result<(), Error>,
) -> Result<(BTreeMap<String, S>, SplitReport), SplitError> {
    let default = header
        .defaults
        .namespace
        .as_ref()
        .map_or_else(|| "default".to_owned(), |n| n.as_str().to_owned());
    // Pass 1: owners, and which part first uses each declared object.
    let mut owner: HashMap<(&'static str, Name), (String, u64)> = HashMap::new();
    let mut declared_vol: HashMap<Name, Option<String>> = header
        .volumes
        .iter()
        .map(|v| (v.name.clone(), None))
        .collect();
    for w in &header.workloads {
        let t = w
            .tenant
            .as_ref()
            .map_or_else(|| default.clone(), |t| t.as_str().to_owned());
        owner.insert(("workload", w.name.clone()), (t.clone(), 0));
        for v in &w.volumes {
            owner.insert(("volume", v.clone()), (t.clone(), 0));
            declared_vol.insert(v.clone(), Some(t.clone()));
        }
    }
    let mut parts: Vec<String> = Vec::new();
    let mut report = SplitReport::default();
    for (index, ev) in first.enumerate() {
        let ev = ev?;
        let index = index as u64;
        report.events += 1;
        if matches!(ev.op, Op::Marker(_)) {
            report.markers += 1;
            continue;
        }
        let t = part_of(&ev, &default);
        if !parts.contains(&t) {
            parts.push(t.clone());
        }
        for (kind, name, ends) in objects(&ev.op) {
            let key = (kind, name.clone());
            match owner.get(&key) {
                Some((o, since)) if *o != t => {
                    return Err(Shared {
                        index,
                        id: ev.id,
                        kind,
                        name: name.to_string(),
                        owner: o.clone(),
                        since: *since,
                        tenant: t,
                    }
                    .into());
                }
                Some(_) => {}
                None => {
                    owner.insert(key.clone(), (t.clone(), index));
                }
            }
            if kind == "volume"
                && let Some(first) = declared_vol.get_mut(name)
                && first.is_none()
            {
                *first = Some(t.clone());
            }
            if ends {
                owner.remove(&key);
            }
        }
    }
    if !parts.contains(&default) && declared_vol.values().any(Option::is_none) {
        parts.push(default.clone());
    }
    if parts.is_empty() {
        parts.push(default.clone());
    }
    parts.sort();
    // The parts' headers.
    let mut sinks = BTreeMap::new();
    for (i, p) in parts.iter().enumerate() {
        let mut h = header.clone();
        crate::split_part::stamp_part(&mut h, i, parts.len());
        h.volumes.retain(|v| {
            declared_vol
                .get(&v.name)
                .and_then(Option::as_deref)
                .unwrap_or(&default)
                == p
        });
        h.workloads
            .retain(|w| w.tenant.as_ref().map_or(default.as_str(), Name::as_str) == p);
        h.provenance.parameters.insert(
            "split".to_owned(),
            format!("tenant {p:?} of a trace split by tenant (ids and times kept)"),
        );
        let r = report.parts.entry(p.clone()).or_default();
        r.volumes = h.volumes.len() as u64;
        r.workloads = h.workloads.len() as u64;
        sinks.insert(p.clone(), open(p, &h)?);
    }
    // Pass 2: the events.
    for ev in second {
        let ev = ev?;
        if matches!(ev.op, Op::Marker(_)) {
            for (p, s) in &mut sinks {
                write(s, &ev)?;
                if let Some(r) = report.parts.get_mut(p) {
                    r.events += 1;
                }
            }
            continue;
        }
        let p = part_of(&ev, &default);
        if let Some(s) = sinks.get_mut(&p) {
            write(s, &ev)?;
            if let Some(r) = report.parts.get_mut(&p) {
                r.events += 1;
            }
        }
    }
    Ok((sinks, report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Checker;
    use crate::io::{Encoding, Trace};

    type Parts = BTreeMap<String, (Header, Vec<Event>)>;

    fn run(text: &str) -> Result<(Parts, SplitReport), SplitError> {
        let t = Trace::from_bytes(text.as_bytes(), Some(Encoding::Yaml)).expect("trace");
        split(
            &t.header,
            t.events.clone().into_iter().map(Ok),
            t.events.into_iter().map(Ok),
            |_, h| Ok((h.clone(), Vec::new())),
            |s: &mut (Header, Vec<Event>), e| {
                s.1.push(e.clone());
                Ok(())
            },
        )
    }

    const TRACE: &str = "format: cnsreplay-trace
version: 1
volumes: [{name: pa, size: 1Gi}, {name: pb, size: 1Gi}, {name: unused, size: 1Gi}]
events:
  - {at: 0s, tenant: a, create_volume: {volume: v1, size: 1Gi}}
  - {at: 0s, tenant: b, attach: {workload: wb, volumes: [pb]}}
  - {at: 1s, tenant: a, attach: {workload: wa, volumes: [v1, pa]}}
  - {at: 2s, marker: {name: mid}}
  - {at: 3s, tenant: a, detach: {workload: wa}}
  - {at: 3s, tenant: a, delete_volume: {volume: v1}}
  - {at: 4s, tenant: b, create_volume: {volume: v1, size: 1Gi}}
  - {at: 5s, create_volume: {volume: d, size: 1Gi}}
";

    #[test]
    fn each_tenant_gets_its_events_and_declared_objects_and_every_marker() {
        let (parts, r) = run(TRACE).expect("split");
        assert_eq!(parts.keys().collect::<Vec<_>>(), ["a", "b", "default"]);
        let names = |p: &str| -> Vec<String> {
            parts[p]
                .0
                .volumes
                .iter()
                .map(|v| v.name.to_string())
                .collect()
        };
        assert_eq!(names("a"), ["pa"]);
        assert_eq!(names("b"), ["pb"]);
        assert_eq!(names("default"), ["unused"]);
        let ids = |p: &str| parts[p].1.iter().map(|e| e.id).collect::<Vec<_>>();
        assert_eq!(ids("a"), [0, 2, 3, 4, 5]);
        assert_eq!(ids("b"), [1, 3, 6]);
        assert_eq!(ids("default"), [3, 7]);
        assert_eq!((r.events, r.markers), (8, 1));
        assert_eq!(r.parts["a"].events, 5);
        // Every part replays on its own.
        for (p, (h, evs)) in &parts {
            let findings = Checker::findings_of(h, evs);
            assert!(findings.is_empty(), "{p}: {findings:?}");
        }
    }

    #[test]
    fn an_object_two_tenants_use_is_named() {
        let t = TRACE.replace(
            "  - {at: 3s, tenant: a, detach: {workload: wa}}",
            "  - {at: 2500ms, tenant: b, snapshot: {volume: v1, snapshot: s}}\n  - {at: 3s, tenant: a, detach: {workload: wa}}",
        );
        let e = run(&t).expect_err("shared");
        let msg = e.to_string();
        assert!(
            msg.contains("event 4 (id 4): volume \"v1\" belongs to tenant \"a\" (since event 0) but tenant \"b\" uses it"),
            "{msg}"
        );
    }
}
