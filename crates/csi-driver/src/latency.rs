//! Injected provider latency: per CSI operation a delay distribution, an optional stall (a
//! rare long pause) and an optional failure rate, so the driver can stand in for a slow or
//! flaky storage backend.
//!
//! Sources, most specific first: the StorageClass / VolumeSnapshotClass parameters of the
//! object (`latency.<Op>`, `stall.<Op>`, `failRate.<Op>`, `<Op>` a CSI method name such as
//! `CreateVolume`, or `*` for every operation), then the config file (`--latency-config`,
//! the same strings per op). Each field is resolved on its own. Distributions are a small
//! local set written as one string (`fixed 10ms`, `uniform 5ms 20ms`, `exp 10ms`,
//! `lognormal 10ms 0.5` with the median first); sampling uses a seeded SplitMix64.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A latency distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Dist {
    /// No delay.
    Zero,
    /// Always this long.
    Fixed(Duration),
    /// Uniform between the two bounds.
    Uniform(Duration, Duration),
    /// Exponential with this mean.
    Exp(Duration),
    /// Lognormal with this median and σ of ln X.
    Lognormal(Duration, f64),
}

/// A malformed latency setting; names the key and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {value:?}: {reason}")]
pub struct LatencyError {
    /// The parameter key or config field.
    pub key: String,
    /// The value given.
    pub value: String,
    /// What is wrong with it.
    pub reason: String,
}

fn bad(key: &str, value: &str, reason: impl Into<String>) -> LatencyError {
    LatencyError {
        key: key.to_owned(),
        value: value.to_owned(),
        reason: reason.into(),
    }
}

/// Parses `250ms`, `1.5s`, `20us`, `100ns`, `2m`; a bare `0` is zero.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = s.split_at(split);
    let v: f64 = num.trim().parse().ok()?;
    let scale = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        _ => return None,
    };
    // `try_`: a finite value past the range of `Duration` (e.g. `1e30s`) is an error too.
    Duration::try_from_secs_f64(v * scale).ok()
}

impl Dist {
    /// Parses a distribution string (see the module docs); `key` names it in errors.
    pub fn parse(key: &str, s: &str) -> Result<Self, LatencyError> {
        let words: Vec<&str> = s.split_whitespace().collect();
        let dur = |w: &str| {
            parse_duration(w).ok_or_else(|| bad(key, s, format!("{w:?} is not a duration")))
        };
        match words.as_slice() {
            [] | ["none"] | ["0"] => Ok(Self::Zero),
            ["fixed", d] => Ok(Self::Fixed(dur(d)?)),
            ["uniform", a, b] => {
                let (a, b) = (dur(a)?, dur(b)?);
                if a > b {
                    return Err(bad(key, s, "lower bound above upper bound"));
                }
                Ok(Self::Uniform(a, b))
            }
            ["exp", m] => Ok(Self::Exp(dur(m)?)),
            ["lognormal", m, sigma] => {
                let sg: f64 = sigma
                    .parse()
                    .ok()
                    .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| bad(key, s, "sigma must be a number ≥ 0"))?;
                Ok(Self::Lognormal(dur(m)?, sg))
            }
            [d] => Ok(Self::Fixed(dur(d)?)),
            _ => Err(bad(
                key,
                s,
                "expected fixed D | uniform A B | exp MEAN | lognormal MEDIAN SIGMA",
            )),
        }
    }

    /// One draw.
    pub fn sample(&self, rng: &mut Rng) -> Duration {
        let secs = |d: &Duration| d.as_secs_f64();
        let v = match self {
            Self::Zero => 0.0,
            Self::Fixed(d) => secs(d),
            Self::Uniform(a, b) => secs(a) + (secs(b) - secs(a)) * rng.unit(),
            Self::Exp(m) => -secs(m) * (1.0 - rng.unit()).ln(),
            Self::Lognormal(m, sigma) => secs(m) * (sigma * rng.normal()).exp(),
        };
        Duration::try_from_secs_f64(v).unwrap_or(Duration::ZERO)
    }
}

/// A seeded SplitMix64 generator.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator with this seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    fn next_u64(&mut self) -> u64 {
        trace_format::splitmix::next(&mut self.0)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        #[allow(clippy::cast_precision_loss)] // 53 bits are exact in f64
        let v = (self.next_u64() >> 11) as f64;
        v / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit();
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// One operation's settings as written in the config file (strings as in the parameters).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpSpec {
    /// Delay distribution, e.g. `lognormal 50ms 0.4`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<String>,
    /// `PROBABILITY DURATION`, e.g. `0.01 5s`: with that probability, pause that much more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall: Option<String>,
    /// Probability in [0, 1] that the call fails before doing anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_rate: Option<f64>,
    /// The gRPC code of those failures (`UNAVAILABLE` when absent): a retryable code makes
    /// the sidecars retry, a final one (e.g. `INTERNAL`) makes them give up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_code: Option<String>,
}

