//! What a trace uses, scanned once before the run ([`TraceUses`]): the classes, nodes and
//! namespaces pre-flight checks, the op types access checks, the images the pull check starts.

use std::collections::BTreeMap;
use std::path::Path;

use trace_format::{Op, TraceReader};

use crate::config::KubeConfig;
use crate::preflight::capability::{self, Capability, Need, NeedUses};

/// What a trace will use of the cluster, each with where it is first used.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TraceUses {
    /// StorageClass (None: the cluster default) → first use.
    pub storage_classes: BTreeMap<Option<String>, String>,
    /// VolumeSnapshotClass (None: the default) → first use.
    pub snapshot_classes: BTreeMap<Option<String>, String>,
    /// Node → (first use, whether pods are placed there so it must be schedulable).
    pub nodes: BTreeMap<String, (String, bool)>,
    /// What the trace's operations need of their volumes' StorageClasses → where.
    pub needs: BTreeMap<Need, NeedUses>,
    /// The op types the trace has (what its credentials must allow: [`crate::access`]).
    pub ops: std::collections::BTreeSet<trace_format::OpType>,
    /// The VolumeAttributesClasses the trace's header declares (Kubernetes names): those the
    /// cluster lacks are created by the run (what its credentials must allow).
    pub attributes_classes: std::collections::BTreeSet<String>,
    /// The trace's header declares workloads (pods that run before the clock starts).
    pub header_workloads: bool,
    /// Some of the run's pods are not pinned to a node (an attach without a node and no
    /// `--node`, a stream's pod): the scheduler places them.
    pub unpinned: bool,
}

impl TraceUses {
    /// Reads the trace once and resolves its classes and nodes with `config`.
    pub fn scan(config: &KubeConfig, trace: &Path) -> Result<Self, String> {
        let r = TraceReader::open(trace).map_err(|e| format!("{}: {e}", trace.display()))?;
        let d = r.header().defaults.clone();
        let mut u = Self::default();
        let t = trace.display();
        if let Some(n) = &config.node {
            u.nodes.insert(n.clone(), ("--node".to_owned(), true));
        }
        // Volume → its StorageClass (None: the cluster default), as the trace's header or a
        // create_volume makes it; a volume the trace does not make is not checked.
        let mut class_of: BTreeMap<String, Option<String>> = BTreeMap::new();
        u.attributes_classes = r
            .header()
            .attributes_classes
            .keys()
            .map(|n| crate::kube::objects::k8s_name(n))
            .collect();
        for v in &r.header().volumes {
            let at = format!("{t}: header volume {}", v.name);
            let (src, name) = origin(&at, v.storage_class.as_ref(), d.storage_class.as_ref());
            let class = config.storage_class_for(name.as_deref());
            u.storage_classes.entry(class.clone()).or_insert(src);
            class_of.insert(v.name.to_string(), class);
        }
        let free = config.node.is_none();
        u.header_workloads = !r.header().workloads.is_empty();
        u.unpinned = free && r.header().workloads.iter().any(|w| w.node.is_none());
        for w in &r.header().workloads {
            if let Some(n) = &w.node {
                let at = format!("{t}: header workload {}", w.name);
                u.nodes.entry(n.to_string()).or_insert((at, true));
            }
        }
        for ev in r.events() {
            let ev = ev.map_err(|e| format!("{t}: {e}"))?;
            let at = format!("{t}: event {} (at {})", ev.id, fmt_at(ev.at));
            u.ops.insert(ev.op.op_type());
            match &ev.op {
                Op::CreateVolume(c) => {
                    let (src, name) =
                        origin(&at, c.storage_class.as_ref(), d.storage_class.as_ref());
                    let class = config.storage_class_for(name.as_deref());
                    u.storage_classes.entry(class.clone()).or_insert(src);
                    class_of.insert(c.volume.to_string(), class);
                    // A clone is made by the new volume's class (Kubernetes clones within one).
                    if let Some(trace_format::VolumeSource::Volume(_)) = &c.source {
                        u.need(&class_of, Capability::Clone, &c.volume, None, &at, ev.id);
                    }
                }
                Op::Snapshot(s) => {
                    let (src, name) = origin(&at, s.class.as_ref(), d.snapshot_class.as_ref());
                    let class = config.snapshot_class_for(name.as_deref());
                    u.snapshot_classes.entry(class.clone()).or_insert(src);
                    u.need(
                        &class_of,
                        Capability::Snapshot,
                        &s.volume,
                        class,
                        &at,
                        ev.id,
                    );
                }
                Op::Resize(r) => {
                    u.need(&class_of, Capability::Expand, &r.volume, None, &at, ev.id);
                }
                Op::ModifyVolume(m) => {
                    u.need(&class_of, Capability::Modify, &m.volume, None, &at, ev.id);
                }
                Op::GroupSnapshot(g) => {
                    for v in &g.volumes {
                        u.need(&class_of, Capability::GroupSnapshot, v, None, &at, ev.id);
                    }
                }
                Op::Attach(a) => {
                    if let Some(n) = &a.node {
                        u.nodes.entry(n.to_string()).or_insert((at, true));
                    } else {
                        u.unpinned |= free;
                    }
                }
                Op::Io(_) => u.unpinned |= free,
                Op::Reschedule(r) => {
                    if let Some(n) = &r.node {
                        u.nodes.entry(n.to_string()).or_insert((at, true));
                    }
                }
                Op::CordonNode(n) | Op::DrainNode(n) => {
                    u.nodes.entry(n.node.to_string()).or_insert((at, false));
                }
                _ => {}
            }
        }
        Ok(u)
    }
}

