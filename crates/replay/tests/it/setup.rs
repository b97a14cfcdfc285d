//! Setup before the clock: the header's pre-existing volumes and pre-running workloads are
//! made unmeasured, with bounded concurrency, and a failure there interrupts the run after
//! cleaning up what was made.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use replay::provider::CleanupReport;
use replay::{
    CompletionState, LedgerEntry, OpCtx, Provider, ProviderError, RunControl, RunDir, RunInfo,
    RunOptions,
};
use trace_format::{
    Encoding, Event, Header, Op, OpType, TraceWriter, VolumeDecl, VolumeRef, WorkloadDecl,
    WorkloadRef,
};

use crate::{MS, records};

/// A provider that records what it runs (and when), owns every volume and workload through
/// the ledger, takes 20 ms per operation and fails the attach of workload `bad`.
#[derive(Default)]
struct Recording {
    ran: Mutex<Vec<(Instant, OpType, String)>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    cleaned: Mutex<Vec<String>>,
}

impl Provider for Recording {
    fn name(&self) -> &'static str {
        "recording"
    }

    fn config(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    fn prepare(&self, _: &RunInfo) -> Result<Vec<String>, ProviderError> {
        Ok(Vec::new())
    }

    async fn execute(&self, ev: Arc<Event>, ctx: Arc<OpCtx>) -> Result<(), ProviderError> {
        let n = self.in_flight.fetch_add(1, SeqCst) + 1;
        self.max_in_flight.fetch_max(n, SeqCst);
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.in_flight.fetch_sub(1, SeqCst);
        let io = |e: std::io::Error| ProviderError::new("io", e.to_string());
        let name = match &ev.op {
            Op::CreateVolume(c) => {
                let id = format!("volume/{}", c.volume);
                ctx.ledger()
                    .intend("obj", &id, serde_json::Value::Null)
                    .map_err(io)?;
                id
            }
            Op::Attach(a) => {
                if a.workload.as_str() == "bad" {
                    return Err(ProviderError::new("rejected", "no such node"));
                }
                let id = format!("workload/{}", a.workload);
                ctx.ledger()
                    .intend("obj", &id, serde_json::Value::Null)
                    .map_err(io)?;
                id
            }
            Op::Detach(w) => {
                let id = format!("workload/{}", w.workload);
                ctx.ledger().release("obj", &id).map_err(io)?;
                id
            }
            Op::DeleteVolume(v) => {
                let id = format!("volume/{}", v.volume);
                ctx.ledger().release("obj", &id).map_err(io)?;
                id
            }
            _ => String::new(),
        };
        self.ran
            .lock()
            .expect("lock")
            .push((Instant::now(), ev.op.op_type(), name));
        Ok(())
    }

    fn cleanup(&self, _: &RunInfo, leftovers: &[LedgerEntry]) -> CleanupReport {
        self.cleaned
            .lock()
            .expect("lock")
            .extend(leftovers.iter().map(|e| e.id.clone()));
        CleanupReport {
            removed: leftovers.len() as u64,
            ..CleanupReport::default()
        }
    }
}

/// A trace declaring `n` volumes `v{i}` and workloads `w{i}` mounting them (plus `extra`),
/// whose events detach `w0` at 1 s and delete `v0` at 1.5 s.
fn trace(dir: &std::path::Path, n: usize, extra: Option<WorkloadDecl>) -> std::path::PathBuf {
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
            .chain(extra)
            .collect(),
        ..Header::default()
    };
    let path = dir.join("trace.jsonl");
    let mut w = TraceWriter::create(&path, Some(Encoding::Jsonl), &header).expect("create");
    let events = [
        (
            1_000 * MS,
            Op::Detach(WorkloadRef {
                workload: "w0".into(),
            }),
        ),
        (
            1_500 * MS,
            Op::DeleteVolume(VolumeRef {
                volume: "v0".into(),
            }),
        ),
    ];
    for (i, (at, op)) in events.into_iter().enumerate() {
        w.write(&Event {
            at,
            id: i as u64,
            tenant: None,
            observed: None,
            op,
        })
        .expect("write");
    }
    w.finish().expect("finish");
    path
}

#[test]
fn declared_workloads_are_attached_before_the_clock_and_unmeasured() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = trace(dir.path(), 200, None);
    let p = Arc::new(Recording::default());
    let before = Instant::now();
    let out = replay::run(
        &path,
        &dir.path().join("run"),
        &p,
        &RunOptions::default(),
        &RunControl::new(),
    )
    .expect("run");
    assert_eq!(out.summary.state, CompletionState::Complete);
    let ran = p.ran.lock().expect("lock").clone();
    let attaches: Vec<_> = ran.iter().filter(|r| r.1 == OpType::Attach).collect();
    assert_eq!(attaches.len(), 200);
    // Every workload's attach came after every volume existed, all before the trace's detach.
    let last_create = ran
        .iter()
        .filter(|r| r.1 == OpType::CreateVolume)
        .map(|r| r.0)
        .max()
        .expect("creates");
    let detach = ran.iter().find(|r| r.1 == OpType::Detach).expect("detach");
    assert!(
        attaches
            .iter()
            .all(|a| a.0 >= last_create && a.0 < detach.0)
    );
    // 400 operations of 20 ms: concurrently, bounded (one at a time would take 8 s).
    let max = p.max_in_flight.load(SeqCst);
    assert!((2..=64).contains(&max), "{max} in flight");
    assert!(before.elapsed() < Duration::from_secs(6));
    // Only the trace's two events are measured; the detach needed no wait.
    let recs = records(&dir.path().join("run"));
    let ops: Vec<_> = recs.iter().map(|r| r.op).collect();
    assert_eq!(ops, [OpType::Detach, OpType::DeleteVolume]);
    assert!(recs.iter().all(|r| r.outcome == replay::Outcome::Ok));
    assert_eq!(recs[0].dep_wait, 0);
    assert!(!out.summary.ops.contains_key("attach"));
    // Cleanup removed what the trace left: 199 workloads and volumes.
    assert_eq!(p.cleaned.lock().expect("lock").len(), 2 * 199);
}

#[test]
fn a_failed_declared_workload_interrupts_the_run_after_cleaning_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = WorkloadDecl {
        name: "bad".into(),
        volumes: Vec::new(),
        node: Some("gone".into()),
        tenant: None,
    };
    let path = trace(dir.path(), 10, Some(bad));
    let p = Arc::new(Recording::default());
    let err = replay::run(
        &path,
        &dir.path().join("run"),
        &p,
        &RunOptions::default(),
        &RunControl::new(),
    )
    .expect_err("setup fails");
    assert!(err.to_string().contains("no such node"), "{err}");
    let m = RunDir::open(&dir.path().join("run"))
        .manifest()
        .expect("manifest");
    assert_eq!(m.state, CompletionState::Interrupted);
    let reason = m.reason.unwrap_or_default();
    assert!(
        reason.starts_with("attaching pre-running workload bad failed"),
        "{reason}"
    );
    // Nothing of the trace ran; every volume and workload made was cleaned up.
    assert!(
        p.ran
            .lock()
            .expect("lock")
            .iter()
            .all(|r| r.1 != OpType::Detach)
    );
    let mut cleaned = p.cleaned.lock().expect("lock").clone();
    cleaned.sort();
    assert_eq!(cleaned.len(), 20, "{cleaned:?}");
    assert!(cleaned.contains(&"workload/w9".to_owned()));
}
