//! The seeded random stream.
//!
//! Every random draw comes from PCG-64 MCG (`pcg64_fast`, [`rand_pcg::Pcg64Mcg`]), whose output
//! sequence is fixed by its algorithm, not by a library version. A model and seed give several
//! independent streams (arrivals, lifetimes, placement, …): stream `s` of seed `S` starts at
//! the 128-bit state `splitmix64(S ^ s·φ) << 64 | splitmix64(S + s)`, so adding draws to one
//! stream never shifts another. Uniforms are the top 53 bits of a draw, offset by half a step
//! so they are never exactly 0 or 1; normals are the inverse normal CDF of one uniform. Same
//! model + same seed ⇒ the same draws ⇒ a byte-identical trace.

use rand_core::Rng as _;
use rand_pcg::Pcg64Mcg;

use special::norm_quantile;
use trace_format::splitmix::{GAMMA, splitmix64};

/// The streams of one generation run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum Stream {
    /// Arrival times.
    Arrivals = 1,
    /// Container lifetimes.
    Lifetimes = 2,
    /// Hosts, tenants, volumes and their attributes.
    Placement = 3,
    /// Snapshot policies, restores and clones.
    Snapshots = 4,
    /// Resizes, aborts and reschedules.
    Failures = 5,
    /// The initial (steady-state) population.
    Initial = 6,
    /// Free for callers (tests, fitting).
    User = 7,
}

/// A seeded random stream.
#[derive(Debug, Clone)]
pub struct SynthRng(Pcg64Mcg);

impl SynthRng {
    /// Stream `stream` of `seed`.
    pub fn new(seed: u64, stream: Stream) -> Self {
        let s = stream as u64;
        let hi = splitmix64(seed ^ s.wrapping_mul(GAMMA));
        let lo = splitmix64(seed.wrapping_add(s));
        Self(Pcg64Mcg::new((u128::from(hi) << 64) | u128::from(lo)))
    }

    /// The next raw 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A uniform draw in the open interval (0, 1).
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
    }

    /// A standard normal draw (inverse CDF of one uniform).
    pub fn normal(&mut self) -> f64 {
        norm_quantile(self.uniform())
    }

    /// An exponential draw with mean 1.
    pub fn exp1(&mut self) -> f64 {
        -self.uniform().ln()
    }

    /// A uniform index below `n` (`n > 0`), without modulo bias worth measuring (n ≪ 2⁶⁴).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p >= 1.0 || (p > 0.0 && self.uniform() < p)
    }

    /// A Gamma(shape, 1) draw: Marsaglia–Tsang, with the `U^{1/k}` boost below shape 1.
    pub fn gamma(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            let u = self.uniform();
            return self.gamma(shape + 1.0) * u.powf(1.0 / shape);
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = 1.0 + c * x;
            if v <= 0.0 {
                continue;
            }
            let v = v * v * v;
            let u = self.uniform();
            if u < 1.0 - 0.0331 * x * x * x * x || u.ln() < 0.5 * x * x + d * (1.0 - v + v.ln()) {
                return d * v;
            }
        }
    }

    /// A Poisson draw with mean `mean` (inversion for small means, normal approximation above
    /// 500, where the relative error is far below the sampling noise).
    pub fn poisson(&mut self, mean: f64) -> u64 {
        if mean.is_nan() || mean <= 0.0 {
            return 0;
        }
        if mean > 500.0 {
            return (mean + mean.sqrt() * self.normal()).round().max(0.0) as u64;
        }
        let mut k = 0u64;
        let mut p = (-mean).exp();
        let mut s = p;
        let u = self.uniform();
        while u > s && k < 10_000 {
            k += 1;
            p *= mean / k as f64;
            s += p;
        }
        k
    }
}
