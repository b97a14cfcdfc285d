//! `analyze compare`'s table: per row the sides' values, the change with its interval, the
//! verdict and the runs a conclusive answer needs; then the design, the notes and the
//! manifests' differences.

use std::io::Write;

use analyze::compare::{Metric, Row};
use analyze::{CompareReport, Verdict};
use trace_format::units::fmt_ns;

fn show(m: Metric, v: f64) -> String {
    if m == Metric::ErrorRate {
        format!("{:.2}%", v * 100.0)
    } else {
        fmt_ns(v)
    }
}

fn change(r: &Row, v: f64) -> String {
    if r.metric == Metric::ErrorRate {
        format!("{:+.2}pp", v * 100.0)
    } else if v.is_finite() {
        format!("{:+.1}%", v * 100.0)
    } else {
        "∞".to_owned()
    }
}

pub(super) fn write_compare(r: &CompareReport, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "base: {} run(s) {}\nnew:  {} run(s) {}{}",
        r.base.len(),
        r.base.join(" "),
        r.new.len(),
        r.new.join(" "),
        if r.same_trace {
            ""
        } else {
            "\n(different traces: by op type)"
        },
    )?;
    if !r.manifest_differences.is_empty() {
        writeln!(
            out,
            "WARNING: the runs' manifests differ in more than the seed; unless this is the \
             system under test, the comparison measures it too:"
        )?;
        for d in &r.manifest_differences {
            writeln!(out, "WARNING:   {d}")?;
        }
    }
    writeln!(out, "design: {}", r.design.summary)?;
    writeln!(
        out,
        "latencies: per-run values on the log scale; error rate: counts (Fisher's exact test); \
         {:.0}% intervals; Holm over {} tested row(s) at α = {}; no change = interval within \
         ±threshold",
        (1.0 - r.options.alpha) * 100.0,
        r.tested,
        r.options.alpha
    )?;
    writeln!(
        out,
        "{:<16} {:<10} {:>10} {:>10} {:>9} {:>21} {:>8} {:>9}  verdict",
        "operation", "metric", "base", "new", "change", "interval", "p(Holm)", "threshold"
    )?;
    for row in &r.rows {
        let verdict = match row.verdict {
            Verdict::Regression => "REGRESSION".to_owned(),
            Verdict::Improvement => "improvement".to_owned(),
            Verdict::NoChange => "no change".to_owned(),
            Verdict::Inconclusive => match row.runs_needed {
                Some(n) if r.design.kind == analyze::compare::DesignKind::BatchBaseline => {
                    format!("inconclusive ({n} runs a side, in batches, would decide it)")
                }
                Some(n) => format!("inconclusive ({n} runs a side would decide it)"),
                None if row.df > 0.0 => "inconclusive (more runs cannot decide it)".to_owned(),
                None => "inconclusive".to_owned(),
            },
            Verdict::InsufficientData => format!(
                "insufficient data (< {} events in a run)",
                row.required_events
            ),
        };
        let ci = match (row.ci_low, row.ci_high) {
            (Some(l), Some(h)) => format!("[{}, {}]", change(row, l), change(row, h)),
            _ => "-".to_owned(),
        };
        let p = if row.df > 0.0 && row.verdict != Verdict::InsufficientData {
            format!("{:.3}", row.p_holm)
        } else {
            "-".to_owned()
        };
        writeln!(
            out,
            "{:<16} {:<10} {:>10} {:>10} {:>9} {:>21} {:>8} {:>9}  {verdict}",
            row.op,
            row.metric.name(),
            show(row.metric, row.base),
            show(row.metric, row.new),
            change(row, row.change),
            ci,
            p,
            change(row, row.tolerance).trim_start_matches('+'),
        )?;
    }
    if !r.unmatched.is_empty() {
        writeln!(out, "not in every run: {}", r.unmatched.join(", "))?;
    }
    for n in &r.notes {
        writeln!(out, "note: {n}")?;
    }
    writeln!(
        out,
        "{} regression(s), {} improvement(s), {} inconclusive, {} with insufficient data",
        r.regressions, r.improvements, r.inconclusive, r.insufficient
    )?;
    if let Some(n) = r.runs_needed {
        writeln!(
            out,
            "runs needed: {n} a side would decide every inconclusive row that more runs can \
             decide (80% power at the observed noise)"
        )?;
    }
    Ok(())
}
