//! The workload model: what a user writes in YAML to describe a cluster's churn.
//!
//! Every struct denies unknown fields, so a typo is an error naming its line and field path
//! rather than a silently ignored setting. Durations are written `"90s"`, `"5m"`, `"2d"` or as
//! a number of seconds; sizes as bytes or quantities (`"1Gi"`); rates as `"100/s"`, `"6/m"`,
//! `"3/h"`, `"1/d"` or a number per second. The reference is `docs/synth.md`.

use std::path::Path;

use serde::{Deserialize, Serialize};
use trace_format::{AccessMode, BlockSize, Load, Pattern, VolumeMode};

mod values;

pub use values::{Bytes, Rate, Target, TargetOp, parse_rate};

use values::{dur_de, dur_opt_de};

use crate::dist::Dist;
use crate::error::Error;

/// A workload model.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// Free text, copied into the trace's provenance.
    #[serde(default)]
    pub description: Option<String>,
    /// How long to generate after the warm-up (default 1 h).
    #[serde(default = "one_hour", deserialize_with = "dur_de")]
    pub duration: u64,
    /// Seed used when the command line gives none (default 0).
    #[serde(default)]
    pub seed: Option<u64>,
    /// Start from a populated cluster in steady state (default) or from an empty one.
    #[serde(default)]
    pub start: Start,
    /// Spread the initial population's attaches over this long before the steady state
    /// begins. Default 0: the initial population runs before the trace starts (its volumes
    /// and workloads are declared in the header), so the trace has no burst of attaches.
    #[serde(default, deserialize_with = "dur_de")]
    pub warmup: u64,
    /// What happens to objects still alive at the end.
    #[serde(default)]
    pub end: End,
    /// Hosts, containers per host, tenants and node names.
    #[serde(default)]
    pub cluster: Cluster,
    /// Container lifetime distribution (or `preset: NAME`).
    pub lifetime: Dist,
    /// How containers arrive (default: replacement, keeping every slot busy).
    #[serde(default)]
    pub arrivals: Arrivals,
    /// Solve the cluster size for an operation rate (Little's law); the command line's
    /// `--target` overrides it.
    #[serde(default)]
    pub target: Option<Target>,
    /// Persistent volumes of containers (none when absent).
    #[serde(default)]
    pub volumes: Option<Volumes>,
    /// Snapshot policies.
    #[serde(default)]
    pub snapshots: Vec<SnapshotPolicy>,
    /// Restores of random live snapshots into new volumes.
    #[serde(default)]
    pub restores: Option<Derived>,
    /// Clones of random live volumes into new volumes.
    #[serde(default)]
    pub clones: Option<Derived>,
    /// Attributes-class changes (`modify_volume`) of random live container volumes.
    #[serde(default)]
    pub modifies: Option<Modifies>,
    /// Group snapshots of random live container volumes, deleted after a while.
    #[serde(default)]
    pub group_snapshots: Option<GroupSnapshots>,
    /// I/O run by each container on its volumes.
    #[serde(default)]
    pub io: Option<Io>,
    /// Failure injection at cluster-wide rates.
    #[serde(default)]
    pub failures: Failures,
    /// Node drains at given times.
    #[serde(default)]
    pub drains: Vec<Drain>,
}

fn one_hour() -> u64 {
    3_600_000_000_000
}

/// How the trace starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Start {
    /// Containers already alive, with residual lifetimes from the equilibrium distribution.
    #[default]
    SteadyState,
    /// No container alive at t = 0.
    Empty,
}

/// What happens at the end of the trace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum End {
    /// Objects alive at the end stay (cleaning up is the replayer's business).
    #[default]
    Leave,
    /// At the end, detach every running container and delete the volumes and snapshots
    /// the trace created.
    CleanUp,
}

/// The cluster.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cluster {
    /// Number of hosts (nodes).
    #[serde(default = "one")]
    pub hosts: u32,
    /// Containers per host: the slots kept busy by `replacement` arrivals.
    #[serde(default = "one_count")]
    pub containers_per_host: Count,
    /// Node names are this prefix and a zero-padded index (default `node-`).
    #[serde(default = "node_prefix")]
    pub node_prefix: String,
    /// Pin workloads to their node in `attach` (default true).
    #[serde(default = "yes")]
    pub pin_nodes: bool,
    /// Tenants (namespaces) with shares of the containers; events carry no tenant when empty.
    #[serde(default)]
    pub tenants: Vec<Tenant>,
    /// Workload names are this prefix and a sequence number (default `pod-`).
    #[serde(default = "pod_prefix")]
    pub workload_prefix: String,
}

