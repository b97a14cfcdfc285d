//! What a StorageClass can do, learnt at pre-flight before anything is created: whether its
//! provisioner is a CSI driver (a CSIDriver object of that name), `allowVolumeExpansion`, a
//! VolumeSnapshotClass whose driver is its provisioner, and whether the API server serves the
//! VolumeGroupSnapshot and VolumeAttributesClass APIs. An operation of the trace that its
//! volume's class cannot do is refused there, naming the event and the reason, instead of
//! timing out in the run (a snapshot of a hostPath volume never becomes ready; nothing tells
//! the client why).
//!
//! Only what is certain is refused: a provisioner without a CSIDriver object counts as "not
//! CSI" (a CSI driver may omit it, but every common one ships it), and what the credentials
//! may not read is not held against the class.

use std::collections::BTreeMap;

use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::api::{Api, DynamicObject, ListParams};

use crate::context::Kube;
use crate::kube::discovery::{Served, serves};

/// An operation that needs something of its volume's StorageClass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Capability {
    /// `snapshot`: a VolumeSnapshotClass for the class's provisioner.
    Snapshot,
    /// `create_volume` from another volume: a CSI driver.
    Clone,
    /// `resize`: `allowVolumeExpansion: true`.
    Expand,
    /// `modify_volume`: the VolumeAttributesClass API and a CSI driver.
    Modify,
    /// `group_snapshot`: the VolumeGroupSnapshot API and a CSI driver.
    GroupSnapshot,
}

impl Capability {
    /// The trace operation that needs it.
    pub fn op(self) -> &'static str {
        match self {
            Self::Snapshot => "snapshot",
            Self::Clone => "create_volume from a volume (clone)",
            Self::Expand => "resize",
            Self::Modify => "modify_volume",
            Self::GroupSnapshot => "group_snapshot",
        }
    }
}

/// A capability the trace needs of one StorageClass (None: the cluster default), with the
/// VolumeSnapshotClass a snapshot names (None: the default for its driver).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Need {
    /// What is needed.
    pub capability: Capability,
    /// Of which StorageClass.
    pub storage_class: Option<String>,
    /// The VolumeSnapshotClass of a [`Capability::Snapshot`].
    pub snapshot_class: Option<String>,
}

/// Where the trace needs it: the first use and every event id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NeedUses {
    /// The first event needing it, as pre-flight names it.
    pub first: String,
    /// Every event needing it.
    pub events: Vec<u64>,
}

impl NeedUses {
    pub(crate) fn describe(&self) -> String {
        match self.events.len() {
            0 | 1 => self.first.clone(),
            n => format!("{}, and {} more event(s)", self.first, n - 1),
        }
    }
}

/// Records that event `id` (described by `at`) needs `need`.
pub(crate) fn add(needs: &mut BTreeMap<Need, NeedUses>, need: Need, id: u64, at: &str) {
    let u = needs.entry(need).or_default();
    if u.events.is_empty() {
        u.first = at.to_owned();
    }
    // A group snapshot of two volumes of one class needs it once.
    if u.events.last() != Some(&id) {
        u.events.push(id);
    }
}

fn not_csi(provisioner: &str) -> String {
    format!(
        "its provisioner {provisioner} is not a CSI driver (there is no CSIDriver {provisioner})"
    )
}

