//! How the runs of a comparison were collected, read from when each run started
//! (`manifest.json` `started`), and what that lets the test assume.
//!
//! Runs are ranked by start time over both sides (ties share their mean rank). The sides are
//! **interleaved** when the new runs' mean rank is within a quarter of the run count of the
//! base runs' (A,B,A,B… gives 1; A,A,…,B,B… gives half the count): a change of the environment
//! over time then falls on both sides alike and runs are exchangeable. Otherwise they are
//! **separate batches**, and a batch shift (the cluster, the host, the hour) moves one side as
//! a whole: the variance between runs of one batch does not see it. Inside a side, a new
//! batch starts where the gap to the side's previous run exceeds five times the median gap
//! between consecutive runs (and one second). With several batches on a side (A/A batches for
//! calibration) the variance between batches is estimated and the batches, not the runs, are
//! the units of the test (**batch baseline**); with one batch a side, changes must exceed an
//! explicit batch-shift allowance (`CompareOptions::batch_shift`) before they count.

use serde::{Deserialize, Serialize};

/// Which design applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum DesignKind {
    /// The sides' runs alternate in time (or started together): Welch's t on the runs.
    Interleaved,
    /// Each side in its own batch: a change must exceed the batch-shift allowance.
    SeparateBatches,
    /// Separate, with several batches on a side: the between-batch variance is estimated and
    /// batch means are the units of the test.
    BatchBaseline,
}

impl DesignKind {
    /// Its name in the text output.
    pub fn name(self) -> &'static str {
        match self {
            DesignKind::Interleaved => "interleaved",
            DesignKind::SeparateBatches => "separate batches",
            DesignKind::BatchBaseline => "batch baseline",
        }
    }
}

/// The design of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Design {
    /// Which design applies.
    pub kind: DesignKind,
    /// Batches among the base runs.
    pub base_batches: usize,
    /// Batches among the new runs.
    pub new_batches: usize,
    /// Each base run's batch (0 = the side's earliest), in the order given.
    pub base_batch: Vec<usize>,
    /// Each new run's batch.
    pub new_batch: Vec<usize>,
    /// Each base run's rank by start time over all runs (1-based, ties averaged).
    pub base_rank: Vec<f64>,
    /// Each new run's rank.
    pub new_rank: Vec<f64>,
    /// Mean rank of the new runs minus that of the base runs.
    pub rank_gap: f64,
    /// The batch-shift allowance applied (relative, `separate_batches` only): a change is
    /// tested against ±this, not against 0.
    pub batch_shift: Option<f64>,
    /// What this means for the verdicts, one sentence.
    pub summary: String,
}

/// Ranks (1-based) of `t`, ties averaged.
fn ranks(t: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..t.len()).collect();
    idx.sort_by(|&a, &b| t[a].total_cmp(&t[b]));
    let mut out = vec![0.0; t.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && t[idx[j + 1]] == t[idx[i]] {
            j += 1;
        }
        let r = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            out[k] = r;
        }
        i = j + 1;
    }
    out
}

/// Batches of one side: a run starts a new batch when it started more than `gap` after the
/// side's previous run.
fn batches(t: &[f64], gap: f64) -> (Vec<usize>, usize) {
    let mut idx: Vec<usize> = (0..t.len()).collect();
    idx.sort_by(|&a, &b| t[a].total_cmp(&t[b]));
    let mut out = vec![0; t.len()];
    let mut b = 0;
    for w in 0..idx.len() {
        if w > 0 && t[idx[w]] - t[idx[w - 1]] > gap {
            b += 1;
        }
        out[idx[w]] = b;
    }
    (out, if t.is_empty() { 0 } else { b + 1 })
}

