//! Lifetime distributions: the YAML spec ([`Dist`]) and its compiled, validated form
//! ([`Distribution`]) with `sample`, `cdf`, `mean` and the equilibrium residual sampler.
//!
//! All values are seconds. Sampling is by inverse transform where a closed form exists, so
//! one uniform gives one draw and the stream stays easy to reason about; gamma uses
//! Marsaglia–Tsang.
//!
//! **Residual lifetimes.** A container alive at a random instant of a stationary renewal
//! process has a remaining life with density (1 − F(x)) / E[X]. Every family samples it
//! exactly as `U · X*`, where `X*` is drawn from the length-biased density x f(x) / E[X] (the
//! inspection paradox: the life covering a random instant is length-biased, and the instant is
//! uniform within it). Length-biased forms are closed: lognormal(μ + σ², σ), Gamma(k + 1, θ),
//! Weibull λ·G^{1/k} with G ~ Gamma(1 + 1/k), Pareto(α − 1, xₘ), mixtures re-weighted by
//! wᵢ·E[Xᵢ], and for the empirical CDF a segment chosen by its share of the mean, then x ∝ x
//! on a linear segment or uniform on a log-linear one. No numerical integration, no truncation.
//!
//! **Empirical CDF.** Points `(le, p)` with `p` cumulative in [0, 1] and the last `p = 1`;
//! below the first point the CDF starts at `(min, 0)`. Between points it is interpolated
//! linearly in log x (`log_linear`, the default: right for lifetimes spanning seconds to
//! weeks) or linearly in x (`linear`). A log-linear segment starting at 0 is linear.

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

use crate::rng::SynthRng;
use special::{gamma_pq, ln_gamma, norm_cdf};

/// A lifetime distribution as written in a model (seconds; durations such as `"5m"` accepted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Dist {
    /// Always `value`.
    Constant {
        /// The value, seconds.
        #[serde(deserialize_with = "secs_de")]
        value: f64,
    },
    /// Exponential with the given mean.
    Exponential {
        /// Mean, seconds.
        #[serde(deserialize_with = "secs_de")]
        mean: f64,
    },
    /// Lognormal: ln X ~ N(mu, sigma²), X in seconds.
    Lognormal {
        /// Mean of ln X (ln seconds).
        mu: f64,
        /// Standard deviation of ln X.
        sigma: f64,
    },
    /// Weibull: F(x) = 1 − exp(−(x/scale)^shape).
    Weibull {
        /// Shape k.
        shape: f64,
        /// Scale λ, seconds.
        #[serde(deserialize_with = "secs_de")]
        scale: f64,
    },
    /// Gamma with shape k and scale θ (mean kθ).
    Gamma {
        /// Shape k.
        shape: f64,
        /// Scale θ, seconds.
        #[serde(deserialize_with = "secs_de")]
        scale: f64,
    },
    /// Pareto (type I): F(x) = 1 − (scale/x)^shape for x ≥ scale.
    Pareto {
        /// Tail index α (the mean is finite only for α > 1).
        shape: f64,
        /// Minimum xₘ, seconds.
        #[serde(deserialize_with = "secs_de")]
        scale: f64,
    },
    /// A piecewise CDF through given points.
    Empirical(Empirical),
    /// A weighted mixture.
    Mixture(Vec<Component>),
    /// A named preset (see `docs/synth.md`), e.g. `sysdig-2019`.
    Preset(String),
}

/// A piecewise empirical CDF.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empirical {
    /// Points in increasing `le`; the last must have `p = 1`.
    pub points: Vec<CdfPoint>,
    /// How to interpolate between points.
    #[serde(default)]
    pub interpolation: Interpolation,
    /// Where the CDF is 0, seconds (default 0).
    #[serde(default, deserialize_with = "secs_de")]
    pub min: f64,
}

/// One point of an empirical CDF: P(X ≤ le) = p.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CdfPoint {
    /// The value, seconds.
    #[serde(deserialize_with = "secs_de")]
    pub le: f64,
    /// Cumulative probability in [0, 1].
    pub p: f64,
}

/// Interpolation between the points of an empirical CDF.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Interpolation {
    /// Linear in ln x (the CDF is a straight line on a log-x plot).
    #[default]
    LogLinear,
    /// Linear in x.
    Linear,
}

/// One component of a mixture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Component {
    /// Relative weight (normalised over the mixture).
    pub weight: f64,
    /// The component distribution.
    pub dist: Dist,
}

