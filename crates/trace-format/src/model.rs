//! The trace model: a header plus a time-ordered stream of events.
//!
//! Every event carries exactly one operation. Control operations mirror what Kubernetes users
//! and automation do to storage (create, attach, snapshot, resize, …); I/O operations are either
//! single requests (`io`, from imported block traces) or generated I/O units (`io_phase`, run by
//! iogen). Times are integer nanoseconds from trace start, so every encoding is exact and no
//! float rounding can move an event.
//!
//! Optional fields that have a trace-wide default (size, storage class, access mode, …) stay
//! `None` in the event and are resolved against [`Defaults`] by consumers, so a conversion never
//! bakes defaults in and every encoding round-trips the trace exactly as written.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod io_ops;

pub use io_ops::{
    Arrival, BlockSize, BlockSizeShare, Io, IoKind, IoPhase, Load, Ordered, Pattern, Rate,
};

use crate::units::{Name, bytes_de, opt_bytes_de};

/// The current format version. See `docs/trace-format.md` for the versioning rule.
pub const FORMAT_VERSION: u32 = 3;

/// The value of the header's `format` field, identifying a cnsreplay trace.
pub const FORMAT_NAME: &str = "cnsreplay-trace";

/// Trace header: everything that applies to the whole trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// Always [`FORMAT_NAME`]; identifies the file.
    pub format: String,
    /// Format version the trace was written with.
    pub version: u32,
    /// Wall-clock instant of `at = 0`, when known (e.g. from an imported recording).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<jiff::Timestamp>,
    /// Where the trace came from.
    #[serde(default, skip_serializing_if = "Provenance::is_empty")]
    pub provenance: Provenance,
    /// Defaults for fields that events leave out.
    #[serde(default, skip_serializing_if = "Defaults::is_empty")]
    pub defaults: Defaults,
    /// Volumes that exist before the first event (the trace starts from a populated cluster).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeDecl>,
    /// Workloads that run before the first event, with header-declared volumes mounted (the
    /// trace starts from a cluster in steady state).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<WorkloadDecl>,
    /// Volume attributes classes (IOPS/throughput tiers) that `modify_volume` events name,
    /// each with its parameters in the vocabulary of cnsreplay's own storage (the `local`
    /// provider and `cnsreplay-csi`: see `docs/trace-format.md`). Since version 2.
    #[serde(
        default,
        deserialize_with = "crate::units::class_params_de",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub attributes_classes: BTreeMap<Name, BTreeMap<String, String>>,
}

impl Default for Header {
    fn default() -> Self {
        Self {
            format: FORMAT_NAME.to_owned(),
            version: FORMAT_VERSION,
            origin: None,
            provenance: Provenance::default(),
            defaults: Defaults::default(),
            volumes: Vec::new(),
            workloads: Vec::new(),
            attributes_classes: BTreeMap::new(),
        }
    }
}

/// Where a trace came from: the source it was converted from or the generator that made it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// Source format of an imported trace (e.g. `fio-iolog-v3`, `k8s-audit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_format: Option<String>,
    /// Source files of an imported trace, as given to the importer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_files: Vec<String>,
    /// Program that produced this trace, with its version (e.g. `cnsreplay-synth 0.1.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator: Option<String>,
    /// Random seed of a synthesized trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Converter or generator parameters, as text, so the trace says how it was made.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
}

/// The provenance parameter naming the trace's steady part, `START..END` in trace time (ns,
/// end exclusive): what lies outside it — a warm-up, the clean-up of an `end: clean_up`
/// synthesized trace — is the trace's set-up and tear-down, which a capacity search does not
/// judge for stationarity. `synth` writes it; a user may add it to any trace.
pub const STEADY_PARAMETER: &str = "steady_ns";

