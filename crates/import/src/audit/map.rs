//! The consistency pass: sorted audit requests → trace events that the checker accepts.
//!
//! It keeps the same state the trace checker keeps (live volumes with their size, access mode
//! and mounts, live snapshots, live workloads) and, per request:
//!
//! - a volume named before the log created it (by a pod, snapshot, clone, resize or delete)
//!   becomes a pre-existing volume in `header.volumes`, sized by what the first reference
//!   tells (a clone's size, a resize's new size) or left to the defaults;
//! - a name used again after its delete is dangling: the request is dropped and counted;
//! - a PVC delete while pods still mount it waits, as Kubernetes' `pvc-protection` finalizer
//!   makes it, and is written right after the last of those pods' detach (same `at`);
//! - a PVC mounted where its access mode forbids (a ReadWriteOnce volume already mounted by a
//!   pod on an unknown or other node) is left out of that attach, and counted;
//! - a pod delete for a pod that has no attach in the trace, a snapshot delete for a
//!   snapshot never created, duplicate creates: dropped and counted.
//!
//! Events go to a sink as they are made; what stays is the state above, which grows with the
//! objects the log names, not with its requests.

use std::collections::{BTreeMap, HashMap, HashSet};

use trace_format::{
    AccessMode, Attach, CreateVolume, Defaults, Event, GroupMember, GroupSnapshot,
    GroupSnapshotRef, Header, ModifyVolume, Name, NodeRef, Op, Resize, Snapshot, SnapshotRef,
    VolumeDecl, VolumeRef, VolumeSource, WorkloadRef,
};

use super::{Act, AuditCounts, AuditOptions, Item, Src};
use crate::ImportError;

struct Vol {
    size: u64,
    /// The size before the latest growing resize: a later lower request above it is the
    /// recovery from that resize failing (as the trace checker allows).
    before_grow: Option<u64>,
    /// Its attributes class, when the log set one.
    class: Option<String>,
    /// Its labels (what a group snapshot's selector matches).
    labels: BTreeMap<String, String>,
    access: AccessMode,
    attached_by: Vec<(String, Option<String>)>,
    /// A delete waiting for the last pod to go: (tenant, observed).
    pending_delete: Option<(Option<String>, Option<u64>)>,
}

pub(super) struct Mapper {
    opts: AuditOptions,
    origin: Option<i128>,
    next_id: u64,
    out: Vec<Event>,
    volumes: HashMap<String, Vol>,
    seen: HashSet<String>,
    preexisting: Vec<VolumeDecl>,
    snaps: HashMap<String, u64>,
    workloads: HashMap<String, Vec<String>>,
    /// Pods whose detach was written (until created again).
    detached: HashSet<String>,
    fixes: BTreeMap<String, u64>,
    not_growing: u64,
    /// Attributes classes the events name.
    classes: BTreeMap<Name, BTreeMap<String, String>>,
    /// The parameters of the VolumeAttributesClasses the log created.
    vac_params: HashMap<String, BTreeMap<String, String>>,
    /// Live group snapshots: their member volumes with their sizes when taken.
    groups: HashMap<String, Vec<(String, u64)>>,
    /// Member VolumeSnapshots of groups: snapshot → (group, volume).
    members: HashMap<String, (String, String)>,
    /// Nodes the log put out of service (until a whole-object update takes the taint off).
    out_of_service: HashSet<String>,
}

impl Mapper {
    pub fn new(opts: AuditOptions) -> Self {
        Mapper {
            opts,
            origin: None,
            next_id: 0,
            out: Vec::new(),
            volumes: HashMap::new(),
            seen: HashSet::new(),
            preexisting: Vec::new(),
            snaps: HashMap::new(),
            workloads: HashMap::new(),
            detached: HashSet::new(),
            fixes: BTreeMap::new(),
            not_growing: 0,
            classes: BTreeMap::new(),
            vac_params: HashMap::new(),
            groups: HashMap::new(),
            members: HashMap::new(),
            out_of_service: HashSet::new(),
        }
    }

