//! The probability that a run at a rate passes, fitted over every run of a capacity search,
//! and the rate that passes with a stated probability, with a 95 % interval.
//!
//! Model: `logit P(pass | rate) = a + b · ln(rate)` with `b ≤ 0` (a faster rate never passes
//! more often), fitted by maximum likelihood over the runs' pass/fail outcomes. The rate
//! `x_q` passing with probability `q` solves `a + b · ln(x_q) = logit(q)`. Its interval is the
//! profile-likelihood interval: the set of `x_q` whose best fit (over `b`) is within
//! `χ²₁(0.975) / 2 = 2.51` of the maximum log-likelihood ([`INTERVAL_CUT`]). That is the
//! nominal 97.5 % interval: with the ~25 pass/fail outcomes of a search the profile interval
//! runs short of nominal, and on runs drawn from a known curve with a search's layout (30 runs
//! at 10 rates, `|b|` = 48) the nominal 95 % one (`χ²₁(0.95)/2 = 1.92`) covered `x_0.9` in
//! 92 % and `x_0.5` in 93 % of 400 trials; the 97.5 % one covers them in 94.75 % and 96.5 %
//! (99 %: 97.5 % and 99 %). End to end on the sim, 2 of 12 saturation searches' capacity
//! intervals ended just below the true 400/s (399.1 and 399.9) with the nominal 95 % cutoff
//! (docs/performance-history.md, Capacity search). Unlike a delta-method interval it
//! stays honest when the runs barely overlap (a pass/fail step gives the gap between the
//! highest pass and the lowest fail, widened by what the runs cannot exclude), and it is
//! open (None) on a side the runs do not bound.
//!
//! **How steep the curve may be.** A run of `N` events judges its rate with a relative
//! counting noise of at least `1/√N`, so its pass probability cannot go from 10 % to 90 %
//! over less than about ±1.28 of that noise: `|b| ≤ 2·logit(0.9)·√N / 2.56 ≈ 1.72·√N`
//! ([`max_slope`], `N` the fewest events of a fitted run). Without that cap a search whose runs
//! happened to fall pass-below, fail-above (complete separation, common when the refinement
//! runs pile up within 1 % of the boundary) fitted a step, and its interval shrank to the gap
//! between two runs: 2 of 20 saturation searches of the calibration then reported intervals
//! ([398.3, 398.9]/s and [398.3, 399.8]/s) that excluded the true 400/s (docs/performance-history.md, Capacity search). The
//! curves measured on the sim at `N` = 10 000 have `|b|` ≈ 104 (saturation) and ≈ 48 (an SLO
//! bound), under the cap of 172 (`scripts/calibrate-capacity.sh`, docs/performance-history.md).
//!
//! The profile is evaluated on a grid of `ln(rate)` steps of 0.0002 (0.02 % of the rate),
//! and for each grid value the one-dimensional concave maximisation over `b` is a bisection
//! on its derivative: no step size, no divergence under separation (`|b|` is capped as above,
//! and never above [`MAX_SLOPE`]).

use serde::{Deserialize, Serialize};

/// Largest `|b|` whatever the runs' length: a change of pass probability from 0.1 to 0.9 over
/// 0.04 % of the rate.
pub const MAX_SLOPE: f64 = 1e4;

/// `|b|` per `√events` of the shortest fitted run: `2·logit(0.9) / 2.56` (module docs).
pub const SLOPE_PER_SQRT_EVENT: f64 = 1.716;

/// The steepest pass curve runs of at least `events` events can show (module docs).
pub fn max_slope(events: u64) -> f64 {
    (SLOPE_PER_SQRT_EVENT * (events.max(1) as f64).sqrt()).min(MAX_SLOPE)
}
/// The interval's cutoff below the maximum log-likelihood: `χ²₁(0.975) / 2`, the nominal
/// 97.5 % profile interval, which covers 95 % here (module docs).
pub const INTERVAL_CUT: f64 = 2.511_947_7;
/// Grid step in `ln(rate)`.
const STEP: f64 = 2e-4;
/// How far beyond the runs' range (in `ln(rate)`) the grid reaches.
const MARGIN: f64 = 0.25;

/// The rate that passes with probability `q`, with its 95 % interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RateEstimate {
    /// The probability.
    pub q: f64,
    /// Maximum-likelihood rate passing with probability `q`.
    pub rate: f64,
    /// Lower end of the 95 % profile-likelihood interval (None: the runs do not bound it).
    pub low: Option<f64>,
    /// Upper end (None: the runs do not bound it).
    pub high: Option<f64>,
}

