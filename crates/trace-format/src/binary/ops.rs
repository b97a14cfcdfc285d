//! The binary form of each value an event holds ([`Bin`]): integers, names through the
//! dictionary, options, lists, and every operation's fields in declaration order.

use super::{DICT_SLOTS, Dec, DecResult, Enc, put_varint};
use crate::model::*;
use crate::units::Name;

/// A value with a binary form.
pub(super) trait Bin: Sized {
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

pub(super) fn put_op(op: &Op, e: &mut Enc<'_>) {
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

pub(super) fn get_op(t: OpType, d: &mut Dec<'_>) -> DecResult<Op> {
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
