//! Group snapshots: `groupsnapshot.storage.k8s.io/v1` VolumeGroupSnapshot (GA in
//! external-snapshotter v8.7, whose controllers use `v1`).
//!
//! A VolumeGroupSnapshot selects its member claims by label, so `group_snapshot` first labels
//! the members (`group.cnsreplay.io/<group>: <run id>`: only this run's claims match), creates
//! the group and waits for its `readyToUse`, then for one member VolumeSnapshot per claim,
//! each ready. The snapshot controller makes the members (`snapshot-<hash>`, owned by the
//! group, without the run's label), so they are listed by that owner reference rather than
//! watched; a restore of a member (`source: {group_member}`) uses the member of that claim.
//! The labels come off again once the operation is done (outside its timing), so a later
//! group of the same name cannot pick up claims by a stale label.
//!
//! `delete_group_snapshot` deletes the group (by UID) and waits until it and its members are
//! gone: the snapshot controller deletes the members with it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::future::join_all;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use replay::{OpCtx, ProviderError};
use serde_json::json;

use crate::context::{GroupState, Kube, blocking};
use crate::kube::objects::{
    self, VolumeGroupSnapshot, VolumeGroupSnapshotSource, VolumeGroupSnapshotSpec, VolumeSnapshot,
    k8s_name,
};
use crate::kube::request::delete_params;
use crate::kube::stamp::{done_at, phase, phase_at};

/// How often the members (not watched: they lack the run's label) are listed.
const MEMBER_POLL: Duration = Duration::from_millis(100);

/// The label that makes a claim a member of group `group`.
fn member_label(group: &str) -> String {
    format!("group.cnsreplay.io/{}", k8s_name(group))
}

/// The group's members that exist: claim → (VolumeSnapshot, ready, restore size).
fn members_of(list: &[VolumeSnapshot], uid: &str) -> HashMap<String, (String, bool, Option<u64>)> {
    list.iter()
        .filter(|s| s.owner_references().iter().any(|o| o.uid == uid))
        .filter_map(|s| {
            let claim = s.spec.source.persistent_volume_claim_name.clone()?;
            let st = s.status.as_ref();
            Some((
                claim,
                (
                    s.name_any(),
                    st.and_then(|x| x.ready_to_use) == Some(true),
                    st.and_then(|x| x.restore_size.as_deref())
                        .and_then(|q| trace_format::units::parse_bytes(q).ok()),
                ),
            ))
        })
        .collect()
}

impl Kube {
    /// The VolumeGroupSnapshot watch, or why the cluster cannot take group snapshots.
    fn group_watch(
        &self,
    ) -> Result<std::sync::Arc<crate::kube::watch::Watch<VolumeGroupSnapshot>>, ProviderError> {
        let w = self.watches()?;
        w.groups.clone().ok_or_else(|| {
            ProviderError::new(
                "unsupported",
                format!(
                    "the cluster serves no VolumeGroupSnapshot API (groupsnapshot.storage.k8s.io/v1, \
                     external-snapshotter v8.7+): {}",
                    w.groups_missing.as_deref().unwrap_or("no watch")
                ),
            )
        })
    }

