//! YAML: for hand-written traces and examples.
//!
//! A YAML trace is one mapping: the header fields first, then `events:`, a sequence of event
//! maps. The document is parsed by serde-saphyr's streaming deserializer on its own thread;
//! each event is handed over a bounded channel as soon as it is parsed, so memory stays
//! constant and the caller gets an ordinary pull iterator. Each event is first taken as a
//! generic value with its line (`Spanned`), then decoded: a bad event is reported with its line
//! and field path and reading goes on, as with JSON Lines. Only YAML syntax errors end the read.
//!
//! Writing is streamed too: the header is serialized once, then each event is serialized as
//! its own small document and indented under `events:`.

use std::io::{Read, Write};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::{fmt, thread};

use serde::Deserializer as _;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

use crate::error::{Diagnostic, Error, Location, Problem};
use crate::model::{Event, Header};
use crate::serde_impl::PartialEvent;
use crate::text::{TextError, from_value, header_from_value};

enum Msg {
    Header(Result<Header, Diagnostic>),
    Event(Result<(PartialEvent, Location), Diagnostic>),
    Fatal(Diagnostic),
}

pub(crate) struct YamlReader {
    rx: Receiver<Msg>,
    done: bool,
    /// The parsing thread, joined once it has said its last word (end or fatal error), so a
    /// reader read to its end leaves no thread behind. A reader dropped early closes the
    /// channel, which stops the thread at its next event, and joins it if it ends within
    /// 100 ms (always, for input in memory or in a file); otherwise (a pipe that has gone
    /// quiet) it is left to end by itself rather than hold up the caller.
    thread: Option<thread::JoinHandle<()>>,
}

impl Drop for YamlReader {
    fn drop(&mut self) {
        let Some(h) = self.thread.take() else {
            return;
        };
        let (_, closed) = sync_channel(0);
        drop(std::mem::replace(&mut self.rx, closed));
        let until = std::time::Instant::now() + std::time::Duration::from_millis(100);
        while !h.is_finished() && std::time::Instant::now() < until {
            thread::sleep(std::time::Duration::from_micros(200));
        }
        if h.is_finished() {
            let _ = h.join();
        }
    }
}

fn diag(file: &str, line: Option<u64>, record: Option<u64>, e: TextError) -> Diagnostic {
    Diagnostic {
        file: file.to_owned(),
        location: Location {
            line,
            record,
            byte: None,
        },
        path: e.path,
        problem: e.problem,
    }
}

fn options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    // A trace may hold millions of events; keep the depth and alias limits, lift the size ones.
    budget.max_reader_input_bytes = None;
    budget.max_events = usize::MAX;
    budget.max_nodes = usize::MAX;
    budget.max_total_scalar_bytes = usize::MAX;
    let mut o = serde_saphyr::Options::default();
    o.budget = Some(budget);
    o.with_snippet = false;
    o
}

impl YamlReader {
    pub(crate) fn spawn<R: Read + Send + 'static>(r: R, file: String) -> Result<Self, Error> {
        let (tx, rx) = sync_channel(1024);
        let handle = thread::Builder::new()
            .name("cnsreplay-yaml".into())
            .spawn(move || {
                let top = Top {
                    tx: &tx,
                    file: &file,
                };
                let res =
                    serde_saphyr::with_deserializer_from_reader_with_options(r, options(), |de| {
                        de.deserialize_map(top)
                    });
                if let Err(e) = res {
                    let msg = e.to_string();
                    if msg.contains(CANCELLED) {
                        return;
                    }
                    let line = e.location().map(|l| l.line()).filter(|l| *l > 0);
                    let _ = tx.send(Msg::Fatal(Diagnostic {
                        file,
                        location: Location {
                            line,
                            record: None,
                            byte: None,
                        },
                        path: String::new(),
                        problem: Problem::Syntax(msg),
                    }));
                }
            })?;
        Ok(Self {
            rx,
            done: false,
            thread: Some(handle),
        })
    }

    /// Joins the parsing thread, which has ended or is ending (it sent its fatal error, or
    /// closed the channel).
    fn join(&mut self) {
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }

    pub(crate) fn read_header(&mut self, file: &str) -> Result<Header, Error> {
        match self.rx.recv() {
            Ok(Msg::Header(h)) => h.map_err(Error::from),
            Ok(Msg::Fatal(d)) => {
                self.done = true;
                self.join();
                Err(d.into())
            }
            r @ (Ok(Msg::Event(_)) | Err(_)) => {
                self.done = true;
                if r.is_err() {
                    // The channel closed: the thread has ended.
                    self.join();
                }
                Err(Diagnostic {
                    file: file.to_owned(),
                    location: Location::default(),
                    path: "header".into(),
                    problem: Problem::NotATrace("no header could be read".into()),
                }
                .into())
            }
        }
    }

    pub(crate) fn next_event(&mut self) -> Option<Result<(PartialEvent, Location), Error>> {
        if self.done {
            return None;
        }
        match self.rx.recv() {
            Ok(Msg::Event(e)) => Some(e.map_err(Error::from)),
            Ok(Msg::Fatal(d)) => {
                self.done = true;
                self.join();
                Some(Err(d.into()))
            }
            Ok(Msg::Header(_)) => {
                self.done = true;
                None
            }
            Err(_) => {
                // The channel closed: the thread has ended.
                self.done = true;
                self.join();
                None
            }
        }
    }
}

