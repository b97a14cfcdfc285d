//! `force_detach`: Kubernetes' non-graceful node shutdown (GA in 1.28). A node that is shut
//! down cannot confirm its pods are gone, so its volumes stay attached and its pods stuck
//! terminating until an operator says the node is out of service with the taint
//! `node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`. Then the pod garbage collector
//! force-deletes the pods, the attach-detach controller detaches their volumes at once (not
//! after its six minutes), and the workloads can start elsewhere.
//!
//! The operation is the operator's part and what follows it: taint the node (annotated with
//! the run, in the ledger, removed at cleanup), wait until each of the run's pods on it is
//! gone and each of their volumes' VolumeAttachments on it is gone, then start each workload
//! again wherever the scheduler puts it (never the tainted node). The provider deletes no pod
//! itself: the time from the taint to each step is Kubernetes'. Shutting the node down is
//! not the run's to do (on testenv's real node, the test stops its kubelet); on a node that is
//! still up, the taint evicts its pods gracefully instead, and the steps are the same.

use futures::future::join_all;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::Api;
use replay::{OpCtx, ProviderError};
use serde_json::json;

use crate::context::{Kube, WlState, blocking, io_err};
use crate::kube::nodes::{OUT_OF_SERVICE, patch_taint};
use crate::kube::stamp::{phase, phase_at};

impl Kube {
    pub(crate) async fn force_detach(&self, ctx: &OpCtx, node: &str) -> Result<(), ProviderError> {
        let ns = self.ns()?;
        let w = self.watches()?;
        let api: Api<Node> = Api::all(self.client.clone());
        let n = self.call(api.get(node)).await?;
        let moved: Vec<(trace_format::Name, WlState)> = self
            .state()
            .workloads
            .iter()
            .filter(|(_, wl)| wl.node.as_deref() == Some(node))
            .map(|(k, wl)| (k.clone(), wl.clone()))
            .collect();
        let already = n
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| t.iter().any(|t| t.key == OUT_OF_SERVICE));
        if already {
            phase(ctx, "already-out-of-service");
        } else {
            blocking(|| {
                ctx.ledger()
                    .intend("out-of-service", node, json!({ "uid": n.uid() }))
            })
            .map_err(io_err)?;
            let run_id = self.run()?.run_id.clone();
            patch_taint(&self.limiter, &api, node, Some(&run_id))
                .await
                .map_err(|e| self.api_err(&e))?;
            phase(ctx, "tainted");
        }
        // Kubernetes removes the pods (its I/O pods too) and detaches their volumes.
        for (_, wl) in &moved {
            for l in &wl.io_local {
                l.stop.request();
            }
        }
        let pods: Vec<String> = moved
            .iter()
            .flat_map(|(_, wl)| std::iter::once(wl.pod.clone()).chain(wl.io_pods.iter().cloned()))
            .collect();
        let mut gone_at = None;
        for pod in &pods {
            let Some(uid) = w
                .pod
                .store()
                .get(&kube::runtime::reflector::ObjectRef::new(pod).within(ns))
                .and_then(|o| o.uid())
            else {
                continue;
            };
            self.waiting(ctx, format!("pod {ns}/{pod} on {node} to be gone"));
            let ((), at) = w
                .pod
                .wait_for(pod, |s| {
                    crate::kube::store::gone(s, Some(ns), pod, &uid).then_some(())
                })
                .await;
            gone_at = gone_at.max(Some(at));
            let _ = blocking(|| ctx.ledger().release("pod", &format!("{ns}/{pod}")));
        }
        if let Some(t) = gone_at {
            phase_at(ctx, "pods-gone", t);
        }
        let mut detached = None;
        for (_, wl) in &moved {
            let claims: Vec<String> = wl.volumes.iter().map(|v| self.volume(v).pvc).collect();
            for pv in self.attachable_pvs(&claims)? {
                self.waiting(
                    ctx,
                    format!("the VolumeAttachment of PV {pv} on {node} to be gone"),
                );
                let ((), t) =
                    w.va.wait_for(&pv, |s| {
                        (!s.state().iter().any(|va| {
                            va.spec.source.persistent_volume_name.as_deref() == Some(pv.as_str())
                                && va.spec.node_name == node
                        }))
                        .then_some(())
                    })
                    .await;
                detached = detached.max(Some(t));
            }
        }
        if let Some(t) = detached {
            phase_at(ctx, "detached", t);
        }
        // Each workload again, where the scheduler puts it.
        let starts = moved.iter().map(|(name, wl)| {
            self.start_pod(ctx, name, &wl.volumes, None, wl.tenant.as_deref(), false)
        });
        let started = join_all(starts).await;
        for ((name, _), r) in moved.iter().zip(started) {
            self.state().workloads.insert(name.clone(), r?);
        }
        if !moved.is_empty() {
            phase(ctx, "running-again");
        }
        Ok(())
    }
}
