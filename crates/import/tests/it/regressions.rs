//! Regression tests for what the fuzz targets found (fuzz/README.md): each import must either
//! fail with a located problem or produce a trace the checker accepts.

use std::io::Cursor;

use import::blk::{Endian, Phase, RawRecord};
use import::{ImportError, ImportReport, Policy, Source};
use trace_format::{Encoding, Header, IoKind, TraceReader, TraceWriter};

/// Runs an import into memory and returns the report and the checker's problem count.
fn run(
    import: impl FnOnce(
        Box<dyn FnOnce(Header) -> Result<TraceWriter, trace_format::Error>>,
    ) -> Result<ImportReport, ImportError>,
) -> Result<(ImportReport, u64), ImportError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.jsonl");
    let o = out.clone();
    let report = import(Box::new(move |h| {
        TraceWriter::create(&o, Some(Encoding::Jsonl), &h)
    }))?;
    let r = trace_format::check_trace(TraceReader::open(&out).expect("open"), "out", 4, |_| {})
        .expect("check");
    Ok((report, r.problems))
}

/// fuzz import_fio: `write OFFSET 0` produced a 0-byte write.
#[test]
fn fio_zero_length_is_bad_input() {
    let src = Source::bytes(
        "z.iolog",
        b"fio version 3 iolog\n1 f add\n2 f write 0 0\n3 f read 0 512\n",
    );
    let e = run(|f| import::fio::import_fio_source(&src, Policy::default(), f)).expect_err("bad");
    assert_eq!(
        e.to_string(),
        "z.iolog:3: length: length is 0 (a request of 0 bytes)"
    );
    let skip = Policy {
        skip_bad: true,
        keep_first: 5,
    };
    let (report, problems) = run(|f| import::fio::import_fio_source(&src, skip, f)).expect("skip");
    assert_eq!((report.events, report.skipped, problems), (1, 1, 0));
}

/// fuzz import_blkparse: a data RWBS without `+ N` produced a 0-byte write; it is a flush
/// when flagged F (a preflush, `FWS`), else nothing.
#[test]
fn blkparse_dataless_write_is_a_flush_or_nothing() {
    let text = "  8,0  0  1  0.000000000  1  D FWS [kworker]\n  8,0  0  2  0.000001000  1  C FWS [0]\n\
                  8,0  0  3  0.000002000  1  D  WS [kworker]\n  8,0  0  4  0.000003000  1  D  W 18446744073709551615 + 8 [x]\n";
    let src = Source::bytes("p.txt", text.as_bytes());
    let e = run(|f| import::blk::import_blkparse_source(&src, Policy::default(), f))
        .expect_err("overflow");
    assert!(
        e.to_string()
            .starts_with("p.txt:4: sector: sector 18446744073709551615"),
        "{e}"
    );
    let skip = Policy {
        skip_bad: true,
        keep_first: 5,
    };
    let (report, problems) =
        run(|f| import::blk::import_blkparse_source(&src, skip, f)).expect("skip");
    assert_eq!((report.events, problems), (1, 0), "{report:?}");
}

/// fuzz import_blktrace: a sector near 2^64 made offset + length overflow.
#[test]
fn blktrace_overflowing_sector_produces_no_event() {
    let recs = [
        RawRecord::request(
            Phase::Issue,
            0,
            10,
            (8, 0),
            IoKind::Write,
            u64::MAX / 256,
            4096,
        ),
        RawRecord::request(Phase::Issue, 0, 20, (8, 0), IoKind::Write, 0, 0),
        RawRecord::request(Phase::Issue, 0, 30, (8, 0), IoKind::Read, 8, 4096),
    ];
    let bytes: Vec<u8> = recs.iter().flat_map(|r| r.encode(Endian::Little)).collect();
    let src = [Source::bytes("x.blktrace.0", &bytes)];
    let (report, problems) =
        run(|f| import::blk::import_blktrace_sources(&src, Policy::default(), f)).expect("ok");
    assert_eq!((report.events, problems), (1, 0));
    assert!(
        report.warnings.iter().any(|w| w.contains("beyond 2^64")),
        "{:?}",
        report.warnings
    );
}

#[test]
fn audit_reader_accepts_any_bytes() {
    for data in [
        &b"\xff\xfe"[..],
        b"{",
        b"[]",
        b"{}",
        b"{\"records\":5}",
        b"{\"stage\":1}",
    ] {
        let _ = import::audit::read_audit(
            vec![("a".to_owned(), Cursor::new(data))],
            import::audit::AuditOptions::default(),
            Policy {
                skip_bad: true,
                keep_first: 5,
            },
        )
        .expect("skipping never fails on content");
    }
}

/// fuzz import_audit: an `Event` without `stage` was counted as read but in no category.
#[test]
fn audit_counts_add_up_with_bad_events() {
    let log = "{\"kind\":\"Event\",\"verb\":\"create\"}\n\
               {\"kind\":\"Event\",\"stage\":\"ResponseComplete\",\"verb\":\"delete\",\"objectRef\":{\"resource\":\"pods\",\"name\":\"p\"},\"requestReceivedTimestamp\":\"soon\"}\n\
               {\"kind\":\"Event\",\"stage\":\"RequestReceived\"}\n";
    let imp = import::audit::read_audit(
        vec![("a".to_owned(), Cursor::new(log))],
        import::audit::AuditOptions::default(),
        Policy {
            skip_bad: true,
            keep_first: 5,
        },
    )
    .expect("skip");
    let c = &imp.counts;
    assert_eq!((c.events, imp.report.skipped), (1, 2));
    assert_eq!(c.ignored() + c.mapped, c.events);
}
