//! Histogram helpers and the seeded bootstrap.
//!
//! Latencies are kept in HdrHistograms (1 ns … 1 h, 3 significant digits, the replay engine's
//! bounds), so memory does not grow with the number of events. The bootstrap works on a
//! histogram's bins: resampling `n` values with replacement is approximated by the *Poisson
//! bootstrap* — every observation gets an independent Poisson(1) weight, so a bin holding `c`
//! values gets weight Poisson(c). That costs O(bins) per resample, not O(n), which is what
//! makes a 10 M-event compare fast; for large `n` it matches the multinomial bootstrap.

use hdrhistogram::Histogram;
use replay::Percentiles;

/// Highest value tracked: one hour in ns (larger values saturate).
pub const MAX_NS: u64 = 3_600_000_000_000;

/// A latency histogram with the replay engine's bounds (3 significant digits).
pub fn latency() -> Histogram<u64> {
    // Fixed, valid bounds: cannot fail.
    Histogram::new_with_bounds(1, MAX_NS, 3).expect("constant, valid histogram bounds")
}

/// A coarse latency histogram (2 significant digits) for per-window and per-bucket use.
pub fn coarse() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_NS, 2).expect("constant, valid histogram bounds")
}

/// Records `v` into a lazily created histogram.
pub fn record(h: &mut Option<Histogram<u64>>, v: u64) {
    h.get_or_insert_with(latency).saturating_record(v.max(1));
}

/// Adds `b` into `a`, creating `a` when needed.
pub fn merge(a: &mut Option<Histogram<u64>>, b: Option<Histogram<u64>>) {
    match (a.as_mut(), b) {
        (Some(x), Some(y)) => {
            // Same bounds on both sides: cannot fail.
            let _ = x.add(&y);
        }
        (None, Some(y)) => *a = Some(y),
        _ => {}
    }
}

/// Adds every value of `src` into `dst`, saturating at `dst`'s bounds (for histograms of
/// other bounds, such as iogen's 1 ns … 1 day).
pub fn add_saturating(dst: &mut Histogram<u64>, src: &Histogram<u64>) {
    for v in src.iter_recorded() {
        dst.saturating_record_n(v.value_iterated_to().max(1), v.count_at_value());
    }
}

/// Percentiles of an optional histogram (all zero when absent or empty).
pub fn pct(h: Option<&Histogram<u64>>) -> Percentiles {
    h.map(Percentiles::of).unwrap_or_default()
}

/// The value at percentile `p` (0–100) of a histogram (0 when empty).
pub fn at(h: &Histogram<u64>, p: f64) -> u64 {
    if h.is_empty() {
        return 0;
    }
    if p >= 100.0 {
        return h.max();
    }
    h.value_at_quantile(p / 100.0)
}

/// A histogram as `(value, count)` bins, ascending (the bins a bootstrap resamples).
pub fn bins(h: &Histogram<u64>) -> Vec<(f64, u64)> {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to() as f64, v.count_at_value()))
        .collect()
}

/// A small, seeded PRNG (splitmix64): reproducible resamples without a dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        trace_format::splitmix::next(&mut self.0)
    }

    /// Uniform in (0, 1).
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// A standard normal draw (Box–Muller, two uniforms).
    pub fn normal(&mut self) -> f64 {
        (-2.0 * self.unit().ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos()
    }

    /// A Poisson(`mean`) draw: inversion (one uniform) below 30, a rounded normal above.
    pub fn poisson(&mut self, mean: f64) -> f64 {
        if mean <= 0.0 {
            return 0.0;
        }
        if mean < 30.0 {
            let u = self.unit();
            let mut p = if mean.fract() == 0.0 {
                EXP_NEG[mean as usize]
            } else {
                (-mean).exp()
            };
            let (mut k, mut cdf) = (0.0, p);
            while u > cdf && k < 200.0 {
                k += 1.0;
                p *= mean / k;
                cdf += p;
            }
            return k;
        }
        let z = (-2.0 * self.unit().ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos();
        (mean + z * mean.sqrt()).round().max(0.0)
    }
}

/// `e^-k` for k = 0…29 (bin counts are integers: the common Poisson means).
static EXP_NEG: [f64; 30] = {
    let mut t = [1.0f64; 30];
    let mut k = 1;
    while k < 30 {
        t[k] = t[k - 1] * 0.367_879_441_171_442_33;
        k += 1;
    }
    t
};

/// The `q` quantile (0–1) of weighted bins.
pub fn quantile(bins: &[(f64, f64)], q: f64) -> f64 {
    let total: f64 = bins.iter().map(|b| b.1).sum();
    if total <= 0.0 {
        return 0.0;
    }
    let target = (q * total).max(f64::MIN_POSITIVE);
    let mut acc = 0.0;
    for &(v, w) in bins {
        acc += w;
        if acc >= target {
            return v;
        }
    }
    bins.last().map_or(0.0, |b| b.0)
}

/// The mean of weighted bins.
pub fn mean(bins: &[(f64, f64)]) -> f64 {
    let total: f64 = bins.iter().map(|b| b.1).sum();
    if total <= 0.0 {
        return 0.0;
    }
    bins.iter().map(|b| b.0 * b.1).sum::<f64>() / total
}

/// One Poisson-bootstrap resample of `bins` into `out`.
pub fn resample(bins: &[(f64, u64)], rng: &mut Rng, out: &mut Vec<(f64, f64)>) {
    out.clear();
    out.extend(bins.iter().map(|&(v, c)| (v, rng.poisson(c as f64))));
}

/// The `p` percentile (0–100) of a sorted slice, nearest rank.
pub fn sorted_pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
