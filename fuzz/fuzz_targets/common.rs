//! The body shared by the decoder targets: any bytes, decoded and checked in one encoding;
//! errors are fine, panics and hangs are not. A trace that decodes must re-encode and decode to
//! the same trace in every encoding.

use trace_format::{Encoding, Trace, TraceReader, check::check_trace};

pub fn decode(data: &[u8], encoding: Encoding) {
    let Ok(reader) =
        TraceReader::from_reader(std::io::Cursor::new(data.to_vec()), Some(encoding), "fuzz")
    else {
        return;
    };
    let _ = check_trace(reader, "fuzz", 16, |_| {});
    if let Ok(t) = Trace::from_bytes(data, Some(encoding)) {
        for enc in Encoding::ALL {
            let bytes = t.to_bytes(enc).expect("encoding a decoded trace");
            let back = Trace::from_bytes(&bytes, Some(enc)).expect("decoding our own output");
            assert!(back == t, "{enc} round trip changed the trace");
        }
    }
}