/// Why a distribution spec is invalid: the field path below the spec and the reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct DistError {
    /// Field path, e.g. `lifetime.mixture[1].dist.weibull.shape`.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

#[derive(Debug, Clone)]
struct Segment {
    a: f64,
    b: f64,
    pa: f64,
    pb: f64,
    log: bool,
}

impl Segment {
    fn mean_part(&self) -> f64 {
        let dp = self.pb - self.pa;
        if dp <= 0.0 {
            0.0
        } else if self.log {
            dp * (self.b - self.a) / (self.b / self.a).ln()
        } else {
            dp * 0.5 * (self.a + self.b)
        }
    }
}

#[derive(Debug, Clone)]
enum Kind {
    Constant(f64),
    Exponential(f64),
    Lognormal {
        mu: f64,
        sigma: f64,
    },
    Weibull {
        k: f64,
        lambda: f64,
    },
    Gamma {
        k: f64,
        theta: f64,
    },
    Pareto {
        alpha: f64,
        xm: f64,
    },
    Empirical {
        segs: Vec<Segment>,
        lb_cum: Vec<f64>,
    },
    Mixture {
        parts: Vec<(f64, Distribution)>,
        cum: Vec<f64>,
        lb_cum: Vec<f64>,
    },
}

/// A validated distribution, ready to sample.
#[derive(Debug, Clone)]
pub struct Distribution {
    kind: Kind,
    mean: f64,
    spec: Dist,
}

fn err(path: &str, field: &str, message: impl Into<String>) -> DistError {
    DistError {
        path: if field.is_empty() {
            path.to_owned()
        } else {
            format!("{path}.{field}")
        },
        message: message.into(),
    }
}

fn positive(path: &str, field: &str, v: f64) -> Result<f64, DistError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(err(
            path,
            field,
            format!("must be a positive number, not {v}"),
        ))
    }
}

/// Picks the index whose cumulative weight first reaches `u·total`.
fn pick(cum: &[f64], u: f64) -> usize {
    let target = u * cum.last().copied().unwrap_or(0.0);
    cum.partition_point(|&c| c < target)
        .min(cum.len().saturating_sub(1))
}

impl Distribution {
    /// Validates and compiles a spec; `path` names it in errors (e.g. `lifetime`).
    pub fn new(spec: &Dist, path: &str) -> Result<Self, DistError> {
        let kind = match spec {
            Dist::Constant { value } => Kind::Constant(positive(path, "constant.value", *value)?),
            Dist::Exponential { mean } => {
                Kind::Exponential(positive(path, "exponential.mean", *mean)?)
            }
            Dist::Lognormal { mu, sigma } => {
                if !mu.is_finite() {
                    return Err(err(path, "lognormal.mu", "must be a finite number"));
                }
                Kind::Lognormal {
                    mu: *mu,
                    sigma: positive(path, "lognormal.sigma", *sigma)?,
                }
            }
            Dist::Weibull { shape, scale } => Kind::Weibull {
                k: positive(path, "weibull.shape", *shape)?,
                lambda: positive(path, "weibull.scale", *scale)?,
            },
            Dist::Gamma { shape, scale } => Kind::Gamma {
                k: positive(path, "gamma.shape", *shape)?,
                theta: positive(path, "gamma.scale", *scale)?,
            },
            Dist::Pareto { shape, scale } => Kind::Pareto {
                alpha: positive(path, "pareto.shape", *shape)?,
                xm: positive(path, "pareto.scale", *scale)?,
            },
            Dist::Empirical(e) => empirical(e, &format!("{path}.empirical"))?,
            Dist::Mixture(comps) => {
                if comps.is_empty() {
                    return Err(err(path, "mixture", "needs at least one component"));
                }
                let mut parts = Vec::with_capacity(comps.len());
                for (i, c) in comps.iter().enumerate() {
                    let p = format!("{path}.mixture[{i}]");
                    let w = c.weight;
                    if !(w.is_finite() && w >= 0.0) {
                        return Err(err(&p, "weight", format!("must be ≥ 0, not {w}")));
                    }
                    parts.push((w, Distribution::new(&c.dist, &format!("{p}.dist"))?));
                }
                let total: f64 = parts.iter().map(|(w, _)| w).sum();
                if total <= 0.0 {
                    return Err(err(path, "mixture", "the weights add up to 0"));
                }
                let mut acc = 0.0;
                let mut lb = 0.0;
                let mut cum = Vec::new();
                let mut lb_cum = Vec::new();
                for (w, d) in &mut parts {
                    *w /= total;
                    acc += *w;
                    lb += *w * d.mean;
                    cum.push(acc);
                    lb_cum.push(lb);
                }
                Kind::Mixture { parts, cum, lb_cum }
            }
            Dist::Preset(name) => {
                let Some(d) = crate::presets::lifetime(name) else {
                    return Err(err(
                        path,
                        "preset",
                        format!(
                            "unknown preset {name:?}; known: {}",
                            crate::presets::LIFETIME_PRESETS.join(", ")
                        ),
                    ));
                };
                let mut out = Distribution::new(&d, &format!("{path}.preset"))?;
                out.spec = spec.clone();
                return Ok(out);
            }
        };
        let mean = kind_mean(&kind);
        Ok(Self {
            kind,
            mean,
            spec: spec.clone(),
        })
    }

