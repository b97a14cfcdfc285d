//! Block-trace CSV imports (MSR Cambridge, Alibaba, Tencent CBS) on hand-made fixtures.

use std::path::{Path, PathBuf};

use import::blockcsv::{import_alibaba, import_msr, import_tencent};
use import::{ImportError, ImportReport, Policy};
use trace_format::{Event, Header, IoKind, Op, Trace, TraceReader, TraceWriter};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/blockcsv")
}

#[derive(Clone, Copy)]
enum Fmt<'a> {
    Msr,
    Alibaba(Option<&'a Path>),
    Tencent,
}

/// Imports `paths` into a JSON Lines trace in `dir`, checks it with the trace checker (no
/// problem allowed) and reads it back.
fn import(
    dir: &Path,
    fmt: Fmt<'_>,
    paths: &[PathBuf],
    policy: Policy,
) -> Result<(ImportReport, Trace), ImportError> {
    let out = dir.join("imported.jsonl");
    let o = out.clone();
    let factory = move |h: Header| TraceWriter::create(&o, None, &h);
    let report = match fmt {
        Fmt::Msr => import_msr(paths, policy, factory),
        Fmt::Alibaba(sizes) => import_alibaba(paths, sizes, policy, factory),
        Fmt::Tencent => import_tencent(paths, policy, factory),
    }?;
    let reader = TraceReader::open(&out).expect("open");
    let checked = trace_format::check_trace(reader, "imported.jsonl", 10, |_| {}).expect("check");
    assert_eq!(checked.problems, 0, "{:?}", checked.diagnostics);
    Ok((report, Trace::read(&out).expect("read the imported trace")))
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write input");
    p
}

/// A format, a good first line, a good last line, and bad lines with their messages.
type Suite<'a> = (Fmt<'a>, &'a str, &'a str, &'a [(String, String)]);

type Row = (u64, String, IoKind, u64, u64, Option<u64>);

/// (at, volume, kind, offset, len, observed) of each event; ids checked sequential from 0.
fn rows(t: &Trace) -> Vec<Row> {
    t.events
        .iter()
        .enumerate()
        .map(|(i, e): (usize, &Event)| {
            assert_eq!(e.id, i as u64);
            match &e.op {
                Op::Io(io) => (
                    e.at,
                    io.volume.as_str().to_owned(),
                    io.kind,
                    io.offset,
                    io.len,
                    e.observed,
                ),
                other => panic!("not io: {other:?}"),
            }
        })
        .collect()
}

fn row(at: u64, v: &str, kind: IoKind, offset: u64, len: u64, obs: Option<u64>) -> Row {
    (at, v.to_owned(), kind, offset, len, obs)
}

fn volumes(t: &Trace) -> Vec<(String, u64)> {
    t.header
        .volumes
        .iter()
        .map(|v| (v.name.as_str().to_owned(), v.size.expect("size")))
        .collect()
}

fn param<'a>(t: &'a Trace, key: &str) -> Option<&'a str> {
    t.header.provenance.parameters.get(key).map(String::as_str)
}

fn skipping() -> Policy {
    Policy {
        skip_bad: true,
        ..Policy::default()
    }
}

#[test]
fn msr_filetime_instant_is_2007_02_22() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(
        dir.path(),
        "one.csv",
        "128166372003061629,src1,0,Read,0,4096,10\n",
    );
    let (_, t) = import(dir.path(), Fmt::Msr, &[f], Policy::default()).expect("import");
    assert_eq!(param(&t, "origin"), Some("2007-02-22T17:00:00.3061629Z"));
    assert_eq!(
        t.header.origin.map(|o| o.to_string()).as_deref(),
        Some("2007-02-22T17:00:00.3061629Z"),
        "the header's origin is the same instant"
    );
    assert_eq!(t.events[0].at, 0);
}

