//! The thresholds of the engine checks and the lateness limits they give a run.
//!
//! The limits scale with what is measured: `start_fraction` of a reference latency, clamped.
//! The reference is the smallest median service time the run measured, or one the user gave
//! (`--validity reference=DUR`, e.g. the smallest latency SLO a capacity search judges by). A
//! given reference may loosen the limits, but only up to `reference_share` of the latency the
//! run measured: a tool delay that is a large share of what it delays makes the numbers the
//! tool's, whatever the reference says (docs/replay.md, Run validity).

use serde::{Deserialize, Serialize};

use crate::record::Limits;

use trace_format::units::fmt_ms;

/// Thresholds of the engine checks (recorded in the manifest with the run options; the
/// limits a run was held to are in its summary's [`super::Validity::limits`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ValidityOptions {
    /// A fixed limit of the lateness p99 checks, ns (none: scaled, see [`Self::limits`]).
    pub start_p99_ns: Option<u64>,
    /// A fixed limit of the lateness p99.9 checks, ns (none: 10 × the p99 limit).
    pub start_p999_ns: Option<u64>,
    /// The latency the lateness is judged against, ns: e.g. the smallest latency SLO of a
    /// capacity search (none: the smallest median service time the run measured).
    pub reference_ns: Option<u64>,
    /// How far a given reference may loosen a limit: at most this fraction of the measured
    /// latency the limit would otherwise be scaled from (0.1 = 10 %; the run's smallest
    /// median, an op type's own, a stream's I/O).
    pub reference_share: f64,
    /// The scaled p99 limit as a fraction of the reference (0.01 = 1 %).
    pub start_fraction: f64,
    /// Bounds of the scaled p99 limit, ns.
    pub start_min_ns: u64,
    /// See `start_min_ns`.
    pub start_max_ns: u64,
    /// Fewest events behind a p99 check for it to be judged (a p99.9 needs ten times as
    /// many); fewer: `not judged`.
    pub min_events: u64,
    /// Largest shortfall of the achieved dispatch rate below the intended one, over the run
    /// and between consecutive windows (fraction, 0.02 = 2 %).
    pub rate_tolerance: f64,
    /// Window of intended time for the rate check, ns (0: no window check).
    pub window_ns: u64,
    /// Fewest events in a window for it to be judged.
    pub window_events: u64,
    /// Largest mean busy fraction of the runtime's workers over the run (origin until every event finished).
    pub workers_busy: f64,
    /// Largest fraction of the provider's requests that waited in a client-side limiter.
    pub throttled: f64,
    /// Largest tool error bound, as a fraction of the percentile it bounds, for an op type's
    /// numbers to be `valid` (0.05 = 5 %; docs/replay.md, Run validity).
    pub tool_tolerance: f64,
}

impl Default for ValidityOptions {
    fn default() -> Self {
        Self {
            start_p99_ns: None,
            start_p999_ns: None,
            reference_ns: None,
            reference_share: 0.1,
            start_fraction: 0.01,
            start_min_ns: 20_000,
            start_max_ns: 10_000_000,
            min_events: 100,
            rate_tolerance: 0.02,
            window_ns: 1_000_000_000,
            window_events: 100,
            workers_busy: 0.9,
            throttled: 0.0,
            tool_tolerance: 0.05,
        }
    }
}

