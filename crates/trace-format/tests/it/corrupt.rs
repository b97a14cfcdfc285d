//! Damaged binary traces: every kind of damage is a located error, never a panic.

use trace_format::*;

fn sample() -> Vec<u8> {
    let t = Trace {
        header: Header::default(),
        events: (0..10)
            .map(|i| Event {
                at: i * 1000,
                id: i,
                tenant: None,
                observed: Some(5),
                op: Op::Io(Io {
                    volume: Name::from("vol"),
                    kind: IoKind::Write,
                    offset: 0,
                    len: 4096,
                }),
            })
            .collect(),
    };
    t.to_bytes(Encoding::Binary).unwrap()
}

fn err(bytes: &[u8]) -> String {
    Trace::from_bytes(bytes, Some(Encoding::Binary))
        .expect_err("damage must be detected")
        .to_string()
}

#[test]
fn missing_end_marker() {
    let b = sample();
    // Drop the end marker (0 and the count 10): a cleanly cut file after the last event.
    let e = err(&b[..b.len() - 2]);
    assert!(
        e.contains("truncated: the file ends after 10 events without the end marker"),
        "{e}"
    );
}

#[test]
fn unknown_version_and_magic() {
    let mut b = sample();
    b[8] = 9;
    let e = err(&b);
    assert!(
        e.contains("format version 9 is newer than this reader supports (3)"),
        "{e}"
    );
    let mut b = sample();
    b[0] = b'X';
    assert!(err(&b).contains("not a cnsreplay trace"));
}

#[test]
fn bad_tag_and_wrong_count() {
    let b = sample();
    let mut bad = b.clone();
    let n = bad.len();
    bad[n - 1] = 11;
    let e = err(&bad);
    assert!(
        e.contains("the end marker counts 11 events but the file holds 10"),
        "{e}"
    );
    // Flip every byte after the header one at a time: errors or a different trace, no panic.
    for i in 0..b.len() {
        let mut d = b.clone();
        d[i] ^= 0xff;
        let _ = Trace::from_bytes(&d, Some(Encoding::Binary));
    }
}

#[test]
fn located_by_record_and_byte() {
    let b = sample();
    let hlen = u32::from_le_bytes([b[12], b[13], b[14], b[15]]) as usize;
    let mut d = b;
    // The first frame's tag byte (after the length, at-delta and id-delta bytes).
    d[16 + hlen + 3] = 0x1f;
    let e = err(&d);
    assert!(e.starts_with("<memory>: byte "), "{e}");
    assert!(e.contains("events[0]: unknown operation tag 31"), "{e}");
}
