#![allow(dead_code)]
//! The body shared by the importer targets: any bytes imported in memory; errors are fine,
//! panics and hangs are not. A successful import must produce a trace that the checker
//! accepts and whose event count matches the report.

use std::io::Write;
use std::sync::{Arc, Mutex};

use import::{ImportError, ImportReport, Policy, Source};
use trace_format::{Encoding, Header, TraceReader, TraceWriter, check::check_trace};

/// A `Write` into a shared vector, so the importer can own the writer.
#[derive(Clone, Default)]
pub struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub fn source(data: &[u8]) -> Source {
    Source::bytes("fuzz", data)
}

/// Both policies: stop at the first bad line, and skip bad lines.
pub fn policies() -> [Policy; 2] {
    [
        Policy::default(),
        Policy {
            skip_bad: true,
            keep_first: 5,
        },
    ]
}

/// Runs `import` with a binary writer and checks what it wrote.
pub fn run(
    import: impl FnOnce(
        Box<dyn FnOnce(Header) -> Result<TraceWriter, trace_format::Error>>,
    ) -> Result<ImportReport, ImportError>,
) {
    let buf = Buf::default();
    let w = buf.clone();
    let factory = Box::new(move |h: Header| TraceWriter::new(w, Encoding::Binary, &h));
    let Ok(report) = import(factory) else { return };
    let bytes = buf.0.lock().unwrap().clone();
    check(&bytes, report.events);
}

/// Asserts that an encoded trace validates and has `events` events.
pub fn check(bytes: &[u8], events: u64) {
    let reader = TraceReader::from_reader(std::io::Cursor::new(bytes.to_vec()), None, "out")
        .expect("our own output decodes");
    let r = check_trace(reader, "out", 4, |_| {}).expect("our own output reads");
    assert_eq!(
        r.problems, 0,
        "imported trace is invalid: {:?}",
        r.diagnostics
    );
    assert_eq!(r.events, events, "report and trace disagree");
}
