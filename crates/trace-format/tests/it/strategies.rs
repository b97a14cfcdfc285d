//! proptest strategies for arbitrary (not necessarily semantically valid) traces.

use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use trace_format::*;

pub fn name() -> impl Strategy<Value = Name> {
    prop_oneof![
        // Typical Kubernetes names, which the dictionary sees again and again.
        4 => "[a-z][a-z0-9-]{0,12}".prop_map(Name::from),
        // Anything printable, including quotes, colons, YAML indicators and non-ASCII.
        1 => "\\PC{0,20}".prop_map(Name::from),
    ]
}

fn text() -> impl Strategy<Value = String> {
    "\\PC{0,24}"
}

fn access() -> impl Strategy<Value = AccessMode> {
    prop_oneof![
        Just(AccessMode::ReadWriteOnce),
        Just(AccessMode::ReadWriteOncePod),
        Just(AccessMode::ReadOnlyMany),
        Just(AccessMode::ReadWriteMany),
    ]
}

fn vmode() -> impl Strategy<Value = VolumeMode> {
    prop_oneof![Just(VolumeMode::Filesystem), Just(VolumeMode::Block)]
}

fn header() -> impl Strategy<Value = Header> {
    let prov = (
        option::of(text()),
        vec(text(), 0..3),
        option::of(text()),
        option::of(any::<u64>()),
        btree_map(text(), text(), 0..3),
    )
        .prop_map(
            |(source_format, source_files, generator, seed, parameters)| Provenance {
                source_format,
                source_files,
                generator,
                seed,
                parameters,
            },
        );
    let defaults = (
        option::of(name()),
        option::of(name()),
        option::of(name()),
        option::of(any::<u64>()),
        option::of(access()),
        option::of(vmode()),
        option::of(name()),
    )
        .prop_map(
            |(
                storage_class,
                snapshot_class,
                group_snapshot_class,
                volume_size,
                access_mode,
                volume_mode,
                namespace,
            )| {
                Defaults {
                    storage_class,
                    snapshot_class,
                    group_snapshot_class,
                    volume_size,
                    access_mode,
                    volume_mode,
                    namespace,
                }
            },
        );
    let decl = (
        name(),
        option::of(any::<u64>()),
        option::of(name()),
        option::of(access()),
        option::of(vmode()),
        option::of(name()),
    )
        .prop_map(
            |(name, size, storage_class, access_mode, volume_mode, attributes_class)| VolumeDecl {
                name,
                size,
                storage_class,
                access_mode,
                volume_mode,
                attributes_class,
            },
        );
    // Whole seconds up to year 9999 keep jiff's RFC 3339 text exact.
    let origin = option::of(
        (0i64..253_402_300_799, 0i32..1_000_000_000)
            .prop_map(|(s, n)| jiff::Timestamp::new(s, n).unwrap_or(jiff::Timestamp::UNIX_EPOCH)),
    );
    let wdecl = (
        name(),
        vec(name(), 0..3),
        option::of(name()),
        option::of(name()),
    )
        .prop_map(|(name, volumes, node, tenant)| WorkloadDecl {
            name,
            volumes,
            node,
            tenant,
        });
    let params = btree_map(text(), text(), 0..3);
    let classes = btree_map(name(), params, 0..3);
    (
        origin,
        prov,
        defaults,
        vec(decl, 0..3),
        vec(wdecl, 0..3),
        classes,
    )
        .prop_map(
            |(origin, provenance, defaults, volumes, workloads, attributes_classes)| Header {
                origin,
                provenance,
                defaults,
                volumes,
                workloads,
                attributes_classes,
                ..Header::default()
            },
        )
}

fn io_phase() -> impl Strategy<Value = IoPhase> {
    let bs = prop_oneof![
        any::<u64>().prop_map(BlockSize::Fixed),
        vec(
            (any::<u64>(), any::<u32>()).prop_map(|(size, weight)| BlockSizeShare { size, weight }),
            0..4
        )
        .prop_map(BlockSize::Mix),
    ];
    let load = prop_oneof![
        any::<u32>().prop_map(Load::Depth),
        (
            prop_oneof![
                0.001f64..1e9,
                proptest::num::f64::POSITIVE | proptest::num::f64::NORMAL
            ],
            prop_oneof![Just(Arrival::Uniform), Just(Arrival::Poisson)]
        )
            .prop_map(|(iops, arrival)| Load::Rate(Rate { iops, arrival })),
    ];
    (
        (
            name(),
            name(),
            prop_oneof![Just(Pattern::Random), Just(Pattern::Sequential)],
            any::<u8>(),
            bs,
            load,
        ),
        (
            option::of(any::<u64>()),
            option::of(any::<u64>()),
            option::of(any::<u64>()),
            any::<u32>(),
            any::<bool>(),
            any::<bool>(),
            option::of((name(), vec(name(), 0..3)))
                .prop_map(|o| o.map(|(log, with)| Ordered { log, with })),
        ),
    )
        .prop_map(
            |(
                (workload, volume, pattern, read_pct, block_size, load),
                (duration, bytes, region, jobs, direct, verify, ordered),
            )| IoPhase {
                workload,
                volume,
                pattern,
                read_pct,
                block_size,
                load,
                duration,
                bytes,
                region,
                jobs,
                direct,
                verify,
                ordered,
            },
        )
}

