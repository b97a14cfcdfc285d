//! Fuzzes the CSI driver's persisted state: `state.json` and the `ops.jsonl` call log. Errors
//! are fine (they name the file and line); panics are not, and a state that loads must save
//! and load back unchanged.
#![no_main]

use csi_driver::state::{State, parse_ops};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(state) = serde_json::from_slice::<State>(data) {
        let text = serde_json::to_string(&state).expect("a loaded state serializes");
        let back: State = serde_json::from_str(&text).expect("our own state loads");
        assert!(back == state, "state changed in a save/load round trip");
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_ops(text, "fuzz/ops.jsonl");
    }
});
