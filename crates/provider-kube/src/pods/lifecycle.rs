//! A workload pod's life cycle: start it (`attach`, `reschedule`, the outage's restart) and
//! wait until it runs, stop it and wait until its volumes are detached, and the guard that
//! deletes a pod whose start was not seen through.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use replay::{OpCtx, ProviderError};
use trace_format::Name;

use crate::context::{Kube, VolState, WlState, blocking};
use crate::kube::objects::{self, PodVolume, k8s_name};
use crate::kube::request::delete_params;
use crate::kube::stamp::{phase, phase_at};
use crate::kube::store::{gone, missing};
use crate::pods::verdict::{POD_WARNINGS, PodKind, WarningVerdict, warning_verdict};

/// Warnings judged while a workload pod waits for its node: the pod's own, and the
/// provisioner's on the WaitForFirstConsumer claims it waits for.
const SCHEDULING_WARNINGS: &[&str] = &[
    "FailedAttachVolume",
    "FailedMount",
    "FailedMapVolume",
    "FailedCreatePodSandBox",
    "ProvisioningFailed",
];

/// The pod of an attach that did not finish: it failed, or its future was dropped (the op's
/// timeout, a stop). A pod that will not run must not keep its volumes from being deleted
/// (the trace's later delete waits for the PVC, which the pod protects) nor keep trying to
/// start: dropping the guard armed deletes it by UID, without waiting, on the runtime the
/// attach ran on; cleanup checks it is gone.
pub(crate) struct PodGuard {
    api: Api<Pod>,
    limiter: Arc<crate::kube::limiter::Limiter>,
    name: String,
    uid: String,
    armed: bool,
}

impl PodGuard {
    /// An armed guard of pod `name` (UID `uid`) in `ns`.
    pub(crate) fn new(p: &Kube, ns: &str, name: &str, uid: &str) -> Self {
        Self {
            api: Api::namespaced(p.client.clone(), ns),
            limiter: p.limiter.clone(),
            name: name.to_owned(),
            uid: uid.to_owned(),
            armed: true,
        }
    }

    /// The pod started: keep it.
    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for PodGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (api, limiter) = (self.api.clone(), self.limiter.clone());
        let (name, uid) = (
            std::mem::take(&mut self.name),
            std::mem::take(&mut self.uid),
        );
        rt.spawn(async move {
            limiter.acquire().await;
            if let Err(e) = api.delete(&name, &delete_params(Some(uid), Some(0))).await {
                tracing::debug!(pod = %name, error = %e, "deleting the pod of an unfinished attach");
            }
        });
    }
}

impl Kube {
    /// Creates a workload pod and waits until it runs: phases `created`, `scheduled`,
    /// `bound` (WaitForFirstConsumer volumes), `attached` (CSI VolumeAttachments), `running`,
    /// `ready`; with `wait_for_room`, `unschedulable` and `csinode-updated` before
    /// `scheduled` when it waited for room (`kube/room.rs`).
    pub(crate) async fn start_pod(
        &self,
        ctx: &OpCtx,
        workload: &Name,
        volumes: &[Name],
        node: Option<&str>,
        tenant: Option<&str>,
        wait_for_room: bool,
    ) -> Result<WlState, ProviderError> {
        let ns = self.ns()?;
        let w = self.watches()?;
        // The CSINode changes are recorded from before the pod exists.
        let room = crate::pods::wait::Room {
            wait: wait_for_room,
            csinodes: if wait_for_room {
                self.csinode_log().await
            } else {
                None
            },
            ..crate::pods::wait::Room::default()
        };
        let vols: Vec<VolState> = volumes.iter().map(|v| self.volume(v)).collect();
        let name = k8s_name(workload);
        // The pod object and the create call live only while it is made: what an attach
        // holds while it waits for the cluster is kept small (`KubeProvider::spawn_op`).
        let uid = {
            let meta = objects::meta(&name, ns, &self.run()?.run_id, tenant);
            let pod_vols: Vec<PodVolume> = vols
                .iter()
                .map(|v| PodVolume {
                    claim: v.pvc.clone(),
                    block: v.block,
                })
                .collect();
            let pod = objects::pod(
                meta,
                workload,
                &pod_vols,
                node,
                &self.config.pause_image,
                None,
                &self.config.pod,
            );
            let created = Box::pin(self.create(ctx, "pod", &pod, Some(&w.pod))).await?;
            created.uid().unwrap_or_default()
        };
        let mut guard = PodGuard::new(self, ns, &name, &uid);
        let node_name = self
            .run_pod(ctx, (&name, &uid), volumes, &vols, node, &room)
            .await?;
        guard.disarm();
        Ok(WlState {
            pod: name,
            volumes: volumes.to_vec(),
            node: Some(node_name),
            tenant: tenant.map(str::to_owned),
            io_pods: Vec::new(),
            io_local: Vec::new(),
        })
    }

