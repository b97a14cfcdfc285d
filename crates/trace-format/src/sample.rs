//! A deterministic, valid, I/O-heavy sample trace of any length, for benchmarks and the
//! memory check of `convert` (`cnsreplay`'s encodings are measured on it).
//!
//! Shape: a rolling population of 64 volumes, each created, attached by one workload, hit
//! by 4 KiB–64 KiB reads and writes at about 1 µs spacing, then detached and deleted, with a
//! snapshot now and then. About 97% of the events are `io`, as in an imported block trace with
//! the control operations of the cluster around it. No randomness crate: a fixed 64-bit LCG.

use crate::model::*;
use crate::units::Name;

/// An endless iterator of sample events; take as many as needed.
pub fn events() -> impl Iterator<Item = Event> {
    let names: Vec<(Name, Name, Name)> = (0..4096)
        .map(|i| {
            (
                Name::from(format!("pvc-{i:05}")),
                Name::from(format!("pod-{i:05}")),
                Name::from(format!("snap-{i:05}")),
            )
        })
        .collect();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut rng = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        state >> 33
    };
    let mut at = 0u64;
    let mut id = 0u64;
    // Each slot cycles: create, attach, 120 I/Os (a snapshot in the middle), detach, delete.
    let mut step = vec![0u32; 64];
    let mut gen_of = vec![0usize; 64];
    std::iter::from_fn(move || {
        let slot = (rng() % 64) as usize;
        let name = (slot + 64 * gen_of[slot]) % names.len();
        let (vol, pod, snap) = &names[name];
        let s = step[slot];
        step[slot] += 1;
        let op = match s {
            0 => Op::CreateVolume(CreateVolume {
                volume: vol.clone(),
                size: Some(1 << 30),
                storage_class: None,
                access_mode: None,
                volume_mode: None,
                source: None,
            }),
            1 => Op::Attach(Attach {
                workload: pod.clone(),
                volumes: vec![vol.clone()],
                node: None,
                wait_for_room: false,
            }),
            62 => Op::Snapshot(Snapshot {
                volume: vol.clone(),
                snapshot: snap.clone(),
                class: None,
            }),
            63 => Op::DeleteSnapshot(SnapshotRef {
                snapshot: snap.clone(),
            }),
            122 => Op::Detach(WorkloadRef {
                workload: pod.clone(),
            }),
            123 => {
                step[slot] = 0;
                gen_of[slot] += 1;
                Op::DeleteVolume(VolumeRef {
                    volume: vol.clone(),
                })
            }
            _ => {
                let len = 4096u64 << (rng() % 5);
                Op::Io(Io {
                    volume: vol.clone(),
                    kind: if rng() % 10 < 7 {
                        IoKind::Read
                    } else {
                        IoKind::Write
                    },
                    offset: (rng() % ((1 << 30) / len)) * len,
                    len,
                })
            }
        };
        at += 200 + rng() % 1600;
        id += 1;
        Some(Event {
            at,
            id,
            tenant: None,
            observed: None,
            op,
        })
    })
}

/// The header of the sample trace.
pub fn header() -> Header {
    let mut h = Header::default();
    h.provenance.generator = Some(format!("trace-format sample {}", env!("CARGO_PKG_VERSION")));
    h
}
