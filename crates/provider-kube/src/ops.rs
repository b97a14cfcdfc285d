//! The operations: each creates/patches/deletes through the rate-limited client and then
//! waits on the shared watches (see `watch.rs`) for its completion condition, reporting the
//! phases it passes.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use futures::future::join_all;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod, PodSpec};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use replay::{OpCtx, ProviderError};
use serde_json::json;
use trace_format::{Event, Name, Op, VolumeMode, VolumeSource};

use crate::objects::{self, DataSource, PodVolume, PvcSpec, VolumeSnapshot, k8s_name};
use crate::pods::{POD_WARNINGS, PodKind, WarningVerdict, warning_verdict};
use crate::stamp::{done_at, phase, phase_at};
use crate::watch::Watch;
use crate::{Kube, VolState, WlState, blocking, delete_params, io_err, uid_detail};

/// Why a VolumeSnapshot's `status.error` is one the snapshot controllers retry by themselves,
/// or `None` when it is final. Two sources write that field:
/// - the snapshotter sidecar, with the CSI driver's gRPC status (`rpc error: code = …`): the
///   codes csi-lib-utils' `IsFinalError` calls not final (the operation may still be in
///   progress; the sidecar retries it) are `Canceled`, `DeadlineExceeded`, `Unavailable`,
///   `ResourceExhausted`, `Aborted` (a driver's "operation pending for volume", e.g. a
///   CreateSnapshot that met the kubelet's NodeStage of the same volume); any other code is
///   final;
/// - the snapshot controller itself (external-snapshotter's `snapshot_controller.go`), for
///   steps it retries: a status update that failed (an API conflict), a content its cache
///   does not have yet, a binding to redo.
///
/// Anything else is final.
pub(crate) fn retried_snapshot_error(msg: &str) -> Option<&'static str> {
    if let Some((i, m)) = msg.match_indices("code = ").next() {
        let code = &msg[i + m.len()..];
        return [
            "Canceled",
            "DeadlineExceeded",
            "Unavailable",
            "ResourceExhausted",
            "Aborted",
        ]
        .into_iter()
        .find(|c| code.starts_with(c));
    }
    [
        ("Snapshot status update failed", "status update failed"),
        ("VolumeSnapshotContent is missing", "content not yet seen"),
        (
            "Snapshot failed to bind VolumeSnapshotContent",
            "binding retried",
        ),
        ("the object has been modified", "API conflict"),
    ]
    .into_iter()
    .find_map(|(needle, why)| msg.contains(needle).then_some(why))
}

fn missing(what: &str, name: &str) -> ProviderError {
    ProviderError::new(
        "not_found",
        format!("{what} {name:?} does not exist in this run"),
    )
}

pub(crate) fn get<K>(s: &Store<K>, ns: &str, name: &str, uid: &str) -> Option<Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    s.get(&ObjectRef::new(name).within(ns))
        .filter(|o| o.meta().uid.as_deref() == Some(uid))
}

pub(crate) fn gone<K>(s: &Store<K>, ns: Option<&str>, name: &str, uid: &str) -> bool
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let r = ObjectRef::new(name);
    let r = match ns {
        Some(ns) => r.within(ns),
        None => r,
    };
    s.get(&r)
        .is_none_or(|o| o.meta().uid.as_deref() != Some(uid))
}

