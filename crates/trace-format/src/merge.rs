//! Merging traces onto one clock (`cnsreplay trace merge`): two partners' traces replayed
//! together, or one workload's trace beside another's, against one cluster.
//!
//! What must not change is what each event means. So each input's own objects (volumes,
//! workloads, snapshots) get the input's prefix, and two traces that both name `pvc-1` stay
//! two volumes; names of the cluster (storage and snapshot classes, nodes, tenants) are shared,
//! since both traces are replayed against the same cluster (`trace rewrite --map` renames
//! those first where needed). Header defaults every input agrees on are kept; one an input set
//! differently is written into each of its events that relied on it (and into its declared
//! volumes and workloads), and left out of the merged header. Times are each input's `at` plus its offset
//! (by default 0: the traces start together; aligned by their header origins on request).
//! Ids are renumbered from 1 in merged order (equal times: input order, then each input's
//! own order). The merge reads every input once, event by event. Inputs with the same
//! prefix are refused before anything is written, and every merged event goes through the
//! semantic checker (as `validate`) before it is written: a merge that would write an invalid
//! trace stops at the first problem, naming the input and its event.

use std::collections::BTreeMap;

use crate::Error;
use crate::check::Checker;
use crate::model::{Defaults, Event, Header, Op, VolumeDecl, VolumeSource};
use crate::units::Name;

/// How the inputs' clocks are put on one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Every input starts at 0.
    Start,
    /// By the inputs' header `origin`s (each must have one): the earliest starts at 0.
    Origin,
}

/// What a merge did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MergeReport {
    /// Events written.
    pub events: u64,
    /// Per input, in the order given: its prefix, offset (ns) and events.
    pub inputs: Vec<MergedInput>,
    /// Header defaults the inputs disagreed on, written into the events (and declared
    /// volumes) that relied on them: field → how many.
    pub materialized: BTreeMap<String, u64>,
}

/// One input of a merge.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MergedInput {
    /// The input, as named.
    pub source: String,
    /// Prefix of its volumes, workloads and snapshots.
    pub prefix: String,
    /// Added to its times, ns.
    pub offset: u64,
    /// Its events.
    pub events: u64,
}

/// The merged header and what each input must fill in, or the reason the inputs cannot be
/// merged.
fn merged_header(
    headers: &[Header],
    sources: &[String],
    prefixes: &[String],
    offsets: &[u64],
    align: Align,
    materialized: &mut BTreeMap<String, u64>,
) -> Result<(Header, Vec<Defaults>), String> {
    // Per input: the defaults to write into its events (the fields the merged header leaves
    // out that it set).
    let mut h = Header::default();
    let mut fills = vec![Defaults::default(); headers.len()];
    macro_rules! agree {
        ($f:ident) => {{
            let first = &headers[0].defaults.$f;
            if headers.iter().all(|x| &x.defaults.$f == first) {
                h.defaults.$f = first.clone();
            } else {
                for (fill, x) in fills.iter_mut().zip(headers) {
                    fill.$f = x.defaults.$f.clone();
                }
            }
        }};
    }
    agree!(storage_class);
    agree!(snapshot_class);
    agree!(group_snapshot_class);
    agree!(volume_size);
    agree!(access_mode);
    agree!(volume_mode);
    agree!(namespace);
    h.origin = match align {
        Align::Origin => headers.iter().filter_map(|x| x.origin).min(),
        Align::Start => {
            let first = headers[0].origin;
            headers
                .iter()
                .all(|x| x.origin == first)
                .then_some(first)
                .flatten()
        }
    };
    for (i, x) in headers.iter().enumerate() {
        for v in &x.volumes {
            let mut v = v.clone();
            v.name = prefixed(&prefixes[i], &v.name);
            fill_decl(&mut v, &fills[i], materialized);
            h.volumes.push(v);
        }
        for w in &x.workloads {
            let mut w = w.clone();
            w.name = prefixed(&prefixes[i], &w.name);
            w.volumes = w
                .volumes
                .iter()
                .map(|v| prefixed(&prefixes[i], v))
                .collect();
            filled(
                &mut w.tenant,
                &fills[i].namespace,
                "namespace",
                materialized,
            );
            h.workloads.push(w);
        }
    }
    // Attributes classes are cluster-wide, like storage classes: not prefixed; inputs that
    // declare one name with different parameters cannot be merged.
    for (i, x) in headers.iter().enumerate() {
        for (name, params) in &x.attributes_classes {
            match h.attributes_classes.get(name) {
                Some(p) if p != params => {
                    return Err(format!(
                        "{} declares attributes class {:?} with other parameters than an \
                         earlier input: the classes are cluster-wide, so they must agree",
                        sources[i],
                        name.as_str()
                    ));
                }
                Some(_) => {}
                None => {
                    h.attributes_classes.insert(name.clone(), params.clone());
                }
            }
        }
    }
    fn clash<'a>(kind: &str, names: impl Iterator<Item = &'a Name>) -> Result<(), String> {
        let mut seen = std::collections::HashSet::new();
        for n in names {
            if !seen.insert(n) {
                return Err(format!(
                    "two inputs declare {kind} {:?} after their prefixes: give prefixes that \
                     keep them apart",
                    n.as_str()
                ));
            }
        }
        Ok(())
    }
    clash("volume", h.volumes.iter().map(|v| &v.name))?;
    clash("workload", h.workloads.iter().map(|w| &w.name))?;
    let parts: Vec<String> = sources
        .iter()
        .zip(prefixes)
        .zip(offsets)
        .map(|((s, p), o)| format!("{s} (prefix {p:?}, +{o} ns)"))
        .collect();
    h.provenance.parameters.insert(
        "merge".to_owned(),
        format!(
            "{}; ids renumbered in merged order; aligned by {}",
            parts.join(", "),
            match align {
                Align::Start => "start",
                Align::Origin => "origin",
            }
        ),
    );
    Ok((h, fills))
}

