//! Checks before the clock starts: every StorageClass, VolumeSnapshotClass, node and
//! namespace the trace will use (after the header's defaults and the flags) exists and is
//! usable, and that each volume's StorageClass can do what the trace asks of it
//! ([`crate::preflight::capability`]). A failure names each missing thing, where the trace uses it, and
//! what the cluster has instead — instead of operations that wait until they time out.
//!
//! Class precedence (see [`KubeConfig::storage_class_for`]): the trace's class (the event's,
//! else the header default) is remapped by `--map-storage-class TRACE=CLUSTER` when listed
//! there; otherwise `--storage-class` replaces it; otherwise it is used as is, and a trace
//! naming none uses the cluster's default class. Snapshot classes alike.
//!
//! ## Layers
//!
//! Lowest first; a module imports only from its own layer or below (checked by
//! `scripts/check-layers.py`).
//!
//! 1. `access`, `capability` — what the credentials may do; what the classes can do
//! 2. `uses` — what the trace uses
//! 3. `pull` — the pull check

pub(crate) mod access;
pub(crate) mod capability;
pub(crate) mod pull;
pub(crate) mod uses;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttributesClass};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};

use crate::context::Kube;
use crate::preflight::uses::TraceUses;

/// How long pre-flight waits for a TLS connection to a SnapshotMetadataService.
const CBT_CONNECT: std::time::Duration = std::time::Duration::from_secs(5);

fn list_names(v: &[String]) -> String {
    if v.is_empty() {
        "none".to_owned()
    } else {
        v.join(", ")
    }
}

impl Kube {
    /// Changed-block tracking: the CSI driver of every snapshot class the trace uses must
    /// advertise a SnapshotMetadataService that this process can reach over TLS — on a
    /// cluster we did not build its address is often a Service name only pods resolve.
    async fn check_cbt_services(
        &self,
        used: &BTreeMap<Option<String>, String>,
        classes: &[DynamicObject],
        fail: &mut impl FnMut(String),
    ) {
        let mut drivers: BTreeMap<String, String> = BTreeMap::new();
        for (class, at) in used {
            let found = classes.iter().find(|c| match class {
                Some(n) => c.metadata.name.as_deref() == Some(n),
                None => c.metadata.annotations.as_ref().is_some_and(|a| {
                    a.get("snapshot.storage.kubernetes.io/is-default-class")
                        .is_some_and(|v| v == "true")
                }),
            });
            if let Some(d) = found.and_then(|c| c.data["driver"].as_str()) {
                drivers.entry(d.to_owned()).or_insert_with(|| at.clone());
            }
        }
        for (driver, at) in drivers {
            self.limiter.acquire().await;
            let svc = match snapshot_metadata::service(&self.client, &driver).await {
                Ok(s) => s,
                // Not readable: the access review names the missing grant.
                Err(snapshot_metadata::Error::Api {
                    source: kube::Error::Api(s),
                    ..
                }) if s.code == 403 => continue,
                Err(e) => {
                    fail(format!(
                        "the trace lists changed blocks (snapshot_allocated, snapshot_delta) of \
                         snapshots of CSI driver {driver} ({at}): {e}"
                    ));
                    continue;
                }
            };
            let reach = tokio::time::timeout(CBT_CONNECT, snapshot_metadata::connect(&svc)).await;
            let why = match reach {
                Ok(Ok(_)) => continue,
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!(
                    "no TLS connection to {} within {} s",
                    svc.address,
                    CBT_CONNECT.as_secs()
                ),
            };
            fail(format!(
                "the trace lists changed blocks of snapshots of CSI driver {driver} ({at}), but \
                 its SnapshotMetadataService cannot be reached from here: {why}. Its address is \
                 often a Service name only pods resolve: run cnsreplay in the cluster \
                 (docs/kubernetes.md, \"In-cluster runs\")"
            ));
        }
    }

