//! Dependencies, concurrency caps, timeouts, fail-fast, interruption and the run directory.

use std::sync::Arc;
use std::time::Duration;

use provider_sim::{SimConfig, SimProvider};
use replay::{CompletionState, Outcome, RunControl, RunDir, RunOptions};
use trace_format::{Attach, CreateVolume, Op, OpType};

use crate::{MS, cordon, records, run_sim, write_trace};

fn create(v: &str) -> Op {
    Op::CreateVolume(CreateVolume {
        volume: v.into(),
        size: None,
        storage_class: None,
        access_mode: None,
        volume_mode: None,
        source: None,
    })
}

fn attach(w: &str, v: &str) -> Op {
    Op::Attach(Attach {
        workload: w.into(),
        volumes: vec![v.into()],
        node: None,
        wait_for_room: false,
    })
}

#[test]
fn dependency_wait_is_recorded_and_latency_counts_from_intended() {
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = "ops: {create_volume: {dist: constant, value: 300ms}}\n";
    let out = run_sim(
        dir.path(),
        &[(0, create("v")), (100 * MS, attach("w", "v"))],
        yaml,
        &RunOptions::default(),
    );
    let recs = records(&dir.path().join("run"));
    let c = recs
        .iter()
        .find(|r| r.op == OpType::CreateVolume)
        .expect("create");
    let a = recs
        .iter()
        .find(|r| r.op == OpType::Attach)
        .expect("attach");
    assert!(
        a.started >= c.completed,
        "attach started before its volume existed"
    );
    assert!(a.dep_wait >= 150 * MS, "dep_wait {}", a.dep_wait);
    assert_eq!(a.response, a.completed - a.intended);
    assert!(a.response >= a.dep_wait);
    assert!(a.service < 50 * MS, "service {}", a.service);
    assert_eq!(out.summary.ops["attach"].dep_wait.count, 1);
}

#[test]
fn concurrency_cap_records_queue_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let events: Vec<_> = (0..5).map(|_| (0, cordon("n"))).collect();
    let opts = RunOptions {
        concurrency: [(OpType::CordonNode, 1)].into(),
        ..RunOptions::default()
    };
    run_sim(
        dir.path(),
        &events,
        "default: {dist: constant, value: 100ms}\n",
        &opts,
    );
    let mut queue: Vec<u64> = records(&dir.path().join("run"))
        .iter()
        .map(|r| r.queue)
        .collect();
    queue.sort_unstable();
    // One at a time: the k-th waits for k services of 100 ms.
    for (k, q) in queue.iter().enumerate() {
        let want = k as u64 * 100 * MS;
        assert!(
            *q + 5 * MS >= want && *q <= want + 80 * MS,
            "queue[{k}] = {q}"
        );
    }
    for r in records(&dir.path().join("run")) {
        assert!(
            r.service >= 100 * MS && r.service < 180 * MS,
            "service {}",
            r.service
        );
    }
}

#[test]
fn timeouts_and_dependency_failures_are_classified_and_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = RunOptions {
        timeouts: [(OpType::CreateVolume, 50 * MS)].into(),
        ..RunOptions::default()
    };
    let out = run_sim(
        dir.path(),
        &[
            (0, create("v")),
            (10 * MS, attach("w", "v")),
            (20 * MS, cordon("n")),
        ],
        "ops: {create_volume: {dist: constant, value: 2s}}\n",
        &opts,
    );
    assert_eq!(
        out.summary.state,
        CompletionState::Complete,
        "errors do not stop the run"
    );
    assert_eq!(out.summary.errors.get("timeout"), Some(&1));
    assert_eq!(out.summary.errors.get("dependency_failed"), Some(&1));
    assert_eq!(out.summary.ok, 1);
    let recs = records(&dir.path().join("run"));
    let c = recs
        .iter()
        .find(|r| r.op == OpType::CreateVolume)
        .expect("create");
    assert_eq!(c.outcome, Outcome::Error);
    assert!(c.service < 1_000 * MS, "the timeout cut the call short");
}

