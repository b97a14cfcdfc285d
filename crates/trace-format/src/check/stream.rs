//! The checker in a tool's own pass: every event goes through [`Checker`] before the tool sees
//! it (or before it is written), and the first problem ends the stream with `validate`'s
//! located diagnostic.
//!
//! The trace tools (`slice`, `rewrite`, `split`, `convert`) write what they read: a trace
//! with a problem would come out with the same problem, or a worse one (a slice that dropped
//! an event out of time order). [`Checked`] wraps their event iterator, so the check costs
//! no extra pass over a large trace and an error before the output is committed leaves
//! nothing. [`EventCheck`] is the same check for a writer whose events are made, not read
//! (an importer's output).

use super::{Checker, Finding};
use crate::error::{Diagnostic, Error, Location};
use crate::model::{Event, Header};

/// Checks events one by one, in file order; the first problem is an error.
#[derive(Debug)]
pub struct EventCheck {
    checker: Checker,
    file: String,
    index: u64,
    findings: Vec<Finding>,
}

impl EventCheck {
    /// Starts from `header`; a problem in it is an error. `file` names the trace in messages.
    pub fn new(header: &Header, file: impl Into<String>) -> Result<Self, Error> {
        let file = file.into();
        let (checker, findings) = Checker::new(header);
        if let Some(f) = findings.into_iter().next() {
            return Err(Diagnostic {
                file,
                location: Location::default(),
                path: f.path,
                problem: f.problem,
            }
            .into());
        }
        Ok(Self {
            checker,
            file,
            index: 0,
            findings: Vec::new(),
        })
    }

    /// Checks the next event, read at `location` (its record index when the location has
    /// none); its first problem is an error.
    pub fn event(&mut self, ev: &Event, location: Location) -> Result<(), Error> {
        self.findings.clear();
        self.checker.check(ev, self.index, &mut self.findings);
        let index = self.index;
        self.index += 1;
        match self.findings.drain(..).next() {
            None => Ok(()),
            Some(f) => Err(Diagnostic {
                file: self.file.clone(),
                location: Location {
                    record: location.record.or(Some(index)),
                    ..location
                },
                path: f.path,
                problem: f.problem,
            }
            .into()),
        }
    }

    /// Events checked so far.
    pub fn events(&self) -> u64 {
        self.index
    }
}

/// An event stream whose events have passed the checker: the first problem (or read error)
/// is its last item. Made with [`Checked::new`], or [`Checked::unchecked`] for a trace the
/// user checked already (`--no-check`).
#[derive(Debug)]
pub struct Checked<I> {
    inner: I,
    check: Option<EventCheck>,
    done: bool,
}

impl<I> Checked<I>
where
    I: Iterator<Item = Result<(Event, Location), Error>>,
{
    /// Checks `inner`, the events of a trace with `header` named `file`; a problem in the
    /// header is an error at once.
    pub fn new(header: &Header, inner: I, file: impl Into<String>) -> Result<Self, Error> {
        Ok(Self {
            inner,
            check: Some(EventCheck::new(header, file)?),
            done: false,
        })
    }

    /// Passes `inner` on as it is.
    pub fn unchecked(inner: I) -> Self {
        Self {
            inner,
            check: None,
            done: false,
        }
    }

    /// Drops locations: an iterator of plain events.
    pub fn events(self) -> impl Iterator<Item = Result<Event, Error>> {
        self.map(|r| r.map(|(e, _)| e))
    }
}

impl<I> Iterator for Checked<I>
where
    I: Iterator<Item = Result<(Event, Location), Error>>,
{
    type Item = Result<(Event, Location), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.inner.next()?;
        let item = match (item, &mut self.check) {
            (Ok((ev, loc)), Some(c)) => c.event(&ev, loc).map(|()| (ev, loc)),
            (item, _) => item,
        };
        self.done = item.is_err();
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Problem;
    use crate::io::{Encoding, TraceReader};

    fn reader(text: &str) -> TraceReader {
        TraceReader::from_reader(
            std::io::Cursor::new(text.as_bytes().to_vec()),
            Some(Encoding::Jsonl),
            "t.jsonl",
        )
        .expect("header")
    }

    const TRACE: &str = r#"{"format":"cnsreplay-trace","version":1}
{"at":0,"id":1,"create_volume":{"volume":"v"}}
{"at":5,"id":2,"delete_volume":{"volume":"v"}}
{"at":6,"id":3,"io":{"volume":"v","kind":"read","offset":0,"len":4096}}
{"at":7,"id":4,"marker":{"name":"after"}}
"#;

    #[test]
    fn the_first_problem_ends_the_stream_located_as_validate_locates_it() {
        let r = reader(TRACE);
        let h = r.header().clone();
        let items: Vec<_> = Checked::new(&h, r, "t.jsonl").expect("header").collect();
        assert_eq!(items.len(), 3, "{items:?}");
        assert!(items[0].is_ok() && items[1].is_ok());
        let Err(Error::Invalid(d)) = &items[2] else {
            panic!("{:?}", items[2]);
        };
        assert_eq!(
            d.to_string(),
            "t.jsonl:4: events[2].io.volume: volume \"v\" was deleted at t=0.000000005s"
        );
        assert!(matches!(d.problem, Problem::Dangling { .. }));
        // The same trace unchecked: every event.
        let r = reader(TRACE);
        assert_eq!(Checked::unchecked(r).events().count(), 4);
    }

    #[test]
    fn time_order_and_the_header_are_checked() {
        let text = TRACE.replace(r#""at":7"#, r#""at":1"#).replace(
            r#"{"at":6,"id":3,"io":{"volume":"v","kind":"read","offset":0,"len":4096}}
"#,
            "",
        );
        let r = reader(&text);
        let h = r.header().clone();
        let last = Checked::new(&h, r, "t.jsonl")
            .expect("header")
            .events()
            .last()
            .expect("items");
        let Err(Error::Invalid(d)) = last else {
            panic!("{last:?}")
        };
        assert!(matches!(d.problem, Problem::TimeInversion { .. }), "{d}");
        let bad = r#"{"format":"cnsreplay-trace","version":1,"defaults":{"volume_size":0}}
"#;
        let r = reader(bad);
        let h = r.header().clone();
        let e = Checked::new(&h, r, "t.jsonl").expect_err("zero default size");
        assert!(
            e.to_string()
                .contains("header.defaults.volume_size: the default volume size must not be 0"),
            "{e}"
        );
    }

    #[test]
    fn a_written_event_is_checked_against_what_came_before() {
        let r = reader(TRACE);
        let h = r.header().clone();
        let mut c = EventCheck::new(&h, "out").expect("header");
        let evs: Vec<Event> = r.events().map(|e| e.expect("event")).collect();
        c.event(&evs[0], Location::default()).expect("create");
        c.event(&evs[1], Location::default()).expect("delete");
        let e = c.event(&evs[2], Location::default()).expect_err("io");
        let Error::Invalid(d) = e else { panic!() };
        assert_eq!(d.location.record, Some(2));
        assert_eq!(c.events(), 3);
        // The same through a checking writer (an importer's): the event is not written.
        let mut w = crate::io::TraceWriter::new(std::io::sink(), Encoding::Jsonl, &h)
            .and_then(|w| w.checking(&h, "imported"))
            .expect("writer");
        w.write(&evs[0]).expect("create");
        w.write(&evs[1]).expect("delete");
        let e = w.write(&evs[2]).expect_err("io");
        assert_eq!(
            e.to_string(),
            "imported: events[2].io.volume: volume \"v\" was deleted at t=0.000000005s"
        );
    }
}