    fn drop(&mut self, reason: &str) {
        *self.fixes.entry(reason.to_owned()).or_insert(0) += 1;
    }

    fn emit(&mut self, t: i128, tenant: Option<&str>, observed: Option<u64>, op: Op) {
        let origin = *self.origin.get_or_insert(t);
        self.out.push(Event {
            at: u64::try_from(t - origin).unwrap_or(0),
            id: self.next_id,
            tenant: tenant.map(Name::new),
            observed,
            op,
        });
        self.next_id += 1;
    }

    /// Maps one request (in time order) and hands its events to `sink`.
    pub fn item(
        &mut self,
        it: Item,
        counts: &mut AuditCounts,
        sink: &mut dyn FnMut(Event) -> Result<(), ImportError>,
    ) -> Result<(), ImportError> {
        self.origin.get_or_insert(it.t);
        self.map(it);
        for e in self.out.drain(..) {
            counts.written += 1;
            sink(e)?;
        }
        Ok(())
    }

    /// Whether `vol` is live, declaring it pre-existing (with `size`) if never seen.
    fn resolve(&mut self, vol: &str, size: Option<u64>) -> bool {
        if self.volumes.contains_key(vol) {
            return true;
        }
        if self.seen.contains(vol) {
            return false;
        }
        self.seen.insert(vol.to_owned());
        self.preexisting.push(VolumeDecl {
            name: Name::new(vol),
            size,
            storage_class: None,
            access_mode: None,
            volume_mode: None,
            attributes_class: None,
        });
        self.volumes.insert(
            vol.to_owned(),
            Vol {
                size: size.unwrap_or(Defaults::FALLBACK_VOLUME_SIZE),
                before_grow: None,
                class: None,
                labels: BTreeMap::new(),
                access: AccessMode::ReadWriteOnce,
                attached_by: Vec::new(),
                pending_delete: None,
            },
        );
        true
    }

