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
    };
    let err = replay_trace(&trace, &ro, &opts(EngineChoice::Sync), &Stop::new())
        .expect_err("out of range");
    assert!(
        matches!(&err, Error::InvalidSpec { field: "speed", reason } if reason.contains("event 1")),
        "{err}"
    );
}
