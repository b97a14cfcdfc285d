//! Pre-flight asks the API server, with one SelfSubjectAccessReview each, whether the run's
//! credentials may make every request the trace's operations need (and the watches and
//! cleanup every run makes), and names each one they may not — with the operations needing it
//! and the piece of `deploy/rbac/` that grants it — before anything is created, instead of
//! operations failing `forbidden` one by one in the run.
//!
//! The pieces ([`Piece`]) follow the files: `base/role.yaml` (the Role for a run in one
//! existing namespace), `base/read.yaml` (cluster-wide reads every run needs), and the
//! opt-in `run-namespaces/`, `nodes/`, `attributes-classes/`, `apiserver-metrics/`. A request
//! the provider starts making belongs in both places: [`grants`] lists every request with its
//! piece, and a test reads the pieces' files and checks each is granted where it is named.
//! `TraceUses::pieces` is the same mapping by piece: the test harnesses run each
//! trace as an account bound to exactly those, so the tests prove the pieces suffice.
//!
//! Event watching is not required (without it failures only show as timeouts, and `prepare`
//! says so). A review the API server does not answer checks nothing.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use trace_format::OpType;

use crate::context::Kube;

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
const CBT_GROUP: &str = "cbt.storage.k8s.io";

/// What every run needs: its watches (PVCs, pods in its namespace; PVs and VolumeAttachments
/// cluster-wide) and the reads of the checks before the clock.
const EVERY_RUN: [Access; 9] = [
    ns("list", "", "persistentvolumeclaims"),
    ns("watch", "", "persistentvolumeclaims"),
    ns("list", "", "pods"),
    ns("watch", "", "pods"),
    cluster("list", "", "persistentvolumes"),
    cluster("watch", "", "persistentvolumes"),
    cluster("list", STORAGE, "volumeattachments"),
    cluster("watch", STORAGE, "volumeattachments"),
    cluster("list", STORAGE, "storageclasses"),
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
    // Changed-block tracking reads its snapshots' contents and the driver's
    // SnapshotMetadataService (the token request is checked on its own: it is in the token
    // account's namespace, `check_access`).
    const CBT: [Access; 3] = [
        ns("get", SNAP, "volumesnapshots"),
        cluster("get", SNAP, "volumesnapshotcontents"),
        cluster("get", CBT_GROUP, "snapshotmetadataservices"),
    ];
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
        OpType::SnapshotAllocated | OpType::SnapshotDelta => &CBT,
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

    /// The piece of `deploy/rbac/` that grants it.
    fn piece(&self, own_namespace: bool) -> Piece {
        match (self.namespaced, self.resource, self.verb) {
            (false, "nodes", "patch") => Piece::Nodes,
            (false, "namespaces", _) => Piece::RunNamespaces,
            (false, "volumeattributesclasses", "create" | "delete" | "watch") => {
                Piece::AttributesClasses
            }
            (false, _, _) => Piece::Read,
            (true, _, _) if own_namespace => Piece::RunNamespaces,
            (true, _, _) => Piece::Role,
        }
    }
}

/// A piece of `deploy/rbac/`: one Role or ClusterRole, in the file or directory named by
/// [`Piece::path`]. What a run needs of them is `TraceUses::pieces`; the test
/// harnesses bind an account to exactly those.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Piece {
    /// `base/role.yaml`: Role `cnsreplay`, what a run does in its one existing namespace
    /// (bound in that namespace).
    Role,
    /// `base/read.yaml`: ClusterRole `cnsreplay-read`, the cluster-wide reads of every run.
    Read,
    /// `run-namespaces/`: ClusterRole `cnsreplay-run-namespaces`, a namespace per run (no
    /// `--namespace`) and the Role's rules in every namespace.
    RunNamespaces,
    /// `nodes/`: ClusterRole `cnsreplay-nodes`, node patch (cordon, drain, force detach).
    Nodes,
    /// `attributes-classes/`: ClusterRole `cnsreplay-attributes-classes`, the header's
    /// VolumeAttributesClasses the cluster lacks.
    AttributesClasses,
    /// `apiserver-metrics/`: ClusterRole `cnsreplay-apiserver-metrics`, `--apiserver-metrics`.
    ApiserverMetrics,
    /// `fetch/`: Role `cnsreplay-fetch` (namespace `cnsreplay`), `cnsreplay fetch`; no trace
    /// needs it.
    Fetch,
    /// `cbt/`: Role `cnsreplay-cbt` (namespace `cnsreplay`), tokens of the accounts there for
    /// changed-block tracking's SnapshotMetadataService (`snapshot_allocated`,
    /// `snapshot_delta`).
    Cbt,
}

