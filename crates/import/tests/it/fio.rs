//! fio iolog import and export, against real fio where it matters.

use std::path::{Path, PathBuf};
use std::process::Command;

use import::fio::{FioExport, export_fio_v3, import_fio, volume_name};
use import::{ImportError, ImportReport, Policy};
use trace_format::{Event, Io, IoKind, Marker, Name, Op, Trace, TraceWriter};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Imports `path` into a JSON Lines trace in `dir` and reads it back.
fn import(dir: &Path, path: &Path, policy: Policy) -> Result<(ImportReport, Trace), ImportError> {
    let out = dir.join("imported.jsonl");
    let out2 = out.clone();
    let report = import_fio(path, policy, move |h| TraceWriter::create(&out2, None, &h))?;
    Ok((report, Trace::read(&out).expect("read the imported trace")))
}

fn write_log(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write log");
    p
}

fn count(t: &Trace, kind: IoKind) -> usize {
    t.events
        .iter()
        .filter(|e| matches!(&e.op, Op::Io(io) if io.kind == kind))
        .count()
}

/// Counts the actions of a log by a plain scan (the expected values of the importer).
fn count_actions(path: &Path, action: &str) -> usize {
    std::fs::read_to_string(path)
        .expect("read log")
        .lines()
        .skip(1)
        .filter(|l| l.split_whitespace().nth(2) == Some(action))
        .count()
}

fn require_fio() {
    match Command::new("fio").arg("--version").output() {
        Ok(o) if o.status.success() => {}
        other => panic!(
            "this test needs fio >= 3.31 on PATH (Debian: apt-get install -y fio); \
             running `fio --version` gave {other:?}"
        ),
    }
}

#[test]
fn real_fio_fixture_imports_with_the_right_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = fixtures().join("fio-randrw.iolog");
    let (report, t) = import(dir.path(), &log, Policy::default()).expect("import");
    let (reads, writes, syncs) = (
        count_actions(&log, "read"),
        count_actions(&log, "write"),
        count_actions(&log, "sync"),
    );
    assert!(
        reads > 0 && writes > 0 && syncs > 0,
        "fixture lacks an action"
    );
    assert_eq!(
        reads + writes,
        200,
        "the fixture was made with --number_ios=200"
    );
    assert_eq!(count(&t, IoKind::Read), reads);
    assert_eq!(count(&t, IoKind::Write), writes);
    assert_eq!(count(&t, IoKind::Flush), syncs);
    assert_eq!(report.events as usize, reads + writes + syncs);
    assert_eq!(report.skipped, 0);
    let p = &t.header.provenance;
    assert_eq!(p.source_format.as_deref(), Some("fio-iolog-v3"));
    assert_eq!(p.source_files, vec![log.display().to_string()]);
    assert_eq!(
        p.generator.as_deref(),
        Some(concat!("cnsreplay-import ", env!("CARGO_PKG_VERSION")))
    );
    assert_eq!(t.header.volumes.len(), 1);
    assert_eq!(t.header.volumes[0].name.as_str(), "gen-dat");
    assert_eq!(t.header.volumes[0].size, Some(4 << 20));
    assert_eq!(
        p.parameters.get("file.gen-dat").map(String::as_str),
        Some("gen.dat")
    );
    for (i, e) in t.events.iter().enumerate() {
        assert_eq!(e.id, i as u64);
    }
    assert!(t.events.windows(2).all(|w| w[0].at <= w[1].at));
    // The first I/O line's timestamp, in µs, becomes `at` in ns.
    let first_io_us: u64 = std::fs::read_to_string(&log)
        .expect("read")
        .lines()
        .find(|l| l.contains(" read ") || l.contains(" write "))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .expect("a first I/O line");
    assert_eq!(t.events[0].at, first_io_us * 1000);
    // The checker accepts the imported trace.
    let reader = trace_format::TraceReader::open(dir.path().join("imported.jsonl")).expect("open");
    let checked = trace_format::check_trace(reader, "imported.jsonl", 10, |_| {}).expect("check");
    assert_eq!(checked.problems, 0, "{:?}", checked.diagnostics);
}