    /// Waits until pod `name` (UID `uid`) is scheduled, its volumes bound and attached, and it
    /// runs and is ready; fails as soon as it cannot get there (see [`Kube::pod_wait`]: the
    /// pod's status, `Unschedulable` for longer than the failure grace; and
    /// [`Kube::or_warning`]: a final Warning about the pod, or a final `ProvisioningFailed`
    /// on a WaitForFirstConsumer claim it waits for). Returns its node.
    async fn run_pod(
        &self,
        ctx: &OpCtx,
        (name, uid): (&str, &str),
        volumes: &[Name],
        vols: &[VolState],
        pinned: Option<&str>,
        room: &crate::pods::wait::Room,
    ) -> Result<String, ProviderError> {
        let ns = self.ns()?;
        let w = self.watches()?;
        self.waiting(
            ctx,
            format!(
                "pod {ns}/{name} to be scheduled{}",
                pinned.map(|n| format!(" on node {n}")).unwrap_or_default()
            ),
        );
        // WaitForFirstConsumer claims: their node is selected (provisioning starts) before
        // the pod is bound to it (see pods/wffc.rs).
        let selected = self.watch_node_selected(vols);
        let wffc: Vec<(Name, VolState)> = volumes
            .iter()
            .zip(vols)
            .filter(|(_, v)| v.wffc)
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect();
        // Under WaitForFirstConsumer the scheduler binds the pod to its node only once its
        // claims are provisioned: while it is Pending, the provisioner's `ProvisioningFailed`
        // Warnings on those claims are why.
        let provisioned: Vec<(String, String)> = wffc
            .iter()
            .filter_map(|(_, v)| {
                let pvc = w.pvc.store().get(&ObjectRef::new(&v.pvc).within(ns))?;
                let class = pvc.spec.as_ref()?.storage_class_name.clone();
                self.class_provisions(class.as_deref())
                    .then(|| (v.pvc.clone(), pvc.uid().unwrap_or_default()))
            })
            .collect();
        let mut objs: Vec<(&str, &str)> = vec![(name, uid)];
        objs.extend(provisioned.iter().map(|(n, u)| (n.as_str(), u.as_str())));
        let scheduled = self.pod_wait_room(ctx, name, uid, PodKind::Workload, room, |o| {
            o.spec.as_ref()?.node_name.clone()
        });
        let (r, at) = Box::pin(self.or_warning(ctx, scheduled, &objs, SCHEDULING_WARNINGS)).await;
        let node_name = r?;
        // It waited for room: when did its node's CSINode last change before it fit?
        let since = *room
            .since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let (Some(since), Some(log)) = (since, &room.csinodes)
            && let Some((changed, _)) = log.changed(&node_name, since, at)
        {
            phase_at(ctx, "csinode-updated", changed);
        }
        {
            let mut st = self.state();
            for v in vols {
                st.claim_node
                    .insert((v.pvc.clone(), node_name.clone()), (uid.to_owned(), at));
            }
        }
        self.claim_node_changed.notify_waiters();
        if wffc.is_empty() {
            phase_at(ctx, "scheduled", at);
        } else {
            self.waiting(
                ctx,
                format!("the WaitForFirstConsumer PVCs of pod {ns}/{name} to bind"),
            );
            let mut bound = None;
            for (n, v) in &wffc {
                let pvc = w.pvc.store().get(&ObjectRef::new(&v.pvc).within(ns));
                let pvc_uid = pvc.as_ref().and_then(|o| o.uid()).unwrap_or_default();
                let class = pvc
                    .as_ref()
                    .and_then(|o| o.spec.as_ref()?.storage_class_name.clone());
                let warnings: &[&str] = if self.class_provisions(class.as_deref()) {
                    &["ProvisioningFailed"]
                } else {
                    &[]
                };
                let (_, at) =
                    Box::pin(self.wait_pvc_bound(ctx, &v.pvc, &pvc_uid, warnings)).await?;
                bound = bound.max(Some(at));
                if let Some(s) = self.state().volumes.get_mut(n) {
                    s.wffc = false;
                }
            }
            // The claims' watch delivered their selected node before their binding.
            if let Some(sel) = match selected {
                Some(s) => s.seen().await,
                None => None,
            } {
                phase_at(ctx, "node-selected", sel);
            }
            // Dynamic provisioning binds the claims before the pod: the phases in the order
            // they happened.
            let bound = bound.unwrap_or_else(Instant::now);
            if bound <= at {
                phase_at(ctx, "bound", bound);
                phase_at(ctx, "scheduled", at);
            } else {
                phase_at(ctx, "scheduled", at);
                phase_at(ctx, "bound", bound);
            }
        }
        let claims: Vec<String> = vols.iter().map(|v| v.pvc.clone()).collect();
        let pvs = self.attachable_pvs(&claims)?;
        let mut attached = None;
        for pv in &pvs {
            self.waiting(ctx, format!("PV {pv} to be attached to node {node_name}"));
            let attached_va = w.va.wait_for(pv, |s| {
                let vas = s.state();
                let va = vas.iter().find(|va| {
                    va.spec.source.persistent_volume_name.as_deref() == Some(pv)
                        && va.spec.node_name == node_name
                })?;
                let st = va.status.as_ref()?;
                if st.attached {
                    return Some(Ok(()));
                }
                // The external-attacher retries a failed ControllerPublishVolume: only a
                // final one ends the attach (the retried ones show as FailedAttachVolume
                // Warnings, counted below).
                let msg = st.attach_error.as_ref()?.message.as_deref()?;
                let WarningVerdict::Final(class) = warning_verdict("FailedAttachVolume", msg)
                else {
                    return None;
                };
                Some(Err(ProviderError::new(
                    class,
                    format!(
                        "VolumeAttachment {} of PV {pv} on node {node_name}: attachError: {msg}",
                        va.name_any(),
                    ),
                )))
            });
            let attached_va = async {
                tokio::select! {
                    r = attached_va => r,
                    () = self.stopped(ctx) => (
                        Err(ProviderError::new(
                            "cancelled",
                            format!("the run was stopped while PV {pv} was being attached"),
                        )),
                        Instant::now(),
                    ),
                }
            };
            let (r, at) =
                Box::pin(self.or_warning(ctx, attached_va, &[(name, uid)], POD_WARNINGS)).await;
            r?;
            attached = attached.max(Some(at));
        }
        if let Some(at) = attached {
            phase_at(ctx, "attached", at);
        }
        self.waiting(ctx, format!("pod {ns}/{name} Running on node {node_name}"));
        let running = self.pod_wait(ctx, name, uid, PodKind::Workload, |o| {
            (o.status.as_ref()?.phase.as_deref() == Some("Running")).then_some(())
        });
        let (r, at) = Box::pin(self.or_warning(ctx, running, &[(name, uid)], POD_WARNINGS)).await;
        r?;
        phase_at(ctx, "running", at);
        self.waiting(ctx, format!("pod {ns}/{name} Ready"));
        let (r, at) = Box::pin(self.pod_wait(ctx, name, uid, PodKind::Workload, |o| {
            o.status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
                .then_some(())
        }))
        .await;
        r?;
        phase_at(ctx, "ready", at);
        Ok(node_name)
    }

