//! Change points in a series: E-divisive means (Matteson & James 2014, "A nonparametric
//! approach for multiple change point analysis of multivariate data", JASA 109), the method
//! behind MongoDB's signal-processing-algorithms, hunter and OpenShift's Orion.
//!
//! For a split of a segment into a left part X (m points) and a right part Y (k points) the
//! statistic is Q = m·k/(m+k) · (2·mean|X−Y| − mean|X−X'| − mean|Y−Y'|): the energy distance
//! between the parts, scaled by their sizes. It is 0 in expectation when both parts come from
//! one distribution and grows with any difference in location (and, with α < 2, in
//! distribution), without assuming normal noise: a single outlier moves it by one distance
//! term, not by its square. The best split of a segment maximizes Q; its significance is a
//! permutation test (the points of every current segment shuffled within it, the largest Q
//! over the segments recomputed; p = (1 + #{Q* ≥ Q}) / (1 + R)). Significant splits are kept
//! and the search recurses (the hierarchical bisection of the paper), strongest first, until
//! no split is significant.
//!
//! Two departures from the paper, both to fit a build series: every part is at least
//! `min_size` points long (a single build cannot be told from an outlier); and the
//! permutation loop stops early once the count of exceedances makes significance impossible
//! (Besag & Clifford's sequential test), so a family of many stationary series costs few
//! permutations each while a significant one gets all R. Distances are |x − y| (α = 1). The
//! sums for every split of a segment are updated point by point: O(n²) per segment.

use crate::stats::hist::Rng;

/// Settings of the search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// A split is kept when its permutation p-value is at most this.
    pub alpha: f64,
    /// Permutations per test (at most).
    pub permutations: u32,
    /// Fewest points on either side of a split.
    pub min_size: usize,
}

/// A change point found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Found {
    /// The index of the first point after the change.
    pub at: usize,
    /// The permutation p-value of the split when it was found.
    pub p: f64,
    /// Its statistic Q.
    pub q: f64,
}

/// The best split `(τ, Q)` of `x[s..e]` (τ: first index of the right part), or None when the
/// segment is too short to split.
fn best_split(x: &[f64], s: usize, e: usize, min_size: usize) -> Option<(usize, f64)> {
    let n = e - s;
    if n < 2 * min_size {
        return None;
    }
    let d = |i: usize, j: usize| (x[i] - x[j]).abs();
    // Start with the left part empty: every pair is within the right part.
    let mut within_r = 0.0;
    for i in s..e {
        for j in i + 1..e {
            within_r += d(i, j);
        }
    }
    let (mut within_l, mut between) = (0.0, 0.0);
    let mut best: Option<(usize, f64)> = None;
    for t in s..e - 1 {
        // Point t moves from the right part to the left.
        let to_left: f64 = (s..t).map(|i| d(i, t)).sum();
        let to_right: f64 = (t + 1..e).map(|j| d(t, j)).sum();
        between += to_right - to_left;
        within_l += to_left;
        within_r -= to_right;
        let (m, k) = ((t + 1 - s) as f64, (e - t - 1) as f64);
        if ((t + 1 - s) < min_size) || ((e - t - 1) < min_size) {
            continue;
        }
        let pairs = |n: f64| n * (n - 1.0) / 2.0;
        let mean_l = if m > 1.0 { within_l / pairs(m) } else { 0.0 };
        let mean_r = if k > 1.0 { within_r / pairs(k) } else { 0.0 };
        let q = m * k / (m + k) * (2.0 * between / (m * k) - mean_l - mean_r);
        if best.is_none_or(|(_, b)| q > b) {
            best = Some((t + 1, q));
        }
    }
    best
}

