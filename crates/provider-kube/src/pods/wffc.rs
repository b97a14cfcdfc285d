//! WaitForFirstConsumer claims in an attach. Nothing is provisioned until a pod uses the
//! claim: the scheduler picks the pod's node, writes it on the claim
//! (`volume.kubernetes.io/selected-node`), the provisioner makes the volume there, the claim
//! binds, and only then does the scheduler bind the pod to the node. The attach reports that
//! as its own phases, in the order they happened: `node-selected` (the consumer's node is
//! chosen; provisioning starts), `bound` (provisioned and bound), `scheduled` (the pod bound to
//! its node). `create_volume` on such a class measures the claim's creation only.

use std::time::Instant;

use futures::future::join_all;
use kube::ResourceExt as _;
use kube::runtime::reflector::ObjectRef;

use crate::context::{Kube, VolState};

/// The annotation the scheduler sets on a WaitForFirstConsumer claim when it picks the node.
pub(crate) const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// A watch, running beside the pod's scheduling wait, for the instant the last of an
/// attach's WaitForFirstConsumer claims got its selected node. Aborted when dropped.
pub(crate) struct NodeSelected(tokio::task::JoinHandle<Option<Instant>>);

impl Drop for NodeSelected {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl NodeSelected {
    /// The instant, once the claims are bound: their watch delivered the annotation before
    /// the binding (one stream, in order), so the watching task has it or is about to run;
    /// 200 ms bound that wait. None when a claim bound without one (an existing volume).
    pub(crate) async fn seen(mut self) -> Option<Instant> {
        tokio::time::timeout(std::time::Duration::from_millis(200), &mut self.0)
            .await
            .ok()
            .and_then(Result::ok)
            .flatten()
    }
}

impl Kube {
    /// Starts watching `vols`' WaitForFirstConsumer claims for their selected node; None when
    /// there are none.
    pub(crate) fn watch_node_selected(&self, vols: &[VolState]) -> Option<NodeSelected> {
        let claims: Vec<String> = vols
            .iter()
            .filter(|v| v.wffc)
            .map(|v| v.pvc.clone())
            .collect();
        if claims.is_empty() {
            return None;
        }
        let ns = self.ns().ok()?.to_owned();
        let pvc = self.watches().ok()?.pvc.clone();
        Some(NodeSelected(tokio::spawn(async move {
            let waits = claims.iter().map(|c| {
                pvc.wait_for(c, |s| {
                    s.get(&ObjectRef::new(c).within(&ns))
                        .filter(|o| o.annotations().contains_key(SELECTED_NODE))
                        .map(|_| ())
                })
            });
            join_all(waits).await.into_iter().map(|(_, at)| at).max()
        })))
    }
}
