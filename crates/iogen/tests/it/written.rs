//! The written-set record: every acknowledged write of a phase, on the caller's clock.

use std::time::Instant;

use iogen::written::{WrittenSpec, read_records};
use iogen::{EngineChoice, Load, Pattern, PhaseSpec, Stop, run_phase_recording};

use crate::{opts, spec, target};

/// A mixed phase with two jobs records exactly its acknowledged writes (as many as the summary
/// counts, none of its reads), each in the region, block-aligned, on the origin's clock (after
/// the time the test took before starting it) and in acknowledgement order.
#[test]
fn a_phase_records_each_acknowledged_write_once() {
    let (d, p) = target();
    let origin = Instant::now();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let before = origin.elapsed().as_nanos() as u64;
    let w = WrittenSpec {
        path: d.path().join("w.written"),
        origin,
    };
    let s = PhaseSpec {
        pattern: Pattern::Random,
        read_pct: 40,
        ios: Some(2000),
        load: Load::Depth(8),
        jobs: 2,
        verify: true,
        direct: true,
        ..spec()
    };
    let r = run_phase_recording(&s, &p, &opts(EngineChoice::Auto), &Stop::new(), Some(&w))
        .expect("phase");
    let after = origin.elapsed().as_nanos() as u64;
    let recs = read_records(&w.path).expect("record");
    let writes = r.summary.kinds.get("write").map_or(0, |k| k.ios);
    assert!(writes > 0, "the phase wrote nothing: {:?}", r.summary.kinds);
    assert_eq!(
        recs.len() as u64,
        writes,
        "one record per acknowledged write"
    );
    for (i, x) in recs.iter().enumerate() {
        assert_eq!(x.len, 4096, "record {i}: {x:?}");
        assert_eq!(x.offset % 4096, 0, "record {i}: {x:?}");
        assert!(
            x.offset + x.len <= 4 << 20,
            "record {i} past the region: {x:?}"
        );
        assert!(
            before <= x.submitted_ns && x.submitted_ns <= x.acked_ns && x.acked_ns <= after,
            "record {i} is not on the origin's clock within the phase [{before}, {after}]: {x:?}"
        );
        if i > 0 {
            assert!(
                recs[i - 1].acked_ns <= x.acked_ns,
                "record {i} out of ack order"
            );
        }
    }
}
