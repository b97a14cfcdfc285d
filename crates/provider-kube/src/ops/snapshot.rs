//! `snapshot` and `delete_snapshot`: a VolumeSnapshot, done when readyToUse (its retried errors
//! waited through, [`crate::kube::snapshot_error`]) or gone.

use std::fmt::Write as _;
use std::time::Instant;

use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use replay::{OpCtx, ProviderError};
use trace_format::{Event, Name};

use crate::context::{Kube, blocking};
use crate::kube::objects::{self, VolumeSnapshot, k8s_name};
use crate::kube::request::delete_params;
use crate::kube::snapshot_error::retried_snapshot_error;
use crate::kube::stamp::{done_at, phase, phase_at};
use crate::kube::store::{get, gone, missing};

impl Kube {
    pub(crate) async fn snapshot(
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
            crate::context::Taken {
                by: format!("snapshot {}", s.snapshot),
                requested_ns,
                ready_ns: replay::provider::ns_since(ctx.origin(), at),
                created,
            },
        );
        Ok(())
    }

    pub(crate) async fn delete_snapshot(&self, s: &Name, ctx: &OpCtx) -> Result<(), ProviderError> {
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
