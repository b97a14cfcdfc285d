//! Hand-written serde for [`Event`] and [`BlockSize`].
//!
//! An event is one flat map: `at`, `id`, optional `tenant` and `observed`, and exactly one
//! operation key whose value is the operation's fields. serde's `flatten` cannot express this
//! together with `deny_unknown_fields` and would buffer every event through an intermediate
//! value, so the map is visited directly: unknown keys, a missing operation and two operations
//! in one event are all errors, and decoding allocates nothing beyond the event itself.

use std::fmt;

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use crate::model::{BlockSize, BlockSizeShare, Event, Op, OpType};
use crate::units::{Name, duration_de, parse_bytes};

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let len = 3 + usize::from(self.tenant.is_some()) + usize::from(self.observed.is_some());
        let mut m = s.serialize_map(Some(len))?;
        m.serialize_entry("at", &self.at)?;
        m.serialize_entry("id", &self.id)?;
        if let Some(t) = &self.tenant {
            m.serialize_entry("tenant", t)?;
        }
        if let Some(o) = &self.observed {
            m.serialize_entry("observed", o)?;
        }
        let key = self.op.op_type().name();
        match &self.op {
            Op::CreateVolume(v) => m.serialize_entry(key, v)?,
            Op::DeleteVolume(v) => m.serialize_entry(key, v)?,
            Op::Attach(v) => m.serialize_entry(key, v)?,
            Op::Detach(v) | Op::AbortWorkload(v) => m.serialize_entry(key, v)?,
            Op::Snapshot(v) => m.serialize_entry(key, v)?,
            Op::DeleteSnapshot(v) => m.serialize_entry(key, v)?,
            Op::Resize(v) => m.serialize_entry(key, v)?,
            Op::ModifyVolume(v) => m.serialize_entry(key, v)?,
            Op::GroupSnapshot(v) => m.serialize_entry(key, v)?,
            Op::DeleteGroupSnapshot(v) => m.serialize_entry(key, v)?,
            Op::Reschedule(v) => m.serialize_entry(key, v)?,
            Op::CordonNode(v) | Op::DrainNode(v) | Op::ForceDetach(v) => {
                m.serialize_entry(key, v)?;
            }
            Op::Io(v) => m.serialize_entry(key, v)?,
            Op::IoPhase(v) => m.serialize_entry(key, v)?,
            Op::Marker(v) => m.serialize_entry(key, v)?,
            Op::SnapshotAllocated(v) => m.serialize_entry(key, v)?,
            Op::SnapshotDelta(v) => m.serialize_entry(key, v)?,
        }
        m.end()
    }
}

/// Every key an event map may hold, for "expected one of" messages.
const EVENT_KEYS: &[&str] = &[
    "at",
    "id",
    "tenant",
    "observed",
    "create_volume",
    "delete_volume",
    "attach",
    "detach",
    "snapshot",
    "delete_snapshot",
    "resize",
    "abort_workload",
    "reschedule",
    "cordon_node",
    "drain_node",
    "io",
    "io_phase",
    "marker",
    "modify_volume",
    "group_snapshot",
    "delete_group_snapshot",
    "force_detach",
    "snapshot_allocated",
    "snapshot_delta",
];

/// An event as read from text, where `id` may be left out (the reader then numbers it).
#[derive(Debug)]
pub(crate) struct PartialEvent {
    pub(crate) event: Event,
    pub(crate) id_given: bool,
}

impl<'de> Deserialize<'de> for PartialEvent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EventVisitor)
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let p = PartialEvent::deserialize(d)?;
        if p.id_given {
            Ok(p.event)
        } else {
            Err(de::Error::missing_field("id"))
        }
    }
}

struct EventVisitor;

struct At(u64);
impl<'de> Deserialize<'de> for At {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        duration_de(d).map(At)
    }
}

fn op_value<'de, A: MapAccess<'de>, T: DeserializeOwned>(
    map: &mut A,
    wrap: fn(T) -> Op,
) -> Result<Op, A::Error> {
    map.next_value::<T>().map(wrap)
}

