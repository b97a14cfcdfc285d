//! Fuzzes the msr CSV importer (see import_common.rs).
#![no_main]

#[path = "import_common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    for p in common::policies() {
        common::run(|f| import::blockcsv::import_msr_sources(&[common::source(data)], p, f));
    }
});