impl Kube {
    /// Writes the object to the ledger, creates it, records its UID. An object that already
    /// exists is not ours: its ledger entry is released and the operation fails.
    pub(crate) async fn create<K>(
        &self,
        ctx: &OpCtx,
        kind: &str,
        obj: &K,
        watch: Option<&Watch<K>>,
    ) -> Result<K, ProviderError>
    where
        K: Resource<DynamicType = ()>
            + Clone
            + serde::Serialize
            + serde::de::DeserializeOwned
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
        K: Resource<Scope = kube::core::NamespaceResourceScope>,
    {
        let ns = self.ns()?;
        let id = format!("{ns}/{}", obj.meta().name.as_deref().unwrap_or_default());
        blocking(|| ctx.ledger().intend(kind, &id, serde_json::Value::Null)).map_err(io_err)?;
        let api: Api<K> = Api::namespaced(self.client.clone(), ns);
        match self.call(api.create(&PostParams::default(), obj)).await {
            Ok(o) => {
                // The phase first: the ledger's fsync must not count as API latency. The
                // object's ADDED watch event may have been seen before this task got to run
                // with the response: the earlier of the two.
                let now = Instant::now();
                let seen = watch
                    .zip(o.meta().name.as_deref().zip(o.meta().uid.as_deref()))
                    .and_then(|(w, (n, u))| w.first_seen(n, u));
                phase_at(ctx, "created", seen.map_or(now, |s| s.min(now)));
                blocking(|| ctx.ledger().intend(kind, &id, uid_detail(o.meta())))
                    .map_err(io_err)?;
                Ok(o)
            }
            Err(e) if e.class == "already_exists" => {
                let _ = blocking(|| ctx.ledger().release(kind, &id));
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    pub(crate) fn header_defaults(&self) -> Result<&trace_format::Defaults, ProviderError> {
        Ok(&self.run()?.header.defaults)
    }

    /// Whether a StorageClass (None: the cluster default) binds on first consumer.
    fn class_is_wffc(&self, class: Option<&str>) -> bool {
        if let Some(c) = class
            && let Some(&w) = self.state().wffc_classes.get(c)
        {
            return w;
        }
        let env = self.environment();
        let found = env["storage_classes"].as_array().and_then(|a| {
            a.iter().find(|s| match class {
                Some(c) => s["name"] == c,
                None => s["default"] == true,
            })
        });
        let w = found.is_some_and(|s| s["volume_binding_mode"] == "WaitForFirstConsumer");
        if let Some(c) = class {
            self.state().wffc_classes.insert(c.to_owned(), w);
        }
        w
    }

    /// Whether a StorageClass (None: the cluster default) has a provisioner that creates
    /// volumes: its `ProvisioningFailed` Events are the provisioner's errors, judged by
    /// [`crate::pods::warning_verdict`] (a final one ends the create or the attach that waits
    /// for the claim, a retried one is counted). A static class (`kubernetes.io/no-provisioner`)
    /// only waits for a matching PV; the PV controller's Events about it are not failures.
    fn class_provisions(&self, class: Option<&str>) -> bool {
        let env = self.environment();
        env["storage_classes"]
            .as_array()
            .and_then(|a| {
                a.iter().find(|s| match class {
                    Some(c) => s["name"] == c,
                    None => s["default"] == true,
                })
            })
            .is_none_or(|s| s["provisioner"] != "kubernetes.io/no-provisioner")
    }

    fn csi_attach_required(&self, driver: &str) -> bool {
        let env = self.environment();
        env["csi_drivers"]
            .as_array()
            .and_then(|a| a.iter().find(|d| d["name"] == driver))
            .is_none_or(|d| d["attach_required"] != false)
    }

    pub(crate) fn volume(&self, name: &Name) -> VolState {
        self.state()
            .volumes
            .get(name)
            .cloned()
            .unwrap_or_else(|| VolState {
                pvc: k8s_name(name),
                block: false,
                wffc: false,
            })
    }

    async fn wait_pvc_bound(
        &self,
        ctx: &OpCtx,
        name: &str,
        uid: &str,
        warnings: &[&str],
    ) -> Result<(Arc<PersistentVolumeClaim>, Instant), ProviderError> {
        let ns = self.ns()?;
        let w = self.watches()?;
        let bound = w.pvc.wait_for(name, |s| {
            let o = get(s, ns, name, uid)?;
            match o.status.as_ref().and_then(|s| s.phase.as_deref()) {
                Some("Bound") => Some(Ok(o)),
                Some("Lost") => Some(Err(ProviderError::new(
                    "lost",
                    format!("PVC {name} is Lost"),
                ))),
                _ => None,
            }
        });
        let (r, at) = self.or_warning(ctx, bound, &[(name, uid)], warnings).await;
        Ok((r?, at))
    }

    async fn create_volume(
        &self,
        ev: &Event,
        c: &trace_format::CreateVolume,
        ctx: &OpCtx,
    ) -> Result<(), ProviderError> {
        let d = self.header_defaults()?;
        let ns = self.ns()?;
        let trace_class = c
            .storage_class
            .clone()
            .or_else(|| d.storage_class.clone())
            .map(|n| n.to_string());
        let class = self.config.storage_class_for(trace_class.as_deref());
        let mode = c.volume_mode.or(d.volume_mode);
        let taken = match &c.source {
            Some(VolumeSource::Snapshot(s)) => self.state().snap_taken.get(s).cloned(),
            Some(VolumeSource::GroupMember(m)) => self
                .state()
                .groups
                .get(&m.group)
                .and_then(|g| g.taken.get(&m.volume).cloned()),
            _ => None,
        };
        {
            let mut st = self.state();
            match taken {
                Some(t) => st.taken.insert(c.volume.clone(), t),
                None => st.taken.remove(&c.volume),
            };
        }
        let (source, source_size) = match &c.source {
            None => (None, None),
            Some(VolumeSource::Snapshot(s)) => {
                let name = k8s_name(s);
                let size = self.watches()?.snap.as_ref().and_then(|w| {
                    w.store()
                        .get(&ObjectRef::new(&name).within(ns))
                        .and_then(|o| o.status.as_ref()?.restore_size.clone())
                        .and_then(|q| trace_format::units::parse_bytes(&q).ok())
                });
                (Some(DataSource::Snapshot(name)), size)
            }
            Some(VolumeSource::GroupMember(m)) => {
                let (snap, size) = self.group_member(m)?;
                (Some(DataSource::Snapshot(snap)), size)
            }
            Some(VolumeSource::Volume(v)) => {
                let vs = self.volume(v);
                let size = self
                    .watches()?
                    .pvc
                    .store()
                    .get(&ObjectRef::new(&vs.pvc).within(ns))
                    .and_then(|o| {
                        storage_of(o.spec.as_ref()?.resources.as_ref()?.requests.as_ref()?)
                    });
                (Some(DataSource::Pvc(vs.pvc)), size)
            }
        };
        let size = match (c.size, source_size) {
            (None, Some(s)) => s,
            (s, _) => d.volume_size(s),
        };
        let name = k8s_name(&c.volume);
        let spec = PvcSpec {
            size,
            class: class.clone(),
            access: d.access_mode(c.access_mode),
            mode,
            source,
        };
        let meta = objects::meta(&name, ns, &self.run()?.run_id, ev.tenant.as_deref());
        let created = self
            .create(
                ctx,
                "pvc",
                &objects::pvc(meta, &spec),
                Some(&self.watches()?.pvc),
            )
            .await?;
        let uid = created.uid().unwrap_or_default();
        let wffc = self.class_is_wffc(class.as_deref());
        self.state().volumes.insert(
            c.volume.clone(),
            VolState {
                pvc: name.clone(),
                block: mode == Some(VolumeMode::Block),
                wffc,
            },
        );
        if wffc {
            // Binding waits for the first pod; that attach measures it (phase `bound`).
            phase(ctx, "wait-for-first-consumer");
            return Ok(());
        }
        self.waiting(ctx, format!("PVC {ns}/{name} Bound"));
        let warnings: &[&str] = if self.class_provisions(class.as_deref()) {
            &["ProvisioningFailed"]
        } else {
            &[]
        };
        let (_, at) = self.wait_pvc_bound(ctx, &name, &uid, warnings).await?;
        phase_at(ctx, "bound", at);
        Ok(())
    }

    async fn delete_volume(&self, v: &Name, ctx: &OpCtx) -> Result<(), ProviderError> {
        let ns = self.ns()?;
        let vs = self.volume(v);
        let w = self.watches()?;
        let pvc = w
            .pvc
            .store()
            .get(&ObjectRef::new(&vs.pvc).within(ns))
            .ok_or_else(|| missing("volume", v))?;
        let uid = pvc.uid().unwrap_or_default();
        let pv_name = pvc.spec.as_ref().and_then(|s| s.volume_name.clone());
        let pv = pv_name
            .as_ref()
            .and_then(|n| w.pv.store().get(&ObjectRef::new(n)));
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), ns);
        self.call(api.delete(&vs.pvc, &delete_params(Some(uid.clone()), None)))
            .await?;
        phase(ctx, "deleted");
        self.waiting(ctx, format!("PVC {ns}/{} to be gone", vs.pvc));
        let ((), at) = w
            .pvc
            .wait_for(&vs.pvc, |s| gone(s, Some(ns), &vs.pvc, &uid).then_some(()))
            .await;
        phase_at(ctx, "pvc-gone", at);
        let _ = blocking(|| ctx.ledger().release("pvc", &format!("{ns}/{}", vs.pvc)));
        self.state().volumes.remove(v);
        if let Some(pv) = pv
            && pv
                .spec
                .as_ref()
                .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
                == Some("Delete")
        {
            let (pv_name, pv_uid) = (pv.name_any(), pv.uid().unwrap_or_default());
            self.waiting(
                ctx,
                format!("PV {pv_name} (reclaim policy Delete) to be gone"),
            );
            let ((), at) =
                w.pv.wait_for(&pv_name, |s| gone(s, None, &pv_name, &pv_uid).then_some(()))
                    .await;
            phase_at(ctx, "pv-gone", at);
        }
        Ok(())
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

    /// Creates a workload pod and waits until it runs: phases `created`, `scheduled`,
    /// `bound` (WaitForFirstConsumer volumes), `attached` (CSI VolumeAttachments), `running`,
    /// `ready`; with `wait_for_room`, `unschedulable` and `csinode-updated` before
    /// `scheduled` when it waited for room (`room.rs`).
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
        let room = crate::pods::Room {
            wait: wait_for_room,
            csinodes: if wait_for_room {
                self.csinode_log().await
            } else {
                None
            },
            ..crate::pods::Room::default()
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
        room: &crate::pods::Room,
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
        // the pod is bound to it (see wffc.rs).
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

    async fn stop_workload(
        &self,
        ctx: &OpCtx,
        workload: &Name,
        abort: bool,
    ) -> Result<WlState, ProviderError> {
        let wl = self
            .state()
            .workloads
            .remove(workload)
            .ok_or_else(|| missing("workload", workload))?;
        let grace = abort.then_some(0);
        for l in &wl.io_local {
            l.stop.request();
        }
        let io = wl
            .io_pods
            .iter()
            .map(|p| self.stop_pod(ctx, p, &[], None, Some(0)));
        for r in join_all(io).await {
            // An I/O pod that already finished is gone: fine.
            if let Err(e) = r
                && e.class != "not_found"
            {
                return Err(e);
            }
        }
        for l in &wl.io_local {
            l.ended().await;
        }
        if !wl.io_pods.is_empty() || !wl.io_local.is_empty() {
            phase(ctx, "io-stopped");
        }
        self.stop_pod(ctx, &wl.pod, &wl.volumes, wl.node.as_deref(), grace)
            .await?;
        Ok(wl)
    }

    async fn reschedule(
        &self,
        ctx: &OpCtx,
        workload: &Name,
        node: Option<&str>,
    ) -> Result<(), ProviderError> {
        let wl = self.stop_workload(ctx, workload, false).await?;
        let new = self
            .start_pod(
                ctx,
                workload,
                &wl.volumes,
                node,
                wl.tenant.as_deref(),
                false,
            )
            .await?;
        self.state().workloads.insert(workload.clone(), new);
        Ok(())
    }

    /// Marks a node unschedulable; recorded in the ledger so cleanup uncordons it (only when
    /// it was schedulable before: a node someone else cordoned stays as it was).
    async fn cordon(&self, ctx: &OpCtx, node: &str) -> Result<(), ProviderError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let n = self.call(api.get(node)).await?;
        if n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
            phase(ctx, "already-cordoned");
            return Ok(());
        }
        blocking(|| {
            ctx.ledger()
                .intend("cordon", node, json!({ "uid": n.uid() }))
        })
        .map_err(io_err)?;
        let run_id = self.run()?.run_id.clone();
        self.call(api.patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"annotations": {crate::cleanup::CORDON_ANNOTATION: run_id}},
                "spec": {"unschedulable": true},
            })),
        ))
        .await?;
        phase(ctx, "cordoned");
        Ok(())
    }

    async fn snapshot(
        &self,
        ev: &Event,
        s: &trace_format::Snapshot,
        ctx: &OpCtx,
    ) -> Result<(), ProviderError> {
        let ns = self.ns()?;
        let Some(w) = self.watches()?.snap.clone() else {
            return Err(ProviderError::new(
                "unsupported",
                "the cluster has no VolumeSnapshot API (snapshot.storage.k8s.io/v1)",
            ));
        };
        let d = self.header_defaults()?;
        let trace_class = s
            .class
            .clone()
            .or_else(|| d.snapshot_class.clone())
            .map(|n| n.to_string());
        let class = self.config.snapshot_class_for(trace_class.as_deref());
        let name = k8s_name(&s.snapshot);
        let requested_ns = ctx.now_ns();
        let obj = VolumeSnapshot {
            metadata: objects::meta(&name, ns, &self.run()?.run_id, ev.tenant.as_deref()),
            spec: objects::VolumeSnapshotSpec {
                source: objects::VolumeSnapshotSource {
                    persistent_volume_claim_name: Some(self.volume(&s.volume).pvc),
                    volume_snapshot_content_name: None,
                },
                volume_snapshot_class_name: class,
            },
            status: None,
        };
        let created = self.create(ctx, "volumesnapshot", &obj, Some(&w)).await?;
        let uid = created.uid().unwrap_or_default();
        self.waiting(ctx, format!("VolumeSnapshot {ns}/{name} readyToUse"));
        // The first error the snapshot controllers retry (see `retried_snapshot_error`), with
        // when it was seen.
        let mut retried: Option<(String, Instant)> = None;
        let (r, at) = w
            .wait_for(&name, |st| {
                let o = get(st, ns, &name, &uid)?;
                let status = o.status.as_ref()?;
                if status.ready_to_use == Some(true) {
                    return Some(Ok(()));
                }
                let e = status.error.as_ref()?;
                let msg = e.message.as_deref().unwrap_or("(no message)");
                if retried_snapshot_error(msg).is_some() {
                    retried.get_or_insert_with(|| (msg.to_owned(), Instant::now()));
                    return None;
                }
                Some(Err(ProviderError::new(
                    "snapshot_failed",
                    format!("VolumeSnapshot {ns}/{name} status.error: {msg}"),
                )))
            })
            .await;
        if let Some((msg, when)) = &retried {
            phase_at(ctx, "error-retried", *when);
            tracing::info!(snapshot = %name, error = %msg, "the snapshotter retries a transient error");
        }
        if let Err(mut e) = r {
            // A failed VolumeSnapshot stays and is retried by the snapshot controller, which
            // keeps its finalizer on the source PVC: a later delete of the volume would wait
            // for it forever. The operation is over, so its object goes.
            let api: Api<VolumeSnapshot> = Api::namespaced(self.client.clone(), ns);
            match self
                .call(api.delete(&name, &delete_params(Some(uid), None)))
                .await
            {
                Ok(_) => {
                    phase(ctx, "deleted");
                    e.message
                        .push_str(" (the failed VolumeSnapshot was deleted)");
                }
                Err(d) => {
                    let _ = write!(e.message, " (deleting the failed VolumeSnapshot: {d})");
                }
            }
            return Err(e);
        }
        phase_at(ctx, "ready", at);
        let created = w
            .store()
            .get(&ObjectRef::new(&name).within(ns))
            .and_then(|o| o.status.as_ref()?.creation_time.clone());
        self.state().snap_taken.insert(
            s.snapshot.clone(),
            crate::ordered::Taken {
                by: format!("snapshot {}", s.snapshot),
                requested_ns,
                ready_ns: replay::provider::ns_since(ctx.origin(), at),
                created,
            },
        );
        Ok(())
    }

    async fn delete_snapshot(&self, s: &Name, ctx: &OpCtx) -> Result<(), ProviderError> {
        let ns = self.ns()?;
        let Some(w) = self.watches()?.snap.clone() else {
            return Err(ProviderError::new("unsupported", "no VolumeSnapshot API"));
        };
        let name = k8s_name(s);
        let o = w
            .store()
            .get(&ObjectRef::new(&name).within(ns))
            .ok_or_else(|| missing("snapshot", s))?;
        let uid = o.uid().unwrap_or_default();
        let api: Api<VolumeSnapshot> = Api::namespaced(self.client.clone(), ns);
        self.call(api.delete(&name, &delete_params(Some(uid.clone()), None)))
            .await?;
        phase(ctx, "deleted");
        self.waiting(ctx, format!("VolumeSnapshot {ns}/{name} to be gone"));
        let ((), at) = w
            .wait_for(&name, |st| gone(st, Some(ns), &name, &uid).then_some(()))
            .await;
        done_at(ctx, at);
        let _ = blocking(|| {
            ctx.ledger()
                .release("volumesnapshot", &format!("{ns}/{name}"))
        });
        Ok(())
    }
}

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
    limiter: Arc<crate::Limiter>,
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