    /// The spec this was compiled from.
    pub fn spec(&self) -> &Dist {
        &self.spec
    }

    /// E[X] in seconds (infinite for a Pareto with α ≤ 1).
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// P(X ≤ x).
    pub fn cdf(&self, x: f64) -> f64 {
        match &self.kind {
            Kind::Constant(c) => f64::from(u8::from(x >= *c)),
            Kind::Exponential(m) => {
                if x <= 0.0 {
                    0.0
                } else {
                    -(-x / m).exp_m1()
                }
            }
            Kind::Lognormal { mu, sigma } => {
                if x <= 0.0 {
                    0.0
                } else {
                    norm_cdf((x.ln() - mu) / sigma)
                }
            }
            Kind::Weibull { k, lambda } => {
                if x <= 0.0 {
                    0.0
                } else {
                    -(-(x / lambda).powf(*k)).exp_m1()
                }
            }
            Kind::Gamma { k, theta } => gamma_pq(*k, x / theta).0,
            Kind::Pareto { alpha, xm } => {
                if x <= *xm {
                    0.0
                } else {
                    1.0 - (xm / x).powf(*alpha)
                }
            }
            Kind::Empirical { segs, .. } => empirical_cdf(segs, x),
            Kind::Mixture { parts, .. } => parts.iter().map(|(w, d)| w * d.cdf(x)).sum(),
        }
    }

    /// One draw.
    pub fn sample(&self, rng: &mut SynthRng) -> f64 {
        match &self.kind {
            Kind::Constant(c) => *c,
            Kind::Exponential(m) => m * rng.exp1(),
            Kind::Lognormal { mu, sigma } => (mu + sigma * rng.normal()).exp(),
            Kind::Weibull { k, lambda } => lambda * rng.exp1().powf(1.0 / k),
            Kind::Gamma { k, theta } => theta * rng.gamma(*k),
            Kind::Pareto { alpha, xm } => xm * rng.uniform().powf(-1.0 / alpha),
            Kind::Empirical { segs, .. } => {
                let u = rng.uniform();
                let i = segs
                    .partition_point(|s| s.pb < u)
                    .min(segs.len().saturating_sub(1));
                let s = &segs[i];
                let t = if s.pb > s.pa {
                    ((u - s.pa) / (s.pb - s.pa)).clamp(0.0, 1.0)
                } else {
                    0.5
                };
                if s.log {
                    s.a * (s.b / s.a).powf(t)
                } else {
                    s.a + t * (s.b - s.a)
                }
            }
            Kind::Mixture { parts, cum, .. } => {
                let i = pick(cum, rng.uniform());
                parts[i].1.sample(rng)
            }
        }
    }

    /// One draw from the length-biased distribution x f(x) / E[X] (needs a finite mean).
    pub fn sample_length_biased(&self, rng: &mut SynthRng) -> f64 {
        match &self.kind {
            Kind::Constant(c) => *c,
            Kind::Exponential(m) => m * rng.gamma(2.0),
            Kind::Lognormal { mu, sigma } => (mu + sigma * sigma + sigma * rng.normal()).exp(),
            Kind::Weibull { k, lambda } => lambda * rng.gamma(1.0 + 1.0 / k).powf(1.0 / k),
            Kind::Gamma { k, theta } => theta * rng.gamma(k + 1.0),
            Kind::Pareto { alpha, xm } => xm * rng.uniform().powf(-1.0 / (alpha - 1.0)),
            Kind::Empirical { segs, lb_cum } => {
                let s = &segs[pick(lb_cum, rng.uniform())];
                let u = rng.uniform();
                if s.log {
                    s.a + u * (s.b - s.a)
                } else {
                    (s.a * s.a + u * (s.b * s.b - s.a * s.a)).sqrt()
                }
            }
            Kind::Mixture { parts, lb_cum, .. } => {
                let i = pick(lb_cum, rng.uniform());
                parts[i].1.sample_length_biased(rng)
            }
        }
    }

