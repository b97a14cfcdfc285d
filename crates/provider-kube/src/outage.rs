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
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use replay::{OpCtx, ProviderError};
use serde_json::json;

use crate::stamp::{phase, phase_at};
use crate::{Kube, WlState, blocking, io_err};

/// The taint of an out-of-service node.
pub const OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";
/// Annotation on a node the run tainted out of service: the run id.
pub const OUT_OF_SERVICE_ANNOTATION: &str = "cnsreplay.io/out-of-service-by";

fn out_of_service() -> Taint {
    Taint {
        key: OUT_OF_SERVICE.into(),
        value: Some("nodeshutdown".into()),
        effect: "NoExecute".into(),
        time_added: None,
    }
}

/// `n`'s taints with (`add`) or without the out-of-service taint, others kept.
pub(crate) fn taints_with(n: &Node, add: bool) -> Vec<Taint> {
    let mut t: Vec<Taint> = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.key != OUT_OF_SERVICE)
        .collect();
    if add {
        t.push(out_of_service());
    }
    t
}

/// Puts the out-of-service taint on node `name` (`add`, annotating it with the run) or takes
/// it and the annotation off, keeping every other taint. The taints are a list the API
/// replaces whole, so the patch carries the node's `resourceVersion`, and a conflict (another
/// writer in between: the node lifecycle controller's own taints) is retried on a fresh read.
pub(crate) async fn patch_taint(
    limiter: &crate::Limiter,
    api: &Api<Node>,
    name: &str,
    add: Option<&str>,
) -> Result<Node, kube::Error> {
    let mut tries = 0;
    loop {
        limiter.acquire().await;
        let n = api.get(name).await?;
        let patch = json!({
            "metadata": {
                "annotations": {OUT_OF_SERVICE_ANNOTATION: add},
                "resourceVersion": n.resource_version(),
            },
            "spec": {"taints": taints_with(&n, add.is_some())},
        });
        limiter.acquire().await;
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Err(kube::Error::Api(e)) if e.code == 409 && tries < 5 => tries += 1,
            r => return r,
        }
    }
}

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
                    crate::ops::gone(s, Some(ns), pod, &uid).then_some(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeSpec;

    #[test]
    fn the_taint_is_added_once_and_removed_alone() {
        let other = Taint {
            key: "dedicated".into(),
            value: Some("db".into()),
            effect: "NoSchedule".into(),
            time_added: None,
        };
        let mut n = Node {
            spec: Some(NodeSpec {
                taints: Some(vec![other.clone()]),
                ..NodeSpec::default()
            }),
            ..Node::default()
        };
        let with = taints_with(&n, true);
        assert_eq!(with, vec![other.clone(), out_of_service()]);
        n.spec.as_mut().unwrap().taints = Some(with);
        assert_eq!(taints_with(&n, true).len(), 2);
        assert_eq!(taints_with(&n, false), vec![other]);
    }
}
