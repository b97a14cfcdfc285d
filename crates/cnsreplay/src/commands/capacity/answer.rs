//! The sentence a capacity search answers with (`capacity.json` `answer`, the last line of
//! the table): words and numbers a person reads, with nothing left empty (`()`) when a part
//! has no values.

/// What the sentence is made of.
pub(super) struct Parts<'a> {
    /// The SLOs, or `throughput only`.
    pub slo_text: &'a str,
    /// The pass probability the fitted rate is reported at.
    pub pass_probability: f64,
    /// Per op type: the fitted rate and its interval, in words (empty: no fit).
    pub fitted: &'a [String],
    /// Runs behind the fit.
    pub fit_runs: usize,
    /// Per op type: the sustained rate (and the failing one above it), in words.
    pub per_op: &'a [String],
    /// Highest sustained intensity.
    pub lo: Option<f64>,
    /// Lowest failing intensity.
    pub hi: Option<f64>,
    /// Runs that passed at `lo`, of how many.
    pub lo_passed: (usize, usize),
    /// `hi / lo − 1`.
    pub resolution: Option<f64>,
}

/// The sentence, without the limits and the stop reason the caller appends.
pub(super) fn sentence(p: &Parts<'_>) -> String {
    let x = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), intensity);
    let ops = p.per_op.join(", ");
    match (p.lo, p.hi) {
        _ if !p.fitted.is_empty() => format!(
            "Sustainable rate ({}), passing {:.0} % of runs: {} — logistic fit over {} runs; \
             bracket between intensity {} and {}",
            p.slo_text,
            p.pass_probability * 100.0,
            p.fitted.join(", "),
            p.fit_runs,
            x(p.lo),
            x(p.hi),
        ),
        (Some(l), Some(h)) => format!(
            "Maximum sustainable rate ({}): {}between intensity {} ({} of {} runs passed) and \
             {}, resolution {:.1} %",
            p.slo_text,
            if ops.is_empty() {
                String::new()
            } else {
                format!("{ops} — ")
            },
            intensity(l),
            p.lo_passed.0,
            p.lo_passed.1,
            intensity(h),
            p.resolution.unwrap_or(0.0) * 100.0
        ),
        (Some(l), None) => format!(
            "Sustained up to intensity {}{}; no limit found above it",
            intensity(l),
            if ops.is_empty() {
                String::new()
            } else {
                format!(" ({ops})")
            },
        ),
        (None, Some(h)) => format!(
            "No intensity down to {} passed ({})",
            intensity(h),
            p.slo_text
        ),
        (None, None) => "No point was run".to_owned(),
    }
}

/// An intensity as a person writes it: `64`, `1.8`, `0.0625` (at most 4 decimals, no
/// trailing zeros).
pub(crate) fn intensity(v: f64) -> String {
    let s = format!("{v:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-" {
        "0".to_owned()
    } else {
        s.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts<'a>(per_op: &'a [String], lo: Option<f64>, hi: Option<f64>) -> Parts<'a> {
        Parts {
            slo_text: "attach p99 ≤ 2s",
            pass_probability: 0.9,
            fitted: &[],
            fit_runs: 0,
            per_op,
            lo,
            hi,
            lo_passed: (2, 2),
            resolution: hi.zip(lo).map(|(h, l)| h / l - 1.0),
        }
    }

    /// `Sustained up to intensity 64.0000 ()` was what a search without per-op rates said.
    #[test]
    fn intensities_read_as_numbers_and_nothing_is_left_in_empty_parentheses() {
        assert_eq!(intensity(64.0), "64");
        assert_eq!(intensity(1.8), "1.8");
        assert_eq!(intensity(0.0625), "0.0625");
        assert_eq!(intensity(2.123_456), "2.1235");
        assert_eq!(
            sentence(&parts(&[], Some(64.0), None)),
            "Sustained up to intensity 64; no limit found above it"
        );
        let ops = ["attach ≥ 12.50/s".to_owned()];
        assert_eq!(
            sentence(&parts(&ops, Some(64.0), None)),
            "Sustained up to intensity 64 (attach ≥ 12.50/s); no limit found above it"
        );
        assert_eq!(
            sentence(&parts(&[], Some(1.6), Some(2.0))),
            "Maximum sustainable rate (attach p99 ≤ 2s): between intensity 1.6 (2 of 2 runs \
             passed) and 2, resolution 25.0 %"
        );
        assert!(!sentence(&parts(&[], None, Some(0.5))).contains("()"));
    }
}
