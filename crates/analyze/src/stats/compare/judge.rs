//! The verdict of each row under the comparison's design (`design.rs`).
//!
//! Latencies (`x = ln value` per run):
//! - **interleaved**: Welch's t on the runs' `x`;
//! - **separate batches**: the drift-adjusted difference (below), tested against the
//!   batch-shift allowance `m`: the p-value is that of `|d| − m`, the interval
//!   `[d − t·se − m, d + t·se + m]`;
//! - **batch baseline**: batch means are the units: `se² = s²_batch·(1/B_base + 1/B_new)`
//!   with `s²_batch` the pooled variance of batch means around their side's mean (df
//!   `Σ(B − 1)`), never below the runs' own `s²_w·(1/m + 1/k)`.
//!
//! Outside the batch baseline a linear drift over the run order is estimated from the runs
//! inside each side (common slope `β` of `x` on the start-time rank, a side term: analysis of
//! covariance) and taken out of the difference: `d − β·gap` (`gap` the sides' mean rank
//! difference), `se² = s²(1/m + 1/k + gap²/Sxx)`, df `N − 3`. In **separate batches** this
//! is always done: side and drift are confounded there up to what the within-side trends
//! tell, an unadjusted drift biases `d` by `β·gap` (the whole drift across one side), and a
//! pre-test of the slope lets that bias through whenever it misses (with 1 %/run and 15 runs
//! a side it called 10.7 % of identical builds regressions: docs/performance-history.md). The adjusted
//! estimate is unbiased under any linear drift and its interval carries the slope's own
//! uncertainty; the price is `gap²/Sxx ≈ 6/n` in `se²` (≈ 4× the runs at equal power).
//! **Interleaved**, `gap ≈ 1`: a drift barely biases `d`, so it is adjusted only when
//! significant at [`DRIFT_ALPHA`] (then it mainly takes the drift out of the spread).
//!
//! The error rate is compared as counts pooled over each side's runs: Fisher's exact test
//! and Newcombe's score interval of the difference of failed fractions.
//!
//! Verdicts: **regression** when Holm-significant and beyond the threshold; **no change**
//! only when the whole interval lies within ±threshold (equivalence); otherwise
//! **inconclusive**, with the runs per side that would decide it ([`runs_needed`]): 80 %
//! power to find the observed change significant at α / (tested rows), or to put the interval
//! inside the threshold when the change is within it. The noise it plans for is the upper
//! 80 % confidence bound of the unit variance, `s²·df / χ²_{0.2}(df)` (Browne's upper
//! confidence limit method), not `s²` itself: from a 5-run pilot (df 7) `s²` is below the true
//! variance half the time, and a figure planned on it gave 38–39 runs a side in separate
//! batches where 60.7 % and 38.3 % power followed (docs/performance-history.md, compare calibration).
//! The change it plans to detect is the lower 80 % bound of the observed one, `|d| − t·se`
//! (safeguard power analysis, Perugini et al. 2014), never below the threshold: an
//! inconclusive pilot's `|d|` is, by selection, more often above the true change than below
//! (a larger one would have been significant), and in separate batches its `se` is as large
//! as the change itself. Planned on `|d|`, the before/after pilots told under 40 runs (27 %)
//! found the change in 22–25 % of comparisons; over the pilots' own counts 70–73 %
//! (docs/performance-history.md, compare calibration). A
//! change observed where neither verdict can be reached however many runs (between the
//! threshold less the batch-shift allowance, and the threshold) is planned as a change of 0
//! or of the threshold (the same count).
//! In the batch baseline the units are batches: the figure is the batches needed times the
//! runs per batch, to be collected as batches.

use super::design::{Design, DesignKind};
use super::{CompareOptions, Row, Sample, Verdict};
use crate::stats::inference::{
    TTest, chi2_quantile, fisher_exact, mean_var, newcombe, t_quantile, t_two_sided, z_quantile,
};

/// Level at which a drift over the run order is taken as real and adjusted for in the
/// interleaved design (separate batches are always adjusted: module docs).
pub const DRIFT_ALPHA: f64 = 0.2;
/// Power the runs-needed figure aims at.
pub const POWER: f64 = 0.8;
/// Confidence of the upper bound of the noise the runs-needed figure plans for (module docs).
pub const NOISE_CONFIDENCE: f64 = 0.8;
/// Confidence of the lower bound of the observed change the runs-needed figure plans for
/// when it plans to detect it (module docs).
pub const EFFECT_CONFIDENCE: f64 = 0.8;
/// Largest number of runs per side the runs-needed figure reports.
pub const MAX_RUNS: u64 = 1000;