impl<'de> Visitor<'de> for EventVisitor {
    type Value = PartialEvent;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an event map with `at`, `id` and one operation")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PartialEvent, A::Error> {
        let mut at = None;
        let mut id = None;
        let mut tenant: Option<Name> = None;
        let mut observed = None;
        let mut op: Option<Op> = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let dup = |k: &str| de::Error::custom(format_args!("duplicate field `{k}`"));
            match &*key {
                "at" => {
                    if at.replace(map.next_value::<At>()?.0).is_some() {
                        return Err(dup("at"));
                    }
                }
                "id" => {
                    if id.replace(map.next_value::<u64>()?).is_some() {
                        return Err(dup("id"));
                    }
                }
                "tenant" => {
                    if tenant.replace(map.next_value()?).is_some() {
                        return Err(dup("tenant"));
                    }
                }
                "observed" => {
                    if observed.replace(map.next_value::<At>()?.0).is_some() {
                        return Err(dup("observed"));
                    }
                }
                other => {
                    let Some(t) = OpType::from_name(other) else {
                        return Err(de::Error::unknown_field(other, EVENT_KEYS));
                    };
                    if let Some(prev) = &op {
                        return Err(de::Error::custom(format_args!(
                            "event has two operations, `{}` and `{other}`; exactly one is allowed",
                            prev.op_type()
                        )));
                    }
                    op = Some(match t {
                        OpType::CreateVolume => op_value(&mut map, Op::CreateVolume)?,
                        OpType::DeleteVolume => op_value(&mut map, Op::DeleteVolume)?,
                        OpType::Attach => op_value(&mut map, Op::Attach)?,
                        OpType::Detach => op_value(&mut map, Op::Detach)?,
                        OpType::Snapshot => op_value(&mut map, Op::Snapshot)?,
                        OpType::DeleteSnapshot => op_value(&mut map, Op::DeleteSnapshot)?,
                        OpType::Resize => op_value(&mut map, Op::Resize)?,
                        OpType::ModifyVolume => op_value(&mut map, Op::ModifyVolume)?,
                        OpType::GroupSnapshot => op_value(&mut map, Op::GroupSnapshot)?,
                        OpType::DeleteGroupSnapshot => op_value(&mut map, Op::DeleteGroupSnapshot)?,
                        OpType::AbortWorkload => op_value(&mut map, Op::AbortWorkload)?,
                        OpType::Reschedule => op_value(&mut map, Op::Reschedule)?,
                        OpType::CordonNode => op_value(&mut map, Op::CordonNode)?,
                        OpType::DrainNode => op_value(&mut map, Op::DrainNode)?,
                        OpType::ForceDetach => op_value(&mut map, Op::ForceDetach)?,
                        OpType::Io => op_value(&mut map, Op::Io)?,
                        OpType::IoPhase => op_value(&mut map, Op::IoPhase)?,
                        OpType::Marker => op_value(&mut map, Op::Marker)?,
                        OpType::SnapshotAllocated => op_value(&mut map, Op::SnapshotAllocated)?,
                        OpType::SnapshotDelta => op_value(&mut map, Op::SnapshotDelta)?,
                    });
                }
            }
        }
        let at = at.ok_or_else(|| de::Error::missing_field("at"))?;
        let op = op.ok_or_else(|| {
            de::Error::custom(
                "event has no operation; expected one of `create_volume`, `delete_volume`, \
                 `attach`, `detach`, `snapshot`, `delete_snapshot`, `resize`, `abort_workload`, \
                 `reschedule`, `cordon_node`, `drain_node`, `io`, `io_phase`, `marker`, \
                 `modify_volume`, `group_snapshot`, `delete_group_snapshot`, `force_detach`, \
                 `snapshot_allocated`, `snapshot_delta`",
            )
        })?;
        Ok(PartialEvent {
            event: Event {
                at,
                id: id.unwrap_or(0),
                tenant,
                observed,
                op,
            },
            id_given: id.is_some(),
        })
    }
}

impl<'de> Deserialize<'de> for BlockSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = BlockSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a block size (integer or \"4Ki\") or a list of {size, weight}")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<BlockSize, E> {
                Ok(BlockSize::Fixed(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<BlockSize, E> {
                u64::try_from(v)
                    .map(BlockSize::Fixed)
                    .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<BlockSize, E> {
                parse_bytes(v).map(BlockSize::Fixed).map_err(E::custom)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<BlockSize, A::Error> {
                let mut out = Vec::new();
                while let Some(s) = seq.next_element::<BlockSizeShare>()? {
                    out.push(s);
                }
                Ok(BlockSize::Mix(out))
            }
        }
        d.deserialize_any(V)
    }
}
