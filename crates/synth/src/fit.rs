//! Fitting lifetime distributions to observations, with right censoring.
//!
//! Every family is fitted by maximum likelihood, where an observation still alive at the end
//! of the data (censored) contributes its survival ln S(x) instead of its density ln f(x).
//! Exponential (mean = Σx / #uncensored) and Pareto (xₘ = smallest uncensored x,
//! α = #uncensored / Σ ln⁺(x/xₘ))
//! have closed forms; lognormal, Weibull and gamma are maximised numerically with Nelder–Mead
//! on log-parameters from moment-based starts, restarted once from the optimum. The families
//! are judged by their Kolmogorov–Smirnov distance D to the Kaplan–Meier estimate of the CDF
//! (the empirical CDF when nothing is censored), measured up to the largest observation,
//! against the critical value at α = 0.05, 1.358 / √n with n the uncensored observations (the
//! asymptotic Kolmogorov bound; fitted parameters make it lenient — Lilliefors — and censoring
//! makes √n an overstatement of the information, so a family that fails it does not fit).
//! Families that pass are ranked by AIC = 2k − 2 ln L, ahead of those that fail; AIC alone
//! would crown the least bad of families that all miss the data. When none passes, the model
//! written is the Kaplan–Meier curve itself (an `empirical` lifetime), and the report says
//! that no family fits. The choice is written as a `lifetime:` snippet for a model.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::dist::{Dist, Distribution};
use crate::error::Error;
use special::{gamma_pq, ln_gamma, norm_cdf_pair};

/// One observed lifetime.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    /// Lifetime in seconds (for a censored one: how long it had lived when observation ended).
    pub value_s: f64,
    /// True when the object was still alive at the end (right-censored).
    pub censored: bool,
}

/// One fitted family.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Candidate {
    /// `exponential`, `lognormal`, `weibull`, `gamma` or `pareto`.
    pub family: String,
    /// Fitted parameters by name (seconds for scales and means, ln seconds for lognormal μ).
    pub params: BTreeMap<String, f64>,
    /// Maximised log-likelihood.
    pub log_likelihood: f64,
    /// Akaike information criterion, 2k − 2 ln L (lower is better).
    pub aic: f64,
    /// Kolmogorov–Smirnov distance to the Kaplan–Meier (or empirical) CDF.
    pub ks_distance: f64,
    /// Whether `ks_distance` is within the report's `ks_critical`.
    pub passes: bool,
    /// Mean of the fitted distribution, seconds; `null` when it has none (a Pareto with
    /// α ≤ 1 has an infinite mean).
    pub mean_s: Option<f64>,
    /// The fitted distribution.
    #[serde(skip)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub dist: Dist,
}

/// The outcome of [`fit`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FitReport {
    /// Observations used.
    pub observations: u64,
    /// How many of them were censored.
    pub censored: u64,
    /// The KS critical value at α = 0.05 for these observations (1.358 / √uncensored).
    pub ks_critical: f64,
    /// Whether any family passes the KS test.
    pub fits: bool,
    /// Every family that could be fitted: those that pass the KS test first, each group by
    /// AIC (lowest first).
    pub candidates: Vec<Candidate>,
    /// Families that could not be fitted, with the reason.
    pub skipped: BTreeMap<String, String>,
    /// The best family that passes, or `empirical` when none does.
    pub best: String,
    /// The choice as a model snippet (`lifetime: …`), ready to paste.
    pub yaml: String,
    /// The chosen distribution.
    #[serde(skip)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub chosen: Dist,
}

impl FitReport {
    /// The chosen distribution: the best family that fits, else the empirical curve.
    pub fn best_dist(&self) -> &Dist {
        &self.chosen
    }
}

/// The KS critical value's factor at α = 0.05 (Kolmogorov's asymptotic distribution).
pub const KS_C_05: f64 = 1.358;

/// Points of the empirical lifetime written when no family fits.
const EMPIRICAL_POINTS: usize = 64;

/// The smallest lifetime used; shorter (zero) observations are raised to it.
pub const MIN_VALUE_S: f64 = 1e-9;

struct Data {
    x: Vec<f64>,
    lnx: Vec<f64>,
    cens: Vec<bool>,
    d: f64,
}