impl TraceUses {
    /// The pieces of `deploy/rbac/` a run of this trace with `config` needs: those granting
    /// what pre-flight asks the API server for ([`crate::access`]), the header's attributes
    /// classes counted as created (the run creates those the cluster lacks).
    pub fn pieces(
        &self,
        config: &KubeConfig,
    ) -> std::collections::BTreeSet<crate::preflight::access::Piece> {
        crate::preflight::access::pieces(
            &self.ops,
            config.namespace.is_none(),
            &self.attributes_classes,
            config.apiserver_metrics,
        )
    }

    /// Records that event `id` needs `cap` of `volume`'s class (when the trace created it).
    fn need(
        &mut self,
        class_of: &BTreeMap<String, Option<String>>,
        cap: Capability,
        volume: &str,
        snapshot_class: Option<String>,
        at: &str,
        id: u64,
    ) {
        if let Some(class) = class_of.get(volume) {
            let n = Need {
                capability: cap,
                storage_class: class.clone(),
                snapshot_class,
            };
            capability::add(&mut self.needs, n, id, at);
        }
    }
}

fn fmt_at(ns: u64) -> String {
    format!("{:.3}s", ns as f64 / 1e9)
}

fn origin(
    at: &str,
    event: Option<&trace_format::Name>,
    header: Option<&trace_format::Name>,
) -> (String, Option<String>) {
    match (event, header) {
        (Some(c), _) => (at.to_owned(), Some(c.to_string())),
        (None, Some(h)) => (
            format!("{at}, from the trace header's defaults"),
            Some(h.to_string()),
        ),
        (None, None) => (at.to_owned(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_keys_each_need_by_its_volumes_class_with_every_event() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.yaml");
        std::fs::write(
            &path,
            "format: cnsreplay-trace\nversion: 1\ndefaults: {storage_class: fast}\n\
             volumes: [{name: pre, storage_class: slow}]\nevents:\n  \
             - {at: 0s, create_volume: {volume: a}}\n  \
             - {at: 0s, create_volume: {volume: b, storage_class: slow}}\n  \
             - {at: 1s, resize: {volume: a, size: 2Gi}}\n  \
             - {at: 2s, resize: {volume: a, size: 3Gi}}\n  \
             - {at: 2s, resize: {volume: b, size: 3Gi}}\n  \
             - {at: 3s, snapshot: {volume: b, snapshot: s}}\n  \
             - {at: 3s, resize: {volume: pre, size: 3Gi}}\n",
        )
        .unwrap();
        let cfg = KubeConfig {
            storage_class_map: [("slow".to_owned(), "hdd".to_owned())].into(),
            ..KubeConfig::default()
        };
        let u = TraceUses::scan(&cfg, &path).unwrap();
        let need = |c: Capability, class: &str| Need {
            capability: c,
            storage_class: Some(class.to_owned()),
            snapshot_class: None,
        };
        assert_eq!(u.needs.len(), 3, "{:?}", u.needs);
        let fast = &u.needs[&need(Capability::Expand, "fast")];
        assert_eq!(fast.events, [2, 3]);
        assert!(
            fast.first.ends_with("event 2 (at 1.000s)"),
            "{}",
            fast.first
        );
        assert_eq!(fast.describe().matches("and 1 more event(s)").count(), 1);
        // The class after --map-storage-class, a header volume's too.
        assert_eq!(u.needs[&need(Capability::Expand, "hdd")].events, [4, 6]);
        assert_eq!(u.needs[&need(Capability::Snapshot, "hdd")].events, [5]);
    }
}
