//! The report's headline in HTML: per run the sentence `cnsreplay run` prints, then one table
//! of every run's I/O kinds (the numbers: [`crate::stats::headline`]).

use std::fmt::Write;

use replay::Percentiles;
use trace_format::units::fmt_ns;

use crate::render::svg::esc;
use crate::stats::headline::Headline;

fn pct_cells(p: &Percentiles) -> String {
    if p.count == 0 {
        return "<td>0</td><td colspan=4>–</td>".to_owned();
    }
    let mut s = format!("<td>{}</td>", p.count);
    for v in [p.p50, p.p99, p.p999, p.max] {
        let _ = write!(s, "<td>{}</td>", fmt_ns(v as f64));
    }
    s
}

/// The results section's I/O part: per run the sentence `cnsreplay run` prints (its numbers
/// as `data-` attributes, ns), then one table of every run's kinds. Empty without I/O.
pub(crate) fn html(runs: &[(&Headline, String)]) -> String {
    let mut h = String::new();
    if runs
        .iter()
        .all(|(r, _)| r.kinds.is_empty() && r.run.is_none())
    {
        return h;
    }
    for (i, (r, name)) in runs.iter().enumerate() {
        let Some(s) = &r.run else { continue };
        let (a, b) = (&s.without_snapshot, &s.with_snapshot);
        let ratio = if a.p999 > 0 && b.count > 0 {
            format!(" ({:.2}× with)", b.p999 as f64 / a.p999 as f64)
        } else {
            String::new()
        };
        let _ = write!(
            h,
            "<p class=headline data-run=\"{}\" data-p999-without=\"{}\" data-p999-with=\"{}\" \
             data-ios-without=\"{}\" data-ios-with=\"{}\">Run {} <code>{}</code>: I/O p99.9 \
             <strong>{}</strong> without a snapshot in flight ({} I/Os), <strong>{}</strong> \
             with ({} I/Os){ratio}</p>",
            i + 1,
            a.p999,
            b.p999,
            a.count,
            b.count,
            i + 1,
            esc(name),
            fmt_ns(a.p999 as f64),
            a.count,
            fmt_ns(b.p999 as f64),
            b.count,
        );
    }
    h.push_str(
        "<table class=headline-table><tr><th rowspan=2>run</th><th rowspan=2>I/O kind</th>\
         <th rowspan=2>I/Os</th><th rowspan=2>IOPS</th>\
         <th colspan=5>response without a snapshot in flight</th>\
         <th colspan=5>response with a snapshot in flight</th></tr><tr>",
    );
    for _ in 0..2 {
        h.push_str("<th>I/Os</th><th>p50</th><th>p99</th><th>p99.9</th><th>max</th>");
    }
    h.push_str("</tr>");
    for (i, (r, _)) in runs.iter().enumerate() {
        for k in &r.kinds {
            let _ = write!(
                h,
                "<tr data-run=\"{}\" data-kind=\"{}\" data-iops=\"{:.1}\"><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td>{}{}</tr>",
                i + 1,
                k.kind,
                k.iops,
                i + 1,
                k.kind,
                k.ios,
                fmt_iops(k.iops),
                pct_cells(&k.without),
                pct_cells(&k.with)
            );
        }
    }
    h.push_str("</table>");
    for (i, (r, _)) in runs.iter().enumerate() {
        for n in &r.notes {
            let _ = write!(h, "<p>Run {}: {}</p>", i + 1, esc(n));
        }
    }
    h.push_str(
        "<p class=note>Response = completion − intended instant (coordinated-omission safe). \
         The all-kinds sentence is the run's own figure (<code>summary.json</code> \
         <code>io</code>, as <code>cnsreplay run</code> prints it); the table splits the same \
         I/O by kind by the same rule: an <code>io_phase</code> interval (200 ms) counts as \
         with a snapshot when a snapshot ran at any point of it, a single <code>io</code> \
         event when one ran while it did. IOPS: I/Os over the span they ran in.</p>",
    );
    h
}

fn fmt_iops(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}