impl Data {
    fn uncensored(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.x
            .iter()
            .zip(&self.lnx)
            .zip(&self.cens)
            .filter(|(_, c)| !**c)
            .map(|((x, l), _)| (*x, *l))
    }

    /// Σ over observations of ln f (uncensored) or ln S (censored).
    fn loglik(&self, ln_f: impl Fn(f64, f64) -> f64, ln_s: impl Fn(f64, f64) -> f64) -> f64 {
        let mut s = 0.0;
        for i in 0..self.x.len() {
            s += if self.cens[i] {
                ln_s(self.x[i], self.lnx[i])
            } else {
                ln_f(self.x[i], self.lnx[i])
            };
        }
        if s.is_nan() { f64::NEG_INFINITY } else { s }
    }
}

/// Minimises `f` from `start` with Nelder–Mead; non-finite values count as +∞.
pub fn nelder_mead(f: &dyn Fn(&[f64]) -> f64, start: &[f64], step: f64) -> (Vec<f64>, f64) {
    let n = start.len();
    let eval = |p: &[f64]| {
        let v = f(p);
        if v.is_finite() { v } else { f64::INFINITY }
    };
    let mut best = (start.to_vec(), eval(start));
    for _restart in 0..3 {
        let mut simplex: Vec<(Vec<f64>, f64)> = Vec::with_capacity(n + 1);
        simplex.push(best.clone());
        for i in 0..n {
            let mut p = best.0.clone();
            p[i] += step;
            let v = eval(&p);
            simplex.push((p, v));
        }
        for _ in 0..5000 {
            simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
            let (lo, hi) = (simplex[0].1, simplex[n].1);
            let size = simplex
                .iter()
                .skip(1)
                .map(|(p, _)| {
                    p.iter()
                        .zip(&simplex[0].0)
                        .map(|(a, b)| (a - b).abs())
                        .fold(0.0, f64::max)
                })
                .fold(0.0, f64::max);
            if (hi - lo).abs() <= 1e-12 * (lo.abs() + 1e-12) && size < 1e-9 {
                break;
            }
            let centroid: Vec<f64> = (0..n)
                .map(|j| simplex[..n].iter().map(|(p, _)| p[j]).sum::<f64>() / n as f64)
                .collect();
            let towards = |t: f64| -> Vec<f64> {
                centroid
                    .iter()
                    .zip(&simplex[n].0)
                    .map(|(c, w)| c + t * (w - c))
                    .collect()
            };
            let xr = towards(-1.0);
            let fr = eval(&xr);
            if fr < simplex[0].1 {
                let xe = towards(-2.0);
                let fe = eval(&xe);
                simplex[n] = if fe < fr { (xe, fe) } else { (xr, fr) };
            } else if fr < simplex[n - 1].1 {
                simplex[n] = (xr, fr);
            } else {
                let (xc, fc) = if fr < simplex[n].1 {
                    let x = towards(-0.5);
                    let v = eval(&x);
                    (x, v)
                } else {
                    let x = towards(0.5);
                    let v = eval(&x);
                    (x, v)
                };
                if fc < simplex[n].1.min(fr) {
                    simplex[n] = (xc, fc);
                } else {
                    let b = simplex[0].0.clone();
                    for s in simplex.iter_mut().skip(1) {
                        for (pj, bj) in s.0.iter_mut().zip(&b) {
                            *pj = bj + 0.5 * (*pj - bj);
                        }
                        s.1 = eval(&s.0);
                    }
                }
            }
        }
        simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
        let improved = simplex[0].1 < best.1 - 1e-10 * (best.1.abs() + 1.0);
        best = simplex.swap_remove(0);
        if !improved {
            break;
        }
    }
    best
}

fn mean_sd(v: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut n, mut s, mut s2) = (0.0, 0.0, 0.0);
    for x in v {
        n += 1.0;
        s += x;
        s2 += x * x;
    }
    if n == 0.0 {
        return (0.0, 1.0);
    }
    let m = s / n;
    (m, ((s2 / n - m * m).max(0.0)).sqrt())
}

const LN_2PI: f64 = 1.837_877_066_409_345_5;

