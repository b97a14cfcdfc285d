//! The Kubernetes objects the provider creates, built from trace events: PVCs (plain, restored
//! from a VolumeSnapshot, cloned from a PVC), workload pods, I/O pods running `iogen`, and the
//! VolumeSnapshot custom resource (snapshot.storage.k8s.io/v1, through kube's derive).

pub use crate::config::PodOptions;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, Container, LocalObjectReference, NodeAffinity, NodeSelector,
    NodeSelectorRequirement, NodeSelectorTerm, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, Pod, PodSecurityContext, PodSpec, ResourceRequirements,
    SeccompProfile, SecurityContext, Toleration, Volume, VolumeDevice, VolumeMount,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::CustomResource;
use serde::{Deserialize, Serialize};
use trace_format::{AccessMode, IoPhase, VolumeMode};

/// Label key of the ownership label (`RunInfo::owner_label`).
pub const RUN_LABEL: &str = "cnsreplay.io/run";
/// Label naming the trace workload a pod belongs to.
pub const WORKLOAD_LABEL: &str = "cnsreplay.io/workload";
/// Label naming the trace tenant of an object, when the event had one.
pub const TENANT_LABEL: &str = "cnsreplay.io/tenant";
/// Where volume `i` of a pod is mounted (file-system volumes) or exposed (block volumes).
pub fn mount_path(i: usize, block: bool) -> String {
    if block {
        format!("/dev/cnsreplay/{i}")
    } else {
        format!("/data/{i}")
    }
}

/// The file iogen writes on a file-system volume (the same name the local provider uses).
pub const DATA_FILE: &str = "cnsreplay-io.dat";

/// `snapshot.storage.k8s.io/v1` VolumeSnapshot.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "snapshot.storage.k8s.io",
    version = "v1",
    kind = "VolumeSnapshot",
    namespaced,
    status = "VolumeSnapshotStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotSpec {
    /// What to snapshot.
    pub source: VolumeSnapshotSource,
    /// The VolumeSnapshotClass; the cluster default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_snapshot_class_name: Option<String>,
}

/// Source of a VolumeSnapshot.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotSource {
    /// A PVC in the same namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim_name: Option<String>,
    /// A pre-provisioned VolumeSnapshotContent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_snapshot_content_name: Option<String>,
}

/// Status of a VolumeSnapshot (the fields the provider reads).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotStatus {
    /// Whether the snapshot can be restored from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_to_use: Option<bool>,
    /// Bound VolumeSnapshotContent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_volume_snapshot_content_name: Option<String>,
    /// Restore size, a quantity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_size: Option<String>,
    /// When the storage cut it (RFC 3339, whole seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_time: Option<String>,
    /// Last error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<VolumeSnapshotError>,
}

/// A VolumeSnapshot error.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct VolumeSnapshotError {
    /// Message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A Kubernetes object name for a trace name: the name itself when it is a valid DNS label,
/// else a lowercased, cleaned form with a short hash of the original (so two trace names never
/// map to one object).
pub fn k8s_name(name: &str) -> String {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    if valid {
        return name.to_owned();
    }
    let mut s: String = name
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .take(50)
        .collect();
    s = s.trim_matches('-').to_owned();
    // FNV-1a, stable across versions and platforms.
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    if s.is_empty() {
        s.push('x');
    }
    format!("{s}-{:08x}", h as u32)
}

/// Common metadata: name, namespace and the run's labels.
pub fn meta(name: &str, ns: &str, run_id: &str, tenant: Option<&str>) -> ObjectMeta {
    let mut labels = BTreeMap::from([(RUN_LABEL.to_owned(), run_id.to_owned())]);
    if let Some(t) = tenant {
        labels.insert(TENANT_LABEL.to_owned(), k8s_name(t));
    }
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(ns.to_owned()),
        labels: Some(labels),
        ..ObjectMeta::default()
    }
}

/// Where a new PVC's data comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataSource {
    /// A VolumeSnapshot of this name.
    Snapshot(String),
    /// A PVC of this name (clone).
    Pvc(String),
}

/// What a PVC needs.
#[derive(Debug, Clone)]
pub struct PvcSpec {
    /// Bytes requested.
    pub size: u64,
    /// StorageClass (None: the cluster default).
    pub class: Option<String>,
    /// Access mode.
    pub access: AccessMode,
    /// Volume mode.
    pub mode: Option<VolumeMode>,
    /// Data source.
    pub source: Option<DataSource>,
}