fn storage_of(
    m: &std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> Option<u64> {
    trace_format::units::parse_bytes(&m.get("storage")?.0).ok()
}

/// What the pod watch caches of a pod's spec: its node (the waits read nothing else of it).
pub(crate) fn pod_node_only(p: &mut Pod) {
    if let Some(s) = p.spec.as_mut() {
        *s = PodSpec {
            node_name: s.node_name.take(),
            ..PodSpec::default()
        };
    }
}

/// Runs one operation. Each op's future is boxed: this future is then a few hundred bytes
/// whatever the op, and an operation in flight holds only its own op's state, not the largest
/// op's (`KubeProvider::spawn_op`).
pub(crate) async fn execute(
    p: Arc<Kube>,
    ev: Arc<Event>,
    ctx: Arc<OpCtx>,
) -> Result<(), ProviderError> {
    let p = &*p;
    let ctx = &*ctx;
    match &ev.op {
        Op::CreateVolume(c) => Box::pin(p.create_volume(&ev, c, ctx)).await,
        Op::DeleteVolume(v) => Box::pin(p.delete_volume(&v.volume, ctx)).await,
        Op::Attach(a) => {
            let node = a
                .node
                .as_deref()
                .map(str::to_owned)
                .or_else(|| p.config.node.clone());
            let wl = Box::pin(p.start_pod(
                ctx,
                &a.workload,
                &a.volumes,
                node.as_deref(),
                ev.tenant.as_deref(),
                a.wait_for_room,
            ))
            .await?;
            p.state().workloads.insert(a.workload.clone(), wl);
            Ok(())
        }
        Op::Detach(w) => Box::pin(p.stop_workload(ctx, &w.workload, false))
            .await
            .map(drop),
        Op::AbortWorkload(w) => Box::pin(p.stop_workload(ctx, &w.workload, true))
            .await
            .map(drop),
        Op::Reschedule(r) => Box::pin(p.reschedule(ctx, &r.workload, r.node.as_deref())).await,
        Op::CordonNode(n) => Box::pin(p.cordon(ctx, &n.node)).await,
        Op::DrainNode(n) => Box::pin(drain(p, ctx, &n.node)).await,
        Op::Snapshot(s) => Box::pin(p.snapshot(&ev, s, ctx)).await,
        Op::DeleteSnapshot(s) => Box::pin(p.delete_snapshot(&s.snapshot, ctx)).await,
        Op::Resize(r) => Box::pin(p.resize(r, ctx)).await,
        Op::ModifyVolume(m) => Box::pin(p.modify_volume(m, ctx)).await,
        Op::GroupSnapshot(g) => Box::pin(p.group_snapshot(&ev, g, ctx)).await,
        Op::DeleteGroupSnapshot(g) => Box::pin(p.delete_group_snapshot(&g.group, ctx)).await,
        Op::ForceDetach(n) => Box::pin(p.force_detach(ctx, &n.node)).await,
        Op::IoPhase(ph) if p.config.io_exec == crate::IoExec::Local && ph.ordered.is_some() => {
            Err(ProviderError::new(
                "unsupported",
                "io_phase.ordered runs its writer and checker in pods (`--io-exec pod`)",
            ))
        }
        Op::IoPhase(ph) => match &ph.ordered {
            Some(o) if ph.read_pct == 0 => {
                Box::pin(crate::ordered::write(p, &ev, ph, o, ctx)).await
            }
            Some(o) => Box::pin(crate::ordered::check(p, &ev, ph, o, ctx)).await,
            None => Box::pin(crate::io::io_phase(p, &ev, ph, ctx)).await,
        },
        Op::Io(_) => Err(ProviderError::new(
            "unsupported",
            "single `io` requests on a volume a workload holds cannot be sent into its pod one \
             by one (bare `io`, on a raw block volume no workload holds, goes to the volume's \
             I/O stream pod); convert them to `io_phase` events",
        )),
        Op::Marker(_) => Ok(()),
        Op::SnapshotAllocated(s) => {
            Box::pin(crate::cbt::list(
                p,
                &ev,
                None,
                &s.snapshot,
                s.block_size,
                ctx,
            ))
            .await
        }
        Op::SnapshotDelta(d) => {
            Box::pin(crate::cbt::list(
                p,
                &ev,
                Some(&d.base),
                &d.snapshot,
                d.block_size,
                ctx,
            ))
            .await
        }
    }
}

/// Cordons `node` and moves the run's own pods off it; other tenants of the node are left
/// alone.
async fn drain(p: &Kube, ctx: &OpCtx, node: &str) -> Result<(), ProviderError> {
    p.cordon(ctx, node).await?;
    let on_node: Vec<Name> = p
        .state()
        .workloads
        .iter()
        .filter(|(_, w)| w.node.as_deref() == Some(node))
        .map(|(k, _)| k.clone())
        .collect();
    let moves = on_node.iter().map(|w| p.reschedule(ctx, w, None));
    for r in join_all(moves).await {
        r?;
    }
    phase(ctx, "drained");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::retried_snapshot_error;

    #[test]
    fn retried_errors_are_the_ones_the_snapshot_controllers_retry() {
        let aborted = "Failed to check and update snapshot content: failed to take snapshot of \
                       the volume vol-3: \"rpc error: code = Aborted desc = an operation on \
                       \\\"vol-3\\\" is already in progress\"";
        assert_eq!(retried_snapshot_error(aborted), Some("Aborted"));
        assert_eq!(
            retried_snapshot_error("rpc error: code = Unavailable desc = injected"),
            Some("Unavailable")
        );
        assert_eq!(
            retried_snapshot_error("rpc error: code = Internal desc = injected failure"),
            None
        );
        // A code named only in the description is not the error's code.
        assert_eq!(
            retried_snapshot_error("rpc error: code = InvalidArgument desc = not Aborted"),
            None
        );
        assert_eq!(
            retried_snapshot_error(
                "Snapshot status update failed, Operation cannot be fulfilled on \
                 volumesnapshots.snapshot.storage.k8s.io \"s\": the object has been modified"
            ),
            Some("status update failed")
        );
        assert_eq!(
            retried_snapshot_error("VolumeSnapshotContent is missing"),
            Some("content not yet seen")
        );
        assert_eq!(
            retried_snapshot_error(
                "Failed to create snapshot content with error snapshot class \"x\" not found"
            ),
            None
        );
    }
}
