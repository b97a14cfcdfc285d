//! `trace split`: one trace into parts that replay on several drivers at once, each started
//! on the same wall-clock instant (`run --start-at`), together doing what one could not.
//!
//! A part must replay on its own, so the events of one object never go to two parts. Two
//! ways to cut ([`By`]): **by tenant**, each event to its tenant's part (the event's tenant,
//! else the header's default namespace, else `default`), sound only when every object
//! belongs to one tenant ([`tenant`] checks it in the first pass and names the event where
//! one is shared); and **by lineage** ([`lineage`]), for a trace without tenants or whose
//! tenants share objects: a volume with its snapshots, restores, clones and group snapshots
//! and the workloads that mount it (a workload mounting several volumes joins them) stay in
//! one part. With `parts: Some(N)` the units (tenants or lineages) are balanced over N parts
//! by their events, heaviest first; a split by tenant without it makes a part per tenant,
//! one by lineage needs it. Fewer units than parts is refused ([`SplitError::TooFew`]), and a
//! split that makes one part says so in [`SplitReport::warnings`].
//!
//! Markers go to every part, so each keeps the trace's phases; events that name no object
//! (`cordon_node`, `drain_node`, `force_detach`: the cluster's nodes, shared by every driver)
//! go to one part, the first, in a split by lineage. A part's header is the trace's with the
//! declared volumes and workloads of its units, so no two drivers make the same object. The
//! first pass decides; the second writes the parts, streaming; ids and times are kept, so
//! the parts interleave back into the trace.

mod lineage;
mod tenant;

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::error::Error;
use crate::model::{Event, Header, Op};
use crate::units::Name;
use lineage::{Lineages, balance};
use tenant::Tenants;

/// What a split keeps together in one part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum By {
    /// Each tenant's events.
    Tenant,
    /// Each lineage's events (objects joined by the events that name them together).
    Lineage,
}

/// How to split.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SplitOptions {
    /// Tenant or lineage; by default tenant when the trace has two or more tenants and no
    /// object shared between them, else lineage.
    pub by: Option<By>,
    /// How many parts; by default one per tenant (a split by lineage needs it).
    pub parts: Option<usize>,
}

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
    /// The tenants in it (a split by tenant).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<String>,
    /// The lineages in it (a split by lineage), those with events and those of declared
    /// objects only.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lineages: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What `split` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SplitReport {
    /// What the parts keep together.
    pub by: By,
    /// Why: asked, or what the trace's tenants allowed.
    pub reason: String,
    /// The parts by name: the tenant's (a split by tenant without a number of parts), else
    /// `part-1`, `part-2`, ….
    pub parts: BTreeMap<String, PartReport>,
    /// Events of the trace.
    pub events: u64,
    /// Markers, copied into every part.
    pub markers: u64,
    /// Tenants or lineages that have events.
    pub units: u64,
    /// What the user should know: a split into one part, which splits nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Why a trace cannot be split by tenant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "event {index} (id {id}): {kind} {name:?} belongs to tenant {owner:?} (since event \
     {since}) but tenant {tenant:?} uses it; a split by tenant needs each object in one tenant \
     (--by lineage keeps objects together instead)"
)]
pub struct Shared {
    /// 0-based index of the event.
    pub index: u64,
    /// Its id.
    pub id: u64,
    /// `volume`, `snapshot`, `group snapshot`, `workload` or `log`.
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

/// A failure of [`split`].
#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    /// Reading or writing a trace.
    #[error(transparent)]
    Trace(#[from] Error),
    /// An object used by two tenants (a split by tenant).
    #[error(transparent)]
    Shared(#[from] Shared),
    /// A split by lineage without a number of parts.
    #[error(
        "a split by lineage needs the number of parts (--parts N): the trace has {lineages} \
         lineages with events, the largest holding {largest} of the {events} events that name \
         an object"
    )]
    NeedParts {
        /// Lineages with events.
        lineages: u64,
        /// Events of the largest.
        largest: u64,
        /// Events that name an object.
        events: u64,
    },
    /// Fewer tenants or lineages with events than parts asked for.
    #[error("cannot make {parts} parts: {}", too_few(*units, what, *largest, *total))]
    TooFew {
        /// Parts asked for.
        parts: usize,
        /// Units with events.
        units: u64,
        /// `tenant` or `lineage`.
        what: &'static str,
        /// Events of the largest unit.
        largest: u64,
        /// Events of all units.
        total: u64,
    },
}

