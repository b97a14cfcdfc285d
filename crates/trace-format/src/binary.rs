//! The compact binary encoding (`.cnsbin`), for traces of many millions of events.
//!
//! Layout (all integers little-endian; "varint" is LEB128, "zz" is zigzag then LEB128):
//!
//! ```text
//! magic   "CNSRBIN\0"                      8 bytes
//! version u32                              format version, as in the header
//! hlen    u32, then hlen bytes             the header as JSON (small, rare, self-describing)
//! frames  varint len > 0, then len bytes   one event per frame
//! end     varint 0, varint event count     end marker: a file without it is truncated
//! ```
//!
//! An event frame is `zz(at − previous at)`, `zz(id − previous id − 1)`, a tag byte (bits 0–4
//! the operation type, bit 5 tenant present, bit 6 observed present), then the optional tenant
//! and observed latency, then the operation's fields in declaration order. In a typical trace
//! the time delta is one or two bytes and the id delta is a single zero byte.
//!
//! Names go through a dictionary that both sides keep identically: a ring of the last
//! [`DICT_SLOTS`] distinct strings. A name is `varint(slot << 1)` when it is in the ring, or
//! `varint(len << 1 | 1)` plus its bytes when new (it then takes the next ring slot). The ring
//! bounds memory on both sides, so encoding and decoding are constant-memory however many
//! distinct names a trace has, while the hot volumes of a block trace cost one or two bytes.
//!
//! Frames make every record self-delimiting: a decoder checks each record consumes exactly its
//! frame, and reports the record index and byte offset of anything wrong.

use std::collections::HashMap;
use std::io::{Read, Write};

mod ops;

use ops::{Bin, get_op, put_op};

use crate::error::{Diagnostic, Error, Location, Problem};
use crate::model::*;
use crate::units::Name;

/// The eight magic bytes that start a binary trace.
pub const MAGIC: &[u8; 8] = b"CNSRBIN\0";

/// Size of the name dictionary ring.
pub const DICT_SLOTS: usize = 4096;

/// Largest frame a reader accepts (a sanity bound against corrupt lengths).
const MAX_FRAME: usize = 16 << 20;

/// Largest header either side accepts: 1 GiB of JSON (a header declaring millions of volumes
/// is tens of MiB; the writer refuses what the reader would).
pub const MAX_HEADER: usize = 1 << 30;

const TENANT_BIT: u8 = 1 << 5;
const OBSERVED_BIT: u8 = 1 << 6;
const TAG_MASK: u8 = 0x1f;

// ---------------------------------------------------------------- primitives

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

struct Enc<'a> {
    out: &'a mut Vec<u8>,
    dict: &'a mut EncDict,
}

struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
    dict: &'a mut DecDict,
}

type DecResult<T> = Result<T, String>;

