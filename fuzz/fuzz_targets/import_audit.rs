//! Fuzzes the Kubernetes audit log importer (see import_common.rs).
#![no_main]

#[path = "import_common.rs"]
mod common;

use import::audit::{AuditOptions, read_audit};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    for p in common::policies() {
        for keep_failed in [false, true] {
            let src = vec![("fuzz".to_owned(), std::io::Cursor::new(data))];
            let Ok(imp) = read_audit(src, AuditOptions { keep_failed }, p) else {
                continue;
            };
            let bytes = imp
                .trace
                .to_bytes(trace_format::Encoding::Binary)
                .expect("encode");
            common::check(&bytes, imp.report.events);
            assert_eq!(imp.counts.ignored() + imp.counts.mapped, imp.counts.events);
        }
    }
});
