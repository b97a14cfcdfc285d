//! Ordered writes over several files and the cut check on real images: the run's own files
//! are a cut; reference images built from the log at one position are a cut at that
//! position; members taken at different positions are torn, and the check names the write.

use std::path::{Path, PathBuf};
use std::process::Command;

use iogen::cut::{CutVerdict, WriteRef};
use iogen::{OrderedLog, OrderedSpec, Pattern, Stop, run_ordered, verify_cut};

use crate::target;

fn three(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    (0..3)
        .map(|i| dir.join(format!("{prefix}{i}.dat")))
        .collect()
}

fn paths(v: &[PathBuf]) -> Vec<&Path> {
    v.iter().map(PathBuf::as_path).collect()
}

#[test]
fn a_finished_run_is_consistent_and_prefixes_cut_where_they_end() {
    let (d, _) = target();
    let files = three(d.path(), "vol");
    for f in &files {
        std::fs::File::create(f).expect("create");
    }
    let log = d.path().join("ordered.log");
    for (writers, direct) in [(1, false), (3, true)] {
        let spec = OrderedSpec {
            targets: files.clone(),
            region: Some(256 << 10),
            writers,
            writes: Some(600),
            direct,
            log: log.clone(),
            pattern: Pattern::Random,
            ..OrderedSpec::default()
        };
        let r = run_ordered(&spec, &Stop::new()).expect("run");
        assert_eq!(r.writes, 600, "{r:?}");
        assert_eq!(r.per_volume.iter().sum::<u64>(), 600);
        assert!(r.per_volume.iter().all(|&n| n > 0), "{r:?}");
        let l = OrderedLog::read(&log).expect("log");
        assert_eq!(l.records.len(), 600);
        // Ack order: times never go back, and every write saw only earlier acks.
        assert!(l.records.windows(2).all(|w| w[0].ack_ns <= w[1].ack_ns));
        if writers == 1 {
            // One chain: each write was submitted after every earlier one was acknowledged.
            assert!(
                l.records
                    .iter()
                    .enumerate()
                    .all(|(i, r)| r.acked_before == i as u64 && r.seq == i as u64 + 1)
            );
        }
        let rep = verify_cut(&log, &paths(&files)).expect("verify");
        let CutVerdict::Consistent { cut_seq, .. } = rep.verdict else {
            panic!("the run's own files: {}", rep.verdict.describe());
        };
        // The newest write is the cut: every write is there.
        assert_eq!(cut_seq, l.records.iter().map(|r| r.seq).max().unwrap_or(0));

        // Reference images of the state after 300 acks: a cut at that write.
        let at = three(d.path(), "at");
        for (v, p) in at.iter().enumerate() {
            l.write_image(v as u32, |i, _| i < 300, p).expect("image");
        }
        let rep = verify_cut(&log, &paths(&at)).expect("verify");
        let CutVerdict::Consistent {
            cut_seq, required, ..
        } = rep.verdict
        else {
            panic!("a prefix: {}", rep.verdict.describe());
        };
        assert_eq!(
            cut_seq,
            l.records[..300].iter().map(|r| r.seq).max().unwrap_or(0)
        );
        assert!(required <= 300);
    }
}

#[test]
fn members_taken_at_different_points_are_torn_and_the_first_missing_write_is_named() {
    let (d, _) = target();
    let files = three(d.path(), "vol");
    let log = d.path().join("ordered.log");
    let spec = OrderedSpec {
        targets: files.clone(),
        region: Some(64 << 10),
        writers: 1,
        writes: Some(300),
        log: log.clone(),
        pattern: Pattern::Sequential,
        ..OrderedSpec::default()
    };
    for f in &files {
        std::fs::File::create(f).expect("create");
    }
    run_ordered(&spec, &Stop::new()).expect("run");
    let l = OrderedLog::read(&log).expect("log");
    // Volume 0 "snapshotted" after 100 acks, volumes 1 and 2 after 200: as three snapshots
    // taken one after another with writes continuing between them.
    let at = three(d.path(), "sep");
    for (v, p) in at.iter().enumerate() {
        let upto = if v == 0 { 100 } else { 200 };
        l.write_image(v as u32, |i, _| i < upto, p).expect("image");
    }
    let rep = verify_cut(&log, &paths(&at)).expect("verify");
    let CutVerdict::Torn {
        missing, present, ..
    } = rep.verdict
    else {
        panic!("expected torn: {}", rep.verdict.describe());
    };
    // The first write volume 0 lacks is its first after position 100.
    let first = (100..300)
        .find(|&i| l.records[i].volume == 0)
        .expect("a later write on volume 0");
    let r = l.records[first];
    assert_eq!(
        missing,
        WriteRef {
            volume: 0,
            block: r.block,
            seq: r.seq,
            position: first as u64
        }
    );
    assert!(present.volume != 0 && present.position > missing.position);
    // The CLI says the same and fails.
    let out = Command::new(env!("CARGO_BIN_EXE_iogen"))
        .args(["verify", "--log"])
        .arg(&log)
        .args(at.iter().flat_map(|p| ["--target".as_ref(), p.as_os_str()]))
        .output()
        .expect("iogen verify");
    let text = String::from_utf8_lossy(&out.stdout);
    // Exit 1: the check said no (2 would be "could not run").
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!(
            "torn: volume 0 block {} lacks write {}",
            r.block, r.seq
        )),
        "{text}"
    );
}

