//! Runs that must end: open-loop phases on io_uring, and stops while the engine waits for a
//! far deadline or for I/O that never completes. Each body runs under a watchdog, so a
//! regression fails after 30 s instead of hanging the test run.

use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use iogen::{
    EngineChoice, EngineOptions, IoKind, IoRequest, Load, PhaseSpec, Rate, Stop, SyncStall,
    parse_phase_snippet, run_phase, start_stream,
};

use crate::{opts, spec, target};

/// Runs `body` on its own thread and fails the test if it has not returned after 30 s.
fn watchdog<T: Send + 'static>(what: &str, body: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(body());
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: still running after 30 s"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
    }
}

/// Requests `stop` after `after`, from another thread.
fn stop_later(stop: &Stop, after: Duration) {
    let s = stop.clone();
    std::thread::spawn(move || {
        std::thread::sleep(after);
        s.request();
    });
}

#[test]
fn open_loop_phase_from_a_trace_ends_on_io_uring() {
    // The replay worker's case: a trace io_phase with `load: {rate: …}` and a duration.
    let phase = parse_phase_snippet(
        "{pattern: random, read_pct: 70, block_size: 4Ki, load: {rate: {iops: 500}}, \
         duration: 1s, region: 4Mi}",
    )
    .expect("snippet");
    let spec = PhaseSpec::from_trace(&phase);
    let r = watchdog("open-loop phase", move || {
        let (_d, p) = target();
        run_phase(&spec, &p, &opts(EngineChoice::Auto), &Stop::new()).expect("run")
    });
    assert_eq!(r.summary.ios + r.summary.errors, 500);
    assert!(!r.partial);
    // Where io_uring is available, this must have run on it (Auto falls back only on setup
    // failure, and says so in the notes).
    if r.summary.engine.notes.is_empty() {
        assert_eq!(r.summary.engine.engine, "io_uring");
    }
}

#[test]
fn stop_ends_an_open_loop_waiting_for_a_far_deadline() {
    // One request every 100 s: after the first, the worker waits for the second. A stop must
    // end that wait within the stop poll interval, not when the deadline comes.
    for engine in [EngineChoice::Auto, EngineChoice::Sync] {
        let s = PhaseSpec {
            load: Load::Rate(Rate {
                iops: 0.01,
                arrival: iogen::Arrival::Uniform,
            }),
            ios: Some(3),
            ..spec()
        };
        let r = watchdog("far deadline", move || {
            let (_d, p) = target();
            let stop = Stop::new();
            stop_later(&stop, Duration::from_millis(300));
            run_phase(&s, &p, &opts(engine), &stop).expect("run")
        });
        // The run asks for 200 s; the watchdog fails it long before that.
        assert!(r.partial, "{engine:?}: a stop cut it short");
        assert_eq!(
            r.summary.ios, 1,
            "{engine:?}: only the first request was due"
        );
    }
}

#[test]
fn stop_cancels_io_that_never_completes() {
    // A read from a FIFO nobody writes to never completes on its own. After a stop, io_uring
    // cancels it and the stream ends with the read counted as an error. (The thread-pool
    // engine's pread fails at once with ESPIPE: same outcome.)
    let (d, _) = target();
    let fifo = d.path().join("fifo");
    let ok = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo")
        .success();
    assert!(ok, "mkfifo failed");
    let res = watchdog("stuck read", move || {
        let (tx, h) = start_stream(&fifo, false, &opts(EngineChoice::Auto)).expect("start");
        tx.submit(IoRequest {
            kind: IoKind::Read,
            offset: 0,
            len: 4096,
            intended: Instant::now(),
        })
        .expect("submit");
        std::thread::sleep(Duration::from_millis(200));
        h.stop();
        drop(tx);
        h.finish().expect("finish")
    });
    assert!(res.summary.partial);
    assert_eq!(
        res.errors, 1,
        "the read failed (cancelled): {:?}",
        res.summary
    );
    assert_eq!(res.summary.ios, 0);
}

#[test]
fn stop_gives_up_on_io_stuck_beyond_cancelling() {
    // The pool thread sleeps 60 s before its first I/O (a blocked system call that nothing
    // can cancel). A stop must still end the run, with that request counted as an error.
    let s = PhaseSpec {
        load: Load::Depth(1),
        duration: Some(Duration::from_secs(60)),
        ..spec()
    };
    let o = EngineOptions {
        sync_stall: Some(SyncStall {
            at_io: 0,
            sleep: Duration::from_secs(60),
        }),
        ..opts(EngineChoice::Sync)
    };
    let r = watchdog("stuck pool thread", move || {
        let (_d, p) = target();
        let stop = Stop::new();
        stop_later(&stop, Duration::from_millis(200));
        run_phase(&s, &p, &o, &stop).expect("run")
    });
    assert!(r.partial);
    assert_eq!(r.summary.ios, 0);
    assert_eq!(
        r.summary.errors, 1,
        "the stuck request is counted as failed"
    );
    // ...and stays in the latency picture: its response time runs to the give-up (≥ the
    // 1 s grace before cancelling), not dropped.
    assert_eq!(r.histograms.total_count(), 1);
    let (_, h) = r.histograms.iter().next().expect("a kind");
    assert!(h.response.max() >= 1_000_000_000, "{}", h.response.max());
}

#[test]
fn offered_rate_after_a_stop_is_over_the_time_that_ran() {
    // 1000 IOPS asked for 30 s, stopped after ~0.5 s: ~1000 IOPS were offered, not 1000 ×
    // 0.5 / 30.
    let s = PhaseSpec {
        load: Load::Rate(Rate {
            iops: 1000.0,
            arrival: iogen::Arrival::Uniform,
        }),
        duration: Some(Duration::from_secs(30)),
        ..spec()
    };
    let r = watchdog("stopped open loop", move || {
        let (_d, p) = target();
        let stop = Stop::new();
        stop_later(&stop, Duration::from_millis(500));
        run_phase(&s, &p, &opts(EngineChoice::Sync), &stop).expect("run")
    });
    assert!(r.partial);
    let offered = r.summary.offered_iops.expect("open loop");
    assert!((700.0..1300.0).contains(&offered), "offered {offered} IOPS");
}