    /// Checks `uses` against the cluster; `Err` lists every problem.
    pub(crate) async fn preflight(&self, uses: &TraceUses) -> Result<(), String> {
        let c = self.client.clone();
        let lp = ListParams::default();
        let mut problems = String::new();
        let mut fail = |s: String| {
            let _ = writeln!(problems, "  - {s}");
        };
        if let Some(ns) = &self.config.namespace {
            self.limiter.acquire().await;
            match Api::<Namespace>::all(c.clone()).get_opt(ns).await {
                Ok(Some(n)) if n.metadata.deletion_timestamp.is_some() => {
                    fail(format!("namespace {ns} (--namespace) is being deleted"));
                }
                Ok(Some(_)) => {}
                // The least-privilege mode (a Role in that namespace and the cluster-wide
                // reads) may not read the namespace itself: its existence is then not
                // checked here, and the access review below tells what the Role allows.
                Err(kube::Error::Api(s)) if s.code == 403 => {}
                Ok(None) => fail(format!(
                    "namespace {ns} (--namespace) does not exist; create it, or omit \
                     --namespace for a run-owned namespace"
                )),
                Err(e) => fail(format!("namespace {ns} (--namespace): {e}")),
            }
        }
        let mut classes: Vec<StorageClass> = Vec::new();
        let mut snapshot_classes: Option<Vec<DynamicObject>> = None;
        if !uses.storage_classes.is_empty() {
            self.limiter.acquire().await;
            match Api::<StorageClass>::all(c.clone()).list(&lp).await {
                Ok(l) => {
                    let names: Vec<String> = l
                        .items
                        .iter()
                        .filter_map(|s| s.metadata.name.clone())
                        .collect();
                    let defaults: Vec<&String> = l
                        .items
                        .iter()
                        .filter(|s| {
                            s.metadata.annotations.as_ref().is_some_and(|a| {
                                a.get("storageclass.kubernetes.io/is-default-class")
                                    .is_some_and(|v| v == "true")
                            })
                        })
                        .filter_map(|s| s.metadata.name.as_ref())
                        .collect();
                    for (class, at) in &uses.storage_classes {
                        match class {
                            Some(n) if !names.contains(n) => fail(format!(
                                "StorageClass {n} ({at}) does not exist; the cluster has: {}. \
                                 --storage-class CLASS replaces the trace's classes, \
                                 --map-storage-class {n}=CLASS this one",
                                list_names(&names)
                            )),
                            None if defaults.is_empty() => fail(format!(
                                "{at} names no StorageClass and the cluster has no default one; \
                                 it has: {}. Pass --storage-class CLASS",
                                list_names(&names)
                            )),
                            _ => {}
                        }
                    }
                    classes = l.items;
                }
                Err(e) => fail(format!("cannot list StorageClasses: {e}")),
            }
        }
        if !uses.snapshot_classes.is_empty() {
            let gvk = GroupVersionKind::gvk("snapshot.storage.k8s.io", "v1", "VolumeSnapshotClass");
            let api: Api<DynamicObject> = Api::all_with(c.clone(), &ApiResource::from_gvk(&gvk));
            self.limiter.acquire().await;
            match api.list(&lp).await {
                Ok(l) => {
                    let names: Vec<String> = l
                        .items
                        .iter()
                        .filter_map(|s| s.metadata.name.clone())
                        .collect();
                    let has_default = l.items.iter().any(|s| {
                        s.metadata.annotations.as_ref().is_some_and(|a| {
                            a.get("snapshot.storage.kubernetes.io/is-default-class")
                                .is_some_and(|v| v == "true")
                        })
                    });
                    for (class, at) in &uses.snapshot_classes {
                        match class {
                            Some(n) if !names.contains(n) => fail(format!(
                                "VolumeSnapshotClass {n} ({at}) does not exist; the cluster has: \
                                 {}. --snapshot-class CLASS replaces the trace's classes, \
                                 --map-snapshot-class {n}=CLASS this one",
                                list_names(&names)
                            )),
                            None if !has_default => fail(format!(
                                "{at} names no VolumeSnapshotClass and the cluster has no \
                                 default one; it has: {}. Pass --snapshot-class CLASS",
                                list_names(&names)
                            )),
                            _ => {}
                        }
                    }
                    snapshot_classes = Some(l.items);
                }
                Err(e) => fail(format!(
                    "the trace takes snapshots ({}) but VolumeSnapshotClasses cannot be \
                     listed (is the snapshot.storage.k8s.io API installed?): {e}",
                    uses.snapshot_classes
                        .values()
                        .next()
                        .map_or("", String::as_str)
                )),
            }
        }
        // A pod's imagePullSecrets name Secrets of its own namespace, and a run-owned
        // namespace is created empty: its pods could never pull with them.
        if self.config.namespace.is_none() && !self.config.pod.image_pull_secrets.is_empty() {
            fail(format!(
                "--image-pull-secret {} names a Secret in the run's namespace, and a run-owned \
                 namespace (no --namespace) is created without Secrets (copying one into it \
                 would need Secret create in every namespace, docs/kubernetes.md \"RBAC\"): \
                 run with --namespace NS, a namespace where the Secret exists",
                self.config.pod.image_pull_secrets.join(", ")
            ));
        }
        let mut create_classes = std::collections::BTreeSet::new();
        for name in &uses.attributes_classes {
            self.limiter.acquire().await;
            match Api::<VolumeAttributesClass>::all(c.clone())
                .get_opt(name)
                .await
            {
                Ok(Some(_)) => {}
                // Absent, or not readable: the run would create it.
                Ok(None) | Err(_) => {
                    create_classes.insert(name.clone());
                }
            }
        }
        self.check_access(&uses.ops, &create_classes, &mut fail)
            .await;
        self.check_capabilities(
            &uses.needs,
            &classes,
            snapshot_classes.as_deref(),
            &mut fail,
        )
        .await;
        if uses.ops.iter().any(|o| {
            matches!(
                o,
                trace_format::OpType::SnapshotAllocated | trace_format::OpType::SnapshotDelta
            )
        }) && let Some(sc) = &snapshot_classes
        {
            self.check_cbt_services(&uses.snapshot_classes, sc, &mut fail)
                .await;
        }
        if !uses.nodes.is_empty() {
            self.limiter.acquire().await;
            match Api::<Node>::all(c).list(&lp).await {
                Ok(l) => {
                    let names: Vec<String> = l
                        .items
                        .iter()
                        .filter_map(|n| n.metadata.name.clone())
                        .collect();
                    for (n, (at, placed)) in &uses.nodes {
                        match l
                            .items
                            .iter()
                            .find(|x| x.metadata.name.as_deref() == Some(n))
                        {
                            None => fail(format!(
                                "node {n} ({at}) does not exist; the cluster has: {}",
                                list_names(&names)
                            )),
                            Some(x)
                                if *placed
                                    && x.spec.as_ref().and_then(|s| s.unschedulable)
                                        == Some(true) =>
                            {
                                fail(format!(
                                    "node {n} ({at}) is cordoned (spec.unschedulable), so pods \
                                     placed there never run"
                                ));
                            }
                            Some(_) => {}
                        }
                    }
                }
                Err(e) => fail(format!("cannot list nodes: {e}")),
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the cluster lacks what the trace needs (nothing was created):\n{}",
                problems.trim_end()
            ))
        }
    }
}