#[test]
fn fail_fast_stops_the_run_as_interrupted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = RunOptions {
        fail_fast: true,
        ..RunOptions::default()
    };
    let mut events = vec![(0, cordon("a"))];
    events.extend((1..50).map(|i| (i * 100 * MS, cordon("b"))));
    let out = run_sim(dir.path(), &events, "errors: {cordon_node: 1.0}\n", &opts);
    assert_eq!(out.summary.state, CompletionState::Interrupted);
    assert!(
        out.summary
            .reason
            .as_deref()
            .unwrap_or("")
            .starts_with("fail-fast")
    );
    assert!(out.summary.dispatched < 50);
    let m = RunDir::open(&dir.path().join("run"))
        .manifest()
        .expect("manifest");
    assert_eq!(m.state, CompletionState::Interrupted);
}

#[test]
fn manifest_goes_running_complete_and_interrupted_runs_leave_valid_results() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A complete run.
    let out = run_sim(
        dir.path(),
        &[(0, cordon("a")), (MS, cordon("b"))],
        "{}\n",
        &RunOptions::default(),
    );
    let rd = RunDir::open(&dir.path().join("run"));
    let m = rd.manifest().expect("manifest");
    assert_eq!(m.state, CompletionState::Complete);
    assert!(m.finished.is_some());
    assert_eq!(m.provider.name, "sim");
    assert_eq!(m.trace.sha256.len(), 64);
    assert_eq!(rd.summary().expect("summary"), out.summary);
    assert!(dir.path().join("run/histograms/cordon_node.hlog").exists());

    // An interrupted one: stopped from outside while running.
    let dir2 = tempfile::tempdir().expect("tempdir");
    let events: Vec<_> = (0..1000u64).map(|i| (i * 10 * MS, cordon("n"))).collect();
    let trace = write_trace(dir2.path(), &events);
    let control = RunControl::new();
    let c2 = control.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        c2.request_stop("test stop");
    });
    let p = Arc::new(SimProvider::new(SimConfig::default()).expect("sim"));
    let out = replay::run(
        &trace,
        &dir2.path().join("run"),
        &p,
        &RunOptions::default(),
        &control,
    )
    .expect("run");
    stopper.join().expect("stopper");
    assert_eq!(out.summary.state, CompletionState::Interrupted);
    assert_eq!(out.summary.reason.as_deref(), Some("test stop"));
    assert!(out.summary.dispatched > 5 && out.summary.dispatched < 1000);
    let recs = records(&dir2.path().join("run"));
    assert_eq!(recs.len() as u64, out.summary.dispatched);
    let rd = RunDir::open(&dir2.path().join("run"));
    assert_eq!(
        rd.manifest().expect("manifest").state,
        CompletionState::Interrupted
    );

    // A run whose process vanished is detected as crashed.
    let mut m = rd.manifest().expect("manifest");
    m.state = CompletionState::Running;
    m.pid = u32::MAX - 1;
    rd.write_manifest(&m).expect("write");
    assert_eq!(
        rd.detect_crash().expect("detect").state,
        CompletionState::CrashedDetected
    );
    assert_eq!(
        rd.manifest().expect("manifest").state,
        CompletionState::CrashedDetected
    );
}

/// Calls started inline on the timing lanes (the sim) that are still running when a stop's
/// grace period ends are cancelled and recorded, each once, and the run ends then rather than
/// when they would have completed.
#[test]
fn a_stop_cancels_inline_calls_still_running_after_the_grace_period() {
    let dir = tempfile::tempdir().expect("tempdir");
    let events: Vec<_> = (0..200u64).map(|i| (i * 5 * MS, cordon("n"))).collect();
    let trace = write_trace(dir.path(), &events);
    let control = RunControl::new();
    let c2 = control.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        c2.request_stop("test stop");
    });
    let cfg = SimConfig::from_yaml(
        "ops: {cordon_node: {dist: constant, value: 600s}}\n",
        "test",
    )
    .expect("sim config");
    let p = Arc::new(SimProvider::new(cfg).expect("sim"));
    let opts = RunOptions {
        grace_ns: 100 * MS,
        ..RunOptions::default()
    };
    let out = replay::run(&trace, &dir.path().join("run"), &p, &opts, &control).expect("run");
    stopper.join().expect("stopper");
    assert_eq!(out.summary.state, CompletionState::Interrupted);
    let recs = records(&dir.path().join("run"));
    assert!(
        out.summary.dispatched > 5 && out.summary.dispatched < 200,
        "dispatched {}",
        out.summary.dispatched
    );
    assert_eq!(
        recs.len() as u64,
        out.summary.dispatched,
        "one record per event"
    );
    let mut ids: Vec<_> = recs.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), recs.len(), "no event recorded twice");
    for r in &recs {
        assert_eq!(
            (r.outcome, r.error_class.as_deref()),
            (Outcome::Error, Some("cancelled")),
            "event {}: {:?}",
            r.id,
            r.error
        );
        // Cancelled at the grace period's end (≥ 300 ms + 100 ms), long before 600 s.
        assert!(
            r.completed < 60_000 * MS,
            "event {} recorded at {} ns",
            r.id,
            r.completed
        );
    }
}