/// The largest best-split statistic over `segments` of `x`.
fn largest(x: &[f64], segments: &[(usize, usize)], min_size: usize) -> Option<(usize, f64)> {
    segments
        .iter()
        .filter_map(|&(s, e)| best_split(x, s, e, min_size))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// Change points of `x`, in index order. Deterministic for a given `seed`.
pub fn e_divisive(x: &[f64], set: &Settings, seed: u64) -> Vec<Found> {
    let mut rng = Rng::new(seed);
    let mut cuts: Vec<usize> = Vec::new();
    let mut found = Vec::new();
    if x.iter().any(|v| !v.is_finite()) {
        return found;
    }
    let segments = |cuts: &[usize]| -> Vec<(usize, usize)> {
        let mut b = vec![0];
        b.extend(cuts.iter().copied());
        b.push(x.len());
        b.windows(2).map(|w| (w[0], w[1])).collect()
    };
    // Exceedances past which p can no longer reach alpha.
    let limit = (set.alpha * (f64::from(set.permutations) + 1.0)).floor() as u32;
    loop {
        let segs = segments(&cuts);
        let Some((at, q)) = largest(x, &segs, set.min_size) else {
            break;
        };
        if q <= 0.0 {
            break;
        }
        let mut shuffled = x.to_vec();
        let (mut exceed, mut done) = (0u32, 0u32);
        while done < set.permutations {
            for &(s, e) in &segs {
                shuffle(&mut shuffled[s..e], &mut rng);
            }
            done += 1;
            if largest(&shuffled, &segs, set.min_size).is_some_and(|(_, qp)| qp >= q) {
                exceed += 1;
                if exceed >= limit {
                    break;
                }
            }
        }
        let p = (1.0 + f64::from(exceed)) / (1.0 + f64::from(done));
        if exceed >= limit || p > set.alpha {
            break;
        }
        found.push(Found { at, p, q });
        cuts.push(at);
        cuts.sort_unstable();
    }
    found.sort_by_key(|f| f.at);
    found
}

/// Fisher–Yates.
fn shuffle(v: &mut [f64], rng: &mut Rng) {
    for i in (1..v.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SET: Settings = Settings {
        alpha: 0.01,
        permutations: 999,
        min_size: 2,
    };

    #[test]
    fn the_split_statistic_matches_the_formula_computed_directly() {
        let x = [1.0, 2.5, 0.7, 4.0, 4.2, 3.1, 5.0, 0.2];
        let mean_pairs = |a: &[f64]| {
            let (mut s, mut n) = (0.0, 0.0);
            for i in 0..a.len() {
                for j in i + 1..a.len() {
                    s += (a[i] - a[j]).abs();
                    n += 1.0;
                }
            }
            if n > 0.0 { s / n } else { 0.0 }
        };
        for t in 1..=4 {
            // A segment of 2t points with min_size t has one legal split: at t.
            let seg = &x[..2 * t];
            let (at, q) = best_split(seg, 0, 2 * t, t).expect("a split");
            let (l, r) = seg.split_at(t);
            let between = l
                .iter()
                .flat_map(|a| r.iter().map(move |b| (a - b).abs()))
                .sum::<f64>()
                / (t * t) as f64;
            let want =
                (t * t) as f64 / (2 * t) as f64 * (2.0 * between - mean_pairs(l) - mean_pairs(r));
            assert_eq!(at, t);
            assert!((q - want).abs() < 1e-9, "t {t}: {q} vs {want}");
        }
        // Offset inside a longer series: the same value.
        let (_, q0) = best_split(&x[2..6], 0, 4, 2).expect("split");
        let (_, q1) = best_split(&x, 2, 6, 2).expect("split");
        assert!((q0 - q1).abs() < 1e-12);
    }

    #[test]
    fn a_shift_is_found_at_its_index_and_noise_alone_gives_none() {
        let mut hits = 0;
        let mut false_alarms = 0;
        for seed in 0..20u64 {
            let mut rng = Rng::new(1000 + seed);
            let at = 5 + (seed as usize % 10);
            let shifted: Vec<f64> = (0..20)
                .map(|i| 0.05 * rng.normal() + if i >= at { 0.14 } else { 0.0 })
                .collect();
            let f = e_divisive(&shifted, &SET, seed);
            if f.iter().any(|c| c.at.abs_diff(at) <= 1) {
                hits += 1;
            }
            let flat: Vec<f64> = (0..20).map(|_| 0.05 * rng.normal()).collect();
            if !e_divisive(&flat, &SET, seed).is_empty() {
                false_alarms += 1;
            }
        }
        assert!(
            hits >= 18,
            "a 2.8σ shift found at ±1 in {hits} of 20 series"
        );
        assert!(
            false_alarms <= 2,
            "{false_alarms} of 20 flat series had a change"
        );
    }

    #[test]
    fn two_shifts_are_both_found_and_a_short_series_has_none() {
        let x: Vec<f64> = (0..24)
            .map(|i| match i {
                0..8 => 1.0,
                8..16 => 2.0,
                _ => 1.2,
            } + 0.01 * ((i * 7919) % 13) as f64)
            .collect();
        let f = e_divisive(&x, &SET, 7);
        let at: Vec<usize> = f.iter().map(|c| c.at).collect();
        assert_eq!(at, vec![8, 16], "{f:?}");
        assert!(e_divisive(&[1.0, 5.0, 9.0], &SET, 1).is_empty());
        assert!(e_divisive(&[1.0, f64::NAN, 2.0, 3.0, 4.0], &SET, 1).is_empty());
    }
}
