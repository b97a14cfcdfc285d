//! Rewriting a trace for the cluster it is replayed against (`cnsreplay trace rewrite`, also
//! `scale` and `map`): an imported trace names storage classes, snapshot classes, nodes and
//! tenants (namespaces) of the cluster it was recorded on, and runs at that cluster's pace.
//!
//! Event by event, streaming: the trace compressed by a speed factor ([`compress`]), and names
//! replaced by `KIND:FROM=TO` maps wherever that kind of name appears (header defaults,
//! declared volumes and declared workloads included).
//! Nothing else changes, so a rewrite with no factor and no map is a lossless copy.
//!
//! [`compress`] is the one meaning of a speed factor, shared with `run --speed` (the replay's
//! reader applies it to each event before planning it): every instant *and every duration the
//! trace schedules* is divided by the factor — an event's `at`, and an `io_phase`'s
//! `duration` (as the difference of its scaled end and scaled start, so a phase still ends
//! exactly where the trace's later events expect it). Compressing instants alone would make
//! a 10 s phase outlast the detach the trace placed after it, and that wait would be charged
//! to the detach. What a rate does is a choice ([`IoRate`]): by default an `io_phase`'s
//! open-loop rate is kept (a workload's I/O intensity is the workload's; the churn around it
//! speeds up), `IoRate::Scale` multiplies it by the factor (the same requests in less time).
//! Bare `io` events are instants, so their rate always scales. Observed latencies are the
//! recorded system's and stay.

use std::collections::BTreeMap;

use crate::error::Problem;
use crate::model::{Event, Header, Op};
use crate::units::Name;

/// A kind of name a map replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MapKind {
    /// `storage-class`: header default, declared volumes, `create_volume`.
    StorageClass,
    /// `snapshot-class`: header default, `snapshot`.
    SnapshotClass,
    /// `node`: declared workloads, `attach`, `reschedule`, `cordon_node`, `drain_node`.
    Node,
    /// `tenant` (the namespace): every event's and declared workload's tenant.
    Tenant,
}

impl MapKind {
    /// Its name in `KIND:FROM=TO`.
    pub fn name(self) -> &'static str {
        match self {
            MapKind::StorageClass => "storage-class",
            MapKind::SnapshotClass => "snapshot-class",
            MapKind::Node => "node",
            MapKind::Tenant => "tenant",
        }
    }
}

/// What a speed factor does to an `io_phase`'s open-loop rate ([`compress`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoRate {
    /// The phase issues at the trace's rate for its compressed duration: per-workload I/O
    /// intensity stays, fewer requests in all.
    #[default]
    Keep,
    /// The rate is multiplied by the factor: the phase's requests in its compressed duration.
    Scale,
}

impl IoRate {
    /// Its name on the command line and in manifests.
    pub fn name(self) -> &'static str {
        match self {
            IoRate::Keep => "keep",
            IoRate::Scale => "scale",
        }
    }
}

/// Which field of an event a speed factor could not scale, with the problem.
#[derive(Debug, Clone, PartialEq)]
pub struct CompressError {
    /// The field below `events[N]`: `at` or `io_phase.duration`.
    pub field: &'static str,
    /// The overflow.
    pub problem: Problem,
}

/// Compresses `e` by `speed` (see the module docs): `at` and an `io_phase`'s `duration` are
/// divided by it, an `io_phase`'s open-loop rate multiplied by it under [`IoRate::Scale`].
/// When a time or a phase's end overflows a time offset, `e` is left as it was.
pub fn compress(e: &mut Event, speed: f64, io_rate: IoRate) -> Result<(), CompressError> {
    if speed == 1.0 {
        return Ok(());
    }
    let scaled = |t: u64, field| {
        crate::units::scaled_time(t, speed)
            .map(|t| t.round() as u64)
            .ok_or(CompressError {
                field,
                problem: Problem::TimeOverflow { at: t, speed },
            })
    };
    let at = scaled(e.at, "at")?;
    if let Op::IoPhase(p) = &mut e.op {
        let duration = match p.duration {
            Some(d) => {
                let end = scaled(e.at.saturating_add(d), "io_phase.duration")?;
                // A phase of a positive duration keeps one: 0 would mean "no duration bound".
                Some((end - at).max(u64::from(d > 0)))
            }
            None => None,
        };
        p.duration = duration;
        if io_rate == IoRate::Scale
            && let crate::model::Load::Rate(r) = &mut p.load
        {
            r.iops *= speed;
        }
    }
    e.at = at;
    Ok(())
}