/// One row's estimate of the difference, before the verdict.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Est {
    d: f64,
    se: f64,
    df: f64,
    margin: f64,
    /// Drift adjusted for: slope per rank (log scale) and its standard error (df `df`).
    drift: Option<(f64, f64)>,
    /// Variance of one unit's value (a run's, or a batch mean's), for the runs-needed figure.
    run_var: f64,
    /// Runs per unit when batch means are the units (batch baseline).
    batch_size: Option<f64>,
}

/// Sum of squares around the mean, and the mean.
fn ss(x: &[f64]) -> (f64, f64) {
    let (m, v) = mean_var(x);
    (v * (x.len().max(1) - 1) as f64, m)
}

fn latency_est(xb: &[f64], xn: &[f64], design: &Design) -> Est {
    let (m, k) = (xb.len(), xn.len());
    let t = TTest::welch(xb, xn, 0.0, 0.0);
    let (ssb, _) = ss(xb);
    let (ssn, _) = ss(xn);
    let pooled = if m + k > 2 {
        (ssb + ssn) / (m + k - 2) as f64
    } else {
        0.0
    };
    let mut e = Est {
        d: t.diff,
        se: t.se,
        df: t.df,
        margin: 0.0,
        drift: None,
        run_var: pooled,
        batch_size: None,
    };
    if design.kind == DesignKind::BatchBaseline {
        let side = |x: &[f64], batch: &[usize], nb: usize| {
            let means: Vec<f64> = (0..nb)
                .map(|b| {
                    let v: Vec<f64> = x
                        .iter()
                        .zip(batch)
                        .filter(|(_, bb)| **bb == b)
                        .map(|(v, _)| *v)
                        .collect();
                    v.iter().sum::<f64>() / v.len().max(1) as f64
                })
                .collect();
            let (s, mean) = ss(&means);
            (s, mean, nb)
        };
        let (sb, mb, bb) = side(xb, &design.base_batch, design.base_batches);
        let (sn, mn, bn) = side(xn, &design.new_batch, design.new_batches);
        let df = (bb + bn - 2) as f64;
        let var_b = (sb + sn) / df;
        let batch_se2 = var_b * (1.0 / bb as f64 + 1.0 / bn as f64);
        let run_se2 = pooled * (1.0 / m as f64 + 1.0 / k as f64);
        e.d = mn - mb;
        if batch_se2 >= run_se2 {
            e.se = batch_se2.sqrt();
            e.df = df;
            e.run_var = var_b;
            e.batch_size = Some((m + k) as f64 / (bb + bn) as f64);
        } else {
            e.se = run_se2.sqrt();
            e.df = (m + k - 2) as f64;
        }
        return e;
    }
    if design.kind == DesignKind::SeparateBatches {
        e.margin = design.batch_shift.unwrap_or(0.0).ln_1p();
    }
    // Drift: common slope of x on the start-time rank inside each side.
    if m >= 2 && k >= 2 && m + k >= 5 {
        let moments = |x: &[f64], r: &[f64]| {
            let (mx, mr) = (
                x.iter().sum::<f64>() / x.len() as f64,
                r.iter().sum::<f64>() / r.len() as f64,
            );
            let sxy: f64 = x.iter().zip(r).map(|(a, b)| (a - mx) * (b - mr)).sum();
            let sxx: f64 = r.iter().map(|b| (b - mr) * (b - mr)).sum();
            let syy: f64 = x.iter().map(|a| (a - mx) * (a - mx)).sum();
            (sxy, sxx, syy)
        };
        let (a, b) = (
            moments(xb, &design.base_rank),
            moments(xn, &design.new_rank),
        );
        let (sxy, sxx, syy) = (a.0 + b.0, a.1 + b.1, a.2 + b.2);
        if sxx > 0.0 {
            let beta = sxy / sxx;
            let df = (m + k - 3) as f64;
            let s2 = ((syy - beta * sxy) / df).max(0.0);
            let se_beta = (s2 / sxx).sqrt();
            let p = if se_beta > 0.0 {
                t_two_sided(beta / se_beta, df)
            } else if beta == 0.0 {
                1.0
            } else {
                0.0
            };
            if p < DRIFT_ALPHA || design.kind == DesignKind::SeparateBatches {
                let gap = design.rank_gap;
                e.d = t.diff - beta * gap;
                e.se = (s2 * (1.0 / m as f64 + 1.0 / k as f64 + gap * gap / sxx)).sqrt();
                e.df = df;
                e.drift = Some((beta, se_beta));
                e.run_var = s2;
            }
        }
    }
    e
}

/// p-value and interval (on the tested scale) of an estimate.
fn test(e: &Est, alpha: f64) -> (f64, Option<(f64, f64)>) {
    if e.df <= 0.0 {
        return (1.0, None);
    }
    let excess = (e.d.abs() - e.margin).max(0.0);
    let p = if e.se > 0.0 {
        t_two_sided(excess / e.se, e.df)
    } else if excess > 0.0 {
        0.0
    } else {
        1.0
    };
    let h = t_quantile(alpha, e.df) * e.se;
    (p, Some((e.d - h - e.margin, e.d + h + e.margin)))
}

