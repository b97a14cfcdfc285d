//! blktrace binary and blkparse text import, against real blktrace output and real blkparse.

use std::path::{Path, PathBuf};
use std::process::Command;

use import::blk::{
    Endian, Phase, RawRecord, import_blkparse, import_blktrace, read_blktrace_file,
    write_blktrace_fixture,
};
use import::{ImportError, ImportReport, Policy};
use trace_format::{Event, Io, IoKind, Name, Op, Trace, TraceWriter};

const SKIP: Policy = Policy {
    skip_bad: true,
    keep_first: 5,
};

fn samples() -> Option<PathBuf> {
    let shared = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared");
    shared.exists().then(|| shared.join("trace-samples"))
}

#[allow(
    clippy::print_stderr,
    reason = "the skip note when ../shared is absent"
)]
fn skip_note() {
    crate::require_samples(Path::new("../shared"));
    eprintln!("skipped: ../shared does not exist");
}

fn keks_files(samples: &Path) -> Vec<PathBuf> {
    (0..8)
        .map(|c| samples.join(format!("blktrace-binary/keks.blktrace.{c}")))
        .collect()
}

fn read_back(out: &Path) -> Trace {
    Trace::read(out).expect("read the imported trace")
}

fn bin(
    dir: &Path,
    files: &[PathBuf],
    policy: Policy,
) -> Result<(ImportReport, Trace), ImportError> {
    let out = dir.join("bin.jsonl");
    let o = out.clone();
    let report = import_blktrace(files, policy, move |h| TraceWriter::create(&o, None, &h))?;
    Ok((report, read_back(&out)))
}

fn text(dir: &Path, file: &Path, policy: Policy) -> Result<(ImportReport, Trace), ImportError> {
    let out = dir.join("text.jsonl");
    let o = out.clone();
    let report = import_blkparse(file, policy, move |h| TraceWriter::create(&o, None, &h))?;
    Ok((report, read_back(&out)))
}

/// The checker finds no problem in an imported trace.
fn assert_checks(dir: &Path, name: &str) {
    let reader = trace_format::TraceReader::open(dir.join(name)).expect("open");
    let checked = trace_format::check_trace(reader, name, 10, |_| {}).expect("check");
    assert_eq!(checked.problems, 0, "{:?}", checked.diagnostics);
}

fn io(at: u64, observed: Option<u64>, vol: &str, kind: IoKind, offset: u64, len: u64) -> Event {
    Event {
        at,
        id: 0,
        tenant: None,
        observed,
        op: Op::Io(Io {
            volume: Name::new(vol),
            kind,
            offset,
            len,
        }),
    }
}

/// Events with ids renumbered from 0, to compare with hand-written lists.
fn with_ids(mut events: Vec<Event>) -> Vec<Event> {
    for (i, e) in events.iter_mut().enumerate() {
        e.id = i as u64;
    }
    events
}

fn count(t: &Trace, kinds: &[IoKind]) -> u64 {
    t.events
        .iter()
        .filter(|e| matches!(&e.op, Op::Io(io) if kinds.contains(&io.kind)))
        .count() as u64
}

/// A number from blkparse's `Total` summary, e.g. `Writes Completed`.
fn total(blkparse_text: &str, label: &str) -> u64 {
    let section = &blkparse_text[blkparse_text.find("\nTotal (").expect("Total section")..];
    let after = &section[section.find(&format!("{label}:")).expect(label) + label.len() + 1..];
    after
        .trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a number")
}

fn require_blkparse() {
    match Command::new("blkparse").arg("-V").output() {
        Ok(o) if o.status.success() => {}
        other => panic!(
            "this test needs blkparse on PATH (Debian: apt-get install -y blktrace); running \
             `blkparse -V` gave {other:?}"
        ),
    }
}