fn too_few(units: u64, what: &str, largest: u64, total: u64) -> String {
    match units {
        0 => format!("no {what} of the trace has an event"),
        1 if what == "lineage" => format!(
            "all {total} events that name an object are one lineage (objects joined by events \
             naming them together: a snapshot, restore, clone, group snapshot, a workload \
             mounting several volumes, an ordered-write log): it replays on one driver"
        ),
        1 => format!("all {total} events are one {what}'s"),
        n => format!(
            "the trace has {n} {what}s with events (the largest holds {largest} of their \
             {total}); ask for at most {n} parts"
        ),
    }
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
        // An ordered check names the log its writer made: both in one part.
        Op::IoPhase(p) => std::iter::once(("workload", &p.workload, false))
            .chain(p.volumes().map(|v| ("volume", v, false)))
            .chain(p.ordered.iter().map(|o| ("log", &o.log, false)))
            .collect(),
        Op::CordonNode(_) | Op::DrainNode(_) | Op::ForceDetach(_) | Op::Marker(_) => Vec::new(),
    }
}

/// What the first pass found.
struct Survey {
    tenants: Tenants,
    lineages: Lineages,
    events: u64,
    markers: u64,
    /// Events that name no object (node operations).
    unowned: u64,
}

fn survey(
    header: &Header,
    events: impl Iterator<Item = Result<Event, Error>>,
) -> Result<Survey, Error> {
    let mut s = Survey {
        tenants: Tenants::of(header),
        lineages: Lineages::of(header),
        events: 0,
        markers: 0,
        unowned: 0,
    };
    for (index, ev) in events.enumerate() {
        let ev = ev?;
        s.events += 1;
        if matches!(ev.op, Op::Marker(_)) {
            s.markers += 1;
            continue;
        }
        s.tenants.event(index as u64, &ev);
        if s.lineages.event(&ev.op).is_none() {
            s.unowned += 1;
        }
    }
    Ok(s)
}

/// Where each event goes in the second pass.
enum Assign {
    /// By the event's tenant.
    Tenant(HashMap<String, usize>),
    /// By the lineage of the objects it names; events naming none to part 0.
    Lineage(HashMap<u32, usize>),
}

/// The parts: their names and headers, and where the events go.
struct Plan {
    names: Vec<String>,
    headers: Vec<Header>,
    assign: Assign,
    reports: Vec<PartReport>,
    by: By,
    reason: String,
    units: u64,
}

/// A part's header: the trace's, with the declared volumes and workloads `keep` says are
/// the part's (by index in the trace's header).
fn part_header(
    header: &Header,
    keep_volume: impl Fn(usize) -> bool,
    keep_workload: impl Fn(usize) -> bool,
    what: &str,
) -> Header {
    let mut h = header.clone();
    let mut i = 0;
    h.volumes.retain(|_| {
        i += 1;
        keep_volume(i - 1)
    });
    let mut i = 0;
    h.workloads.retain(|_| {
        i += 1;
        keep_workload(i - 1)
    });
    h.provenance.parameters.insert(
        "split".to_owned(),
        format!("{what} of a trace split into parts (ids and times kept)"),
    );
    h
}