/// Offsets of the inputs (ns) for `align`.
fn offsets(headers: &[Header], sources: &[String], align: Align) -> Result<Vec<u64>, String> {
    match align {
        Align::Start => Ok(vec![0; headers.len()]),
        Align::Origin => {
            let origins: Vec<jiff::Timestamp> = headers
                .iter()
                .zip(sources)
                .map(|(h, s)| {
                    h.origin.ok_or_else(|| {
                        format!("{s}: its header has no origin to align by (align by start)")
                    })
                })
                .collect::<Result<_, _>>()?;
            let min = origins.iter().min().copied().ok_or("no inputs")?;
            origins
                .iter()
                .map(|o| {
                    u64::try_from(o.duration_since(min).as_nanos())
                        .map_err(|_| format!("origin {o} is too far from {min}"))
                })
                .collect()
        }
    }
}

fn prefixed(prefix: &str, n: &Name) -> Name {
    Name::from(format!("{prefix}{}", n.as_str()))
}

fn fill_decl(v: &mut VolumeDecl, d: &Defaults, n: &mut BTreeMap<String, u64>) {
    filled(&mut v.size, &d.volume_size, "volume_size", n);
    filled(&mut v.storage_class, &d.storage_class, "storage_class", n);
    filled(&mut v.access_mode, &d.access_mode, "access_mode", n);
    filled(&mut v.volume_mode, &d.volume_mode, "volume_mode", n);
}

/// Counts a default written into an event.
fn filled<T: Clone>(
    slot: &mut Option<T>,
    d: &Option<T>,
    field: &str,
    n: &mut BTreeMap<String, u64>,
) {
    if slot.is_none()
        && let Some(v) = d
    {
        *slot = Some(v.clone());
        *n.entry(field.to_owned()).or_default() += 1;
    }
}