/// Runs `blkparse -D DIR -i BASE` and returns the text file it wrote.
fn blkparse(dir: &Path, base: &str) -> PathBuf {
    require_blkparse();
    let out = dir.join(format!("{base}.txt"));
    let o = Command::new("blkparse")
        .args(["-D"])
        .arg(dir)
        .args(["-i", base, "-o"])
        .arg(&out)
        .output()
        .expect("run blkparse");
    assert!(
        o.status.success(),
        "blkparse failed: {}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

#[test]
fn real_keks_binary_imports_with_blkparse_summary_counts() {
    let Some(samples) = samples() else {
        return skip_note();
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (report, t) = bin(dir.path(), &keks_files(&samples), Policy::default()).expect("import");
    let summary = std::fs::read_to_string(samples.join("blkparse-text/keks.blkparse.txt"))
        .expect("read blkparse text");
    let (read_d, write_d) = (
        total(&summary, "Read Dispatches"),
        total(&summary, "Write Dispatches"),
    );
    let (reads_c, writes_c) = (
        total(&summary, "Reads Completed"),
        total(&summary, "Writes Completed"),
    );
    assert_eq!((read_d, write_d, reads_c, writes_c), (24, 1168, 48, 1158));
    // Every data request (W, DS) completes exactly once, and blkparse counts discards as
    // writes: one event per completed write.
    assert_eq!(count(&t, &[IoKind::Write, IoKind::Trim]), writes_c);
    // blkparse counts a flush (no write bit) as a read dispatch; the sample has no data reads.
    assert_eq!(count(&t, &[IoKind::Read]), 0);
    assert_eq!(count(&t, &[IoKind::Flush]), read_d);
    // Dispatches include 10 re-dispatches of requests still in flight (D twice, one C), and
    // "Reads Completed" includes 24 completions of flushes' original requests (C NS, no D).
    assert_eq!(report.events, read_d + write_d - 10);
    assert_eq!(report.events, reads_c + writes_c - 24);
    assert_eq!(report.events, 1182);
    assert_eq!(
        report.warnings,
        [
            "191 notify records (process names, timestamps, messages) produce no event",
            "10 re-dispatches of a request still in flight (same device, sector, kind and \
             length) were merged into its first dispatch",
            "24 completions matched no open issue (e.g. a flush's original request, RWBS NS)",
        ]
    );
    assert!(t.events.iter().all(|e| e.observed.is_some()));
    assert_eq!(report.skipped, 0);
    let first = &t.events[0];
    // The first D: `D DS 983947432 + 64`, completed 843237 ns later.
    assert_eq!((first.at, first.observed), (0, Some(843_237)));
    assert_eq!(
        first.op,
        Op::Io(Io {
            volume: Name::new("dev-8-52"),
            kind: IoKind::Trim,
            offset: 983_947_432 * 512,
            len: 64 * 512,
        })
    );
    let p = &t.header.provenance;
    assert_eq!(p.source_format.as_deref(), Some("blktrace"));
    assert_eq!(p.source_files.len(), 8);
    assert_eq!(
        p.parameters.get("device.dev-8-52").map(String::as_str),
        Some("8,52")
    );
    // The furthest byte, by a plain scan of the text: rounded up to the next MiB.
    let end = summary
        .lines()
        .take_while(|l| !l.starts_with("CPU"))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(5) == Some(&"D") && f.get(8) == Some(&"+")).then(|| {
                (f[7].parse::<u64>().expect("sector") + f[9].parse::<u64>().expect("n")) * 512
            })
        })
        .max()
        .expect("a D with data");
    assert_eq!(t.header.volumes.len(), 1);
    assert_eq!(t.header.volumes[0].size, Some(end.div_ceil(1 << 20) << 20));
    assert!(t.events.windows(2).all(|w| w[0].at <= w[1].at));
    assert_checks(dir.path(), "bin.jsonl");
}