const CANCELLED: &str = "cnsreplay: reader dropped";

struct Top<'a> {
    tx: &'a SyncSender<Msg>,
    file: &'a str,
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a trace: a mapping of header fields followed by `events`")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut fields = serde_json::Map::new();
        let mut header_sent = false;
        let send = |m: Msg| self.tx.send(m).map_err(|_| de::Error::custom(CANCELLED));
        while let Some(key) = map.next_key::<Spanned<String>>()? {
            let line = Some(key.referenced.line()).filter(|l| *l > 0);
            let key = key.value;
            if header_sent {
                return Err(de::Error::custom(format!(
                    "`{key}` comes after `events`; header fields must come before the events"
                )));
            }
            if key == "events" {
                let header =
                    header_from_value(serde_json::Value::Object(std::mem::take(&mut fields)))
                        .map_err(|e| diag(self.file, line, None, e));
                let ok = header.is_ok();
                send(Msg::Header(header))?;
                header_sent = true;
                if !ok {
                    return Err(de::Error::custom(CANCELLED));
                }
                map.next_value_seed(Events {
                    tx: self.tx,
                    file: self.file,
                })?;
            } else {
                let v: serde_json::Value = map.next_value()?;
                if fields.insert(key.clone(), v).is_some() {
                    return Err(de::Error::custom(format!("duplicate header field `{key}`")));
                }
            }
        }
        if !header_sent {
            let header = header_from_value(serde_json::Value::Object(fields))
                .map_err(|e| diag(self.file, None, None, e));
            send(Msg::Header(header))?;
        }
        Ok(())
    }
}

struct Events<'a> {
    tx: &'a SyncSender<Msg>,
    file: &'a str,
}

impl<'de> DeserializeSeed<'de> for Events<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Events<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence of events")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0u64;
        while let Some(item) = seq.next_element::<Spanned<serde_json::Value>>()? {
            let line = Some(item.referenced.line()).filter(|l| *l > 0);
            let loc = Location {
                line,
                record: Some(index),
                byte: None,
            };
            let ev = from_value::<PartialEvent>(item.value, &format!("events[{index}]"))
                .map(|e| (e, loc))
                .map_err(|e| diag(self.file, line, Some(index), e));
            self.tx
                .send(Msg::Event(ev))
                .map_err(|_| de::Error::custom(CANCELLED))?;
            index += 1;
        }
        Ok(())
    }
}

pub(crate) struct YamlWriter<W> {
    w: W,
    any: bool,
}

fn yaml_err(e: &serde_saphyr::SerializeError) -> Error {
    Error::Io(std::io::Error::other(e.to_string()))
}

impl<W: Write> YamlWriter<W> {
    /// Flushes what is written so far to the sink.
    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }

    pub(crate) fn new(mut w: W, header: &Header) -> Result<Self, Error> {
        let text = serde_saphyr::to_string(header).map_err(|e| yaml_err(&e))?;
        w.write_all(text.as_bytes())?;
        if !text.ends_with('\n') {
            w.write_all(b"\n")?;
        }
        Ok(Self { w, any: false })
    }

    pub(crate) fn write(&mut self, e: &Event) -> Result<(), Error> {
        if !self.any {
            self.w.write_all(b"events:\n")?;
            self.any = true;
        }
        let text = serde_saphyr::to_string(e).map_err(|e| yaml_err(&e))?;
        let mut first = true;
        for line in text.lines() {
            let prefix: &[u8] = if first { b"- " } else { b"  " };
            first = false;
            if line.is_empty() {
                self.w.write_all(b"\n")?;
            } else {
                self.w.write_all(prefix)?;
                self.w.write_all(line.as_bytes())?;
                self.w.write_all(b"\n")?;
            }
        }
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Result<W, Error> {
        if !self.any {
            self.w.write_all(b"events: []\n")?;
        }
        self.w.flush()?;
        Ok(self.w)
    }
}