impl Kube {
    /// Checks every need against the classes (already listed by pre-flight), the
    /// VolumeSnapshotClasses (None: not listed, or not listable: already reported), the
    /// CSIDrivers and discovery; calls `fail` for each one the class cannot do.
    pub(crate) async fn check_capabilities(
        &self,
        needs: &BTreeMap<Need, NeedUses>,
        classes: &[StorageClass],
        snapshot_classes: Option<&[DynamicObject]>,
        fail: &mut impl FnMut(String),
    ) {
        if needs.is_empty() {
            return;
        }
        let c = self.client.clone();
        self.limiter.acquire().await;
        // None: not readable here; the CSI checks are then skipped, not held against a class.
        let drivers: Option<Vec<String>> = Api::<CSIDriver>::all(c.clone())
            .list(&ListParams::default())
            .await
            .ok()
            .map(|l| {
                l.items
                    .into_iter()
                    .filter_map(|d| d.metadata.name)
                    .collect()
            });
        let want = |k: Capability| needs.keys().any(|n| n.capability == k);
        let group_api = if want(Capability::GroupSnapshot) {
            self.limiter.acquire().await;
            Some(
                serves(
                    &c,
                    "groupsnapshot.storage.k8s.io/v1",
                    "volumegroupsnapshots",
                )
                .await,
            )
        } else {
            None
        };
        let vac_api = if want(Capability::Modify) {
            self.limiter.acquire().await;
            Some(serves(&c, "storage.k8s.io/v1", "volumeattributesclasses").await)
        } else {
            None
        };
        let default_class = classes
            .iter()
            .find(|s| {
                s.metadata.annotations.as_ref().is_some_and(|a| {
                    a.get("storageclass.kubernetes.io/is-default-class")
                        .is_some_and(|v| v == "true")
                })
            })
            .and_then(|s| s.metadata.name.clone());
        for (need, uses) in needs {
            // A missing class (or no default) is already reported by pre-flight.
            let Some(name) = need.storage_class.clone().or_else(|| default_class.clone()) else {
                continue;
            };
            let Some(sc) = classes
                .iter()
                .find(|s| s.metadata.name.as_deref() == Some(&name))
            else {
                continue;
            };
            let prov = sc.provisioner.as_str();
            let csi = drivers.as_ref().map(|d| d.iter().any(|n| n == prov));
            let api_missing = |s: &Option<Served>| match s {
                Some(Served::No(why)) => Some(why.clone()),
                _ => None,
            };
            let reason = match need.capability {
                Capability::Expand => (sc.allow_volume_expansion != Some(true)).then(|| {
                    format!(
                        "it does not allow volume expansion (allowVolumeExpansion: {})",
                        sc.allow_volume_expansion
                            .map_or("unset".to_owned(), |b| b.to_string())
                    )
                }),
                Capability::Snapshot => snapshot_class_reason(
                    prov,
                    csi,
                    need.snapshot_class.as_deref(),
                    snapshot_classes,
                ),
                Capability::Clone => (csi == Some(false))
                    .then(|| format!("{}; Kubernetes clones only CSI volumes", not_csi(prov))),
                Capability::Modify => api_missing(&vac_api)
                    .map(|why| format!("{why} (VolumeAttributesClass, Kubernetes 1.34+)"))
                    .or_else(|| {
                        (csi == Some(false)).then(|| {
                            format!(
                                "{}; only CSI volumes take a VolumeAttributesClass",
                                not_csi(prov)
                            )
                        })
                    }),
                Capability::GroupSnapshot => api_missing(&group_api)
                    .map(|why| format!("{why} (the VolumeGroupSnapshot CRDs are not installed)"))
                    .or_else(|| {
                        (csi == Some(false)).then(|| {
                            format!(
                                "{}; only CSI volumes are snapshotted together",
                                not_csi(prov)
                            )
                        })
                    }),
            };
            if let Some(reason) = reason {
                fail(format!(
                    "{} ({}) is not supported by StorageClass {name}: {reason}",
                    need.capability.op(),
                    uses.describe()
                ));
            }
        }
    }
}

