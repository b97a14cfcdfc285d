//! Writes an engine-benchmark trace: `gen_trace N RATE OUT` — N events at RATE events/s
//! (evenly spaced) on 16 pre-existing volumes: single `io` requests, with a snapshot of one
//! volume every 1000 events, deleted 500 events later. The encoding follows OUT's name.

use trace_format::{Event, Header, Io, IoKind, Op, Snapshot, SnapshotRef, TraceWriter, VolumeDecl};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: gen_trace N RATE OUT";
    let n: u64 = args.next().ok_or(usage)?.parse()?;
    let rate: f64 = args.next().ok_or(usage)?.parse()?;
    let out = args.next().ok_or(usage)?;
    let mut header = Header::default();
    header.provenance.generator = Some("replay gen_trace example".into());
    header.volumes = (0..16)
        .map(|i| VolumeDecl {
            name: format!("vol-{i}").as_str().into(),
            size: Some(1 << 30),
            storage_class: None,
            access_mode: None,
            volume_mode: None,
            attributes_class: None,
        })
        .collect();
    let mut w = TraceWriter::create(&out, None, &header)?;
    for i in 0..n {
        let vol = format!("vol-{}", i % 16);
        let op = match i % 1000 {
            0 => Op::Snapshot(Snapshot {
                volume: vol.as_str().into(),
                snapshot: format!("snap-{i}").as_str().into(),
                class: None,
            }),
            500 if i >= 1000 => Op::DeleteSnapshot(SnapshotRef {
                snapshot: format!("snap-{}", i - 500).as_str().into(),
            }),
            _ => Op::Io(Io {
                volume: vol.as_str().into(),
                kind: if i % 3 == 0 {
                    IoKind::Write
                } else {
                    IoKind::Read
                },
                offset: (i * 4096) % (1 << 29),
                len: 4096,
            }),
        };
        w.write(&Event {
            at: (i as f64 * 1e9 / rate) as u64,
            id: i,
            tenant: None,
            observed: None,
            op,
        })?;
    }
    w.finish()?;
    Ok(())
}