fn ln_upper_normal(z: f64) -> f64 {
    let q = norm_cdf_pair(z).1;
    if q > 0.0 {
        q.ln()
    } else {
        // Mills ratio asymptote far in the tail.
        -0.5 * z * z - z.ln() - 0.5 * LN_2PI
    }
}

fn fit_family(family: &str, data: &Data) -> Result<(Dist, f64, usize), String> {
    let all_ln = || data.lnx.iter().copied();
    match family {
        "exponential" => {
            let sum: f64 = data.x.iter().sum();
            let m = sum / data.d;
            let ll = data.loglik(|x, _| -m.ln() - x / m, |x, _| -x / m);
            Ok((Dist::Exponential { mean: m }, ll, 1))
        }
        "pareto" => {
            // xₘ is the smallest uncensored value (the likelihood grows with xₘ up to it);
            // censored values below xₘ carry no information (S = 1).
            let xm = data
                .uncensored()
                .map(|(x, _)| x)
                .fold(f64::INFINITY, f64::min);
            let lxm = xm.ln();
            let s: f64 = data.lnx.iter().map(|l| (l - lxm).max(0.0)).sum();
            if s.is_nan() || s <= 0.0 {
                return Err("all observations are equal".into());
            }
            let a = data.d / s;
            let ll = data.loglik(
                |_, l| a.ln() + a * lxm - (a + 1.0) * l,
                |_, l| a * (lxm - l).min(0.0),
            );
            Ok((
                Dist::Pareto {
                    shape: a,
                    scale: xm,
                },
                ll,
                2,
            ))
        }
        "lognormal" => {
            let (m, sd) = mean_sd(data.uncensored().map(|(_, l)| l));
            let nll = |p: &[f64]| {
                let (mu, s) = (p[0], p[1].exp());
                -data.loglik(
                    |_, l| {
                        let z = (l - mu) / s;
                        -l - s.ln() - 0.5 * LN_2PI - 0.5 * z * z
                    },
                    |_, l| ln_upper_normal((l - mu) / s),
                )
            };
            let (p, v) = nelder_mead(&nll, &[m, sd.max(1e-3).ln()], 0.3);
            Ok((
                Dist::Lognormal {
                    mu: p[0],
                    sigma: p[1].exp(),
                },
                -v,
                2,
            ))
        }
        "weibull" => {
            let (m, sd) = mean_sd(all_ln());
            let k0 = (1.2825 / sd.max(1e-3)).clamp(0.02, 50.0);
            let l0 = m + 0.5772 / k0;
            let nll = |p: &[f64]| {
                let (k, ll) = (p[0].exp(), p[1]);
                -data.loglik(
                    |_, l| {
                        let r = l - ll;
                        k.ln() - ll + (k - 1.0) * r - (k * r).exp()
                    },
                    |_, l| -(k * (l - ll)).exp(),
                )
            };
            let (p, v) = nelder_mead(&nll, &[k0.ln(), l0], 0.3);
            Ok((
                Dist::Weibull {
                    shape: p[0].exp(),
                    scale: p[1].exp(),
                },
                -v,
                2,
            ))
        }
        "gamma" => {
            let (m, sd) = mean_sd(data.x.iter().copied());
            let k0 = if sd > 0.0 {
                (m * m / (sd * sd)).clamp(0.01, 1e4)
            } else {
                1.0
            };
            let t0 = (m / k0).max(1e-12);
            let nll = |p: &[f64]| {
                let (k, lt) = (p[0].exp(), p[1]);
                let th = lt.exp();
                let lgk = ln_gamma(k);
                -data.loglik(
                    |x, l| -lgk - k * lt + (k - 1.0) * l - x / th,
                    |x, _| {
                        let q = gamma_pq(k, x / th).1;
                        if q > 0.0 { q.ln() } else { f64::NEG_INFINITY }
                    },
                )
            };
            let (p, v) = nelder_mead(&nll, &[k0.ln(), t0.ln()], 0.3);
            Ok((
                Dist::Gamma {
                    shape: p[0].exp(),
                    scale: p[1].exp(),
                },
                -v,
                2,
            ))
        }
        _ => Err(format!("unknown family {family}")),
    }
}