/// Renames an event's objects with `prefix` and writes in the defaults of `fill`.
fn adapt(ev: &mut Event, prefix: &str, fill: &Defaults, n: &mut BTreeMap<String, u64>) {
    let p = |x: &mut Name| *x = prefixed(prefix, x);
    filled(&mut ev.tenant, &fill.namespace, "namespace", n);
    match &mut ev.op {
        Op::CreateVolume(c) => {
            p(&mut c.volume);
            match &mut c.source {
                Some(VolumeSource::Snapshot(s) | VolumeSource::Volume(s)) => p(s),
                Some(VolumeSource::GroupMember(m)) => {
                    p(&mut m.group);
                    p(&mut m.volume);
                }
                None => {}
            }
            filled(&mut c.size, &fill.volume_size, "volume_size", n);
            filled(
                &mut c.storage_class,
                &fill.storage_class,
                "storage_class",
                n,
            );
            filled(&mut c.access_mode, &fill.access_mode, "access_mode", n);
            filled(&mut c.volume_mode, &fill.volume_mode, "volume_mode", n);
        }
        Op::DeleteVolume(v) => p(&mut v.volume),
        Op::Attach(a) => {
            p(&mut a.workload);
            a.volumes.iter_mut().for_each(p);
        }
        Op::Detach(w) | Op::AbortWorkload(w) => p(&mut w.workload),
        Op::Snapshot(s) => {
            p(&mut s.volume);
            p(&mut s.snapshot);
            filled(&mut s.class, &fill.snapshot_class, "snapshot_class", n);
        }
        Op::DeleteSnapshot(s) => p(&mut s.snapshot),
        Op::SnapshotAllocated(s) => p(&mut s.snapshot),
        Op::SnapshotDelta(s) => {
            p(&mut s.base);
            p(&mut s.snapshot);
        }
        Op::Resize(r) => p(&mut r.volume),
        Op::ModifyVolume(m) => p(&mut m.volume),
        Op::GroupSnapshot(g) => {
            p(&mut g.group);
            g.volumes.iter_mut().for_each(p);
            filled(
                &mut g.class,
                &fill.group_snapshot_class,
                "group_snapshot_class",
                n,
            );
        }
        Op::DeleteGroupSnapshot(g) => p(&mut g.group),
        Op::Reschedule(r) => p(&mut r.workload),
        Op::Io(io) => p(&mut io.volume),
        Op::IoPhase(ph) => {
            p(&mut ph.workload);
            p(&mut ph.volume);
            if let Some(o) = &mut ph.ordered {
                p(&mut o.log);
                for w in &mut o.with {
                    p(w);
                }
            }
        }
        Op::CordonNode(_) | Op::DrainNode(_) | Op::ForceDetach(_) | Op::Marker(_) => {}
    }
}

/// The inputs of a merge: name, header, events, prefix.
pub struct Input<I> {
    /// How messages name it.
    pub source: String,
    /// Its header.
    pub header: Header,
    /// Its events, in time order.
    pub events: I,
    /// Prefix of its objects.
    pub prefix: String,
}

