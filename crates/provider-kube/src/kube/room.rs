//! Waiting for room on a node: the attach-limit chain (`attach.wait_for_room`).
//!
//! A pod whose node is at its CSI attach limit stays `Unschedulable` ("node(s) exceed max
//! volume count") until the limit rises or a volume leaves the node. Without
//! `wait_for_room` the attach fails with class `attach_limit` once the failure grace is over;
//! with it the attach waits (until its timeout) and reports where the time went, as users
//! meet it: `unschedulable` (first seen), `csinode-updated` (the kubelet wrote a new
//! allocatable count into the node's CSINode, from the driver's NodeGetInfo — the mutable
//! CSINode allocatable of Kubernetes 1.36), then `scheduled`, `attached`, `running`.
//!
//! The CSINode instants come from a cluster-wide CSINode watch started at the first such
//! attach (a run without one never watches CSINodes): it keeps, per node, when each
//! allocatable count changed (arrival of the watch event), so the phase is the last change
//! on the node the pod landed on between `unschedulable` and `scheduled`. Credentials that
//! may not watch CSINodes lose only that phase (a notice says so).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use k8s_openapi::api::storage::v1::CSINode;

/// Per driver, its allocatable count (None: unbounded).
type Counts = BTreeMap<String, Option<i32>>;

/// When each node's CSINode allocatable counts changed.
#[derive(Debug, Default)]
pub(crate) struct CsiNodeLog {
    changes: Mutex<HashMap<String, Vec<(Instant, Counts)>>>,
}

fn counts(n: &CSINode) -> Counts {
    n.spec
        .drivers
        .iter()
        .map(|d| (d.name.clone(), d.allocatable.as_ref().and_then(|a| a.count)))
        .collect()
}

impl CsiNodeLog {
    pub(crate) fn saw(&self, n: &CSINode, at: Instant) {
        let Some(name) = n.metadata.name.clone() else {
            return;
        };
        let c = counts(n);
        let mut m = self.changes.lock().unwrap_or_else(PoisonError::into_inner);
        let list = m.entry(name).or_default();
        if list.last().is_none_or(|(_, last)| *last != c) {
            list.push((at, c));
        }
    }

    /// The last change of `node`'s counts in `(after, before]`, with the counts it set.
    pub(crate) fn changed(
        &self,
        node: &str,
        after: Instant,
        before: Instant,
    ) -> Option<(Instant, Counts)> {
        let m = self.changes.lock().unwrap_or_else(PoisonError::into_inner);
        m.get(node)?
            .iter()
            .rev()
            .find(|(t, _)| *t > after && *t <= before)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn node(count: Option<i32>) -> CSINode {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1"},
            "spec": {"drivers": [{"name": "d", "nodeID": "n1",
                "allocatable": count.map(|c| serde_json::json!({"count": c}))}]},
        }))
        .expect("a CSINode")
    }

    /// Only changes count, and the last one inside the window is the phase.
    #[test]
    fn the_last_change_in_the_window_is_found() {
        let log = CsiNodeLog::default();
        let t0 = Instant::now();
        let t = |ms: u64| t0 + Duration::from_millis(ms);
        log.saw(&node(Some(2)), t(0));
        log.saw(&node(Some(2)), t(5));
        log.saw(&node(Some(3)), t(10));
        log.saw(&node(Some(4)), t(20));
        log.saw(&node(None), t(40));
        let (at, c) = log.changed("n1", t(1), t(30)).expect("a change");
        assert_eq!((at, c["d"]), (t(20), Some(4)));
        assert_eq!(log.changed("n1", t(10), t(15)), None);
        assert_eq!(log.changed("n2", t(0), t(50)), None);
        assert_eq!(
            log.changed("n1", t(30), t(50)).expect("unbounded").1["d"],
            None
        );
    }
}
