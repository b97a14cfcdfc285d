//! Fuzzes what iogen and the providers parse from outside: HdrHistogram interval logs (the
//! kube provider reads them from iogen pods' logs and splits them by snapshot overlap), the
//! `io_phase` snippet and sizes. Errors are fine; panics are not.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut flip = false;
    let _ = iogen::split_responses(data, |start, len| {
        flip = !flip;
        start.is_finite() && len.is_finite() && flip
    });
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = iogen::parse_phase_snippet(text);
        let _ = iogen::parse_size(text);
    }
});