#[test]
fn msr_imports_exact_events() {
    use IoKind::*;
    let dir = tempfile::tempdir().expect("tempdir");
    let f = fixtures().join("msr.csv");
    let (report, t) = import(
        dir.path(),
        Fmt::Msr,
        std::slice::from_ref(&f),
        Policy::default(),
    )
    .expect("import");
    assert_eq!((report.events, report.skipped), (3, 0));
    assert_eq!(
        rows(&t),
        [
            row(0, "src1-0", Read, 3_154_152_960, 4096, Some(133_100)),
            row(5_285_100, "src1-0", Write, 2_183_168, 512, Some(3_942_100)),
            row(1_332_052_600, "usr-1", Read, 0, 65536, Some(10_000)),
        ]
    );
    assert_eq!(
        volumes(&t),
        [
            ("src1-0".to_owned(), 3_155_165_184),
            ("usr-1".to_owned(), 1 << 20)
        ]
    );
    let p = &t.header.provenance;
    assert_eq!(p.source_format.as_deref(), Some("msr-cambridge-csv"));
    assert_eq!(p.source_files, vec![f.display().to_string()]);
    assert_eq!(
        p.generator.as_deref(),
        Some(concat!("cnsreplay-import ", env!("CARGO_PKG_VERSION")))
    );
    assert_eq!(param(&t, "disk.src1-0"), Some("src1-0"));
}

#[test]
fn msr_volume_names_are_sanitized_and_distinct() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(
        dir.path(),
        "names.csv",
        "1,Web_Srv,0,Read,0,1,0\n2,web-srv,0,Write,0,1,0\n3,WEB.SRV,0,Write,0,1,0\n",
    );
    let (_, t) = import(dir.path(), Fmt::Msr, &[f], Policy::default()).expect("import");
    let names: Vec<String> = volumes(&t).into_iter().map(|v| v.0).collect();
    assert_eq!(names, ["web-srv-0", "web-srv-0-2", "web-srv-0-3"]);
    assert_eq!(param(&t, "disk.web-srv-0"), Some("WEB.SRV-0"));
    assert_eq!(param(&t, "disk.web-srv-0-3"), Some("web-srv-0"));
}

#[test]
fn alibaba_files_merge_in_time_order() {
    use IoKind::*;
    let dir = tempfile::tempdir().expect("tempdir");
    let files = [
        fixtures().join("alibaba-a.csv"),
        fixtures().join("alibaba-b.csv"),
    ];
    let (report, t) =
        import(dir.path(), Fmt::Alibaba(None), &files, Policy::default()).expect("import");
    assert_eq!(report.events, 6);
    // Equal times: the file named first goes first.
    assert_eq!(
        rows(&t),
        [
            row(0, "dev-3", Read, 1_048_576, 512, None),
            row(526_000, "dev-1", Read, 126_703_644_672, 4096, None),
            row(800_000, "dev-2", Write, 0, 8192, None),
            row(800_000, "dev-2", Read, 8192, 4096, None),
            row(1_900_000, "dev-1", Write, 4096, 4096, None),
            row(4_900_000, "dev-1", Read, 0, 4096, None),
        ]
    );
    assert_eq!(
        volumes(&t),
        [
            ("dev-1".to_owned(), 126_704_680_960),
            ("dev-2".to_owned(), 1 << 20),
            ("dev-3".to_owned(), 2 << 20),
        ]
    );
    assert_eq!(param(&t, "origin"), Some("2019-12-31T16:00:00.0001Z"));
    let p = &t.header.provenance;
    assert_eq!(p.source_format.as_deref(), Some("alibaba-block-csv"));
    assert_eq!(p.source_files.len(), 2);
}

#[test]
fn alibaba_device_sizes_declare_volumes_and_bound_io() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sizes = fixtures().join("device_size.csv");
    let files = [
        fixtures().join("alibaba-a.csv"),
        fixtures().join("alibaba-b.csv"),
    ];
    let (report, t) = import(
        dir.path(),
        Fmt::Alibaba(Some(&sizes)),
        &files,
        Policy::default(),
    )
    .expect("import");
    assert_eq!(report.events, 6);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert_eq!(
        volumes(&t),
        [
            ("dev-1".to_owned(), 536_870_912_000),
            ("dev-2".to_owned(), 1 << 30),
            ("dev-3".to_owned(), 2 << 20),
        ]
    );
    assert_eq!(
        param(&t, "device_sizes"),
        Some(sizes.display().to_string().as_str())
    );

    // Without a header line too; an unlisted device falls back to its extent, with a warning.
    let sizes2 = write(
        dir.path(),
        "sizes.csv",
        "1,536870912000\r\n\n2,1073741824\n",
    );
    let (report, t) = import(
        dir.path(),
        Fmt::Alibaba(Some(&sizes2)),
        &files,
        Policy::default(),
    )
    .expect("import");
    assert_eq!(volumes(&t)[2], ("dev-3".to_owned(), 2 << 20));
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert!(report.warnings[0].starts_with("1 devices are not in the device_size file"));

    // An I/O past the capacity is bad input.
    let f = write(
        dir.path(),
        "past.csv",
        "3,R,0,512,10\n3,W,2097152,512,20\n3,R,512,512,30\n",
    );
    let err = import(
        dir.path(),
        Fmt::Alibaba(Some(&sizes)),
        std::slice::from_ref(&f),
        Policy::default(),
    )
    .expect_err("past capacity");
    assert_eq!(
        err.to_string(),
        format!(
            "{}:2: column 4 (length): offset + length = 2097664 is beyond device 3's capacity \
             of 2097152 bytes (device_size.csv)",
            f.display()
        )
    );
    let (report, t) =
        import(dir.path(), Fmt::Alibaba(Some(&sizes)), &[f], skipping()).expect("skip");
    assert_eq!((report.skipped, t.events.len()), (1, 2));
}