/// The latency config file (`--latency-config FILE`, JSON).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyConfig {
    /// RNG seed (default: from the clock at start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Per CSI method name (`CreateVolume`, …) or `*`.
    #[serde(default)]
    pub ops: BTreeMap<String, OpSpec>,
}

/// What to inject into one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Sampled delay.
    pub delay: Duration,
    /// Extra stall, when one was drawn.
    pub stall: Duration,
    /// Fail the call after the delay.
    pub fail: bool,
    /// With this code.
    pub fail_code: tonic::Code,
}

impl Default for Plan {
    fn default() -> Self {
        Self {
            delay: Duration::ZERO,
            stall: Duration::ZERO,
            fail: false,
            fail_code: tonic::Code::Unavailable,
        }
    }
}

impl Plan {
    /// Delay plus stall.
    pub fn total(&self) -> Duration {
        self.delay.saturating_add(self.stall)
    }
}

fn parse_stall(key: &str, s: &str) -> Result<(f64, Duration), LatencyError> {
    let w: Vec<&str> = s.split_whitespace().collect();
    let [p, d] = w.as_slice() else {
        return Err(bad(key, s, "expected PROBABILITY DURATION, e.g. 0.01 5s"));
    };
    let p = parse_prob(key, p)?;
    let d = parse_duration(d).ok_or_else(|| bad(key, s, "bad duration"))?;
    Ok((p, d))
}

/// The gRPC codes a failure may be injected with, by their names in the gRPC spec.
const CODES: &[(&str, tonic::Code)] = &[
    ("CANCELLED", tonic::Code::Cancelled),
    ("UNKNOWN", tonic::Code::Unknown),
    ("INVALID_ARGUMENT", tonic::Code::InvalidArgument),
    ("DEADLINE_EXCEEDED", tonic::Code::DeadlineExceeded),
    ("NOT_FOUND", tonic::Code::NotFound),
    ("ALREADY_EXISTS", tonic::Code::AlreadyExists),
    ("PERMISSION_DENIED", tonic::Code::PermissionDenied),
    ("RESOURCE_EXHAUSTED", tonic::Code::ResourceExhausted),
    ("FAILED_PRECONDITION", tonic::Code::FailedPrecondition),
    ("ABORTED", tonic::Code::Aborted),
    ("OUT_OF_RANGE", tonic::Code::OutOfRange),
    ("UNIMPLEMENTED", tonic::Code::Unimplemented),
    ("INTERNAL", tonic::Code::Internal),
    ("UNAVAILABLE", tonic::Code::Unavailable),
    ("DATA_LOSS", tonic::Code::DataLoss),
    ("UNAUTHENTICATED", tonic::Code::Unauthenticated),
];

fn parse_code(key: &str, s: &str) -> Result<tonic::Code, LatencyError> {
    CODES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(s.trim()))
        .map(|&(_, c)| c)
        .ok_or_else(|| {
            bad(
                key,
                s,
                "expected a gRPC code name, e.g. UNAVAILABLE or INTERNAL",
            )
        })
}

fn parse_prob(key: &str, s: &str) -> Result<f64, LatencyError> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|p| (0.0..=1.0).contains(p))
        .ok_or_else(|| bad(key, s, "probability must be in [0, 1]"))
}

/// Checks every latency-related key of a parameter map (unknown other keys are ignored).
pub fn validate_params(params: &BTreeMap<String, String>) -> Result<(), LatencyError> {
    for (k, v) in params {
        if k.starts_with("latency.") {
            Dist::parse(k, v)?;
        } else if k.starts_with("stall.") {
            parse_stall(k, v)?;
        } else if k.starts_with("failRate.") {
            parse_prob(k, v)?;
        } else if k.starts_with("failCode.") {
            parse_code(k, v)?;
        }
    }
    Ok(())
}

impl LatencyConfig {
    /// Checks every string in the file.
    pub fn validate(&self) -> Result<(), LatencyError> {
        for (op, s) in &self.ops {
            if let Some(l) = &s.latency {
                Dist::parse(&format!("ops.{op}.latency"), l)?;
            }
            if let Some(st) = &s.stall {
                parse_stall(&format!("ops.{op}.stall"), st)?;
            }
            if let Some(f) = s.fail_rate {
                parse_prob(&format!("ops.{op}.fail_rate"), &f.to_string())?;
            }
            if let Some(c) = &s.fail_code {
                parse_code(&format!("ops.{op}.fail_code"), c)?;
            }
        }
        Ok(())
    }