/// The Kaplan–Meier estimate of the CDF: (time, F̂ just before, F̂ at) at each distinct
/// uncensored time, in increasing order, plus the largest observation.
pub fn kaplan_meier(obs: &[Observation]) -> (Vec<(f64, f64, f64)>, f64) {
    let mut v: Vec<(f64, bool)> = obs
        .iter()
        .map(|o| (o.value_s.max(MIN_VALUE_S), o.censored))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let n = v.len();
    let mut out = Vec::new();
    let mut surv = 1.0;
    let mut i = 0;
    while i < n {
        let t = v[i].0;
        let at_risk = (n - i) as f64;
        let mut deaths = 0.0;
        let mut j = i;
        while j < n && v[j].0 == t {
            if !v[j].1 {
                deaths += 1.0;
            }
            j += 1;
        }
        if deaths > 0.0 {
            let before = 1.0 - surv;
            surv *= 1.0 - deaths / at_risk;
            out.push((t, before, 1.0 - surv));
        }
        i = j;
    }
    (out, v.last().map_or(0.0, |x| x.0))
}

/// The KS distance between a CDF and the Kaplan–Meier estimate, up to the largest
/// observation.
pub fn ks_distance(km: &(Vec<(f64, f64, f64)>, f64), cdf: impl Fn(f64) -> f64) -> f64 {
    let (steps, xmax) = km;
    let mut d: f64 = 0.0;
    for &(t, before, at) in steps {
        let f = cdf(t);
        d = d.max((f - before).abs()).max((f - at).abs());
    }
    if let Some(&(_, _, last)) = steps.last() {
        d = d.max((cdf(*xmax) - last).abs());
    }
    d
}

/// The families [`fit`] tries.
pub const FAMILIES: [&str; 5] = ["exponential", "lognormal", "weibull", "gamma", "pareto"];

/// Fits every family to `obs` and ranks them by AIC.
pub fn fit(obs: &[Observation]) -> Result<FitReport, Error> {
    let bad = obs
        .iter()
        .position(|o| !(o.value_s.is_finite() && o.value_s >= 0.0));
    if let Some(i) = bad {
        return Err(Error::Fit(format!(
            "observation {i} is {} s; lifetimes must be finite and ≥ 0",
            obs[i].value_s
        )));
    }
    let x: Vec<f64> = obs.iter().map(|o| o.value_s.max(MIN_VALUE_S)).collect();
    let cens: Vec<bool> = obs.iter().map(|o| o.censored).collect();
    let d = cens.iter().filter(|c| !**c).count();
    if d < 2 {
        return Err(Error::Fit(format!(
            "{} observations with {d} uncensored; at least 2 uncensored are needed",
            obs.len()
        )));
    }
    // Every uncensored lifetime the same: no family has a finite maximum-likelihood fit (a
    // Weibull's shape runs off to infinity and would still be ranked "best" by AIC).
    let mut uncensored = x.iter().zip(&cens).filter(|(_, c)| !**c).map(|(v, _)| *v);
    if let Some(first) = uncensored.next()
        && uncensored.all(|v| v == first)
    {
        return Err(Error::Fit(format!(
            "all {d} uncensored lifetimes are {first} s: degenerate data no distribution family \
             fits; for a fixed lifetime write `lifetime: {{constant: {{value: {first}}}}}`"
        )));
    }
    let data = Data {
        lnx: x.iter().map(|v| v.ln()).collect(),
        x,
        cens,
        d: d as f64,
    };
    let km = kaplan_meier(obs);
    let ks_critical = KS_C_05 / (d as f64).sqrt();
    let mut candidates = Vec::new();
    let mut skipped = BTreeMap::new();
    for fam in FAMILIES {
        let r = fit_family(fam, &data).and_then(|(dist, ll, k)| {
            if !ll.is_finite() {
                return Err("the likelihood is not finite".to_owned());
            }
            let compiled = Distribution::new(&dist, "fit").map_err(|e| e.message)?;
            let ks = ks_distance(&km, |t| compiled.cdf(t));
            Ok(Candidate {
                family: fam.to_owned(),
                params: params(&dist),
                log_likelihood: ll,
                aic: 2.0 * k as f64 - 2.0 * ll,
                ks_distance: ks,
                passes: ks <= ks_critical,
                mean_s: Some(compiled.mean()).filter(|m| m.is_finite()),
                dist,
            })
        });
        match r {
            Ok(c) => candidates.push(c),
            Err(e) => {
                skipped.insert(fam.to_owned(), e);
            }
        }
    }
    candidates.sort_by(|a, b| b.passes.cmp(&a.passes).then(a.aic.total_cmp(&b.aic)));
    let Some(first) = candidates.first() else {
        return Err(Error::Fit("no family could be fitted".into()));
    };
    let censored = obs.len() - d;
    let (best, chosen, yaml) = if first.passes {
        let yaml = snippet(first, obs.len(), censored, ks_critical);
        (first.family.clone(), first.dist.clone(), yaml)
    } else {
        let dist = empirical_of(&km)?;
        let yaml = empirical_snippet(&dist, first, obs.len(), censored, ks_critical);
        ("empirical".to_owned(), dist, yaml)
    };
    Ok(FitReport {
        observations: obs.len() as u64,
        censored: censored as u64,
        ks_critical,
        fits: first.passes,
        best,
        yaml,
        candidates,
        skipped,
        chosen,
    })
}