#[test]
fn alibaba_bad_device_size_lines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(dir.path(), "io.csv", "1,R,0,512,10\n");
    let cases: &[(&str, &str)] = &[
        (
            "0,4096\n1,x\n",
            "2: column 2 (capacity): \"x\" is not a non-negative integer",
        ),
        (
            "0,4096\n1,5,6\n",
            "2: line: expected 2 comma-separated fields (device_id,capacity), found 3",
        ),
        ("0,4096\n1,0\n", "2: column 2 (capacity): capacity is 0"),
        (
            "0,4096\n7,1\n0,4096\n",
            "3: column 1 (device_id): device 0 is listed twice",
        ),
    ];
    for (i, (bad, expected)) in cases.iter().enumerate() {
        let sizes = write(dir.path(), &format!("s{i}.csv"), bad);
        let err = import(
            dir.path(),
            Fmt::Alibaba(Some(&sizes)),
            std::slice::from_ref(&f),
            Policy::default(),
        )
        .expect_err(bad);
        assert_eq!(err.to_string(), format!("{}:{expected}", sizes.display()));
        let (report, _) = import(
            dir.path(),
            Fmt::Alibaba(Some(&sizes)),
            std::slice::from_ref(&f),
            skipping(),
        )
        .expect(bad);
        assert_eq!(report.skipped, 1, "{bad}");
    }
}

#[test]
fn tencent_spreads_each_second() {
    use IoKind::*;
    let dir = tempfile::tempdir().expect("tempdir");
    let f = fixtures().join("tencent.csv");
    let (report, t) = import(dir.path(), Fmt::Tencent, &[f], Policy::default()).expect("import");
    assert_eq!(report.events, 4);
    assert_eq!(
        rows(&t),
        [
            row(0, "vol-1063", Read, 0, 4096, None),
            row(333_333_333, "vol-1063", Write, 4096, 4096, None),
            row(666_666_666, "vol-1064", Read, 51_200, 8192, None),
            row(1_000_000_000, "vol-1063", Write, 0, 512, None),
        ]
    );
    assert_eq!(
        volumes(&t),
        [
            ("vol-1063".to_owned(), 1 << 20),
            ("vol-1064".to_owned(), 1 << 20)
        ]
    );
    assert_eq!(param(&t, "origin"), Some("2018-09-30T16:00:00Z"));
    assert_eq!(
        t.header.provenance.source_format.as_deref(),
        Some("tencent-cbs-csv")
    );
}

#[test]
fn tencent_spreads_per_file_and_merges() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = write(
        dir.path(),
        "a.csv",
        "100,0,1,0,1\n100,1,1,0,1\n102,2,1,0,1\n",
    );
    let b = write(
        dir.path(),
        "b.csv",
        "100,0,1,1,2\n101,0,1,1,2\n101,1,1,1,2\n101,2,1,1,2\n",
    );
    let (_, t) = import(dir.path(), Fmt::Tencent, &[a, b], Policy::default()).expect("import");
    let got: Vec<(u64, String)> = rows(&t).into_iter().map(|r| (r.0, r.1)).collect();
    let want: Vec<(u64, String)> = [
        (0, "vol-1"),
        (0, "vol-2"),
        (500_000_000, "vol-1"),
        (1_000_000_000, "vol-2"),
        (1_333_333_333, "vol-2"),
        (1_666_666_666, "vol-2"),
        (2_000_000_000, "vol-1"),
    ]
    .into_iter()
    .map(|(a, v)| (a, v.to_owned()))
    .collect();
    assert_eq!(got, want);
}

