//! JSON Lines: the header object on the first line, then one event object per line.
//!
//! The canonical text form. Lines are read one at a time into a reused buffer, so memory stays
//! constant however long the trace is. Blank lines are allowed and skipped (they still count
//! for line numbers). A malformed line is reported and reading continues with the next line,
//! so one pass finds every bad line.

use std::io::{BufRead, Write};

use crate::error::{Diagnostic, Error, Location, Problem};
use crate::model::{Event, Header};
use crate::serde_impl::PartialEvent;
use crate::text::{TextError, event_from_json, header_from_json};

pub(crate) struct JsonlReader<R> {
    r: R,
    file: String,
    line: u64,
    index: u64,
    buf: Vec<u8>,
}

impl<R: BufRead> JsonlReader<R> {
    pub(crate) fn new(r: R, file: String) -> Self {
        Self {
            r,
            file,
            line: 0,
            index: 0,
            buf: Vec::with_capacity(256),
        }
    }

    fn diag(&self, record: Option<u64>, e: TextError) -> Diagnostic {
        let mut path = e.path;
        if let Some(col) = e.column.filter(|c| *c > 0) {
            path = if path.is_empty() {
                format!("column {col}")
            } else {
                format!("{path} (column {col})")
            };
        }
        Diagnostic {
            file: self.file.clone(),
            location: Location {
                line: Some(self.line),
                record,
                byte: None,
            },
            path,
            problem: e.problem,
        }
    }

    /// Reads the next non-blank line into `buf`; false at end of input.
    fn next_line(&mut self) -> Result<bool, Error> {
        loop {
            self.buf.clear();
            if self.r.read_until(b'\n', &mut self.buf)? == 0 {
                return Ok(false);
            }
            self.line += 1;
            // A UTF-8 byte-order mark (editors on Windows write one) is not part of the JSON.
            if self.line == 1 && self.buf.starts_with(b"\xEF\xBB\xBF") {
                self.buf.drain(..3);
            }
            if !self.buf.iter().all(u8::is_ascii_whitespace) {
                return Ok(true);
            }
        }
    }

    pub(crate) fn read_header(&mut self) -> Result<Header, Error> {
        if !self.next_line()? {
            return Err(Diagnostic {
                file: self.file.clone(),
                location: Location::default(),
                path: "header".into(),
                problem: Problem::NotATrace("the file is empty".into()),
            }
            .into());
        }
        header_from_json(&self.buf).map_err(|e| self.diag(None, e).into())
    }

    /// The next event with its location, a located problem, or `None` at the end.
    pub(crate) fn next_event(&mut self) -> Option<Result<(PartialEvent, Location), Error>> {
        match self.next_line() {
            Err(e) => return Some(Err(e)),
            Ok(false) => return None,
            Ok(true) => {}
        }
        let index = self.index;
        self.index += 1;
        let loc = Location {
            line: Some(self.line),
            record: Some(index),
            byte: None,
        };
        Some(
            event_from_json(&self.buf, index)
                .map(|e| (e, loc))
                .map_err(|e| self.diag(Some(index), e).into()),
        )
    }
}

pub(crate) struct JsonlWriter<W> {
    w: W,
}

impl<W: Write> JsonlWriter<W> {
    /// Flushes what is written so far to the sink.
    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }

    pub(crate) fn new(mut w: W, header: &Header) -> Result<Self, Error> {
        serde_json::to_writer(&mut w, header).map_err(std::io::Error::from)?;
        w.write_all(b"\n")?;
        Ok(Self { w })
    }

    pub(crate) fn write(&mut self, e: &Event) -> Result<(), Error> {
        serde_json::to_writer(&mut self.w, e).map_err(std::io::Error::from)?;
        self.w.write_all(b"\n")?;
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Result<W, Error> {
        self.w.flush()?;
        Ok(self.w)
    }
}
