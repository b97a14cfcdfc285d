//! Pre-flight asks the API server, with one SelfSubjectAccessReview each, whether the run's
//! credentials may make every request the trace's operations need (and the watches and
//! cleanup every run makes), and names each one they may not — with the operations needing it
//! and the piece of `deploy/rbac/rbac.yaml` that grants it — before anything is created,
//! instead of operations failing `forbidden` one by one in the run.
//!
//! Event watching is not required (without it failures only show as timeouts, and `prepare`
//! says so). A review the API server does not answer checks nothing.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use trace_format::OpType;

use crate::Kube;

/// One request kind: verb, API group, resource (with subresource), namespaced or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Access {
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    subresource: Option<&'static str>,
    namespaced: bool,
}

const fn ns(verb: &'static str, group: &'static str, resource: &'static str) -> Access {
    Access {
        verb,
        group,
        resource,
        subresource: None,
        namespaced: true,
    }
}

const fn cluster(verb: &'static str, group: &'static str, resource: &'static str) -> Access {
    Access {
        namespaced: false,
        ..ns(verb, group, resource)
    }
}

const fn sub(verb: &'static str, resource: &'static str, subresource: &'static str) -> Access {
    Access {
        subresource: Some(subresource),
        ..ns(verb, "", resource)
    }
}

const SNAP: &str = "snapshot.storage.k8s.io";
const GROUP: &str = "groupsnapshot.storage.k8s.io";
const STORAGE: &str = "storage.k8s.io";

/// What every run needs: its watches (PVCs, pods in its namespace; PVs and VolumeAttachments
/// cluster-wide) and the reads of the checks before the clock.
const EVERY_RUN: [Access; 8] = [
    ns("list", "", "persistentvolumeclaims"),
    ns("watch", "", "persistentvolumeclaims"),
    ns("list", "", "pods"),
    ns("watch", "", "pods"),
    cluster("list", "", "persistentvolumes"),
    cluster("watch", "", "persistentvolumes"),
    cluster("list", STORAGE, "volumeattachments"),
    cluster("watch", STORAGE, "volumeattachments"),
];

/// What operations of type `op` need (cleanup deletes what they create).
fn needs(op: OpType) -> &'static [Access] {
    const PVC: [Access; 2] = [
        ns("create", "", "persistentvolumeclaims"),
        ns("delete", "", "persistentvolumeclaims"),
    ];
    const POD: [Access; 2] = [ns("create", "", "pods"), ns("delete", "", "pods")];
    const POD_IO: [Access; 3] = [
        ns("create", "", "pods"),
        ns("delete", "", "pods"),
        sub("get", "pods", "log"),
    ];
    const STREAM: [Access; 3] = [
        ns("create", "", "pods"),
        ns("delete", "", "pods"),
        sub("create", "pods", "attach"),
    ];
    const SNAPSHOT: [Access; 4] = [
        ns("create", SNAP, "volumesnapshots"),
        ns("list", SNAP, "volumesnapshots"),
        ns("watch", SNAP, "volumesnapshots"),
        ns("delete", SNAP, "volumesnapshots"),
    ];
    const GROUPS: [Access; 6] = [
        ns("create", GROUP, "volumegroupsnapshots"),
        ns("list", GROUP, "volumegroupsnapshots"),
        ns("watch", GROUP, "volumegroupsnapshots"),
        ns("delete", GROUP, "volumegroupsnapshots"),
        ns("list", SNAP, "volumesnapshots"),
        ns("patch", "", "persistentvolumeclaims"),
    ];
    const PATCH_PVC: [Access; 1] = [ns("patch", "", "persistentvolumeclaims")];
    const NODES: [Access; 3] = [
        cluster("patch", "", "nodes"),
        ns("create", "", "pods"),
        ns("delete", "", "pods"),
    ];
    const DELETE_POD: [Access; 1] = [ns("delete", "", "pods")];
    match op {
        OpType::CreateVolume | OpType::DeleteVolume => &PVC,
        OpType::Attach | OpType::Reschedule => &POD,
        OpType::Detach | OpType::AbortWorkload => &DELETE_POD,
        OpType::IoPhase => &POD_IO,
        OpType::Io => &STREAM,
        OpType::Snapshot | OpType::DeleteSnapshot => &SNAPSHOT,
        OpType::GroupSnapshot | OpType::DeleteGroupSnapshot => &GROUPS,
        OpType::Resize | OpType::ModifyVolume => &PATCH_PVC,
        OpType::CordonNode | OpType::DrainNode | OpType::ForceDetach => &NODES,
        _ => &[],
    }
}

