//! Sampled lifetimes pass a KS test against their target CDF, for every family, and the
//! equilibrium residual sampler passes one against the numerically integrated equilibrium CDF.

use special::ks_critical;
use synth::dist::{CdfPoint, Component, Dist, Distribution, Empirical, Interpolation};
use synth::rng::{Stream, SynthRng};

const N: usize = 4000;
/// Significance of every KS test: each fails by chance with probability 1 % at a random
/// seed; the seeds are fixed, so the outcome is deterministic.
const ALPHA: f64 = 0.01;

fn families() -> Vec<(&'static str, Dist)> {
    vec![
        ("exponential", Dist::Exponential { mean: 300.0 }),
        (
            "lognormal",
            Dist::Lognormal {
                mu: 6.444,
                sigma: 1.877,
            },
        ),
        (
            "weibull",
            Dist::Weibull {
                shape: 0.6,
                scale: 900.0,
            },
        ),
        (
            "gamma<1",
            Dist::Gamma {
                shape: 0.5,
                scale: 200.0,
            },
        ),
        (
            "gamma>1",
            Dist::Gamma {
                shape: 3.5,
                scale: 20.0,
            },
        ),
        (
            "pareto",
            Dist::Pareto {
                shape: 2.5,
                scale: 10.0,
            },
        ),
        ("sysdig-2019", Dist::Preset("sysdig-2019".into())),
        (
            "empirical linear",
            Dist::Empirical(Empirical {
                points: vec![
                    CdfPoint { le: 10.0, p: 0.3 },
                    CdfPoint { le: 100.0, p: 0.9 },
                    CdfPoint { le: 1000.0, p: 1.0 },
                ],
                interpolation: Interpolation::Linear,
                min: 0.0,
            }),
        ),
        (
            "mixture",
            Dist::Mixture(vec![
                Component {
                    weight: 0.7,
                    dist: Dist::Exponential { mean: 30.0 },
                },
                Component {
                    weight: 0.3,
                    dist: Dist::Lognormal {
                        mu: 8.0,
                        sigma: 1.0,
                    },
                },
            ]),
        ),
    ]
}

fn ks(mut xs: Vec<f64>, cdf: impl Fn(f64) -> f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len() as f64;
    let mut d: f64 = 0.0;
    for (i, x) in xs.iter().enumerate() {
        let f = cdf(*x);
        d = d.max(f - i as f64 / n).max((i + 1) as f64 / n - f);
    }
    d
}

#[test]
fn samples_pass_ks_against_the_cdf() {
    let crit = ks_critical(N, ALPHA);
    for (i, (name, spec)) in families().into_iter().enumerate() {
        let d = Distribution::new(&spec, "t").expect(name);
        let mut rng = SynthRng::new(1000 + i as u64, Stream::User);
        let xs: Vec<f64> = (0..N).map(|_| d.sample(&mut rng)).collect();
        let dist = ks(xs, |x| d.cdf(x));
        assert!(dist < crit, "{name}: KS {dist} ≥ critical {crit}");
    }
}

#[test]
fn sample_means_match_the_analytic_mean() {
    for (i, (name, spec)) in families().into_iter().enumerate() {
        let d = Distribution::new(&spec, "t").expect(name);
        if name == "pareto" || name == "sysdig-2019" || name == "lognormal" || name == "mixture" {
            // Heavy tails: the sample mean converges too slowly for a tight check.
            continue;
        }
        let mut rng = SynthRng::new(7 + i as u64, Stream::User);
        let n = 200_000;
        let m: f64 = (0..n).map(|_| d.sample(&mut rng)).sum::<f64>() / n as f64;
        assert!(
            (m / d.mean() - 1.0).abs() < 0.02,
            "{name}: {m} vs {}",
            d.mean()
        );
    }
}

/// F_e(x) = (1/μ) ∫₀ˣ (1 − F(t)) dt on a fine grid (trapezoid), interpolated.
fn equilibrium_cdf(d: &Distribution, xmax: f64) -> impl Fn(f64) -> f64 {
    let n = 400_000;
    let mut xs = Vec::with_capacity(n + 1);
    let mut fs = Vec::with_capacity(n + 1);
    let lo: f64 = 1e-6;
    let r = (xmax / lo).ln();
    xs.push(0.0);
    fs.push(0.0);
    let mut acc = 0.0;
    let mut prev_x = 0.0;
    let mut prev_s = 1.0;
    for i in 0..=n {
        let x = lo * (r * i as f64 / n as f64).exp();
        let s = 1.0 - d.cdf(x);
        acc += 0.5 * (s + prev_s) * (x - prev_x);
        xs.push(x);
        fs.push(acc / d.mean());
        (prev_x, prev_s) = (x, s);
    }
    move |x: f64| {
        let i = xs.partition_point(|&g| g < x);
        if i == 0 {
            0.0
        } else if i >= xs.len() {
            fs[fs.len() - 1]
        } else {
            let t = (x - xs[i - 1]) / (xs[i] - xs[i - 1]);
            fs[i - 1] + t * (fs[i] - fs[i - 1])
        }
    }
}

#[test]
fn residuals_pass_ks_against_the_equilibrium_cdf() {
    let crit = ks_critical(N, ALPHA);
    for (i, (name, spec)) in families().into_iter().enumerate() {
        let d = Distribution::new(&spec, "t").expect(name);
        let mut rng = SynthRng::new(500 + i as u64, Stream::User);
        let xs: Vec<f64> = (0..N).map(|_| d.sample_residual(&mut rng)).collect();
        let xmax = xs.iter().copied().fold(0.0, f64::max) * 1.01;
        let fe = equilibrium_cdf(&d, xmax);
        let dist = ks(xs, fe);
        assert!(dist < crit, "{name}: residual KS {dist} ≥ critical {crit}");
    }
}

#[test]
fn exponential_residual_is_the_same_exponential() {
    let d = Distribution::new(&Dist::Exponential { mean: 60.0 }, "t").expect("valid");
    let mut rng = SynthRng::new(3, Stream::User);
    let xs: Vec<f64> = (0..N).map(|_| d.sample_residual(&mut rng)).collect();
    assert!(ks(xs, |x| d.cdf(x)) < ks_critical(N, ALPHA));
}

#[test]
fn invalid_specs_name_the_field() {
    let e = Distribution::new(
        &Dist::Weibull {
            shape: -1.0,
            scale: 3.0,
        },
        "lifetime",
    )
    .expect_err("negative shape");
    assert_eq!(e.path, "lifetime.weibull.shape");
    let e = Distribution::new(
        &Dist::Empirical(Empirical {
            points: vec![CdfPoint { le: 10.0, p: 0.5 }],
            interpolation: Interpolation::LogLinear,
            min: 0.0,
        }),
        "lifetime",
    )
    .expect_err("no tail");
    assert_eq!(e.path, "lifetime.empirical.points[0].p");
    let e = Distribution::new(&Dist::Preset("nope".into()), "lifetime").expect_err("unknown");
    assert!(e.message.contains("sysdig-2019"), "{e}");
}

#[test]
fn sysdig_preset_reproduces_the_published_points() {
    let d = Distribution::new(&Dist::Preset("sysdig-2019".into()), "t").expect("preset");
    for (x, p) in [
        (10.0, 0.22),
        (60.0, 0.39),
        (300.0, 0.54),
        (86_400.0, 0.86),
        (1_209_600.0, 0.98),
    ] {
        assert!((d.cdf(x) - p).abs() < 1e-12, "F({x}) = {} ≠ {p}", d.cdf(x));
    }
}
