//! Names, byte quantities and durations.
//!
//! Object names are shared, immutable strings ([`Name`]): a trace names the same volume in
//! thousands of events and the replay engine keeps them in maps, so a clone must be a reference
//! count bump, not an allocation.
//!
//! Sizes and times are stored as integers (bytes, nanoseconds). Hand-written YAML and JSON may
//! also spell them as Kubernetes quantities (`"1Gi"`, `"500M"`) and durations (`"90s"`,
//! `"1.5ms"`); the canonical output is always the integer, so every encoding round-trips.
//!
//! Durations are printed by one of four functions here, so a unit and a precision are chosen
//! by name where a duration is shown, never re-implemented beside it (pure, no dependencies):
//!
//! | function           | example    | for                                                |
//! |--------------------|------------|----------------------------------------------------|
//! | [`fmt_secs`]       | `12.5s`    | exact seconds in messages ([`parse_duration`] reads them back) |
//! | [`fmt_ns`]         | `12.5 ms`  | reports and verdicts: the unit that suits, 3 digits |
//! | [`fmt_ms`]         | `12.35 ms` | notices and checks: milliseconds, fixed decimals   |
//! | [`fmt_ms_compact`] | `12.345ms` | fixed-width columns (`cnsreplay run`'s summary)    |

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// An object name (volume, workload, snapshot, node, class, tenant): a cheaply cloned string.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(Arc<str>);

impl Name {
    /// Makes a name from a string slice.
    pub fn new(s: &str) -> Self {
        Self(Arc::from(s))
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Self {
        Self::new(s)
    }
}

impl From<String> for Name {
    fn from(s: String) -> Self {
        Self(Arc::from(s))
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Name;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a name (string)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Name, E> {
                Ok(Name::new(v))
            }
        }
        d.deserialize_str(V)
    }
}

/// Why a quantity or duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// Not a number followed by a known suffix.
    #[error("{0:?} is not a {1} (examples: {2})")]
    Syntax(String, &'static str, &'static str),
    /// The value does not fit in 64 bits.
    #[error("{0:?} overflows 64 bits")]
    Overflow(String),
    /// The value is not a whole number of the base unit.
    #[error("{0:?} is not a whole number of {1}")]
    Fraction(String, &'static str),
}

/// Splits `"1.5Gi"` into a decimal mantissa (as integer and scale) and a suffix.
fn split_number(s: &str) -> Option<(u128, u32, &str)> {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(end);
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    if int.is_empty() && frac.is_empty() || frac.contains('.') || frac.len() > 18 {
        return None;
    }
    let mut mant: u128 = 0;
    for c in int.chars().chain(frac.chars()) {
        mant = mant
            .checked_mul(10)?
            .checked_add(u128::from(c.to_digit(10)?))?;
    }
    Some((mant, frac.len() as u32, suffix))
}

/// Applies `value = mant / 10^scale * mult`, requiring a whole result in u64.
fn scale(
    s: &str,
    mant: u128,
    scale: u32,
    mult: u128,
    unit: &'static str,
) -> Result<u64, UnitError> {
    let overflow = || UnitError::Overflow(s.to_owned());
    let num = mant.checked_mul(mult).ok_or_else(overflow)?;
    let den = 10u128.pow(scale);
    if num % den != 0 {
        return Err(UnitError::Fraction(s.to_owned(), unit));
    }
    u64::try_from(num / den).map_err(|_| overflow())
}

/// Parses a byte quantity: a plain integer or a Kubernetes quantity (`Ki Mi Gi Ti Pi Ei`,
/// `k M G T P E`), e.g. `"1Gi"`, `"1.5Mi"`, `"500M"`.
pub fn parse_bytes(s: &str) -> Result<u64, UnitError> {
    let t = s.trim();
    let syntax = || UnitError::Syntax(s.to_owned(), "byte quantity", "4096, \"4Ki\", \"1.5Gi\"");
    let (mant, sc, suffix) = split_number(t).ok_or_else(syntax)?;
    let mult: u128 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        _ => return Err(syntax()),
    };
    scale(s, mant, sc, mult, "bytes")
}