/// Why a snapshot of a volume provisioned by `prov` cannot be taken with `named` (None: the
/// default class for its driver), or None when it can (or the classes are unknown).
fn snapshot_class_reason(
    prov: &str,
    csi: Option<bool>,
    named: Option<&str>,
    classes: Option<&[DynamicObject]>,
) -> Option<String> {
    let classes = classes?;
    let driver = |o: &DynamicObject| {
        o.data
            .get("driver")
            .and_then(|d| d.as_str())
            .map(str::to_owned)
    };
    let is_default = |o: &DynamicObject| {
        o.metadata.annotations.as_ref().is_some_and(|a| {
            a.get("snapshot.storage.kubernetes.io/is-default-class")
                .is_some_and(|v| v == "true")
        })
    };
    let matching: Vec<&DynamicObject> = classes
        .iter()
        .filter(|o| driver(o).as_deref() == Some(prov))
        .collect();
    if matching.is_empty() {
        let have: Vec<String> = classes
            .iter()
            .map(|o| {
                format!(
                    "{} (driver {})",
                    o.metadata.name.as_deref().unwrap_or("?"),
                    driver(o).unwrap_or_else(|| "?".into())
                )
            })
            .collect();
        let csi_note = if csi == Some(false) {
            format!("{} and ", not_csi(prov))
        } else {
            String::new()
        };
        return Some(format!(
            "{csi_note}no VolumeSnapshotClass has driver {prov} (the cluster has: {})",
            if have.is_empty() {
                "none".to_owned()
            } else {
                have.join(", ")
            }
        ));
    }
    match named {
        Some(n) => {
            let o = classes
                .iter()
                .find(|o| o.metadata.name.as_deref() == Some(n))?;
            let d = driver(o).unwrap_or_else(|| "?".into());
            (d != prov).then(|| {
                format!(
                    "VolumeSnapshotClass {n} is for driver {d}, and its volumes are provisioned \
                     by {prov}"
                )
            })
        }
        // With no default class at all pre-flight already says so.
        None if classes.iter().any(is_default) && !matching.iter().any(|o| is_default(o)) => {
            Some(format!(
                "no default VolumeSnapshotClass has driver {prov}; pass --snapshot-class (for \
                 {prov}: {})",
                matching
                    .iter()
                    .filter_map(|o| o.metadata.name.clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use kube::api::DynamicObject;

    use super::*;

    fn vsc(name: &str, driver: &str, default: bool) -> DynamicObject {
        let mut annotations = serde_json::Map::new();
        if default {
            annotations.insert(
                "snapshot.storage.kubernetes.io/is-default-class".into(),
                "true".into(),
            );
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
            "metadata": {"name": name, "annotations": annotations},
            "driver": driver, "deletionPolicy": "Delete",
        }))
        .unwrap()
    }

    #[test]
    fn a_snapshot_needs_a_class_for_its_volumes_driver() {
        let classes = [vsc("a", "csi.a", true), vsc("b", "csi.b", false)];
        let r = |prov, csi, named| snapshot_class_reason(prov, csi, named, Some(&classes));
        // A class for the driver, named or the default.
        assert_eq!(r("csi.a", Some(true), None), None);
        assert_eq!(r("csi.b", Some(true), Some("b")), None);
        // None for the driver at all: say so, and whether it is CSI.
        let e = r("rancher.io/local-path", Some(false), None).unwrap();
        assert!(
            e.contains("is not a CSI driver")
                && e.contains("no VolumeSnapshotClass has driver rancher.io/local-path")
                && e.contains("a (driver csi.a), b (driver csi.b)"),
            "{e}"
        );
        // The named class is for another driver.
        let e = r("csi.b", Some(true), Some("a")).unwrap();
        assert!(
            e.contains("VolumeSnapshotClass a is for driver csi.a"),
            "{e}"
        );
        // The default is for another driver and none for this one is.
        let e = r("csi.b", Some(true), None).unwrap();
        assert!(
            e.contains("no default VolumeSnapshotClass has driver csi.b"),
            "{e}"
        );
        // A name the cluster lacks is pre-flight's other check; unknown classes check nothing.
        assert_eq!(r("csi.b", Some(true), Some("zz")), None);
        assert_eq!(snapshot_class_reason("x", None, None, None), None);
    }
}
