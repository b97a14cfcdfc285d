//! The capacity search as pure logic: which intensity to run next, given the points run so
//! far. `cnsreplay capacity` runs the points; tests drive this with any pass/fail function.
//!
//! 1. **Step**: from the start intensity, multiply by `factor` while points pass; when the
//!    first point fails, divide by `factor` until one passes.
//! 2. **Bisect** the bracket `[lo, hi)` (lo = highest passing intensity below the lowest
//!    failing one, hi = that failing one) at its geometric mean until `hi / lo − 1 ≤
//!    resolution`.
//! 3. **Repeat** lo and hi until each has `repeats` runs.
//!
//! A point with a failed run is undecided, and is run again at once, until most of its
//! `repeats` runs failed (it fails: two runs when both fail) or it has `repeats` runs (it
//! fails when most failed). One noisy run far below the limit
//! therefore cannot end the search there, and a point whose runs disagree says so in the
//! report (`k of n runs passed`). A passing point above the lowest failing one does not raise
//! lo: the answer is the highest rate below every failure. The search also stops after
//! `max_runs` runs, or when the step passes `max_steps` without a bracket.

/// Search settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchOptions {
    /// Start intensity.
    pub start: f64,
    /// Step factor (> 1).
    pub factor: f64,
    /// Stop bisecting when `hi / lo − 1` is at most this.
    pub resolution: f64,
    /// Runs at each final bracketing point.
    pub repeats: u32,
    /// Most runs in all.
    pub max_runs: usize,
    /// Most steps up or down before a bracket is found.
    pub max_steps: u32,
}

/// Where the search stands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    /// Run this intensity (`repeat` = runs already made at it).
    Run {
        /// The intensity.
        intensity: f64,
        /// Runs already made at it.
        repeat: u32,
    },
    /// Done: bracketed to the resolution with the repeats made.
    Done,
    /// Stopped without a full answer, with why.
    Stopped(&'static str),
}

/// The search state: every run's intensity and verdict.
#[derive(Debug, Clone)]
pub struct Search {
    opts: SearchOptions,
    runs: Vec<(f64, bool)>,
}

impl Search {
    /// A new search.
    pub fn new(opts: SearchOptions) -> Self {
        Self {
            opts,
            runs: Vec::new(),
        }
    }

    /// Records a run's verdict.
    pub fn record(&mut self, intensity: f64, pass: bool) {
        self.runs.push((intensity, pass));
    }

    /// Runs made at `x`.
    pub fn count(&self, x: f64) -> u32 {
        self.runs.iter().filter(|r| r.0 == x).count() as u32
    }

    /// Pass (Some(true)), fail (Some(false)) or undecided (None: a run failed and the point
    /// has fewer than `repeats` runs).
    fn status(&self, x: f64) -> Option<bool> {
        let n = self.count(x);
        let fails = self.runs.iter().filter(|r| r.0 == x && !r.1).count() as u32;
        if fails == 0 {
            Some(true)
        } else if fails > self.opts.repeats / 2 {
            // Most of the planned runs failed already.
            Some(false)
        } else if n < self.opts.repeats {
            None
        } else {
            Some(fails * 2 <= n)
        }
    }

    /// The lowest failing intensity, and the highest passing one below it.
    pub fn bracket(&self) -> (Option<f64>, Option<f64>) {
        let hi = self
            .runs
            .iter()
            .map(|r| r.0)
            .filter(|&x| self.status(x) == Some(false))
            .min_by(f64::total_cmp);
        let lo = self
            .runs
            .iter()
            .map(|r| r.0)
            .filter(|&x| hi.is_none_or(|h| x < h) && self.status(x) == Some(true))
            .max_by(f64::total_cmp);
        (lo, hi)
    }

