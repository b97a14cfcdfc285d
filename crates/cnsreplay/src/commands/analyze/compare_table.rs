//! `analyze compare`'s table: per row the sides' values, the change with its interval, the
//! verdict and the runs a conclusive answer needs; then the design, the notes and the
//! manifests' differences.

use std::io::Write;

use analyze::gate::{compare_interval, compare_verdict, fmt_change, fmt_value};
use analyze::{CompareReport, Verdict};

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
    if !r.label_differences.is_empty() {
        writeln!(out, "labels: {}", r.label_differences.join("; "))?;
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
        let verdict = compare_verdict(r, row);
        let ci = compare_interval(row);
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
            fmt_value(row.metric, row.base),
            fmt_value(row.metric, row.new),
            fmt_change(row.metric, row.change),
            ci,
            p,
            fmt_change(row.metric, row.tolerance).trim_start_matches('+'),
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