/// Parses a duration into nanoseconds: a number with `ns us µs ms s m h d`, e.g. `"1.5s"`.
pub fn parse_duration(s: &str) -> Result<u64, UnitError> {
    let t = s.trim();
    let syntax = || UnitError::Syntax(s.to_owned(), "duration", "\"250ms\", \"1.5s\", \"2m\"");
    let (mant, sc, suffix) = split_number(t).ok_or_else(syntax)?;
    let mult: u128 = match suffix {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        _ => return Err(syntax()),
    };
    scale(s, mant, sc, mult, "nanoseconds")
}

/// `at / speed` (ns, unrounded) when it fits a time offset, i.e. is below 2^64 ns; `None`
/// when a small speed factor makes it overflow (the caller reports
/// [`crate::error::Problem::TimeOverflow`]).
pub fn scaled_time(at: u64, speed: f64) -> Option<f64> {
    let t = at as f64 / speed;
    // Dividing by ≥ 1 cannot grow it (u64::MAX as f64 is 2^64, which `as u64` saturates back
    // to u64::MAX); otherwise below 2^64, every f64 of which converts to at most u64::MAX.
    let fits = speed >= 1.0 || t < 18_446_744_073_709_551_616.0;
    (speed.is_finite() && speed > 0.0 && fits).then_some(t)
}

/// The smallest speed factor for which `at` still fits ([`scaled_time`]).
pub fn min_speed(at: u64) -> f64 {
    at as f64 / 18_446_744_073_709_551_616.0
}

/// Formats nanoseconds as seconds for messages: `12.5s`, `0.000001s`, `3s`. Exact: every
/// digit of the nanoseconds is kept (trailing zeros dropped), so [`parse_duration`] reads it
/// back to the same value.
pub fn fmt_secs(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let frac = ns % 1_000_000_000;
    if frac == 0 {
        format!("{secs}s")
    } else {
        let f = format!("{frac:09}");
        format!("{secs}.{}s", f.trim_end_matches('0'))
    }
}

/// Nanoseconds as the duration formatters take them: a count (`u64`) or a mean, a scaled or a
/// stored value (`f64`).
pub trait Nanos: Copy {
    /// The value in nanoseconds as `f64` (a `u64` beyond 2^53 ns, 104 days, loses its last
    /// digits).
    fn as_f64(self) -> f64;
}

impl Nanos for u64 {
    fn as_f64(self) -> f64 {
        self as f64
    }
}

impl Nanos for f64 {
    fn as_f64(self) -> f64 {
        self
    }
}

/// Formats a duration in nanoseconds in the unit that suits it, with three significant digits:
/// `850 ns`, `1.25 µs`, `12.5 ms`, `3.20 s`, `250 s`.
///
/// The unit is chosen before rounding, so a value just below a unit's threshold keeps the
/// smaller unit (`999_999.0` is `1000 µs`, not `1.00 ms`); seconds are the largest unit
/// (`3600e9` is `3600 s`). Fractions of a nanosecond round (`2.5` is `2 ns`, ties to even).
/// Negative and non-finite values are printed as they are, in ns (`-5 ns`, `NaN ns`), except
/// `+∞`, which is `inf s`.
pub fn fmt_ns(ns: impl Nanos) -> String {
    let ns = ns.as_f64();
    let (v, u) = if ns >= 1e9 {
        (ns / 1e9, "s")
    } else if ns >= 1e6 {
        (ns / 1e6, "ms")
    } else if ns >= 1e3 {
        (ns / 1e3, "µs")
    } else {
        return format!("{ns:.0} ns");
    };
    if v >= 100.0 {
        format!("{v:.0} {u}")
    } else if v >= 10.0 {
        format!("{v:.1} {u}")
    } else {
        format!("{v:.2} {u}")
    }
}

/// Formats a duration in nanoseconds as milliseconds with `decimals` decimals and a space
/// before the unit: `fmt_ms(12_345_678, 1)` is `12.3 ms`, `fmt_ms(12_345_678, 2)` is
/// `12.35 ms`, `fmt_ms(0, 3)` is `0.000 ms`. Rounds half to even at the last decimal.
pub fn fmt_ms(ns: impl Nanos, decimals: usize) -> String {
    format!("{:.decimals$} ms", ns.as_f64() / 1e6)
}