/// What to change.
#[derive(Debug, Clone, Default)]
pub struct Rewrite {
    /// Speed factor: the trace is compressed by it ([`compress`]; `None`: unchanged).
    pub speed: Option<f64>,
    /// What the speed factor does to `io_phase` rates.
    pub io_rate: IoRate,
    /// Name maps per kind.
    pub maps: BTreeMap<MapKind, BTreeMap<Name, Name>>,
}

/// What a rewrite changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RewriteReport {
    /// Events written.
    pub events: u64,
    /// Names replaced, per `KIND:FROM=TO`.
    pub replaced: BTreeMap<String, u64>,
}

/// Parses `KIND:FROM=TO` (kinds: storage-class, snapshot-class, node, tenant).
pub fn parse_map(s: &str) -> Result<(MapKind, Name, Name), String> {
    let (kind, pair) = s
        .split_once(':')
        .ok_or_else(|| format!("{s:?}: expected KIND:FROM=TO"))?;
    let kind = match kind {
        "storage-class" => MapKind::StorageClass,
        "snapshot-class" => MapKind::SnapshotClass,
        "node" => MapKind::Node,
        "tenant" | "namespace" => MapKind::Tenant,
        k => {
            return Err(format!(
                "{s:?}: unknown kind {k:?} (storage-class, snapshot-class, node, tenant)"
            ));
        }
    };
    match pair.split_once('=') {
        Some((from, to)) if !from.is_empty() && !to.is_empty() => {
            Ok((kind, Name::from(from), Name::from(to)))
        }
        _ => Err(format!("{s:?}: expected KIND:FROM=TO with both names")),
    }
}

impl Rewrite {
    /// Checks the speed factor.
    pub fn check(&self) -> Result<(), String> {
        match self.speed {
            Some(k) if !(k.is_finite() && k > 0.0) => {
                Err(format!("the speed factor must be > 0, got {k}"))
            }
            _ => Ok(()),
        }
    }

    fn map(&self, kind: MapKind, n: &mut Name, report: &mut RewriteReport) {
        if let Some(to) = self.maps.get(&kind).and_then(|m| m.get(n)) {
            *report
                .replaced
                .entry(format!("{}:{n}={to}", kind.name()))
                .or_default() += 1;
            *n = to.clone();
        }
    }

    fn map_opt(&self, kind: MapKind, n: &mut Option<Name>, report: &mut RewriteReport) {
        if let Some(n) = n {
            self.map(kind, n, report);
        }
    }

    /// Rewrites the header (defaults, declared volumes and declared workloads).
    pub fn header(&self, h: &mut Header, report: &mut RewriteReport) {
        self.map_opt(MapKind::StorageClass, &mut h.defaults.storage_class, report);
        self.map_opt(
            MapKind::SnapshotClass,
            &mut h.defaults.snapshot_class,
            report,
        );
        for v in &mut h.volumes {
            self.map_opt(MapKind::StorageClass, &mut v.storage_class, report);
        }
        for w in &mut h.workloads {
            self.map_opt(MapKind::Node, &mut w.node, report);
            self.map_opt(MapKind::Tenant, &mut w.tenant, report);
        }
        if let Some(k) = self.speed {
            h.provenance.parameters.insert(
                "speed".to_owned(),
                format!(
                    "times and io_phase durations divided by {k}, io_phase rates {}",
                    match self.io_rate {
                        IoRate::Keep => "kept".to_owned(),
                        IoRate::Scale => format!("multiplied by {k}"),
                    }
                ),
            );
        }
    }