impl Provenance {
    fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// The trace's steady part ([`STEADY_PARAMETER`]): `Ok(None)` when not given, an error
    /// naming the value when it is not `START..END` with START < END.
    pub fn steady(&self) -> Result<Option<(u64, u64)>, String> {
        let Some(v) = self.parameters.get(STEADY_PARAMETER) else {
            return Ok(None);
        };
        let bad = || {
            format!(
                "provenance.parameters.{STEADY_PARAMETER}: {v:?} is not START..END (integer \
                 nanoseconds, START < END)"
            )
        };
        let (a, b) = v.split_once("..").ok_or_else(bad)?;
        let (a, b): (u64, u64) = (
            a.trim().parse().map_err(|_| bad())?,
            b.trim().parse().map_err(|_| bad())?,
        );
        if a >= b {
            return Err(bad());
        }
        Ok(Some((a, b)))
    }
}

/// Trace-wide defaults for optional event fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// Storage class of new volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<Name>,
    /// Snapshot class of new snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_class: Option<Name>,
    /// Group snapshot class of new group snapshots (since version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_snapshot_class: Option<Name>,
    /// Size of new volumes in bytes (YAML and JSON also accept quantities such as `"1Gi"`).
    #[serde(
        default,
        deserialize_with = "opt_bytes_de",
        skip_serializing_if = "Option::is_none"
    )]
    pub volume_size: Option<u64>,
    /// Access mode of new volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_mode: Option<AccessMode>,
    /// Volume mode of new volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mode: Option<VolumeMode>,
    /// Namespace of events without a tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Name>,
}

impl Defaults {
    fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// Size used when an event and the header both leave it out: 1 GiB.
    pub const FALLBACK_VOLUME_SIZE: u64 = 1 << 30;

    /// The effective size of a new volume whose event gives `size`.
    pub fn volume_size(&self, size: Option<u64>) -> u64 {
        size.or(self.volume_size)
            .unwrap_or(Self::FALLBACK_VOLUME_SIZE)
    }

    /// The effective access mode of a new volume whose event gives `mode`.
    pub fn access_mode(&self, mode: Option<AccessMode>) -> AccessMode {
        mode.or(self.access_mode)
            .unwrap_or(AccessMode::ReadWriteOnce)
    }
}

/// A volume that exists before the trace starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeDecl {
    /// Volume (PVC) name.
    pub name: Name,
    /// Size in bytes; the header default when absent.
    #[serde(
        default,
        deserialize_with = "opt_bytes_de",
        skip_serializing_if = "Option::is_none"
    )]
    pub size: Option<u64>,
    /// Storage class; the header default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<Name>,
    /// Access mode; the header default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_mode: Option<AccessMode>,
    /// Volume mode; the header default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mode: Option<VolumeMode>,
    /// Attributes class it has (declared in `header.attributes_classes`); none when absent.
    /// Since version 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes_class: Option<Name>,
}

/// A workload that runs before the trace starts, like one started by an `attach` before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadDecl {
    /// Workload (pod) name.
    pub name: Name,
    /// Header-declared volumes it has mounted (may be empty: a pod without storage).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Name>,
    /// Node it is pinned to; the scheduler's choice when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<Name>,
    /// Tenant (namespace) it belongs to, as an event's `tenant`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<Name>,
}

/// Kubernetes persistent volume access modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AccessMode {
    /// Mounted read-write by a single node.
    ReadWriteOnce,
    /// Mounted read-write by a single pod.
    ReadWriteOncePod,
    /// Mounted read-only by many nodes.
    ReadOnlyMany,
    /// Mounted read-write by many nodes.
    ReadWriteMany,
}

/// Whether a volume carries a file system or is a raw block device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VolumeMode {
    /// A file system is created and mounted.
    Filesystem,
    /// The raw block device is handed to the workload.
    Block,
}

/// One trace event: when, which, for whom, and exactly one operation.
///
/// Encoded as a flat map, `{"at": …, "id": …, "<op>": {…}}`; see `docs/trace-format.md`.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Intended time, nanoseconds from trace start.
    pub at: u64,
    /// Stable identifier, strictly increasing in file order.
    pub id: u64,
    /// Tenant (namespace) the event belongs to.
    pub tenant: Option<Name>,
    /// Latency observed in the source recording, nanoseconds.
    pub observed: Option<u64>,
    /// The operation.
    pub op: Op,
}