/// A PVC.
pub fn pvc(meta: ObjectMeta, s: &PvcSpec) -> PersistentVolumeClaim {
    let access = match s.access {
        AccessMode::ReadWriteOnce => "ReadWriteOnce",
        AccessMode::ReadWriteOncePod => "ReadWriteOncePod",
        AccessMode::ReadOnlyMany => "ReadOnlyMany",
        AccessMode::ReadWriteMany => "ReadWriteMany",
    };
    let data_source = s.source.as_ref().map(|d| match d {
        DataSource::Snapshot(n) => k8s_openapi::api::core::v1::TypedLocalObjectReference {
            api_group: Some("snapshot.storage.k8s.io".into()),
            kind: "VolumeSnapshot".into(),
            name: n.clone(),
        },
        DataSource::Pvc(n) => k8s_openapi::api::core::v1::TypedLocalObjectReference {
            api_group: None,
            kind: "PersistentVolumeClaim".into(),
            name: n.clone(),
        },
    });
    PersistentVolumeClaim {
        metadata: meta,
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec![access.into()]),
            storage_class_name: s.class.clone(),
            volume_mode: s.mode.map(|m| {
                match m {
                    VolumeMode::Filesystem => "Filesystem",
                    VolumeMode::Block => "Block",
                }
                .into()
            }),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    Quantity(s.size.to_string()),
                )])),
                ..VolumeResourceRequirements::default()
            }),
            data_source,
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

/// One volume of a pod: the PVC name and whether it is a raw block volume.
#[derive(Debug, Clone)]
pub struct PodVolume {
    /// PVC name.
    pub claim: String,
    /// Raw block volume.
    pub block: bool,
}

/// Parses a toleration `KEY[=VALUE][:EFFECT]` (`Exists` without a value; any effect without
/// one), as `kubectl taint` writes taints.
pub fn parse_toleration(s: &str) -> Result<Toleration, String> {
    let (kv, effect) = match s.rsplit_once(':') {
        Some((kv, e)) => (kv, Some(e)),
        None => (s, None),
    };
    if let Some(e) = effect
        && !matches!(e, "NoSchedule" | "PreferNoSchedule" | "NoExecute")
    {
        return Err(format!(
            "toleration {s:?}: effect {e:?} is not NoSchedule, PreferNoSchedule or NoExecute"
        ));
    }
    let (key, value) = match kv.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (kv, None),
    };
    if key.is_empty() {
        return Err(format!("toleration {s:?}: expected KEY[=VALUE][:EFFECT]"));
    }
    Ok(Toleration {
        key: Some(key.to_owned()),
        operator: Some(if value.is_some() { "Equal" } else { "Exists" }.into()),
        value: value.map(str::to_owned),
        effect: effect.map(str::to_owned),
        toleration_seconds: None,
    })
}

fn quantities(m: &BTreeMap<String, String>) -> Option<BTreeMap<String, Quantity>> {
    (!m.is_empty()).then(|| {
        m.iter()
            .map(|(k, v)| (k.clone(), Quantity(v.clone())))
            .collect()
    })
}

/// A pod mounting `volumes`, running `image` with `args`, pinned to `node` when given (by
/// required node affinity on the node's name, so the scheduler still schedules it and the
/// `scheduled` phase is real), run as [`PodOptions`] says.
pub fn pod(
    mut meta: ObjectMeta,
    workload: &str,
    volumes: &[PodVolume],
    node: Option<&str>,
    image: &str,
    args: Option<Vec<String>>,
    opts: &PodOptions,
) -> Pod {
    meta.labels
        .get_or_insert_with(BTreeMap::new)
        .insert(WORKLOAD_LABEL.to_owned(), k8s_name(workload));
    let mut mounts = Vec::new();
    let mut devices = Vec::new();
    let mut vols = Vec::new();
    for (i, v) in volumes.iter().enumerate() {
        let name = format!("v{i}");
        if v.block {
            devices.push(VolumeDevice {
                name: name.clone(),
                device_path: mount_path(i, true),
            });
        } else {
            mounts.push(VolumeMount {
                name: name.clone(),
                mount_path: mount_path(i, false),
                ..VolumeMount::default()
            });
        }
        vols.push(Volume {
            name,
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: v.claim.clone(),
                read_only: None,
            }),
            ..Volume::default()
        });
    }
    let affinity = node.map(on_node);
    let is_io = args.is_some();
    let has_block = !devices.is_empty();
    let resources =
        (!opts.requests.is_empty() || !opts.limits.is_empty()).then(|| ResourceRequirements {
            requests: quantities(&opts.requests),
            limits: quantities(&opts.limits),
            ..ResourceRequirements::default()
        });
    Pod {
        metadata: meta,
        spec: Some(PodSpec {
            affinity,
            restart_policy: Some(if is_io { "Never" } else { "Always" }.into()),
            // Neither workload nor iogen pods call the API server: no token in them.
            automount_service_account_token: Some(false),
            termination_grace_period_seconds: Some(if is_io { 5 } else { 30 }),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(opts.run_as_user),
                run_as_group: Some(opts.run_as_user),
                fs_group: Some(opts.fs_group),
                fs_group_change_policy: Some("OnRootMismatch".into()),
                supplemental_groups: has_block.then(|| vec![opts.block_device_group]),
                seccomp_profile: Some(match (&opts.iogen_seccomp_profile, is_io) {
                    (Some(path), true) => SeccompProfile {
                        type_: "Localhost".into(),
                        localhost_profile: Some(path.clone()),
                    },
                    _ => SeccompProfile {
                        type_: "RuntimeDefault".into(),
                        localhost_profile: None,
                    },
                }),
                ..PodSecurityContext::default()
            }),
            node_selector: (!opts.node_selector.is_empty()).then(|| opts.node_selector.clone()),
            tolerations: (!opts.tolerations.is_empty()).then(|| opts.tolerations.clone()),
            image_pull_secrets: pull_secrets(opts),
            containers: vec![Container {
                name: if is_io { "iogen" } else { "workload" }.into(),
                image: Some(image.to_owned()),
                args,
                resources,
                security_context: Some(restricted_container()),
                volume_mounts: (!mounts.is_empty()).then_some(mounts),
                volume_devices: (!devices.is_empty()).then_some(devices),
                ..Container::default()
            }],
            volumes: (!vols.is_empty()).then_some(vols),
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// The `imagePullSecrets` of `opts`, None without any.
pub(crate) fn pull_secrets(opts: &PodOptions) -> Option<Vec<LocalObjectReference>> {
    (!opts.image_pull_secrets.is_empty()).then(|| {
        opts.image_pull_secrets
            .iter()
            .map(|n| LocalObjectReference { name: n.clone() })
            .collect()
    })
}

/// A container's security context under Pod Security `restricted`: no privilege escalation,
/// every capability dropped, read-only root file system, non-root.
pub(crate) fn restricted_container() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            add: None,
        }),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        ..SecurityContext::default()
    }
}