/// Runs fio on an iolog and returns (reads, writes) from its JSON output.
fn fio_replay(dir: &Path, iolog: &Path) -> (u64, u64) {
    require_fio();
    let out = Command::new("fio")
        .current_dir(dir)
        .args(["--name=replay", "--ioengine=psync", "--output-format=json"])
        .arg(format!("--read_iolog={}", iolog.display()))
        .output()
        .expect("run fio");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "fio failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // fio may print notes before the JSON document.
    let json = &stdout[stdout.find('{').expect("JSON output")..];
    let v: serde_json::Value = serde_json::from_str(json).expect("fio JSON");
    let job = &v["jobs"][0];
    let n = |dir: &str| job[dir]["total_ios"].as_u64().expect("total_ios");
    (n("read"), n("write"))
}

#[test]
fn export_replays_in_real_fio_with_the_same_io_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = fixtures().join("fio-randrw.iolog");
    let (_, t) = import(dir.path(), &log, Policy::default()).expect("import");
    // One backing file per volume, at the declared size.
    for v in &t.header.volumes {
        let f = std::fs::File::create(dir.path().join(format!("{}.dat", v.name)))
            .expect("create backing file");
        f.set_len(v.size.expect("size")).expect("set_len");
    }
    let export = dir.path().join("export.iolog");
    let d = dir.path().to_owned();
    let r = export_fio_v3(
        t.events.iter().cloned().map(Ok),
        |v| d.join(format!("{v}.dat")).display().to_string(),
        std::fs::File::create(&export).expect("create export"),
    )
    .expect("export");
    let (reads, writes) = (count(&t, IoKind::Read), count(&t, IoKind::Write));
    assert_eq!(r.ios as usize, reads + writes + count(&t, IoKind::Flush));
    assert_eq!(r.skipped, 0);
    assert_eq!(
        fio_replay(dir.path(), &export),
        (reads as u64, writes as u64)
    );
    // And the export imports back to the same events (on a volume named after the path).
    let dir2 = tempfile::tempdir().expect("tempdir");
    let (_, back) = import(dir2.path(), &export, Policy::default()).expect("reimport");
    assert_eq!(back.events.len(), t.events.len());
    let key = |e: &Event| match &e.op {
        Op::Io(io) => (e.at, io.kind, io.offset, io.len),
        other => panic!("not io: {other:?}"),
    };
    for (a, b) in back.events.iter().zip(&t.events) {
        assert_eq!(key(a), key(b));
    }
}

#[test]
#[allow(
    clippy::print_stderr,
    reason = "the skip note when ../shared is absent"
)]
fn real_sample_t0038_imports() {
    let shared = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared");
    if !shared.exists() {
        crate::require_samples(&shared);
        eprintln!("skipped: {} does not exist", shared.display());
        return;
    }
    let log = shared.join("trace-samples/fio-iolog-v3/t0038.iolog");
    assert!(log.exists(), "missing sample {}", log.display());
    let dir = tempfile::tempdir().expect("tempdir");
    let (report, t) = import(dir.path(), &log, Policy::default()).expect("import t0038");
    // Counted by hand: 10 trims of 2 GiB and 10 writes of 4 KiB, interleaved, at offsets
    // 0, 4096, …, 36864, on /dev/null; plus add, open and close.
    assert_eq!(report.events, 20);
    assert_eq!(count(&t, IoKind::Trim), 10);
    assert_eq!(count(&t, IoKind::Write), 10);
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert!(report.warnings[0].starts_with("3 add/open/close"));
    let v = &t.header.volumes;
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].name.as_str(), "dev-null");
    // Furthest byte: 36864 + 2 GiB, rounded up to the next MiB.
    assert_eq!(v[0].size, Some((2048 + 1) << 20));
    let first = &t.events[0];
    assert_eq!(first.at, 10_736_000);
    assert_eq!(
        first.op,
        Op::Io(Io {
            volume: Name::new("dev-null"),
            kind: IoKind::Trim,
            offset: 0,
            len: 2 << 30,
        })
    );
    assert_eq!(t.events[19].at, 10_809_000);
}