/// The design of runs that started at `base` and `new` (seconds on any one clock).
/// `batch_shift` is the allowance used when each side is one separate batch.
pub fn detect(base: &[f64], new: &[f64], batch_shift: f64) -> Design {
    let all: Vec<f64> = base.iter().chain(new).copied().collect();
    let r = ranks(&all);
    let (base_rank, new_rank) = (r[..base.len()].to_vec(), r[base.len()..].to_vec());
    let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len().max(1) as f64;
    let rank_gap = mean(&new_rank) - mean(&base_rank);
    let mut sorted = all.clone();
    sorted.sort_by(f64::total_cmp);
    let mut gaps: Vec<f64> = sorted.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_by(f64::total_cmp);
    let median = if gaps.is_empty() {
        0.0
    } else {
        gaps[gaps.len() / 2]
    };
    let limit = (5.0 * median).max(1.0);
    let (base_batch, base_batches) = batches(base, limit);
    let (new_batch, new_batches) = batches(new, limit);
    let n = all.len() as f64;
    let kind = if rank_gap.abs() <= n / 4.0 {
        DesignKind::Interleaved
    } else if base_batches + new_batches >= 3 {
        DesignKind::BatchBaseline
    } else {
        DesignKind::SeparateBatches
    };
    let summary = match kind {
        DesignKind::Interleaved => "interleaved: the sides' runs alternate in time, so a change \
             of the environment over time falls on both; runs are the units (Welch's t)"
            .to_owned(),
        DesignKind::SeparateBatches => format!(
            "separate batches: each side was collected in one batch of its own, so a shift \
             between batches cannot be told from a change; a change counts only beyond the \
             batch-shift allowance ±{:.1}% (--batch-shift), the smallest change this design can \
             detect, and each latency row is adjusted for a linear drift over the run order \
             (estimated inside each side; its uncertainty widens the interval); interleave the \
             sides, or add A/A batches of the base (docs/analyze.md)",
            batch_shift * 100.0
        ),
        DesignKind::BatchBaseline => format!(
            "batch baseline: separate batches ({base_batches} base, {new_batches} new); the \
             variance between batch means is estimated and batches are the units of the test"
        ),
    };
    Design {
        kind,
        base_batches,
        new_batches,
        base_batch,
        new_batch,
        base_rank,
        new_rank,
        rank_gap,
        batch_shift: (kind == DesignKind::SeparateBatches).then_some(batch_shift),
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_separate_and_batches_are_told_apart() {
        // A,B,A,B,…: interleaved.
        let a: Vec<f64> = (0..5).map(|i| (2 * i) as f64 * 60.0).collect();
        let b: Vec<f64> = (0..5).map(|i| (2 * i + 1) as f64 * 60.0).collect();
        let d = detect(&a, &b, 0.05);
        assert_eq!((d.kind, d.rank_gap), (DesignKind::Interleaved, 1.0));
        // All base, then all new: separate batches, one each.
        let b: Vec<f64> = (5..10).map(|i| i as f64 * 60.0).collect();
        let d = detect(&a[..3], &b, 0.05);
        assert_eq!(d.kind, DesignKind::SeparateBatches);
        assert_eq!((d.base_batches, d.new_batches), (1, 1));
        assert_eq!(d.batch_shift, Some(0.05));
        // Two base batches a day apart, then a new batch: batch baseline; swapping the sides
        // gives the same design.
        let mut base: Vec<f64> = (0..3).map(|i| i as f64 * 60.0).collect();
        base.extend((0..3).map(|i| 86_400.0 + i as f64 * 60.0));
        let new: Vec<f64> = (0..3).map(|i| 2.0 * 86_400.0 + i as f64 * 60.0).collect();
        let d = detect(&base, &new, 0.05);
        assert_eq!(d.kind, DesignKind::BatchBaseline);
        assert_eq!(d.base_batch, vec![0, 0, 0, 1, 1, 1]);
        let s = detect(&new, &base, 0.05);
        assert_eq!((s.kind, s.rank_gap), (d.kind, -d.rank_gap));
        // Runs that started together: ties, interleaved.
        let d = detect(&[0.0; 3], &[0.0; 3], 0.05);
        assert_eq!((d.kind, d.rank_gap), (DesignKind::Interleaved, 0.0));
    }
}