/// Runs per side that would decide a latency row at the observed noise (see module docs).
fn runs_needed(e: &Est, limit: f64, alpha_detect: f64, alpha: f64, design: &Design) -> Option<u64> {
    if e.run_var <= 0.0 {
        return None;
    }
    let detect = e.d.abs() > limit;
    let room = if detect {
        // The change planned for: the lower EFFECT_CONFIDENCE bound of the observed one,
        // never below the threshold (a change under it is no regression however many runs).
        let lower = if e.df >= 1.0 {
            e.d.abs() - t_quantile(2.0 * (1.0 - EFFECT_CONFIDENCE), e.df) * e.se
        } else {
            e.d.abs()
        };
        lower.max(limit) - e.margin
    } else {
        limit - e.margin - e.d.abs()
    };
    // A change observed between the threshold less the batch-shift allowance and the
    // threshold cannot be put inside the equivalence bounds; the runs that decide a change of
    // 0 or of the threshold (the same count) are planned instead.
    let room = if room <= 0.0 { limit - e.margin } else { room };
    if room <= 0.0 {
        return None;
    }
    // The noise planned for: the upper NOISE_CONFIDENCE bound of the unit variance, not the
    // estimate itself (module docs).
    let var = if e.df >= 1.0 {
        e.run_var * e.df / chi2_quantile(1.0 - NOISE_CONFIDENCE, e.df)
    } else {
        e.run_var
    };
    let a = if detect { alpha_detect } else { alpha };
    let zp = z_quantile(POWER);
    (2..=MAX_RUNS)
        .find(|&n| {
            let nf = n as f64;
            let mut c = 2.0 / nf;
            let mut df = 2.0 * nf - 2.0;
            if e.drift.is_some() {
                // Gap and within-side spread of ranks at n runs a side in this design.
                let gap = if design.kind == DesignKind::Interleaved {
                    1.0
                } else {
                    nf
                };
                c += gap * gap / (2.0 * nf * (nf * nf - 1.0) / 12.0);
                df -= 1.0;
            }
            (t_quantile(a, df) + zp) * (var * c).sqrt() <= room
        })
        // Batch means as units: that many batches a side, in runs.
        .map(|n| match e.batch_size {
            Some(size) => (n as f64 * size).ceil() as u64,
            None => n,
        })
}

/// Judges one row (before Holm): its row with `p`, interval and a provisional verdict.
pub(super) fn test_row(s: &Sample, design: &Design, opts: &CompareOptions) -> Row {
    let required = opts.required_events(s.metric);
    let enough = s.base.iter().chain(&s.new).all(|v| v.events >= required);
    let threshold = opts.thresholds.of(s.metric);
    let mut row = Row {
        op: s.op.clone(),
        metric: s.metric,
        base: 0.0,
        new: 0.0,
        change: 0.0,
        diff: 0.0,
        ci_low: None,
        ci_high: None,
        df: 0.0,
        p: 1.0,
        p_holm: 1.0,
        threshold,
        tolerance: threshold,
        margin: 0.0,
        drift_per_run: None,
        drift_ci_low: None,
        drift_ci_high: None,
        verdict: if enough {
            Verdict::NoChange
        } else {
            Verdict::InsufficientData
        },
        runs_needed: None,
        base_runs: s.base.clone(),
        new_runs: s.new.clone(),
        required_events: required,
        est: None,
        counts: None,
        tool_base: None,
        tool_new: None,
        tool_undecided: false,
    };
    if s.metric.is_latency() {
        let xs = |v: &[super::RunValue]| -> Vec<f64> {
            v.iter().map(|r| r.value.max(1e-300).ln()).collect()
        };
        let (xb, xn) = (xs(&s.base), xs(&s.new));
        let e = latency_est(&xb, &xn, design);
        let (p, ci) = test(&e, opts.alpha);
        let geo = |x: &[f64]| (x.iter().sum::<f64>() / x.len().max(1) as f64).exp();
        row.base = geo(&xb);
        row.new = geo(&xn);
        row.diff = e.d;
        row.change = e.d.exp() - 1.0;
        row.ci_low = ci.map(|c| c.0.exp() - 1.0);
        row.ci_high = ci.map(|c| c.1.exp() - 1.0);
        row.df = e.df;
        row.p = p;
        row.margin = e.margin.exp() - 1.0;
        row.drift_per_run = e.drift.map(|(b, _)| b.exp() - 1.0);
        if let Some((b, se)) = e.drift {
            let h = t_quantile(opts.alpha, e.df) * se;
            row.drift_ci_low = Some((b - h).exp() - 1.0);
            row.drift_ci_high = Some((b + h).exp() - 1.0);
        }
        row.est = Some(e);
    } else {
        let count = |v: &[super::RunValue]| {
            v.iter().fold((0u64, 0u64), |(f, n), r| {
                (f + (r.value * r.events as f64).round() as u64, n + r.events)
            })
        };
        let ((fb, nb), (fnew, nn)) = (count(&s.base), count(&s.new));
        let (d, lo, hi) = newcombe(fb, nb, fnew, nn, opts.alpha);
        let frac = |f: u64, n: u64| f as f64 / n.max(1) as f64;
        let (pb, pn) = (frac(fb, nb), frac(fnew, nn));
        row.base = pb;
        row.new = pn;
        row.diff = d;
        row.change = d;
        row.ci_low = Some(lo);
        row.ci_high = Some(hi);
        // Counts carry their own variance, so one run a side is tested too; `df` holds the
        // events compared (any positive value marks the row as tested).
        row.df = (nb + nn) as f64;
        row.p = fisher_exact(fb, nb, fnew, nn);
        row.tolerance = threshold.max(opts.thresholds.error_rate_rel * pb.min(pn));
        row.counts = Some((fb, nb, fnew, nn));
    }
    row
}

