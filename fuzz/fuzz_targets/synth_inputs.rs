//! Fuzzes synth's inputs: the model file (YAML), the observations CSV of `synth fit` and
//! rates. Errors are fine (they name the file, line and field); panics are not.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = synth::Model::parse(&text, "fuzz.yaml");
    let _ = synth::data::parse_csv(std::io::Cursor::new(data), "fuzz.csv");
    let _ = synth::model::parse_rate(&text);
});
