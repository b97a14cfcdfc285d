//! The statistics of `compare`: Welch's unequal-variance t test on per-run values, its
//! confidence interval, and Holm's step-down adjustment over many rows; for counts (failed
//! operations) Fisher's exact test and Newcombe's score interval of a difference of
//! proportions.
//!
//! Everything is a function of the two samples that is exactly antisymmetric when they swap:
//! the difference of means is negated (IEEE subtraction is), and the standard error, degrees
//! of freedom and p-value depend on the samples only through commutative sums, so they are
//! bit-identical. The Student t distribution is computed from the regularized incomplete beta
//! function (the `special` crate, shared with `synth`).

use special::{inc_beta, ln_gamma};

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

/// The standard normal quantile `z` with P(Z ≤ z) = `p` (0 < p < 1), from the t quantile at
/// a very large df.
pub fn z_quantile(p: f64) -> f64 {
    let two = 2.0 * p.min(1.0 - p);
    let z = t_quantile(two, 1e9);
    if p < 0.5 { -z } else { z }
}

/// Lower `q` quantile of the χ² distribution with `df` degrees of freedom, by Wilson and
/// Hilferty's cube-root normal approximation (within about 1 % for `df ≥ 2`, the planning
/// use here).
pub fn chi2_quantile(q: f64, df: f64) -> f64 {
    let c = 2.0 / (9.0 * df);
    (df * (1.0 - c + z_quantile(q) * c.sqrt()).powi(3)).max(0.0)
}

/// Fisher's exact test of a 2×2 table (`fail_a` of `n_a` against `fail_b` of `n_b`): the
/// two-sided p-value, summing the hypergeometric probabilities of every table with the same
/// margins no more likely than the observed one. The sides are put in a canonical order first,
/// so swapping them gives a bit-identical p.
pub fn fisher_exact(fail_a: u64, n_a: u64, fail_b: u64, n_b: u64) -> f64 {
    let ((x, n1), (y, n2)) = if (fail_a, n_a) <= (fail_b, n_b) {
        ((fail_a, n_a), (fail_b, n_b))
    } else {
        ((fail_b, n_b), (fail_a, n_a))
    };
    let (k, n) = (x + y, n1 + n2);
    if n1 == 0 || n2 == 0 || k == 0 || k == n {
        return 1.0;
    }
    let ln_choose = |a: u64, b: u64| {
        ln_gamma(a as f64 + 1.0) - ln_gamma(b as f64 + 1.0) - ln_gamma((a - b) as f64 + 1.0)
    };
    let total = ln_choose(n, k);
    let ln_p = |i: u64| ln_choose(n1, i) + ln_choose(n2, k - i) - total;
    let observed = ln_p(x);
    let (lo, hi) = (k.saturating_sub(n2), k.min(n1));
    let mut p = 0.0;
    for i in lo..=hi {
        let l = ln_p(i);
        // Relative tolerance for tables as likely as the observed one (rounding).
        if l <= observed + 1e-7 {
            p += l.exp();
        }
    }
    p.min(1.0)
}

/// Wilson's score interval of a proportion `x / n` at normal quantile `z` (0/0: `[0, 1]`).
pub fn wilson(x: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (n, p) = (n as f64, x as f64 / n as f64);
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// Newcombe's hybrid score interval (method 10, Newcombe 1998) of `p_new − p_base` at
/// confidence `1 − alpha`: `(difference, low, high)`. Exactly mirrored when the sides swap.
pub fn newcombe(fail_b: u64, n_b: u64, fail_n: u64, n_n: u64, alpha: f64) -> (f64, f64, f64) {
    let z = z_quantile(1.0 - alpha / 2.0);
    let frac = |x: u64, n: u64| if n == 0 { 0.0 } else { x as f64 / n as f64 };
    let (pb, pn) = (frac(fail_b, n_b), frac(fail_n, n_n));
    let (lb, ub) = wilson(fail_b, n_b, z);
    let (ln, un) = wilson(fail_n, n_n, z);
    let d = pn - pb;
    let down = ((pn - ln) * (pn - ln) + (ub - pb) * (ub - pb)).sqrt();
    let up = ((un - pn) * (un - pn) + (pb - lb) * (pb - lb)).sqrt();
    (d, d - down, d + up)
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

    #[test]
    fn counts_tests_match_references() {
        // Fisher's tea tasting table [[3, 1], [1, 3]]: two-sided p = 0.4857.
        assert!((fisher_exact(3, 4, 1, 4) - 0.485_714).abs() < 1e-5);
        // 0 of 3000 against 27 of 3000 (0 % → 0.9 %): far below 0.001.
        assert!(fisher_exact(0, 3000, 27, 3000) < 1e-6);
        assert_eq!(
            fisher_exact(0, 3000, 27, 3000),
            fisher_exact(27, 3000, 0, 3000)
        );
        assert_eq!(fisher_exact(0, 100, 0, 100), 1.0);
        // Wilson 0/10 at 95 %: [0, 0.2775]; Newcombe's example 56/70 − 48/80: [0.0524, 0.3339].
        let (lo, hi) = wilson(0, 10, 1.959_964);
        assert!(lo == 0.0 && (hi - 0.2775).abs() < 1e-4);
        let (d, l, h) = newcombe(48, 80, 56, 70, 0.05);
        assert!((d - 0.2).abs() < 1e-12 && (l - 0.0524).abs() < 1e-4 && (h - 0.3339).abs() < 1e-4);
        let (e, m, k) = newcombe(56, 70, 48, 80, 0.05);
        assert_eq!((e, m, k), (-d, -h, -l));
        assert!((z_quantile(0.975) - 1.959_964).abs() < 1e-5);
        assert!((z_quantile(0.2) + 0.841_621).abs() < 1e-5);
    }
}
