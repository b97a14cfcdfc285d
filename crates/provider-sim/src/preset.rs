//! Named sets of latencies (`run --sim-preset NAME`) for a sim run that should resemble a
//! cluster rather than time the tool: a sim without latencies measures only the engine.
//!
//! `real-node` is testenv's real kubelet node with the cnsreplay CSI driver, from the figures
//! in docs/PERFORMANCE.md (each latency's source beside it): lognormal, the median as
//! measured and the shape from the measured p90 or p99 (`σ = ln(p_q / p50) / z_q`). The
//! volume and snapshot operations come from `scripts/control-latencies.sh` (each operation
//! alone, its service time as the kube provider times it, which is what the sim draws); op
//! types nothing measured there get none (the run names them before its clock starts).

use std::collections::BTreeMap;

use trace_format::OpType;

use crate::Latency;
use trace_format::units::Dur;

/// A preset: its name, what it is, and its latencies (op type, median ns, shape, source).
pub struct Preset {
    /// `--sim-preset` name.
    pub name: &'static str,
    /// One line on what it models.
    pub about: &'static str,
    /// `(op type, median ns, sigma, where the figure comes from)`.
    pub latencies: &'static [(OpType, u64, f64, &'static str)],
}

const MS: u64 = 1_000_000;

/// Every preset.
pub const PRESETS: &[Preset] = &[Preset {
    name: "real-node",
    about: "testenv's real kubelet node with cnsreplay-csi (docs/PERFORMANCE.md)",
    latencies: &[
        (
            OpType::CreateVolume,
            69 * MS,
            0.28,
            "create_volume service p50 67.6–73.9 ms, p90 91.4–103.8 ms, new and restored \
             claims one at a time (Control operations on testenv)",
        ),
        (
            OpType::Attach,
            6_566 * MS,
            0.25,
            "pod create→Running with a fresh volume p50 6 566 ms, p99 11 672 ms (Pod start on \
             the real node)",
        ),
        (
            OpType::IoPhase,
            912 * MS,
            0.16,
            "the iogen pod's start: NodePublish end→Running p50 912 ms, p99 1 336 ms (Pod \
             start on the real node); its I/O then lasts the trace's duration",
        ),
        (
            OpType::Detach,
            151 * MS,
            0.46,
            "detach p50 150.9 ms, p99 439.1 ms (kube provider at scale: the same control \
             plane, kwok nodes)",
        ),
        (
            OpType::Snapshot,
            99 * MS,
            0.17,
            "snapshot service p50 85.5–112.8 ms, p90 104.9–132.5 ms, one at a time (Control \
             operations on testenv)",
        ),
        (
            OpType::DeleteSnapshot,
            64 * MS,
            0.13,
            "delete_snapshot service p50 54.3–64.3 ms, p90 70.8–83.4 ms (Control operations \
             on testenv)",
        ),
        (
            OpType::Resize,
            48 * MS,
            0.11,
            "resize service p50 44.1–54.1 ms, p90 53.6–63.8 ms, a detached claim (Control \
             operations on testenv)",
        ),
        (
            OpType::DeleteVolume,
            92 * MS,
            0.48,
            "delete_volume service p50 79.3–94.0 ms, p90 168.0–184.4 ms (Control operations \
             on testenv)",
        ),
        (
            OpType::GroupSnapshot,
            1_000 * MS,
            0.14,
            "VolumeGroupSnapshot of three, request→ready 863–1 197 ms (Group snapshots, on \
             the real node)",
        ),
    ],
}];

/// The preset named `name`, or an error listing the names.
pub fn find(name: &str) -> Result<&'static Preset, String> {
    PRESETS.iter().find(|p| p.name == name).ok_or_else(|| {
        let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
        format!("unknown sim preset {name:?}; known: {}", names.join(", "))
    })
}

impl Preset {
    /// Its latencies as the sim's configuration takes them.
    pub fn ops(&self) -> BTreeMap<OpType, Latency> {
        self.latencies
            .iter()
            .map(|&(op, median, sigma, _)| {
                (
                    op,
                    Latency::Lognormal {
                        median: Dur(median),
                        sigma,
                    },
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every preset's latencies are valid distributions, one per op type, each with its
    /// source; an unknown name lists the known ones.
    #[test]
    fn presets_are_valid_and_named() {
        for p in PRESETS {
            let ops = p.ops();
            assert_eq!(ops.len(), p.latencies.len(), "{}: an op type twice", p.name);
            for (op, l) in &ops {
                l.check()
                    .unwrap_or_else(|e| panic!("{} {op:?}: {e}", p.name));
            }
            assert!(p.latencies.iter().all(|l| !l.3.is_empty()));
        }
        assert!(find("real-node").is_ok());
        let e = find("ceph").err().expect("unknown");
        assert!(e.contains("real-node"), "{e}");
    }
}
