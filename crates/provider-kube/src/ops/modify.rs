//! Changes to a bound volume: `resize` (and the recovery from a failed one) and
//! `modify_volume` (a VolumeAttributesClass change), each a patch of the claim followed by
//! the claim's status as the external-resizer writes it.
//!
//! The resizer reports both through the claim, so both complete and fail on the claim's
//! watch: a resize is done when `status.capacity` reaches the request, and refused when
//! `status.allocatedResourceStatuses.storage` says `…Infeasible` for the size it was asked
//! (INVALID_ARGUMENT, OUT_OF_RANGE or NOT_FOUND from the driver); a modify is done when
//! `status.currentVolumeAttributesClassName` is the class and `modifyVolumeStatus` is gone,
//! and refused when `modifyVolumeStatus.status` is `Infeasible` for it (the driver's
//! INVALID_ARGUMENT). Errors the resizer retries (UNAVAILABLE, ABORTED, …) keep the
//! operation waiting, as for a user watching `kubectl get pvc`; its timeout ends it.
//!
//! Lowering the request after a failed resize (Kubernetes' recovery from expansion failure,
//! GA in 1.34) is a `resize` to a smaller size: the API server accepts it only above the
//! claim's `status.capacity`, and the resizer then expands to the lowered size.
//!
//! The classes a trace names are declared in its header with parameters in cnsreplay's own
//! storage vocabulary. A VolumeAttributesClass of that name already in the cluster is used
//! as it is (a notice says when its parameters differ); a missing one is created for the run
//! (labelled, in the ledger, deleted at cleanup) for the driver of the run's storage class.

use std::collections::BTreeMap;
use std::time::Instant;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimStatus};
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttributesClass};
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use replay::{OpCtx, ProviderError, RunInfo};
use serde_json::json;

use crate::context::{Kube, blocking, io_err, uid_detail};
use crate::kube::objects;
use crate::kube::stamp::{phase, phase_at};

/// The claim's condition message of `kind` (e.g. `ControllerResizeError`), if it has one.
fn condition(st: &PersistentVolumeClaimStatus, kind: &str) -> Option<String> {
    st.conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| c.message.clone().unwrap_or_else(|| "(no message)".into()))
}