/// [`fmt_ms`] without the space, for fixed-width table columns: `fmt_ms_compact(12_345_678,
/// 3)` is `12.346ms`.
pub fn fmt_ms_compact(ns: impl Nanos, decimals: usize) -> String {
    format!("{:.decimals$}ms", ns.as_f64() / 1e6)
}

struct IntOr(&'static str, fn(&str) -> Result<u64, UnitError>);

impl Visitor<'_> for IntOr {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        (self.1)(v).map_err(E::custom)
    }
}

const BYTES: IntOr = IntOr(
    "a size in bytes (integer) or a quantity such as \"1Gi\"",
    parse_bytes,
);
const NANOS: IntOr = IntOr(
    "nanoseconds (integer) or a duration such as \"1.5s\"",
    parse_duration,
);

/// A duration in nanoseconds for configuration files: YAML and JSON accept an integer or a
/// duration string such as `"250ms"`; it serializes as the integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
#[serde(transparent)]
pub struct Dur(pub u64);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NANOS).map(Dur)
    }
}

/// Deserializes a byte count given as an integer or a quantity string.
pub(crate) fn bytes_de<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    d.deserialize_any(BYTES)
}

/// Deserializes an optional byte count given as an integer or a quantity string.
pub(crate) fn opt_bytes_de<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    d.deserialize_any(BYTES).map(Some)
}

/// Deserializes nanoseconds given as an integer or a duration string.
pub(crate) fn duration_de<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    d.deserialize_any(NANOS)
}

/// Deserializes optional nanoseconds given as an integer or a duration string.
pub(crate) fn duration_opt_de<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    d.deserialize_any(NANOS).map(Some)
}

/// A class parameter value: a string, or a number or boolean written without quotes (YAML
/// `read_iops: 2000`), kept as its text.
struct ParamValue(String);

