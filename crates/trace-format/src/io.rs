//! Opening, reading and writing traces in any encoding.
//!
//! [`TraceReader`] is a pull iterator over located events; whatever the encoding, it holds
//! one event at a time (plus the binary dictionary and I/O buffers), so a trace of any length
//! is read in constant memory. [`TraceWriter`] is its streaming counterpart. The encoding is
//! taken from the file name (`.yaml`/`.yml`, `.jsonl`/`.ndjson`, `.cnsbin`) and otherwise
//! sniffed from the first bytes.
//!
//! Readers never sort: events come out in file order, which must be time order (the checker
//! reports inversions). Events whose `id` is left out in a text encoding are numbered
//! `previous id + 1` (the first `0`).

use std::fmt;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::str::FromStr;

use crate::binary::{BinaryReader, BinaryWriter, MAGIC};
use crate::error::{Error, Location};
use crate::jsonl::{JsonlReader, JsonlWriter};
use crate::model::{Event, Header};
use crate::serde_impl::PartialEvent;
use crate::yaml::{YamlReader, YamlWriter};

/// A trace encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// YAML, for hand-written traces.
    Yaml,
    /// JSON Lines, the canonical text form.
    Jsonl,
    /// The compact binary form.
    Binary,
}

impl Encoding {
    /// All encodings.
    pub const ALL: [Encoding; 3] = [Encoding::Yaml, Encoding::Jsonl, Encoding::Binary];

    /// The encoding's name as used on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Encoding::Yaml => "yaml",
            Encoding::Jsonl => "jsonl",
            Encoding::Binary => "binary",
        }
    }

    /// The encoding a file name implies, if any.
    pub fn from_path(path: &Path) -> Option<Self> {
        match path.extension()?.to_str()? {
            "yaml" | "yml" => Some(Encoding::Yaml),
            "jsonl" | "ndjson" => Some(Encoding::Jsonl),
            "cnsbin" => Some(Encoding::Binary),
            _ => None,
        }
    }

    /// Guesses the encoding from the first bytes of a file.
    pub fn sniff(head: &[u8]) -> Option<Self> {
        if head.starts_with(MAGIC) {
            return Some(Encoding::Binary);
        }
        let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
        let first = head.iter().find(|b| !b.is_ascii_whitespace())?;
        match first {
            b'{' => Some(Encoding::Jsonl),
            _ if std::str::from_utf8(head).is_ok() => Some(Encoding::Yaml),
            _ => None,
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Encoding {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "yaml" | "yml" => Ok(Encoding::Yaml),
            "jsonl" | "ndjson" => Ok(Encoding::Jsonl),
            "binary" | "cnsbin" => Ok(Encoding::Binary),
            _ => Err(format!("unknown encoding {s:?}; use yaml, jsonl or binary")),
        }
    }
}

type DynRead = Box<dyn Read + Send>;

enum Inner {
    Jsonl(JsonlReader<BufReader<DynRead>>),
    Yaml(YamlReader),
    Binary(BinaryReader<DynRead>),
}

/// A streaming reader of a trace in any encoding.
pub struct TraceReader {
    header: Header,
    encoding: Encoding,
    inner: Inner,
    prev_id: Option<u64>,
}

impl fmt::Debug for TraceReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceReader")
            .field("encoding", &self.encoding)
            .finish_non_exhaustive()
    }
}