    /// What to do next.
    pub fn next(&self) -> Next {
        let o = &self.opts;
        if self.runs.is_empty() {
            return Next::Run {
                intensity: o.start,
                repeat: 0,
            };
        }
        let run = |x: f64| Next::Run {
            intensity: x,
            repeat: self.count(x),
        };
        let undecided = self
            .runs
            .iter()
            .map(|r| r.0)
            .filter(|&x| self.status(x).is_none())
            .min_by(f64::total_cmp);
        let (lo, hi) = self.bracket();
        let next = match (lo, hi) {
            _ if undecided.is_some() => run(undecided.unwrap_or(o.start)),
            (Some(lo), None) => {
                if lo >= o.start * o.factor.powi(o.max_steps as i32) {
                    return Next::Stopped("the system kept up at every step: no limit found");
                }
                run(lo * o.factor)
            }
            (None, Some(hi)) => {
                if hi <= o.start / o.factor.powi(o.max_steps as i32) {
                    return Next::Stopped("no intensity passed, down to the lowest step");
                }
                run(hi / o.factor)
            }
            (Some(lo), Some(hi)) if hi / lo - 1.0 > o.resolution => run((lo * hi).sqrt()),
            (Some(lo), Some(hi)) => {
                if self.count(lo) < o.repeats {
                    run(lo)
                } else if self.count(hi) < o.repeats {
                    run(hi)
                } else {
                    return Next::Done;
                }
            }
            (None, None) => return Next::Stopped("no runs"),
        };
        if self.runs.len() >= o.max_runs {
            return Next::Stopped("the run budget (--max-runs) is spent");
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> SearchOptions {
        SearchOptions {
            start: 1.0,
            factor: 2.0,
            resolution: 0.02,
            repeats: 3,
            max_runs: 60,
            max_steps: 20,
        }
    }

    /// Drives a search against `pass` and returns (lo, hi, runs, outcome).
    fn drive(o: SearchOptions, pass: impl Fn(f64, u32) -> bool) -> (f64, f64, usize, Next) {
        let mut s = Search::new(o);
        loop {
            match s.next() {
                Next::Run { intensity, repeat } => s.record(intensity, pass(intensity, repeat)),
                end => {
                    let (lo, hi) = s.bracket();
                    return (lo.unwrap_or(0.0), hi.unwrap_or(0.0), s.runs.len(), end);
                }
            }
        }
    }

    #[test]
    fn steps_up_then_bisects_to_the_resolution_with_repeats() {
        let (lo, hi, runs, end) = drive(opts(), |x, _| x < 6.3);
        assert_eq!(end, Next::Done);
        assert!(lo < 6.3 && hi >= 6.3 && hi / lo - 1.0 <= 0.02, "{lo} {hi}");
        // 1, 2, 4, 8 then bisection of [4, 8) to 2 %: 6 halvings of the log-ratio; every
        // failing point confirmed by a second run (8 and about half the bisection points);
        // then the repeats to 3 runs at each end.
        assert!(runs <= 4 + 6 + 4 + 3, "{runs} runs");
    }

    #[test]
    fn steps_down_when_the_start_fails() {
        let (lo, hi, _, end) = drive(opts(), |x, _| x < 0.3);
        assert_eq!(end, Next::Done);
        assert!(lo < 0.3 && hi >= 0.3 && hi / lo - 1.0 <= 0.02, "{lo} {hi}");
    }

    #[test]
    fn failing_repeats_move_the_bracket_down() {
        // The limit is 5, but the second and third runs of any point in [4.8, 5) fail.
        let (lo, hi, _, end) = drive(opts(), |x, rep| x < 4.8 || (x < 5.0 && rep == 0));
        assert_eq!(end, Next::Done);
        assert!(lo < 4.8 && hi / lo - 1.0 <= 0.02, "{lo} {hi}");
    }

    #[test]
    fn one_noisy_failure_far_below_the_limit_does_not_end_the_search() {
        // The first run at 2 fails by noise; its repeats pass, so the search goes on to 6.3.
        let (lo, hi, _, end) = drive(opts(), |x, rep| x < 6.3 && !(x == 2.0 && rep == 0));
        assert_eq!(end, Next::Done);
        assert!(lo < 6.3 && hi >= 6.3 && hi / lo - 1.0 <= 0.02, "{lo} {hi}");
    }

    #[test]
    fn no_limit_and_no_pass_stop_with_a_reason() {
        let o = SearchOptions {
            max_steps: 5,
            ..opts()
        };
        assert!(matches!(drive(o, |_, _| true).3, Next::Stopped(_)));
        assert!(matches!(drive(o, |_, _| false).3, Next::Stopped(_)));
        let o = SearchOptions {
            max_runs: 6,
            ..opts()
        };
        let (_, _, runs, end) = drive(o, |x, _| x < 6.3);
        assert_eq!(runs, 6);
        assert!(matches!(end, Next::Stopped(_)));
    }
}
