//! The storage summary suite, in the style of a whitepaper's fio table: random read and write
//! IOPS, random read and write bandwidth, average (QD1) latency, sequential read and write
//! bandwidth, and mixed random 70/30.

use std::path::Path;
use std::time::Duration;

use trace_format::{BlockSize, Load, Pattern};

use crate::{EngineOptions, Error, PhaseResult, PhaseSpec, Stop, run_phase};

/// Suite parameters.
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    /// Region (file size) to use.
    pub size: u64,
    /// Run time of each test.
    pub runtime: Duration,
    /// O_DIRECT.
    pub direct: bool,
}

impl Default for SuiteOptions {
    fn default() -> Self {
        SuiteOptions {
            size: 1 << 30,
            runtime: Duration::from_secs(10),
            direct: true,
        }
    }
}

/// One test of the suite and its result.
#[derive(Debug, Clone)]
pub struct SuiteEntry {
    /// Test name (e.g. `randread-4k-qd32`).
    pub name: String,
    /// What was measured (`iops`, `bandwidth` or `latency`).
    pub metric: &'static str,
    /// The result.
    pub result: PhaseResult,
}

const TESTS: [(&str, &str, Pattern, u8, u64, u32); 9] = [
    ("randread-4k-qd32", "iops", Pattern::Random, 100, 4096, 32),
    ("randwrite-4k-qd32", "iops", Pattern::Random, 0, 4096, 32),
    (
        "randread-128k-qd16",
        "bandwidth",
        Pattern::Random,
        100,
        128 << 10,
        16,
    ),
    (
        "randwrite-128k-qd16",
        "bandwidth",
        Pattern::Random,
        0,
        128 << 10,
        16,
    ),
    ("randread-4k-qd1", "latency", Pattern::Random, 100, 4096, 1),
    ("randwrite-4k-qd1", "latency", Pattern::Random, 0, 4096, 1),
    (
        "read-1m-qd16",
        "bandwidth",
        Pattern::Sequential,
        100,
        1 << 20,
        16,
    ),
    (
        "write-1m-qd16",
        "bandwidth",
        Pattern::Sequential,
        0,
        1 << 20,
        16,
    ),
    ("randrw70-4k-qd32", "iops", Pattern::Random, 70, 4096, 32),
];

/// Runs the suite on `target`, one test after the other; a stop ends it after the current
/// test (whose result is marked partial). An interval log goes to one file per test,
/// [`crate::part_path`]`(log, test name)`.
pub fn run_suite(
    target: &Path,
    so: &SuiteOptions,
    opts: &EngineOptions,
    stop: &Stop,
) -> Result<Vec<SuiteEntry>, Error> {
    let mut out = Vec::new();
    for (name, metric, pattern, read_pct, bs, depth) in TESTS {
        if stop.is_requested() {
            break;
        }
        let spec = PhaseSpec {
            pattern,
            read_pct,
            block_size: BlockSize::Fixed(bs),
            load: Load::Depth(depth),
            duration: Some(so.runtime),
            region: Some(so.size),
            direct: so.direct,
            ..PhaseSpec::default()
        };
        // Each test its own interval log (`LOG.TEST.ext`), not one overwriting the other.
        let opts = EngineOptions {
            interval_log: opts
                .interval_log
                .as_deref()
                .map(|p| crate::part_path(p, name)),
            ..opts.clone()
        };
        let result = run_phase(&spec, target, &opts, stop)?;
        out.push(SuiteEntry {
            name: name.to_owned(),
            metric,
            result,
        });
    }
    Ok(out)
}