impl TraceReader {
    /// Opens a file, taking the encoding from its name or, failing that, its content.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        Self::open_as(path, None)
    }

    /// Opens a file in the given encoding, or the detected one when `None`.
    pub fn open_as(path: impl AsRef<Path>, encoding: Option<Encoding>) -> Result<Self, Error> {
        let path = path.as_ref();
        let file = fs_err::File::open(path)?;
        let label = path.display().to_string();
        let encoding = encoding.or_else(|| Encoding::from_path(path));
        Self::from_reader(file, encoding, label)
    }

    /// Reads from any byte stream; `file` names it in messages. The encoding is sniffed from
    /// the first bytes when `None`.
    pub fn from_reader<R: Read + Send + 'static>(
        r: R,
        encoding: Option<Encoding>,
        file: impl Into<String>,
    ) -> Result<Self, Error> {
        let file = file.into();
        let mut buffered = BufReader::with_capacity(256 << 10, Box::new(r) as DynRead);
        let encoding = match encoding {
            Some(e) => e,
            None => {
                let head = buffered.fill_buf()?;
                Encoding::sniff(head).ok_or(Error::UnknownEncoding { file: file.clone() })?
            }
        };
        let (header, inner) = match encoding {
            Encoding::Jsonl => {
                let mut r = JsonlReader::new(buffered, file);
                (r.read_header()?, Inner::Jsonl(r))
            }
            Encoding::Yaml => {
                let mut r = YamlReader::spawn(buffered, file.clone())?;
                (r.read_header(&file)?, Inner::Yaml(r))
            }
            Encoding::Binary => {
                let mut r = BinaryReader::new(Box::new(buffered) as DynRead, file);
                (r.read_header()?, Inner::Binary(r))
            }
        };
        Ok(Self {
            header,
            encoding,
            inner,
            prev_id: None,
        })
    }

    /// The trace header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The encoding being read.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    fn number(&mut self, p: PartialEvent) -> Event {
        let mut ev = p.event;
        if !p.id_given {
            ev.id = self.prev_id.map_or(0, |p| p.wrapping_add(1));
        }
        self.prev_id = Some(ev.id);
        ev
    }

    /// Drops locations: an iterator of plain events.
    pub fn events(self) -> impl Iterator<Item = Result<Event, Error>> {
        self.map(|r| r.map(|(e, _)| e))
    }
}

impl Iterator for TraceReader {
    type Item = Result<(Event, Location), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        let partial = match &mut self.inner {
            Inner::Binary(r) => {
                let r = r.next_event();
                if let Some(Ok((ev, _))) = &r {
                    self.prev_id = Some(ev.id);
                }
                return r;
            }
            Inner::Jsonl(r) => r.next_event()?,
            Inner::Yaml(r) => r.next_event()?,
        };
        Some(partial.map(|(p, loc)| (self.number(p), loc)))
    }
}

type DynWrite = Box<dyn Write + Send>;

enum WInner {
    Jsonl(JsonlWriter<BufWriter<DynWrite>>),
    Yaml(YamlWriter<BufWriter<DynWrite>>),
    Binary(BinaryWriter<BufWriter<DynWrite>>),
}

/// A streaming writer of a trace in any encoding.
pub struct TraceWriter {
    inner: WInner,
    /// Set by [`TraceWriter::checking`]: every event passes the checker before it is written.
    check: Option<Box<crate::check::EventCheck>>,
}

impl fmt::Debug for TraceWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceWriter").finish_non_exhaustive()
    }
}

impl TraceWriter {
    /// Creates a file, taking the encoding from its name unless given.
    pub fn create(
        path: impl AsRef<Path>,
        encoding: Option<Encoding>,
        header: &Header,
    ) -> Result<Self, Error> {
        let path = path.as_ref();
        let encoding = encoding
            .or_else(|| Encoding::from_path(path))
            .ok_or_else(|| Error::UnknownEncoding {
                file: path.display().to_string(),
            })?;
        let file = fs_err::File::create(path)?;
        Self::new(file, encoding, header)
    }