impl ValidityOptions {
    /// The lateness limits: fixed ones as given, else `start_fraction` of the reference
    /// (`reference_ns`, else `measured`: the smallest median service time, with its op type)
    /// clamped to [`start_min_ns`, `start_max_ns`]; the p99.9 limit is ten times the p99
    /// one unless given. A given reference loosens a limit only up to `reference_share` of
    /// `measured` (at least `start_min_ns`): a reference of 1 s does not make a 0.4 ms delay
    /// of 1 ms operations the system's. Without any reference the limits are the upper bounds.
    pub fn limits(&self, measured: Option<(&str, u64)>) -> Limits {
        let (reference, what) = match (self.reference_ns, measured) {
            (Some(r), _) => (Some(r), "the given reference latency".to_owned()),
            (None, Some((op, r))) => (Some(r), format!("{op} median service time")),
            (None, None) => (None, String::new()),
        };
        let scaled = match reference {
            Some(r) => ((r as f64 * self.start_fraction) as u64)
                .clamp(self.start_min_ns, self.start_max_ns.max(self.start_min_ns)),
            None => self.start_max_ns,
        };
        let cap = match (self.reference_ns, measured) {
            (Some(_), Some((op, m))) => {
                let cap = ((m as f64 * self.reference_share) as u64).max(self.start_min_ns);
                (cap < scaled).then_some((cap, op, m))
            }
            _ => None,
        };
        let p99 = self
            .start_p99_ns
            .unwrap_or(cap.map_or(scaled, |(c, _, _)| c));
        let p999 = self.start_p999_ns.unwrap_or(p99.saturating_mul(10));
        let basis = match (self.start_p99_ns, reference, cap) {
            (Some(_), _, _) => "fixed (--validity start.p99)".to_owned(),
            (None, Some(r), Some((_, op, m))) => format!(
                "{:.2} % of {op} median service time {}, at least {}: a given reference \
                 loosens the limits only that far; {:.2} % of the given reference latency {} \
                 would be {}",
                self.reference_share * 100.0,
                fmt_ms(m, 3),
                fmt_ms(self.start_min_ns, 3),
                self.start_fraction * 100.0,
                fmt_ms(r, 3),
                fmt_ms(scaled, 3)
            ),
            (None, Some(r), None) => format!(
                "{:.2} % of {what} {}, clamped to [{}, {}]",
                self.start_fraction * 100.0,
                fmt_ms(r, 3),
                fmt_ms(self.start_min_ns, 3),
                fmt_ms(self.start_max_ns, 3)
            ),
            (None, None, _) => "no latency measured: the upper bound".to_owned(),
        };
        Limits {
            p99_ns: p99,
            p999_ns: p999,
            reference_ns: reference,
            basis,
            min_events: self.min_events,
            tool_tolerance: Some(self.tool_tolerance),
        }
    }

    /// Sets one threshold from `KEY=VALUE` (the CLI's `--validity`): `start.p99`,
    /// `start.p99.9` (fixed limits), `reference`, `reference.share`, `start.min`, `start.max`, `window`
    /// (durations such as `100us`), `start.fraction`, `rate`, `workers`, `throttled`
    /// `tool` (fractions or percentages: `0.02`, `2%`), `min.events`, `window.events`
    /// (counts).
    pub fn set(&mut self, kv: &str) -> Result<(), String> {
        let (key, value) = kv
            .split_once('=')
            .ok_or_else(|| format!("{kv:?}: expected KEY=VALUE"))?;
        let dur = || {
            trace_format::units::parse_duration(value).map_err(|e| format!("{key}={value}: {e}"))
        };
        let frac = || parse_fraction(value).map_err(|e| format!("{key}={value}: {e}"));
        let count = || value.parse().map_err(|e| format!("{key}={value}: {e}"));
        match key {
            "start.p99" => self.start_p99_ns = Some(dur()?),
            "start.p99.9" => self.start_p999_ns = Some(dur()?),
            "reference" => self.reference_ns = Some(dur()?),
            "reference.share" => self.reference_share = frac()?,
            "start.fraction" => self.start_fraction = frac()?,
            "start.min" => self.start_min_ns = dur()?,
            "start.max" => self.start_max_ns = dur()?,
            "min.events" => self.min_events = count()?,
            "rate" => self.rate_tolerance = frac()?,
            "window" => self.window_ns = dur()?,
            "window.events" => self.window_events = count()?,
            "workers" => self.workers_busy = frac()?,
            "throttled" => self.throttled = frac()?,
            // A bound may be larger than its figure: any ratio ≥ 0 (`tool=1000%` judges
            // nothing imprecise but figures mostly the tool's).
            "tool" => {
                self.tool_tolerance =
                    parse_ratio(value).map_err(|e| format!("{key}={value}: {e}"))?;
            }
            _ => {
                return Err(format!(
                    "unknown validity check {key:?}; expected start.p99, start.p99.9, \
                     reference, reference.share, start.fraction, start.min, start.max, min.events, rate, \
                     window, window.events, workers, throttled or tool"
                ));
            }
        }
        Ok(())
    }
}

/// `0.05` or `5%`, any finite value ≥ 0.
fn parse_ratio(s: &str) -> Result<f64, String> {
    let v = match s.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => s.trim().parse::<f64>(),
    }
    .map_err(|e| format!("not a fraction or percentage ({e})"))?;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err("must be finite and at least 0".into())
    }
}

/// `0.02` or `2%`, within [0, 1].
fn parse_fraction(s: &str) -> Result<f64, String> {
    parse_ratio(s).and_then(|v| {
        if v <= 1.0 {
            Ok(v)
        } else {
            Err("must be between 0 and 1 (0 % and 100 %)".into())
        }
    })
}
