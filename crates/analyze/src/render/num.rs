//! Numbers as the report prints them (durations in ns: [`trace_format::units::fmt_ns`]).

/// A number with two decimals, or none when whole or from 100 on: `0.25`, `3`, `1234`.
pub(crate) fn fmt_num(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// A fraction with one decimal: `0.5`.
pub(crate) fn fmt_frac(v: f64) -> String {
    format!("{v:.1}")
}

/// Seconds as [`fmt_num`] writes them: `12.50 s`, `3 s`.
pub(crate) fn fmt_s(v: f64) -> String {
    format!("{} s", fmt_num(v))
}