    /// Writes to any byte sink.
    pub fn new<W: Write + Send + 'static>(
        w: W,
        encoding: Encoding,
        header: &Header,
    ) -> Result<Self, Error> {
        let w = BufWriter::with_capacity(256 << 10, Box::new(w) as DynWrite);
        // Writers always write the current version: the output follows this build's rules.
        let mut current;
        let header = if header.version == crate::model::FORMAT_VERSION {
            header
        } else {
            current = header.clone();
            current.version = crate::model::FORMAT_VERSION;
            &current
        };
        let inner = match encoding {
            Encoding::Jsonl => WInner::Jsonl(JsonlWriter::new(w, header)?),
            Encoding::Yaml => WInner::Yaml(YamlWriter::new(w, header)?),
            Encoding::Binary => WInner::Binary(BinaryWriter::new(w, header)?),
        };
        Ok(Self { inner, check: None })
    }

    /// Checks every event before it is written (`validate`'s checker, from `header`, the one
    /// this writer was made with): the first problem is an error naming `file` and the
    /// event's index, and the event is not written. For writers of made events (importers),
    /// whose output must never be a trace `validate` rejects.
    pub fn checking(mut self, header: &Header, file: impl Into<String>) -> Result<Self, Error> {
        self.check = Some(Box::new(crate::check::EventCheck::new(header, file)?));
        Ok(self)
    }

    /// Appends one event.
    pub fn write(&mut self, e: &Event) -> Result<(), Error> {
        if let Some(c) = &mut self.check {
            c.event(e, Location::default())?;
        }
        match &mut self.inner {
            WInner::Jsonl(w) => w.write(e),
            WInner::Yaml(w) => w.write(e),
            WInner::Binary(w) => w.write(e),
        }
    }

    /// Pushes what is written so far to the sink (a reader on a pipe sees those events now;
    /// the trace stays open).
    pub fn flush(&mut self) -> Result<(), Error> {
        match &mut self.inner {
            WInner::Jsonl(w) => w.flush()?,
            WInner::Yaml(w) => w.flush()?,
            WInner::Binary(w) => w.flush()?,
        }
        Ok(())
    }

    /// Writes the end of the trace and flushes. A trace not finished is truncated.
    pub fn finish(self) -> Result<(), Error> {
        let w = match self.inner {
            WInner::Jsonl(w) => w.finish()?,
            WInner::Yaml(w) => w.finish()?,
            WInner::Binary(w) => w.finish()?,
        };
        w.into_inner()
            .map_err(|e| Error::Io(e.into_error()))?
            .flush()?;
        Ok(())
    }
}

/// A whole trace in memory: for small traces, tests and tools that need random access.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    /// The header.
    pub header: Header,
    /// The events, in file order.
    pub events: Vec<Event>,
}

impl Trace {
    /// Reads a whole trace, failing on the first problem.
    pub fn read(path: impl AsRef<Path>) -> Result<Self, Error> {
        Self::collect(TraceReader::open(path)?)
    }

    /// Collects a reader, failing on the first problem. A YAML reader is read to its end
    /// even then (its events are decoded on a thread of their own, which then ends before
    /// this returns instead of racing on in the background).
    pub fn collect(reader: TraceReader) -> Result<Self, Error> {
        let header = reader.header().clone();
        let yaml = reader.encoding() == Encoding::Yaml;
        let mut events = Vec::new();
        let mut first = None;
        for e in reader.events() {
            match (e, &first) {
                (Ok(e), None) => events.push(e),
                (Err(e), None) => {
                    first = Some(e);
                    if !yaml {
                        break;
                    }
                }
                (_, Some(_)) => {}
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok(Self { header, events }),
        }
    }

    /// Decodes a trace held in memory.
    pub fn from_bytes(bytes: &[u8], encoding: Option<Encoding>) -> Result<Self, Error> {
        Self::collect(TraceReader::from_reader(
            std::io::Cursor::new(bytes.to_vec()),
            encoding,
            "<memory>",
        )?)
    }

    /// Encodes the trace into memory.
    pub fn to_bytes(&self, encoding: Encoding) -> Result<Vec<u8>, Error> {
        let buf = SharedBuf::default();
        let mut w = TraceWriter::new(buf.clone(), encoding, &self.header)?;
        for e in &self.events {
            w.write(e)?;
        }
        w.finish()?;
        Ok(buf.take())
    }

    /// Writes the trace to a file.
    pub fn write(&self, path: impl AsRef<Path>, encoding: Option<Encoding>) -> Result<(), Error> {
        let mut w = TraceWriter::create(path, encoding, &self.header)?;
        for e in &self.events {
            w.write(e)?;
        }
        w.finish()
    }
}

/// A `Write` into a shared vector, so `to_bytes` can hand a `'static` sink to the writer.
#[derive(Clone, Default)]
struct SharedBuf(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl SharedBuf {
    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl Write for SharedBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
