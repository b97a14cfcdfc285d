//! Rewriting a trace for the cluster it is replayed against (`cnsreplay trace rewrite`, also
//! `scale` and `map`): an imported trace names storage classes, snapshot classes, nodes and
//! tenants (namespaces) of the cluster it was recorded on, and runs at that cluster's pace.
//!
//! Event by event, streaming: times divided by a speed factor (`at / k`, order kept; observed
//! latencies are the recorded system's and stay), and names replaced by `KIND:FROM=TO` maps
//! wherever that kind of name appears (header defaults, declared volumes and declared
//! workloads included).
//! Nothing else changes, so a rewrite with no factor and no map is a lossless copy.

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

/// What to change.
#[derive(Debug, Clone, Default)]
pub struct Rewrite {
    /// Speed factor: event times are divided by it (`None`: unchanged).
    pub speed: Option<f64>,
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
            h.provenance
                .parameters
                .insert("speed".to_owned(), format!("times divided by {k}"));
        }
    }

    /// Rewrites one event; with a speed factor so small that its time overflows, the event
    /// is left as it was and the problem returned.
    pub fn event(&self, e: &mut Event, report: &mut RewriteReport) -> Result<(), Problem> {
        if let Some(k) = self.speed {
            let t = crate::units::scaled_time(e.at, k)
                .ok_or(Problem::TimeOverflow { at: e.at, speed: k })?;
            e.at = t.round() as u64;
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
        let p = rw
            .event(&mut e, &mut report)
            .expect_err("3 s / 1e-12 overflows");
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
}