    fn map(&mut self, it: Item) {
        let Item {
            t,
            tenant,
            observed,
            act,
            ..
        } = it;
        let tenant = tenant.as_deref();
        match act {
            Act::CreatePvc {
                vol,
                mut size,
                class,
                access,
                mode,
                source,
                pv: _,
                attributes_class,
                labels,
            } => {
                if self.volumes.contains_key(&vol) {
                    return self.drop("PVC creates of a volume that exists were dropped");
                }
                let source = match source {
                    Some(Src::Snapshot(s)) if self.members.contains_key(&s) => {
                        let (group, member) = self.members[&s].clone();
                        let size = self
                            .groups
                            .get(&group)
                            .and_then(|m| m.iter().find(|(v, _)| *v == member))
                            .map(|(_, sz)| *sz);
                        match size {
                            Some(sz) => Some((
                                VolumeSource::GroupMember(GroupMember {
                                    group: Name::new(&group),
                                    volume: Name::new(&member),
                                }),
                                sz,
                            )),
                            None => {
                                self.drop(
                                    "PVC data sources name a group member whose group is not \
                                     live in the log and were left out",
                                );
                                None
                            }
                        }
                    }
                    Some(Src::Snapshot(s)) => match self.snaps.get(&s) {
                        Some(sz) => Some((VolumeSource::Snapshot(Name::new(&s)), *sz)),
                        None => {
                            self.drop(
                                "PVC data sources name a snapshot not live in the log and were \
                                 left out",
                            );
                            None
                        }
                    },
                    Some(Src::Volume(v)) => {
                        if self.resolve(&v, size) {
                            let sz = self.volumes.get(&v).map_or(0, |v| v.size);
                            Some((VolumeSource::Volume(Name::new(&v)), sz))
                        } else {
                            self.drop(
                                "PVC data sources name a volume deleted earlier and were left out",
                            );
                            None
                        }
                    }
                    None => None,
                };
                if let (Some(s), Some((_, src))) = (size, &source)
                    && s < *src
                {
                    self.drop("PVC sizes smaller than their data source were raised to it");
                    size = Some(*src);
                }
                let effective = size
                    .or(source.as_ref().map(|s| s.1))
                    .unwrap_or(Defaults::FALLBACK_VOLUME_SIZE);
                self.seen.insert(vol.clone());
                self.volumes.insert(
                    vol.clone(),
                    Vol {
                        size: effective,
                        before_grow: None,
                        class: None,
                        labels,
                        access: access.unwrap_or(AccessMode::ReadWriteOnce),
                        attached_by: Vec::new(),
                        pending_delete: None,
                    },
                );
                let op = Op::CreateVolume(CreateVolume {
                    volume: Name::new(&vol),
                    size,
                    storage_class: class.as_deref().map(Name::new),
                    access_mode: access,
                    volume_mode: mode,
                    source: source.map(|s| s.0),
                });
                self.emit(t, tenant, observed, op);
                // Created with a class: the trace gives it by a modify at the same instant.
                if let Some(c) = attributes_class {
                    self.modify(t, tenant, &vol, &c);
                }
            }
            Act::DeletePvc { vol } => {
                if !self.resolve(&vol, None) {
                    return self.drop("PVC deletes of a volume already deleted were dropped");
                }
                let Some(v) = self.volumes.get_mut(&vol) else {
                    return;
                };
                if !v.attached_by.is_empty() {
                    if v.pending_delete.is_none() {
                        v.pending_delete = Some((tenant.map(str::to_owned), observed));
                    }
                    return;
                }
                self.volumes.remove(&vol);
                let op = Op::DeleteVolume(VolumeRef {
                    volume: Name::new(&vol),
                });
                self.emit(t, tenant, observed, op);
            }
            Act::UpdatePvc {
                vol,
                size,
                pv: _,
                attributes_class,
                labels,
            } => {
                if !labels.is_empty()
                    && let Some(v) = self.volumes.get_mut(&vol)
                {
                    for (k, val) in labels {
                        match val {
                            Some(val) => v.labels.insert(k, val),
                            None => v.labels.remove(&k),
                        };
                    }
                }
                if let Some(c) = attributes_class {
                    if !self.resolve(&vol, size) {
                        return self.drop(
                            "attributes-class changes of a volume already deleted were dropped",
                        );
                    }
                    self.modify(t, tenant, &vol, &c);
                }
                let Some(size) = size else { return };
                // First seen here: declared with the new size, so there is no resize to emit.
                let fresh = !self.seen.contains(&vol);
                if !self.resolve(&vol, Some(size)) {
                    return self.drop("PVC resizes of a volume already deleted were dropped");
                }
                let Some(v) = self.volumes.get_mut(&vol) else {
                    return;
                };
                if fresh {
                    return;
                }
                if size > v.size {
                    v.before_grow = Some(v.size);
                } else if !(size < v.size && v.before_grow.is_some_and(|f| size > f)) {
                    // Not growing, and not lowering a resize above the size before it (the
                    // recovery from a failed expansion).
                    self.not_growing += 1;
                    return;
                }
                v.size = size;
                let op = Op::Resize(Resize {
                    volume: Name::new(&vol),
                    size,
                });
                self.emit(t, tenant, observed, op);
            }
            Act::CreateGroup {
                group,
                namespace,
                selector,
                class,
            } => {
                if self.groups.contains_key(&group) {
                    return self.drop("group snapshot creates of a group that exists were dropped");
                }
                let prefix = namespace.map(|n| format!("{n}/")).unwrap_or_default();
                let mut vols: Vec<(String, u64)> = self
                    .volumes
                    .iter()
                    .filter(|(n, v)| {
                        n.starts_with(&prefix)
                            && selector.iter().all(|(k, x)| v.labels.get(k) == Some(x))
                    })
                    .map(|(n, v)| (n.clone(), v.size))
                    .collect();
                if vols.is_empty() {
                    return self
                        .drop("group snapshots whose selector matches no live PVC were dropped");
                }
                vols.sort();
                let op = Op::GroupSnapshot(GroupSnapshot {
                    group: Name::new(&group),
                    volumes: vols.iter().map(|(n, _)| Name::new(n)).collect(),
                    class: class.as_deref().map(Name::new),
                });
                self.groups.insert(group, vols);
                self.emit(t, tenant, observed, op);
            }
            Act::DeleteGroup { group } => {
                if self.groups.remove(&group).is_none() {
                    return self.drop(
                        "group snapshot deletes of a group not created in the log were dropped",
                    );
                }
                let op = Op::DeleteGroupSnapshot(GroupSnapshotRef {
                    group: Name::new(&group),
                });
                self.emit(t, tenant, observed, op);
            }
            Act::CreateMember { snap, group, vol } => {
                self.members.insert(snap, (group, vol));
            }
            Act::Taint {
                node,
                out_of_service,
            } => {
                if !out_of_service {
                    self.out_of_service.remove(&node);
                } else if self.out_of_service.insert(node.clone()) {
                    let op = Op::ForceDetach(NodeRef {
                        node: Name::new(&node),
                    });
                    self.emit(t, None, observed, op);
                }
            }
            Act::CreateVac { name, params } => {
                self.vac_params.insert(name, params);
            }
            Act::CreateSnap { snap, vol, class } => {
                if !self.resolve(&vol, None) {
                    return self.drop("snapshots of a volume already deleted were dropped");
                }
                if self.snaps.contains_key(&snap) {
                    return self.drop("snapshot creates of a snapshot that exists were dropped");
                }
                let size = self.volumes.get(&vol).map_or(0, |v| v.size);
                self.snaps.insert(snap.clone(), size);
                let op = Op::Snapshot(Snapshot {
                    volume: Name::new(&vol),
                    snapshot: Name::new(&snap),
                    class: class.as_deref().map(Name::new),
                });
                self.emit(t, tenant, observed, op);
            }
            Act::DeleteSnap { snap } if self.members.contains_key(&snap) => {
                // The snapshot controller deleting a group's member: part of the group's delete.
                self.members.remove(&snap);
            }
            Act::DeleteSnap { snap } => {
                if self.snaps.remove(&snap).is_none() {
                    return self.drop(
                        "snapshot deletes of a snapshot not created in the log were dropped",
                    );
                }
                let op = Op::DeleteSnapshot(SnapshotRef {
                    snapshot: Name::new(&snap),
                });
                self.emit(t, tenant, observed, op);
            }
            Act::CreatePod { pod, pvcs, node } => {
                self.create_pod(t, tenant, observed, pod, pvcs, node.as_deref());
            }
            Act::DeletePod { pod } => {
                if self.detached.contains(&pod) {
                    // The kubelet's final delete (grace 0) after the graceful one a detach
                    // was written for.
                    return self.drop(
                        "repeated pod deletes (the kubelet's final delete after the graceful \
                         one) were ignored",
                    );
                }
                let Some(vols) = self.workloads.remove(&pod) else {
                    return self.drop(
                        "pod deletes of a pod without an attach in the trace (created before \
                         the log, or mounting no PVC) were dropped",
                    );
                };
                let op = Op::Detach(WorkloadRef {
                    workload: Name::new(&pod),
                });
                self.emit(t, tenant, observed, op);
                self.detached.insert(pod.clone());
                for vol in vols {
                    let Some(v) = self.volumes.get_mut(&vol) else {
                        continue;
                    };
                    v.attached_by.retain(|(w, _)| *w != pod);
                    if v.attached_by.is_empty()
                        && let Some((tn, obs)) = v.pending_delete.take()
                    {
                        self.volumes.remove(&vol);
                        self.drop(
                            "PVC deletes waited for their last pod's detach (pvc-protection)",
                        );
                        let op = Op::DeleteVolume(VolumeRef {
                            volume: Name::new(&vol),
                        });
                        self.emit(t, tn.as_deref(), obs, op);
                    }
                }
            }
            // Consumed by the attach enrichment before this pass.
            Act::BindPod { .. }
            | Act::BindPv { .. }
            | Act::CreateVa { .. }
            | Act::VaStatus { .. }
            | Act::DeleteVa { .. } => {}
        }
    }