impl Piece {
    /// Every piece, in the order of their directories in `deploy/rbac/kustomization.yaml`.
    pub const ALL: [Piece; 8] = [
        Piece::Role,
        Piece::Read,
        Piece::RunNamespaces,
        Piece::Nodes,
        Piece::AttributesClasses,
        Piece::ApiserverMetrics,
        Piece::Fetch,
        Piece::Cbt,
    ];

    /// A short name: `role`, `read`, `run-namespaces`, `nodes`, `attributes-classes`,
    /// `apiserver-metrics`, `fetch`, `cbt`.
    pub fn name(self) -> &'static str {
        match self {
            Piece::Role => "role",
            Piece::Read => "read",
            Piece::RunNamespaces => "run-namespaces",
            Piece::Nodes => "nodes",
            Piece::AttributesClasses => "attributes-classes",
            Piece::ApiserverMetrics => "apiserver-metrics",
            Piece::Fetch => "fetch",
            Piece::Cbt => "cbt",
        }
    }

    /// Whether it is a namespaced Role (bound by a RoleBinding in a namespace) rather than a
    /// ClusterRole.
    pub fn namespaced(self) -> bool {
        matches!(self, Piece::Role | Piece::Fetch | Piece::Cbt)
    }

    /// The name of its Role or ClusterRole.
    pub fn role(self) -> &'static str {
        match self {
            Piece::Role => "cnsreplay",
            Piece::Read => "cnsreplay-read",
            Piece::RunNamespaces => "cnsreplay-run-namespaces",
            Piece::Nodes => "cnsreplay-nodes",
            Piece::AttributesClasses => "cnsreplay-attributes-classes",
            Piece::ApiserverMetrics => "cnsreplay-apiserver-metrics",
            Piece::Fetch => "cnsreplay-fetch",
            Piece::Cbt => "cnsreplay-cbt",
        }
    }

    /// Its file or directory, from the workspace's root.
    pub fn path(self) -> &'static str {
        match self {
            Piece::Role => "deploy/rbac/base/role.yaml",
            Piece::Read => "deploy/rbac/base/read.yaml",
            Piece::RunNamespaces => "deploy/rbac/run-namespaces",
            Piece::Nodes => "deploy/rbac/nodes",
            Piece::AttributesClasses => "deploy/rbac/attributes-classes",
            Piece::ApiserverMetrics => "deploy/rbac/apiserver-metrics",
            Piece::Fetch => "deploy/rbac/fetch",
            Piece::Cbt => "deploy/rbac/cbt",
        }
    }
}

impl std::fmt::Display for Piece {
    /// As pre-flight names it: `ClusterRole cnsreplay-nodes, deploy/rbac/nodes`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.namespaced() {
            "Role"
        } else {
            "ClusterRole"
        };
        let bound = if *self == Piece::Role {
            " bound in that namespace"
        } else {
            ""
        };
        write!(f, "{kind} {}{bound}, {}", self.role(), self.path())
    }
}

/// One request kind the provider may make and the piece of `deploy/rbac/` that grants it (for
/// the test that checks the pieces' rules against this list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// `create`, `list`, …
    pub verb: &'static str,
    /// API group (empty: core).
    pub group: &'static str,
    /// Resource, with `/subresource` when it has one.
    pub resource: String,
    /// The piece (shown as `Role cnsreplay bound in that namespace,
    /// deploy/rbac/base/role.yaml`).
    pub piece: Piece,
}

/// Every request kind pre-flight may ask for — a run in an existing namespace
/// (`own_namespace` false) or in its own — with the piece that grants it.
pub fn grants(own_namespace: bool) -> Vec<Grant> {
    // Every op type, and an attributes class to create.
    let ops = OpType::ALL.into_iter().collect();
    let classes = BTreeSet::from(["any".to_owned()]);
    wanted(&ops, own_namespace, &classes)
        .into_keys()
        .map(|a| Grant {
            verb: a.verb,
            group: a.group,
            resource: match a.subresource {
                Some(s) => format!("{}/{s}", a.resource),
                None => a.resource.to_owned(),
            },
            piece: a.piece(own_namespace),
        })
        .collect()
}

