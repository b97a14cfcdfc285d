//! The header's setup (pre-existing volumes, pre-running workloads) goes through the queueing
//! model before the clock starts, unmeasured: the measured run must start with idle servers,
//! or a steady-state trace (synth's default declares its live objects in the header) starts
//! with seconds of backlog and fails every point of a capacity sweep.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use trace_format::{Attach, Encoding, Event, Header, Op, TraceWriter, VolumeDecl, WorkloadDecl};

use crate::{MS, phase, run, wait};

/// A steady-state trace: `n` volumes and `n` workloads running them in the header, then 20
/// new workloads (no volumes) attached 100 ms apart from t = 0.
fn steady_state_trace(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join("steady.jsonl");
    let header = Header {
        volumes: (0..n)
            .map(|i| VolumeDecl {
                name: format!("v{i}").into(),
                size: None,
                storage_class: None,
                access_mode: None,
                volume_mode: None,
                attributes_class: None,
            })
            .collect(),
        workloads: (0..n)
            .map(|i| WorkloadDecl {
                name: format!("w{i}").into(),
                volumes: vec![format!("v{i}").into()],
                node: None,
                tenant: None,
            })
            .collect(),
        ..Header::default()
    };
    let mut w = TraceWriter::create(&path, Some(Encoding::Jsonl), &header).expect("create");
    for i in 0..20u64 {
        w.write(&Event {
            at: i * 100 * MS,
            id: i,
            tenant: None,
            observed: None,
            op: Op::Attach(Attach {
                workload: format!("new-{i}").into(),
                volumes: Vec::new(),
                node: None,
                wait_for_room: false,
            }),
        })
        .expect("write");
    }
    w.finish().expect("finish");
    path
}

/// 400 pre-running workloads on 4 attach servers of 20 ms each are 2 s of setup work (and
/// their 400 volumes share 2 servers of 5 ms: 1 s). The measured attaches arrive at 10/s
/// against a capacity of 200/s, so with idle servers at t = 0 none of them waits at all;
/// the setup's work must not show as a wait of the first ones, and the notices say what
/// the setup put through the queue.
#[test]
fn pre_running_workloads_leave_no_backlog_at_t0() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = steady_state_trace(dir.path(), 400);
    let yaml = "ops: {attach: {dist: constant, value: 20ms}, create_volume: {dist: constant, \
                value: 5ms}}\nservers: {attach: 4, create_volume: 2}\n";
    let (out, recs) = run(dir.path(), &t, yaml);
    assert_eq!(recs.len(), 20, "the 20 measured attaches, not the setup");
    for r in &recs {
        assert_eq!(
            wait(r),
            0,
            "attach {} (intended {} ms) waited {} ms in the queue: backlog the setup left",
            r.id,
            r.intended / MS,
            wait(r) / MS
        );
        // Its service is the configured 20 ms, so its response is 20 ms plus the engine's
        // and timer's own delays — nowhere near the 2 s the setup took.
        assert_eq!(
            phase(r, "served") - phase(r, "queue"),
            20 * MS,
            "attach {}",
            r.id
        );
        assert!(r.response < 200 * MS, "attach {}: {} ns", r.id, r.response);
    }
    let notices = &out.summary.notices;
    assert!(
        notices
            .iter()
            .any(|n| n.starts_with("sim queue attach: 400 setup operations")),
        "{notices:?}"
    );
    assert!(
        notices
            .iter()
            .any(|n| n.starts_with("sim queue attach (4 servers): 20 operations")),
        "the measured run's counters leave the setup out: {notices:?}"
    );
}

/// The manifest carries the trace header, and is written again with the origin when the clock
/// starts: for a steady-state header of 100 000 volumes that is ~20 MB of JSON, which used to
/// be written after the origin was chosen, so the first event started late by about that
/// write (≈ 1 s for the 554 k objects of `synth --preset sysdig-2019 --target attach=5/s`).
/// The clock now starts after it: the first event's lateness is well below what writing
/// that manifest costs on this machine, measured here the same way.
#[test]
fn the_manifest_with_a_big_header_is_written_before_the_clock_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big-header.jsonl");
    let header = Header {
        volumes: (0..100_000)
            .map(|i| VolumeDecl {
                name: format!("pvc-{i:06}").into(),
                size: None,
                storage_class: None,
                access_mode: None,
                volume_mode: None,
                attributes_class: None,
            })
            .collect(),
        ..Header::default()
    };
    let mut w = TraceWriter::create(&path, Some(Encoding::Jsonl), &header).expect("create");
    w.write(&Event {
        at: 0,
        id: 0,
        tenant: None,
        observed: None,
        op: Op::Attach(Attach {
            workload: "first".into(),
            volumes: vec!["pvc-000000".into()],
            node: None,
            wait_for_room: false,
        }),
    })
    .expect("write");
    w.finish().expect("finish");
    let (_, recs) = run(dir.path(), &path, "default: {dist: constant, value: 0ns}\n");
    assert_eq!(recs.len(), 1);
    let manifest = replay::RunDir::open(&dir.path().join("run"))
        .manifest()
        .expect("manifest");
    assert_eq!(manifest.trace.header.volumes.len(), 100_000);
    // What one write of this manifest costs here (as the engine writes it: pretty JSON).
    let started = Instant::now();
    let text = serde_json::to_vec_pretty(&manifest).expect("json");
    fs_err::write(dir.path().join("manifest-copy.json"), &text).expect("write");
    let write = started.elapsed();
    let late = Duration::from_nanos(recs[0].dispatched.saturating_sub(recs[0].intended));
    assert!(
        late < write / 2,
        "the first event started {late:?} late, writing the manifest takes {write:?} \
         ({} bytes): the write was inside the run",
        text.len()
    );
}