#[test]
fn a_non_empty_run_directory_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs_err::create_dir_all(dir.path().join("run")).expect("mkdir");
    fs_err::write(dir.path().join("run/keep"), "x").expect("write");
    let trace = write_trace(dir.path(), &[(0, cordon("a"))]);
    let p = Arc::new(SimProvider::new(SimConfig::default()).expect("sim"));
    let err = replay::run(
        &trace,
        &dir.path().join("run"),
        &p,
        &RunOptions::default(),
        &RunControl::new(),
    )
    .expect_err("refused");
    assert!(matches!(err, replay::Error::RunDirNotEmpty(_)));
    assert!(dir.path().join("run/keep").exists());
}

proptest::proptest! {
    /// A stall only ever delays, by at most its length, and only ops that overlap it.
    #[test]
    fn stalls_delay_by_at_most_their_length(start in 0u64..10_000, service in 0u64..5_000, at in 0u64..10_000, len in 0u64..5_000) {
        let cfg = SimConfig { stalls: vec![provider_sim::Stall { at: provider_sim::Dur(at), duration: provider_sim::Dur(len) }], ..SimConfig::default() };
        let end = cfg.completion(start, service);
        proptest::prop_assert!(end >= start + service);
        proptest::prop_assert!(end <= start + service + len);
        if start >= at + len || start + service <= at {
            proptest::prop_assert_eq!(end, start + service);
        }
    }
}

fn delete_volume(v: &str) -> Op {
    Op::DeleteVolume(trace_format::VolumeRef { volume: v.into() })
}

fn detach(w: &str) -> Op {
    Op::Detach(trace_format::WorkloadRef { workload: w.into() })
}

/// A `delete_volume` waits for the trace's earlier users of the volume to end (an attach
/// using it, the detach of that workload), whatever their outcome, and records it as its
/// dependency wait; a volume nobody uses is deleted on time.
#[test]
fn delete_volume_waits_for_the_earlier_users_of_the_volume() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = RunOptions {
        // The slow attach of `w2` fails by timeout: its users' wait still ends.
        timeouts: [(OpType::Attach, 700 * MS)].into(),
        ..RunOptions::default()
    };
    let yaml = "ops: {attach: {dist: constant, value: 400ms}, create_volume: {dist: constant, \
                value: 10ms}, detach: {dist: constant, value: 100ms}}\n";
    let out = run_sim(
        dir.path(),
        &[
            (0, create("v")),
            (0, create("free")),
            (20 * MS, attach("w", "v")),
            (30 * MS, detach("w")),
            (40 * MS, delete_volume("v")),
            (50 * MS, delete_volume("free")),
        ],
        yaml,
        &opts,
    );
    assert_eq!(out.summary.failed, 0, "{:?}", out.summary.errors);
    let recs = records(&dir.path().join("run"));
    let find = |op: OpType, n: usize| {
        recs.iter()
            .filter(|r| r.op == op)
            .nth(n)
            .unwrap_or_else(|| panic!("{op} #{n}"))
    };
    let (a, d) = (find(OpType::Attach, 0), find(OpType::Detach, 0));
    let mut deletes: Vec<_> = recs
        .iter()
        .filter(|r| r.op == OpType::DeleteVolume)
        .collect();
    deletes.sort_by_key(|r| r.id);
    let (dv, free) = (deletes[0], deletes[1]);
    assert!(d.started >= a.completed, "detach before its attach ended");
    assert!(
        dv.started >= d.completed,
        "delete of v started at {} before the detach ended at {}",
        dv.started,
        d.completed
    );
    assert!(dv.dep_wait >= 300 * MS, "dep_wait {}", dv.dep_wait);
    assert!(
        free.dep_wait < 100 * MS,
        "unused volume waited {}",
        free.dep_wait
    );

    // The users' outcome does not matter: a failed (timed-out) attach ends the wait too.
    let dir = tempfile::tempdir().expect("tempdir");
    let slow = "ops: {attach: {dist: constant, value: 5s}}\n";
    let out = run_sim(
        dir.path(),
        &[
            (0, create("v")),
            (10 * MS, attach("w", "v")),
            (20 * MS, delete_volume("v")),
        ],
        slow,
        &opts,
    );
    assert_eq!(out.summary.errors.get("timeout"), Some(&1));
    let recs = records(&dir.path().join("run"));
    let dv = recs
        .iter()
        .find(|r| r.op == OpType::DeleteVolume)
        .expect("delete");
    assert_eq!(dv.outcome, Outcome::Ok, "{:?}", dv.error);
    assert!(dv.dep_wait >= 600 * MS, "dep_wait {}", dv.dep_wait);
}