/// The operation an event performs.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Create a volume (PVC), optionally restored from a snapshot or cloned from a volume.
    CreateVolume(CreateVolume),
    /// Delete a volume.
    DeleteVolume(VolumeRef),
    /// Start a workload (pod) with volumes mounted.
    Attach(Attach),
    /// Stop a workload gracefully; its volumes are detached.
    Detach(WorkloadRef),
    /// Take a snapshot of a volume.
    Snapshot(Snapshot),
    /// Delete a snapshot.
    DeleteSnapshot(SnapshotRef),
    /// Grow a volume (or lower the request of a failed grow: a recovery).
    Resize(Resize),
    /// Change a volume's attributes class (its IOPS/throughput tier) online.
    ModifyVolume(ModifyVolume),
    /// Take one crash-consistent snapshot of several volumes together.
    GroupSnapshot(GroupSnapshot),
    /// Delete a group snapshot (and its members' snapshots).
    DeleteGroupSnapshot(GroupSnapshotRef),
    /// A node is out of service (shut down): its volumes are detached by force and its
    /// workloads start again elsewhere.
    ForceDetach(NodeRef),
    /// Kill a workload and its running I/O mid-flight; its volumes are detached.
    AbortWorkload(WorkloadRef),
    /// Move a workload to another node.
    Reschedule(Reschedule),
    /// Mark a node unschedulable.
    CordonNode(NodeRef),
    /// Cordon a node and evict its workloads.
    DrainNode(NodeRef),
    /// One I/O request.
    Io(Io),
    /// A generated I/O unit on a volume.
    IoPhase(IoPhase),
    /// A named boundary, shown in analysis and plots.
    Marker(Marker),
    /// List the allocated blocks of a snapshot (changed-block tracking, version 3).
    SnapshotAllocated(SnapshotAllocated),
    /// List the blocks that changed between two snapshots of one volume (changed-block
    /// tracking, version 3).
    SnapshotDelta(SnapshotDelta),
}

/// `create_volume`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateVolume {
    /// Volume name.
    pub volume: Name,
    /// Requested size in bytes; the header default when absent.
    #[serde(
        default,
        deserialize_with = "opt_bytes_de",
        skip_serializing_if = "Option::is_none"
    )]
    pub size: Option<u64>,
    /// Storage class; the header default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<Name>,
    /// Access mode; the header default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_mode: Option<AccessMode>,
    /// Volume mode; the header default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mode: Option<VolumeMode>,
    /// Restore from a snapshot or clone from a volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<VolumeSource>,
}

/// Data source of a new volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum VolumeSource {
    /// Restore the named snapshot.
    Snapshot(Name),
    /// Clone the named volume.
    Volume(Name),
    /// Restore one member of a group snapshot (since version 2).
    GroupMember(GroupMember),
}

/// A member of a group snapshot: the snapshot the group took of `volume`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupMember {
    /// The group snapshot.
    pub group: Name,
    /// The member volume (as it was named when the group was taken).
    pub volume: Name,
}

/// An operation on one volume by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeRef {
    /// Volume name.
    pub volume: Name,
}

/// `attach`: start a workload with volumes mounted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attach {
    /// Workload (pod) name.
    pub workload: Name,
    /// Volumes to mount (may be empty: a pod without storage).
    #[serde(default)]
    pub volumes: Vec<Name>,
    /// Node to pin the workload to; the scheduler's choice when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<Name>,
    /// The pod may wait for room on a node (an attach limit reached, a full node) until the
    /// operation's timeout, instead of failing once the provider's grace for an
    /// unschedulable pod is over (version 3).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wait_for_room: bool,
}

/// An operation on one workload by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadRef {
    /// Workload name.
    pub workload: Name,
}

