//! The `events.jsonl` line of a record, written by hand: the sink writes one per event, and
//! `serde_json` cost it about as much as the rest of the sink together at a million events a
//! second. The bytes are exactly `serde_json::to_writer(record)`'s (field order, skipped
//! fields, string escapes — strings, rare here, still go through `serde_json`), which the
//! property test below checks over arbitrary records.

use crate::record::{EventRecord, Outcome};

/// Appends `r` as one JSON object (no newline) to `out`.
pub(crate) fn write_record(out: &mut Vec<u8>, r: &EventRecord) {
    let mut n = itoa::Buffer::new();
    out.extend_from_slice(b"{\"id\":");
    out.extend_from_slice(n.format(r.id).as_bytes());
    out.extend_from_slice(b",\"op\":\"");
    out.extend_from_slice(r.op.name().as_bytes());
    out.extend_from_slice(b"\",\"intended\":");
    out.extend_from_slice(n.format(r.intended).as_bytes());
    out.extend_from_slice(b",\"dispatched\":");
    out.extend_from_slice(n.format(r.dispatched).as_bytes());
    out.extend_from_slice(b",\"started\":");
    out.extend_from_slice(n.format(r.started).as_bytes());
    out.extend_from_slice(b",\"completed\":");
    out.extend_from_slice(n.format(r.completed).as_bytes());
    out.extend_from_slice(match r.outcome {
        Outcome::Ok => b",\"outcome\":\"ok\"",
        Outcome::Error => b",\"outcome\":\"error\"",
    });
    if let Some(c) = &r.error_class {
        out.extend_from_slice(b",\"error_class\":");
        string(out, c);
    }
    if let Some(e) = &r.error {
        out.extend_from_slice(b",\"error\":");
        string(out, e);
    }
    if !r.phases.is_empty() {
        out.extend_from_slice(b",\"phases\":[");
        for (i, p) in r.phases.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"name\":");
            string(out, &p.name);
            out.extend_from_slice(b",\"at\":");
            out.extend_from_slice(n.format(p.at).as_bytes());
            out.push(b'}');
        }
        out.push(b']');
    }
    for (key, v) in [
        (&b",\"dep_wait\":"[..], r.dep_wait),
        (b",\"queue\":", r.queue),
        (b",\"response\":", r.response),
        (b",\"service\":", r.service),
        (b",\"lateness\":", r.lateness),
        (b",\"pickup\":", r.pickup),
    ] {
        out.extend_from_slice(key);
        out.extend_from_slice(n.format(v).as_bytes());
    }
    out.extend_from_slice(if r.waited {
        b",\"waited\":true"
    } else {
        b",\"waited\":false"
    });
    if let Some(s) = r.start_lateness {
        out.extend_from_slice(b",\"start_lateness\":");
        out.extend_from_slice(n.format(s).as_bytes());
    }
    if r.during_snapshot {
        out.extend_from_slice(b",\"during_snapshot\":true");
    }
    if let Some(retries) = &r.retries {
        out.extend_from_slice(b",\"retries\":[");
        for (i, x) in retries.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"reason\":");
            string(out, &x.reason);
            out.extend_from_slice(b",\"count\":");
            out.extend_from_slice(n.format(x.count).as_bytes());
            out.extend_from_slice(b",\"message\":");
            string(out, &x.message);
            out.push(b'}');
        }
        out.push(b']');
    }
    out.push(b'}');
}

/// A JSON string exactly as `serde_json` escapes it.
fn string(out: &mut Vec<u8>, s: &str) {
    // Writing to a Vec cannot fail, and a `str` always serializes.
    let _ = serde_json::to_writer(&mut *out, s);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use trace_format::OpType;

    use super::write_record;
    use crate::record::{EventRecord, Outcome, Phase, Retry};

    fn text() -> impl Strategy<Value = String> {
        // Quotes, backslashes, control characters, non-ASCII and plain text.
        prop_oneof![
            "[a-z_]{0,12}",
            any::<String>(),
            proptest::collection::vec(
                prop_oneof![
                    Just('"'),
                    Just('\\'),
                    Just('/'),
                    Just('\u{7f}'),
                    Just('é'),
                    Just('\u{2028}'),
                    (0u8..0x20).prop_map(char::from),
                    Just('x'),
                ],
                0..10
            )
            .prop_map(|v| v.into_iter().collect()),
        ]
    }

    fn record() -> impl Strategy<Value = EventRecord> {
        let ints = proptest::array::uniform12(prop_oneof![any::<u64>(), 0u64..1000]);
        let op = proptest::sample::select(OpType::ALL.to_vec());
        let outcome = prop_oneof![Just(Outcome::Ok), Just(Outcome::Error)];
        let phases = proptest::collection::vec((text(), any::<u64>()), 0..3);
        (
            ints,
            op,
            outcome,
            proptest::option::of(text()),
            proptest::option::of(text()),
            phases,
            any::<bool>(),
            proptest::option::of(any::<u64>()),
            any::<bool>(),
            proptest::option::of(proptest::collection::vec(
                (text(), any::<u32>(), text()),
                0..3,
            )),
        )
            .prop_map(
                |(i, op, outcome, error_class, error, phases, waited, start, during, retries)| {
                    EventRecord {
                        id: i[0],
                        op,
                        intended: i[1],
                        dispatched: i[2],
                        started: i[3],
                        completed: i[4],
                        outcome,
                        error_class,
                        error,
                        phases: phases
                            .into_iter()
                            .map(|(name, at)| Phase { name, at })
                            .collect(),
                        dep_wait: i[5],
                        queue: i[6],
                        response: i[7],
                        service: i[8],
                        lateness: i[9],
                        pickup: i[10],
                        waited,
                        start_lateness: start,
                        during_snapshot: during,
                        retries: retries.map(|v| {
                            v.into_iter()
                                .map(|(reason, count, message)| Retry {
                                    reason,
                                    count,
                                    message,
                                })
                                .collect()
                        }),
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn line_is_serde_json_byte_for_byte(r in record()) {
            let mut ours = Vec::new();
            write_record(&mut ours, &r);
            let theirs = serde_json::to_vec(&r).expect("serializes");
            prop_assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&theirs));
            let back: EventRecord = serde_json::from_slice(&ours).expect("parses");
            prop_assert_eq!(back, r);
        }
    }

    #[test]
    fn a_typical_record() {
        let r = EventRecord::ok(7, OpType::Io, 10, 12, 30);
        let mut ours = Vec::new();
        write_record(&mut ours, &r);
        assert_eq!(
            String::from_utf8(ours).expect("utf-8"),
            "{\"id\":7,\"op\":\"io\",\"intended\":10,\"dispatched\":12,\"started\":12,\
             \"completed\":30,\"outcome\":\"ok\",\"dep_wait\":0,\"queue\":0,\"response\":20,\
             \"service\":18,\"lateness\":2,\"pickup\":0,\"waited\":false,\"start_lateness\":2}"
        );
    }
}