/// Merges `inputs` (at least one): calls `start` with the merged header, then `write` with
/// every event in merged order.
pub fn merge<S, I>(
    inputs: Vec<Input<I>>,
    align: Align,
    start: impl FnOnce(&Header) -> Result<S, Error>,
    mut write: impl FnMut(&mut S, &Event) -> Result<(), Error>,
) -> Result<(S, MergeReport), Error>
where
    I: Iterator<Item = Result<Event, Error>>,
{
    let bad = |reason: String| Error::Merge { reason };
    if inputs.is_empty() {
        return Err(bad("nothing to merge".to_owned()));
    }
    let sources: Vec<String> = inputs.iter().map(|i| i.source.clone()).collect();
    let prefixes: Vec<String> = inputs.iter().map(|i| i.prefix.clone()).collect();
    for (j, p) in prefixes.iter().enumerate() {
        if let Some(i) = prefixes[..j].iter().position(|q| q == p) {
            return Err(bad(format!(
                "{} and {} have the same prefix {p:?}: their volumes, workloads and snapshots \
                 would be taken for one another; give each input its own prefix",
                sources[i], sources[j]
            )));
        }
    }
    let headers: Vec<Header> = inputs.iter().map(|i| i.header.clone()).collect();
    let offs = offsets(&headers, &sources, align).map_err(bad)?;
    let mut materialized = BTreeMap::new();
    let (header, fills) = merged_header(
        &headers,
        &sources,
        &prefixes,
        &offs,
        align,
        &mut materialized,
    )
    .map_err(bad)?;
    let mut report = MergeReport {
        materialized,
        inputs: sources
            .iter()
            .zip(&prefixes)
            .zip(&offs)
            .map(|((s, p), o)| MergedInput {
                source: s.clone(),
                prefix: p.clone(),
                offset: *o,
                events: 0,
            })
            .collect(),
        ..MergeReport::default()
    };
    // What is written must replay: the semantic checker sees every merged event before it
    // is written (prefixes that still collide, e.g. `a` + `b-1` and `ab-` + `1`, or an input
    // that is invalid itself), and the first problem stops the merge.
    let (mut checker, header_findings) = Checker::new(&header);
    if let Some(f) = header_findings.first() {
        return Err(bad(format!(
            "the merged header would be invalid: {}: {}",
            f.path, f.problem
        )));
    }
    let mut findings = Vec::new();
    let mut sink = start(&header)?;
    let mut streams: Vec<std::iter::Peekable<I>> =
        inputs.into_iter().map(|i| i.events.peekable()).collect();
    let mut next_id = 1u64;
    loop {
        // The input whose next event is earliest (equal times: the first input); an error
        // is due at once.
        let mut best: Option<(usize, u64)> = None;
        for (i, s) in streams.iter_mut().enumerate() {
            match s.peek() {
                None => {}
                Some(Err(_)) => {
                    best = Some((i, 0));
                    break;
                }
                Some(Ok(e)) => {
                    let at = e.at.checked_add(offs[i]).ok_or_else(|| {
                        bad(format!(
                            "{}: event {} at {} ns overflows with the offset {} ns",
                            sources[i], e.id, e.at, offs[i]
                        ))
                    })?;
                    if best.is_none_or(|(_, b)| at < b) {
                        best = Some((i, at));
                    }
                }
            }
        }
        let Some((i, at)) = best else { break };
        let Some(ev) = streams[i].next() else { break };
        let mut ev = ev?;
        let own_id = ev.id;
        ev.at = at;
        ev.id = next_id;
        next_id += 1;
        adapt(&mut ev, &prefixes[i], &fills[i], &mut report.materialized);
        checker.check(&ev, report.events, &mut findings);
        if let Some(f) = findings.first() {
            return Err(bad(format!(
                "the merged trace would be invalid at event id {} (event id {own_id} of {}, \
                 prefix {:?}): {}: {}",
                ev.id, sources[i], prefixes[i], f.path, f.problem
            )));
        }
        write(&mut sink, &ev)?;
        report.inputs[i].events += 1;
        report.events += 1;
    }
    Ok((sink, report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Checker;
    use crate::io::{Encoding, Trace};

    const A: &str = "format: cnsreplay-trace
version: 1
origin: 2026-01-01T00:00:00Z
defaults: {storage_class: gold, volume_size: 1Gi}
volumes: [{name: pre}]
events:
  - {at: 0s, create_volume: {volume: v1}}
  - {at: 2s, attach: {workload: w, volumes: [v1, pre], node: n1}}
  - {at: 4s, snapshot: {volume: v1, snapshot: s}}
";
    const B: &str = "format: cnsreplay-trace
version: 1
origin: 2026-01-01T00:00:01Z
defaults: {storage_class: silver, volume_size: 1Gi}
events:
  - {at: 0s, tenant: db, create_volume: {volume: v1}}
  - {at: 500ms, snapshot: {volume: v1, snapshot: s0}}
  - {at: 1s, create_volume: {volume: r, source: {snapshot: s0}}}
  - {at: 3s, attach: {workload: w, volumes: [v1]}}
";

    fn run(align: Align) -> (Header, Vec<Event>, MergeReport) {
        let inputs: Vec<_> = [("a.yaml", A, "a-"), ("b.yaml", B, "b-")]
            .into_iter()
            .map(|(s, text, p)| {
                let t = Trace::from_bytes(text.as_bytes(), Some(Encoding::Yaml)).expect("trace");
                Input {
                    source: s.to_owned(),
                    header: t.header,
                    events: t.events.into_iter().map(Ok),
                    prefix: p.to_owned(),
                }
            })
            .collect();
        let ((h, evs), r) = merge(
            inputs,
            align,
            |h| Ok((h.clone(), Vec::new())),
            |s: &mut (Header, Vec<Event>), e| {
                s.1.push(e.clone());
                Ok(())
            },
        )
        .expect("merge");
        (h, evs, r)
    }

    #[test]
    fn an_ordered_phase_gets_the_prefix_on_its_log_and_every_volume() {
        let mut ev: Event = serde_json::from_str(
            r#"{"at":0,"id":1,"io_phase":{"workload":"w","volume":"a","pattern":"random","read_pct":0,"block_size":4096,"load":{"depth":1},"duration":1,"ordered":{"log":"l","with":["b","c"]}}}"#,
        )
        .expect("event");
        adapt(&mut ev, "p-", &Defaults::default(), &mut BTreeMap::new());
        let Op::IoPhase(ph) = &ev.op else {
            panic!("not an io_phase: {ev:?}");
        };
        assert_eq!(
            ph.volumes().map(Name::as_str).collect::<Vec<_>>(),
            ["p-a", "p-b", "p-c"]
        );
        assert_eq!(ph.ordered.as_ref().map(|o| o.log.as_str()), Some("p-l"));
    }

    #[test]
    fn names_stay_apart_defaults_keep_their_meaning_and_times_interleave() {
        let (h, evs, r) = run(Align::Start);
        // Agreed: kept; disagreed: written into the events and declared volumes.
        assert_eq!(h.defaults.volume_size, Some(1 << 30));
        assert_eq!(h.defaults.storage_class, None);
        assert_eq!(h.volumes[0].name.as_str(), "a-pre");
        assert_eq!(h.volumes[0].storage_class.as_deref(), Some("gold"));
        let got: Vec<String> = evs
            .iter()
            .map(|e| serde_json::to_string(e).expect("json"))
            .collect();
        let s = 1_000_000_000u64;
        assert_eq!(
            got,
            [
                r#"{"at":0,"id":1,"create_volume":{"volume":"a-v1","storage_class":"gold"}}"#
                    .to_owned(),
                r#"{"at":0,"id":2,"tenant":"db","create_volume":{"volume":"b-v1","storage_class":"silver"}}"#
                    .to_owned(),
                format!(
                    r#"{{"at":{},"id":3,"snapshot":{{"volume":"b-v1","snapshot":"b-s0"}}}}"#,
                    s / 2
                ),
                format!(
                    r#"{{"at":{s},"id":4,"create_volume":{{"volume":"b-r","storage_class":"silver","source":{{"snapshot":"b-s0"}}}}}}"#
                ),
                format!(
                    r#"{{"at":{},"id":5,"attach":{{"workload":"a-w","volumes":["a-v1","a-pre"],"node":"n1"}}}}"#,
                    2 * s
                ),
                format!(
                    r#"{{"at":{},"id":6,"attach":{{"workload":"b-w","volumes":["b-v1"]}}}}"#,
                    3 * s
                ),
                format!(
                    r#"{{"at":{},"id":7,"snapshot":{{"volume":"a-v1","snapshot":"a-s"}}}}"#,
                    4 * s
                ),
            ]
        );
        assert_eq!(
            evs[1].tenant.as_deref(),
            Some("db"),
            "tenants are shared names"
        );
        assert_eq!(r.materialized["storage_class"], 4);
        assert_eq!(
            r.inputs.iter().map(|i| i.events).collect::<Vec<_>>(),
            [3, 4]
        );
        assert_eq!(h.origin, None, "the inputs' origins differ");
        // Aligned by origin: b starts 1 s after a.
        let (h, evs, r) = run(Align::Origin);
        assert_eq!(r.inputs[1].offset, 1_000_000_000);
        assert_eq!(
            h.origin.map(|o| o.to_string()).as_deref(),
            Some("2026-01-01T00:00:00Z")
        );
        let b_attach = evs
            .iter()
            .find(|e| matches!(&e.op, Op::Attach(a) if a.workload.as_str() == "b-w"))
            .expect("b's attach");
        assert_eq!(b_attach.at, 4_000_000_000);
    }

    fn inputs(
        parts: &[(&str, &str, &str)],
    ) -> Vec<Input<impl Iterator<Item = Result<Event, Error>>>> {
        parts
            .iter()
            .map(|(source, text, prefix)| {
                let t = Trace::from_bytes(text.as_bytes(), Some(Encoding::Yaml)).expect("trace");
                Input {
                    source: (*source).to_owned(),
                    header: t.header,
                    events: t.events.into_iter().map(Ok),
                    prefix: (*prefix).to_owned(),
                }
            })
            .collect()
    }

    /// Runs a merge that must be refused before anything is written; returns its message.
    fn refused(parts: &[(&str, &str, &str)]) -> String {
        let mut written = 0;
        let err = merge(
            inputs(parts),
            Align::Start,
            |_| Ok(()),
            |(), _| {
                written += 1;
                Ok(())
            },
        )
        .map(|_| ())
        .expect_err("refused");
        err.to_string() + &format!(" [{written} written]")
    }

    #[test]
    fn a_merge_of_valid_traces_is_valid_and_clashing_prefixes_are_refused() {
        let (h, evs, _) = run(Align::Start);
        let findings = Checker::findings_of(&h, &evs);
        assert!(findings.is_empty(), "{findings:?}");
        // The same prefix twice: refused before the header is written.
        let err = refused(&[("a0.yaml", A, "p-"), ("a1.yaml", A, "p-")]);
        assert!(
            err.contains("a0.yaml and a1.yaml have the same prefix \"p-\"")
                && err.ends_with("[0 written]"),
            "{err}"
        );
        // Different prefixes that still meet: declared names, in the header...
        const PRE: &str =
            "format: cnsreplay-trace\nversion: 1\nvolumes: [{name: y-pre, size: 1Gi}]\n";
        const PRE2: &str =
            "format: cnsreplay-trace\nversion: 1\nvolumes: [{name: pre, size: 1Gi}]\n";
        let err = refused(&[("x.yaml", PRE, "x"), ("xy.yaml", PRE2, "xy-")]);
        assert!(
            err.contains("two inputs declare volume \"xy-pre\""),
            "{err}"
        );
        // ...and names made by events: the checker stops the merge at the event.
        const MADE: &str = "format: cnsreplay-trace\nversion: 1\nevents:\n  - {at: 0s, create_volume: {volume: y-v, size: 1Gi}}\n";
        const MADE2: &str = "format: cnsreplay-trace\nversion: 1\nevents:\n  - {at: 1s, create_volume: {volume: v, size: 1Gi}}\n";
        let err = refused(&[("x.yaml", MADE, "x"), ("xy.yaml", MADE2, "xy-")]);
        assert!(
            err.contains(
                "the merged trace would be invalid at event id 2 (event id 0 of xy.yaml, prefix \"xy-\")"
            ) && err.contains("xy-v"),
            "{err}"
        );
        assert!(err.ends_with("[1 written]"), "{err}");
    }

    #[test]
    fn declared_workloads_get_the_prefix_and_their_tenant() {
        const W: &str = "format: cnsreplay-trace
version: 1
defaults: {namespace: ns1}
volumes: [{name: pre}]
workloads: [{name: run, volumes: [pre], node: n1}]
events:
  - {at: 1s, detach: {workload: run}}
";
        let t = Trace::from_bytes(W.as_bytes(), Some(Encoding::Yaml)).expect("trace");
        let mut other = t.header.clone();
        other.defaults.namespace = Some("ns2".into());
        let inputs: Vec<_> = [("x-", t.header.clone()), ("y-", other)]
            .into_iter()
            .map(|(p, header)| Input {
                source: p.to_owned(),
                header,
                events: t.events.clone().into_iter().map(Ok),
                prefix: p.to_owned(),
            })
            .collect();
        let ((h, evs), _) = merge(
            inputs,
            Align::Start,
            |h| Ok((h.clone(), Vec::new())),
            |s: &mut (Header, Vec<Event>), e| {
                s.1.push(e.clone());
                Ok(())
            },
        )
        .expect("merge");
        let got: Vec<_> = h
            .workloads
            .iter()
            .map(|w| {
                (
                    w.name.as_str(),
                    w.volumes[0].as_str(),
                    w.node.as_deref(),
                    w.tenant.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("x-run", "x-pre", Some("n1"), Some("ns1")),
                ("y-run", "y-pre", Some("n1"), Some("ns2")),
            ]
        );
        let findings = Checker::findings_of(&h, &evs);
        assert!(findings.is_empty(), "{findings:?}");
    }
}
