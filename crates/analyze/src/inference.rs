//! The statistics of `compare`: Welch's unequal-variance t test on per-run values, its
//! confidence interval, and Holm's step-down adjustment over many rows.
//!
//! Everything is a function of the two samples that is exactly antisymmetric when they swap:
//! the difference of means is negated (IEEE subtraction is), and the standard error, degrees
//! of freedom and p-value depend on the samples only through commutative sums, so they are
//! bit-identical. The Student t distribution is computed from the regularized incomplete beta
//! function (continued fraction, modified Lentz), which needs no dependency.

/// Mean and unbiased sample variance (0 for one value).
pub fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    if x.is_empty() {
        return (0.0, 0.0);
    }
    let m = x.iter().sum::<f64>() / n;
    if x.len() < 2 {
        return (m, 0.0);
    }
    let v = x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (n - 1.0);
    (m, v)
}

/// A two-sample comparison of `new` against `base`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TTest {
    /// Difference of means, new − base.
    pub diff: f64,
    /// Its standard error.
    pub se: f64,
    /// Degrees of freedom (Welch–Satterthwaite; Student's pooled df when one side has a single
    /// value; 0 when neither side has two).
    pub df: f64,
    /// Two-sided p-value of "no difference" (1 when it cannot be computed).
    pub p: f64,
}

impl TTest {
    /// Welch's t test of `new` − `base`. Per-side variances may be given a floor (`floor_b`,
    /// `floor_n`, variance of one value; e.g. the binomial variance of a failed fraction), so a
    /// side whose runs happen to agree exactly is not taken as noiseless. When one side has a
    /// single value its variance is taken from the other side (the equal-variance assumption
    /// of Student's test, df of the other side); with one value on each side nothing is known
    /// about the spread between runs and `df` is 0, `p` 1.
    pub fn welch(base: &[f64], new: &[f64], floor_b: f64, floor_n: f64) -> Self {
        let (mb, vb) = mean_var(base);
        let (mn, vn) = mean_var(new);
        let (m, k) = (base.len() as f64, new.len() as f64);
        let diff = mn - mb;
        let (vb, vn) = (vb.max(floor_b), vn.max(floor_n));
        let (se, df) = match (base.len(), new.len()) {
            (0, _) | (_, 0) | (1, 1) => (0.0, 0.0),
            (1, _) => (vn.sqrt() * (1.0 / m + 1.0 / k).sqrt(), k - 1.0),
            (_, 1) => (vb.sqrt() * (1.0 / m + 1.0 / k).sqrt(), m - 1.0),
            _ => {
                let (a, b) = (vb / m, vn / k);
                let den = a * a / (m - 1.0) + b * b / (k - 1.0);
                let df = if den > 0.0 {
                    (a + b) * (a + b) / den
                } else {
                    m + k - 2.0
                };
                ((a + b).sqrt(), df)
            }
        };
        let p = if df <= 0.0 {
            1.0
        } else if se > 0.0 {
            t_two_sided(diff / se, df)
        } else if diff == 0.0 {
            1.0
        } else {
            // Every run of each side identical and the sides differ: no noise to explain it.
            0.0
        };
        Self { diff, se, df, p }
    }

    /// The `1 − alpha` confidence interval of the difference (±∞ when `df` is 0).
    pub fn ci(&self, alpha: f64) -> (f64, f64) {
        if self.df <= 0.0 {
            return (f64::NEG_INFINITY, f64::INFINITY);
        }
        let h = t_quantile(alpha, self.df) * self.se;
        (self.diff - h, self.diff + h)
    }
}

/// Holm's step-down adjustment: the adjusted p-values, in input order. A row is rejected at
/// family-wise level `alpha` when its adjusted p-value is below `alpha`. Ties get equal
/// adjusted values whatever their order.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut idx: Vec<usize> = (0..m).collect();
    idx.sort_by(|&a, &b| p[a].total_cmp(&p[b]).then(a.cmp(&b)));
    let mut out = vec![1.0; m];
    let mut running = 0.0f64;
    for (rank, &i) in idx.iter().enumerate() {
        let adj = ((m - rank) as f64 * p[i]).min(1.0);
        running = running.max(adj);
        out[i] = running;
    }
    out
}

/// Two-sided tail probability of Student's t with `df` degrees of freedom: P(|T| ≥ |t|).
pub fn t_two_sided(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return if t.is_nan() { 1.0 } else { 0.0 };
    }
    let x = df / (df + t * t);
    inc_beta(df / 2.0, 0.5, x).clamp(0.0, 1.0)
}

/// The `t` with P(|T| ≥ t) = `alpha` (two-sided critical value), by bisection.
pub fn t_quantile(alpha: f64, df: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while t_two_sided(hi, df) > alpha && hi < 1e12 {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_two_sided(mid, df) > alpha {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-12 * hi {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// ln Γ(x), x > 0 (Lanczos, g = 7, n = 9; relative error ~1e-15).
fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularized incomplete beta function I_x(a, b).
fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

/// The continued fraction of the incomplete beta function (modified Lentz).
fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..=300 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_distribution_matches_tables() {
        // Two-sided 5% critical values (standard tables).
        for (df, t) in [
            (1.0, 12.706),
            (2.0, 4.303),
            (4.0, 2.776),
            (8.0, 2.306),
            (30.0, 2.042),
        ] {
            assert!((t_quantile(0.05, df) - t).abs() < 1e-3, "df {df}");
            assert!((t_two_sided(t, df) - 0.05).abs() < 1e-4, "df {df}");
        }
        assert!((t_two_sided(0.0, 5.0) - 1.0).abs() < 1e-12);
        // Large df: the normal's 1.96.
        assert!((t_quantile(0.05, 1e6) - 1.96).abs() < 1e-3);
    }

    #[test]
    fn welch_is_antisymmetric_and_holm_steps_down() {
        let a = [1.0, 1.2, 0.9, 1.1, 1.05];
        let b = [1.3, 1.25, 1.4, 1.2];
        let (x, y) = (
            TTest::welch(&a, &b, 0.0, 0.0),
            TTest::welch(&b, &a, 0.0, 0.0),
        );
        assert_eq!(x.diff, -y.diff);
        assert_eq!((x.se, x.df, x.p), (y.se, y.df, y.p));
        let (lo, hi) = x.ci(0.05);
        assert_eq!((lo, hi), (-y.ci(0.05).1, -y.ci(0.05).0));
        assert!(x.p < 0.01 && lo > 0.0);
        // One value per side: nothing known about the spread.
        let z = TTest::welch(&[1.0], &[2.0], 0.0, 0.0);
        assert_eq!((z.df, z.p), (0.0, 1.0));
        // Holm: 0.01·3, max(0.02·2, ·), max(0.04·1, ·).
        let adj = holm(&[0.04, 0.01, 0.02]);
        assert_eq!(adj, vec![0.04, 0.03, 0.04]);
    }
}
