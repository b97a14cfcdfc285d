//! `create_volume` (also restore and clone) and `delete_volume`.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use replay::{OpCtx, ProviderError};
use trace_format::{Event, Name, VolumeMode, VolumeSource};

use crate::context::{Kube, VolState, blocking};
use crate::kube::objects::{self, DataSource, PvcSpec, k8s_name};
use crate::kube::request::delete_params;
use crate::kube::stamp::{phase, phase_at};
use crate::kube::store::{gone, missing};

impl Kube {
    pub(crate) async fn create_volume(
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

    pub(crate) async fn delete_volume(&self, v: &Name, ctx: &OpCtx) -> Result<(), ProviderError> {
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
}

fn storage_of(
    m: &std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> Option<u64> {
    trace_format::units::parse_bytes(&m.get("storage")?.0).ok()
}