#[test]
fn v2_wait_accumulates_into_event_times() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = write_log(
        dir.path(),
        "v2.iolog",
        "fio version 2 iolog\n\
         /dev/sdb add\n\
         /dev/sdb open\n\
         /dev/sdb read 0 4096\n\
         /dev/sdb wait 1500 0\n\
         /dev/sdb write 8192 4096\n\
         \n\
         /dev/sdb wait 250\n\
         /dev/sdb datasync 0 0\n\
         /dev/sdb sync\n\
         /dev/sdb trim 1048576 4096\n\
         /dev/sdb close\n",
    );
    let (report, t) = import(dir.path(), &log, Policy::default()).expect("import v2");
    let ats: Vec<u64> = t.events.iter().map(|e| e.at).collect();
    assert_eq!(ats, [0, 1_500_000, 1_750_000, 1_750_000, 1_750_000]);
    let kinds: Vec<IoKind> = t
        .events
        .iter()
        .filter_map(|e| match &e.op {
            Op::Io(io) => Some(io.kind),
            _ => None,
        })
        .collect();
    use IoKind::*;
    assert_eq!(kinds, [Read, Write, Flush, Flush, Trim]);
    assert_eq!(
        t.header.provenance.source_format.as_deref(),
        Some("fio-iolog-v2")
    );
    assert_eq!(
        t.header
            .provenance
            .parameters
            .get("datasync")
            .map(String::as_str),
        Some("flush")
    );
    assert_eq!(t.header.volumes[0].size, Some(2 << 20));
    assert!(report.warnings.iter().any(|w| w.starts_with("1 datasync")));
    assert!(report.warnings.iter().any(|w| w.starts_with("2 wait")));
}

/// Each kind of bad line: its located message, and that `skip_bad` counts it and imports the
/// rest.
#[test]
fn bad_lines_are_located_and_skippable() {
    let cases: &[(&str, &str)] = &[
        (
            "40 f frob 0 4096",
            "4: action: unknown action \"frob\", expected add, open, close, read, write, trim, \
             sync, datasync or wait",
        ),
        (
            "40 f write x 4096",
            "4: offset: \"x\" is not a non-negative integer",
        ),
        (
            "40 f write -1 4096",
            "4: offset: \"-1\" is not a non-negative integer",
        ),
        ("40 f write 0", "4: length: missing length"),
        ("40 f", "4: action: missing action"),
        (
            "x f read 0 1",
            "4: timestamp: \"x\" is not a non-negative integer",
        ),
        ("40 f read 0 1 9", "4: line: unexpected extra field \"9\""),
        (
            "5 f read 0 1",
            "4: timestamp: timestamp 5 goes backwards (the previous line's was 20)",
        ),
        (
            "40 f wait 100 0",
            "4: action: wait is not allowed in a version 3 iolog (timestamps give the timing)",
        ),
        (
            "40 f read 18446744073709551615 1",
            "4: length: offset + length overflows 64 bits",
        ),
        (
            "18446744073709551615 f read 0 1",
            "4: timestamp: time in nanoseconds overflows 64 bits",
        ),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    for (i, (bad, expected)) in cases.iter().enumerate() {
        let text =
            format!("fio version 3 iolog\n10 f add\n20 f read 0 4096\n{bad}\n50 f write 0 4096\n");
        let log = write_log(dir.path(), &format!("bad{i}.iolog"), &text);
        let err = import(dir.path(), &log, Policy::default()).expect_err(bad);
        assert_eq!(
            err.to_string(),
            format!("{}:{expected}", log.display()),
            "{bad}"
        );
        let policy = Policy {
            skip_bad: true,
            ..Policy::default()
        };
        let (report, t) = import(dir.path(), &log, policy).expect(bad);
        assert_eq!(
            (report.skipped, report.events, t.events.len()),
            (1, 2, 2),
            "{bad}"
        );
        assert_eq!(report.first_skipped[0].line, 4);
        // A skipped line does not widen the volume.
        assert_eq!(t.header.volumes[0].size, Some(1 << 20));
    }
    // All at once, and non-UTF-8: every one is counted, the first five are kept.
    let mut text = String::from("fio version 3 iolog\n20 f read 0 4096\n");
    for (bad, _) in cases {
        text.push_str(bad);
        text.push('\n');
    }
    text.push_str("60 f write 0 4096\n");
    let mut bytes = text.into_bytes();
    bytes.extend_from_slice(b"70 f\xff read 0 1\n");
    let log = dir.path().join("all.iolog");
    std::fs::write(&log, bytes).expect("write");
    let policy = Policy {
        skip_bad: true,
        keep_first: 5,
    };
    let (report, t) = import(dir.path(), &log, policy).expect("skip all");
    assert_eq!(report.skipped as usize, cases.len() + 1);
    assert_eq!(report.first_skipped.len(), 5);
    assert_eq!(t.events.len(), 2);
    let err = import(dir.path(), &log, Policy::default()).expect_err("strict");
    assert!(
        err.to_string()
            .contains("all.iolog:3: action: unknown action")
    );
}

#[test]
fn wrong_first_line_is_fatal_even_when_skipping() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = Policy {
        skip_bad: true,
        ..Policy::default()
    };
    for (name, text) in [
        ("v1.iolog", "fio version 1 iolog\n0 f add\n"),
        ("empty.iolog", ""),
    ] {
        let log = write_log(dir.path(), name, text);
        let err = import(dir.path(), &log, policy).expect_err(name);
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!("{}:1: header: ", log.display())),
            "{msg}"
        );
        assert!(msg.contains("\"fio version 3 iolog\""), "{msg}");
    }
    let err = import(dir.path(), &dir.path().join("missing.iolog"), policy).expect_err("missing");
    assert!(matches!(err, ImportError::Io(_)), "{err}");
}

