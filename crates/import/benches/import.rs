//! Importer throughput: each text importer on ≥ 100 000 generated lines held in memory,
//! writing binary traces to a sink, one thread. `Throughput::Elements` is events written, so
//! criterion reports events/s (blkparse reads two lines, D and C, per event).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use import::audit::AuditOptions;
use import::{ImportError, ImportReport, Policy, Source, testgen};
use trace_format::{Encoding, Header, TraceWriter};

const N: u64 = 100_000;

/// A writer factory that encodes to nowhere.
fn sink() -> impl FnOnce(Header) -> Result<TraceWriter, trace_format::Error> {
    |h: Header| TraceWriter::new(std::io::sink(), Encoding::Binary, &h)
}

fn bench_one(
    c: &mut Criterion,
    name: &str,
    text: &str,
    import: impl Fn(&Source) -> Result<ImportReport, ImportError>,
) {
    let src = Source::bytes(name, text.as_bytes());
    let events = import(&src).expect("import").events;
    let mut g = c.benchmark_group("import");
    g.throughput(Throughput::Elements(events));
    g.sample_size(10);
    g.bench_function(name, |b| {
        b.iter(|| black_box(import(&src).expect("import")));
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    let p = Policy::default();
    bench_one(c, "fio", &testgen::fio_v3(N), |s| {
        import::fio::import_fio_source(s, p, sink())
    });
    bench_one(c, "blkparse", &testgen::blkparse(N), |s| {
        import::blk::import_blkparse_source(s, p, sink())
    });
    bench_one(c, "msr", &testgen::msr(N), |s| {
        import::blockcsv::import_msr_sources(std::slice::from_ref(s), p, sink())
    });
    bench_one(c, "alibaba", &testgen::alibaba(N), |s| {
        import::blockcsv::import_alibaba_sources(std::slice::from_ref(s), None, p, sink())
    });
    bench_one(c, "tencent", &testgen::tencent(N), |s| {
        import::blockcsv::import_tencent_sources(std::slice::from_ref(s), p, sink())
    });
    // The streaming import (reorder window, attach enrichment, spool), lines per second: a
    // log of storage requests only (~16.4 lines per cycle), and one where they are ~10 % of the
    // lines as in a real API server's log (150 Metadata-level reads, watches and status
    // writes per cycle).
    for (name, noise) in [
        ("audit, storage only (lines)", 0),
        ("audit, 10 % storage (lines)", 150),
    ] {
        let log = testgen::audit_log_with_noise(N / (16 + noise) + 1, noise);
        let lines = log.lines().count() as u64;
        assert!(lines >= N, "{lines} lines");
        let src = Source::bytes("audit.log", log.as_bytes());
        let import = || {
            import::audit::import_audit_sources(
                std::slice::from_ref(&src),
                AuditOptions::default(),
                p,
                sink(),
            )
            .expect("import")
        };
        let mut g = c.benchmark_group("import");
        g.throughput(Throughput::Elements(lines));
        g.sample_size(10);
        g.bench_function(name, |b| b.iter(|| black_box(import())));
        g.finish();
    }
}

criterion_group!(import_benches, benches);
criterion_main!(import_benches);
