//! Fuzzes the pod lifecycle CSV reader (see import_common.rs).
#![no_main]

#[path = "import_common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    for p in common::policies() {
        let Ok((lifetimes, _)) = import::pods::read_lifetimes_from("fuzz", data, &p) else {
            continue;
        };
        let t = import::pods::lifetimes_trace(&lifetimes, "fuzz");
        let bytes = t.to_bytes(trace_format::Encoding::Binary).expect("encode");
        common::check(&bytes, t.events.len() as u64);
    }
});