/// Every request a run needs — of `ops`, in its own namespace (`own`) or an existing one,
/// creating the attributes classes `create_classes` — with what needs it.
fn wanted(
    ops: &BTreeSet<OpType>,
    own: bool,
    create_classes: &BTreeSet<String>,
) -> BTreeMap<Access, BTreeSet<String>> {
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
    if !create_classes.is_empty() {
        let by = format!(
            "the trace header's attributes classes the cluster lacks: {}",
            create_classes
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
        // Cleanup deletes them and watches until they are gone (a class in use by a claim
        // is kept by its protection finalizer).
        for v in ["create", "delete", "watch"] {
            want.entry(cluster(v, STORAGE, "volumeattributesclasses"))
                .or_default()
                .insert(by.clone());
        }
    }
    want
}

/// The pieces of `deploy/rbac/` granting what pre-flight asks for: a run of `ops`, in its own
/// namespace (`own`) or an existing one, creating the attributes classes `create_classes`,
/// with `--apiserver-metrics` when `metrics`.
pub(crate) fn pieces(
    ops: &BTreeSet<OpType>,
    own: bool,
    create_classes: &BTreeSet<String>,
    metrics: bool,
) -> BTreeSet<Piece> {
    let mut out: BTreeSet<Piece> = wanted(ops, own, create_classes)
        .keys()
        .map(|a| a.piece(own))
        .collect();
    if metrics {
        out.insert(Piece::ApiserverMetrics);
    }
    if ops.iter().any(|o| is_cbt(*o)) {
        out.insert(Piece::Cbt);
    }
    out
}

fn is_cbt(op: OpType) -> bool {
    matches!(op, OpType::SnapshotAllocated | OpType::SnapshotDelta)
}

impl Kube {
    /// Asks for every request `ops` need (and, for `create_classes`, the attributes classes
    /// the run will create); calls `fail` once with every missing one.
    pub(crate) async fn check_access(
        &self,
        ops: &BTreeSet<OpType>,
        create_classes: &BTreeSet<String>,
        fail: &mut impl FnMut(String),
    ) {
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
        let want = wanted(ops, own, create_classes);
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
        // `--apiserver-metrics`: the non-resource URL /metrics.
        if self.config.apiserver_metrics {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    non_resource_attributes: Some(NonResourceAttributes {
                        path: Some("/metrics".to_owned()),
                        verb: Some("get".to_owned()),
                    }),
                    ..SelfSubjectAccessReviewSpec::default()
                },
                ..SelfSubjectAccessReview::default()
            };
            self.limiter.acquire().await;
            match api.create(&PostParams::default(), &review).await {
                Ok(r) if r.status.as_ref().is_some_and(|s| !s.allowed) => missing.push(format!(
                    "get /metrics (the API server's; needed by --apiserver-metrics; granted by \
                     {})",
                    Piece::ApiserverMetrics
                )),
                Ok(_) => {}
                Err(e) => tracing::debug!("SelfSubjectAccessReview: {e}; /metrics not checked"),
            }
        }
        // Changed-block tracking: a token of its account, in that account's namespace.
        if ops.iter().any(|o| is_cbt(*o)) {
            match self.cbt_account().await {
                Ok((acct_ns, acct)) => {
                    let review = SelfSubjectAccessReview {
                        spec: SelfSubjectAccessReviewSpec {
                            resource_attributes: Some(ResourceAttributes {
                                verb: Some("create".to_owned()),
                                resource: Some("serviceaccounts".to_owned()),
                                subresource: Some("token".to_owned()),
                                namespace: Some(acct_ns.clone()),
                                name: Some(acct.clone()),
                                ..ResourceAttributes::default()
                            }),
                            ..SelfSubjectAccessReviewSpec::default()
                        },
                        ..SelfSubjectAccessReview::default()
                    };
                    self.limiter.acquire().await;
                    match api.create(&PostParams::default(), &review).await {
                        Ok(r) if r.status.as_ref().is_some_and(|s| !s.allowed) => {
                            missing.push(format!(
                                "create serviceaccounts/token of {acct} in namespace {acct_ns} \
                                 (needed by snapshot_allocated, snapshot_delta: the \
                                 SnapshotMetadataService's token; granted by {} when the \
                                 account is in namespace cnsreplay; --cbt-account names another)",
                                Piece::Cbt
                            ));
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::debug!("SelfSubjectAccessReview: {e}; token not checked");
                        }
                    }
                }
                Err(e) => missing.push(format!("the changed-block tracking account: {e}")),
            }
        }
        if !missing.is_empty() {
            fail(format!(
                "the credentials may not (SelfSubjectAccessReview; deploy/rbac/, \
                 docs/kubernetes.md \"RBAC\"):\n      {}",
                missing.join("\n      ")
            ));
        }
    }
}
