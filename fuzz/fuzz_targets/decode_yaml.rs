//! Fuzzes the yaml trace decoder and checker (see common.rs).
#![no_main]

#[path = "common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::decode(data, trace_format::Encoding::Yaml));