    fn create_pod(
        &mut self,
        t: i128,
        tenant: Option<&str>,
        observed: Option<u64>,
        pod: String,
        pvcs: Vec<String>,
        node: Option<&str>,
    ) {
        let node = node.map(str::to_owned);
        if self.workloads.contains_key(&pod) {
            return self.drop("pod creates of a pod that exists were dropped");
        }
        self.detached.remove(&pod);
        let mut mounted: Vec<String> = Vec::with_capacity(pvcs.len());
        for pvc in pvcs {
            if mounted.contains(&pvc) {
                continue;
            }
            if !self.resolve(&pvc, None) {
                self.drop("PVC mounts of a volume already deleted were left out of their attach");
                continue;
            }
            let Some(v) = self.volumes.get_mut(&pvc) else {
                continue;
            };
            let conflict = v.attached_by.iter().any(|(_, n)| match v.access {
                AccessMode::ReadWriteOncePod => true,
                AccessMode::ReadWriteOnce => n.is_none() || *n != node,
                AccessMode::ReadOnlyMany | AccessMode::ReadWriteMany => false,
            });
            if conflict {
                self.drop(
                    "PVC mounts that the access mode forbids (already mounted by a pod on an \
                     unknown or other node) were left out of their attach",
                );
                continue;
            }
            v.attached_by.push((pod.clone(), node.clone()));
            mounted.push(pvc);
        }
        let op = Op::Attach(Attach {
            workload: Name::new(&pod),
            volumes: mounted.iter().map(|v| Name::new(v)).collect(),
            node: node.as_deref().map(Name::new),
            wait_for_room: false,
        });
        self.workloads.insert(pod, mounted);
        self.emit(t, tenant, observed, op);
    }
}