    async fn label_members(
        &self,
        ns: &str,
        claims: &[String],
        key: &str,
        value: Option<&str>,
    ) -> Result<(), ProviderError> {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), ns);
        let patch = Patch::Merge(json!({"metadata": {"labels": {key: value}}}));
        let pp = PatchParams::default();
        let calls = claims.iter().map(|c| self.call(api.patch(c, &pp, &patch)));
        for r in join_all(calls).await {
            r?;
        }
        Ok(())
    }

    /// `group_snapshot`.
    pub(crate) async fn group_snapshot(
        &self,
        ev: &trace_format::Event,
        g: &trace_format::GroupSnapshot,
        ctx: &OpCtx,
    ) -> Result<(), ProviderError> {
        let ns = self.ns()?;
        let w = self.group_watch()?;
        let requested_ns = ctx.now_ns();
        let run_id = self.run()?.run_id.clone();
        let claims: Vec<String> = g.volumes.iter().map(|v| self.volume(v).pvc).collect();
        let by_claim: HashMap<&str, &trace_format::Name> =
            claims.iter().map(String::as_str).zip(&g.volumes).collect();
        let key = member_label(&g.group);
        self.label_members(ns, &claims, &key, Some(&run_id)).await?;
        phase(ctx, "labelled");
        let d = self.header_defaults()?;
        let trace_class = g
            .class
            .clone()
            .or_else(|| d.group_snapshot_class.clone())
            .map(|n| n.to_string());
        let name = k8s_name(&g.group);
        let obj = VolumeGroupSnapshot {
            metadata: objects::meta(&name, ns, &run_id, ev.tenant.as_deref()),
            spec: VolumeGroupSnapshotSpec {
                source: VolumeGroupSnapshotSource {
                    selector: Some(LabelSelector {
                        match_labels: Some([(key.clone(), run_id.clone())].into()),
                        match_expressions: None,
                    }),
                },
                volume_group_snapshot_class_name: self
                    .config
                    .group_snapshot_class_for(trace_class.as_deref()),
            },
            status: None,
        };
        let created = self
            .create(ctx, "volumegroupsnapshot", &obj, Some(&w))
            .await?;
        let uid = created.uid().unwrap_or_default();
        self.waiting(ctx, format!("VolumeGroupSnapshot {ns}/{name} readyToUse"));
        let (r, at) = w
            .wait_for(&name, |st| {
                let o = crate::kube::store::get(st, ns, &name, &uid)?;
                let status = o.status.as_ref()?;
                if status.ready_to_use == Some(true) {
                    return Some(Ok(()));
                }
                let msg = status.error.as_ref()?.message.as_deref()?;
                (crate::kube::snapshot_error::retried_snapshot_error(msg).is_none()).then(|| {
                    Err(ProviderError::new(
                        "group_snapshot_failed",
                        format!("VolumeGroupSnapshot {ns}/{name} status.error: {msg}"),
                    ))
                })
            })
            .await;
        if let Err(mut e) = r {
            let api: Api<VolumeGroupSnapshot> = Api::namespaced(self.client.clone(), ns);
            if let Err(d) = self
                .call(api.delete(&name, &delete_params(Some(uid), None)))
                .await
            {
                e.message
                    .push_str(&format!(" (deleting the failed group snapshot: {d})"));
            }
            let _ = self.label_members(ns, &claims, &key, None).await;
            return Err(e);
        }
        phase_at(ctx, "ready", at);
        // The members: one VolumeSnapshot per claim, each ready (a restore needs that).
        self.waiting(
            ctx,
            format!("the {} member VolumeSnapshots of {ns}/{name}", claims.len()),
        );
        let snaps: Api<VolumeSnapshot> = Api::namespaced(self.client.clone(), ns);
        let (members, list) = loop {
            let list = self.call(snaps.list(&ListParams::default())).await?;
            let m = members_of(&list.items, &uid);
            if claims
                .iter()
                .all(|c| m.get(c).is_some_and(|(_, ready, _)| *ready))
            {
                break (m, list.items);
            }
            tokio::time::sleep(MEMBER_POLL).await;
        };
        let done = Instant::now();
        phase_at(ctx, "members-ready", done);
        done_at(ctx, done);
        let ready_ns = replay::provider::ns_since(ctx.origin(), done);
        let taken = members
            .iter()
            .filter_map(|(claim, (snap, _, _))| {
                let created = list
                    .iter()
                    .find(|s| s.name_any() == *snap)
                    .and_then(|s| s.status.as_ref()?.creation_time.clone());
                Some((
                    (*by_claim.get(claim.as_str())?).clone(),
                    crate::context::Taken {
                        by: format!("group {}", g.group),
                        requested_ns,
                        ready_ns,
                        created,
                    },
                ))
            })
            .collect();
        self.state().groups.insert(
            g.group.clone(),
            GroupState {
                name: name.clone(),
                uid,
                taken,
                members: members
                    .into_iter()
                    .filter_map(|(claim, (snap, _, size))| {
                        Some(((*by_claim.get(claim.as_str())?).clone(), (snap, size)))
                    })
                    .collect(),
            },
        );
        self.label_members(ns, &claims, &key, None).await?;
        Ok(())
    }

    /// `delete_group_snapshot`.
    pub(crate) async fn delete_group_snapshot(
        &self,
        g: &trace_format::Name,
        ctx: &OpCtx,
    ) -> Result<(), ProviderError> {
        let ns = self.ns()?;
        let w = self.group_watch()?;
        let gs = self.state().groups.remove(g).ok_or_else(|| {
            ProviderError::new("not_found", format!("group snapshot {g:?} was not taken"))
        })?;
        let api: Api<VolumeGroupSnapshot> = Api::namespaced(self.client.clone(), ns);
        self.call(api.delete(&gs.name, &delete_params(Some(gs.uid.clone()), None)))
            .await?;
        phase(ctx, "deleted");
        self.waiting(
            ctx,
            format!("VolumeGroupSnapshot {ns}/{} to be gone", gs.name),
        );
        let ((), at) = w
            .wait_for(&gs.name, |st| {
                crate::kube::store::gone(st, Some(ns), &gs.name, &gs.uid).then_some(())
            })
            .await;
        phase_at(ctx, "gone", at);
        self.waiting(
            ctx,
            format!("the member VolumeSnapshots of {ns}/{} to be gone", gs.name),
        );
        let snaps: Api<VolumeSnapshot> = Api::namespaced(self.client.clone(), ns);
        loop {
            let list = self.call(snaps.list(&ListParams::default())).await?;
            if members_of(&list.items, &gs.uid).is_empty() {
                break;
            }
            tokio::time::sleep(MEMBER_POLL).await;
        }
        phase(ctx, "members-gone");
        let id = format!("{ns}/{}", gs.name);
        let _ = blocking(|| ctx.ledger().release("volumegroupsnapshot", &id));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn vs(name: &str, owner: &str, claim: &str, ready: bool) -> VolumeSnapshot {
        let mut s = VolumeSnapshot::new(
            name,
            objects::VolumeSnapshotSpec {
                source: objects::VolumeSnapshotSource {
                    persistent_volume_claim_name: Some(claim.into()),
                    volume_snapshot_content_name: None,
                },
                volume_snapshot_class_name: None,
            },
        );
        s.metadata.owner_references = Some(vec![OwnerReference {
            uid: owner.into(),
            ..OwnerReference::default()
        }]);
        s.status = Some(objects::VolumeSnapshotStatus {
            ready_to_use: Some(ready),
            restore_size: Some("1Gi".into()),
            ..objects::VolumeSnapshotStatus::default()
        });
        s
    }

    #[test]
    fn members_are_the_group_s_own_snapshots_by_claim() {
        let list = [
            vs("snapshot-a", "g1", "data", true),
            vs("snapshot-b", "g1", "wal", false),
            vs("snapshot-c", "g2", "data", true),
        ];
        let m = members_of(&list, "g1");
        assert_eq!(m.len(), 2);
        assert_eq!(m["data"], ("snapshot-a".into(), true, Some(1 << 30)));
        assert!(!m["wal"].1);
        assert!(members_of(&list, "g3").is_empty());
        assert_eq!(member_label("db-g0"), "group.cnsreplay.io/db-g0");
    }
}