    /// Draws what to inject into one call of `op` on an object with these class parameters.
    /// Malformed strings count as absent here (they are rejected when the object is created).
    pub fn plan(&self, op: &str, params: &BTreeMap<String, String>, rng: &mut Rng) -> Plan {
        let param = |prefix: &str| {
            params
                .get(&format!("{prefix}.{op}"))
                .or_else(|| params.get(&format!("{prefix}.*")))
                .cloned()
        };
        let file = |f: &dyn Fn(&OpSpec) -> Option<String>| {
            self.ops
                .get(op)
                .and_then(f)
                .or_else(|| self.ops.get("*").and_then(f))
        };
        let latency = param("latency").or_else(|| file(&|s| s.latency.clone()));
        let stall = param("stall").or_else(|| file(&|s| s.stall.clone()));
        let fail = param("failRate").or_else(|| file(&|s| s.fail_rate.map(|f| f.to_string())));
        let code = param("failCode").or_else(|| file(&|s| s.fail_code.clone()));
        let mut plan = Plan::default();
        if let Some(d) = latency.and_then(|l| Dist::parse(op, &l).ok()) {
            plan.delay = d.sample(rng);
        }
        if let Some((p, d)) = stall.and_then(|s| parse_stall(op, &s).ok())
            && rng.unit() < p
        {
            plan.stall = d;
        }
        if let Some(p) = fail.and_then(|f| parse_prob(op, &f).ok()) {
            plan.fail = rng.unit() < p;
        }
        if let Some(c) = code.and_then(|c| parse_code(op, &c).ok()) {
            plan.fail_code = c;
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_samples() {
        let mut rng = Rng::new(7);
        assert_eq!(Dist::parse("k", "").unwrap(), Dist::Zero);
        assert_eq!(
            Dist::parse("k", "fixed 10ms").unwrap().sample(&mut rng),
            Duration::from_millis(10)
        );
        let u = Dist::parse("k", "uniform 1ms 2ms").unwrap();
        for _ in 0..100 {
            let v = u.sample(&mut rng);
            assert!(v >= Duration::from_millis(1) && v <= Duration::from_millis(2));
        }
        assert!(Dist::parse("k", "uniform 2ms 1ms").is_err());
        assert!(Dist::parse("k", "lognormal 1ms x").is_err());
        let e = Dist::parse("latency.CreateVolume", "bogus 1").unwrap_err();
        assert_eq!(e.key, "latency.CreateVolume");
    }

    /// Found while writing the `csi_latency` fuzz target: `Duration::from_secs_f64` panics
    /// past ~584 billion years, and adding a huge delay and stall overflowed.
    #[test]
    fn durations_past_the_duration_range_are_errors_not_panics() {
        assert_eq!(parse_duration("1e30s"), None);
        assert!(Dist::parse("latency.CreateVolume", "fixed 1e30s").is_err());
        assert!(
            validate_params(&BTreeMap::from([(
                "stall.*".to_owned(),
                "1 1e300m".to_owned()
            )]))
            .is_err()
        );
        let big = Duration::from_secs(u64::MAX / 2 + 1);
        let plan = Plan {
            delay: big,
            stall: big,
            ..Plan::default()
        };
        assert_eq!(plan.total(), Duration::MAX);
    }

    #[test]
    fn params_override_file_per_field() {
        let cfg = LatencyConfig {
            seed: None,
            ops: BTreeMap::from([(
                "*".to_owned(),
                OpSpec {
                    latency: Some("fixed 5ms".into()),
                    stall: Some("1 1s".into()),
                    fail_rate: None,
                    fail_code: Some("RESOURCE_EXHAUSTED".into()),
                },
            )]),
        };
        let params = BTreeMap::from([
            ("latency.CreateVolume".to_owned(), "fixed 7ms".to_owned()),
            ("failRate.*".to_owned(), "1".to_owned()),
            ("failCode.CreateVolume".to_owned(), "internal".to_owned()),
        ]);
        let mut rng = Rng::new(1);
        let p = cfg.plan("CreateVolume", &params, &mut rng);
        assert_eq!(p.delay, Duration::from_millis(7));
        assert_eq!(p.stall, Duration::from_secs(1));
        assert!(p.fail);
        assert_eq!(p.fail_code, tonic::Code::Internal);
        let r = cfg.plan("CreateSnapshot", &params, &mut rng);
        assert_eq!(r.fail_code, tonic::Code::ResourceExhausted, "from the file");
        assert!(
            validate_params(&BTreeMap::from([(
                "failCode.CreateSnapshot".to_owned(),
                "TEAPOT".to_owned()
            )]))
            .is_err()
        );
        let q = cfg.plan("DeleteVolume", &BTreeMap::new(), &mut rng);
        assert_eq!(q.delay, Duration::from_millis(5));
        assert!(!q.fail);
    }
}
