//! What one completed request means for storage: the mapping of a request (verb, resource,
//! subresource, bodies) to an [`Act`], the table in `docs/import.md`.

use std::collections::BTreeMap;

use serde_json::Value;
use trace_format::{AccessMode, VolumeMode};

use super::read::{Ev, Reader, get, get_str, meta_name};
use super::{Act, Src};
use crate::BadInput;

impl Reader<'_> {
    /// Maps a completed request; `None` when it means nothing for storage (counted).
    pub(super) fn act(
        &mut self,
        ev: &Ev<'_>,
        prefix: &str,
    ) -> Result<Option<(Act, Option<String>)>, BadInput> {
        let field = |f: &str| format!("{prefix}{f}");
        let req = ev.request;
        let name = ev
            .name
            .or_else(|| meta_name(req))
            .or_else(|| meta_name(ev.response));
        let namespace = ev
            .namespace
            .or_else(|| req.and_then(|o| get_str(o, &["metadata", "namespace"])));
        let qualify = |n: &str| match namespace {
            Some(ns) => format!("{ns}/{n}"),
            None => n.to_owned(),
        };
        let tenant = namespace.map(str::to_owned);
        let act = match (ev.resource, ev.subresource, ev.verb) {
            ("persistentvolumeclaims", "", "create") => {
                let Some(n) = name else {
                    return Err(self.bad(field("objectRef.name"), "a PVC create without a name"));
                };
                let vol = qualify(n);
                match req {
                    None => {
                        self.counts.metadata_volumes += 1;
                        Act::CreatePvc {
                            vol,
                            size: None,
                            class: None,
                            access: None,
                            mode: None,
                            source: None,
                            pv: None,
                            attributes_class: None,
                            labels: BTreeMap::new(),
                        }
                    }
                    Some(o) => self.pvc(o, &field("requestObject."), vol, &qualify)?,
                }
            }
            ("persistentvolumeclaims", "", "delete") => match name {
                Some(n) => Act::DeletePvc { vol: qualify(n) },
                None => return self.unrelated(),
            },
            ("persistentvolumeclaims", "", "update" | "patch") => {
                let (Some(n), Some(o)) = (name, req) else {
                    self.counts.no_body += u64::from(name.is_some());
                    return if name.is_some() {
                        Ok(None)
                    } else {
                        self.unrelated()
                    };
                };
                // The pvc-protection controller removing its finalizer from a PVC being
                // deleted: bookkeeping, not a resize.
                if get(o, &["metadata", "deletionTimestamp"]).is_some() {
                    return self.unrelated();
                }
                let f = field("requestObject.");
                let size = self.patched_size(o, &f)?;
                let pv = get_str(o, &["spec", "volumeName"]).map(str::to_owned);
                let attributes_class = patched_class(o);
                let labels = patched_labels(o);
                if size.is_none() && pv.is_none() && attributes_class.is_none() && labels.is_empty()
                {
                    return self.unrelated();
                }
                Act::UpdatePvc {
                    vol: qualify(n),
                    size,
                    pv,
                    attributes_class,
                    labels,
                }
            }
            ("volumegroupsnapshots", "", "create") => {
                let (Some(n), Some(o)) = (name, req) else {
                    self.counts.no_body += 1;
                    return Ok(None);
                };
                let Some(sel) = get(o, &["spec", "source", "selector", "matchLabels"])
                    .and_then(Value::as_object)
                else {
                    // Pre-provisioned (volumeGroupSnapshotContentName): no volumes to take.
                    return self.unrelated();
                };
                Act::CreateGroup {
                    group: qualify(n),
                    namespace: namespace.map(str::to_owned),
                    selector: sel
                        .iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                        .collect(),
                    class: get_str(o, &["spec", "volumeGroupSnapshotClassName"]).map(str::to_owned),
                }
            }
            ("volumegroupsnapshots", "", "delete") => match name {
                Some(n) => Act::DeleteGroup { group: qualify(n) },
                None => return self.unrelated(),
            },
            ("nodes", "", verb @ ("update" | "patch")) => {
                let (Some(n), Some(o)) = (name, req) else {
                    return self.unrelated();
                };
                // A whole object says whether the taint is on; a patch (strategic merge
                // patches list only the taints they change) only that it was put on.
                match (verb, node_taints(o)) {
                    ("update", Some(on)) | ("patch", Some(on @ true)) => Act::Taint {
                        node: n.to_owned(),
                        out_of_service: on,
                    },
                    _ => return self.unrelated(),
                }
            }
            ("volumeattributesclasses", "", "create") => {
                let (Some(n), Some(o)) = (name, req) else {
                    self.counts.no_body += 1;
                    return Ok(None);
                };
                let params = get(o, &["parameters"])
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| {
                                let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                                (k.clone(), v)
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                Act::CreateVac {
                    name: n.to_owned(),
                    params,
                }
            }
            ("volumesnapshots", "", "create") => {
                let (Some(n), Some(o)) = (name, req) else {
                    self.counts.no_body += 1;
                    return Ok(None);
                };
                let Some(pvc) = get_str(o, &["spec", "source", "persistentVolumeClaimName"]) else {
                    // Pre-provisioned (volumeSnapshotContentName): no volume to snapshot.
                    return self.unrelated();
                };
                // A group's member, made by the snapshot controller: part of the group.
                let group = get(o, &["metadata", "ownerReferences"])
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .find(|r| get_str(r, &["kind"]) == Some("VolumeGroupSnapshot"))
                    .and_then(|r| get_str(r, &["name"]));
                if let Some(g) = group {
                    return Ok(Some((
                        Act::CreateMember {
                            snap: qualify(n),
                            group: qualify(g),
                            vol: qualify(pvc),
                        },
                        tenant,
                    )));
                }
                Act::CreateSnap {
                    snap: qualify(n),
                    vol: qualify(pvc),
                    class: get_str(o, &["spec", "volumeSnapshotClassName"]).map(str::to_owned),
                }
            }
            ("volumesnapshots", "", "delete") => match name {
                Some(n) => Act::DeleteSnap { snap: qualify(n) },
                None => return self.unrelated(),
            },
            ("pods", "", "create") => {
                let Some(o) = req else {
                    self.counts.no_body += 1;
                    return Ok(None);
                };
                let Some(n) = name else {
                    return Err(self.bad(
                        field("objectRef.name"),
                        "a pod create without a name (generateName pods need level \
                         RequestResponse for the name)",
                    ));
                };
                let pvcs: Vec<String> = get(o, &["spec", "volumes"])
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|v| get_str(v, &["persistentVolumeClaim", "claimName"]))
                    .map(&qualify)
                    .collect();
                if pvcs.is_empty() {
                    self.counts.pods_without_pvcs += 1;
                    return Ok(None);
                }
                Act::CreatePod {
                    pod: qualify(n),
                    pvcs,
                    node: get_str(o, &["spec", "nodeName"]).map(str::to_owned),
                }
            }
            ("pods", "", "delete") => match name {
                Some(n) => Act::DeletePod { pod: qualify(n) },
                None => return self.unrelated(),
            },
            ("persistentvolumes", "", "create") => {
                let claim = req.and_then(|o| get(o, &["spec", "claimRef"]));
                match (name, claim) {
                    (Some(pv), Some(c)) => {
                        match (get_str(c, &["namespace"]), get_str(c, &["name"])) {
                            (Some(ns), Some(n)) => Act::BindPv {
                                pv: pv.to_owned(),
                                vol: format!("{ns}/{n}"),
                            },
                            _ => return self.unrelated(),
                        }
                    }
                    _ => return self.unrelated(),
                }
            }
            ("pods", "binding", "create") => {
                let (Some(n), Some(o)) = (name, req) else {
                    self.counts.no_body += 1;
                    return Ok(None);
                };
                let Some(node) = get_str(o, &["target", "name"]) else {
                    return Err(self.bad(
                        field("requestObject.target.name"),
                        "a binding without a node",
                    ));
                };
                self.counts.bindings.0 += 1;
                Act::BindPod {
                    pod: qualify(n),
                    node: node.to_owned(),
                }
            }
            ("volumeattachments", "", "create") => {
                match (
                    name,
                    req.and_then(|o| get_str(o, &["spec", "source", "persistentVolumeName"])),
                ) {
                    (Some(va), Some(pv)) => {
                        self.counts.volume_attachments.0 += 1;
                        Act::CreateVa {
                            va: va.to_owned(),
                            pv: pv.to_owned(),
                            node: req
                                .and_then(|o| get_str(o, &["spec", "nodeName"]))
                                .map(str::to_owned),
                        }
                    }
                    _ => return self.unrelated(),
                }
            }
            // The external-attacher writes `status.attached` (the status subresource; older
            // ones update the whole object).
            ("volumeattachments", "status" | "", "patch" | "update") => {
                let (Some(va), Some(o)) = (name, req) else {
                    self.counts.no_body += u64::from(ev.subresource == "status");
                    return if ev.subresource == "status" {
                        Ok(None)
                    } else {
                        self.unrelated()
                    };
                };
                match get(o, &["status", "attached"]).and_then(Value::as_bool) {
                    Some(attached) => {
                        self.counts.volume_attachments.0 += 1;
                        Act::VaStatus {
                            va: va.to_owned(),
                            attached,
                        }
                    }
                    None => return self.unrelated(),
                }
            }
            ("volumeattachments", "", "delete") => match name {
                Some(va) => Act::DeleteVa { va: va.to_owned() },
                None => return self.unrelated(),
            },
            _ => return self.unrelated(),
        };
        Ok(Some((act, tenant)))
    }

    pub(super) fn unrelated<T>(&mut self) -> Result<Option<T>, BadInput> {
        self.counts.unrelated += 1;
        Ok(None)
    }

    /// The volume fields of a PVC body.
    fn pvc(
        &self,
        o: &Value,
        f: &str,
        vol: String,
        qualify: &dyn Fn(&str) -> String,
    ) -> Result<Act, BadInput> {
        let size = match get_str(o, &["spec", "resources", "requests", "storage"]) {
            None => None,
            Some(q) => Some(self.quantity(&format!("{f}spec.resources.requests.storage"), q)?),
        };
        let first_mode = get(o, &["spec", "accessModes"])
            .and_then(Value::as_array)
            .and_then(|a| a.first());
        let access = match first_mode {
            None => None,
            Some(m) => Some(match m.as_str().unwrap_or("") {
                "ReadWriteOnce" => AccessMode::ReadWriteOnce,
                "ReadWriteOncePod" => AccessMode::ReadWriteOncePod,
                "ReadOnlyMany" => AccessMode::ReadOnlyMany,
                "ReadWriteMany" => AccessMode::ReadWriteMany,
                other => {
                    return Err(self.bad(
                        format!("{f}spec.accessModes[0]"),
                        format!("unknown access mode {other:?}"),
                    ));
                }
            }),
        };
        let mode = match get_str(o, &["spec", "volumeMode"]) {
            None => None,
            Some("Filesystem") => Some(VolumeMode::Filesystem),
            Some("Block") => Some(VolumeMode::Block),
            Some(other) => {
                return Err(self.bad(
                    format!("{f}spec.volumeMode"),
                    format!("unknown volume mode {other:?}, expected Filesystem or Block"),
                ));
            }
        };
        let ds = get(o, &["spec", "dataSource"]).or_else(|| get(o, &["spec", "dataSourceRef"]));
        let source = ds.and_then(|d| {
            let n = qualify(get_str(d, &["name"])?);
            match get_str(d, &["kind"])? {
                "VolumeSnapshot" => Some(Src::Snapshot(n)),
                "PersistentVolumeClaim" => Some(Src::Volume(n)),
                _ => None,
            }
        });
        Ok(Act::CreatePvc {
            vol,
            size,
            class: get_str(o, &["spec", "storageClassName"]).map(str::to_owned),
            access,
            mode,
            source,
            pv: get_str(o, &["spec", "volumeName"]).map(str::to_owned),
            attributes_class: get_str(o, &["spec", "volumeAttributesClassName"])
                .filter(|c| !c.is_empty())
                .map(str::to_owned),
            labels: get(o, &["metadata", "labels"])
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// The storage size a PVC update or patch asks for: a whole object, a merge patch, or a
    /// JSON patch replacing `/spec/resources/requests/storage`.
    fn patched_size(&self, o: &Value, f: &str) -> Result<Option<u64>, BadInput> {
        if let Some(ops) = o.as_array() {
            for (i, op) in ops.iter().enumerate() {
                if get_str(op, &["path"]) == Some("/spec/resources/requests/storage")
                    && let Some(q) = get_str(op, &["value"])
                {
                    return self.quantity(&format!("{f}[{i}].value"), q).map(Some);
                }
            }
            return Ok(None);
        }
        match get_str(o, &["spec", "resources", "requests", "storage"]) {
            None => Ok(None),
            Some(q) => self
                .quantity(&format!("{f}spec.resources.requests.storage"), q)
                .map(Some),
        }
    }

    fn quantity(&self, field: &str, q: &str) -> Result<u64, BadInput> {
        match trace_format::units::parse_bytes(q) {
            Ok(0) => Err(self.bad(field, "a size of 0 bytes")),
            Ok(n) => Ok(n),
            Err(e) => Err(self.bad(field, e.to_string())),
        }
    }
}

/// The attributes class a PVC update or patch asks for: a whole object, a merge patch, or a
/// JSON patch of `/spec/volumeAttributesClassName`.
fn patched_class(o: &Value) -> Option<String> {
    let c = match o.as_array() {
        Some(ops) => ops.iter().find_map(|op| {
            (get_str(op, &["path"]) == Some("/spec/volumeAttributesClassName"))
                .then(|| get_str(op, &["value"]))
                .flatten()
        }),
        None => get_str(o, &["spec", "volumeAttributesClassName"]),
    };
    c.filter(|c| !c.is_empty()).map(str::to_owned)
}

/// The label changes of a PVC update or patch: a whole object's or merge patch's
/// `metadata.labels` (a `null` value removes one), or JSON patch operations on
/// `/metadata/labels/<key>`.
fn patched_labels(o: &Value) -> BTreeMap<String, Option<String>> {
    match o.as_array() {
        Some(ops) => ops
            .iter()
            .filter_map(|op| {
                let key = get_str(op, &["path"])?.strip_prefix("/metadata/labels/")?;
                let key = key.replace("~1", "/").replace("~0", "~");
                let value = match get_str(op, &["op"])? {
                    "remove" => None,
                    _ => Some(get_str(op, &["value"])?.to_owned()),
                };
                Some((key, value))
            })
            .collect(),
        None => get(o, &["metadata", "labels"])
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().map(str::to_owned)))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Whether a node update or patch that writes its taints leaves the out-of-service taint on
/// (`None`: it does not write them).
fn node_taints(o: &Value) -> Option<bool> {
    const KEY: &str = "node.kubernetes.io/out-of-service";
    let has = |t: &Value| get_str(t, &["key"]) == Some(KEY);
    match o.as_array() {
        // JSON patch: a whole list, or one taint appended.
        Some(ops) => ops.iter().find_map(|op| {
            let path = get_str(op, &["path"])?;
            let v = get(op, &["value"])?;
            match path {
                "/spec/taints" => Some(v.as_array().is_some_and(|a| a.iter().any(has))),
                "/spec/taints/-" => has(v).then_some(true),
                _ => None,
            }
        }),
        None => {
            let t = get(o, &["spec", "taints"])?;
            Some(t.as_array().is_some_and(|a| a.iter().any(has)))
        }
    }
}
