//! The sim's distributions: an op type's latency ([`Latency`], with its flag form, checks,
//! mean, median and draw) and an injected stall ([`Stall`]).

use serde::{Deserialize, Serialize};
use trace_format::units::Dur;

/// A latency distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "snake_case", deny_unknown_fields)]
pub enum Latency {
    /// Always `value`.
    Constant {
        /// The latency.
        value: Dur,
    },
    /// Uniform in `[min, max]`.
    Uniform {
        /// Lower bound.
        min: Dur,
        /// Upper bound.
        max: Dur,
    },
    /// Exponential with this mean.
    Exponential {
        /// Mean.
        mean: Dur,
    },
    /// Lognormal: `median · e^(sigma·Z)`.
    Lognormal {
        /// Median.
        median: Dur,
        /// Shape (standard deviation of the log).
        sigma: f64,
    },
}

impl Latency {
    /// Parses the flag form `constant:1ms`, `uniform:1ms:5ms`, `exponential:10ms`,
    /// `lognormal:50ms:0.5`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let d = |i: usize| -> Result<Dur, String> {
            let p = parts
                .get(i)
                .ok_or_else(|| format!("{s:?}: missing field {i}"))?;
            trace_format::units::parse_duration(p)
                .map(Dur)
                .map_err(|e| format!("{s:?}: {e}"))
        };
        let l = match parts[0] {
            "constant" if parts.len() == 2 => Latency::Constant { value: d(1)? },
            "uniform" if parts.len() == 3 => Latency::Uniform {
                min: d(1)?,
                max: d(2)?,
            },
            "exponential" if parts.len() == 2 => Latency::Exponential { mean: d(1)? },
            "lognormal" if parts.len() == 3 => Latency::Lognormal {
                median: d(1)?,
                sigma: parts[2].parse().map_err(|e| format!("{s:?}: sigma: {e}"))?,
            },
            _ => {
                return Err(format!(
                    "{s:?}: expected constant:D, uniform:MIN:MAX, exponential:MEAN or \
                     lognormal:MEDIAN:SIGMA"
                ));
            }
        };
        l.check().map_err(|e| format!("{s:?}: {e}"))?;
        Ok(l)
    }

    pub(crate) fn check(&self) -> Result<(), String> {
        match self {
            Latency::Uniform { min, max } if min.0 > max.0 => Err("min is above max".into()),
            Latency::Lognormal { sigma, .. } if !(sigma.is_finite() && *sigma >= 0.0) => {
                Err("sigma must be finite and ≥ 0".into())
            }
            _ => Ok(()),
        }
    }

    /// The mean, ns (of the distribution; draws are clamped to 1 h, which moves it only for
    /// distributions with mass beyond that).
    pub fn mean(&self) -> f64 {
        match self {
            Latency::Constant { value } => value.0 as f64,
            Latency::Uniform { min, max } => (min.0 as f64 + max.0 as f64) / 2.0,
            Latency::Exponential { mean } => mean.0 as f64,
            Latency::Lognormal { median, sigma } => median.0 as f64 * (sigma * sigma / 2.0).exp(),
        }
    }

    /// The median, ns.
    pub fn median(&self) -> f64 {
        match self {
            Latency::Constant { value } => value.0 as f64,
            Latency::Uniform { min, max } => (min.0 as f64 + max.0 as f64) / 2.0,
            Latency::Exponential { mean } => mean.0 as f64 * std::f64::consts::LN_2,
            Latency::Lognormal { median, .. } => median.0 as f64,
        }
    }

    /// A draw from two independent uniforms in (0, 1).
    pub fn sample(&self, u1: f64, u2: f64) -> u64 {
        let v = match self {
            Latency::Constant { value } => return value.0,
            Latency::Uniform { min, max } => min.0 as f64 + u1 * (max.0 - min.0) as f64,
            Latency::Exponential { mean } => -(mean.0 as f64) * (1.0 - u1).ln(),
            Latency::Lognormal { median, sigma } => {
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                median.0 as f64 * (sigma * z).exp()
            }
        };
        v.clamp(0.0, 3.6e12) as u64
    }
}

/// An injected stall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stall {
    /// Start, from the run origin.
    pub at: Dur,
    /// Length.
    pub duration: Dur,
}

impl Stall {
    /// Parses the flag form `AT+DURATION`, e.g. `10s+2s`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (a, d) = s
            .split_once('+')
            .ok_or_else(|| format!("{s:?}: expected AT+DURATION, e.g. 10s+2s"))?;
        let p = |x: &str| {
            trace_format::units::parse_duration(x)
                .map(Dur)
                .map_err(|e| format!("{s:?}: {e}"))
        };
        Ok(Stall {
            at: p(a)?,
            duration: p(d)?,
        })
    }
}
