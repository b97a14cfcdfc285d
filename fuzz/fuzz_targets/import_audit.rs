//! Fuzzes the Kubernetes audit log importer (see import_common.rs): the input as one file,
//! and split at its middle line into two files merged by time.
#![no_main]

#[path = "import_common.rs"]
mod common;

use import::audit::{AuditOptions, read_audit};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mid = data[..data.len() / 2]
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    let splits: [Vec<&[u8]>; 2] = [vec![data], vec![&data[..mid], &data[mid..]]];
    for files in &splits {
        for p in common::policies() {
            for keep_failed in [false, true] {
                let src = files
                    .iter()
                    .enumerate()
                    .map(|(i, f)| (format!("fuzz{i}"), std::io::Cursor::new(*f)))
                    .collect();
                let opts = AuditOptions {
                    keep_failed,
                    ..AuditOptions::default()
                };
                let Ok(imp) = read_audit(src, opts, p) else {
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
    }
});
