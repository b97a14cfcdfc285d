//! The values a model file writes as text or numbers, with their parsers: a target rate
//! (`attach=5/s`), rates (`10/s`, `2/m`), sizes (`1Gi`) and durations (`90s`, or seconds).

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

/// A target operation rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Target {
    /// The operation.
    pub op: TargetOp,
    /// Operations per second.
    pub rate: f64,
}

/// Operations whose rate can be targeted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetOp {
    /// `attach` (one per container).
    Attach,
    /// `detach` (one per container).
    Detach,
    /// `create_volume` of container volumes.
    Create,
    /// `delete_volume` of container volumes.
    Delete,
    /// `snapshot` from per-volume policies.
    Snapshot,
}

impl TargetOp {
    /// The name used on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            TargetOp::Attach => "attach",
            TargetOp::Detach => "detach",
            TargetOp::Create => "create",
            TargetOp::Delete => "delete",
            TargetOp::Snapshot => "snapshot",
        }
    }
}

impl std::str::FromStr for Target {
    type Err = String;
    /// Parses `attach=100/s`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (op, rate) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?}: write OP=RATE, e.g. attach=100/s"))?;
        let op = match op.trim() {
            "attach" => TargetOp::Attach,
            "detach" => TargetOp::Detach,
            "create" | "create_volume" => TargetOp::Create,
            "delete" | "delete_volume" => TargetOp::Delete,
            "snapshot" => TargetOp::Snapshot,
            other => {
                return Err(format!(
                    "unknown operation {other:?}; use attach, detach, create, delete or snapshot"
                ));
            }
        };
        Ok(Target {
            op,
            rate: parse_rate(rate)?,
        })
    }
}

impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(de::Error::custom)
    }
}

/// An event rate, per second.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rate(pub f64);

/// Parses `"100/s"`, `"6/m"`, `"3/h"`, `"1/d"` or a plain number per second.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let s = s.trim();
    let (num, per) = match s.split_once('/') {
        Some((n, u)) => (n.trim(), u.trim()),
        None => (s, "s"),
    };
    let div = match per {
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => return Err(format!("{s:?}: the unit of a rate is /s, /m, /h or /d")),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a rate (examples: 100/s, 6/m, 0.5)"))?;
    if !(n.is_finite() && n >= 0.0) {
        return Err(format!("{s:?}: a rate must be a number ≥ 0"));
    }
    Ok(n / div)
}

struct RateV;
impl Visitor<'_> for RateV {
    type Value = Rate;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a rate such as \"100/s\", \"6/m\" or a number per second")
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Rate, E> {
        if v.is_finite() && v >= 0.0 {
            Ok(Rate(v))
        } else {
            Err(E::custom(format!("a rate must be ≥ 0, not {v}")))
        }
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Rate, E> {
        Ok(Rate(v as f64))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Rate, E> {
        self.visit_f64(v as f64)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Rate, E> {
        parse_rate(v).map(Rate).map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RateV)
    }
}

/// A byte quantity (`4096`, `"1Gi"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Bytes(pub u64);

struct BytesV;
impl Visitor<'_> for BytesV {
    type Value = Bytes;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a size in bytes or a quantity such as \"1Gi\"")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Bytes, E> {
        Ok(Bytes(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Bytes, E> {
        u64::try_from(v)
            .map(Bytes)
            .map_err(|_| E::custom("a size must not be negative"))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Bytes, E> {
        trace_format::units::parse_bytes(v)
            .map(Bytes)
            .map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(BytesV)
    }
}

struct Nanos;
impl Visitor<'_> for Nanos {
    type Value = u64;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a duration such as \"90s\", \"5m\", \"2d\" or a number of seconds")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        v.checked_mul(1_000_000_000)
            .ok_or_else(|| E::custom("duration overflows"))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        let v = u64::try_from(v).map_err(|_| E::custom("a duration must not be negative"))?;
        self.visit_u64(v)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
        if (0.0..1.8e10).contains(&v) {
            Ok((v * 1e9).round() as u64)
        } else {
            Err(E::custom(format!("{v} is not a duration in seconds")))
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        trace_format::units::parse_duration(v).map_err(E::custom)
    }
}

pub(super) fn dur_de<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    d.deserialize_any(Nanos)
}

pub(super) fn dur_opt_de<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    d.deserialize_any(Nanos).map(Some)
}