impl Default for Cluster {
    fn default() -> Self {
        Self {
            hosts: 1,
            containers_per_host: Count::Fixed(1),
            node_prefix: node_prefix(),
            pin_nodes: true,
            tenants: Vec::new(),
            workload_prefix: pod_prefix(),
        }
    }
}

fn one() -> u32 {
    1
}
fn one_count() -> Count {
    Count::Fixed(1)
}
fn yes() -> bool {
    true
}
fn node_prefix() -> String {
    "node-".into()
}
fn pod_prefix() -> String {
    "pod-".into()
}

/// A tenant and its share of containers.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tenant {
    /// Namespace name.
    pub name: String,
    /// Relative share.
    pub share: f64,
}

/// A whole number drawn per host or per container.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Count {
    /// Always this many.
    Fixed(u32),
    /// A weighted choice.
    Weighted(Vec<Weighted<u32>>),
    /// Poisson with this mean: `{poisson: 2.5}`.
    Poisson {
        /// The mean.
        poisson: f64,
    },
    /// A preset: `{preset: containers-per-host-2019}`.
    Preset {
        /// The preset's name.
        preset: String,
    },
}

/// One weighted alternative.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Weighted<T> {
    /// The value.
    pub value: T,
    /// Relative weight.
    pub weight: f64,
}

/// One value, or a weighted choice among several.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Choice<T> {
    /// Always this value.
    One(T),
    /// A weighted choice.
    Weighted(Vec<Weighted<T>>),
}

/// How containers arrive.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Arrivals {
    /// Keep every slot (hosts × containers per host) busy: a container that ends is replaced
    /// at once on the same host.
    #[default]
    Replacement,
    /// Poisson arrivals at a rate, placed on a uniformly chosen host.
    Poisson {
        /// Containers per second.
        rate: Rate,
    },
    /// Renewal arrivals with gamma inter-arrival times of the given coefficient of variation
    /// (1 is Poisson; above 1 is bursty).
    Renewal {
        /// Containers per second.
        rate: Rate,
        /// Coefficient of variation of the inter-arrival times.
        cv: f64,
    },
    /// A Poisson process whose rate changes over time (sampled by thinning).
    Varying(Profile),
    /// Groups of containers started at the same instant (the seed's Experiment 1).
    Batches(Vec<Batch>),
}

/// A time-varying arrival rate.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Profile {
    /// Piecewise constant: each step's rate holds from its `at` to the next step.
    Steps(Vec<Step>),
    /// Linear from `from` at t = 0 to `to` at `over`, then flat.
    Ramp {
        /// Rate at the start.
        from: Rate,
        /// Rate at `over` and after.
        to: Rate,
        /// Length of the ramp.
        #[serde(deserialize_with = "dur_de")]
        over: u64,
    },
    /// `mean · (1 + amplitude · cos(2π (t − peak) / period))`.
    Diurnal {
        /// Mean rate.
        mean: Rate,
        /// Relative amplitude in [0, 1].
        amplitude: f64,
        /// Period (default 1 day).
        #[serde(default = "one_day", deserialize_with = "dur_de")]
        period: u64,
        /// Time of the peak within the period (default 14 h).
        #[serde(default = "two_pm", deserialize_with = "dur_de")]
        peak: u64,
    },
}

fn one_day() -> u64 {
    86_400_000_000_000
}
fn two_pm() -> u64 {
    14 * 3_600_000_000_000
}

/// One step of a piecewise-constant rate.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// From when.
    #[serde(deserialize_with = "dur_de")]
    pub at: u64,
    /// Containers per second.
    pub rate: Rate,
}

/// A group of containers started together.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Batch {
    /// When.
    #[serde(deserialize_with = "dur_de")]
    pub at: u64,
    /// How many containers.
    pub count: u32,
}

/// Container volumes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Volumes {
    /// Share of containers that get volumes (default 1).
    #[serde(default = "one_f")]
    pub share: f64,
    /// Volumes per container that gets any (default 1).
    #[serde(default = "one_count")]
    pub per_container: Count,
    /// Size of new volumes (default 1Gi).
    #[serde(default = "one_gib")]
    pub size: Choice<Bytes>,
    /// Storage class of new volumes (the cluster default when absent).
    #[serde(default)]
    pub storage_class: Option<Choice<String>>,
    /// Access mode of new volumes (ReadWriteOnce when absent).
    #[serde(default)]
    pub access_mode: Option<Choice<AccessMode>>,
    /// Volume mode of new volumes.
    #[serde(default)]
    pub volume_mode: Option<VolumeMode>,
    /// Reuse of pre-existing volumes instead of creating new ones.
    #[serde(default)]
    pub reuse: Option<Reuse>,
    /// Delay between a container's detach and the deletion of its volumes (default 0).
    #[serde(default, deserialize_with = "dur_de")]
    pub delete_after: u64,
}