/// Each kind of bad line: its located message; `skip_bad` counts it and imports the rest.
#[test]
fn bad_lines_are_located_and_skippable() {
    let msr_cols = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime";
    let max = "18446744073709551615";
    let msr: Vec<(String, String)> = vec![
        (
            "200,h,0,Read,0,4096".into(),
            format!("line: expected 7 comma-separated fields ({msr_cols}), found 6"),
        ),
        (
            "x,h,0,Read,0,4096,1".into(),
            "column 1 (Timestamp): \"x\" is not a non-negative integer".into(),
        ),
        (
            "200,,0,Read,0,4096,1".into(),
            "column 2 (Hostname): empty Hostname".into(),
        ),
        (
            "200,h,zero,Read,0,4096,1".into(),
            "column 3 (DiskNumber): \"zero\" is not a non-negative integer".into(),
        ),
        (
            "200,h,0,Trim,0,4096,1".into(),
            "column 4 (Type): unknown Type \"Trim\", expected Read or Write".into(),
        ),
        (
            "200,h,0,Read,-1,4096,1".into(),
            "column 5 (Offset): \"-1\" is not a non-negative integer".into(),
        ),
        (
            format!("200,h,0,Read,{max},1,1"),
            "column 6 (Size): offset + Size overflows 64 bits".into(),
        ),
        (
            "200,h,0,Read,0,0,1".into(),
            "column 6 (Size): Size is 0 (a request of 0 bytes)".into(),
        ),
        (
            format!("{max},h,0,Read,0,1,1"),
            "column 1 (Timestamp): time in nanoseconds overflows 64 bits".into(),
        ),
        (
            format!("200,h,0,Read,0,1,{max}"),
            "column 7 (ResponseTime): response time in nanoseconds overflows 64 bits".into(),
        ),
        (
            "50,h,0,Read,0,1,1".into(),
            "column 1 (Timestamp): time goes backwards within this file (50 after 100); each \
             input file must be sorted by time"
                .into(),
        ),
    ];
    let alibaba: Vec<(String, String)> = vec![
        (
            "1,X,0,4096,200".into(),
            "column 2 (opcode): unknown opcode \"X\", expected R or W".into(),
        ),
        (
            "1,R,0,4096".into(),
            "line: expected 5 comma-separated fields (device_id,opcode,offset,length,timestamp), \
             found 4"
                .into(),
        ),
        (
            "1,R,0,4096,1.5".into(),
            "column 5 (timestamp): \"1.5\" is not a non-negative integer".into(),
        ),
        (
            format!("1,R,0,4096,{max}"),
            "column 5 (timestamp): time in nanoseconds overflows 64 bits".into(),
        ),
        (
            "1,R,0,4096,99".into(),
            "column 5 (timestamp): time goes backwards within this file (99 after 100); each \
             input file must be sorted by time"
                .into(),
        ),
    ];
    let tencent: Vec<(String, String)> = vec![
        (
            "200,0,8,2,1".into(),
            "column 4 (IOType): unknown IOType \"2\", expected 0 (read) or 1 (write)".into(),
        ),
        (
            "200,36028797018963968,8,0,1".into(),
            "column 2 (Offset): Offset in sectors × 512 overflows 64 bits".into(),
        ),
        (
            "200,0,36028797018963968,0,1".into(),
            "column 3 (Size): Size in sectors × 512 overflows 64 bits".into(),
        ),
        (
            "200,36028797018963967,2,0,1".into(),
            "column 3 (Size): offset + Size overflows 64 bits".into(),
        ),
        (
            "18446744073,0,8,0,1".into(),
            "column 1 (Timestamp): time in nanoseconds overflows 64 bits".into(),
        ),
        (
            "200,0,8,0,vol".into(),
            "column 5 (VolumeID): \"vol\" is not a non-negative integer".into(),
        ),
        (
            "99,0,8,0,1".into(),
            "column 1 (Timestamp): time goes backwards within this file (99 after 100); each \
             input file must be sorted by time"
                .into(),
        ),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let suites: [Suite<'_>; 3] = [
        (
            Fmt::Msr,
            "100,h,0,Read,0,4096,1",
            "300,h,0,Write,0,4096,1",
            &msr,
        ),
        (
            Fmt::Alibaba(None),
            "1,R,0,4096,100",
            "1,W,0,4096,300",
            &alibaba,
        ),
        (Fmt::Tencent, "100,0,8,0,1", "300,0,8,1,1", &tencent),
    ];
    for (s, (fmt, first, last, cases)) in suites.iter().enumerate() {
        let mut all = format!("{first}\n");
        for (i, (bad, expected)) in cases.iter().enumerate() {
            let f = write(
                dir.path(),
                &format!("bad{s}-{i}.csv"),
                &format!("{first}\n{bad}\n{last}\n"),
            );
            let err = import(
                dir.path(),
                *fmt,
                std::slice::from_ref(&f),
                Policy::default(),
            )
            .expect_err(bad);
            assert_eq!(err.to_string(), format!("{}:2: {expected}", f.display()));
            let (report, t) =
                import(dir.path(), *fmt, std::slice::from_ref(&f), skipping()).expect(bad);
            assert_eq!(
                (report.skipped, report.events, t.events.len()),
                (1, 2, 2),
                "{bad}"
            );
            assert_eq!(report.first_skipped[0].line, 2);
            // A skipped line does not widen the volume.
            assert_eq!(t.header.volumes.len(), 1, "{bad}");
            assert_eq!(t.header.volumes[0].size, Some(1 << 20), "{bad}");
            all.push_str(bad);
            all.push('\n');
        }
        // All at once, plus non-UTF-8: every one counted, the first five kept.
        let mut bytes = all.into_bytes();
        bytes.extend_from_slice(b"\xff,1\n");
        bytes.extend_from_slice(format!("{last}\n").as_bytes());
        let f = dir.path().join(format!("all{s}.csv"));
        std::fs::write(&f, bytes).expect("write");
        let (report, t) = import(
            dir.path(),
            *fmt,
            std::slice::from_ref(&f),
            Policy {
                skip_bad: true,
                keep_first: 5,
            },
        )
        .expect("skip all");
        assert_eq!(report.skipped as usize, cases.len() + 1);
        assert_eq!(report.first_skipped.len(), 5);
        assert_eq!(t.events.len(), 2);
        let err = import(
            dir.path(),
            *fmt,
            std::slice::from_ref(&f),
            Policy::default(),
        )
        .expect_err("strict");
        assert!(
            err.to_string().starts_with(&format!("{}:2: ", f.display())),
            "{err}"
        );
    }
    let f = dir.path().join("utf8.csv");
    std::fs::write(&f, b"1,R,0,4096,100\n\xff,R\n").expect("write");
    let err = import(dir.path(), Fmt::Alibaba(None), &[f], Policy::default()).expect_err("utf8");
    assert!(
        err.to_string()
            .contains("utf8.csv:2: line: not UTF-8 text: "),
        "{err}"
    );
}

#[test]
fn empty_and_missing_inputs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(dir.path(), "empty.csv", "\n\r\n");
    let (report, t) = import(dir.path(), Fmt::Tencent, &[f], Policy::default()).expect("empty");
    assert_eq!(report.events, 0);
    assert!(t.header.volumes.is_empty());
    assert_eq!(param(&t, "origin"), None);
    let err = import(
        dir.path(),
        Fmt::Msr,
        &[dir.path().join("missing.csv")],
        Policy::default(),
    )
    .expect_err("missing");
    assert!(matches!(err, ImportError::Io(_)), "{err}");
}

/// A UTF-8 byte-order mark and a line of column names (as some MSR copies have) do not stop
/// an import: the events are those of the bare file, and the report says the names line was
/// skipped. A names line anywhere else is still a bad line.
#[test]
fn a_bom_and_a_column_names_line_are_read_past() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bare =
        "128166372003061629,src1,0,Read,0,4096,10\n128166372003061639,src1,0,Write,4096,4096,10\n";
    let f = write(dir.path(), "bare.csv", bare);
    let (_, want) = import(dir.path(), Fmt::Msr, &[f], Policy::default()).expect("import");
    let g = write(
        dir.path(),
        "named.csv",
        &format!("\u{feff}Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\r\n{bare}"),
    );
    let (report, got) = import(dir.path(), Fmt::Msr, &[g], Policy::default()).expect("import");
    assert_eq!(got.events, want.events);
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("named.csv:1: a line of column names")),
        "{:?}",
        report.warnings
    );
    let h = write(
        dir.path(),
        "late.csv",
        &format!("{bare}Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n"),
    );
    assert!(import(dir.path(), Fmt::Msr, &[h], Policy::default()).is_err());
}
