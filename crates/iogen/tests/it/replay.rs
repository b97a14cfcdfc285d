//! `iogen replay`: bad options are errors, not panics.

use std::collections::BTreeMap;

use iogen::{EngineChoice, Error, ReplayOptions, Stop, replay_trace};
use trace_format::{Event, Header, Io, IoKind, Op, TraceWriter};

use crate::{opts, target};

/// Found while writing the `iogen_inputs` fuzz target: a positive but tiny speed scaled an
/// event's time past what an `Instant` holds, and `Duration::from_secs_f64` panicked.
#[test]
fn a_speed_that_scales_events_out_of_range_is_an_error() {
    let (dir, data) = target();
    fs_err::write(&data, vec![0u8; 1 << 20]).expect("target file");
    let trace = dir.path().join("t.jsonl");
    let mut w = TraceWriter::create(&trace, None, &Header::default()).expect("trace");
    for (id, at) in [(0, 0), (1, 1_000_000_000)] {
        w.write(&Event {
            at,
            id,
            tenant: None,
            observed: None,
            op: Op::Io(Io {
                volume: "v".into(),
                kind: IoKind::Read,
                offset: 0,
                len: 4096,
            }),
        })
        .expect("event");
    }
    w.finish().expect("finish");
    let ro = ReplayOptions {
        targets: BTreeMap::from([("v".to_owned(), data)]),
        speed: 1e-300,
        no_stall: false,
        direct: false,
        at_origin: false,
    };
    let err = replay_trace(&trace, &ro, &opts(EngineChoice::Sync), &Stop::new())
        .expect_err("out of range");
    assert!(
        matches!(&err, Error::InvalidSpec { field: "speed", reason } if reason.contains("event 1")),
        "{err}"
    );
}

/// A pod's stream: the trace arrives on stdin while it is replayed, time 0 is the header's
/// origin on this machine's wall clock, and the results come back as one line per volume.
#[test]
fn a_trace_written_to_stdin_replays_at_its_origin_and_reports_a_result_line() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    let (_dir, data) = target();
    fs_err::write(&data, vec![0u8; 1 << 20]).expect("target file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_iogen"))
        .args(["replay", "-", "--target"])
        .arg(format!("v={}", data.display()))
        .args(["--at-origin", "--result-lines", "--engine", "sync"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("iogen");
    // Origin 300 ms from now; 50 requests 2 ms apart, written in two halves, the second
    // after the first has started to run (the reader must not wait for the end).
    let origin = jiff::Timestamp::now() + jiff::SignedDuration::from_millis(300);
    let header = Header {
        origin: Some(origin),
        ..Header::default()
    };
    let stdin = child.stdin.take().expect("stdin");
    let mut w = TraceWriter::new(stdin, trace_format::Encoding::Binary, &header).expect("w");
    let started = Instant::now();
    for id in 0..50u64 {
        if id == 25 {
            w.flush().expect("flush");
            std::thread::sleep(Duration::from_millis(320));
        }
        w.write(&Event {
            at: id * 2_000_000,
            id,
            tenant: None,
            observed: None,
            op: Op::Io(Io {
                volume: "v".into(),
                kind: if id % 2 == 0 {
                    IoKind::Read
                } else {
                    IoKind::Write
                },
                // One request runs past the end of the 1 MiB target: wrapped, counted.
                offset: if id == 7 { 2 << 20 } else { id * 4096 },
                len: 4096,
            }),
        })
        .expect("event");
    }
    w.finish().expect("finish");
    let out = child.wait_with_output().expect("iogen");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        started.elapsed() >= Duration::from_millis(390),
        "ran at the trace's times"
    );
    let lines: Vec<_> = stdout
        .lines()
        .filter_map(iogen::StreamLine::parse)
        .collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    let l = lines.into_iter().next().expect("one").expect("parses");
    assert_eq!(l.volume, "v");
    assert_eq!((l.accepted, l.completed, l.errors), (50, 50, 0));
    assert_eq!((l.rejected, l.unissued, l.reordered), (0, 0, 0));
    assert_eq!(l.adjusted, 1);
    let intended: u64 = l.buckets.iter().map(|b| u64::from(b[0])).sum();
    let issued: u64 = l.buckets.iter().map(|b| u64::from(b[1])).sum();
    assert_eq!((intended, issued), (50, 50));
    // The buckets count from the stream's base; the first request is due at the origin.
    let first = l.buckets.iter().position(|b| b[0] > 0).expect("a bucket") as i64;
    let due = l.base_unix_ns + first * l.bucket_ns as i64;
    let origin_ns = origin.as_nanosecond() as i64;
    assert!(
        (due - origin_ns).abs() <= l.bucket_ns as i64,
        "first request's bucket starts at {due}, origin {origin_ns}"
    );
    let h = l.histograms().expect("histograms");
    assert_eq!(h.total_count(), 50);
}