fn one_f() -> f64 {
    1.0
}
fn one_gib() -> Choice<Bytes> {
    Choice::One(Bytes(1 << 30))
}

/// A pool of pre-existing volumes (declared in the trace header) that containers reuse.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reuse {
    /// Share of a container's volumes taken from the pool (a new one is created when no pool
    /// volume is free).
    pub share: f64,
    /// Pool size.
    pub pool: u32,
    /// Pool volume names are this prefix and an index (default `pool-`).
    #[serde(default = "pool_prefix")]
    pub prefix: String,
}

fn pool_prefix() -> String {
    "pool-".into()
}

/// A snapshot policy.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum SnapshotPolicy {
    /// One snapshot every `every`, cycling over a set of volumes (the seed's Experiment 2).
    RoundRobin(RoundRobin),
    /// Each container volume is snapshotted on its own schedule.
    PerVolume(PerVolume),
    /// Each container volume is backed up incrementally: a snapshot every `every`, then the
    /// changed blocks since the previous snapshot of the volume (`snapshot_delta`), the first
    /// snapshot listed in full (`snapshot_allocated`).
    IncrementalBackup(IncrementalBackup),
}

/// Incremental backups of every container volume (changed-block tracking, trace version 3).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncrementalBackup {
    /// Interval between two snapshots of one volume.
    #[serde(deserialize_with = "dur_de")]
    pub every: u64,
    /// First snapshot this long after the volume's attach (default: one interval). Volumes of
    /// the steady-state population start at a uniformly random phase instead.
    #[serde(default, deserialize_with = "dur_opt_de")]
    pub from: Option<u64>,
    /// Snapshots per volume (default: until the volume is deleted).
    #[serde(default)]
    pub count: Option<u32>,
    /// List the allocated blocks of a volume's first snapshot: the full backup (default true).
    #[serde(default = "yes")]
    pub full_first: bool,
    /// List each later snapshot's changes since the previous one of its volume (default true).
    #[serde(default = "yes")]
    pub deltas: bool,
    /// Time from a snapshot to its listing (default 0: at once; the replayer starts the
    /// listing when the snapshots it reads are ready).
    #[serde(default, deserialize_with = "dur_de")]
    pub delay: u64,
    /// Keep the newest K snapshots of each volume's chain (K ≥ 1), deleting older ones once
    /// their listings are written; none are deleted when absent.
    #[serde(default)]
    pub retain: Option<u32>,
    /// Granularity of the listed ranges (a power of two ≥ 512; the storage's own when absent).
    #[serde(default)]
    pub block_size: Option<Bytes>,
    /// Snapshot class.
    #[serde(default)]
    pub class: Option<String>,
}

/// Round-robin snapshots.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoundRobin {
    /// Interval between snapshots.
    #[serde(deserialize_with = "dur_de")]
    pub every: u64,
    /// Time of the first snapshot (default: one interval after the start).
    #[serde(default, deserialize_with = "dur_opt_de")]
    pub from: Option<u64>,
    /// Stop after this many snapshots.
    #[serde(default)]
    pub count: Option<u32>,
    /// Which volumes: live container volumes (default) or the reuse pool.
    #[serde(default)]
    pub over: Over,
    /// Cycle over at most this many of them (the oldest first).
    #[serde(default)]
    pub volumes: Option<u32>,
    /// Keep at most this many snapshots of this policy; older ones are deleted.
    #[serde(default)]
    pub retain: Option<u32>,
    /// Snapshot class (the cluster default when absent).
    #[serde(default)]
    pub class: Option<String>,
}

/// The volume set of a round-robin policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Over {
    /// Live container volumes, in creation order.
    #[default]
    Live,
    /// The pre-existing pool.
    Pool,
}

/// Per-volume snapshots.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerVolume {
    /// Mean interval between snapshots of one volume.
    #[serde(deserialize_with = "dur_de")]
    pub every: u64,
    /// Periodic (default) or Poisson.
    #[serde(default)]
    pub process: Process,
    /// Keep at most this many snapshots per volume; older ones are deleted.
    #[serde(default)]
    pub retain: Option<u32>,
    /// Snapshot class.
    #[serde(default)]
    pub class: Option<String>,
}

/// A point process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Process {
    /// Fixed intervals.
    #[default]
    Periodic,
    /// Exponential intervals.
    Poisson,
}

