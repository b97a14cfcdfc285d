//! Lossless conversion between all three encodings, for arbitrary traces.

use proptest::prelude::*;
use trace_format::{Encoding, Trace};

use crate::strategies::trace;

fn through(t: &Trace, enc: Encoding) -> Trace {
    let bytes = t
        .to_bytes(enc)
        .unwrap_or_else(|e| panic!("encode {enc}: {e}"));
    Trace::from_bytes(&bytes, Some(enc))
        .unwrap_or_else(|e| panic!("decode {enc}: {e}\n{}", String::from_utf8_lossy(&bytes)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn each_encoding_round_trips(t in trace()) {
        for enc in Encoding::ALL {
            prop_assert_eq!(&through(&t, enc), &t, "{}", enc);
        }
    }

    #[test]
    fn yaml_jsonl_binary_chain(t in trace()) {
        let y = through(&t, Encoding::Yaml);
        let j = through(&y, Encoding::Jsonl);
        let b = through(&j, Encoding::Binary);
        let y2 = through(&b, Encoding::Yaml);
        prop_assert_eq!(&y2, &t);
    }

    #[test]
    fn sniffing_finds_the_encoding(t in trace()) {
        for enc in Encoding::ALL {
            let bytes = t.to_bytes(enc).unwrap();
            let back = Trace::from_bytes(&bytes, None).unwrap();
            prop_assert_eq!(&back, &t);
        }
    }

    /// Every strict prefix of a binary trace is reported as an error, never read as a shorter
    /// valid trace and never a panic.
    #[test]
    fn binary_truncation_is_always_detected(t in trace(), cut in any::<prop::sample::Index>()) {
        let bytes = t.to_bytes(Encoding::Binary).unwrap();
        let n = cut.index(bytes.len());
        prop_assert!(Trace::from_bytes(&bytes[..n], Some(Encoding::Binary)).is_err());
    }
}

/// Many distinct names: the dictionary ring wraps and evicts, and both sides must agree.
#[test]
fn dictionary_wraps_consistently() {
    use trace_format::*;
    let events = (0..3 * DICT_SLOTS as u64 + 17)
        .map(|i| Event {
            at: i,
            id: i,
            tenant: Some(Name::from(format!("t{}", i % 7))),
            observed: None,
            op: Op::Io(Io {
                // Reuse some names from just before and long before the current slot.
                volume: Name::from(format!("v{}", if i % 3 == 0 { i / 2 } else { i })),
                kind: IoKind::Read,
                offset: i * 4096,
                len: 4096,
            }),
        })
        .collect();
    let t = Trace {
        header: Header::default(),
        events,
    };
    assert_eq!(through(&t, Encoding::Binary), t);
}

/// A header bigger than an event frame may be (16 MiB of JSON: `synth --preset sysdig-2019
/// --target attach=5/s` declares ~554 k volumes) is written and read back: the binary writer
/// never writes what its reader refuses.
#[test]
fn a_header_over_16_mib_round_trips_in_binary() {
    use trace_format::*;
    // 120 k volumes with long names and classes: ~18 MiB of JSON.
    let long = "x".repeat(40);
    let volumes: Vec<VolumeDecl> = (0..120_000u64)
        .map(|i| VolumeDecl {
            name: Name::from(format!("synth-volume-{long}-{i:07}")),
            size: Some((i % 100 + 1) << 30),
            storage_class: Some(Name::from(format!("class-{long}-{}", i % 1000))),
            access_mode: None,
            volume_mode: None,
            attributes_class: None,
        })
        .collect();
    let t = Trace {
        header: Header {
            volumes,
            ..Header::default()
        },
        events: Vec::new(),
    };
    let bytes = t.to_bytes(Encoding::Binary).expect("encode");
    assert!(
        bytes.len() > 16 << 20,
        "{} bytes: past the old limit",
        bytes.len()
    );
    let back = Trace::from_bytes(&bytes, Some(Encoding::Binary)).expect("decode");
    assert_eq!(back.header.volumes.len(), 120_000);
    assert_eq!(back, t);
}

/// A JSON Lines trace saved with a UTF-8 byte-order mark reads like the same trace without
/// one, named or sniffed.
#[test]
fn a_jsonl_trace_with_a_byte_order_mark_reads() {
    use trace_format::*;
    let t = Trace {
        header: Header::default(),
        events: vec![Event {
            at: 5,
            id: 0,
            tenant: None,
            observed: None,
            op: Op::Io(Io {
                volume: Name::from("v"),
                kind: IoKind::Write,
                offset: 0,
                len: 4096,
            }),
        }],
    };
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(t.to_bytes(Encoding::Jsonl).expect("encode"));
    assert_eq!(
        Trace::from_bytes(&bytes, Some(Encoding::Jsonl)).expect("named"),
        t
    );
    assert_eq!(Trace::from_bytes(&bytes, None).expect("sniffed"), t);
}

/// A header declaring a million volumes or more (what `synth` declares for a big cluster in
/// steady state: 30 000 per 1000 hosts) round-trips through the binary and JSON Lines
/// encodings unchanged, the volumes' names, sizes, classes and modes drawn from the case's
/// seed. (Few cases: each is ~50 MB of JSON.)
mod million {
    use proptest::prelude::*;
    use trace_format::*;

    fn header(n: u64, seed: u64, workloads: bool) -> Header {
        let mix = |i: u64| {
            let mut x = (i ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            x ^= x >> 31;
            x.wrapping_mul(0xbf58_476d_1ce4_e5b9)
        };
        let volumes: Vec<VolumeDecl> = (0..n)
            .map(|i| {
                let r = mix(i);
                VolumeDecl {
                    name: Name::from(format!("pvc-{seed:x}-{i}")),
                    size: (r % 3 != 0).then_some((r % 1000 + 1) << 20),
                    storage_class: (r % 5 == 0).then(|| Name::from(format!("class-{}", r % 7))),
                    access_mode: (r % 11 == 0).then_some(AccessMode::ReadWriteMany),
                    volume_mode: (r % 13 == 0).then_some(VolumeMode::Block),
                    attributes_class: None,
                }
            })
            .collect();
        let workloads = if workloads {
            volumes
                .iter()
                .step_by(3)
                .enumerate()
                .map(|(i, v)| WorkloadDecl {
                    name: Name::from(format!("pod-{i}")),
                    volumes: vec![v.name.clone()],
                    node: Some(Name::from(format!("node-{}", i % 1000))),
                    tenant: None,
                })
                .collect()
        } else {
            Vec::new()
        };
        Header {
            volumes,
            workloads,
            ..Header::default()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2, ..ProptestConfig::default() })]
        #[test]
        fn declared_volumes_by_the_million_round_trip(
            n in 1_000_000u64..1_100_000,
            seed in any::<u64>(),
            workloads in any::<bool>(),
        ) {
            let t = Trace {
                header: header(n, seed, workloads),
                events: vec![Event {
                    at: 1,
                    id: 0,
                    tenant: None,
                    observed: None,
                    op: Op::DeleteVolume(VolumeRef {
                        volume: Name::from(format!("pvc-{seed:x}-7")),
                    }),
                }],
            };
            for enc in [Encoding::Binary, Encoding::Jsonl] {
                let bytes = t.to_bytes(enc).expect("encode");
                let back = Trace::from_bytes(&bytes, Some(enc)).expect("decode");
                prop_assert_eq!(back.header.volumes.len() as u64, n);
                prop_assert!(back == t, "{:?} differs", enc);
            }
        }
    }
}