#[test]
fn real_keks_text_import_equals_binary_import() {
    let Some(samples) = samples() else {
        return skip_note();
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (rb, b) = bin(dir.path(), &keks_files(&samples), Policy::default()).expect("binary");
    let txt = samples.join("blkparse-text/keks.blkparse.txt");
    let (rt, t) = text(dir.path(), &txt, Policy::default()).expect("text");
    assert_eq!(rt.events, rb.events);
    assert_eq!(t.events, b.events);
    assert_eq!(t.header.volumes, b.header.volumes);
    assert_eq!(
        t.header.provenance.source_format.as_deref(),
        Some("blkparse-text")
    );
    // The text has no notify records (blkparse turns them into process names).
    assert_eq!(&rt.warnings[..], &rb.warnings[1..]);
    assert_checks(dir.path(), "text.jsonl");
}

#[test]
fn generator_rewrites_the_real_files_byte_for_byte() {
    let Some(samples) = samples() else {
        return skip_note();
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut all = Vec::new();
    for f in keks_files(&samples) {
        let (endian, records) = read_blktrace_file(&f).expect("read");
        assert_eq!(endian, Endian::Little);
        all.extend(records);
    }
    assert_eq!(all.len(), 2589, "PROVENANCE.md counts 2,589 records");
    let files = write_blktrace_fixture(dir.path(), "keks", &all, Endian::Little).expect("write");
    for (ours, theirs) in files.iter().zip(keks_files(&samples)) {
        assert_eq!(
            std::fs::read(ours).expect("read ours"),
            std::fs::read(&theirs).expect("read sample"),
            "{}",
            theirs.display()
        );
    }
    // Big-endian files read back to the same records, and import to the same events.
    let be = tempfile::tempdir().expect("tempdir");
    let be_files = write_blktrace_fixture(be.path(), "keks", &all, Endian::Big).expect("write");
    let (endian, records) = read_blktrace_file(&be_files[3]).expect("read BE");
    assert_eq!(endian, Endian::Big);
    assert_eq!(records, read_blktrace_file(&files[3]).expect("read LE").1);
    let (_, le_t) = bin(dir.path(), &files, Policy::default()).expect("LE");
    let (_, be_t) = bin(be.path(), &be_files, Policy::default()).expect("BE");
    assert_eq!(le_t.events, be_t.events);
}

const A: (u32, u32) = (8, 16);
const B: (u32, u32) = (259, 3);
const T0: u64 = 1_000_000_000_000;

/// A small recording on three CPUs and two devices, with per-CPU sequence numbers.
fn synthetic() -> Vec<RawRecord> {
    use IoKind::*;
    use Phase::*;
    let r = RawRecord::request;
    let mut recs = vec![
        RawRecord::process_name(0, T0, A, 100, "fio"),
        r(Issue, 0, T0 + 1_000, A, Write, 2048, 4096),
        r(Issue, 1, T0 + 1_500, A, Read, 8, 8192),
        r(Complete, 1, T0 + 9_000, A, Read, 8, 8192),
        r(Complete, 0, T0 + 20_000, A, Write, 2048, 4096),
        r(Issue, 2, T0 + 30_000, B, Trim, 100_000, 1 << 20),
        r(Issue, 0, T0 + 31_000, B, Flush, 0, 0),
        r(Issue, 2, T0 + 32_000, B, Trim, 100_000, 1 << 20),
        r(Complete, 1, T0 + 40_000, B, Flush, 0, 0),
        // The completion of the flush's original request: no data, no flush bit (C NS).
        r(Complete, 1, T0 + 40_001, B, Read, 0, 0),
        r(Complete, 2, T0 + 50_000, B, Trim, 100_000, 1 << 20),
        r(Issue, 0, T0 + 60_000, A, Write, 0, 512),
        r(Complete, 0, T0 + 60_500, A, Write, 0, 512),
    ];
    number(&mut recs);
    recs
}

fn number(recs: &mut [RawRecord]) {
    let mut seq = [0u32; 64];
    for r in recs {
        if r.action >> 16 & (1 << 10) == 0 {
            seq[r.cpu as usize] += 1;
            r.sequence = seq[r.cpu as usize];
            r.pid = 100;
        }
    }
}

fn synthetic_expected() -> Vec<Event> {
    use IoKind::*;
    with_ids(vec![
        io(0, Some(19_000), "dev-8-16", Write, 2048 * 512, 4096),
        io(500, Some(7_500), "dev-8-16", Read, 4096, 8192),
        io(
            29_000,
            Some(20_000),
            "dev-259-3",
            Trim,
            100_000 * 512,
            1 << 20,
        ),
        io(30_000, Some(9_000), "dev-259-3", Flush, 0, 0),
        io(59_000, Some(500), "dev-8-16", Write, 0, 512),
    ])
}

#[test]
fn synthetic_fixture_imports_the_same_as_blkparse_reads_it() {
    for endian in [Endian::Little, Endian::Big] {
        let dir = tempfile::tempdir().expect("tempdir");
        let files =
            write_blktrace_fixture(dir.path(), "synth", &synthetic(), endian).expect("write");
        assert_eq!(files.len(), 3);
        let (report, t) = bin(dir.path(), &files, Policy::default()).expect("binary");
        assert_eq!(t.events, synthetic_expected(), "{endian:?}");
        assert_eq!(
            report.warnings,
            [
                "1 notify records (process names, timestamps, messages) produce no event",
                "1 re-dispatches of a request still in flight (same device, sector, kind and \
                 length) were merged into its first dispatch",
                "1 completions matched no open issue (e.g. a flush's original request, RWBS NS)",
            ]
        );
        let sizes: Vec<(&str, Option<u64>)> = t
            .header
            .volumes
            .iter()
            .map(|v| (v.name.as_str(), v.size))
            .collect();
        assert_eq!(
            sizes,
            [("dev-8-16", Some(2 << 20)), ("dev-259-3", Some(50 << 20))]
        );
        assert_checks(dir.path(), "bin.jsonl");
        // blkparse reads our files, and its text imports to the same events.
        let txt = blkparse(dir.path(), "synth");
        let listing = std::fs::read_to_string(&txt).expect("read blkparse output");
        assert!(listing.contains("D  FN [fio]"), "{listing}");
        assert!(listing.contains("C   N 0 [0]"), "{listing}");
        let (_, tt) = text(dir.path(), &txt, Policy::default()).expect("text");
        assert_eq!(tt.events, t.events, "{endian:?}\n{listing}");
        assert_eq!(tt.header.volumes, t.header.volumes);
    }
}

#[test]
fn late_and_missing_completions_leave_observed_out() {
    use IoKind::*;
    use Phase::*;
    let r = RawRecord::request;
    let s = 1_000_000_000;
    let mut recs = vec![
        r(Issue, 0, T0, A, Write, 0, 4096),
        r(Issue, 1, T0 + 31 * s, A, Write, 8, 4096),
        r(Complete, 1, T0 + 31 * s + 100, A, Write, 8, 4096),
        // Too late: the request was already written without `observed`.
        r(Complete, 0, T0 + 31 * s + 200, A, Write, 0, 4096),
        r(Issue, 0, T0 + 32 * s, A, Read, 16, 512),
    ];
    number(&mut recs);
    let dir = tempfile::tempdir().expect("tempdir");
    let files = write_blktrace_fixture(dir.path(), "late", &recs, Endian::Little).expect("write");
    let (report, t) = bin(dir.path(), &files, Policy::default()).expect("import");
    assert_eq!(
        t.events,
        with_ids(vec![
            io(0, None, "dev-8-16", Write, 0, 4096),
            io(31 * s, Some(100), "dev-8-16", Write, 4096, 4096),
            io(32 * s, None, "dev-8-16", Read, 8192, 512),
        ])
    );
    assert_eq!(
        report.warnings,
        [
            "1 requests had no completion within 30s of trace time and have no observed latency",
            "1 requests had no completion before the end of the trace and have no observed \
             latency",
            "1 completions matched no open issue (e.g. a flush's original request, RWBS NS)",
        ]
    );
    assert_checks(dir.path(), "bin.jsonl");
}

/// cpu0: a process name (64 bytes), a D and a C (48 bytes each).
fn small(dir: &Path) -> PathBuf {
    let mut recs = vec![
        RawRecord::process_name(0, T0, A, 100, "dd"),
        RawRecord::request(Phase::Issue, 0, T0 + 10, A, IoKind::Write, 0, 4096),
        RawRecord::request(Phase::Complete, 0, T0 + 20, A, IoKind::Write, 0, 4096),
    ];
    number(&mut recs);
    let files = write_blktrace_fixture(dir, "small", &recs, Endian::Little).expect("write");
    files[0].clone()
}

fn patch(path: &Path, at: usize, bytes: &[u8]) {
    let mut b = std::fs::read(path).expect("read");
    b[at..at + bytes.len()].copy_from_slice(bytes);
    std::fs::write(path, b).expect("write");
}

#[test]
fn truncated_records_are_located_and_skippable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = small(dir.path());
    let len = std::fs::metadata(&f).expect("stat").len();
    assert_eq!(len, 64 + 48 + 48);
    // Cut into the C record's header: 28 of its 48 bytes remain.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .expect("open")
        .set_len(len - 20)
        .expect("truncate");
    let err = bin(dir.path(), std::slice::from_ref(&f), Policy::default()).expect_err("strict");
    assert_eq!(
        err.to_string(),
        format!(
            "{}: record 2: header: truncated record at byte offset 112: 28 of the 48 header \
             bytes before the end of the file",
            f.display()
        )
    );
    let (report, t) = bin(dir.path(), std::slice::from_ref(&f), SKIP).expect("skip");
    assert_eq!((report.skipped, report.events), (1, 1));
    assert_eq!(report.first_skipped[0].line, 2);
    assert!(report.first_skipped[0].record);
    assert_eq!(
        t.events,
        with_ids(vec![io(0, None, "dev-8-16", IoKind::Write, 0, 4096)])
    );
    // A payload cut short: only the process name's first 12 of 16 bytes.
    let dir = tempfile::tempdir().expect("tempdir");
    let f = small(dir.path());
    let b = std::fs::read(&f).expect("read");
    std::fs::write(&f, &b[..60]).expect("write");
    let err = bin(dir.path(), std::slice::from_ref(&f), Policy::default()).expect_err("strict");
    assert_eq!(
        err.to_string(),
        format!(
            "{}: record 0: pdu_len: truncated record at byte offset 0: payload of 16 bytes has \
             only 12 before the end of the file",
            f.display()
        )
    );
    let (report, t) = bin(dir.path(), std::slice::from_ref(&f), SKIP).expect("skip");
    assert_eq!((report.skipped, t.events.len()), (1, 0));
}

#[test]
fn bad_magic_and_version_are_fatal_even_when_skipping() {
    let cases: &[(usize, [u8; 4], &str)] = &[
        (
            64,
            0x1234_5678u32.to_le_bytes(),
            "record 1: magic: bad magic 0x12345678 at byte offset 64, expected 0x65617407 \
             (blktrace version 7, in the byte order of the file's first record)",
        ),
        (
            0,
            0x1234_5678u32.to_le_bytes(),
            "record 0: magic: bad magic 0x12345678 at byte offset 0, expected 0x65617407 \
             (blktrace version 7, either byte order)",
        ),
        (
            112,
            0x6561_7406u32.to_le_bytes(),
            "record 2: magic: unsupported blktrace version 6 (magic 0x65617406) at byte offset \
             112; only version 7 is supported",
        ),
        (
            // A big-endian file of version 8.
            0,
            0x6561_7408u32.to_be_bytes(),
            "record 0: magic: unsupported blktrace version 8 (magic 0x65617408) at byte offset \
             0; only version 7 is supported",
        ),
    ];
    for (at, magic, expected) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = small(dir.path());
        patch(&f, *at, magic);
        for policy in [Policy::default(), SKIP] {
            let out = dir.path().join("bin.jsonl");
            let err = bin(dir.path(), std::slice::from_ref(&f), policy).expect_err(expected);
            assert_eq!(err.to_string(), format!("{}: {expected}", f.display()));
            assert!(!out.exists(), "pass 1 fails before the output is created");
        }
    }
    let err = bin(
        Path::new("/nonexistent"),
        &[PathBuf::from("/nonexistent/x.blktrace.0")],
        SKIP,
    )
    .expect_err("missing");
    assert!(matches!(err, ImportError::Io(_)), "{err}");
}