pub fn op() -> impl Strategy<Value = Op> {
    let source = option::of(prop_oneof![
        name().prop_map(VolumeSource::Snapshot),
        name().prop_map(VolumeSource::Volume),
        (name(), name())
            .prop_map(|(group, volume)| VolumeSource::GroupMember(GroupMember { group, volume })),
    ]);
    prop_oneof![
        (
            name(),
            option::of(any::<u64>()),
            option::of(name()),
            option::of(access()),
            option::of(vmode()),
            source
        )
            .prop_map(
                |(volume, size, storage_class, access_mode, volume_mode, source)| Op::CreateVolume(
                    CreateVolume {
                        volume,
                        size,
                        storage_class,
                        access_mode,
                        volume_mode,
                        source
                    }
                )
            ),
        name().prop_map(|volume| Op::DeleteVolume(VolumeRef { volume })),
        (name(), vec(name(), 0..4), option::of(name()), any::<bool>()).prop_map(
            |(workload, volumes, node, wait_for_room)| {
                Op::Attach(Attach {
                    workload,
                    volumes,
                    node,
                    wait_for_room,
                })
            }
        ),
        name().prop_map(|workload| Op::Detach(WorkloadRef { workload })),
        (name(), name(), option::of(name())).prop_map(|(volume, snapshot, class)| Op::Snapshot(
            Snapshot {
                volume,
                snapshot,
                class
            }
        )),
        name().prop_map(|snapshot| Op::DeleteSnapshot(SnapshotRef { snapshot })),
        (name(), option::of(any::<u64>())).prop_map(|(snapshot, block_size)| {
            Op::SnapshotAllocated(SnapshotAllocated {
                snapshot,
                block_size,
            })
        }),
        (name(), name(), option::of(any::<u64>())).prop_map(|(base, snapshot, block_size)| {
            Op::SnapshotDelta(SnapshotDelta {
                base,
                snapshot,
                block_size,
            })
        }),
        (name(), any::<u64>()).prop_map(|(volume, size)| Op::Resize(Resize { volume, size })),
        (name(), name())
            .prop_map(|(volume, class)| Op::ModifyVolume(ModifyVolume { volume, class })),
        name().prop_map(|workload| Op::AbortWorkload(WorkloadRef { workload })),
        (name(), option::of(name()))
            .prop_map(|(workload, node)| Op::Reschedule(Reschedule { workload, node })),
        name().prop_map(|node| Op::CordonNode(NodeRef { node })),
        name().prop_map(|node| Op::DrainNode(NodeRef { node })),
        name().prop_map(|node| Op::ForceDetach(NodeRef { node })),
        (
            name(),
            prop_oneof![
                Just(IoKind::Read),
                Just(IoKind::Write),
                Just(IoKind::Trim),
                Just(IoKind::Flush)
            ],
            any::<u64>(),
            any::<u64>()
        )
            .prop_map(|(volume, kind, offset, len)| Op::Io(Io {
                volume,
                kind,
                offset,
                len
            })),
        io_phase().prop_map(Op::IoPhase),
        text().prop_map(|name| Op::Marker(Marker { name })),
    ]
}

/// Arbitrary traces: times and ids anywhere in u64, in any order (the encodings must carry
/// even invalid traces exactly, so a user can convert first and fix later).
pub fn trace() -> impl Strategy<Value = Trace> {
    let event = (
        prop_oneof![3 => 0u64..10_000_000_000, 1 => any::<u64>()],
        prop_oneof![3 => 0u64..1000, 1 => any::<u64>()],
        option::of(name()),
        option::of(any::<u64>()),
        op(),
    )
        .prop_map(|(at, id, tenant, observed, op)| Event {
            at,
            id,
            tenant,
            observed,
            op,
        });
    (header(), vec(event, 0..40)).prop_map(|(header, events)| Trace { header, events })
}