#[test]
fn the_cli_writes_a_log_and_verifies_its_own_targets() {
    let (d, _) = target();
    let files = three(d.path(), "cli");
    let log = d.path().join("cli.log");
    let mut args: Vec<std::ffi::OsString> =
        vec!["ordered".into(), "--log".into(), log.clone().into()];
    for f in &files {
        args.push("--target".into());
        args.push(f.clone().into());
        std::fs::File::create(f).expect("create");
    }
    args.extend(["--size", "128k", "--writes", "90", "--json", "-"].map(Into::into));
    let out = Command::new(env!("CARGO_BIN_EXE_iogen"))
        .args(&args)
        .output()
        .expect("iogen ordered");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["writes"], 90);
    assert_eq!(v["per_volume"], serde_json::json!([30, 30, 30]));
    let out = Command::new(env!("CARGO_BIN_EXE_iogen"))
        .args(["verify", "--json", "-", "--log"])
        .arg(&log)
        .args(
            files
                .iter()
                .flat_map(|p| ["--target".as_ref(), p.as_os_str()]),
        )
        .output()
        .expect("iogen verify");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["verdict"]["verdict"], "consistent");
    assert_eq!(v["verdict"]["cut_seq"], 90);
    assert_eq!(v["log_writes"], 90);
    // Two members for a log of three is refused, naming the log's volumes.
    let out = Command::new(env!("CARGO_BIN_EXE_iogen"))
        .args(["verify", "--log"])
        .arg(&log)
        .args(
            files[..2]
                .iter()
                .flat_map(|p| ["--target".as_ref(), p.as_os_str()]),
        )
        .output()
        .expect("iogen verify");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("2 restored members given, the log has 3"),
        "{err}"
    );
}

/// The pod path: `ordered --log -` streams the log as text on stdout, `scan` prints what the
/// targets hold without the log, and deciding on those two gives `verify`'s verdict — also
/// for a torn state (the first member rolled back to an earlier image).
#[test]
fn a_text_log_and_a_scan_decide_as_verify_does() {
    let (d, _) = target();
    let files = three(d.path(), "pod");
    let mut args: Vec<std::ffi::OsString> = vec!["ordered".into(), "--log".into(), "-".into()];
    for f in &files {
        args.push("--target".into());
        args.push(f.clone().into());
    }
    args.extend(["--size", "64k", "--writes", "120"].map(Into::into));
    let out = Command::new(env!("CARGO_BIN_EXE_iogen"))
        .args(&args)
        .output()
        .expect("iogen ordered");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("120 acknowledged"),
        "the summary goes to stderr: {err}"
    );
    let text = String::from_utf8(out.stdout).expect("utf8");
    let log = iogen::cut_wire::parse_log_text(&text, Path::new("stdout")).expect("text log");
    assert_eq!(log.records.len(), 120);
    let bin = d.path().join("pod.log");
    std::fs::write(&bin, log.to_bytes()).expect("write log");
    let scan = |members: &[PathBuf]| {
        let out = Command::new(env!("CARGO_BIN_EXE_iogen"))
            .arg("scan")
            .arg("--header")
            .arg(serde_json::to_string(&log.header).expect("json"))
            .args(
                members
                    .iter()
                    .flat_map(|p| ["--target".as_ref(), p.as_os_str()]),
            )
            .output()
            .expect("iogen scan");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let seen = iogen::cut_wire::parse_scan(
            &String::from_utf8(out.stdout).expect("utf8"),
            Path::new("scan"),
        )
        .expect("scan");
        iogen::cut::report(&log, &seen).expect("report")
    };
    let whole = scan(&files);
    assert_eq!(whole, verify_cut(&bin, &paths(&files)).expect("verify"));
    assert!(
        matches!(whole.verdict, CutVerdict::Consistent { cut_seq: 120, .. }),
        "{whole:?}"
    );
    // Member 0 as of the log's first 30 records, the others complete: torn.
    let early = d.path().join("early0.dat");
    log.write_image(0, |i, _| i < 30, &early).expect("image");
    let torn = [early, files[1].clone(), files[2].clone()];
    let r = scan(&torn);
    assert_eq!(r, verify_cut(&bin, &paths(&torn)).expect("verify"));
    assert!(matches!(r.verdict, CutVerdict::Torn { .. }), "{r:?}");
}