    /// One draw of the equilibrium residual lifetime, density (1 − F(x)) / E[X]: what is
    /// left of a life in progress at a random instant (needs a finite mean).
    pub fn sample_residual(&self, rng: &mut SynthRng) -> f64 {
        let u = rng.uniform();
        u * self.sample_length_biased(rng)
    }
}

fn kind_mean(kind: &Kind) -> f64 {
    match kind {
        Kind::Constant(c) => *c,
        Kind::Exponential(m) => *m,
        Kind::Lognormal { mu, sigma } => (mu + 0.5 * sigma * sigma).exp(),
        Kind::Weibull { k, lambda } => lambda * ln_gamma(1.0 + 1.0 / k).exp(),
        Kind::Gamma { k, theta } => k * theta,
        Kind::Pareto { alpha, xm } => {
            if *alpha > 1.0 {
                alpha * xm / (alpha - 1.0)
            } else {
                f64::INFINITY
            }
        }
        Kind::Empirical { segs, .. } => segs.iter().map(Segment::mean_part).sum(),
        Kind::Mixture { parts, .. } => parts.iter().map(|(w, d)| w * d.mean).sum(),
    }
}

fn empirical(e: &Empirical, path: &str) -> Result<Kind, DistError> {
    if e.points.is_empty() {
        return Err(err(path, "points", "needs at least one point"));
    }
    if !(e.min.is_finite() && e.min >= 0.0) {
        return Err(err(path, "min", "must be ≥ 0"));
    }
    let mut segs = Vec::with_capacity(e.points.len());
    let (mut a, mut pa) = (e.min, 0.0);
    for (i, pt) in e.points.iter().enumerate() {
        let p = format!("points[{i}]");
        if !(pt.le.is_finite() && pt.le > a) {
            return Err(err(
                path,
                &format!("{p}.le"),
                format!(
                    "must be larger than the previous point (or `min`), {a} s, not {} s",
                    pt.le
                ),
            ));
        }
        if !(pt.p.is_finite() && pt.p >= pa && pt.p <= 1.0) {
            return Err(err(
                path,
                &format!("{p}.p"),
                format!("must be in [{pa}, 1] (cumulative), not {}", pt.p),
            ));
        }
        segs.push(Segment {
            a,
            b: pt.le,
            pa,
            pb: pt.p,
            log: e.interpolation == Interpolation::LogLinear && a > 0.0,
        });
        (a, pa) = (pt.le, pt.p);
    }
    if (pa - 1.0).abs() > 1e-9 {
        return Err(err(
            path,
            &format!("points[{}].p", e.points.len() - 1),
            format!("the last point must have p = 1 (say where the tail ends), not {pa}"),
        ));
    }
    if let Some(last) = segs.last_mut() {
        last.pb = 1.0;
    }
    let mut acc = 0.0;
    let lb_cum = segs
        .iter()
        .map(|s| {
            acc += s.mean_part();
            acc
        })
        .collect();
    Ok(Kind::Empirical { segs, lb_cum })
}

fn empirical_cdf(segs: &[Segment], x: f64) -> f64 {
    let Some(first) = segs.first() else {
        return 0.0;
    };
    if x <= first.a {
        return 0.0;
    }
    let i = segs.partition_point(|s| s.b < x);
    let Some(s) = segs.get(i) else {
        return 1.0;
    };
    let t = if s.log {
        (x / s.a).ln() / (s.b / s.a).ln()
    } else {
        (x - s.a) / (s.b - s.a)
    };
    s.pa + t.clamp(0.0, 1.0) * (s.pb - s.pa)
}

struct Secs;

impl Visitor<'_> for Secs {
    type Value = f64;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("seconds (a number) or a duration such as \"90s\", \"5m\", \"2d\"")
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
        trace_format::units::parse_duration(v)
            .map(|ns| ns as f64 / 1e9)
            .map_err(E::custom)
    }
}

/// Deserializes seconds given as a number or a duration string.
pub(crate) fn secs_de<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    d.deserialize_any(Secs)
}