/// Which way to split, and why.
fn choose(s: &Survey, opts: SplitOptions) -> Result<(By, String), SplitError> {
    let tenants = s.tenants.seen.len();
    match (opts.by, &s.tenants.shared) {
        (Some(By::Tenant), Some(shared)) => Err(shared.clone().into()),
        (Some(b), _) => Ok((b, "asked (--by)".to_owned())),
        (None, None) if tenants >= 2 && opts.parts.is_some_and(|n| n > tenants) => Ok((
            By::Lineage,
            format!("{tenants} tenants for {} parts", opts.parts.unwrap_or(0)),
        )),
        (None, None) if tenants >= 2 => Ok((
            By::Tenant,
            format!("{tenants} tenants, each object used by one"),
        )),
        (None, None) => Ok((
            By::Lineage,
            match s.tenants.seen.first() {
                Some((t, _)) => format!("one tenant ({t:?}) to split by"),
                None => "no event names a tenant's object".to_owned(),
            },
        )),
        (None, Some(shared)) => Ok((
            By::Lineage,
            format!(
                "the tenants share objects: {} {:?} of tenant {:?} is used by tenant {:?} \
                 (event {}, id {})",
                shared.kind, shared.name, shared.owner, shared.tenant, shared.index, shared.id
            ),
        )),
    }
}

/// Units (tenants or lineages) to parts: `None` parts keeps one part per unit.
fn place(
    weights: &[u64],
    parts: Option<usize>,
    preload: u64,
    what: &'static str,
) -> Result<(usize, Vec<usize>), SplitError> {
    let with_events = weights.iter().filter(|&&w| w > 0).count();
    let Some(n) = parts else {
        return Ok((weights.len(), (0..weights.len()).collect()));
    };
    if n == 0 || n > with_events.max(1) {
        return Err(SplitError::TooFew {
            parts: n,
            units: with_events as u64,
            what,
            largest: weights.iter().max().copied().unwrap_or(0),
            total: weights.iter().sum(),
        });
    }
    Ok((n, balance(weights, n, &[preload])))
}

fn plan(header: &Header, s: &mut Survey, opts: SplitOptions) -> Result<Plan, SplitError> {
    let (by, reason) = choose(s, opts)?;
    let numbered = |k: usize| format!("part-{}", k + 1);
    match by {
        By::Tenant => {
            let t = &s.tenants;
            let mut units: Vec<(String, u64)> = t.seen.clone();
            if units.is_empty()
                || (t.unused_declared() && !units.iter().any(|(n, _)| *n == t.default))
            {
                units.push((t.default.clone(), 0));
            }
            if opts.parts.is_none() {
                units.sort();
            }
            let weights: Vec<u64> = units.iter().map(|(_, w)| *w).collect();
            let (n, to) = place(&weights, opts.parts, 0, "tenant")?;
            let names: Vec<String> = match opts.parts {
                None => units.iter().map(|(u, _)| u.clone()).collect(),
                Some(_) => (0..n).map(numbered).collect(),
            };
            let of: HashMap<String, usize> = units
                .iter()
                .zip(&to)
                .map(|((u, _), &p)| (u.clone(), p))
                .collect();
            let mut reports = vec![PartReport::default(); n];
            for ((u, _), &p) in units.iter().zip(&to) {
                reports[p].tenants.push(u.clone());
            }
            let headers = (0..n)
                .map(|p| {
                    part_header(
                        header,
                        |i| of.get(t.volume_tenant(&header.volumes[i].name)) == Some(&p),
                        |i| {
                            let w = t.workload_tenant(header.workloads[i].tenant.as_ref());
                            of.get(&w) == Some(&p)
                        },
                        &format!("tenants {:?}", reports[p].tenants),
                    )
                })
                .collect();
            Ok(Plan {
                names,
                headers,
                assign: Assign::Tenant(of),
                reports,
                by,
                reason,
                units: weights.iter().filter(|&&w| w > 0).count() as u64,
            })
        }
        By::Lineage => {
            let l = &mut s.lineages;
            let lineages = l.weights();
            let weights: Vec<u64> = lineages.iter().map(|(_, w)| *w).collect();
            let with_events = weights.iter().filter(|&&w| w > 0).count() as u64;
            let Some(_) = opts.parts else {
                return Err(SplitError::NeedParts {
                    lineages: with_events,
                    largest: weights.iter().max().copied().unwrap_or(0),
                    events: weights.iter().sum(),
                });
            };
            let (n, to) = place(&weights, opts.parts, s.unowned, "lineage")?;
            let of: HashMap<u32, usize> = lineages
                .iter()
                .zip(&to)
                .map(|((root, _), &p)| (*root, p))
                .collect();
            let mut reports = vec![PartReport::default(); n];
            for &p in &to {
                reports[p].lineages += 1;
            }
            l.rewind(header);
            let (vols, wls) = l.declared(header);
            let mut part_of = |o: u32| of.get(&l.root(o)).copied().unwrap_or(0);
            let vol_part: Vec<usize> = vols.iter().map(|&o| part_of(o)).collect();
            let wl_part: Vec<usize> = wls.iter().map(|&o| part_of(o)).collect();
            let headers = (0..n)
                .map(|p| {
                    part_header(
                        header,
                        |i| vol_part.get(i) == Some(&p),
                        |i| wl_part.get(i) == Some(&p),
                        &format!("{} of {n}, by lineage", numbered(p)),
                    )
                })
                .collect();
            Ok(Plan {
                names: (0..n).map(numbered).collect(),
                headers,
                assign: Assign::Lineage(of),
                reports,
                by,
                reason,
                units: with_events,
            })
        }
    }
}

