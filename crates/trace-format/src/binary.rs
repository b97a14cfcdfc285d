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

/// A value with a binary form.
trait Bin: Sized {
    fn put(&self, e: &mut Enc<'_>);
    fn get(d: &mut Dec<'_>) -> DecResult<Self>;
}

impl Bin for u64 {
    fn put(&self, e: &mut Enc<'_>) {
        put_varint(e.out, *self);
    }
    #[inline]
    fn get(d: &mut Dec<'_>) -> DecResult<Self> {
        d.varint()
    }
}

impl Bin for u32 {
    fn put(&self, e: &mut Enc<'_>) {
        put_varint(e.out, u64::from(*self));
    }
    fn get(d: &mut Dec<'_>) -> DecResult<Self> {
        u32::try_from(d.varint()?).map_err(|_| "value overflows 32 bits".to_owned())
    }
}

impl Bin for u8 {
    fn put(&self, e: &mut Enc<'_>) {
        e.out.push(*self);
    }
    fn get(d: &mut Dec<'_>) -> DecResult<Self> {
        d.byte()
    }
}

impl Bin for bool {
    fn put(&self, e: &mut Enc<'_>) {
        e.out.push(u8::from(*self));
    }
    fn get(d: &mut Dec<'_>) -> DecResult<Self> {
        match d.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(format!("invalid boolean byte {b}")),
        }
    }
}

impl Bin for f64 {
    fn put(&self, e: &mut Enc<'_>) {
        e.out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(d: &mut Dec<'_>) -> DecResult<Self> {
        let b = d.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(f64::from_le_bytes(a))
    }
}

impl Bin for String {
    fn put(&self, e: &mut Enc<'_>) {
        put_varint(e.out, self.len() as u64);
        e.out.extend_from_slice(self.as_bytes());
    }
    fn get(d: &mut Dec<'_>) -> DecResult<Self> {
        let n = usize::try_from(d.varint()?).map_err(|_| "string too long".to_owned())?;
        d.str_bytes(n).map(str::to_owned)
    }
}

impl Bin for Name {
    fn put(&self, e: &mut Enc<'_>) {
        if let Some(slot) = e.dict.slots.get(self.as_str()) {
            put_varint(e.out, u64::from(*slot) << 1);
            return;
        }
        put_varint(e.out, ((self.len() as u64) << 1) | 1);
        e.out.extend_from_slice(self.as_bytes());
        let slot = e.dict.next;
        e.dict.next = (slot + 1) % DICT_SLOTS;
        if let Some(old) = e.dict.ring[slot].replace(self.clone()) {
            e.dict.slots.remove(old.as_str());
        }
        e.dict.slots.insert(self.clone(), slot as u32);
    }

