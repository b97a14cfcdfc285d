//! Which of the cluster's PersistentVolumes and VolumeAttachments are the run's.
//!
//! Both kinds are made by controllers and carry no run label, and neither can be selected
//! on the server by what ties it to the run (a PV's claimRef, a VolumeAttachment's PV), so
//! their watches are cluster-wide and filter on arrival ([`crate::kube::watch::KeepFn`]):
//!
//! - a PV is the run's when its claimRef is in the run's namespace (the provisioner writes
//!   the claimRef when it creates the PV; a PV bound later is kept from the event that binds
//!   it). Every other PV's name goes into a [`Foreign`] set, names only.
//! - a VolumeAttachment is kept unless its PV is in that set. A VolumeAttachment whose PV the
//!   PV watch has not delivered yet (the two watches are separate connections) is therefore
//!   kept, never lost; the VolumeAttachment watch starts after the PV watch has listed.
//!
//! What stays per foreign object is its PV name (tens of bytes), not the object.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::VolumeAttachment;

use crate::kube::watch::KeepFn;

/// Names of the PVs that are not the run's.
pub(crate) type Foreign = Arc<Mutex<HashSet<String>>>;

/// Whether `pv` is bound (or pre-bound) to a claim in namespace `ns`.
pub(crate) fn pv_is_runs(pv: &PersistentVolume, ns: &str) -> bool {
    pv.spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .and_then(|c| c.namespace.as_deref())
        == Some(ns)
}

/// The PV watch's filter: keeps the run's PVs and records the others' names in `foreign`
/// (a deleted PV's name leaves it).
pub(crate) fn keep_pv(ns: String, foreign: Foreign) -> KeepFn<PersistentVolume> {
    Arc::new(move |pv: &PersistentVolume, deleted: bool| {
        let ours = pv_is_runs(pv, &ns);
        let Some(name) = pv.metadata.name.as_deref() else {
            return ours;
        };
        let mut f = foreign.lock().unwrap_or_else(PoisonError::into_inner);
        if ours || deleted {
            f.remove(name);
        } else if !f.contains(name) {
            f.insert(name.to_owned());
        }
        ours
    })
}

/// The VolumeAttachment watch's filter: drops those of PVs in `foreign`.
pub(crate) fn keep_va(foreign: Foreign) -> KeepFn<VolumeAttachment> {
    Arc::new(move |va: &VolumeAttachment, _deleted: bool| {
        va.spec
            .source
            .persistent_volume_name
            .as_deref()
            .is_none_or(|pv| {
                !foreign
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .contains(pv)
            })
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeSpec};
    use k8s_openapi::api::storage::v1::{VolumeAttachmentSource, VolumeAttachmentSpec};
    use kube::api::ObjectMeta;

    use super::*;

    fn pv(name: &str, claim_ns: Option<&str>) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(PersistentVolumeSpec {
                claim_ref: claim_ns.map(|ns| ObjectReference {
                    namespace: Some(ns.to_owned()),
                    name: Some("c".to_owned()),
                    ..ObjectReference::default()
                }),
                ..PersistentVolumeSpec::default()
            }),
            status: None,
        }
    }

    fn va(pv: &str) -> VolumeAttachment {
        VolumeAttachment {
            metadata: ObjectMeta::default(),
            spec: VolumeAttachmentSpec {
                attacher: "a".to_owned(),
                node_name: "n".to_owned(),
                source: VolumeAttachmentSource {
                    persistent_volume_name: Some(pv.to_owned()),
                    ..VolumeAttachmentSource::default()
                },
            },
            status: None,
        }
    }

    #[test]
    fn only_the_runs_pvs_and_their_attachments_are_kept() {
        let foreign = Foreign::default();
        let (kp, kv) = (keep_pv("run".into(), foreign.clone()), keep_va(foreign));
        assert!(kp(&pv("ours", Some("run")), false));
        assert!(!kp(&pv("other-ns", Some("elsewhere")), false));
        assert!(!kp(&pv("unbound", None), false));
        assert!(kv(&va("ours"), false), "the run's PV: kept");
        assert!(
            !kv(&va("other-ns"), false),
            "a foreign PV's attachment: dropped"
        );
        assert!(!kv(&va("unbound"), false));
        assert!(
            kv(&va("not-seen-yet"), false),
            "a PV not delivered yet: kept, not lost"
        );
    }

    #[test]
    fn a_pv_bound_later_or_deleted_leaves_the_foreign_set() {
        let foreign = Foreign::default();
        let (kp, kv) = (
            keep_pv("run".into(), foreign.clone()),
            keep_va(foreign.clone()),
        );
        assert!(!kp(&pv("p", None), false));
        assert!(!kv(&va("p"), false));
        assert!(kp(&pv("p", Some("run")), false), "bound to the run's claim");
        assert!(kv(&va("p"), false));
        assert!(!kp(&pv("q", None), false));
        assert!(!kp(&pv("q", None), true));
        assert!(foreign.lock().unwrap().is_empty(), "{foreign:?}");
    }
}