/// Log-likelihood of the runs `(u = ln rate, pass)` at `logit p = lq + b (u − v)`.
fn loglik(runs: &[(f64, bool)], lq: f64, v: f64, b: f64) -> f64 {
    runs.iter()
        .map(|&(u, y)| {
            let eta = lq + b * (u - v);
            // log σ(η) and log(1 − σ(η)), stable for large |η|.
            let log1pexp = |x: f64| if x > 30.0 { x } else { x.exp().ln_1p() };
            if y { -log1pexp(-eta) } else { -log1pexp(eta) }
        })
        .sum()
}

/// The best log-likelihood with `x_q = e^v` fixed: maximised over `b ∈ [−bmax, 0]`.
fn profile(runs: &[(f64, bool)], lq: f64, v: f64, bmax: f64) -> f64 {
    // d/db = Σ (y − p) (u − v): decreasing in b (the log-likelihood is concave).
    let deriv = |b: f64| -> f64 {
        runs.iter()
            .map(|&(u, y)| {
                let d = u - v;
                let p = 1.0 / (1.0 + (-(lq + b * d)).exp());
                (f64::from(u8::from(y)) - p) * d
            })
            .sum()
    };
    let b = if deriv(0.0) >= 0.0 {
        0.0
    } else if deriv(-bmax) <= 0.0 {
        -bmax
    } else {
        let (mut lo, mut hi) = (-bmax, 0.0);
        for _ in 0..80 {
            let mid = 0.5 * (lo + hi);
            if deriv(mid) > 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        0.5 * (lo + hi)
    };
    loglik(runs, lq, v, b)
}

/// The rate passing with probability `q` (0 < q < 1) from runs `(rate, passed)`, the curve's
/// slope at most `max_slope` ([`max_slope`] of the shortest run's events). None when no run
/// passed or none failed (the runs then bound the rate on one side only), or a rate is not
/// positive.
pub fn estimate(runs: &[(f64, bool)], q: f64, max_slope: f64) -> Option<RateEstimate> {
    let bmax = max_slope.clamp(1e-3, MAX_SLOPE);
    if !(q > 0.0 && q < 1.0)
        || runs.iter().any(|r| !(r.0 > 0.0 && r.0.is_finite()))
        || !runs.iter().any(|r| r.1)
        || runs.iter().all(|r| r.1)
    {
        return None;
    }
    let lq = (q / (1.0 - q)).ln();
    let u: Vec<(f64, bool)> = runs.iter().map(|&(x, y)| (x.ln(), y)).collect();
    let umin = u.iter().map(|r| r.0).fold(f64::INFINITY, f64::min) - MARGIN;
    let umax = u.iter().map(|r| r.0).fold(f64::NEG_INFINITY, f64::max) + MARGIN;
    let n = ((umax - umin) / STEP).ceil() as usize + 1;
    let prof: Vec<(f64, f64)> = (0..n)
        .map(|i| {
            let v = umin + i as f64 * STEP;
            (v, profile(&u, lq, v, bmax))
        })
        .collect();
    let &(v_hat, l_max) = prof.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
    // A flat top (separated runs): the middle of the maximal plateau.
    let top: Vec<usize> = (0..n).filter(|&i| prof[i].1 >= l_max - 1e-9).collect();
    let v_hat = if top.len() > 1 {
        0.5 * (prof[top[0]].0 + prof[top[top.len() - 1]].0)
    } else {
        v_hat
    };
    let inside = |i: usize| prof[i].1 >= l_max - INTERVAL_CUT;
    let first = (0..n).find(|&i| inside(i))?;
    let last = (0..n).rev().find(|&i| inside(i))?;
    Some(RateEstimate {
        q,
        rate: v_hat.exp(),
        low: (first > 0).then(|| prof[first].0.exp()),
        high: (last + 1 < n).then(|| prof[last].0.exp()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (splitmix64) for the coverage check.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> f64 {
            (trace_format::splitmix::next(&mut self.0) >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    #[test]
    fn a_clean_step_is_bounded_by_the_gap_between_the_last_pass_and_the_first_fail() {
        let runs: Vec<(f64, bool)> = [90.0, 95.0, 100.0, 105.0, 110.0]
            .iter()
            .flat_map(|&x| [(x, x <= 100.0); 3])
            .collect();
        let e = estimate(&runs, 0.9, MAX_SLOPE).expect("estimate");
        assert!(e.rate > 95.0 && e.rate < 105.0, "{e:?}");
        let (lo, hi) = (e.low.expect("low"), e.high.expect("high"));
        assert!(lo < 100.0 && hi > 100.0 && lo > 85.0 && hi < 115.0, "{e:?}");
    }

    #[test]
    fn one_sided_runs_give_no_estimate() {
        assert_eq!(estimate(&[(1.0, true), (2.0, true)], 0.9, MAX_SLOPE), None);
        assert_eq!(
            estimate(&[(1.0, false), (2.0, false)], 0.9, MAX_SLOPE),
            None
        );
        assert_eq!(estimate(&[(0.0, false), (2.0, true)], 0.9, MAX_SLOPE), None);
    }

    /// The interval's coverage on runs drawn from a known logistic curve, with the design a
    /// capacity search uses (30 runs at 10 rates around the boundary) and the shallowest slope
    /// the sim's calibration measured (`|b|` ≈ 48, an SLO bound): the true `x_0.9` is inside
    /// the 95 % interval (an open end covers its side) in ≥ 93 % of 200 trials (measured: 189, 94.5 %;
    /// with the nominal 95 % cutoff 1.92, 92 % of 400), and the estimate within 5 % in ≥ 90 %
    /// (measured: 196).
    #[test]
    fn the_interval_covers_the_true_rate_in_at_least_93_percent_of_trials() {
        let (x50, b) = (400.0_f64, -48.0_f64);
        let truth = (x50.ln() + (0.9_f64 / 0.1).ln() / b).exp();
        let mut rng = Rng(7);
        let (mut covered, mut close, trials) = (0, 0, 200);
        for _ in 0..trials {
            let mut runs = Vec::new();
            for k in 0..10 {
                let x = 370.0 * 1.0125_f64.powi(k);
                let p = 1.0 / (1.0 + (-(b * (x.ln() - x50.ln()))).exp());
                for _ in 0..3 {
                    runs.push((x, rng.next() < p));
                }
            }
            let Some(e) = estimate(&runs, 0.9, max_slope(10_000)) else {
                continue;
            };
            if e.low.is_none_or(|l| l <= truth) && e.high.is_none_or(|h| h >= truth) {
                covered += 1;
            }
            if (e.rate / truth - 1.0).abs() <= 0.05 {
                close += 1;
            }
        }
        assert!(
            covered * 100 >= trials * 93,
            "the 95 % interval covered x_0.9 = {truth:.1} in {covered} of {trials} trials"
        );
        assert!(
            close * 10 >= trials * 9,
            "within 5 % in {close} of {trials}"
        );
    }

    /// The search that reported [398.3, 398.9]/s against a saturation of 400/s (calibration
    /// seed 3, 10 000 events a run): its runs near the boundary fell pass-below, fail-above.
    /// Uncapped, the fit is a step and the interval the gap between two runs; with the slope
    /// runs of that length can show, the half-pass rate's interval reaches past 400/s.
    #[test]
    fn separated_runs_near_the_boundary_do_not_shrink_the_interval_to_their_gap() {
        let pass = [
            380.7, 391.4, 391.4, 392.7, 392.8, 392.9, 393.7, 396.9, 398.2, 398.4, 398.7,
        ];
        let fail = [
            398.8, 398.9, 399.7, 402.5, 402.5, 404.2, 404.6, 404.7, 404.8, 450.0, 450.0,
        ];
        let runs: Vec<(f64, bool)> = pass
            .iter()
            .map(|&x| (x, true))
            .chain(fail.iter().map(|&x| (x, false)))
            .collect();
        let step = estimate(&runs, 0.5, MAX_SLOPE).expect("estimate");
        assert!(step.high.expect("high") < 400.0, "uncapped: {step:?}");
        let half = estimate(&runs, 0.5, max_slope(10_000)).expect("estimate");
        assert!(half.high.expect("high") > 400.0, "capped: {half:?}");
        let q90 = estimate(&runs, 0.9, max_slope(10_000)).expect("estimate");
        assert!(q90.rate < 396.0 && q90.rate > 385.0, "{q90:?}");
    }
}