impl Mapper {
    /// A `modify_volume` of live volume `vol` to class `c`, when that changes its class.
    fn modify(&mut self, t: i128, tenant: Option<&str>, vol: &str, c: &str) {
        let Some(v) = self.volumes.get_mut(vol) else {
            return;
        };
        if v.class.as_deref() == Some(c) {
            return;
        }
        v.class = Some(c.to_owned());
        self.classes.entry(Name::new(c)).or_default();
        let op = Op::ModifyVolume(ModifyVolume {
            volume: Name::new(vol),
            class: Name::new(c),
        });
        self.emit(t, tenant, None, op);
    }

    /// The header of the events made, and the last counts.
    pub fn finish(self, files: Vec<String>, counts: &mut AuditCounts) -> Header {
        let waiting = self
            .volumes
            .values()
            .filter(|v| v.pending_delete.is_some())
            .count() as u64;
        let mut fixes = self.fixes;
        if waiting > 0 {
            *fixes
                .entry(
                    "PVC deletes still waited for their pods at the end of the log and were \
                     left out"
                        .to_owned(),
                )
                .or_insert(0) += waiting;
        }
        counts.fixes = fixes;
        counts.not_growing += self.not_growing;
        counts.preexisting = self.preexisting.len() as u64;
        let mut params = BTreeMap::new();
        params.insert("names".to_owned(), "namespace/name".to_owned());
        params.insert(
            "time".to_owned(),
            "requestReceivedTimestamp (v1beta1: timestamp; GKE: timestamp)".to_owned(),
        );
        params.insert(
            "observed".to_owned(),
            "attach: pod create to its last volume's VolumeAttachment attached on its node; \
             other events: requestReceivedTimestamp to stageTimestamp"
                .to_owned(),
        );
        params.insert("keep_failed".to_owned(), self.opts.keep_failed.to_string());
        let mut header = crate::header("k8s-audit", files, params, self.preexisting);
        // The classes the events name, with the parameters the log created them with
        // (none when it did not: the replaying cluster's class of that name is used).
        let mut classes = self.classes;
        for (name, params) in &mut classes {
            if let Some(p) = self.vac_params.get(name.as_str()) {
                params.clone_from(p);
            }
        }
        header.attributes_classes = classes;
        header.origin = self
            .origin
            .and_then(|o| jiff::Timestamp::from_nanosecond(o).ok());
        header
    }
}