    /// Deletes a pod (grace `grace` seconds; None = the pod's own) and waits until it is
    /// gone and the VolumeAttachments of its volumes on its node are gone: phases `deleted`,
    /// `pod-gone`, `detached` — or, for a volume another pod of the run uses on that node,
    /// `in-use-on-node` (the attachment stays for that pod).
    pub(crate) async fn stop_pod(
        &self,
        ctx: &OpCtx,
        pod: &str,
        volumes: &[Name],
        node: Option<&str>,
        grace: Option<u32>,
    ) -> Result<(), ProviderError> {
        let ns = self.ns()?;
        let w = self.watches()?;
        let Some(o) = w.pod.store().get(&ObjectRef::new(pod).within(ns)) else {
            return Err(missing("pod", pod));
        };
        let uid = o.uid().unwrap_or_default();
        let claims: Vec<String> = volumes.iter().map(|v| self.volume(v).pvc).collect();
        let mut pvs = Vec::new();
        for c in &claims {
            for pv in self.attachable_pvs(std::slice::from_ref(c))? {
                pvs.push((c.clone(), pv));
            }
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        match self
            .call(api.delete(pod, &delete_params(Some(uid.clone()), grace)))
            .await
        {
            Ok(_) => {}
            Err(e) if e.class == "not_found" => {}
            Err(e) => return Err(e),
        }
        phase(ctx, "deleted");
        self.waiting(ctx, format!("pod {ns}/{pod} to be gone"));
        let ((), at) = w
            .pod
            .wait_for(pod, |s| gone(s, Some(ns), pod, &uid).then_some(()))
            .await;
        phase_at(ctx, "pod-gone", at);
        let _ = blocking(|| ctx.ledger().release("pod", &format!("{ns}/{pod}")));
        let (mut detached, mut kept) = (None, None);
        for (claim, pv) in &pvs {
            self.waiting(ctx, format!("the VolumeAttachment of PV {pv} to be gone"));
            let gone = w.va.wait_for(pv, |s| {
                (!s.state().iter().any(|va| {
                    va.spec.source.persistent_volume_name.as_deref() == Some(pv.as_str())
                        && node.is_none_or(|n| va.spec.node_name == n)
                }))
                .then_some(())
            });
            tokio::select! {
                ((), t) = gone => detached = detached.max(Some(t)),
                t = self.held_again(claim, node, &uid) => kept = kept.max(Some(t.max(at))),
            }
        }
        if let Some(t) = detached {
            phase_at(ctx, "detached", t);
        }
        if let Some(t) = kept {
            // Another pod of the run uses the volume on the same node (two workloads on one
            // node sharing it, or the next holder of a handed-over volume): the attach-detach
            // controller keeps its VolumeAttachment for that pod, and there is no detach of
            // this workload's to wait for. Ends when the pod is gone and the other holds it.
            phase_at(ctx, "in-use-on-node", t);
        }
        if let Some(n) = node {
            let mut st = self.state();
            for c in &claims {
                let key = (c.clone(), n.to_owned());
                if st.claim_node.get(&key).is_some_and(|(u, _)| *u == uid) {
                    st.claim_node.remove(&key);
                }
            }
        }
        Ok(())
    }

    /// Resolves when a pod of the run other than `uid` has been scheduled on `node` with
    /// `claim` (the instant it was seen scheduled); never without a node.
    async fn held_again(&self, claim: &str, node: Option<&str>, uid: &str) -> Instant {
        let Some(node) = node else {
            return std::future::pending().await;
        };
        let key = (claim.to_owned(), node.to_owned());
        loop {
            let changed = self.claim_node_changed.notified();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            if let Some((other, at)) = self.state().claim_node.get(&key)
                && other != uid
            {
                return *at;
            }
            changed.await;
        }
    }

    /// PersistentVolumes a pod's volumes are bound to, with whether a VolumeAttachment is
    /// expected for them (CSI volumes of drivers that need attaching).
    pub(crate) fn attachable_pvs(&self, pvcs: &[String]) -> Result<Vec<String>, ProviderError> {
        let ns = self.ns()?;
        let w = self.watches()?;
        let mut out = Vec::new();
        for c in pvcs {
            let Some(pv) = w
                .pvc
                .store()
                .get(&ObjectRef::new(c).within(ns))
                .and_then(|o| o.spec.as_ref()?.volume_name.clone())
            else {
                continue;
            };
            let driver =
                w.pv.store()
                    .get(&ObjectRef::new(&pv))
                    .and_then(|o| Some(o.spec.as_ref()?.csi.as_ref()?.driver.clone()));
            if driver.is_some_and(|d| self.csi_attach_required(&d)) {
                out.push(pv);
            }
        }
        Ok(out)
    }
}
