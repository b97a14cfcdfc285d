//! The I/O operations: `io` (one request, from imported block traces) and `io_phase` (a
//! generated I/O unit run by iogen) with the profile types it is made of.

use serde::{Deserialize, Serialize};

use crate::units::{Name, bytes_de, duration_opt_de, opt_bytes_de};

/// `io`: one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Io {
    /// Target volume.
    pub volume: Name,
    /// Request kind.
    pub kind: IoKind,
    /// Byte offset (0 for flush).
    #[serde(default, deserialize_with = "bytes_de")]
    pub offset: u64,
    /// Length in bytes (0 for flush).
    #[serde(default, deserialize_with = "bytes_de")]
    pub len: u64,
}

/// Kind of a single I/O request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoKind {
    /// Read.
    Read,
    /// Write.
    Write,
    /// Discard / trim.
    Trim,
    /// Flush (fsync).
    Flush,
}

/// `io_phase`: a generated I/O unit on a volume, run inside an attached workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IoPhase {
    /// Workload the I/O runs in; it must be attached with `volume`.
    pub workload: Name,
    /// Target volume.
    pub volume: Name,
    /// Access pattern.
    pub pattern: Pattern,
    /// Share of reads, in percent (0 = all writes, 100 = all reads).
    pub read_pct: u8,
    /// Block size, fixed or a weighted mix.
    pub block_size: BlockSize,
    /// Closed loop at a queue depth, or open loop at a rate.
    pub load: Load,
    /// Stop after this long (ns; YAML and JSON also accept `"30s"`).
    #[serde(
        default,
        deserialize_with = "duration_opt_de",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration: Option<u64>,
    /// Stop after this many bytes.
    #[serde(
        default,
        deserialize_with = "opt_bytes_de",
        skip_serializing_if = "Option::is_none"
    )]
    pub bytes: Option<u64>,
    /// Size of the region to use, from offset 0; the whole volume when absent.
    #[serde(
        default,
        deserialize_with = "opt_bytes_de",
        skip_serializing_if = "Option::is_none"
    )]
    pub region: Option<u64>,
    /// Number of parallel jobs.
    #[serde(default = "one")]
    pub jobs: u32,
    /// Bypass the page cache (O_DIRECT).
    #[serde(default)]
    pub direct: bool,
    /// Write verifiable blocks and check them on read.
    #[serde(default)]
    pub verify: bool,
    /// Ordered writes across volumes, or the check of their restored copies (version 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordered: Option<Ordered>,
}

/// An `io_phase`'s ordered-write part (version 3): with `read_pct` 0 the phase writes `volume`
/// and `with` together, each write stamped with a global sequence number and logged in ack
/// order under `log`; with `read_pct` 100 it checks that `volume` and `with` (restored copies,
/// in the writer's order) are one consistent cut of the writes logged under `log`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ordered {
    /// Name of the ordered-write log: the writing phase's, which a checking phase names.
    pub log: Name,
    /// The other volumes, after `volume`, in volume order.
    #[serde(default)]
    pub with: Vec<Name>,
}

impl IoPhase {
    /// Every volume the phase uses: `volume`, then `ordered.with`.
    pub fn volumes(&self) -> impl Iterator<Item = &Name> {
        std::iter::once(&self.volume).chain(self.ordered.iter().flat_map(|o| o.with.iter()))
    }
}

fn one() -> u32 {
    1
}

/// Access pattern of an `io_phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    /// Uniformly random aligned offsets.
    Random,
    /// Consecutive offsets, wrapping at the end of the region.
    Sequential,
}

/// Block size of an `io_phase`: one size, or a weighted mix.
///
/// Written as an integer (or quantity string) for a fixed size, a list for a mix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum BlockSize {
    /// Every request has this size in bytes.
    Fixed(u64),
    /// Each request draws a size with probability proportional to its weight.
    Mix(Vec<BlockSizeShare>),
}

/// One entry of a block-size mix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockSizeShare {
    /// Size in bytes.
    #[serde(deserialize_with = "bytes_de")]
    pub size: u64,
    /// Relative weight.
    pub weight: u32,
}

/// Load of an `io_phase`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Load {
    /// Closed loop: keep this many requests in flight.
    Depth(u32),
    /// Open loop: issue requests at a rate regardless of completions.
    Rate(Rate),
}

/// An open-loop arrival rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rate {
    /// Requests per second.
    pub iops: f64,
    /// Arrival process.
    #[serde(default)]
    pub arrival: Arrival,
}

/// Arrival process of an open-loop rate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arrival {
    /// Evenly spaced.
    #[default]
    Uniform,
    /// Exponential inter-arrival times.
    Poisson,
}