fn io(v: &str) -> Op {
    Op::Io(trace_format::Io {
        volume: v.into(),
        kind: trace_format::IoKind::Read,
        offset: 0,
        len: 4096,
    })
}

/// Events that need not wait run inline on their batch's task (the `noop` provider
/// completes every call on its first poll): each still gets exactly one record with the
/// instants in order and its start lateness, and dependencies are honoured in trace order,
/// also within one batch.
#[test]
fn events_finished_inline_are_recorded_once_with_their_instants() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut events = vec![(0, create("v")), (0, io("v"))];
    events.extend((0..300).map(|i| (MS + i * 1000, io("v"))));
    events.push((
        2 * MS,
        Op::Marker(trace_format::Marker { name: "m".into() }),
    ));
    events.push((2 * MS, delete_volume("v")));
    let trace = write_trace(dir.path(), &events);
    let out = replay::run(
        &trace,
        &dir.path().join("run"),
        &Arc::new(replay::noop::NoopProvider),
        &RunOptions::default(),
        &RunControl::new(),
    )
    .expect("run");
    assert_eq!(out.summary.dispatched, events.len() as u64);
    assert_eq!(out.summary.ok, events.len() as u64);
    let mut recs = records(&dir.path().join("run"));
    recs.sort_by_key(|r| r.id);
    let ids: Vec<u64> = recs.iter().map(|r| r.id).collect();
    assert_eq!(ids, (0..events.len() as u64).collect::<Vec<_>>());
    for r in &recs {
        assert!(r.intended <= r.dispatched, "{r:?}");
        assert!(r.dispatched + r.pickup <= r.started, "{r:?}");
        assert!(r.started <= r.completed, "{r:?}");
        assert_eq!(r.response, r.completed - r.intended);
        if r.waited {
            assert_eq!(r.start_lateness, None);
        } else {
            assert_eq!(r.start_lateness, Some(r.started - r.intended), "{r:?}");
        }
    }
    // The io at 0 needs the volume created at 0 (same instant, same batch or not).
    assert!(recs[1].started >= recs[0].completed, "{:?}", &recs[..2]);
    // The delete waits for every io before it.
    let last_io = recs[..302].iter().map(|r| r.completed).max().unwrap_or(0);
    assert!(recs[303].started >= last_io, "{:?}", recs[303]);
}

/// An event whose creator failed before the event was reached fails with
/// `dependency_failed` at once, never reaching the provider (no start lateness).
#[test]
fn a_dependency_that_already_failed_fails_the_event_inline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run_sim(
        dir.path(),
        &[(0, create("v")), (100 * MS, io("v"))],
        "errors: {create_volume: 1.0}\nops: {create_volume: {dist: constant, value: 1ms}}\n",
        &RunOptions::default(),
    );
    assert_eq!(out.summary.errors.get("dependency_failed"), Some(&1));
    let recs = records(&dir.path().join("run"));
    let i = recs.iter().find(|r| r.op == OpType::Io).expect("io");
    assert_eq!(i.outcome, Outcome::Error);
    assert_eq!(i.error_class.as_deref(), Some("dependency_failed"));
    assert!(!i.waited, "its creator had ended long before");
    assert_eq!(i.start_lateness, None);
    assert_eq!(i.error.as_deref(), Some("volume \"v\" was not created"));
}