impl<'de> Deserialize<'de> for ParamValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ParamValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a parameter value (string, number or boolean)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ParamValue, E> {
                Ok(ParamValue(v.to_owned()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ParamValue, E> {
                Ok(ParamValue(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ParamValue, E> {
                Ok(ParamValue(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ParamValue, E> {
                Ok(ParamValue(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ParamValue, E> {
                Ok(ParamValue(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// Deserializes `header.attributes_classes`: class name → parameter name → value, values
/// given as strings, numbers or booleans.
pub fn class_params_de<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<std::collections::BTreeMap<Name, std::collections::BTreeMap<String, String>>, D::Error>
{
    let m: std::collections::BTreeMap<Name, std::collections::BTreeMap<String, ParamValue>> =
        Deserialize::deserialize(d)?;
    Ok(m.into_iter()
        .map(|(k, v)| (k, v.into_iter().map(|(p, x)| (p, x.0)).collect()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("1Gi"), Ok(1 << 30));
        assert_eq!(parse_bytes("1.5Mi"), Ok(3 << 19));
        assert_eq!(parse_bytes("500M"), Ok(500_000_000));
        assert_eq!(parse_bytes("16Ei"), Err(UnitError::Overflow("16Ei".into())));
        assert!(matches!(parse_bytes("1.1"), Err(UnitError::Fraction(..))));
        assert!(matches!(parse_bytes("1GB"), Err(UnitError::Syntax(..))));
        assert!(matches!(parse_bytes(""), Err(UnitError::Syntax(..))));
        assert!(matches!(parse_bytes("."), Err(UnitError::Syntax(..))));
        assert!(matches!(parse_bytes("-1"), Err(UnitError::Syntax(..))));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_duration("250ms"), Ok(250_000_000));
        assert_eq!(parse_duration("2m"), Ok(120_000_000_000));
        assert_eq!(parse_duration("7ns"), Ok(7));
        assert!(matches!(
            parse_duration("1.5ns"),
            Err(UnitError::Fraction(..))
        ));
        assert!(matches!(parse_duration("10"), Err(UnitError::Syntax(..))));
        assert_eq!(fmt_secs(12_500_000_000), "12.5s");
        assert_eq!(fmt_secs(3_000_000_000), "3s");
        assert_eq!(fmt_secs(1_000), "0.000001s");
    }

    #[test]
    fn fmt_secs_edges() {
        assert_eq!(fmt_secs(0), "0s");
        assert_eq!(fmt_secs(1), "0.000000001s");
        assert_eq!(fmt_secs(u64::MAX), "18446744073.709551615s");
        for ns in [0, 1, 999_999_999, 1_000_000_001, 12_500_000_000, u64::MAX] {
            assert_eq!(parse_duration(&fmt_secs(ns)), Ok(ns), "{ns}");
        }
    }

    #[test]
    fn fmt_ns_units_and_digits() {
        for (ns, text) in [
            (0.0, "0 ns"),
            (1.0, "1 ns"),
            (850.0, "850 ns"),
            (999.0, "999 ns"),
            (1_000.0, "1.00 µs"),
            (1_250.0, "1.25 µs"),
            (12_500.0, "12.5 µs"),
            (125_000.0, "125 µs"),
            (1e6, "1.00 ms"),
            (12_500_000.0, "12.5 ms"),
            (123_456_789.0, "123 ms"),
            (1e9, "1.00 s"),
            (3_200_000_000.0, "3.20 s"),
            (250e9, "250 s"),
            (3600e9, "3600 s"),
        ] {
            assert_eq!(fmt_ns(ns), text, "{ns}");
        }
    }

    #[test]
    fn fmt_ns_edges() {
        // The unit is chosen before rounding: just below a threshold keeps the smaller unit.
        assert_eq!(fmt_ns(999.6), "1000 ns");
        assert_eq!(fmt_ns(999_999.0), "1000 µs");
        assert_eq!(fmt_ns(999_999_999.0), "1000 ms");
        // Rounding between the digit steps: 9.995 → two decimals, 99.96 → one.
        assert_eq!(fmt_ns(9_999_000.0), "10.00 ms");
        assert_eq!(fmt_ns(99_960_000.0), "100.0 ms");
        // Fractions of a nanosecond (a mean) round, ties to even.
        assert_eq!(fmt_ns(2.5), "2 ns");
        assert_eq!(fmt_ns(0.4), "0 ns");
        // Beyond u64 and outside the domain: printed as they are.
        assert_eq!(fmt_ns(u64::MAX as f64), "18446744074 s");
        assert_eq!(fmt_ns(-5.0), "-5 ns");
        assert_eq!(fmt_ns(-5e6), "-5000000 ns");
        assert_eq!(fmt_ns(f64::NAN), "NaN ns");
        assert_eq!(fmt_ns(f64::INFINITY), "inf s");
        assert_eq!(fmt_ns(f64::NEG_INFINITY), "-inf ns");
    }

    #[test]
    fn fmt_ms_decimals() {
        assert_eq!(fmt_ms(12_345_678, 0), "12 ms");
        assert_eq!(fmt_ms(12_345_678, 1), "12.3 ms");
        assert_eq!(fmt_ms(12_345_678, 2), "12.35 ms");
        assert_eq!(fmt_ms(12_345_678, 3), "12.346 ms");
        assert_eq!(fmt_ms(0, 1), "0.0 ms");
        assert_eq!(fmt_ms(0, 3), "0.000 ms");
        assert_eq!(fmt_ms(1, 3), "0.000 ms");
        assert_eq!(fmt_ms(500, 3), "0.001 ms");
        assert_eq!(fmt_ms(50_000, 1), "0.1 ms");
        assert_eq!(fmt_ms(3_600_000_000_000, 1), "3600000.0 ms");
        assert_eq!(fmt_ms(u64::MAX, 2), "18446744073709.55 ms");
        assert_eq!(fmt_ms_compact(12_345_678, 3), "12.346ms");
        assert_eq!(fmt_ms_compact(0, 3), "0.000ms");
        assert_eq!(fmt_ms_compact(u64::MAX, 3), "18446744073709.551ms");
        // f64 input (a stored check value, a mean) formats as the same count would.
        assert_eq!(fmt_ms(12_345_678.0, 3), fmt_ms(12_345_678u64, 3));
        assert_eq!(fmt_ms(1_250.5, 3), "0.001 ms");
        assert_eq!(fmt_ms(-2e6, 1), "-2.0 ms");
        assert_eq!(fmt_ms(f64::NAN, 1), "NaN ms");
        // u64 input formats as its f64 value would (fmt_ns included).
        assert_eq!(fmt_ns(1_250u64), fmt_ns(1_250.0));
    }
}
