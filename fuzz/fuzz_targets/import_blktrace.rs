//! Fuzzes the blktrace binary importer (see import_common.rs): the bytes are split in two
//! per-CPU files at the first byte's position, so merging is exercised too, and read whole as
//! one stream of every CPU (`blktrace -o -`), split by each record's CPU.
#![no_main]

#[path = "import_common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let cut = data
        .first()
        .map_or(0, |b| usize::from(*b) * 48)
        .min(data.len());
    let (a, b) = data.split_at(cut);
    let files = [
        import::Source::bytes("fuzz.blktrace.0", a),
        import::Source::bytes("fuzz.blktrace.1", b),
    ];
    let stream = import::Source::bytes("fuzz", data);
    for p in common::policies() {
        common::run(|f| import::blk::import_blktrace_sources(&files, p, f));
        common::run(|f| import::blk::import_blktrace_stream(&stream, p, f));
    }
});
