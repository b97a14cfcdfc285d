//! `analyze report RUN... -o report.html`: one self-contained HTML page (inline SVG, no
//! scripts, no network) with
//! - `cdf`: CDF of control-op response time per op type and run (the seed paper's Figure 1),
//! - `io-timeline-N`: I/O response time over time with control operations marked (Figure 2;
//!   lines at control-op starts, shaded bands while snapshots run), per run with I/O: p50/p99
//!   of single `io` events per time bucket, and p50/p99/p99.9 per tenant of `io_phase` units
//!   from their interval histograms ([`crate::phase_io`]),
//! - `rate-N`: intended vs achieved rate over time, per run,
//! - `cut-N-ID`: a group snapshot's consistency check (`render/cut.rs`), `cbt-N`: a run's
//!   changed-block listings and their written-set checks (`render/cbt.rs`),
//! - percentile tables per run.
//!
//! Every figure is a `<figure data-figure="NAME" data-points="N">`, N being the points
//! plotted, so a test (or a person) can check that each rendered with data.

use std::fmt::Write;
use std::path::Path;

use crate::Result;
pub use crate::render::figures::{Figure, MAX_MARKS, RATE_GROUP};
use crate::render::figures::{cdf_figure, figure, io_figure, rate_figure, stream_figures};
use crate::render::svg::{self, Plot, esc};
use crate::render::tables::{modify_table, table};
use crate::render::{cbt, cut, headline, replayed};
use crate::stats::modify;
pub use crate::stats::report_data::BUCKETS;
use crate::stats::report_data::ReportData;

/// The report: its figures and the HTML page.
#[derive(Debug, Clone)]
pub struct Report {
    /// Figures, in page order.
    pub figures: Vec<Figure>,
    /// The self-contained HTML page.
    pub html: String,
}

/// Builds the report of one or more runs (refusing runs that are not valid unless
/// `allow_invalid`, see [`crate::Run::check_valid`]; admitted ones show their verdict).
pub fn report(runs: &[&Path], allow_invalid: bool) -> Result<Report> {
    let loaded = runs
        .iter()
        .map(|p| ReportData::load(p, allow_invalid))
        .collect::<Result<Vec<_>>>()?;
    let mut figures = Vec::new();
    let mut absent = Vec::new();
    let cdf = cdf_figure(&loaded);
    if cdf.points > 0 {
        figures.push(cdf);
    } else {
        absent.push("no control operations, so no response-time CDF".to_owned());
    }
    for (i, l) in loaded.iter().enumerate() {
        figures.extend(io_figure(i, l));
        if let Some(p) = replayed::plot(&l.summary) {
            figures.push(figure(
                format!("replayed-{}", i + 1),
                "Recorded vs replayed latency of each streamed volume: the source recording's \
                 (trace observed, solid) and the replay's response (dashed), at min, p50, p90, \
                 p99, p99.9 and max."
                    .into(),
                &p,
            ));
        }
        if l.timeline.intended.iter().any(|&n| n > 0) {
            figures.push(rate_figure(i, l));
        } else {
            absent.push(format!(
                "run {}: no per-event records, so no intended-vs-achieved event rate",
                i + 1
            ));
        }
        figures.extend(stream_figures(i, l)?);
        for (id, caption, plot) in cut::plots(&l.run, i, loaded.len())? {
            figures.push(figure(id, caption, &plot));
        }
        if let Some((id, caption, panels)) = cbt::figure(&l.run, i, loaded.len())? {
            figures.push(Figure {
                id,
                caption,
                points: panels.iter().map(Plot::points).sum(),
                svg: svg::stack(&panels),
            });
        }
    }
    let mut html = String::from(
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>cnsreplay report</title>\
         <style>body{font-family:sans-serif;margin:24px;max-width:1352px;color:#222}figure{margin:16px 0}\
         table{border-collapse:collapse;font-size:12px;margin-bottom:16px}\
         td,th{border:1px solid #bbb;padding:2px 5px;text-align:right}td{white-space:nowrap}\
         th{background:#eee}td:first-child{text-align:left}\
         p code,li code{overflow-wrap:anywhere}.headline{font-size:16px}figcaption,.note,.absent{font-size:12px;color:#444}\
         </style></head><body>\
         <h1>cnsreplay report</h1>",
    );
    let _ = write!(html, "<p>{} run(s): ", loaded.len());
    for (i, l) in loaded.iter().enumerate() {
        let _ = write!(
            html,
            "run {} = <code>{}</code> ",
            i + 1,
            esc(&l.run.path.display().to_string())
        );
        if let Some(note) = l.run.check_valid().err().and_then(|e| e.admitted()) {
            let _ = write!(html, "(<strong>not valid</strong>: {}) ", esc(&note));
        }
    }
    html.push_str("</p><h2>Results</h2>");
    let heads: Vec<_> = loaded
        .iter()
        .map(|l| (&l.headline, l.run.path.display().to_string()))
        .collect();
    let io = headline::html(&heads);
    let any_streams = loaded.iter().any(|l| !l.summary.io_streams.is_empty());
    if io.is_empty() && !any_streams {
        html.push_str("<p>No I/O was measured in these runs.</p>");
    }
    html.push_str(&io);
    for (i, l) in loaded.iter().enumerate() {
        html.push_str(&replayed::html(i, &l.summary));
    }
    html.push_str("<h2>Figures</h2>");
    for a in &absent {
        let _ = write!(html, "<p class=absent>Not drawn: {}.</p>", esc(a));
    }
    for f in &figures {
        html.push_str(&f.html());
    }
    html.push_str("<h2>Percentiles</h2>");
    for (i, l) in loaded.iter().enumerate() {
        html.push_str(&table(i, loaded.len(), &l.summary));
    }
    for (i, l) in loaded.iter().enumerate() {
        match modify::effects(&l.run)? {
            Some(e) => html.push_str(&modify_table(i, &e)),
            None if l.summary.ops.contains_key("modify_volume") => {
                let _ = write!(
                    html,
                    "<p>Run {}: its trace <code>{}</code> is not where the manifest says (or \
                     has changed), so what its <code>modify_volume</code> operations did to the \
                     I/O cannot be shown.</p>",
                    i + 1,
                    esc(&l.summary.trace)
                );
            }
            None => {}
        }
    }
    html.push_str("</body></html>\n");
    Ok(Report { figures, html })
}