/// Volumes derived from others (restores, clones) at a rate, deleted after `keep`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Derived {
    /// Cluster-wide rate.
    pub rate: Rate,
    /// How long the new volume lives (default 5 min).
    #[serde(default = "five_min", deserialize_with = "dur_de")]
    pub keep: u64,
}

fn five_min() -> u64 {
    300_000_000_000
}

/// Per-container I/O.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Io {
    /// Share of containers with volumes that run I/O (default 1).
    #[serde(default = "one_f")]
    pub share: f64,
    /// Delay after attach before the first phase (default 0).
    #[serde(default, deserialize_with = "dur_de")]
    pub delay: u64,
    /// Phases run one after another on every volume of the container.
    pub phases: Vec<Phase>,
}

/// One `io_phase` template.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    /// Access pattern.
    pub pattern: Pattern,
    /// Share of reads in percent.
    pub read_pct: u8,
    /// Block size, fixed or a mix.
    pub block_size: BlockSize,
    /// Queue depth or rate.
    pub load: Load,
    /// Length; until the container ends when absent (only the last phase).
    #[serde(default, deserialize_with = "dur_opt_de")]
    pub duration: Option<u64>,
    /// Stop after this many bytes.
    #[serde(default)]
    pub bytes: Option<Bytes>,
    /// Region from offset 0 (the whole volume when absent).
    #[serde(default)]
    pub region: Option<Bytes>,
    /// Parallel jobs (default 1).
    #[serde(default = "one")]
    pub jobs: u32,
    /// O_DIRECT.
    #[serde(default)]
    pub direct: bool,
    /// Write and verify checksummed blocks.
    #[serde(default)]
    pub verify: bool,
}

/// Failure injection: each a cluster-wide Poisson rate acting on a random live object.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failures {
    /// Grow a random live container volume.
    #[serde(default)]
    pub resize: Option<ResizeSpec>,
    /// Kill a random running container (`abort_workload` instead of its `detach`).
    #[serde(default)]
    pub abort: Option<RateOnly>,
    /// Move a random running container to another node.
    #[serde(default)]
    pub reschedule: Option<RateOnly>,
}

/// Attributes-class changes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Modifies {
    /// Cluster-wide rate.
    pub rate: Rate,
    /// The classes, with their parameters (declared in the trace header as they are): each
    /// change moves a volume to one of them other than its current one, uniformly.
    #[serde(deserialize_with = "trace_format::units::class_params_de")]
    pub classes:
        std::collections::BTreeMap<trace_format::Name, std::collections::BTreeMap<String, String>>,
}

/// Group snapshots.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSnapshots {
    /// Cluster-wide rate.
    pub rate: Rate,
    /// Volumes per group (default 2; fewer when fewer are live).
    #[serde(default = "two_volumes")]
    pub volumes: u32,
    /// How long a group snapshot is kept (default 5 min).
    #[serde(default = "five_min", deserialize_with = "dur_de")]
    pub keep: u64,
}

fn two_volumes() -> u32 {
    2
}

/// Resizes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResizeSpec {
    /// Cluster-wide rate.
    pub rate: Rate,
    /// New size = old size × factor, rounded up to a MiB (default 2).
    #[serde(default = "two")]
    pub factor: f64,
}

fn two() -> f64 {
    2.0
}

/// Just a rate.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateOnly {
    /// Cluster-wide rate.
    pub rate: Rate,
}

/// A node drain.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Drain {
    /// When (from the end of the warm-up).
    #[serde(deserialize_with = "dur_de")]
    pub at: u64,
    /// Node name, e.g. `node-03`.
    pub node: String,
}

impl Model {
    /// Reads a model file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let text = fs_err::read_to_string(path)?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses model text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Self, Error> {
        let mut path = String::new();
        let res = serde_saphyr::with_deserializer_from_str(text, |de| {
            serde_path_to_error::deserialize::<_, Model>(de).map_err(|e| {
                path = e.path().to_string();
                e.into_inner()
            })
        });
        res.map_err(|e| Error::Model {
            file: file.to_owned(),
            line: e.location().map(|l| l.line()).filter(|l| *l > 0),
            path: if path == "." { String::new() } else { path },
            message: strip_location(&e.to_string()),
        })
    }
}

/// serde-saphyr writes `error: line L column C: message`; the location is reported apart.
fn strip_location(msg: &str) -> String {
    let first = msg.lines().next().unwrap_or(msg);
    let rest = first.strip_prefix("error: ").unwrap_or(first);
    if rest.starts_with("line ")
        && let Some((_, m)) = rest.split_once(": ")
    {
        return m.to_owned();
    }
    match rest.rfind(" at line ") {
        Some(i) => rest[..i].to_owned(),
        None => rest.to_owned(),
    }
}
