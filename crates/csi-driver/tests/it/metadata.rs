//! The SnapshotMetadata service over the real socket: GetMetadataAllocated lists exactly the
//! blocks written before a snapshot, GetMetadataDelta exactly the blocks written between two
//! (known writes, and an iogen phase's recorded written set), both in batches of
//! `max_results`, from `starting_offset`; and the spec's errors.

use std::collections::BTreeSet;
use std::path::Path;

use csi_driver::pb;
use csi_driver::pb::snapshot_metadata_client::SnapshotMetadataClient;
use tonic::Code;
use tonic::transport::Channel;

use crate::harness::*;

const MIB: i64 = 1 << 20;
const BLOCK: u64 = 4096;

/// Every block of every range of a stream, and the responses' sizes; each response must say
/// VARIABLE_LENGTH and the volume's capacity, and the ranges come in offset order.
async fn collect<R>(
    mut s: tonic::Streaming<R>,
    parts: impl Fn(&R) -> (i32, i64, &[pb::BlockMetadata]),
) -> (BTreeSet<u64>, Vec<usize>) {
    let mut blocks = BTreeSet::new();
    let mut sizes = Vec::new();
    let mut last_end = 0u64;
    while let Some(m) = s.message().await.expect("stream") {
        let (ty, cap, ranges) = parts(&m);
        assert_eq!(ty, pb::BlockMetadataType::VariableLength as i32);
        assert_eq!(cap, 8 * MIB);
        sizes.push(ranges.len());
        for r in ranges {
            let (off, len) = (r.byte_offset as u64, r.size_bytes as u64);
            assert!(
                off >= last_end,
                "ranges out of order or overlapping at {off}"
            );
            assert_eq!((off % BLOCK, len % BLOCK), (0, 0), "unaligned range {r:?}");
            last_end = off + len;
            blocks.extend((off..off + len).step_by(BLOCK as usize));
        }
    }
    (blocks, sizes)
}

async fn allocated(
    c: &mut SnapshotMetadataClient<Channel>,
    snap: &str,
    start: i64,
    max: i32,
) -> Result<(BTreeSet<u64>, Vec<usize>), tonic::Status> {
    let s = c
        .get_metadata_allocated(pb::GetMetadataAllocatedRequest {
            snapshot_id: snap.to_owned(),
            starting_offset: start,
            max_results: max,
            ..Default::default()
        })
        .await?
        .into_inner();
    Ok(collect(s, |m: &pb::GetMetadataAllocatedResponse| {
        (
            m.block_metadata_type,
            m.volume_capacity_bytes,
            &m.block_metadata,
        )
    })
    .await)
}

async fn delta(
    c: &mut SnapshotMetadataClient<Channel>,
    base: &str,
    target: &str,
    start: i64,
    max: i32,
) -> Result<(BTreeSet<u64>, Vec<usize>), tonic::Status> {
    let s = c
        .get_metadata_delta(pb::GetMetadataDeltaRequest {
            base_snapshot_id: base.to_owned(),
            target_snapshot_id: target.to_owned(),
            starting_offset: start,
            max_results: max,
            ..Default::default()
        })
        .await?
        .into_inner();
    Ok(collect(s, |m: &pb::GetMetadataDeltaResponse| {
        (
            m.block_metadata_type,
            m.volume_capacity_bytes,
            &m.block_metadata,
        )
    })
    .await)
}

fn blocks(off: u64, len: u64) -> impl Iterator<Item = u64> {
    (off / BLOCK * BLOCK..off + len).step_by(BLOCK as usize)
}

/// Random verify-mode writes of iogen on the image file, recording its written set.
fn iogen_writes(img: &Path, record: &Path) -> BTreeSet<u64> {
    let spec = iogen::PhaseSpec {
        pattern: iogen::Pattern::Random,
        read_pct: 0,
        ios: Some(300),
        region: Some(8 << 20),
        load: iogen::Load::Depth(4),
        verify: true,
        ..iogen::PhaseSpec::default()
    };
    let w = iogen::written::WrittenSpec {
        path: record.to_owned(),
        origin: std::time::Instant::now(),
    };
    let opts = iogen::EngineOptions {
        seed: 7,
        ..iogen::EngineOptions::default()
    };
    iogen::run_phase_recording(&spec, img, &opts, &iogen::Stop::new(), Some(&w)).expect("iogen");
    // The snapshot copies the file: what was written must be on it.
    fs_err::File::open(img).unwrap().sync_all().unwrap();
    iogen::written::read_records(record)
        .expect("written set")
        .iter()
        .flat_map(|r| blocks(r.offset, r.len))
        .collect()
}