/// The verdict of a tested row after Holm (`tested` rows in the family).
pub(super) fn verdict(row: &mut Row, design: &Design, opts: &CompareOptions, tested: usize) {
    if row.verdict == Verdict::InsufficientData {
        return;
    }
    let latency = row.metric.is_latency();
    let limit = if latency {
        row.tolerance.ln_1p()
    } else {
        row.tolerance
    };
    let material = row.diff.abs() > limit;
    let (lo, hi) = match (row.ci_low, row.ci_high) {
        (Some(l), Some(h)) if latency => (l.ln_1p(), h.ln_1p()),
        (Some(l), Some(h)) => (l, h),
        _ => (f64::NEG_INFINITY, f64::INFINITY),
    };
    row.verdict = if row.df <= 0.0 {
        Verdict::Inconclusive
    } else if row.p_holm < opts.alpha && material {
        if row.diff > 0.0 {
            Verdict::Regression
        } else {
            Verdict::Improvement
        }
    } else if lo > -limit && hi < limit {
        Verdict::NoChange
    } else {
        Verdict::Inconclusive
    };
    if row.verdict != Verdict::Inconclusive {
        return;
    }
    let alpha_detect = opts.alpha / tested.max(1) as f64;
    row.runs_needed = match (row.est, row.counts) {
        (Some(e), _) => runs_needed(&e, limit, alpha_detect, opts.alpha, design),
        (None, Some((fb, nb, fnew, nn))) => {
            let runs = row.base_runs.len().max(row.new_runs.len()) as f64;
            let per_run = (nb + nn) as f64 / (row.base_runs.len() + row.new_runs.len()) as f64;
            let pbar = (fb + fnew + 2) as f64 / (nb + nn + 4) as f64;
            let detect = row.diff.abs() > limit;
            let room = if detect {
                row.diff.abs()
            } else {
                limit - row.diff.abs()
            };
            let a = if detect { alpha_detect } else { opts.alpha };
            let z = z_quantile(1.0 - a / 2.0) + z_quantile(POWER);
            // Events a side for (z_α + z_power)·√(2p̄(1 − p̄)/N) ≤ room.
            let events = 2.0 * pbar * (1.0 - pbar) * (z / room).powi(2);
            let n = (events / per_run.max(1.0)).ceil().max(runs + 1.0);
            (room > 0.0 && n <= MAX_RUNS as f64).then_some(n as u64)
        }
        _ => None,
    };
}

/// The same runs on both sides (`compare r0 r0`): every difference is exactly 0, with no
/// sampling in it, so every row is `no change` — however few runs or events (the same
/// figures on both sides, not two estimates of one), and whatever their tool bounds (the same
/// delay on both sides cancels). Notes about variance and event counts are dropped and the
/// reason said.
pub(super) fn identical(r: &mut super::CompareReport) {
    for row in &mut r.rows {
        row.verdict = Verdict::NoChange;
        row.ci_low = Some(0.0);
        row.ci_high = Some(0.0);
        row.runs_needed = None;
    }
    r.recount();
    // Every row decided (exactly): the gate's "nothing judged" does not apply.
    r.tested = r.rows.len();
    r.notes
        .retain(|n| !n.starts_with("one run per side") && !n.starts_with("rows with insufficient"));
    r.notes.push(
        "the same runs on both sides: every difference is exactly 0 (no change), nothing to \
         test"
            .to_owned(),
    );
}