/// Splits `header` + events: `first` and `second` are two passes over the same events;
/// `open` makes a part's sink from its name and header, `write` writes to it. Returns the
/// sinks by part name and the report.
pub fn split<S>(
    header: &Header,
    first: impl Iterator<Item = Result<Event, Error>>,
    second: impl Iterator<Item = Result<Event, Error>>,
    opts: SplitOptions,
    mut open: impl FnMut(&str, &Header) -> Result<S, Error>,
    mut write: impl FnMut(&mut S, &Event) -> Result<(), Error>,
) -> Result<(BTreeMap<String, S>, SplitReport), SplitError> {
    let mut s = survey(header, first)?;
    let mut plan = plan(header, &mut s, opts)?;
    let mut sinks = Vec::new();
    let count = plan.headers.len();
    for (p, (name, h)) in plan.names.iter().zip(&mut plan.headers).enumerate() {
        // Which split the part is of, so that the parts' runs merge back (`split_part`).
        crate::split_part::stamp_part(h, p, count);
        plan.reports[p].volumes = h.volumes.len() as u64;
        plan.reports[p].workloads = h.workloads.len() as u64;
        sinks.push(open(name, h)?);
    }
    // Pass 2: the events (the lineages' objects numbered again as in pass 1).
    let mut lineages = s.lineages;
    for ev in second {
        let ev = ev?;
        if matches!(ev.op, Op::Marker(_)) {
            for (p, sink) in sinks.iter_mut().enumerate() {
                write(sink, &ev)?;
                plan.reports[p].events += 1;
            }
            continue;
        }
        let p = match &plan.assign {
            Assign::Tenant(of) => of.get(&s.tenants.of_event(&ev)).copied(),
            Assign::Lineage(of) => match lineages.event(&ev.op) {
                Some(o) => of.get(&lineages.root(o)).copied(),
                None => Some(0),
            },
        };
        // A trace that changed between the passes has events the plan does not know: the
        // first part takes them (the checker of `run` judges that part).
        let p = p.unwrap_or(0);
        write(&mut sinks[p], &ev)?;
        plan.reports[p].events += 1;
    }
    let mut report = SplitReport {
        by: plan.by,
        reason: plan.reason,
        parts: BTreeMap::new(),
        events: s.events,
        markers: s.markers,
        units: plan.units,
        warnings: Vec::new(),
    };
    if plan.names.len() == 1 {
        report.warnings.push(format!(
            "one part: nothing was split ({}{})",
            match plan.by {
                By::Tenant => "by tenant: ",
                By::Lineage => "by lineage: ",
            },
            match (plan.by, opts.parts) {
                (_, Some(1)) => "one part was asked for".to_owned(),
                (By::Tenant, _) => format!("{} tenant(s) with events", plan.units),
                (By::Lineage, _) => format!("{} lineage(s) with events", plan.units),
            }
        ));
    }
    let mut out = BTreeMap::new();
    for ((name, sink), r) in plan.names.into_iter().zip(sinks).zip(plan.reports) {
        report.parts.insert(name.clone(), r);
        out.insert(name, sink);
    }
    Ok((out, report))
}

#[cfg(test)]
mod tests;