#[test]
fn volume_names_are_kubernetes_like_and_distinct() {
    assert_eq!(volume_name("/dev/nvme0n1"), "dev-nvme0n1");
    assert_eq!(volume_name("/mnt/Data_01/file.bin"), "mnt-data-01-file-bin");
    assert_eq!(volume_name("///"), "file");
    assert_eq!(volume_name(&"a".repeat(100)).len(), 63);
    let dir = tempfile::tempdir().expect("tempdir");
    let log = write_log(
        dir.path(),
        "two.iolog",
        "fio version 3 iolog\n1 /a/b read 0 1\n2 /a-b read 0 1\n3 /A/B write 0 1\n",
    );
    let (_, t) = import(dir.path(), &log, Policy::default()).expect("import");
    let names: Vec<&str> = t.header.volumes.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["a-b", "a-b-2", "a-b-3"]);
    let params = &t.header.provenance.parameters;
    assert_eq!(params.get("file.a-b").map(String::as_str), Some("/A/B"));
    assert_eq!(params.get("file.a-b-3").map(String::as_str), Some("/a/b"));
}

#[test]
fn export_writes_v3_lines_and_skips_control_operations() {
    let io = |at, kind, offset, len| Event {
        at,
        id: 0,
        tenant: None,
        observed: None,
        op: Op::Io(Io {
            volume: Name::new("v"),
            kind,
            offset,
            len,
        }),
    };
    let events = vec![
        Event {
            op: Op::Marker(Marker { name: "m".into() }),
            ..io(0, IoKind::Read, 0, 0)
        },
        io(1_500, IoKind::Write, 4096, 512),
        io(2_999_999, IoKind::Flush, 0, 0),
        io(3_000_000, IoKind::Trim, 0, 1 << 20),
        io(4_000_000, IoKind::Read, 8192, 4096),
    ];
    let mut out = Vec::new();
    let r = export_fio_v3(
        events.into_iter().map(Ok),
        |v| format!("/tmp/{v}"),
        &mut out,
    )
    .expect("export");
    assert_eq!(
        r,
        FioExport {
            ios: 4,
            skipped: 1,
            files: vec!["/tmp/v".to_owned()],
        }
    );
    assert_eq!(
        String::from_utf8(out).expect("utf-8"),
        "fio version 3 iolog\n\
         1 /tmp/v add\n\
         1 /tmp/v open\n\
         1 /tmp/v write 4096 512\n\
         2999 /tmp/v sync 0 0\n\
         3000 /tmp/v trim 0 1048576\n\
         4000 /tmp/v read 8192 4096\n\
         4000 /tmp/v close\n"
    );
    let big = vec![Ok(io(0, IoKind::Write, 0, 1 << 32))];
    let err = export_fio_v3(big, |v| v.to_owned(), Vec::new()).expect_err("too long");
    assert!(err.to_string().contains("32-bit"), "{err}");
    let spaced = vec![Ok(io(0, IoKind::Write, 0, 1))];
    let err = export_fio_v3(spaced, |_| "a b".to_owned(), Vec::new()).expect_err("space");
    assert!(err.to_string().contains("whitespace"), "{err}");
}