#[tokio::test]
async fn allocated_and_delta_are_the_blocks_written_before_and_between_snapshots() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let sock = tmp.path().join("csi.sock");
    let mut d = start(config(&root), &sock).await;
    let mut md = SnapshotMetadataClient::new(connect(&sock).await);

    // The capability is advertised.
    let caps =
        d.id.get_plugin_capabilities(pb::GetPluginCapabilitiesRequest {})
            .await
            .unwrap()
            .into_inner();
    use pb::plugin_capability::{Type, service::Type as S};
    assert!(
        caps.capabilities.iter().any(|c| matches!(
            &c.r#type,
            Some(Type::Service(s)) if s.r#type == S::SnapshotMetadataService as i32
        )),
        "{caps:?}"
    );

    let vol = d.create(create_req("pvc-cbt", 8 * MIB, block_cap())).await;
    let img = image_of(&root, &vol);
    // Before s1: three known writes, one of them unaligned across a block boundary.
    let before = [(0u64, 8192u64), (1 << 20, 4096), ((3 << 20) + 4000, 200)];
    for (i, &(off, len)) in before.iter().enumerate() {
        write_at(&img, off, &pattern(i as u8 + 1, len as usize));
    }
    let s1 = d.snapshot(&vol.volume_id, "s1").await;
    // Between s1 and s2: iogen's random writes (its written set recorded) and two known
    // writes, one rewriting a block s1 holds with other bytes.
    let mut between: BTreeSet<u64> = iogen_writes(&img, &tmp.path().join("w.written"));
    assert!(!between.is_empty());
    for (off, len, seed) in [(5u64 << 20, 4096u64, 9u8), (1 << 20, 4096, 10)] {
        write_at(&img, off, &pattern(seed, len as usize));
        between.extend(blocks(off, len));
    }
    let s2 = d.snapshot(&vol.volume_id, "s2").await;

    let want_s1: BTreeSet<u64> = before.iter().flat_map(|&(o, l)| blocks(o, l)).collect();
    let (got, _) = allocated(&mut md, &s1.snapshot_id, 0, 0).await.unwrap();
    assert_eq!(got, want_s1, "allocated blocks of s1");

    // The delta, two ranges per response: exactly the blocks written between.
    let (got, sizes) = delta(&mut md, &s1.snapshot_id, &s2.snapshot_id, 0, 2)
        .await
        .unwrap();
    assert_eq!(
        got.symmetric_difference(&between).collect::<Vec<_>>(),
        Vec::<&u64>::new(),
        "delta and written blocks differ"
    );
    assert!(
        sizes.len() > 1 && sizes.iter().all(|&n| (1..=2).contains(&n)),
        "{sizes:?}"
    );

    // From an offset (not block-aligned): the blocks from its block on.
    let from = (4 << 20) + 100;
    let (got, _) = delta(&mut md, &s1.snapshot_id, &s2.snapshot_id, from, 0)
        .await
        .unwrap();
    let want: BTreeSet<u64> = between.iter().copied().filter(|&b| b >= 4 << 20).collect();
    assert_eq!(got, want, "delta from {from}");
    let (got, _) = allocated(&mut md, &s1.snapshot_id, 1 << 20, 0)
        .await
        .unwrap();
    assert_eq!(
        got,
        want_s1.iter().copied().filter(|&b| b >= 1 << 20).collect()
    );

    // The spec's errors.
    let code = |r: Result<(BTreeSet<u64>, Vec<usize>), tonic::Status>| r.unwrap_err().code();
    assert_eq!(
        code(allocated(&mut md, "snap-404", 0, 0).await),
        Code::NotFound
    );
    assert_eq!(
        code(delta(&mut md, &s1.snapshot_id, "snap-404", 0, 0).await),
        Code::NotFound
    );
    assert_eq!(
        code(allocated(&mut md, "", 0, 0).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(allocated(&mut md, &s1.snapshot_id, -1, 0).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(allocated(&mut md, &s1.snapshot_id, 9 * MIB, 0).await),
        Code::OutOfRange
    );
    assert_eq!(
        code(delta(&mut md, &s1.snapshot_id, &s2.snapshot_id, 0, -5).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(delta(&mut md, &s2.snapshot_id, &s1.snapshot_id, 0, 0).await),
        Code::InvalidArgument,
        "base created after target"
    );
    let other = d
        .create(create_req("pvc-other", 8 * MIB, block_cap()))
        .await;
    let o1 = d.snapshot(&other.volume_id, "o1").await;
    let e = delta(&mut md, &s1.snapshot_id, &o1.snapshot_id, 0, 0)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.message().contains("not of one volume"), "{e}");

    // Each call is in ops.jsonl, with what it listed.
    let ops = csi_driver::state::read_ops(&root.join("ops.jsonl")).unwrap();
    let listed: Vec<_> = ops
        .iter()
        .filter(|o| o.op == "GetMetadataDelta" && o.code == "OK")
        .collect();
    assert_eq!(listed.len(), 2, "{ops:#?}");
    assert!(listed[0].detail.contains(" ranges, "), "{:?}", listed[0]);

    for s in [&s1, &s2, &o1] {
        d.delete_snapshot(&s.snapshot_id).await;
    }
    for v in [&vol, &other] {
        d.delete_volume(&v.volume_id).await;
    }
    d.stop().await;
}