    /// Rewrites one event; with a speed factor so small that its time (or its phase's end)
    /// overflows, the event is left as it was and the problem returned.
    pub fn event(&self, e: &mut Event, report: &mut RewriteReport) -> Result<(), CompressError> {
        if let Some(k) = self.speed {
            compress(e, k, self.io_rate)?;
        }
        self.map_opt(MapKind::Tenant, &mut e.tenant, report);
        match &mut e.op {
            Op::CreateVolume(c) => {
                self.map_opt(MapKind::StorageClass, &mut c.storage_class, report);
            }
            Op::Snapshot(s) => self.map_opt(MapKind::SnapshotClass, &mut s.class, report),
            Op::Attach(a) => self.map_opt(MapKind::Node, &mut a.node, report),
            Op::Reschedule(r) => self.map_opt(MapKind::Node, &mut r.node, report),
            Op::CordonNode(n) | Op::DrainNode(n) => self.map(MapKind::Node, &mut n.node, report),
            _ => {}
        }
        report.events += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{Encoding, Trace};

    #[test]
    fn names_are_mapped_everywhere_and_times_scaled_in_order() {
        let t = Trace::from_bytes(
            b"format: cnsreplay-trace
version: 1
defaults: {storage_class: gold, snapshot_class: snap-a}
volumes: [{name: v0, storage_class: gold}]
workloads: [{name: w0, volumes: [v0], node: n1, tenant: db}]
events:
  - {at: 1s, tenant: db, create_volume: {volume: v1, storage_class: gold}}
  - {at: 3s, tenant: db, attach: {workload: w, volumes: [v1], node: n1}}
  - {at: 5s, snapshot: {volume: v1, snapshot: s, class: snap-a}}
  - {at: 7s, cordon_node: {node: n1}}
",
            Some(Encoding::Yaml),
        )
        .expect("trace");
        let mut rw = Rewrite {
            speed: Some(2.0),
            ..Rewrite::default()
        };
        for m in [
            "storage-class:gold=fast",
            "snapshot-class:snap-a=csi-snap",
            "node:n1=worker-7",
            "namespace:db=bench",
        ] {
            let (k, from, to) = parse_map(m).expect("map");
            rw.maps.entry(k).or_default().insert(from, to);
        }
        let mut report = RewriteReport::default();
        let mut h = t.header.clone();
        rw.header(&mut h, &mut report);
        let mut evs = t.events;
        for e in &mut evs {
            rw.event(e, &mut report).expect("fits");
        }
        assert_eq!(h.defaults.storage_class.as_deref(), Some("fast"));
        assert_eq!(h.defaults.snapshot_class.as_deref(), Some("csi-snap"));
        assert_eq!(h.volumes[0].storage_class.as_deref(), Some("fast"));
        assert_eq!(h.workloads[0].node.as_deref(), Some("worker-7"));
        assert_eq!(h.workloads[0].tenant.as_deref(), Some("bench"));
        let ats: Vec<u64> = evs.iter().map(|e| e.at).collect();
        assert_eq!(
            ats,
            [500_000_000, 1_500_000_000, 2_500_000_000, 3_500_000_000]
        );
        let text = serde_json::to_string(&evs).expect("json");
        for gone in ["gold", "snap-a", "n1", "\"db\""] {
            assert!(!text.contains(gone), "{gone} left in {text}");
        }
        assert_eq!(report.events, 4);
        assert_eq!(report.replaced["storage-class:gold=fast"], 3);
        assert_eq!(report.replaced["node:n1=worker-7"], 3);
        assert!(parse_map("color:a=b").is_err());
        assert!(parse_map("node:a=").is_err());
        assert!(
            Rewrite {
                speed: Some(0.0),
                ..Rewrite::default()
            }
            .check()
            .is_err()
        );
    }

    #[test]
    fn a_speed_that_overflows_a_time_is_refused_not_saturated() {
        let rw = Rewrite {
            speed: Some(1e-12),
            ..Rewrite::default()
        };
        let mut report = RewriteReport::default();
        let mut e = Event {
            at: 0,
            id: 1,
            tenant: None,
            observed: None,
            op: Op::CordonNode(crate::model::NodeRef { node: "n".into() }),
        };
        rw.event(&mut e, &mut report).expect("0 fits at any speed");
        e.at = 3_000_000_000;
        let CompressError { field, problem: p } = rw
            .event(&mut e, &mut report)
            .expect_err("3 s / 1e-12 overflows");
        assert_eq!(field, "at");
        assert_eq!(
            p,
            Problem::TimeOverflow {
                at: 3_000_000_000,
                speed: 1e-12
            }
        );
        assert_eq!(
            p.to_string(),
            "at=3s divided by speed 0.000000000001 is 3.000e12 s, beyond the largest time \
             offset (2^64 ns, about 584 years); this event needs a speed of at least 1.626e-10"
        );
        assert_eq!(e.at, 3_000_000_000, "left as it was");
        assert_eq!(report.events, 1);
        // The largest time still fits at speed 1, and just-too-small speeds are caught.
        assert_eq!(
            crate::units::scaled_time(u64::MAX, 1.0),
            Some(u64::MAX as f64)
        );
        assert!(crate::units::scaled_time(u64::MAX / 2 + 1, 0.5).is_none());
    }

    #[test]
    fn compress_divides_phase_durations_and_scales_rates_only_when_asked() {
        let t = Trace::from_bytes(
            b"format: cnsreplay-trace
version: 1
events:
  - {at: 0, id: 1, create_volume: {volume: v}}
  - {at: 0, id: 2, attach: {workload: w, volumes: [v]}}
  - {at: 1s, id: 3, io_phase: {workload: w, volume: v, pattern: random, read_pct: 0,
      block_size: 4Ki, load: {rate: {iops: 100}}, duration: 10s}}
  - {at: 3s, id: 4, io_phase: {workload: w, volume: v, pattern: random, read_pct: 0,
      block_size: 4Ki, load: {depth: 4}, bytes: 1Mi}}
",
            Some(Encoding::Yaml),
        )
        .expect("trace");
        let rate = |e: &Event| match &e.op {
            Op::IoPhase(p) => match &p.load {
                crate::model::Load::Rate(r) => Some(r.iops),
                crate::model::Load::Depth(_) => None,
            },
            _ => None,
        };
        let duration = |e: &Event| match &e.op {
            Op::IoPhase(p) => p.duration,
            _ => None,
        };
        for (io_rate, iops) in [(IoRate::Keep, 100.0), (IoRate::Scale, 300.0)] {
            let mut evs = t.events.clone();
            for e in &mut evs {
                compress(e, 3.0, io_rate).expect("fits");
            }
            // 1 s + 10 s ends at 11 s: at speed 3 it starts at 333 333 333 and ends at
            // 3 666 666 667 (rounded ends, so the phase ends where the trace's time does).
            assert_eq!(evs[2].at, 333_333_333);
            assert_eq!(duration(&evs[2]), Some(3_333_333_334));
            assert_eq!(rate(&evs[2]), Some(iops), "{io_rate:?}");
            // A byte-bounded closed-loop phase has nothing to compress but its start.
            assert_eq!(evs[3].at, 1_000_000_000);
            assert_eq!(evs[3].op, t.events[3].op);
        }
        // A phase whose end overflows names the duration, and the event stays as it was.
        let mut e = t.events[2].clone();
        e.at = 0;
        let err = compress(&mut e, 1e-12, IoRate::Keep).expect_err("10 s / 1e-12 overflows");
        assert_eq!(err.field, "io_phase.duration");
        assert_eq!(duration(&e), Some(10_000_000_000));
    }
}