/// The Kaplan–Meier curve as an `empirical` lifetime: at most [`EMPIRICAL_POINTS`] of its
/// steps, evenly spaced in probability, the last at the largest observation with p = 1 (the
/// tail beyond it is unknown and cut there).
fn empirical_of(km: &(Vec<(f64, f64, f64)>, f64)) -> Result<Dist, Error> {
    use crate::dist::{CdfPoint, Empirical, Interpolation};
    let (steps, xmax) = km;
    let mut points: Vec<CdfPoint> = Vec::new();
    let mut next_p = 0.0;
    let gap = 1.0 / EMPIRICAL_POINTS as f64;
    for &(t, _, at) in steps {
        if at >= next_p && t < *xmax {
            points.push(CdfPoint { le: t, p: at });
            next_p = at + gap;
        }
    }
    points.push(CdfPoint { le: *xmax, p: 1.0 });
    let dist = Dist::Empirical(Empirical {
        points,
        interpolation: Interpolation::Linear,
        min: 0.0,
    });
    Distribution::new(&dist, "fit")
        .map_err(|e| Error::Fit(format!("the empirical curve: {}", e.message)))?;
    Ok(dist)
}

fn empirical_snippet(
    dist: &Dist,
    nearest: &Candidate,
    n: usize,
    censored: usize,
    crit: f64,
) -> String {
    let body = serde_saphyr::to_string(&Snippet { lifetime: dist }).unwrap_or_default();
    format!(
        "# Fitted by cnsreplay synth fit: {n} observations ({censored} censored). No family \
         fits: the\n# nearest, {} (AIC {:.1}), is at KS distance {:.4} > {crit:.4} (α = 0.05). \
         The Kaplan–Meier\n# curve itself, cut at the largest observation:\n{body}",
        nearest.family, nearest.aic, nearest.ks_distance
    )
}

fn params(d: &Dist) -> BTreeMap<String, f64> {
    let pairs: Vec<(&str, f64)> = match d {
        Dist::Exponential { mean } => vec![("mean", *mean)],
        Dist::Lognormal { mu, sigma } => vec![("mu", *mu), ("sigma", *sigma)],
        Dist::Weibull { shape, scale }
        | Dist::Gamma { shape, scale }
        | Dist::Pareto { shape, scale } => vec![("shape", *shape), ("scale", *scale)],
        _ => Vec::new(),
    };
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

#[derive(Serialize)]
struct Snippet<'a> {
    lifetime: &'a Dist,
}

fn snippet(best: &Candidate, n: usize, censored: usize, crit: f64) -> String {
    let body = serde_saphyr::to_string(&Snippet {
        lifetime: &best.dist,
    })
    .unwrap_or_default();
    format!(
        "# Fitted by cnsreplay synth fit: {n} observations ({censored} censored), \
         best by AIC ({:.1}) of the families that fit, KS distance {:.4} ≤ {crit:.4} \
         (α = 0.05).\n{body}",
        best.aic, best.ks_distance
    )
}