    #[inline]
    fn get(d: &mut Dec<'_>) -> DecResult<Self> {
        let v = d.varint()?;
        if v & 1 == 0 {
            let slot = usize::try_from(v >> 1).unwrap_or(usize::MAX);
            return d
                .dict
                .ring
                .get(slot)
                .cloned()
                .ok_or_else(|| format!("name refers to dictionary slot {slot}, which is empty"));
        }
        let n = usize::try_from(v >> 1).map_err(|_| "name too long".to_owned())?;
        let name = Name::new(d.str_bytes(n)?);
        let slot = d.dict.next;
        d.dict.next = (slot + 1) % DICT_SLOTS;
        if slot < d.dict.ring.len() {
            d.dict.ring[slot] = name.clone();
        } else {
            d.dict.ring.push(name.clone());
        }
        Ok(name)
    }
}

impl<T: Bin> Bin for Option<T> {
    fn put(&self, e: &mut Enc<'_>) {
        match self {
            None => e.out.push(0),
            Some(v) => {
                e.out.push(1);
                v.put(e);
            }
        }
    }
    fn get(d: &mut Dec<'_>) -> DecResult<Self> {
        match d.byte()? {
            0 => Ok(None),
            1 => T::get(d).map(Some),
            b => Err(format!("invalid option byte {b}")),
        }
    }
}

impl<T: Bin> Bin for Vec<T> {
    fn put(&self, e: &mut Enc<'_>) {
        put_varint(e.out, self.len() as u64);
        for v in self {
            v.put(e);
        }
    }
    fn get(d: &mut Dec<'_>) -> DecResult<Self> {
        let n = d.varint()?;
        // Every element takes at least one byte: bound the allocation by what is left.
        if n > d.remaining() as u64 {
            return Err(format!("list of {n} items is longer than the record"));
        }
        let mut out = Vec::with_capacity(n as usize);
        for _ in 0..n {
            out.push(T::get(d)?);
        }
        Ok(out)
    }
}

macro_rules! bin_struct {
    ($t:ident { $($f:ident),* $(,)? }) => {
        impl Bin for $t {
            fn put(&self, e: &mut Enc<'_>) {
                $(self.$f.put(e);)*
            }
            fn get(d: &mut Dec<'_>) -> DecResult<Self> {
                Ok($t { $($f: Bin::get(d)?,)* })
            }
        }
    };
}

macro_rules! bin_unit_enum {
    ($t:ident { $($v:ident = $n:literal),* $(,)? }) => {
        impl Bin for $t {
            fn put(&self, e: &mut Enc<'_>) {
                e.out.push(match self { $($t::$v => $n,)* });
            }
            fn get(d: &mut Dec<'_>) -> DecResult<Self> {
                match d.byte()? {
                    $($n => Ok($t::$v),)*
                    b => Err(format!(concat!("invalid ", stringify!($t), " byte {}"), b)),
                }
            }
        }
    };
}

bin_unit_enum!(AccessMode { ReadWriteOnce = 0, ReadWriteOncePod = 1, ReadOnlyMany = 2, ReadWriteMany = 3 });
bin_unit_enum!(VolumeMode { Filesystem = 0, Block = 1 });
bin_unit_enum!(IoKind { Read = 0, Write = 1, Trim = 2, Flush = 3 });
bin_unit_enum!(Pattern { Random = 0, Sequential = 1 });
bin_unit_enum!(Arrival { Uniform = 0, Poisson = 1 });

impl Bin for VolumeSource {
    fn put(&self, e: &mut Enc<'_>) {
        match self {
            VolumeSource::Snapshot(n) => {
                e.out.push(0);
                n.put(e);
            }
            VolumeSource::Volume(n) => {
                e.out.push(1);
                n.put(e);
            }
            VolumeSource::GroupMember(m) => {
                e.out.push(2);
                m.put(e);
            }
        }
    }
    fn get(d: &mut Dec<'_>) -> DecResult<Self> {
        match d.byte()? {
            0 => Name::get(d).map(VolumeSource::Snapshot),
            1 => Name::get(d).map(VolumeSource::Volume),
            2 => GroupMember::get(d).map(VolumeSource::GroupMember),
            b => Err(format!("invalid volume source byte {b}")),
        }
    }
}

impl Bin for BlockSize {
    fn put(&self, e: &mut Enc<'_>) {
        match self {
            BlockSize::Fixed(n) => {
                e.out.push(0);
                n.put(e);
            }
            BlockSize::Mix(m) => {
                e.out.push(1);
                m.put(e);
            }
        }
    }
    fn get(d: &mut Dec<'_>) -> DecResult<Self> {
        match d.byte()? {
            0 => u64::get(d).map(BlockSize::Fixed),
            1 => Vec::get(d).map(BlockSize::Mix),
            b => Err(format!("invalid block size byte {b}")),
        }
    }
}

impl Bin for Load {
    fn put(&self, e: &mut Enc<'_>) {
        match self {
            Load::Depth(n) => {
                e.out.push(0);
                n.put(e);
            }
            Load::Rate(r) => {
                e.out.push(1);
                r.put(e);
            }
        }
    }
    fn get(d: &mut Dec<'_>) -> DecResult<Self> {
        match d.byte()? {
            0 => u32::get(d).map(Load::Depth),
            1 => Rate::get(d).map(Load::Rate),
            b => Err(format!("invalid load byte {b}")),
        }
    }
}

bin_struct!(CreateVolume {
    volume,
    size,
    storage_class,
    access_mode,
    volume_mode,
    source
});
bin_struct!(VolumeRef { volume });
/// `attach`: its version-2 fields, then `wait_for_room` only when set (a frame that ends
/// after `node` has it false), so version-2 frames read unchanged.
impl Bin for Attach {
    fn put(&self, e: &mut Enc<'_>) {
        self.workload.put(e);
        self.volumes.put(e);
        self.node.put(e);
        if self.wait_for_room {
            self.wait_for_room.put(e);
        }
    }
    fn get(d: &mut Dec<'_>) -> DecResult<Self> {
        Ok(Attach {
            workload: Bin::get(d)?,
            volumes: Bin::get(d)?,
            node: Bin::get(d)?,
            wait_for_room: if d.pos < d.buf.len() {
                Bin::get(d)?
            } else {
                false
            },
        })
    }
}
bin_struct!(WorkloadRef { workload });
bin_struct!(Snapshot {
    volume,
    snapshot,
    class
});
bin_struct!(SnapshotRef { snapshot });
bin_struct!(Resize { volume, size });
bin_struct!(SnapshotAllocated {
    snapshot,
    block_size
});
bin_struct!(SnapshotDelta {
    base,
    snapshot,
    block_size
});
bin_struct!(ModifyVolume { volume, class });
bin_struct!(GroupSnapshot {
    group,
    volumes,
    class
});
bin_struct!(GroupSnapshotRef { group });
bin_struct!(GroupMember { group, volume });
bin_struct!(Reschedule { workload, node });
bin_struct!(NodeRef { node });
bin_struct!(Io {
    volume,
    kind,
    offset,
    len
});
bin_struct!(BlockSizeShare { size, weight });
bin_struct!(Rate { iops, arrival });
bin_struct!(Marker { name });
bin_struct!(Ordered { log, with });

/// `io_phase`: its version-2 fields, then `ordered` only when present (byte 1 + the value):
/// a frame that ends after `verify` has none, so version-2 frames read unchanged and an
/// `io_phase` without it is written exactly as before.
impl Bin for IoPhase {
    fn put(&self, e: &mut Enc<'_>) {
        self.workload.put(e);
        self.volume.put(e);
        self.pattern.put(e);
        self.read_pct.put(e);
        self.block_size.put(e);
        self.load.put(e);
        self.duration.put(e);
        self.bytes.put(e);
        self.region.put(e);
        self.jobs.put(e);
        self.direct.put(e);
        self.verify.put(e);
        if self.ordered.is_some() {
            self.ordered.put(e);
        }
    }
    fn get(d: &mut Dec<'_>) -> DecResult<Self> {
        Ok(IoPhase {
            workload: Bin::get(d)?,
            volume: Bin::get(d)?,
            pattern: Bin::get(d)?,
            read_pct: Bin::get(d)?,
            block_size: Bin::get(d)?,
            load: Bin::get(d)?,
            duration: Bin::get(d)?,
            bytes: Bin::get(d)?,
            region: Bin::get(d)?,
            jobs: Bin::get(d)?,
            direct: Bin::get(d)?,
            verify: Bin::get(d)?,
            ordered: if d.pos < d.buf.len() {
                Bin::get(d)?
            } else {
                None
            },
        })
    }
}

fn put_op(op: &Op, e: &mut Enc<'_>) {
    match op {
        Op::CreateVolume(v) => v.put(e),
        Op::DeleteVolume(v) => v.put(e),
        Op::Attach(v) => v.put(e),
        Op::Detach(v) | Op::AbortWorkload(v) => v.put(e),
        Op::Snapshot(v) => v.put(e),
        Op::DeleteSnapshot(v) => v.put(e),
        Op::Resize(v) => v.put(e),
        Op::ModifyVolume(v) => v.put(e),
        Op::GroupSnapshot(v) => v.put(e),
        Op::DeleteGroupSnapshot(v) => v.put(e),
        Op::Reschedule(v) => v.put(e),
        Op::CordonNode(v) | Op::DrainNode(v) | Op::ForceDetach(v) => v.put(e),
        Op::Io(v) => v.put(e),
        Op::IoPhase(v) => v.put(e),
        Op::Marker(v) => v.put(e),
        Op::SnapshotAllocated(v) => v.put(e),
        Op::SnapshotDelta(v) => v.put(e),
    }
}

fn get_op(t: OpType, d: &mut Dec<'_>) -> DecResult<Op> {
    Ok(match t {
        OpType::CreateVolume => Op::CreateVolume(Bin::get(d)?),
        OpType::DeleteVolume => Op::DeleteVolume(Bin::get(d)?),
        OpType::Attach => Op::Attach(Bin::get(d)?),
        OpType::Detach => Op::Detach(Bin::get(d)?),
        OpType::Snapshot => Op::Snapshot(Bin::get(d)?),
        OpType::DeleteSnapshot => Op::DeleteSnapshot(Bin::get(d)?),
        OpType::Resize => Op::Resize(Bin::get(d)?),
        OpType::ModifyVolume => Op::ModifyVolume(Bin::get(d)?),
        OpType::GroupSnapshot => Op::GroupSnapshot(Bin::get(d)?),
        OpType::DeleteGroupSnapshot => Op::DeleteGroupSnapshot(Bin::get(d)?),
        OpType::AbortWorkload => Op::AbortWorkload(Bin::get(d)?),
        OpType::Reschedule => Op::Reschedule(Bin::get(d)?),
        OpType::CordonNode => Op::CordonNode(Bin::get(d)?),
        OpType::DrainNode => Op::DrainNode(Bin::get(d)?),
        OpType::ForceDetach => Op::ForceDetach(Bin::get(d)?),
        OpType::Io => Op::Io(Bin::get(d)?),
        OpType::IoPhase => Op::IoPhase(Bin::get(d)?),
        OpType::Marker => Op::Marker(Bin::get(d)?),
        OpType::SnapshotAllocated => Op::SnapshotAllocated(Bin::get(d)?),
        OpType::SnapshotDelta => Op::SnapshotDelta(Bin::get(d)?),
    })
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