impl Dec<'_> {
    #[inline]
    fn byte(&mut self) -> DecResult<u8> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| "record ends inside a field".to_owned())?;
        self.pos += 1;
        Ok(b)
    }

    #[inline]
    fn varint(&mut self) -> DecResult<u64> {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                return Err("varint overflows 64 bits".into());
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
            if shift > 63 {
                return Err("varint longer than 10 bytes".into());
            }
        }
    }

    fn bytes(&mut self, n: usize) -> DecResult<&[u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or_else(|| format!("string of {n} bytes runs past the record"))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn str_bytes(&mut self, n: usize) -> DecResult<&str> {
        std::str::from_utf8(self.bytes(n)?).map_err(|e| format!("string is not UTF-8: {e}"))
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
}

struct EncDict {
    slots: HashMap<Name, u32>,
    ring: Vec<Option<Name>>,
    next: usize,
}

impl EncDict {
    fn new() -> Self {
        Self {
            slots: HashMap::with_capacity(DICT_SLOTS),
            ring: vec![None; DICT_SLOTS],
            next: 0,
        }
    }
}

struct DecDict {
    ring: Vec<Name>,
    next: usize,
}

impl DecDict {
    fn new() -> Self {
        Self {
            ring: Vec::with_capacity(DICT_SLOTS),
            next: 0,
        }
    }
}

// ---------------------------------------------------------------- writer

/// Streams events into the binary encoding.
pub(crate) struct BinaryWriter<W> {
    w: W,
    dict: EncDict,
    scratch: Vec<u8>,
    frame: Vec<u8>,
    prev_at: u64,
    prev_id: u64,
    count: u64,
}

/// A sink that only counts the bytes written to it.
struct CountingSink(u64);

impl Write for CountingSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<W: Write> BinaryWriter<W> {
    /// Flushes what is written so far to the sink.
    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }

    pub(crate) fn new(mut w: W, header: &Header) -> Result<Self, Error> {
        // The header is serialized twice, first only to count its bytes, so that no copy of
        // its JSON is held (a million declared volumes are ~40 MB of it).
        let mut counted = CountingSink(0);
        serde_json::to_writer(&mut counted, header).map_err(std::io::Error::from)?;
        let len = usize::try_from(counted.0).unwrap_or(usize::MAX);
        if len > MAX_HEADER {
            return Err(std::io::Error::other(format!(
                "the header is {len} bytes as JSON ({} declared volumes), over the binary \
                 format's {MAX_HEADER}-byte limit; write JSON Lines, or declare fewer volumes",
                header.volumes.len()
            ))
            .into());
        }
        let hlen =
            u32::try_from(len).map_err(|_| std::io::Error::other("header larger than 4 GiB"))?;
        w.write_all(MAGIC)?;
        w.write_all(&header.version.to_le_bytes())?;
        w.write_all(&hlen.to_le_bytes())?;
        serde_json::to_writer(&mut w, header).map_err(std::io::Error::from)?;
        Ok(Self {
            w,
            dict: EncDict::new(),
            scratch: Vec::with_capacity(64),
            frame: Vec::with_capacity(16),
            prev_at: 0,
            // So that the first event's id delta is `id`, not `id - 1`.
            prev_id: u64::MAX,
            count: 0,
        })
    }

    pub(crate) fn write(&mut self, ev: &Event) -> Result<(), Error> {
        self.scratch.clear();
        let s = &mut self.scratch;
        put_varint(s, zigzag(ev.at.wrapping_sub(self.prev_at) as i64));
        put_varint(
            s,
            zigzag(ev.id.wrapping_sub(self.prev_id.wrapping_add(1)) as i64),
        );
        let mut tag = ev.op.op_type() as u8;
        if ev.tenant.is_some() {
            tag |= TENANT_BIT;
        }
        if ev.observed.is_some() {
            tag |= OBSERVED_BIT;
        }
        s.push(tag);
        let mut e = Enc {
            out: &mut self.scratch,
            dict: &mut self.dict,
        };
        if let Some(t) = &ev.tenant {
            t.put(&mut e);
        }
        if let Some(o) = ev.observed {
            o.put(&mut e);
        }
        put_op(&ev.op, &mut e);
        self.frame.clear();
        put_varint(&mut self.frame, self.scratch.len() as u64);
        self.w.write_all(&self.frame)?;
        self.w.write_all(&self.scratch)?;
        self.prev_at = ev.at;
        self.prev_id = ev.id;
        self.count += 1;
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Result<W, Error> {
        self.frame.clear();
        put_varint(&mut self.frame, 0);
        put_varint(&mut self.frame, self.count);
        self.w.write_all(&self.frame)?;
        self.w.flush()?;
        Ok(self.w)
    }
}

// ---------------------------------------------------------------- reader

/// Streams events out of the binary encoding.
pub(crate) struct BinaryReader<R> {
    r: R,
    file: String,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    /// Byte offset of `buf[start]` in the file.
    offset: u64,
    dict: DecDict,
    prev_at: u64,
    prev_id: u64,
    index: u64,
    done: bool,
}

impl<R: Read> BinaryReader<R> {
    pub(crate) fn new(r: R, file: String) -> Self {
        Self {
            r,
            file,
            buf: vec![0; 256 << 10],
            start: 0,
            end: 0,
            eof: false,
            offset: 0,
            dict: DecDict::new(),
            prev_at: 0,
            prev_id: u64::MAX,
            index: 0,
            done: false,
        }
    }

    fn diag(&self, record: Option<u64>, path: String, problem: Problem) -> Error {
        Diagnostic {
            file: self.file.clone(),
            location: Location {
                line: None,
                record,
                byte: Some(self.offset),
            },
            path,
            problem,
        }
        .into()
    }

    /// Makes at least `n` bytes available from `start`, unless the input ends first.
    fn fill(&mut self, n: usize) -> Result<(), Error> {
        if self.end - self.start >= n || self.eof {
            return Ok(());
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() < n {
            self.buf.resize(n.next_power_of_two(), 0);
        }
        while self.end < n {
            match self.r.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(k) => self.end += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        self.offset += n as u64;
    }

    /// Reads a varint from the buffer head.
    fn head_varint(&mut self, what: &str) -> Result<Option<u64>, Error> {
        self.fill(10)?;
        if self.start == self.end {
            return Ok(None);
        }
        let mut d = Dec {
            buf: &self.buf[self.start..self.end],
            pos: 0,
            dict: &mut self.dict,
        };
        match d.varint() {
            Ok(v) => {
                let used = d.pos;
                self.consume(used);
                Ok(Some(v))
            }
            Err(e) => Err(self.diag(
                Some(self.index),
                String::new(),
                Problem::Truncated(format!("{what}: {e}")),
            )),
        }
    }

    pub(crate) fn read_header(&mut self) -> Result<Header, Error> {
        self.fill(16)?;
        let head = &self.buf[self.start..self.end];
        if head.len() < 8 || &head[..8] != MAGIC {
            return Err(self.diag(
                None,
                "header".into(),
                Problem::NotATrace("the file does not start with the binary trace magic".into()),
            ));
        }
        if head.len() < 16 {
            return Err(self.diag(
                None,
                "header".into(),
                Problem::Truncated("the file ends inside the fixed header".into()),
            ));
        }
        let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
        let hlen = u32::from_le_bytes([head[12], head[13], head[14], head[15]]) as usize;
        if version == 0 || version > FORMAT_VERSION {
            return Err(self.diag(
                None,
                "header.version".into(),
                if version == 0 {
                    Problem::InvalidValue("version 0 does not exist".into())
                } else {
                    Problem::UnsupportedVersion {
                        found: version,
                        supported: FORMAT_VERSION,
                    }
                },
            ));
        }
        if hlen > MAX_HEADER {
            return Err(self.diag(
                None,
                "header".into(),
                Problem::Syntax(format!("header length {hlen} is implausible")),
            ));
        }
        self.consume(16);
        self.fill(hlen)?;
        if self.end - self.start < hlen {
            return Err(self.diag(
                None,
                "header".into(),
                Problem::Truncated("the file ends inside the header".into()),
            ));
        }
        let json = &self.buf[self.start..self.start + hlen];
        let header = crate::text::header_from_json(json)
            .map_err(|e| self.diag(None, e.path.clone(), e.problem))?;
        if header.version != version {
            return Err(self.diag(
                None,
                "header.version".into(),
                Problem::InvalidValue(format!(
                    "header says version {} but the binary frame says {version}",
                    header.version
                )),
            ));
        }
        self.consume(hlen);
        Ok(header)
    }

    pub(crate) fn next_event(&mut self) -> Option<Result<(Event, Location), Error>> {
        if self.done {
            return None;
        }
        let r = self.next_inner();
        if !matches!(r, Some(Ok(_))) {
            self.done = true;
        }
        r
    }

    fn next_inner(&mut self) -> Option<Result<(Event, Location), Error>> {
        let index = self.index;
        let frame_offset = self.offset;
        let len = match self.head_varint("frame length") {
            Ok(Some(l)) => l,
            Ok(None) => {
                return Some(Err(self.diag(
                    Some(index),
                    String::new(),
                    Problem::Truncated(format!(
                        "the file ends after {index} events without the end marker"
                    )),
                )));
            }
            Err(e) => return Some(Err(e)),
        };
        if len == 0 {
            return self.end_marker(index).err().map(Err);
        }
        let len = match usize::try_from(len).ok().filter(|l| *l <= MAX_FRAME) {
            Some(l) => l,
            None => {
                return Some(Err(self.diag(
                    Some(index),
                    format!("events[{index}]"),
                    Problem::Syntax(format!("frame length {len} is implausible")),
                )));
            }
        };
        if let Err(e) = self.fill(len) {
            return Some(Err(e));
        }
        if self.end - self.start < len {
            return Some(Err(self.diag(
                Some(index),
                format!("events[{index}]"),
                Problem::Truncated(format!("the file ends inside a {len}-byte record")),
            )));
        }
        let mut d = Dec {
            buf: &self.buf[self.start..self.start + len],
            pos: 0,
            dict: &mut self.dict,
        };
        let decoded = decode_event(&mut d, self.prev_at, self.prev_id);
        let used = d.pos;
        match decoded {
            Ok(ev) if used == len => {
                self.consume(len);
                self.prev_at = ev.at;
                self.prev_id = ev.id;
                self.index += 1;
                let loc = Location {
                    line: None,
                    record: Some(index),
                    byte: Some(frame_offset),
                };
                Some(Ok((ev, loc)))
            }
            Ok(_) => Some(Err(self.diag(
                Some(index),
                format!("events[{index}]"),
                Problem::Syntax(format!("record has {} unread bytes", len - used)),
            ))),
            Err(msg) => Some(Err(self.diag(
                Some(index),
                format!("events[{index}]"),
                Problem::Syntax(msg),
            ))),
        }
    }

    fn end_marker(&mut self, index: u64) -> Result<(), Error> {
        let count = self.head_varint("event count")?.ok_or_else(|| {
            self.diag(
                Some(index),
                String::new(),
                Problem::Truncated("the file ends inside the end marker".into()),
            )
        })?;
        if count != index {
            return Err(self.diag(
                Some(index),
                String::new(),
                Problem::Syntax(format!(
                    "the end marker counts {count} events but the file holds {index}"
                )),
            ));
        }
        self.fill(1)?;
        if self.end > self.start {
            return Err(self.diag(
                Some(index),
                String::new(),
                Problem::Syntax("data after the end marker".into()),
            ));
        }
        Ok(())
    }
}

#[inline]
fn decode_event(d: &mut Dec<'_>, prev_at: u64, prev_id: u64) -> DecResult<Event> {
    let at = prev_at.wrapping_add(unzigzag(d.varint()?) as u64);
    let id = prev_id
        .wrapping_add(1)
        .wrapping_add(unzigzag(d.varint()?) as u64);
    let tag = d.byte()?;
    if tag & !(TAG_MASK | TENANT_BIT | OBSERVED_BIT) != 0 {
        return Err(format!("invalid tag byte {tag:#04x}"));
    }
    let t = OpType::from_tag(tag & TAG_MASK)
        .ok_or_else(|| format!("unknown operation tag {}", tag & TAG_MASK))?;
    let tenant = if tag & TENANT_BIT != 0 {
        Some(Name::get(d)?)
    } else {
        None
    };
    let observed = if tag & OBSERVED_BIT != 0 {
        Some(d.varint()?)
    } else {
        None
    };
    let op = get_op(t, d)?;
    Ok(Event {
        at,
        id,
        tenant,
        observed,
        op,
    })
}