fn storage(
    m: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> Option<u64> {
    trace_format::units::parse_bytes(&m?.get("storage")?.0).ok()
}

/// Where a resize or a modify stands in the claim's status.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// Carried out (the capacity reached the request; the class is current).
    Done,
    /// The resizer refused it for good, with the claim's condition message.
    Infeasible(String),
    /// Still going; the resizer's current step, if it names one.
    Step(Option<&'static str>),
}

fn resize_state(st: &PersistentVolumeClaimStatus, size: u64) -> Verdict {
    if storage(st.capacity.as_ref()).is_some_and(|c| c >= size) {
        return Verdict::Done;
    }
    // The resizer's statuses are about the size it was asked last (allocatedResources).
    if storage(st.allocated_resources.as_ref()) != Some(size) {
        return Verdict::Step(None);
    }
    let s = st
        .allocated_resource_statuses
        .as_ref()
        .and_then(|m| m.get("storage"))
        .map(String::as_str);
    match s {
        Some("ControllerResizeInfeasible") => Verdict::Infeasible(
            condition(st, "ControllerResizeError").unwrap_or_else(|| s.unwrap_or("").into()),
        ),
        Some("NodeResizeInfeasible") => Verdict::Infeasible(
            condition(st, "NodeResizeError").unwrap_or_else(|| s.unwrap_or("").into()),
        ),
        Some("ControllerResizeInProgress") => Verdict::Step(Some("controller-resize")),
        Some("NodeResizePending") => Verdict::Step(Some("node-resize-pending")),
        Some("NodeResizeInProgress") => Verdict::Step(Some("node-resize")),
        _ => Verdict::Step(None),
    }
}

fn modify_state(st: &PersistentVolumeClaimStatus, class: &str) -> Verdict {
    let mvs = st.modify_volume_status.as_ref();
    if st.current_volume_attributes_class_name.as_deref() == Some(class) && mvs.is_none() {
        return Verdict::Done;
    }
    let Some(m) = mvs.filter(|m| m.target_volume_attributes_class_name.as_deref() == Some(class))
    else {
        return Verdict::Step(None);
    };
    match m.status.as_str() {
        "Infeasible" => Verdict::Infeasible(
            condition(st, "ModifyVolumeError").unwrap_or_else(|| "Infeasible".into()),
        ),
        "InProgress" => Verdict::Step(Some("in-progress")),
        "Pending" => Verdict::Step(Some("pending")),
        _ => Verdict::Step(None),
    }
}

/// The first time each step was seen, in order.
#[derive(Default)]
struct Steps(Vec<(&'static str, Instant)>);

impl Steps {
    fn saw(&mut self, step: Option<&'static str>) {
        if let Some(s) = step
            && !self.0.iter().any(|(n, _)| *n == s)
        {
            self.0.push((s, Instant::now()));
        }
    }

    fn stamp(&self, ctx: &OpCtx) {
        for (n, at) in &self.0 {
            phase_at(ctx, n, *at);
        }
    }
}

impl Kube {
    /// Waits on claim `claim` (UID `uid`) until `judge` gives a verdict, stamping each step
    /// it saw on the way and then `done` or `infeasible`; `Err` carries the refusal's message.
    async fn claim_verdict(
        &self,
        ctx: &OpCtx,
        claim: &str,
        uid: &str,
        done: &str,
        judge: impl Fn(&PersistentVolumeClaimStatus) -> Verdict,
    ) -> Result<Result<(), String>, ProviderError> {
        let ns = self.ns()?;
        let mut steps = Steps::default();
        let (state, at) = self
            .watches()?
            .pvc
            .wait_for(claim, |s| {
                let o = crate::kube::store::get(s, ns, claim, uid)?;
                match judge(o.status.as_ref()?) {
                    Verdict::Step(step) => {
                        steps.saw(step);
                        None
                    }
                    v => Some(v),
                }
            })
            .await;
        steps.stamp(ctx);
        Ok(match state {
            Verdict::Infeasible(msg) => {
                phase_at(ctx, "infeasible", at);
                Err(msg)
            }
            _ => {
                phase_at(ctx, done, at);
                Ok(())
            }
        })
    }

    /// `resize`: patches the claim's request and waits for the resizer's verdict.
    pub(crate) async fn resize(
        &self,
        r: &trace_format::Resize,
        ctx: &OpCtx,
    ) -> Result<(), ProviderError> {
        let ns = self.ns()?;
        let vs = self.volume(&r.volume);
        let watches = self.watches()?;
        let before = watches
            .pvc
            .store()
            .get(&kube::runtime::reflector::ObjectRef::new(&vs.pvc).within(ns))
            .and_then(|o| storage(o.spec.as_ref()?.resources.as_ref()?.requests.as_ref()));
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), ns);
        let patched = self
            .call(api.patch(
                &vs.pvc,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"spec": {"resources": {"requests": {"storage": r.size.to_string()}}}}),
                ),
            ))
            .await?;
        // A lower request than the claim had: the recovery from a failed resize.
        phase(
            ctx,
            if before.is_some_and(|b| r.size < b) {
                "request-lowered"
            } else {
                "patched"
            },
        );
        let uid = patched.uid().unwrap_or_default();
        self.waiting(
            ctx,
            format!("PVC {ns}/{} status.capacity to reach {}", vs.pvc, r.size),
        );
        self.claim_verdict(ctx, &vs.pvc, &uid, "resized", |st| resize_state(st, r.size))
            .await?
            .map_err(|msg| {
                ProviderError::new(
                    "infeasible",
                    format!(
                        "PVC {ns}/{}: the resize to {} bytes was refused: {msg}",
                        vs.pvc, r.size
                    ),
                )
            })
    }

    /// `modify_volume`: sets the claim's `volumeAttributesClassName` and waits for the
    /// resizer's verdict.
    pub(crate) async fn modify_volume(
        &self,
        m: &trace_format::ModifyVolume,
        ctx: &OpCtx,
    ) -> Result<(), ProviderError> {
        let ns = self.ns()?;
        let vs = self.volume(&m.volume);
        let class = m.class.to_string();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), ns);
        let patched = self
            .call(api.patch(
                &vs.pvc,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"volumeAttributesClassName": class}})),
            ))
            .await?;
        phase(ctx, "patched");
        let uid = patched.uid().unwrap_or_default();
        self.waiting(
            ctx,
            format!(
                "PVC {ns}/{} status.currentVolumeAttributesClassName to be {class}",
                vs.pvc
            ),
        );
        self.claim_verdict(ctx, &vs.pvc, &uid, "modified", |st| {
            modify_state(st, &class)
        })
        .await?
        .map_err(|msg| {
            ProviderError::new(
                "infeasible",
                format!(
                    "PVC {ns}/{}: VolumeAttributesClass {class} was refused: {msg}",
                    vs.pvc
                ),
            )
        })
    }

    /// Before the clock: each attributes class the trace declares is found in the cluster or
    /// created for the run. Returns notices.
    pub(crate) async fn ensure_attributes_classes(
        &self,
        run: &RunInfo,
    ) -> Result<Vec<String>, ProviderError> {
        let mut notices = Vec::new();
        if run.header.attributes_classes.is_empty() {
            return Ok(notices);
        }
        let api: Api<VolumeAttributesClass> = Api::all(self.client.clone());
        let ledger = replay::Ledger::open(&run.run_dir).map_err(io_err)?;
        for (name, params) in &run.header.attributes_classes {
            let name = objects::k8s_name(name);
            match self.call(api.get_opt(&name)).await {
                Ok(Some(vac)) => {
                    let theirs = vac.parameters.clone().unwrap_or_default();
                    if !params.is_empty() && &theirs != params {
                        notices.push(format!(
                            "kube: VolumeAttributesClass {name} exists with parameters \
                             {theirs:?} (driver {}); the trace declares {params:?}: the \
                             cluster's class is used",
                            vac.driver_name
                        ));
                    }
                }
                Ok(None) => {
                    let driver = self.run_driver().await?;
                    let obj = VolumeAttributesClass {
                        metadata: ObjectMeta {
                            name: Some(name.clone()),
                            labels: Some(
                                [(objects::RUN_LABEL.to_owned(), run.run_id.clone())].into(),
                            ),
                            ..ObjectMeta::default()
                        },
                        driver_name: driver,
                        parameters: Some(params.clone()),
                    };
                    blocking(|| {
                        ledger.intend("volumeattributesclass", &name, serde_json::Value::Null)
                    })
                    .map_err(io_err)?;
                    let created = match self.call(api.create(&PostParams::default(), &obj)).await {
                        Ok(c) => c,
                        // get_opt reads a 404 of the whole API as "no such object".
                        Err(e) if e.class == "not_found" => {
                            blocking(|| ledger.release("volumeattributesclass", &name))
                                .map_err(io_err)?;
                            notices.push(format!(
                                "kube: the cluster serves no VolumeAttributesClass API \
                                 (storage.k8s.io/v1, Kubernetes 1.34+): modify_volume will \
                                 fail ({})",
                                e.message
                            ));
                            break;
                        }
                        Err(e) => return Err(e),
                    };
                    blocking(|| {
                        ledger.intend(
                            "volumeattributesclass",
                            &name,
                            uid_detail(&created.metadata),
                        )
                    })
                    .map_err(io_err)?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(notices)
    }

    /// The CSI driver of the storage class the run's volumes use (the trace's default class
    /// through this configuration, or the cluster's default class).
    async fn run_driver(&self) -> Result<String, ProviderError> {
        let d = self.header_defaults()?;
        let class = self.config.storage_class_for(d.storage_class.as_deref());
        let api: Api<StorageClass> = Api::all(self.client.clone());
        let sc = match &class {
            Some(c) => self.call(api.get_opt(c)).await?,
            None => self
                .call(api.list(&kube::api::ListParams::default()))
                .await?
                .items
                .into_iter()
                .find(|s| {
                    s.annotations()
                        .get("storageclass.kubernetes.io/is-default-class")
                        .is_some_and(|v| v == "true")
                }),
        };
        sc.map(|s| s.provisioner).ok_or_else(|| {
            ProviderError::new(
                "not_found",
                format!(
                    "no StorageClass {} to take the driver of a VolumeAttributesClass from",
                    class.as_deref().unwrap_or("(the cluster default)")
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ModifyVolumeStatus, PersistentVolumeClaimCondition};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn q(v: &str) -> Option<BTreeMap<String, Quantity>> {
        Some([("storage".to_owned(), Quantity(v.to_owned()))].into())
    }

    fn cond(kind: &str, msg: &str) -> Option<Vec<PersistentVolumeClaimCondition>> {
        Some(vec![PersistentVolumeClaimCondition {
            type_: kind.to_owned(),
            message: Some(msg.to_owned()),
            status: "True".to_owned(),
            ..PersistentVolumeClaimCondition::default()
        }])
    }

    #[test]
    fn a_resize_is_done_refused_or_on_its_way_as_the_claim_says() {
        let mut st = PersistentVolumeClaimStatus {
            capacity: q("1Gi"),
            ..PersistentVolumeClaimStatus::default()
        };
        assert_eq!(resize_state(&st, 2 << 30), Verdict::Step(None));
        st.allocated_resources = q("2Gi");
        st.allocated_resource_statuses =
            Some([("storage".into(), "ControllerResizeInProgress".into())].into());
        assert_eq!(
            resize_state(&st, 2 << 30),
            Verdict::Step(Some("controller-resize"))
        );
        st.allocated_resource_statuses =
            Some([("storage".into(), "ControllerResizeInfeasible".into())].into());
        st.conditions = cond("ControllerResizeError", "out of range: 2Gi > maxSize");
        assert_eq!(
            resize_state(&st, 2 << 30),
            Verdict::Infeasible("out of range: 2Gi > maxSize".into())
        );
        // The refusal was of another size (the request lowered since): not this resize's.
        assert_eq!(resize_state(&st, 1536 << 20), Verdict::Step(None));
        st.capacity = q("1536Mi");
        assert_eq!(resize_state(&st, 1536 << 20), Verdict::Done);
    }

    #[test]
    fn a_modify_is_done_refused_or_on_its_way_as_the_claim_says() {
        let mut st = PersistentVolumeClaimStatus::default();
        assert_eq!(modify_state(&st, "gold"), Verdict::Step(None));
        st.modify_volume_status = Some(ModifyVolumeStatus {
            status: "InProgress".into(),
            target_volume_attributes_class_name: Some("gold".into()),
        });
        assert_eq!(
            modify_state(&st, "gold"),
            Verdict::Step(Some("in-progress"))
        );
        st.modify_volume_status = Some(ModifyVolumeStatus {
            status: "Infeasible".into(),
            target_volume_attributes_class_name: Some("gold".into()),
        });
        st.conditions = cond("ModifyVolumeError", "unknown parameter \"iops\"");
        assert_eq!(
            modify_state(&st, "gold"),
            Verdict::Infeasible("unknown parameter \"iops\"".into())
        );
        // Another class's refusal is not this modify's.
        assert_eq!(modify_state(&st, "silver"), Verdict::Step(None));
        st.modify_volume_status = None;
        st.current_volume_attributes_class_name = Some("gold".into());
        assert_eq!(modify_state(&st, "gold"), Verdict::Done);
    }
}