const GOOD_HEAD: &str = "  8,16   0        1     0.000000000   100  D   W 2048 + 8 [fio]\n\
                         \x20 8,16   0        2     0.000019000   100  C   W 2048 + 8 [0]\n";
const GOOD_TAIL: &str = "  8,16   0        4     0.000030000   100  D   R 8 + 16 [fio]\n\
                         \x20 8,16   0        5     0.000031000     0  C   R 8 + 16 [0]\n\
                         \n\
                         CPU0 (synth):\n\
                         \x20 8,16   0        6     0.000040000   100  D   W 9999999 + 8 [x]\n\
                         Total (synth):\n";

#[test]
fn blkparse_bad_lines_are_located_and_skippable() {
    let cases: &[(&str, &str)] = &[
        (
            "8:16 0 3 0.000020000 100 D W 0 + 8 [a]",
            "device: \"8:16\" is not MAJOR,MINOR",
        ),
        (
            "8,16 x 3 0.000020000 100 D W 0 + 8 [a]",
            "cpu: \"x\" is not a non-negative integer",
        ),
        (
            "8,16 0 3 0.00002 100 D W 0 + 8 [a]",
            "time: \"0.00002\" is not SECONDS.NANOSECONDS (9 digits)",
        ),
        ("8,16 0 3", "time: missing time"),
        ("8,16 0 3 0.000020000 100 D", "rwbs: missing rwbs"),
        (
            "8,16 0 3 0.000020000 100 D X 0 + 8 [a]",
            "rwbs: \"X\" is not an RWBS field (optional F, then D, W, R or N, …)",
        ),
        (
            "8,16 0 3 0.000020000 100 D W abc + 8 [a]",
            "sector: \"abc\" is not a non-negative integer",
        ),
        (
            "8,16 0 3 0.000020000 100 D W 0 +",
            "sectors: missing sectors",
        ),
        (
            "8,16 0 3 0.000020000 100 C W 0 + -8 [0]",
            "sectors: \"-8\" is not a non-negative integer",
        ),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    for (i, (bad, expected)) in cases.iter().enumerate() {
        let f = dir.path().join(format!("bad{i}.txt"));
        std::fs::write(&f, format!("{GOOD_HEAD}{bad}\n{GOOD_TAIL}")).expect("write");
        let err = text(dir.path(), &f, Policy::default()).expect_err(bad);
        assert_eq!(
            err.to_string(),
            format!("{}:3: {expected}", f.display()),
            "{bad}"
        );
        let (report, t) = text(dir.path(), &f, SKIP).expect(bad);
        assert_eq!((report.skipped, report.events), (1, 2), "{bad}");
        // The summary ends the events: its D line is neither an event nor a volume extent
        // (1 MiB + 4 KiB is the furthest byte).
        assert_eq!(t.header.volumes[0].size, Some(2 << 20));
        assert_eq!(
            t.events,
            with_ids(vec![
                io(0, Some(19_000), "dev-8-16", IoKind::Write, 2048 * 512, 4096),
                io(30_000, Some(1_000), "dev-8-16", IoKind::Read, 4096, 8192),
            ]),
            "{bad}"
        );
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    }
    let f = dir.path().join("utf8.txt");
    let mut b = GOOD_HEAD.as_bytes().to_vec();
    b.extend_from_slice(b"8,16 0 3 0.000020000 100 D W 0 + 8 [\xff]\n");
    std::fs::write(&f, b).expect("write");
    let err = text(dir.path(), &f, Policy::default()).expect_err("utf8");
    assert!(
        err.to_string()
            .starts_with(&format!("{}:3: line: not UTF-8", f.display()))
    );
}