/// `snapshot`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// Volume to snapshot.
    pub volume: Name,
    /// Name of the new snapshot.
    pub snapshot: Name,
    /// Snapshot class; the header default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<Name>,
}

/// An operation on one snapshot by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRef {
    /// Snapshot name.
    pub snapshot: Name,
}

/// `snapshot_allocated` (version 3): the allocated blocks of a snapshot, as a backup reads
/// them for a full copy (CSI `GetMetadataAllocated`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotAllocated {
    /// The snapshot.
    pub snapshot: Name,
    /// Granularity of the listed blocks in bytes; the storage's own when absent.
    #[serde(
        default,
        deserialize_with = "opt_bytes_de",
        skip_serializing_if = "Option::is_none"
    )]
    pub block_size: Option<u64>,
}

/// `snapshot_delta` (version 3): the blocks that changed from `base` to `snapshot`, two
/// snapshots of one volume, as an incremental backup reads them (CSI `GetMetadataDelta`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotDelta {
    /// The earlier snapshot.
    pub base: Name,
    /// The later snapshot.
    pub snapshot: Name,
    /// Granularity of the listed blocks in bytes; the storage's own when absent.
    #[serde(
        default,
        deserialize_with = "opt_bytes_de",
        skip_serializing_if = "Option::is_none"
    )]
    pub block_size: Option<u64>,
}

/// `resize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resize {
    /// Volume to grow.
    pub volume: Name,
    /// New size in bytes.
    #[serde(deserialize_with = "bytes_de")]
    pub size: u64,
}

/// `modify_volume`: change a volume's attributes class (Kubernetes' VolumeAttributesClass).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModifyVolume {
    /// Volume to modify.
    pub volume: Name,
    /// The attributes class it moves to (declared in `header.attributes_classes`).
    pub class: Name,
}

/// `group_snapshot`: one crash-consistent snapshot of several volumes (Kubernetes'
/// VolumeGroupSnapshot).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSnapshot {
    /// Name of the new group snapshot.
    pub group: Name,
    /// The volumes it takes together (at least one).
    pub volumes: Vec<Name>,
    /// Group snapshot class; the header default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<Name>,
}

/// An operation on one group snapshot by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSnapshotRef {
    /// Group snapshot name.
    pub group: Name,
}

/// `reschedule`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reschedule {
    /// Workload to move.
    pub workload: Name,
    /// Target node; the scheduler's choice when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<Name>,
}

/// An operation on one node by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeRef {
    /// Node name.
    pub node: Name,
}

/// `marker`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Marker {
    /// Marker name.
    pub name: String,
}

/// The operation types, in a fixed order used for tables and binary tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum OpType {
    /// `create_volume`
    CreateVolume = 0,
    /// `delete_volume`
    DeleteVolume = 1,
    /// `attach`
    Attach = 2,
    /// `detach`
    Detach = 3,
    /// `snapshot`
    Snapshot = 4,
    /// `delete_snapshot`
    DeleteSnapshot = 5,
    /// `resize`
    Resize = 6,
    /// `abort_workload`
    AbortWorkload = 7,
    /// `reschedule`
    Reschedule = 8,
    /// `cordon_node`
    CordonNode = 9,
    /// `drain_node`
    DrainNode = 10,
    /// `io`
    Io = 11,
    /// `io_phase`
    IoPhase = 12,
    /// `marker`
    Marker = 13,
    /// `modify_volume` (since version 2)
    ModifyVolume = 14,
    /// `group_snapshot` (since version 2)
    GroupSnapshot = 15,
    /// `delete_group_snapshot` (since version 2)
    DeleteGroupSnapshot = 16,
    /// `force_detach` (since version 2)
    ForceDetach = 17,
    /// `snapshot_allocated` (since version 3)
    SnapshotAllocated = 18,
    /// `snapshot_delta` (since version 3)
    SnapshotDelta = 19,
}