impl Access {
    fn describe(&self, namespace: &str) -> String {
        let what = match self.subresource {
            Some(s) => format!("{}/{s}", self.resource),
            None => self.resource.to_owned(),
        };
        let group = if self.group.is_empty() {
            String::new()
        } else {
            format!(".{}", self.group)
        };
        if self.namespaced {
            format!("{} {what}{group} in namespace {namespace}", self.verb)
        } else {
            format!("{} {what}{group} (cluster-wide)", self.verb)
        }
    }

    /// The piece of `deploy/rbac/rbac.yaml` that grants it.
    fn piece(&self, own_namespace: bool) -> &'static str {
        match (self.namespaced, self.resource) {
            (false, "nodes") => "ClusterRole cnsreplay-nodes",
            (false, "namespaces") => "ClusterRole cnsreplay-run-namespaces",
            (false, _) => "ClusterRole cnsreplay-read",
            (true, _) if own_namespace => "ClusterRole cnsreplay-run-namespaces",
            (true, _) => "the Role cnsreplay, bound in that namespace",
        }
    }
}

impl Kube {
    /// Asks for every request `ops` need; calls `fail` once with every missing one.
    pub(crate) async fn check_access(&self, ops: &BTreeSet<OpType>, fail: &mut impl FnMut(String)) {
        // The run-owned namespace does not exist yet: RBAC answers for a name in it alike.
        let own = self.config.namespace.is_none();
        let namespace = self
            .config
            .namespace
            .clone()
            .unwrap_or_else(|| "cnsreplay-<run id>".to_owned());
        let review_ns = self
            .config
            .namespace
            .clone()
            .unwrap_or_else(|| "cnsreplay-preflight".to_owned());
        let mut want: BTreeMap<Access, BTreeSet<String>> = BTreeMap::new();
        for a in EVERY_RUN {
            want.entry(a).or_default().insert("every run".to_owned());
        }
        if own {
            for v in ["create", "delete"] {
                want.entry(cluster(v, "", "namespaces"))
                    .or_default()
                    .insert("the run-owned namespace (no --namespace)".to_owned());
            }
        }
        for op in ops {
            for a in needs(*op) {
                want.entry(*a).or_default().insert(op.to_string());
            }
        }
        let api: Api<SelfSubjectAccessReview> = Api::all(self.client.clone());
        let mut missing = Vec::new();
        for (a, by) in &want {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(ResourceAttributes {
                        verb: Some(a.verb.to_owned()),
                        group: Some(a.group.to_owned()),
                        resource: Some(a.resource.to_owned()),
                        subresource: a.subresource.map(str::to_owned),
                        namespace: a.namespaced.then(|| review_ns.clone()),
                        ..ResourceAttributes::default()
                    }),
                    ..SelfSubjectAccessReviewSpec::default()
                },
                ..SelfSubjectAccessReview::default()
            };
            self.limiter.acquire().await;
            match api.create(&PostParams::default(), &review).await {
                Ok(r) if r.status.as_ref().is_some_and(|s| !s.allowed) => missing.push(format!(
                    "{} (needed by {}; granted by {})",
                    a.describe(&namespace),
                    by.iter().cloned().collect::<Vec<_>>().join(", "),
                    a.piece(own)
                )),
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!("SelfSubjectAccessReview: {e}; access not checked");
                    return;
                }
            }
        }
        if !missing.is_empty() {
            fail(format!(
                "the credentials may not (SelfSubjectAccessReview; deploy/rbac/rbac.yaml, \
                 docs/kubernetes.md \"RBAC\"):\n      {}",
                missing.join("\n      ")
            ));
        }
    }
}
