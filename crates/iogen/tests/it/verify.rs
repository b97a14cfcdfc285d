use std::io::{Read, Seek, SeekFrom, Write};

use iogen::{EngineChoice, Load, MismatchKind, Pattern, PhaseSpec, Stop, run_phase};

use crate::{opts, spec, target};

#[test]
fn every_flipped_block_is_reported_and_no_other() {
    let (d, p) = target();
    let state = d.path().join("gens.state");
    let region = 4u64 << 20;
    let base = PhaseSpec {
        verify: true,
        verify_state: Some(state),
        direct: true,
        region: Some(region),
        ..spec()
    };
    // 1. Write every 4 KiB block once (sequential), then random overwrites (generation 2+).
    let w = PhaseSpec {
        pattern: Pattern::Sequential,
        read_pct: 0,
        bytes: Some(region),
        load: Load::Depth(8),
        ..base.clone()
    };
    let r = run_phase(&w, &p, &opts(EngineChoice::Auto), &Stop::new()).expect("write");
    assert_eq!(
        r.summary.verify.as_ref().map(|v| v.written),
        Some(region / 4096)
    );
    let w2 = PhaseSpec {
        pattern: Pattern::Random,
        read_pct: 30,
        ios: Some(3000),
        load: Load::Depth(16),
        jobs: 2,
        ..base.clone()
    };
    let r = run_phase(&w2, &p, &opts(EngineChoice::Auto), &Stop::new()).expect("mixed");
    assert_eq!(
        r.summary.verify.as_ref().map(|v| v.mismatches),
        Some(0),
        "{:?}",
        r.summary.verify
    );
    // 2. Flip bytes behind iogen's back.
    let flipped: Vec<u64> = vec![0, 7, 100, 555, 1023];
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&p)
        .expect("open");
    for (i, &b) in flipped.iter().enumerate() {
        let at = b * 4096 + [0u64, 9, 17, 100, 4095][i];
        let mut byte = [0u8];
        f.seek(SeekFrom::Start(at)).unwrap();
        f.read_exact(&mut byte).unwrap();
        byte[0] ^= 0x40;
        f.seek(SeekFrom::Start(at)).unwrap();
        f.write_all(&byte).unwrap();
    }
    f.sync_all().unwrap();
    drop(f);
    // 3. Read everything back, verifying against the saved generation map.
    let rd = PhaseSpec {
        pattern: Pattern::Sequential,
        read_pct: 100,
        bytes: Some(region),
        load: Load::Depth(8),
        ..base
    };
    let r = run_phase(&rd, &p, &opts(EngineChoice::Sync), &Stop::new()).expect("read");
    let v = r.summary.verify.expect("verify summary");
    assert_eq!(v.checked, region / 4096);
    let mut bad: Vec<u64> = v.listed.iter().map(|m| m.offset / 4096).collect();
    bad.sort_unstable();
    assert_eq!(bad, flipped);
    assert_eq!(v.mismatches, flipped.len() as u64);
    // Byte 0 is the magic; 9 the offset; the rest the checksum or payload.
    let by_block = |b: u64| {
        v.listed
            .iter()
            .find(|m| m.offset == b * 4096)
            .map(|m| m.kind)
    };
    assert_eq!(by_block(0), Some(MismatchKind::NoHeader));
    assert_eq!(by_block(555), Some(MismatchKind::Checksum));
    assert!(v.listed.iter().all(|m| m.expected_gen >= 1));
}

#[test]
fn stale_generation_is_reported() {
    let (d, p) = target();
    let state = d.path().join("gens.state");
    let base = PhaseSpec {
        verify: true,
        verify_state: Some(state),
        region: Some(1 << 20),
        ..spec()
    };
    let w = PhaseSpec {
        pattern: Pattern::Sequential,
        read_pct: 0,
        bytes: Some(1 << 20),
        ..base.clone()
    };
    run_phase(&w, &p, &opts(EngineChoice::Auto), &Stop::new()).expect("gen 1");
    let snapshot = std::fs::read(&p).unwrap();
    run_phase(&w, &p, &opts(EngineChoice::Auto), &Stop::new()).expect("gen 2");
    // "Restore" the older data: every block is intact but one generation behind.
    std::fs::write(&p, snapshot).unwrap();
    let rd = PhaseSpec {
        pattern: Pattern::Sequential,
        read_pct: 100,
        bytes: Some(1 << 20),
        ..base
    };
    let v = run_phase(&rd, &p, &opts(EngineChoice::Auto), &Stop::new())
        .expect("read")
        .summary
        .verify
        .expect("v");
    assert_eq!(v.mismatches, 256);
    assert!(v.listed.iter().all(|m| m.kind == MismatchKind::Generation
        && m.expected_gen == 2
        && m.actual_gen == Some(1)));
}

/// A copy read without the writer's generation map (a restored snapshot): every iogen block
/// on it is checked for checksum and offset, so a torn block is still found.
#[test]
fn blocks_of_an_unknown_writer_are_checked_whole_and_in_place() {
    let (d, p) = target();
    let region = 1u64 << 20;
    let w = PhaseSpec {
        verify: true,
        verify_state: Some(d.path().join("writer.state")),
        region: Some(region),
        pattern: Pattern::Sequential,
        read_pct: 0,
        bytes: Some(region / 2),
        ..spec()
    };
    run_phase(&w, &p, &opts(EngineChoice::Auto), &Stop::new()).expect("write half");
    // Tear one block: its second half from another place (a half-finished write).
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&p)
        .expect("open");
    let mut other = vec![0u8; 2048];
    f.seek(SeekFrom::Start(9 * 4096 + 2048)).unwrap();
    f.read_exact(&mut other).unwrap();
    f.seek(SeekFrom::Start(3 * 4096 + 2048)).unwrap();
    f.write_all(&other).unwrap();
    f.sync_all().unwrap();
    drop(f);
    // A reader with no map of its own.
    let r = PhaseSpec {
        verify: true,
        verify_state: None,
        region: Some(region),
        pattern: Pattern::Sequential,
        read_pct: 100,
        bytes: Some(region),
        ..spec()
    };
    let res = run_phase(&r, &p, &opts(EngineChoice::Auto), &Stop::new()).expect("read");
    let v = res.summary.verify.expect("verify summary");
    assert_eq!(v.checked, 0);
    assert_eq!(v.intact, region / 2 / 4096, "{v:?}");
    assert_eq!(v.unwritten, region / 2 / 4096, "{v:?}");
    assert_eq!(v.mismatches, 1, "{v:?}");
    assert_eq!(v.listed[0].offset, 3 * 4096);
    assert_eq!(v.listed[0].kind, MismatchKind::Checksum);
}