mod prop {
    use iogen::OrderedLog;
    use iogen::cut::{Seen, decide};
    use iogen::ordered::{LogHeader, LogRecord, LogVolume};
    use proptest::prelude::*;

    /// A log as `writers` writers make it: each repeatedly takes a sequence number (seeing
    /// the acks so far) and later acknowledges, in an order `steps` picks; writer `w` writes
    /// blocks `≡ w (mod writers)` of the volume `targets` picks.
    fn simulate(
        writers: usize,
        steps: &[(usize, u8, u8)],
        volumes: usize,
        blocks: u64,
    ) -> OrderedLog {
        let mut in_flight: Vec<Option<(u64, u64, u32, u64)>> = vec![None; writers];
        let (mut seq, mut records) = (1u64, Vec::new());
        for &(w, v, b) in steps {
            let w = w % writers;
            match in_flight[w].take() {
                None => {
                    let mine = blocks / writers as u64;
                    let block = u64::from(b) % mine * writers as u64 + w as u64;
                    in_flight[w] = Some((
                        seq,
                        records.len() as u64,
                        u32::from(v) % volumes as u32,
                        block,
                    ));
                    seq += 1;
                }
                Some((s, acked_before, volume, block)) => records.push(LogRecord {
                    seq: s,
                    acked_before,
                    volume,
                    block,
                    failed: false,
                    submit_ns: 0,
                    ack_ns: 0,
                }),
            }
        }
        OrderedLog {
            header: LogHeader {
                nonce: 1,
                block: 512,
                writers: writers as u32,
                volumes: (0..volumes)
                    .map(|i| LogVolume {
                        path: format!("v{i}"),
                        region: blocks * 512,
                    })
                    .collect(),
                start_unix_ns: 0,
            },
            records,
        }
    }

    proptest! {
        /// `decide` agrees with the definition, checked the slow way: the writes the images
        /// imply (each block's shown write and the ones before it) are closed under
        /// "acknowledged before submitted".
        #[test]
        fn decide_matches_the_definition(
            writers in 1usize..4,
            steps in proptest::collection::vec((0usize..4, 0u8..3, 0u8..4), 0..80),
            keep in proptest::collection::vec(any::<bool>(), 80),
            upto in proptest::collection::vec(0usize..60, 3),
        ) {
            let log = simulate(writers, &steps, 3, 12);
            let n = log.records.len();
            // Each volume taken at its own position, writes in flight there kept or not.
            let kept = |i: usize, v: usize| i < upto[v].min(n) || (i < upto[v] + 3 && keep[i % 80]);
            let mut seen = vec![vec![Seen::Empty; 12]; 3];
            for (i, r) in log.records.iter().enumerate() {
                if kept(i, r.volume as usize) {
                    seen[r.volume as usize][r.block as usize] = Seen::Write { seq: r.seq };
                }
            }
            // The implied set: per block, every write up to the shown one.
            let mut implied = vec![false; n];
            for (i, r) in log.records.iter().enumerate() {
                if let Seen::Write { seq } = seen[r.volume as usize][r.block as usize] {
                    let shown = log.records.iter().position(|x| x.seq == seq).unwrap_or(0);
                    implied[i] = i <= shown;
                }
            }
            let closed = (0..n).filter(|&i| implied[i]).all(|i| {
                (0..log.records[i].acked_before as usize).all(|x| implied[x])
            });
            let v = decide(&log, &seen);
            prop_assert_eq!(v.is_consistent(), closed, "{}", v.describe());
        }
    }
}