impl OpType {
    /// All operation types in tag order.
    pub const ALL: [OpType; 20] = [
        OpType::CreateVolume,
        OpType::DeleteVolume,
        OpType::Attach,
        OpType::Detach,
        OpType::Snapshot,
        OpType::DeleteSnapshot,
        OpType::Resize,
        OpType::AbortWorkload,
        OpType::Reschedule,
        OpType::CordonNode,
        OpType::DrainNode,
        OpType::Io,
        OpType::IoPhase,
        OpType::Marker,
        OpType::ModifyVolume,
        OpType::GroupSnapshot,
        OpType::DeleteGroupSnapshot,
        OpType::ForceDetach,
        OpType::SnapshotAllocated,
        OpType::SnapshotDelta,
    ];

    /// The key that names this operation in text encodings.
    pub const fn name(self) -> &'static str {
        match self {
            OpType::CreateVolume => "create_volume",
            OpType::DeleteVolume => "delete_volume",
            OpType::Attach => "attach",
            OpType::Detach => "detach",
            OpType::Snapshot => "snapshot",
            OpType::DeleteSnapshot => "delete_snapshot",
            OpType::Resize => "resize",
            OpType::AbortWorkload => "abort_workload",
            OpType::Reschedule => "reschedule",
            OpType::CordonNode => "cordon_node",
            OpType::DrainNode => "drain_node",
            OpType::Io => "io",
            OpType::IoPhase => "io_phase",
            OpType::Marker => "marker",
            OpType::ModifyVolume => "modify_volume",
            OpType::GroupSnapshot => "group_snapshot",
            OpType::DeleteGroupSnapshot => "delete_group_snapshot",
            OpType::ForceDetach => "force_detach",
            OpType::SnapshotAllocated => "snapshot_allocated",
            OpType::SnapshotDelta => "snapshot_delta",
        }
    }

    /// Looks an operation up by its text key.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Looks an operation up by its binary tag.
    pub fn from_tag(tag: u8) -> Option<Self> {
        Self::ALL.get(usize::from(tag)).copied()
    }

    /// The first format version that has this operation.
    pub const fn since(self) -> u32 {
        match self {
            OpType::ModifyVolume
            | OpType::GroupSnapshot
            | OpType::DeleteGroupSnapshot
            | OpType::ForceDetach => 2,
            OpType::SnapshotAllocated | OpType::SnapshotDelta => 3,
            _ => 1,
        }
    }

    /// Whether this is a control operation (not I/O, not a marker).
    pub const fn is_control(self) -> bool {
        !matches!(self, OpType::Io | OpType::IoPhase | OpType::Marker)
    }
}

impl std::fmt::Display for OpType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Op {
    /// The operation's type.
    pub const fn op_type(&self) -> OpType {
        match self {
            Op::CreateVolume(_) => OpType::CreateVolume,
            Op::DeleteVolume(_) => OpType::DeleteVolume,
            Op::Attach(_) => OpType::Attach,
            Op::Detach(_) => OpType::Detach,
            Op::Snapshot(_) => OpType::Snapshot,
            Op::DeleteSnapshot(_) => OpType::DeleteSnapshot,
            Op::Resize(_) => OpType::Resize,
            Op::ModifyVolume(_) => OpType::ModifyVolume,
            Op::GroupSnapshot(_) => OpType::GroupSnapshot,
            Op::DeleteGroupSnapshot(_) => OpType::DeleteGroupSnapshot,
            Op::ForceDetach(_) => OpType::ForceDetach,
            Op::AbortWorkload(_) => OpType::AbortWorkload,
            Op::Reschedule(_) => OpType::Reschedule,
            Op::CordonNode(_) => OpType::CordonNode,
            Op::DrainNode(_) => OpType::DrainNode,
            Op::Io(_) => OpType::Io,
            Op::IoPhase(_) => OpType::IoPhase,
            Op::Marker(_) => OpType::Marker,
            Op::SnapshotAllocated(_) => OpType::SnapshotAllocated,
            Op::SnapshotDelta(_) => OpType::SnapshotDelta,
        }
    }
}