/// A provider whose attach takes 300 ms and whose `io_phase` begins its I/O 200 ms into its
/// call and ends 400 ms later; everything else is immediate.
struct SlowStart;

impl replay::Provider for SlowStart {
    fn name(&self) -> &'static str {
        "slow-start"
    }

    fn config(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    fn prepare(&self, _: &replay::RunInfo) -> Result<Vec<String>, replay::ProviderError> {
        Ok(Vec::new())
    }

    async fn execute(
        &self,
        ev: Arc<trace_format::Event>,
        ctx: Arc<replay::OpCtx>,
    ) -> Result<(), replay::ProviderError> {
        match ev.op.op_type() {
            OpType::Attach => tokio::time::sleep(Duration::from_millis(300)).await,
            OpType::IoPhase => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                ctx.phase("running");
                ctx.io_started();
                tokio::time::sleep(Duration::from_millis(400)).await;
            }
            _ => {}
        }
        Ok(())
    }

    fn cleanup(
        &self,
        _: &replay::RunInfo,
        _: &[replay::LedgerEntry],
    ) -> replay::provider::CleanupReport {
        replay::provider::CleanupReport::default()
    }
}

/// The records of a run of [`SlowStart`]: volume, attach, an `io_phase` of `duration` at
/// 10 ms, the workload's detach at `detach_at`.
fn slow_start_run(duration: &str, detach_at: u64) -> Vec<replay::EventRecord> {
    let dir = tempfile::tempdir().expect("tempdir");
    let phase: trace_format::IoPhase = serde_json::from_value(serde_json::json!({
        "workload": "w", "volume": "v", "pattern": "random", "read_pct": 0,
        "block_size": "4Ki", "load": {"depth": 1}, "duration": duration
    }))
    .expect("io_phase");
    let trace = write_trace(
        dir.path(),
        &[
            (0, create("v")),
            (0, attach("w", "v")),
            (10 * MS, Op::IoPhase(phase)),
            (detach_at, detach("w")),
        ],
    );
    let run = dir.path().join("run");
    let out = replay::run(
        &trace,
        &run,
        &Arc::new(SlowStart),
        &RunOptions::default(),
        &RunControl::new(),
    )
    .expect("run");
    assert_eq!(out.summary.failed, 0, "{:?}", out.summary.errors);
    records(&run)
}

/// A slow attach (300 ms) releases the workload's `io_phase` and its detach at once. When the
/// trace's detach interrupts the I/O (due at 20 ms, the I/O's 1 s not over), the detach waits
/// until the I/O has begun rather than overtaking it and cutting it off before it ran — and
/// no longer (it stops the I/O, as the trace does). When the trace lets the I/O finish first
/// (100 ms of I/O ending at 110 ms, the detach at 150 ms), the detach waits for its end.
#[test]
fn a_detach_released_with_an_earlier_io_phase_keeps_the_traces_order() {
    let recs = slow_start_run("1s", 20 * MS);
    let find = |op: OpType| recs.iter().find(|r| r.op == op).expect("record");
    let (io, d) = (find(OpType::IoPhase), find(OpType::Detach));
    let running = io
        .phases
        .iter()
        .find(|p| p.name == "running")
        .expect("running")
        .at;
    assert!(
        d.started >= running,
        "the detach began at {} ns, before the I/O it follows began at {running} ns",
        d.started
    );
    assert!(
        d.started < io.completed,
        "the detach waited for the whole io_phase (ended {} ns), not its start",
        io.completed
    );
    assert!(d.dep_wait >= 400 * MS, "dep_wait {}", d.dep_wait);

    let recs = slow_start_run("100ms", 150 * MS);
    let find = |op: OpType| recs.iter().find(|r| r.op == op).expect("record");
    let (io, d) = (find(OpType::IoPhase), find(OpType::Detach));
    assert!(
        d.started >= io.completed,
        "the detach began at {} ns, before the I/O the trace let finish ended at {} ns",
        d.started,
        io.completed
    );
}
