//! The local provider's configuration, as the manifest records it: how volumes are made, the
//! cap on their size, and the I/O engine's options for `io_phase` and bare `io` streams.

use serde::{Deserialize, Serialize};

/// How volumes are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Loop devices when root, directories otherwise.
    Auto,
    /// Image + mkfs.ext4 + loop device + mount (needs root).
    Loop,
    /// Plain directories.
    Dir,
}

/// The local provider's configuration (recorded in the manifest).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LocalConfig {
    /// Requested mode.
    pub mode: Mode,
    /// Largest volume actually allocated; bigger requests are capped (the image is sparse,
    /// but mkfs and copies scale with it). 0 = no cap.
    pub max_volume_bytes: u64,
    /// iogen engine options for `io_phase`.
    pub io_engine: iogen::EngineChoice,
    /// Bare `io` streams: requests in flight at most per volume.
    #[serde(default = "default_stream_depth")]
    pub stream_depth: u32,
    /// Bare `io` streams: largest request (a buffer of this size per in-flight slot).
    #[serde(default = "default_stream_max_len")]
    pub stream_max_len: u64,
    /// Bare `io` streams: a sparse target up to this size is written once before the clock
    /// starts (0: never).
    #[serde(default = "default_stream_layout_max")]
    pub stream_layout_max: u64,
    /// Bare `io` streams: spin margin before each deadline, ns (`None`: iogen's 50 µs; 0:
    /// sleep to each deadline, for more busy volumes than spare CPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_spin_ns: Option<u64>,
    /// Open-loop I/O (`io_phase` and bare `io` streams): workers that may spin before their
    /// deadlines at once (`None`: iogen's default, one fewer than the CPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_spinners: Option<usize>,
    /// Bare `io` streams: the CPU of each stream's thread (its ring's kernel I/O workers go
    /// to the others).
    #[serde(default)]
    pub stream_cpus: StreamCpus,
}

/// Where the bare `io` streams run ([`iogen::CpuPlacement`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamCpus {
    /// When the stream's target is sparse (its writes allocate blocks, which the kernel
    /// hands to its I/O workers) and the header declares fewer volumes than the process may
    /// use CPUs: the i-th volume's stream on the i-th CPU from the last, every ring's kernel
    /// I/O workers on the CPUs left over. Otherwise, as `none`: a stream whose requests the
    /// submitting call carries out itself is better free to move away from whatever else
    /// wakes on its CPU (docs/performance-history.md, *Block-trace replay*).
    #[default]
    Auto,
    /// Wherever the scheduler puts them.
    None,
    /// The i-th volume's stream on `list[i % len]`; kernel I/O workers on the other CPUs.
    List(Vec<usize>),
}

fn default_stream_layout_max() -> u64 {
    8 << 30
}

/// Default of [`LocalConfig::stream_depth`]: deep enough for a Poisson burst at 50 k
/// requests/s on this machine's disk (docs/PERFORMANCE.md, Block-trace replay).
pub const DEFAULT_STREAM_DEPTH: u32 = 128;

fn default_stream_depth() -> u32 {
    DEFAULT_STREAM_DEPTH
}

fn default_stream_max_len() -> u64 {
    1 << 20
}

impl Default for LocalConfig {
    fn default() -> Self {
        Self {
            mode: Mode::Auto,
            max_volume_bytes: 0,
            // io_uring when the kernel offers it, the thread pool otherwise (iogen probes).
            io_engine: iogen::EngineChoice::Auto,
            stream_depth: DEFAULT_STREAM_DEPTH,
            stream_max_len: default_stream_max_len(),
            stream_layout_max: default_stream_layout_max(),
            stream_spin_ns: None,
            io_spinners: None,
            stream_cpus: StreamCpus::Auto,
        }
    }
}