/// The arguments of an `iogen` container running one `io_phase` against `target` (the data
/// file on a file-system volume, the device path of a block volume). The interval log goes to
/// stdout (the pod's log), where the provider collects it.
pub fn iogen_args(ph: &IoPhase, target: &str, seed: u64) -> Vec<String> {
    let mut snippet = serde_json::to_value(ph).unwrap_or_default();
    if let Some(m) = snippet.as_object_mut() {
        // The snippet names its own workload and volume; iogen only needs the profile.
        m.remove("workload");
        m.remove("volume");
    }
    let mut args: Vec<String> = vec![
        "phase".into(),
        snippet.to_string(),
        "--target".into(),
        target.to_owned(),
        "--interval-log".into(),
        "/dev/stdout".into(),
        "--interval".into(),
        "200ms".into(),
        "--seed".into(),
        seed.to_string(),
    ];
    // A verify-mode writer's written set comes back on its log (changed-block tracking
    // checks deltas against it: `ops/cbt.rs`).
    if records_written(ph) {
        args.extend(["--written-log".into(), "-".into()]);
    }
    args
}

/// Whether an `io_phase` records its written set: a verify-mode phase that writes.
pub fn records_written(ph: &IoPhase) -> bool {
    ph.verify && ph.read_pct < 100
}

/// The affinity that pins a pod to node `n` (by `metadata.name`, so the scheduler still
/// checks the node's resources and taints, unlike `spec.nodeName`).
pub(crate) fn on_node(n: &str) -> Affinity {
    Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_fields: Some(vec![NodeSelectorRequirement {
                        key: "metadata.name".into(),
                        operator: "In".into(),
                        values: Some(vec![n.to_owned()]),
                    }]),
                    match_expressions: None,
                }],
            }),
            ..NodeAffinity::default()
        }),
        ..Affinity::default()
    }
}

/// `groupsnapshot.storage.k8s.io/v1` VolumeGroupSnapshot.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "groupsnapshot.storage.k8s.io",
    version = "v1",
    kind = "VolumeGroupSnapshot",
    namespaced,
    status = "VolumeGroupSnapshotStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct VolumeGroupSnapshotSpec {
    /// Which claims.
    pub source: VolumeGroupSnapshotSource,
    /// The VolumeGroupSnapshotClass; the cluster default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_group_snapshot_class_name: Option<String>,
}

/// Source of a VolumeGroupSnapshot.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct VolumeGroupSnapshotSource {
    /// The member claims (the controller reads `matchLabels` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

/// Status of a VolumeGroupSnapshot (the fields the provider reads).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct VolumeGroupSnapshotStatus {
    /// Whether every member is cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_to_use: Option<bool>,
    /// Bound VolumeGroupSnapshotContent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_volume_group_snapshot_content_name: Option<String>,
    /// Last error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<VolumeSnapshotError>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_and_distinct() {
        assert_eq!(k8s_name("pvc-7"), "pvc-7");
        let a = k8s_name("Vol_DB.0");
        let b = k8s_name("vol-db-0");
        assert_ne!(a, b);
        assert!(a.starts_with("vol-db-0-"), "{a}");
        assert!(a.len() <= 63);
        let long = k8s_name(&"x".repeat(300));
        assert!(long.len() <= 63, "{long}");
        assert_eq!(k8s_name("___").len(), 10);
    }
}
